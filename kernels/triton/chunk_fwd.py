"""Forward of the chunked gated delta rule: a parallel per-chunk pass (gates, UT transform, w, u, the intra-chunk
attention) and a sequential pass over chunks (state, v_new, output).

Per chunk of C tokens, G = cumsum(g), D_ij = e^{G_i − G_j}:
    A = strict_lower(β_i (k_i·k_j) D_ij),  T = (I + A)^{-1},  w = T (β e^G ⊙ K),  u = T (β ⊙ V)
    Aqk = scale · causal(Q Kᵀ ⊙ D)
    v_new = u − w h;   o = scale (Q ⊙ e^G) h + Aqk v_new;   h ← e^{G_C} h + (K ⊙ e^{G_C − G})ᵀ v_new
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .solve import solve_tril_64
from .utils import CHUNK, decay, launch, load_gates, mm, pow2, precision, tile


@triton.jit
def chunk_prepare_fwd_kernel(
    q, k, v, g, beta, G_out, T_out, Aqk_out, w_out, u_out,
    scale, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_G: tl.constexpr, F32: tl.constexpr, PREC: tl.constexpr,
):
    """Grid (NT, B·H). Writes G [B,T,H], T and Aqk [B,T,H,C] (fp32), w [B,T,H,K] and u [B,T,H,V] (input dtype)."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    t0 = i_t * C
    rows = t0 + tl.arange(0, C)
    tok = i_b * T * H + i_h  # offset of (b, t=0, h) in [B, T, H]
    b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
    if USE_G:
        b_G = tl.cumsum(tl.load(g + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32), axis=0)
    else:
        b_G = tl.zeros([C], dtype=tl.float32)
    tl.store(G_out + tok + rows * H, b_G, mask=rows < T)

    b_kk = tl.zeros([C, C], dtype=tl.float32)
    b_qk = tl.zeros([C, C], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_q = tl.load(q + tok * K + p_k, mask=m_k, other=0.0)
        b_kk += mm(b_k, tl.trans(b_k), k, F32, PREC)
        b_qk += mm(b_q, tl.trans(b_k), k, F32, PREC)
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    tl.store(Aqk_out + tok * C + p_c, b_qk * decay(b_G, C, False) * scale, mask=m_c)
    # A goes through T_out: the solve reads it back in 16×16 blocks and overwrites it with T = (I + A)^{-1}
    tl.store(T_out + tok * C + p_c, b_kk * decay(b_G, C, True) * b_beta[:, None], mask=m_c)
    tl.debug_barrier()
    solve_tril_64(T_out + tok * C, t0, T, H, C)
    tl.debug_barrier()
    b_T = tl.load(T_out + tok * C + p_c, mask=m_c, other=0.0)
    for i_k in range(tl.cdiv(K, BK)):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        b_kb = tl.load(k + tok * K + p_k, mask=m_k, other=0.0).to(tl.float32) * (b_beta * tl.exp(b_G))[:, None]
        tl.store(w_out + tok * K + p_k, mm(b_T, b_kb, k, F32, PREC).to(w_out.dtype.element_ty), mask=m_k)
    for i_v in range(tl.cdiv(V, BV)):
        p_v, m_v = tile(t0, T, H, V, i_v * BV, C, BV)
        b_vb = tl.load(v + tok * V + p_v, mask=m_v, other=0.0).to(tl.float32) * b_beta[:, None]
        tl.store(u_out + tok * V + p_v, mm(b_T, b_vb, k, F32, PREC).to(u_out.dtype.element_ty), mask=m_v)


@triton.jit
def chunk_state_fwd_kernel(
    q, k, w, u, G, Aqk, h0, o, ht, h_all, v_new,
    scale, T, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_H0: tl.constexpr, STORE_HT: tl.constexpr, SAVE: tl.constexpr, PREC: tl.constexpr,
):
    """Grid (V / BV, B·H); BK ≥ K holds the whole state column block [BK, BV] in fp32. Walks the chunks in order,
    writes o, and if SAVE the state before each chunk (h_all [B,H,NT,K,V] fp32) and v_new [B,T,H,V]."""
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    rk = tl.arange(0, BK)
    rv = i_v * BV + tl.arange(0, BV)
    m_h = (rk[:, None] < K) & (rv[None, :] < V)
    p_h = rk[:, None] * V + rv[None, :]
    if USE_H0:
        b_h = tl.load(h0 + i_bh * K * V + p_h, mask=m_h, other=0.0).to(tl.float32)
    else:
        b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(NT):
        t0 = i_t * C
        b_G, b_gl = load_gates(G + tok, t0, T, H, C)
        p_k, m_k = tile(t0, T, H, K, 0, C, BK)
        b_q = tl.load(q + tok * K + p_k, mask=m_k, other=0.0)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_w = tl.load(w + tok * K + p_k, mask=m_k, other=0.0)
        p_c, m_c = tile(t0, T, H, C, 0, C, C)
        b_Aqk = tl.load(Aqk + tok * C + p_c, mask=m_c, other=0.0)
        p, m = tile(t0, T, H, V, i_v * BV, C, BV)
        b_u = tl.load(u + tok * V + p, mask=m, other=0.0).to(tl.float32)
        if SAVE:
            tl.store(h_all + (i_bh * NT + i_t) * K * V + p_h, b_h, mask=m_h)
        b_vn = b_u - mm(b_w, b_h, k, False, PREC)
        if SAVE:
            tl.store(v_new + tok * V + p, b_vn.to(v_new.dtype.element_ty), mask=m)
        b_qg = b_q.to(tl.float32) * tl.exp(b_G)[:, None]
        b_o = mm(b_qg, b_h, k, False, PREC) * scale + mm(b_Aqk, b_vn, k, False, PREC)
        tl.store(o + tok * V + p, b_o.to(o.dtype.element_ty), mask=m)
        b_kd = b_k.to(tl.float32) * tl.exp(b_gl - b_G)[:, None]
        b_h = b_h * tl.exp(b_gl) + mm(tl.trans(b_kd), b_vn, k, False, PREC)
    if STORE_HT:
        tl.store(ht + i_bh * K * V + p_h, b_h, mask=m_h)


def state_blocks(K: int, V: int, BH: int) -> tuple[int, int]:
    """(BK, BV) of the sequential passes: BK covers all of K; BV shrinks as K grows and when B·H is small."""
    BK = pow2(K)
    BV = 32 if BK <= 128 else 16
    BV = min(BV, pow2(V))
    if BH * triton.cdiv(V, BV) < 256:
        BV = 16
    return BK, BV


def seq_configs(BK: int) -> tuple[dict[str, int], ...]:
    """num_warps/num_stages of the sequential passes, in the order tried: more warps for the larger states."""
    w = 8 if BK >= 256 else 4
    return ({"num_warps": w, "num_stages": 2}, {"num_warps": w, "num_stages": 1}, {"num_warps": 8, "num_stages": 1})


PAR_CONFIGS = ({"num_warps": 8, "num_stages": 2}, {"num_warps": 8, "num_stages": 1}, {"num_warps": 4, "num_stages": 1})


def chunk_fwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float,
              initial_state: Tensor | None, output_final_state: bool, save: bool
              ) -> tuple[Tensor, Tensor | None, dict[str, Tensor]]:
    """q, k [B,T,H,K], v [B,T,H,V] contiguous. Returns o [B,T,H,V], the final state or None, and the saved
    intermediates (G, Tinv, Aqk, w, h_all, v_new) the backward needs (empty unless save)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = CHUNK
    NT = triton.cdiv(T, C)
    f32 = dict(dtype=torch.float32, device=q.device)
    G = torch.empty(B, T, H, **f32)
    Tinv = torch.empty(B, T, H, C, **f32)
    Aqk = torch.empty(B, T, H, C, **f32)
    w = torch.empty_like(k)
    u = torch.empty_like(v)
    prec = precision(q.dtype)
    BKp, BVp = min(64, pow2(K)), min(64, pow2(V))
    launch(chunk_prepare_fwd_kernel, (NT, B * H),
           (q, k, v, g if g is not None else beta, beta, G, Tinv, Aqk, w, u, scale, T),
           dict(H=H, K=K, V=V, C=C, BK=BKp, BV=BVp, USE_G=g is not None, F32=True, PREC=prec), PAR_CONFIGS)
    o = torch.empty_like(v)
    ht = torch.empty(B, H, K, V, **f32) if output_final_state else o
    h_all = torch.empty(B, H, NT, K, V, **f32) if save else o
    v_new = torch.empty_like(v) if save else o
    BK, BV = state_blocks(K, V, B * H)
    launch(chunk_state_fwd_kernel, (triton.cdiv(V, BV), B * H),
           (q, k, w, u, G, Aqk, initial_state if initial_state is not None else o, o, ht, h_all, v_new,
            scale, T, NT),
           dict(H=H, K=K, V=V, C=C, BK=BK, BV=BV, USE_H0=initial_state is not None,
                STORE_HT=output_final_state, SAVE=save, PREC=prec), seq_configs(BK))
    saved = dict(G=G, Tinv=Tinv, Aqk=Aqk, w=w, h_all=h_all, v_new=v_new) if save else {}
    return o, (ht if output_final_state else None), saved
