"""Forward of the chunked gated delta rule: a parallel per-chunk pass in two kernels (gates and the UT transform per
chunk; then w, u and the intra-chunk attention per chunk and column block), a sequential pass over chunks that
carries the state (h before each chunk, v_new), and a parallel output pass. Where the launcher times them faster,
candidate configs of the sequential pass do more of it in the walk: the output (FUSE_O), u (FUSE_U) and w h
(FUSE_W), from the h it holds; and a forward no backward follows (save=False) stores neither h nor v_new.

Per chunk of C tokens, G = cumsum(g), D_ij = e^{G_i − G_j}:
    A = strict_lower(β_i (k_i·k_j) D_ij),  T = (I + A)^{-1},  w = T (β e^G ⊙ K),  u = T (β ⊙ V)
    Aqk = scale · causal(Q Kᵀ ⊙ D)
    v_new = u − w h = T (β ⊙ (V − e^G ⊙ K h));   h ← e^{G_C} h + Kᵀ (e^{G_C − G} ⊙ v_new)    (sequential)
    o = scale e^G ⊙ (Q h) + Aqk v_new                                                   (parallel)
With NORM (use_qk_l2norm_in_kernel), q and k come in as they are and every pass scales their rows by
r = (Σ x² + eps)^{-1/2} where it uses them (K Kᵀ and Q Kᵀ by r_i r_j, w's rows, the state update's rows of K,
Q h's rows): the same products as on normalised inputs, with no pass of their own and no normalised copies;
the per-chunk pass computes r_k and r_q from the rows it loads anyway and stores them ([B,T,H] fp32) for the rest.
DeltaProduct_NH (NH > 1) runs the same passes over T = T_tok·NH micro-rows, reading q [B,T_tok,H,K] and
g [B,T_tok,H] through the row map (q at each token's last micro-row, g at its first, 0 elsewhere) and writing o
[B,T_tok,H,V] only at last micro-rows: no interleaved copies, no output rows thrown away.
The sequential pass holds the state of one V block as up to four K blocks of BK rows in fp32 registers
(see state_blocks), so any K runs without padding it to a power of two.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl
from torch import Tensor

from .l2norm import EPS
from .solve import solve_tril, solve_tril_blocks
from .tuning import (
    OUT_CONFIGS,
    PAR_CONFIGS,
    SOLVE_CONFIGS,
    candidates,
    dot_operand_dtype,
    forward_state_candidates,
    launch,
    parallel_tiles,
    precision,
    solve_precision,
    state_blocks,
    state_configs,
)
from .utils import (
    CHUNK,
    add_trans_blocks,
    add_trans_states,
    decay,
    dot_blocks_states,
    dot_rows,
    dot_rows_states,
    load_gates,
    load_row_blocks,
    load_state,
    load_states,
    mm,
    row_map,
    store_states,
    tile,
    tok_base,
)

NORM_EPS = tl.constexpr(EPS)  # the L2 norm's, as a constant the kernels may read


@triton.jit
def chunk_gates(g, G_out, tq, tok, t0, T, H, C: tl.constexpr, NH: tl.constexpr, USE_G: tl.constexpr):
    """G = cumsum(g) [C] (fp32) of the chunk at rows t0.. (g at (b, t=0, h) = g + tq, a row per token of NH
    micro-rows; zeros without USE_G), stored to G_out + tok [T, H] and returned."""
    rows = t0 + tl.arange(0, C)
    if USE_G:
        r_g, m_g = row_map(t0, T, C, NH, 0)
        b_G = tl.cumsum(tl.load(g + tq + r_g * H, mask=m_g, other=0.0).to(tl.float32), axis=0)
    else:
        b_G = tl.zeros([C], dtype=tl.float32)
    tl.store(G_out + tok + rows * H, b_G, mask=rows < T)
    return b_G


@triton.jit
def chunk_qk(q, k, tok, tq, t0, T, H, K: tl.constexpr, C: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
             NH: tl.constexpr, NORM: tl.constexpr):
    """(Q Kᵀ [C, C] fp32, Σ q² [C] over each row of Q, with NORM; else zeros) of the chunk at rows t0.. (q at
    q + tq·K with a row per token of NH micro-rows, at each token's last; k at k + tok·K)."""
    b_qk = tl.zeros([C, C], dtype=tl.float32)
    b_ss = tl.zeros([C], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        p_q, m_q = tile(t0, T, H, K, i_k * BK, C, BK, NH, NH - 1)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_q = tl.load(q + tq * K + p_q, mask=m_q, other=0.0)
        b_qk += mm(b_q, tl.trans(b_k), k, PREC)
        if NORM:
            b_ss += tl.sum(b_q.to(tl.float32) * b_q.to(tl.float32), axis=1)
    return b_qk, b_ss


@triton.jit
def chunk_kkt_solve_fwd_kernel(
    k, g, beta, G_out, T_out, Rk, A_tmp,
    T, H: tl.constexpr, K: tl.constexpr, C: tl.constexpr, BK: tl.constexpr,
    USE_G: tl.constexpr, PREC: tl.constexpr, MP: tl.constexpr, NH: tl.constexpr, NORM: tl.constexpr = False,
    BLOCKWISE: tl.constexpr = False,
):
    """Grid (NT, B·H). Writes G [B,T,H] (fp32) and T = (I + A)^{-1} [B,T,H,C] (in T_out's dtype) for
    A = strict_lower(β K Kᵀ ⊙ D) (solve.py, products at input_precision MP): in registers, or with BLOCKWISE from its
    16×16 blocks stored to A_tmp [B,T,H,C] (fp32, a scratch buffer). g has a row per token of NH micro-rows. With
    NORM, K's rows count normalised and their r_k go to Rk [B,T,H] (fp32)."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    t0 = i_t * C
    rows = t0 + tl.arange(0, C)
    tok = i_b * T * H + i_h  # offset of (b, t=0, h) in [B, T, H]
    b_G = chunk_gates(g, G_out, tok_base(i_b, i_h, T, H, NH), tok, t0, T, H, C, NH, USE_G)
    b_kk = tl.zeros([C, C], dtype=tl.float32)
    b_ss = tl.zeros([C], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_kk += mm(b_k, tl.trans(b_k), k, PREC)
        if NORM:
            b_ss += tl.sum(b_k.to(tl.float32) * b_k.to(tl.float32), axis=1)
    if NORM:
        b_rk = 1.0 / tl.sqrt(b_ss + NORM_EPS)
        tl.store(Rk + tok + rows * H, b_rk, mask=rows < T)
        b_kk = b_kk * b_rk[:, None] * b_rk[None, :]
    b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
    b_a = b_kk * decay(b_G, C, True) * b_beta[:, None]
    if BLOCKWISE:
        p_a, m_a = tile(t0, T, H, C, 0, C, C)
        tl.store(A_tmp + tok * C + p_a, b_a, mask=m_a)
        tl.debug_barrier()  # the rows and blocks each thread loads next were stored by the program's other threads
        solve_tril_blocks(A_tmp + tok * C, T_out + tok * C, H * C, t0, T, C, MP)
    else:
        b_T = solve_tril(b_a, C, MP)
        p_c, m_c = tile(t0, T, H, C, 0, C, C)
        tl.store(T_out + tok * C + p_c, b_T.to(T_out.dtype.element_ty), mask=m_c)


@triton.jit
def _t_cols(x, tok, t0, T, H, D, d0, b_T, b_s, C: tl.constexpr, BD: tl.constexpr, PREC: tl.constexpr):
    """Columns d0.. (BD of them) of T (s ⊙ X) [C, BD] (fp32) for X [T, H, D] at x + tok·D, the chunk's T [C, C] and
    row scalars s [C]."""
    p, m = tile(t0, T, H, D, d0, C, BD)
    b_x = tl.load(x + tok * D + p, mask=m, other=0.0).to(tl.float32) * b_s[:, None]
    return mm(b_T, b_x, x, PREC)


@triton.jit
def _k_row_scales(b_G, Rk, t0, T, H, C: tl.constexpr, NORM: tl.constexpr):
    """e^G [C] of a chunk's rows, times r_k with NORM (Rk at (b, t=0, h)): the row scalars of K in w = T (β e^G ⊙ K)
    and in v_new's e^G ⊙ (K h)."""
    b_s = tl.exp(b_G)
    if NORM:
        b_s *= _row_scalars(Rk, t0, T, H, C)
    return b_s


@triton.jit
def _wu_block(x, out, tok, t0, T, H, D, d0, b_T, b_s, C: tl.constexpr, BD: tl.constexpr, PREC: tl.constexpr):
    """Columns d0.. (BD of them) of T (s ⊙ X) for X [T, H, D] at x + tok·D, into out (same layout)."""
    p, m = tile(t0, T, H, D, d0, C, BD)
    tl.store(out + tok * D + p, _t_cols(x, tok, t0, T, H, D, d0, b_T, b_s, C, BD, PREC).to(out.dtype.element_ty),
             mask=m)


@triton.jit
def chunk_wu_aqk_fwd_kernel(
    q, k, v, beta, G, T_in, w, u, Aqk, Rq, Rk,
    scale, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr,
    NORM: tl.constexpr = False, WRITE_W: tl.constexpr = True, WRITE_U: tl.constexpr = True,
):
    """Grid (NW + NU + 1, NT, B·H), NW = K / BK with WRITE_W (else 0), NU = V / BV with WRITE_U (else 0). The
    programs of a chunk write one column block each of w = T (β e^G ⊙ K) [B,T,H,K] (the first NW) and u = T (β ⊙ V)
    [B,T,H,V] (the next NU), in k's and v's dtypes, and the last writes Aqk = scale · causal(Q Kᵀ ⊙ D) [B,T,H,C]
    (in its buffer's dtype); q has a row per token of NH micro-rows. With NORM, K's rows are scaled by r_k (from Rk)
    and Q's by r_q, which the last program computes and stores in Rq [B,T,H] (fp32, a row per micro-row, of use at
    each token's last)."""
    i_c, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    t0 = i_t * C
    rows = t0 + tl.arange(0, C)
    b_G, _ = load_gates(G + tok, t0, T, H, C)
    NK = tl.cdiv(K, BK)
    NW = NK if WRITE_W else 0
    NU = tl.cdiv(V, BV) if WRITE_U else 0
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    if i_c < NW + NU:
        b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
        b_T = tl.load(T_in + tok * C + p_c, mask=m_c, other=0.0)
        if i_c < NW:
            _wu_block(k, w, tok, t0, T, H, K, i_c * BK, b_T, b_beta * _k_row_scales(b_G, Rk + tok, t0, T, H, C, NORM),
                      C, BK, PREC)
        else:
            _wu_block(v, u, tok, t0, T, H, V, (i_c - NW) * BV, b_T, b_beta, C, BV, PREC)
    else:
        b_qk, b_ss = chunk_qk(q, k, tok, tok_base(i_b, i_h, T, H, NH), t0, T, H, K, C, BK, PREC, NH, NORM)
        if NORM:
            b_rq = 1.0 / tl.sqrt(b_ss + NORM_EPS)
            tl.store(Rq + tok + rows * H, b_rq, mask=rows < T)
            b_qk *= b_rq[:, None] * _row_scalars(Rk + tok, t0, T, H, C)[None, :]
        tl.store(Aqk + tok * C + p_c, (b_qk * decay(b_G, C, False) * scale).to(Aqk.dtype.element_ty), mask=m_c)


@triton.jit
def chunk_state_fwd_kernel(
    q, k, v, beta, Tinv, w, u, G, Aqk, h0, ht, h_all, v_new, o, Rq, Rk,
    scale, T, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NKB: tl.constexpr,
    USE_H0: tl.constexpr, STORE_HT: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr,
    FUSE_O: tl.constexpr = False, FUSE_U: tl.constexpr = False, FUSE_W: tl.constexpr = False,
    SAVE: tl.constexpr = True, NORM: tl.constexpr = False,
):
    """Grid (V / BV, B·H); the state column block [K, BV] lives in NKB ≤ 4 fp32 blocks [BK, BV]. Walks the chunks
    in order; writes ht and, with SAVE, the backward's: the state before each chunk (h_all [B,H,NT,K,V], k's dtype)
    and v_new [B,T,H,V]. Candidate configs (tuning.py) fuse more of the forward into the walk:
    FUSE_O: it also writes o as chunk_o_fwd_kernel does, from the h and v_new it holds, and the output pass is not
        run (a forward without SAVE runs only these);
    FUSE_U: it forms u = T (β ⊙ V) of its V block itself from v, β and Tinv, off the recurrence's critical path, and
        the per-chunk pass writes no u;
    FUSE_W (with FUSE_U): v_new = T (β ⊙ (V − e^G ⊙ K h)), one product with T, and w is not read (nor written,
        without SAVE).
    With NORM, K's rows enter the update scaled by r_k and Q h's rows by r_q (Rk, Rq [B,T,H] fp32, from the
    per-chunk pass)."""
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    tq = tok_base(i_b, i_h, T, H, NH)
    rv = i_v * BV + tl.arange(0, BV)
    b_h1, b_h2, b_h3, b_h4 = load_states(h0 + i_bh * K * V, rv, K, V, BK, BV, NKB, USE_H0)
    for i_t in range(NT):
        t0 = i_t * C
        b_G, b_gl = load_gates(G + tok, t0, T, H, C)
        if SAVE:
            store_states(h_all + (i_bh * NT + i_t) * K * V, b_h1, b_h2, b_h3, b_h4, rv, K, V, BK, NKB)
        p, m = tile(t0, T, H, V, i_v * BV, C, BV)
        if FUSE_U:
            p_c, m_c = tile(t0, T, H, C, 0, C, C)
            b_T = tl.load(Tinv + tok * C + p_c, mask=m_c, other=0.0)
            b_beta = _row_scalars(beta + tok, t0, T, H, C).to(tl.float32)
            if FUSE_W:  # K's blocks loaded once for K h and the update
                b_k1, b_k2, b_k3, b_k4 = load_row_blocks(k + tok * K, t0, T, H, K, C, BK, NKB)
                b_kh = dot_blocks_states(b_k1, b_k2, b_k3, b_k4, b_h1, b_h2, b_h3, b_h4, NKB, PREC)
                b_x = (tl.load(v + tok * V + p, mask=m, other=0.0).to(tl.float32)
                       - b_kh * _k_row_scales(b_G, Rk + tok, t0, T, H, C, NORM)[:, None])
                b_v = mm(b_T, b_x * b_beta[:, None], v, PREC)
            else:
                b_v = (_t_cols(v, tok, t0, T, H, V, i_v * BV, b_T, b_beta, C, BV, PREC)
                       - dot_rows_states(w + tok * K, t0, T, H, K, b_h1, b_h2, b_h3, b_h4, C, BK, NKB, PREC))
        else:
            b_v = (tl.load(u + tok * V + p, mask=m, other=0.0).to(tl.float32)
                   - dot_rows_states(w + tok * K, t0, T, H, K, b_h1, b_h2, b_h3, b_h4, C, BK, NKB, PREC))
        b_vn = b_v.to(o.dtype.element_ty)
        if SAVE:
            tl.store(v_new + tok * V + p, b_vn, mask=m)
        if FUSE_O:
            b_qh = dot_rows_states(q + tq * K, t0, T, H, K, b_h1, b_h2, b_h3, b_h4, C, BK, NKB, PREC, NH, NH - 1)
            if NORM:
                b_qh *= _row_scalars(Rq + tok, t0, T, H, C)[:, None]
            _store_o(o + tq * V, Aqk + tok * C, b_qh, b_G, b_vn, scale, t0, T, H, V, i_v * BV, C, BV, PREC, NH)
        b_f = tl.exp(b_gl - b_G)
        if NORM:
            b_f *= _row_scalars(Rk + tok, t0, T, H, C)
        if FUSE_U and FUSE_W:
            b_h1, b_h2, b_h3, b_h4 = add_trans_blocks(b_h1, b_h2, b_h3, b_h4, tl.exp(b_gl), b_k1, b_k2, b_k3, b_k4,
                                                      b_v * b_f[:, None], NKB, PREC)
        else:
            b_h1, b_h2, b_h3, b_h4 = add_trans_states(b_h1, b_h2, b_h3, b_h4, tl.exp(b_gl), k + tok * K, t0, T, H,
                                                      K, b_v * b_f[:, None], C, BK, NKB, PREC)
    if STORE_HT:
        store_states(ht + i_bh * K * V, b_h1, b_h2, b_h3, b_h4, rv, K, V, BK, NKB)


@triton.jit
def _row_scalars(x, t0, T, H, C: tl.constexpr):
    """A chunk's rows t0.. of a [T, H] slice of per-row scalars at x (fp32 [C]; 0 past T)."""
    rows = t0 + tl.arange(0, C)
    return tl.load(x + rows * H, mask=rows < T, other=0.0)


@triton.jit
def _store_o(o, Aqk, b_qh, b_G, b_vn, scale, t0, T, H, V, v0, C: tl.constexpr, BV: tl.constexpr,
             PREC: tl.constexpr, NH: tl.constexpr):
    """o = scale e^G ⊙ (Q h) + Aqk v_new for a chunk's columns v0.. (BV of them), from b_qh = Q h [C, BV] (fp32) and
    b_vn = v_new [C, BV] (in o's dtype), stored at the last micro-row of each token; `o` and `Aqk` point at (b,
    token / micro-row 0, h) of o [B,T/NH,H,V] and Aqk [B,T,H,C]."""
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    b_A = tl.load(Aqk + p_c, mask=m_c, other=0.0)
    b_o = b_qh * (tl.exp(b_G) * scale)[:, None] + mm(b_A, b_vn, o, PREC)
    p_o, m_o = tile(t0, T, H, V, v0, C, BV, NH, NH - 1)
    tl.store(o + p_o, b_o.to(o.dtype.element_ty), mask=m_o)


@triton.jit
def chunk_o_fwd_kernel(
    q, G, Aqk, h_all, v_new, o, Rq,
    scale, T, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr,
    NORM: tl.constexpr = False,
):
    """Grid (V / BV, NT, B·H). o = scale e^G ⊙ (Q h) + Aqk v_new for one chunk and V block; q and o have a row per
    token of NH micro-rows, and o is stored at last micro-rows only. With NORM, Q h's rows are scaled by r_q (Rq)."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    tq = tok_base(i_b, i_h, T, H, NH)
    t0 = i_t * C
    rv = i_v * BV + tl.arange(0, BV)
    b_G, _ = load_gates(G + tok, t0, T, H, C)
    p_s = h_all + (i_bh * NT + i_t) * K * V
    b_qh = tl.zeros([C, BV], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        b_qh += dot_rows(q + tq * K, t0, T, H, K, i_k, load_state(p_s, i_k, rv, K, V, BK), C, BK, PREC, NH, NH - 1)
    if NORM:
        b_qh *= _row_scalars(Rq + tok, t0, T, H, C)[:, None]
    p, m = tile(t0, T, H, V, i_v * BV, C, BV)
    b_vn = tl.load(v_new + tok * V + p, mask=m, other=0.0)
    _store_o(o + tq * V, Aqk + tok * C, b_qh, b_G, b_vn, scale, t0, T, H, V, i_v * BV, C, BV, PREC, NH)


def chunk_solve(k: Tensor, g: Tensor | None, beta: Tensor, q_dtype: torch.dtype, V: int, nh: int = 1,
                norm: bool = False) -> dict[str, Tensor]:
    """The per-chunk pass's first kernel (shapes as in chunk_fwd): G [B,T,H] fp32 and Tinv = (I + A)^{-1} [B,T,H,C]
    (dot_operand_dtype); with norm (k not yet normalised), also Rk [B,T,H] fp32, its rows' 1/‖·‖."""
    B, T, H, K = k.shape
    G = torch.empty(B, T, H, dtype=torch.float32, device=k.device)
    Tinv = torch.empty(B, T, H, CHUNK, dtype=dot_operand_dtype(q_dtype, K, V), device=k.device)
    Rk = torch.empty_like(G) if norm else G  # G: a pointer the kernel never reads
    configs = candidates(SOLVE_CONFIGS, K, V)
    A_tmp = torch.empty(B, T, H, CHUNK, dtype=torch.float32, device=k.device) if any(
        c.get("BLOCKWISE") for c in configs) else G
    prec = precision(q_dtype, K, V)
    launch(chunk_kkt_solve_fwd_kernel, (triton.cdiv(T, CHUNK), B * H),
           (k, g if g is not None else beta, beta, G, Tinv, Rk, A_tmp, T),
           dict(H=H, K=K, C=CHUNK, BK=parallel_tiles(K, V)[0], USE_G=g is not None, PREC=prec,
                MP=solve_precision(prec), NH=nh, NORM=norm),
           configs)
    return dict(G=G, Tinv=Tinv) | (dict(Rk=Rk) if norm else {})


def chunk_wu_aqk(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, scale: float, solved: dict[str, Tensor],
                 out: dict[str, Tensor], write_w: bool = True, write_u: bool = True, nh: int = 1, norm: bool = False
                 ) -> None:
    """The per-chunk pass's second kernel, into `out`'s w [B,T,H,K] (with write_w), u [B,T,H,V] (with write_u),
    Aqk [B,T,H,C] and, with norm, Rq [B,T,H], from chunk_solve's `solved`."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    BK, BV = parallel_tiles(K, V)
    G = solved["G"]
    n_cols = (triton.cdiv(K, BK) if write_w else 0) + (triton.cdiv(V, BV) if write_u else 0)
    launch(chunk_wu_aqk_fwd_kernel, (n_cols + 1, triton.cdiv(T, CHUNK), B * H),
           (q, k, v, beta, G, solved["Tinv"], out["w"], out["u"], out["Aqk"], out.get("Rq", G), solved.get("Rk", G),
            scale, T),
           dict(H=H, K=K, V=V, C=CHUNK, BK=BK, BV=BV, PREC=precision(q.dtype, K, V), NH=nh, NORM=norm,
                WRITE_W=write_w, WRITE_U=write_u),
           candidates(PAR_CONFIGS, K, V))  # narrow heads: 8 warps, the per-chunk form (tuning.py)


def chunk_prepare(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float, nh: int = 1,
                  norm: bool = False) -> dict[str, Tensor]:
    """The whole per-chunk pass (shapes as in chunk_fwd): G [B,T,H] fp32; Tinv = (I + A)^{-1} and Aqk [B,T,H,C]
    (dot_operand_dtype); w [B,T,H,K] and u [B,T,H,V] in k's and v's dtypes; with norm (q, k not yet normalised),
    also Rq and Rk [B,T,H] fp32, their rows' 1/‖·‖ (see the module's docstring)."""
    solved = chunk_solve(k, g, beta, q.dtype, v.shape[-1], nh, norm)
    out = _wu_buffers(k, v, solved, norm)
    chunk_wu_aqk(q, k, v, beta, scale, solved, out, nh=nh, norm=norm)
    return solved | out


def _wu_buffers(k: Tensor, v: Tensor, solved: dict[str, Tensor], norm: bool) -> dict[str, Tensor]:
    """Empty w, u, Aqk (and Rq with norm) for chunk_wu_aqk."""
    return dict(w=torch.empty_like(k), u=torch.empty_like(v), Aqk=torch.empty_like(solved["Tinv"])) \
        | (dict(Rq=torch.empty_like(solved["G"])) if norm else {})


def chunk_fwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float,
              initial_state: Tensor | None, output_final_state: bool, nh: int = 1, norm: bool = False,
              save: bool = True) -> tuple[Tensor, Tensor | None, dict[str, Tensor]]:
    """k [B,T,H,K], v [B,T,H,V], β [B,T,H] over T = T_tok·nh micro-rows; q [B,T_tok,H,K], g [B,T_tok,H] or None;
    all contiguous; norm: q and k as they are, each row L2-normalised inside the passes (the module's docstring).
    Returns o [B,T_tok,H,V], the final state or None, and the intermediates (a row per micro-row) the backward needs
    (of the normalised q, k): with save, G, Tinv, Aqk, w, h_all and v_new; without, G, Tinv and Aqk (a forward
    alone: h and v_new are not stored, nor w where the state pass forms it). The state pass's launch times each of
    its candidates (tuning.forward_state_candidates) with the w/u pass before it (as much of w and u as that
    candidate reads or the backward needs) and the output pass after it (unless FUSE_O)."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    NT = triton.cdiv(T, CHUNK)
    prec = precision(q.dtype, K, V)
    BK, NKB = state_blocks(K)
    configs, fallbacks = state_configs(K, BK, V, B * H)
    # h and v_new are stored where a backward follows, and for narrow heads (no FUSE_O: the output pass reads them)
    save = save or not forward_state_candidates(configs, save=False)
    configs = forward_state_candidates(configs, save)
    fallbacks = fallbacks if save else [dict(c, FUSE_O=True) for c in fallbacks]
    solved = chunk_solve(k, g, beta, q.dtype, V, nh, norm)
    out = _wu_buffers(k, v, solved, norm)
    G, Tinv, Aqk, w, u = solved["G"], solved["Tinv"], out["Aqk"], out["w"], out["u"]
    Rq, Rk = out.get("Rq", G), solved.get("Rk", G)
    BKp, BVp = parallel_tiles(K, V)
    ht = torch.empty(B, H, K, V, dtype=torch.float32, device=q.device) if output_final_state else G
    h_all = torch.empty(B, H, NT, K, V, dtype=k.dtype, device=k.device) if save else G
    v_new = torch.empty_like(v) if save else G
    o = v.new_empty(B, T // nh, H, V)

    def wu_pass(state_config: dict[str, int], _: Sequence) -> None:  # what the state pass will read, and the backward
        chunk_wu_aqk(q, k, v, beta, scale, solved, out, save or not state_config.get("FUSE_W", False),
                     not state_config.get("FUSE_U", False), nh, norm)

    def output_pass(state_config: dict[str, int], _: Sequence) -> None:  # what a config without FUSE_O leaves to do
        if not state_config.get("FUSE_O", False):
            launch(chunk_o_fwd_kernel, (triton.cdiv(V, BVp), NT, B * H),
                   (q, G, Aqk, h_all, v_new, o, Rq, scale, T, NT),
                   dict(H=H, K=K, V=V, C=CHUNK, BK=BKp, BV=BVp, PREC=prec, NH=nh, NORM=norm),
                   candidates(OUT_CONFIGS, K, V))
    launch(chunk_state_fwd_kernel, lambda meta: (triton.cdiv(V, meta["BV"]), B * H),
           (q, k, v, beta, Tinv, w, u, G, Aqk, initial_state if initial_state is not None else G, ht, h_all, v_new,
            o, Rq, Rk, scale, T, NT),
           dict(H=H, K=K, V=V, C=CHUNK, BK=BK, NKB=NKB, USE_H0=initial_state is not None,
                STORE_HT=output_final_state, PREC=prec, NH=nh, SAVE=save, NORM=norm),
           configs, fallbacks, before=wu_pass, then=output_pass)
    kept = dict(G=G, Tinv=Tinv, Aqk=Aqk)
    return o, (ht if output_final_state else None), kept | (dict(w=w, h_all=h_all, v_new=v_new) if save else {})
