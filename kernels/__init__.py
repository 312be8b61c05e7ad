"""Delta-rule kernels: one public entry point per op, one signature for every form.

    chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, backend="auto") -> (o, final_state)
    chunk_gated_delta_product(q, k, v, g, beta, num_householder, ..., backend="auto") -> (o, final_state)
    short_conv_silu(x, weight, backend="torch", norm_group=0) -> SiLU(causal depthwise conv of x) [B, T, C],
                    then each group of norm_group channels L2-normalized        x [B, T, C], weight [C, K]
    linear_cross_entropy(x, weight, targets, mult, backend="torch") -> mean cross-entropy of mult · x Wᵀ
                    (the readout and the token loss)                            x [..., D], weight [V, D]

Layout is fla's: q, k [B, T, H, K], v [B, T, H, V], g (log-space decay, or None for plain DeltaNet) and
beta [B, T, H]; state [B, H, K, V] in fp32. DeltaProduct takes k, v, beta with T·n_h steps.

Backends: "recurrent" (kernels.reference, token by token), "torch" (kernels.chunk_torch, chunked WY/UT),
"triton" (kernels.triton, when present), "auto" (the fastest available for the tensors' device).
"""
from __future__ import annotations

import sys
from collections.abc import Callable

from torch import Tensor

from .chunk_torch import chunk_gated_delta_rule_torch
from .delta_product import gated_delta_product
from .reference import l2_normalize, recurrent_gated_delta_rule
from .reference import linear_cross_entropy as linear_cross_entropy_torch
from .reference import short_conv_silu as short_conv_silu_torch

BACKENDS = ("auto", "triton", "torch", "recurrent")
CONV_BACKENDS = ("torch", "triton")
LOSS_BACKENDS = ("torch", "triton")


def _triton_rule() -> Callable[..., tuple[Tensor, Tensor | None]] | None:
    try:
        from .triton import chunk_gated_delta_rule_triton
    except ImportError:
        return None
    return chunk_gated_delta_rule_triton


def _triton_product() -> Callable[..., tuple[Tensor, Tensor | None]]:
    from .triton import chunk_gated_delta_product_triton
    return chunk_gated_delta_product_triton


def resolve_backend(backend: str, device_type: str) -> Callable[..., tuple[Tensor, Tensor | None]]:
    """The gated-delta-rule implementation that `backend` names for tensors on `device_type`."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "recurrent":
        return recurrent_gated_delta_rule
    if backend == "torch" or (backend == "auto" and device_type != "cuda"):
        return chunk_gated_delta_rule_torch
    triton_rule = _triton_rule()
    if backend == "triton":
        if triton_rule is None:
            raise ValueError("backend='triton' requested but kernels.triton is not available")
        return triton_rule
    return triton_rule if triton_rule is not None else chunk_gated_delta_rule_torch


def chunk_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor | None,
    beta: Tensor,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    backend: str = "auto",
) -> tuple[Tensor, Tensor | None]:
    """Gated delta rule; see the module docstring for shapes. Returns o [B, T, H, V] and the state or None."""
    rule = resolve_backend(backend, q.device.type)
    return rule(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def chunk_gated_delta_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor | None,
    beta: Tensor,
    num_householder: int,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    backend: str = "auto",
) -> tuple[Tensor, Tensor | None]:
    """Gated DeltaProduct_{n_h}: q [B, T, H, K]; k [B, T·n_h, H, K]; v [B, T·n_h, H, V]; g [B, T, H] or None;
    beta [B, T·n_h, H]. Returns o [B, T, H, V] and the state after the last micro-step, or None. The Triton backend
    runs the interleaved sequence in its kernels (no interleaved copies); the others through delta_product."""
    rule = resolve_backend(backend, q.device.type)
    if rule is _triton_rule():
        return _triton_product()(q, k, v, g, beta, num_householder, scale=scale, initial_state=initial_state,
                                 output_final_state=output_final_state,
                                 use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    return gated_delta_product(rule, q, k, v, g, beta, num_householder, scale=scale, initial_state=initial_state,
                               output_final_state=output_final_state,
                               use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def short_conv_silu(x: Tensor, weight: Tensor, backend: str = "torch", norm_group: int = 0) -> Tensor:
    """SiLU(causal depthwise convolution over time): x [B, T, C], weight [C, K] -> [B, T, C] in x's dtype;
    norm_group > 0: then each group of that many channels L2-normalized (l2_normalize; q's and k's heads).
    backend "torch": K shifted products that torch.compile fuses with the norm and what follows (the models'
    default); "triton": one kernel forward, two backward (triton/short_conv.py; ModelConfig(conv_backend="triton"),
    a 10% faster training step on an H200: benchmarks/short-conv.md)."""
    if backend == "torch":
        y = short_conv_silu_torch(x, weight)
        return l2_normalize(y.unflatten(-1, (-1, norm_group))).flatten(-2) if norm_group else y
    if backend == "triton":
        from .triton.short_conv import short_conv_silu_triton
        return short_conv_silu_triton(x, weight, norm_group)
    raise ValueError(f"unknown short-convolution backend {backend!r}; choose one of {', '.join(CONV_BACKENDS)}")


def linear_cross_entropy(x: Tensor, weight: Tensor, targets: Tensor, mult: Tensor, backend: str = "torch") -> Tensor:
    """Mean cross-entropy (0-d fp32) of the logits mult · x Wᵀ against targets (-100: not counted): x [..., D],
    weight [V, D], targets [...] int64, mult 0-d. backend "torch": the logits, then F.cross_entropy (torch.compile
    fuses mult into it); "triton": the GEMM, then one kernel that computes the loss and its gradient together
    (triton/cross_entropy.py; ModelConfig(loss_backend="triton"))."""
    if backend == "torch":
        return linear_cross_entropy_torch(x, weight, targets, mult)
    if backend == "triton":
        from .triton.cross_entropy import linear_cross_entropy_triton
        return linear_cross_entropy_triton(x, weight, targets, mult)
    raise ValueError(f"unknown loss backend {backend!r}; choose one of {', '.join(LOSS_BACKENDS)}")


def launch_configs() -> str | None:
    """The Triton launch config each pass took in this process so far (triton.tuning.chosen), or None where no
    Triton kernel has been launched (its launcher never imported: nothing is imported here to ask)."""
    tuning = sys.modules.get(f"{__name__}.triton.tuning")
    if tuning is None:
        return None
    return tuning.chosen() or None


__all__ = ["BACKENDS", "CONV_BACKENDS", "LOSS_BACKENDS", "chunk_gated_delta_rule", "chunk_gated_delta_product",
           "recurrent_gated_delta_rule", "l2_normalize", "launch_configs", "linear_cross_entropy", "resolve_backend",
           "short_conv_silu"]
