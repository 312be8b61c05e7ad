"""The autograd Function around the Triton chunk kernels, and the public entry point with the reference's signature."""
from __future__ import annotations

import torch
from torch import Tensor

from .chunk_bwd import chunk_bwd
from .chunk_fwd import chunk_fwd
from .l2norm import l2_normalize_triton


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    """o, final_state = f(q, k, v, g, beta, initial_state); q, k already L2-normalised if asked."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float,
                initial_state: Tensor | None, output_final_state: bool) -> tuple[Tensor, Tensor | None]:
        q, k, v, beta = (x.contiguous() for x in (q, k, v, beta))
        g = g.contiguous() if g is not None else None
        h0 = initial_state.float().contiguous() if initial_state is not None else None
        save = any(ctx.needs_input_grad)
        o, ht, saved = chunk_fwd(q, k, v, g, beta, scale, h0, output_final_state, save)
        if save:
            ctx.save_for_backward(q, k, v, g, beta, h0, *saved.values())
            ctx.saved_names = tuple(saved)
            ctx.scale = scale
            ctx.h0_dtype = initial_state.dtype if initial_state is not None else None
        return o, ht

    @staticmethod
    def backward(ctx, do: Tensor, dht: Tensor | None):
        q, k, v, g, beta, h0, *rest = ctx.saved_tensors
        saved = dict(zip(ctx.saved_names, rest))
        dht = dht.float().contiguous() if dht is not None else None
        dq, dk, dv, dg, dbeta, dh0 = chunk_bwd(q, k, v, g, beta, ctx.scale, h0, do.contiguous(), dht, saved)
        if dh0 is not None:
            dh0 = dh0.to(ctx.h0_dtype)
        return dq, dk, dv, dg, dbeta, None, dh0, None


@torch.compiler.disable  # torch.compile runs around it: the launcher and autograd.Function stay eager
def chunk_gated_delta_rule_triton(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor | None,
    beta: Tensor,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Chunked gated delta rule in Triton; same signature and semantics as kernels.reference.

    q, k [B, T, H, K]; v [B, T, H, V]; g [B, T, H] log-space decay or None; beta [B, T, H]; initial_state
    [B, H, K, V]. Returns o [B, T, H, V] (v's dtype) and the final state [B, H, K, V] fp32, or None.
    fp64 inputs run in fp32 and come back in fp64.
    """
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if use_qk_l2norm_in_kernel:
        q, k = l2_normalize_triton(q), l2_normalize_triton(k)
    if q.dtype == torch.float64:
        o, ht = chunk_gated_delta_rule_triton(
            q.float(), k.float(), v.float(), g.float() if g is not None else None, beta.float(), scale,
            initial_state.float() if initial_state is not None else None, output_final_state)
        return o.double(), (ht.double() if ht is not None else None)
    return ChunkGatedDeltaRuleFunction.apply(q, k, v, g, beta, scale, initial_state, output_final_state)
