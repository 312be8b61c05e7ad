"""Gated DeltaProduct_{n_h} by the interleaving trick (deltaproduct.md): n_h Householder micro-steps per token are
a gated delta rule over a sequence n_h times longer, with the token's gate on its first micro-step, log-gate 0 on
the others, and the output read at its last micro-step.
"""
from __future__ import annotations

from collections.abc import Callable

from torch import Tensor


def check_micro_steps(q: Tensor, k: Tensor, num_householder: int) -> None:
    """Raise unless k has num_householder ≥ 1 micro-steps for each of q's tokens."""
    T = q.shape[1]
    if num_householder < 1 or k.shape[1] != T * num_householder:
        raise ValueError(f"k has {k.shape[1]} steps; expected T·num_householder = {T} · {num_householder}")


def interleave_delta_product(
    q: Tensor, k: Tensor, g: Tensor | None, num_householder: int
) -> tuple[Tensor, Tensor | None]:
    """q [B, T, H, K] -> [B, T·n_h, H, K] (q at each token's last micro-step, 0 elsewhere);
    g [B, T, H] -> [B, T·n_h, H] (g at each token's first micro-step, 0 elsewhere). k must be [B, T·n_h, H, K]."""
    B, T, H, K = q.shape
    n = num_householder
    check_micro_steps(q, k, n)
    q_long = q.new_zeros(B, T, n, H, K)
    q_long[:, :, -1] = q
    g_long = None
    if g is not None:
        g_long = g.new_zeros(B, T, n, H)
        g_long[:, :, 0] = g
        g_long = g_long.reshape(B, T * n, H)
    return q_long.reshape(B, T * n, H, K), g_long


def gated_delta_product(
    rule: Callable[..., tuple[Tensor, Tensor | None]],
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
) -> tuple[Tensor, Tensor | None]:
    """Runs `rule` (any gated-delta-rule form) over the interleaved sequence; returns o [B, T, H, V]."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    q_long, g_long = interleave_delta_product(q, k, g, num_householder)
    # the rule normalises (fused in the Triton path); the zero rows of q_long stay 0
    o, state = rule(q_long, k, v, g_long, beta, scale=scale, initial_state=initial_state,
                    output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    return o[:, num_householder - 1 :: num_householder], state
