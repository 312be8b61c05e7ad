"""The Triton chunk kernels as PyTorch custom ops with their autograd, and the public entry points with the
reference's signature. Custom ops are opaque to torch.compile: a compiled model traces around them as one graph
(no graph break per layer) and calls the kernels as they are."""
from __future__ import annotations

import torch
from torch import Tensor

from ..delta_product import check_micro_steps
from .chunk_bwd import chunk_bwd
from .chunk_fwd import chunk_fwd
from .l2norm import EPS, l2norm_fwd
from .tuning import dot_operand_dtype
from .utils import CHUNK

SAVED = ("G", "Tinv", "Aqk", "w", "h_all", "v_new")  # the forward's intermediates the backward reads (chunk_fwd)
FOR_BACKWARD_ONLY = ("w", "h_all", "v_new")  # those a forward without save returns as empty tensors


@torch.library.custom_op("deltamup::chunk_gated_delta_fwd", mutates_args=())
def chunk_gated_delta_fwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float,
                          initial_state: Tensor | None, output_final_state: bool, nh: int, norm_qk: bool = False,
                          save: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """DeltaProduct_nh by interleaving (nh = 1: the gated delta rule) on contiguous inputs, q and k L2-normalised
    inside the passes with norm_qk (no normalised copies; forward only: its backward would have to normalise them
    again, and normalising before the forward is faster for forward + backward), initial_state fp32 (shapes:
    chunk_fwd). Returns o, the final state (an empty tensor unless output_final_state) and the SAVED intermediates;
    without save (a forward no backward follows) FOR_BACKWARD_ONLY come back as empty tensors (chunk_fwd stores
    them only where it must: narrow heads, which have no FUSE_O candidate)."""
    o, ht, saved = chunk_fwd(q, k, v, g, beta, scale, initial_state, output_final_state, nh, norm_qk, save)
    return (o, ht if ht is not None else _empty(q),
            *(_empty(q) if not save and n in FOR_BACKWARD_ONLY else saved[n] for n in SAVED))


@torch.library.custom_op("deltamup::chunk_gated_delta_bwd", mutates_args=())
def chunk_gated_delta_bwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float,
                          initial_state: Tensor | None, do: Tensor, dht: Tensor | None, G: Tensor, Tinv: Tensor,
                          Aqk: Tensor, w: Tensor, h_all: Tensor, v_new: Tensor, nh: int
                          ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dg, dβ, dh0) from chunk_gated_delta_fwd's inputs and SAVED outputs; dg and dh0 are empty
    tensors where g or the initial state are None."""
    saved = dict(zip(SAVED, (G, Tinv, Aqk, w, h_all, v_new)))
    dq, dk, dv, dg, dbeta, dh0 = chunk_bwd(q, k, v, g, beta, scale, initial_state, do, dht, saved, nh)
    return dq, dk, dv, dg if dg is not None else _empty(q), dbeta, dh0 if dh0 is not None else _empty(q)


def _needs_grad(*tensors: Tensor | None) -> bool:
    """Whether autograd will want a backward through an op of these inputs."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _empty(like: Tensor) -> Tensor:
    """The stand-in for an absent output (custom ops return tensors, not None)."""
    return like.new_empty(0, dtype=torch.float32)


@chunk_gated_delta_fwd.register_fake
def _(q, k, v, g, beta, scale, initial_state, output_final_state, nh, norm_qk=False, save=True):
    B, T, H, K = k.shape
    V, NT, f32 = v.shape[-1], -(-T // CHUNK), torch.float32
    ht = k.new_empty(B, H, K, V, dtype=f32) if output_final_state else _empty(q)
    cm = dot_operand_dtype(q.dtype, K, V)
    for_backward = (torch.empty_like(k), k.new_empty(B, H, NT, K, V), torch.empty_like(v)) if save \
        else (_empty(q),) * 3
    return (v.new_empty(B, T // nh, H, V), ht, k.new_empty(B, T, H, dtype=f32), k.new_empty(B, T, H, CHUNK, dtype=cm),
            k.new_empty(B, T, H, CHUNK, dtype=cm), *for_backward)


@chunk_gated_delta_bwd.register_fake
def _(q, k, v, g, beta, scale, initial_state, do, dht, G, Tinv, Aqk, w, h_all, v_new, nh):
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            torch.empty_like(g) if g is not None else _empty(q), torch.empty_like(beta),
            torch.empty_like(initial_state) if initial_state is not None else _empty(q))


def _setup_context(ctx, inputs: tuple, output: tuple) -> None:
    q, k, v, g, beta, scale, initial_state, output_final_state, nh, *flags = inputs
    ctx.save_for_backward(q, k, v, g, beta, initial_state, *output[2:])
    ctx.mark_non_differentiable(*output[2:])
    ctx.set_materialize_grads(False)  # no zero-filled gradients for the saved intermediates (or an unused output)
    ctx.scale, ctx.nh, ctx.output_final_state = scale, nh, output_final_state
    norm_qk, save = (*flags, *(False, True)[len(flags):])  # the op's defaults where inputs omit them
    ctx.norm_qk, ctx.save = bool(norm_qk), bool(save)


def _backward(ctx, do: Tensor | None, dht: Tensor | None, *_):
    if ctx.norm_qk or not ctx.save:
        raise RuntimeError("chunk_gated_delta_fwd with norm_qk or without save is forward only: where a gradient is "
                           "needed, normalise q and k before it and save (the entry points do)")
    q, k, v, g, beta, h0, *saved = ctx.saved_tensors
    if do is None:  # only the final state reaches the loss
        do = v.new_zeros(*q.shape[:-1], v.shape[-1])
    dht = dht.contiguous() if ctx.output_final_state and dht is not None else None
    dq, dk, dv, dg, dbeta, dh0 = chunk_gated_delta_bwd(q, k, v, g, beta, ctx.scale, h0, do.contiguous(), dht,
                                                       *saved, ctx.nh)
    return (dq, dk, dv, dg if g is not None else None, dbeta, None, dh0 if h0 is not None else None, None, None,
            None, None)


chunk_gated_delta_fwd.register_autograd(_backward, setup_context=_setup_context)


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
    if q.dtype == torch.float64:
        o, ht = chunk_gated_delta_product_triton(
            q.float(), k.float(), v.float(), g.float() if g is not None else None, beta.float(), num_householder,
            scale, initial_state.float() if initial_state is not None else None, output_final_state,
            use_qk_l2norm_in_kernel)
        return o.double(), (ht.double() if ht is not None else None)
    h0 = initial_state.float().contiguous() if initial_state is not None else None
    q, k = q.contiguous(), k.contiguous()
    # q/k's L2 norm: inside the passes for a forward alone (no pass of its own); before them where a gradient is
    # needed, the normalised copies saved for the backward (on an H200 forward + backward is 0.4-4% faster that way
    # than normalising inside the passes and again in the backward: benchmarks/kernels.md)
    save = _needs_grad(q, k, v, g, beta, h0)  # a forward no backward follows stores nothing for one
    norm_in_passes = use_qk_l2norm_in_kernel and not save
    if use_qk_l2norm_in_kernel and not norm_in_passes:
        q, k = l2norm_fwd(q, EPS), l2norm_fwd(k, EPS)
    o, ht, *_ = chunk_gated_delta_fwd(q, k, v.contiguous(), g.contiguous() if g is not None else None,
                                      beta.contiguous(), scale, h0, output_final_state, num_householder,
                                      norm_in_passes, save)
    return o, (ht if output_final_state else None)


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
