"""Other libraries' delta-rule models on the CPU: their GPU-only kernels swapped for PyTorch references.

flash-linear-attention 0.6 runs its GatedDeltaNet / GatedDeltaProduct layers through Triton kernels (the gated delta
rule, the short convolution, the gated output RMSNorm, SwiGLU) that need a GPU; transformers' Qwen3-Next calls fla's
kernel when fla is installed. Inside `reference_ops()` those calls go to PyTorch instead: the delta rule to
deltamup.kernels' chunked PyTorch form (tests/test_kernels.py checks it against the step-by-step recurrence), the
rest to the few lines each kernel computes, and Qwen3-Next to transformers' own PyTorch fallback. The models' modules,
parameters and hooks are untouched, so role maps, multipliers and coordinate-check probes act on the real model.

    with reference_ops():
        logits = fla_model(tokens).logits       # on the CPU

Build fla configs with fuse_norm=False and fuse_cross_entropy=False, fuse_linear_cross_entropy=False: the fused
residual norm and the fused losses have no reference here. On a GPU nothing needs this.
"""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor

from deltamup import kernels

ACTIVATIONS = {None: lambda x: x, "silu": F.silu, "swish": F.silu, "sigmoid": torch.sigmoid}


def gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float | None = None,
                     initial_state: Tensor | None = None, output_final_state: bool = False,
                     use_qk_l2norm_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
                     allow_neg_eigval: bool = False, use_gate_in_kernel: bool = False, A_log: Tensor | None = None,
                     dt_bias: Tensor | None = None, state_v_first: bool = False, cu_seqlens: Tensor | None = None,
                     **_unused) -> tuple[Tensor, Tensor | None]:
    """fla.ops.gated_delta_rule's chunk_gated_delta_rule / fused_recurrent_gated_delta_rule, in PyTorch.
    q, k [B, T, H, K], v [B, T, H, V], g and beta [B, T, H] -> o [B, T, H, V] (and the final state)."""
    if cu_seqlens is not None:
        raise ValueError("reference_ops: packed sequences (cu_seqlens) are not supported")
    if use_gate_in_kernel:
        g = -A_log.float().exp() * F.softplus(g.float() + (0 if dt_bias is None else dt_bias.float()))
    if use_beta_sigmoid_in_kernel:
        beta = beta.float().sigmoid() * (2.0 if allow_neg_eigval else 1.0)
    o, state = kernels.chunk_gated_delta_rule(q, k, v, g, beta.to(q.dtype), scale=scale, initial_state=initial_state,
                                              output_final_state=output_final_state,
                                              use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, backend="torch")
    return o, (state.transpose(-1, -2) if state is not None and state_v_first else state)


def gated_delta_product(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, num_householder: int,
                        scale: float | None = None, initial_state: Tensor | None = None,
                        output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                        cu_seqlens: Tensor | None = None, **_unused) -> tuple[Tensor, Tensor | None]:
    """fla.ops.gated_delta_product's chunk_gated_delta_product, in PyTorch (k, v, beta carry T·n_h steps)."""
    if cu_seqlens is not None:
        raise ValueError("reference_ops: packed sequences (cu_seqlens) are not supported")
    return kernels.chunk_gated_delta_product(q, k, v, g, beta.to(q.dtype), num_householder=num_householder,
                                             scale=scale, initial_state=initial_state,
                                             output_final_state=output_final_state,
                                             use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, backend="torch")


def causal_conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, residual: Tensor | None = None,
                  initial_state: Tensor | None = None, output_final_state: bool = False,
                  activation: str | None = None, cu_seqlens: Tensor | None = None, **_unused
                  ) -> tuple[Tensor, Tensor | None]:
    """fla.modules.causal_conv1d's depthwise causal convolution: x [B, T, D], weight [D, W] -> y [B, T, D] and, if
    asked, the cache fla keeps (the last W inputs, [B, D, W])."""
    if initial_state is not None or cu_seqlens is not None:
        raise ValueError("reference_ops: a short-convolution cache to start from and packed sequences are not "
                         "supported")
    T, W = x.shape[1], weight.shape[-1]
    padded = F.pad(x.transpose(1, 2), (W - 1, 0))
    y = F.conv1d(padded, weight.unsqueeze(1).to(x.dtype), bias, groups=x.shape[-1])
    y = ACTIVATIONS[activation](y[..., :T].transpose(1, 2))
    final = padded[..., -W:] if output_final_state else None
    return (y if residual is None else y + residual), final


def rms_norm_gated(x: Tensor, g: Tensor, weight: Tensor | None, bias: Tensor | None = None,
                   activation: str = "swish", residual: Tensor | None = None, prenorm: bool = False,
                   residual_in_fp32: bool = False, eps: float = 1e-6, **_unused) -> Tensor:
    """fla's FusedRMSNormGated: RMSNorm(x) ⊙ weight (+ bias) ⊙ act(g), over the last dimension, in fp32."""
    if residual is not None or prenorm:
        raise ValueError("reference_ops: the gated norm's residual path is not supported")
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    if bias is not None:
        y = y + bias.float()
    return (y * ACTIVATIONS[activation](g.float())).to(x.dtype)


def swiglu(x: Tensor, y: Tensor) -> Tensor:
    return F.silu(x) * y


# (module, attribute, replacement): every place the models above look their kernels up at call time
FLA_PATCHES = (
    ("fla.layers.gated_deltanet", "chunk_gated_delta_rule", gated_delta_rule),
    ("fla.layers.gated_deltanet", "fused_recurrent_gated_delta_rule", gated_delta_rule),
    ("fla.layers.gated_deltanet", "causal_conv1d", causal_conv1d),
    ("fla.layers.gated_deltaproduct", "chunk_gated_delta_product", gated_delta_product),
    ("fla.layers.gated_deltaproduct", "fused_recurrent_gated_delta_rule", gated_delta_rule),
    ("fla.modules.causal_conv1d.ops", "causal_conv1d", causal_conv1d),
    ("fla.modules.norm.fused_norm_gate", "rms_norm_gated", rms_norm_gated),
    ("fla.modules.mlp", "swiglu", swiglu),
)
QWEN3_NEXT = "transformers.models.qwen3_next.modeling_qwen3_next"


def _installed(module: str) -> object | None:
    try:  # fla and transformers are optional: only what is installed is patched
        return importlib.import_module(module)
    except ImportError:
        return None


def _torch_function(wrapper: Callable) -> Callable:
    """The PyTorch function under transformers' hub-kernel wrapper: a functools.wraps chain, which transformers ≥ 5.25
    (with the `kernels` package) puts inside a module whose forward calls it, as the free variable `func`."""
    if isinstance(wrapper, torch.nn.Module):
        forward = type(wrapper).forward
        wrapper = forward.__closure__[forward.__code__.co_freevars.index("func")].cell_contents
    return inspect.unwrap(wrapper)


@contextmanager
def reference_ops() -> Iterator[None]:
    """While active, fla's and Qwen3-Next's delta-rule layers run on PyTorch references (see the module docstring);
    the layers' prefill paths only (no decoding cache, no packed sequences)."""
    patches = [(m, name, new) for module, name, new in FLA_PATCHES if (m := _installed(module)) is not None]
    qwen = _installed(QWEN3_NEXT)
    if qwen is not None:  # transformers' own PyTorch fallback, under the hub-kernel wrapper that picked fla's
        patches += [(qwen, name, _torch_function(getattr(qwen, name)))
                    for name in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")]
    saved = [(m, name, getattr(m, name)) for m, name, _ in patches]
    try:
        for m, name, new in patches:
            setattr(m, name, new)
        yield
    finally:
        for m, name, old in saved:
            setattr(m, name, old)
