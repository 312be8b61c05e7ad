"""The autograd Function around the Triton chunk kernels, and the public entry point with the reference's signature."""
from __future__ import annotations

import torch
from torch import Tensor

from ..delta_product import check_micro_steps
from .chunk_bwd import chunk_bwd
from .chunk_fwd import chunk_fwd
from .l2norm import l2_normalize_triton


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    """o, final_state = f(q, k, v, g, beta, initial_state) for DeltaProduct_nh by interleaving (nh = 1: the gated
    delta rule): k, v, beta have T·nh micro-steps, q and g T tokens (see chunk_fwd); q, k already L2-normalised."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float,
                initial_state: Tensor | None, output_final_state: bool, nh: int) -> tuple[Tensor, Tensor | None]:
        q, k, v, beta = (x.contiguous() for x in (q, k, v, beta))
        g = g.contiguous() if g is not None else None
        h0 = initial_state.float().contiguous() if initial_state is not None else None
        save = any(ctx.needs_input_grad)
        o, ht, saved = chunk_fwd(q, k, v, g, beta, scale, h0, output_final_state, save, nh)
        if save:
            ctx.save_for_backward(q, k, v, g, beta, h0, *saved.values())
            ctx.saved_names = tuple(saved)
            ctx.scale = scale
            ctx.nh = nh
            ctx.h0_dtype = initial_state.dtype if initial_state is not None else None
        return o, ht

    @staticmethod
    def backward(ctx, do: Tensor, dht: Tensor | None):
        q, k, v, g, beta, h0, *rest = ctx.saved_tensors
        saved = dict(zip(ctx.saved_names, rest))
        dht = dht.float().contiguous() if dht is not None else None
        dq, dk, dv, dg, dbeta, dh0 = chunk_bwd(q, k, v, g, beta, ctx.scale, h0, do.contiguous(), dht, saved, ctx.nh)
        if dh0 is not None:
            dh0 = dh0.to(ctx.h0_dtype)
        return dq, dk, dv, dg, dbeta, None, dh0, None, None


@torch.compiler.disable  # torch.compile runs around it: the launcher and autograd.Function stay eager
def chunk_gated_delta_product_triton(
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
    """Gated DeltaProduct_{n_h} in Triton by the interleaving trick without interleaved copies; same signature and
    semantics as kernels.chunk_gated_delta_product.

    q [B, T, H, K]; k [B, T·n_h, H, K]; v [B, T·n_h, H, V]; g [B, T, H] log-space decay or None;
    beta [B, T·n_h, H]; initial_state [B, H, K, V]. Returns o [B, T, H, V] (v's dtype) and the state after the
    last micro-step [B, H, K, V] fp32, or None. fp64 inputs run in fp32 and come back in fp64.
    """
    check_micro_steps(q, k, num_householder)
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if use_qk_l2norm_in_kernel:
        q, k = l2_normalize_triton(q), l2_normalize_triton(k)
    if q.dtype == torch.float64:
        o, ht = chunk_gated_delta_product_triton(
            q.float(), k.float(), v.float(), g.float() if g is not None else None, beta.float(), num_householder,
            scale, initial_state.float() if initial_state is not None else None, output_final_state)
        return o.double(), (ht.double() if ht is not None else None)
    return ChunkGatedDeltaRuleFunction.apply(q, k, v, g, beta, scale, initial_state, output_final_state,
                                             num_householder)


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
    """Chunked gated delta rule in Triton (DeltaProduct_1); same signature and semantics as kernels.reference.

    q, k [B, T, H, K]; v [B, T, H, V]; g [B, T, H] log-space decay or None; beta [B, T, H]; initial_state
    [B, H, K, V]. Returns o [B, T, H, V] (v's dtype) and the final state [B, H, K, V] fp32, or None.
    fp64 inputs run in fp32 and come back in fp64.
    """
    return chunk_gated_delta_product_triton(q, k, v, g, beta, 1, scale, initial_state, output_final_state,
                                            use_qk_l2norm_in_kernel)
