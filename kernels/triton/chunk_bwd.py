"""Backward of the chunked gated delta rule: a parallel pass for the within-chunk v_new gradient, a reverse
sequential pass for the state gradient, then two parallel per-chunk passes (gradients through the output and state
terms; gradients through the UT transform).

With dh' the gradient of the state after a chunk, Kd = K ⊙ e^{G_C − G}, Qg = Q ⊙ e^G:
    dv_new = Aqkᵀ do (parallel) + Kd dh';   dh = e^{G_C} dh' + scale Qgᵀ do − wᵀ dv_new        (sequential)
    dq = scale (do hᵀ) ⊙ e^G + (scale do v_newᵀ ⊙ D) K;  dk = (v_new dh'ᵀ) ⊙ e^{G_C − G} + (…)ᵀ Q;  dw = −dv_new hᵀ
    dT = dw (β e^G K)ᵀ + dv_new (β V)ᵀ,  dA = −Tᵀ dT Tᵀ, then through A = strict_lower(β_i k_i·k_j D_ij)
dg is the reverse cumulative sum, within the chunk, of dG = Σ q⊙dq − Σ k⊙dk (+ the terms of G_C and of β e^G K).
DeltaProduct_NH (NH > 1): every pass runs over the micro-rows; q, do, dq [B,T_tok,H,·] are read/written at each
token's last micro-row only and g's gradient dg [B,T_tok,H] is the micro-row dg (reverse cumsum over micro-rows, as
above) at its first micro-row, where g sits (see row_map).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .tuning import (
    OUT_CONFIGS,
    PAR_CONFIGS,
    candidates,
    dot_operand_dtype,
    launch,
    parallel_tiles,
    precision,
    state_blocks,
    state_configs,
)
from .utils import (
    CHUNK,
    add_trans_states,
    decay,
    dot_rows_states,
    load_gates,
    load_states,
    mm,
    row_map,
    store_states,
    tile,
    tok_base,
)


@triton.jit
def chunk_dv_local_bwd_kernel(
    Aqk, do, dv_new, T, H: tl.constexpr, V: tl.constexpr, C: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr,
    NH: tl.constexpr,
):
    """Grid (V / BV, NT, B·H). The within-chunk part of the v_new gradient, Aqkᵀ do, into dv_new (fp32)."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    tq = tok_base(i_b, i_h, T, H, NH)
    t0 = i_t * C
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    b_A = tl.load(Aqk + tok * C + p_c, mask=m_c, other=0.0)
    p, m = tile(t0, T, H, V, i_v * BV, C, BV)
    p_do, m_do = tile(t0, T, H, V, i_v * BV, C, BV, NH, NH - 1)
    b_do = tl.load(do + tq * V + p_do, mask=m_do, other=0.0)
    tl.store(dv_new + tok * V + p, mm(tl.trans(b_A), b_do, do, PREC), mask=m)


@triton.jit
def chunk_state_bwd_kernel(
    q, k, w, G, do, dht, dh_all, dv_local, dv_new, dh0,
    scale, T, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NKB: tl.constexpr,
    USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr,
):
    """Grid (V / BV, B·H); the state gradient [K, BV] lives in NKB ≤ 4 fp32 blocks [BK, BV]. Walks the chunks
    backwards; writes dh' of each chunk (dh_all [B,H,NT,K,V], k's dtype), dv_new = dv_local (Aqkᵀ do, fp32) +
    e^{G_C − G} ⊙ (K dh') (in its buffer's dtype) and the initial-state gradient."""
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    tq = tok_base(i_b, i_h, T, H, NH)
    rv = i_v * BV + tl.arange(0, BV)
    b_dh1, b_dh2, b_dh3, b_dh4 = load_states(dht + i_bh * K * V, rv, K, V, BK, BV, NKB, USE_DHT)
    for i_r in range(NT):
        i_t = NT - 1 - i_r
        t0 = i_t * C
        b_G, b_gl = load_gates(G + tok, t0, T, H, C)
        store_states(dh_all + (i_bh * NT + i_t) * K * V, b_dh1, b_dh2, b_dh3, b_dh4, rv, K, V, BK, NKB)
        p, m = tile(t0, T, H, V, i_v * BV, C, BV)
        b_kdh = dot_rows_states(k + tok * K, t0, T, H, K, b_dh1, b_dh2, b_dh3, b_dh4, C, BK, NKB, PREC)
        b_dv = tl.load(dv_local + tok * V + p, mask=m, other=0.0) + b_kdh * tl.exp(b_gl - b_G)[:, None]
        tl.store(dv_new + tok * V + p, b_dv.to(dv_new.dtype.element_ty), mask=m)
        p_do, m_do = tile(t0, T, H, V, i_v * BV, C, BV, NH, NH - 1)
        b_dos = tl.load(do + tq * V + p_do, mask=m_do, other=0.0).to(tl.float32) * (tl.exp(b_G) * scale)[:, None]
        b_dh1, b_dh2, b_dh3, b_dh4 = add_trans_states(b_dh1, b_dh2, b_dh3, b_dh4, tl.exp(b_gl), q + tq * K, t0, T,
                                                      H, K, b_dos, C, BK, NKB, PREC, NH, NH - 1)
        b_dh1, b_dh2, b_dh3, b_dh4 = add_trans_states(b_dh1, b_dh2, b_dh3, b_dh4, 1.0, w + tok * K, t0, T, H, K,
                                                      -b_dv, C, BK, NKB, PREC)
    if STORE_DH0:
        store_states(dh0 + i_bh * K * V, b_dh1, b_dh2, b_dh3, b_dh4, rv, K, V, BK, NKB)


@triton.jit
def chunk_dqk_bwd_kernel(
    q, k, G, h_all, dh_all, v_new, dv_new, do, dq, dk, dw, dG,
    scale, T, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr,
):
    """Grid (NT, B·H, K / BK). Gradients through the output and state terms: dq (final), dk [B,T,H,K] (fp32,
    partial), dw [B,T,H,K] (in its buffer's dtype) and this K block's share of dG ([NK,B,T,H] fp32, the G_C term
    included)."""
    i_t, i_bh, i_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    tq = tok_base(i_b, i_h, T, H, NH)
    t0 = i_t * C
    rows = t0 + tl.arange(0, C)
    rk = i_k * BK + tl.arange(0, BK)
    b_G, b_gl = load_gates(G + tok, t0, T, H, C)
    b_dqg = tl.zeros([C, BK], dtype=tl.float32)
    b_dkd = tl.zeros([C, BK], dtype=tl.float32)
    b_dw = tl.zeros([C, BK], dtype=tl.float32)
    b_dA = tl.zeros([C, C], dtype=tl.float32)
    b_dgl = 0.0
    h_base = (i_bh * NT + i_t) * K * V
    for i_v in range(tl.cdiv(V, BV)):
        rv = i_v * BV + tl.arange(0, BV)
        m_h = (rk[:, None] < K) & (rv[None, :] < V)
        p_h = rk[:, None] * V + rv[None, :]
        b_h = tl.load(h_all + h_base + p_h, mask=m_h, other=0.0)
        b_dh = tl.load(dh_all + h_base + p_h, mask=m_h, other=0.0)
        p, m = tile(t0, T, H, V, i_v * BV, C, BV)
        p_do, m_do = tile(t0, T, H, V, i_v * BV, C, BV, NH, NH - 1)
        b_do = tl.load(do + tq * V + p_do, mask=m_do, other=0.0)
        b_vn = tl.load(v_new + tok * V + p, mask=m, other=0.0)
        b_dvn = tl.load(dv_new + tok * V + p, mask=m, other=0.0)
        b_dqg += mm(b_do, tl.trans(b_h), k, PREC)
        b_dkd += mm(b_vn, tl.trans(b_dh), k, PREC)
        b_dw -= mm(b_dvn, tl.trans(b_h), k, PREC)
        b_dA += mm(b_do, tl.trans(b_vn), k, PREC)
        b_dgl += tl.sum(b_h.to(tl.float32) * b_dh.to(tl.float32))
    p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
    p_q, m_q = tile(t0, T, H, K, i_k * BK, C, BK, NH, NH - 1)
    b_q = tl.load(q + tq * K + p_q, mask=m_q, other=0.0).to(tl.float32)
    b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0).to(tl.float32)
    b_dA = b_dA * decay(b_G, C, False) * scale
    b_dq = b_dqg * (tl.exp(b_G) * scale)[:, None] + mm(b_dA, b_k, k, PREC)
    b_dk = b_dkd * tl.exp(b_gl - b_G)[:, None]
    b_dgl = b_dgl * tl.exp(b_gl) + tl.sum(b_dk * b_k)
    b_dk += mm(tl.trans(b_dA), b_q, k, PREC)
    b_dG = tl.sum(b_q * b_dq, axis=1) - tl.sum(b_k * b_dk, axis=1)
    b_dG = tl.where(rows == tl.minimum(t0 + C, T) - 1, b_dG + b_dgl, b_dG)
    tl.store(dq + tq * K + p_q, b_dq.to(dq.dtype.element_ty), mask=m_q)
    tl.store(dk + tok * K + p_k, b_dk, mask=m_k)
    tl.store(dw + tok * K + p_k, b_dw.to(dw.dtype.element_ty), mask=m_k)
    tl.store(dG + i_k * T * H * (tl.num_programs(1) // H) + tok + rows * H, b_dG, mask=rows < T)


@triton.jit
def chunk_wy_bwd_kernel(
    k, v, beta, G, Tinv, dw, dv_new, dk_part, dG_part, dk, dv, dbeta, dg,
    T, NK, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_G: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr,
):
    """Grid (NT, B·H). Gradients through w = T (β e^G K), u = T (β V), T = (I + A)^{-1}: final dk, dv, dβ and dg
    (dG_part summed over its NK blocks, then the reverse cumulative sum within the chunk over micro-rows; dg
    [B,T/NH,H] takes each token's first micro-row)."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    t0 = i_t * C
    rows = t0 + tl.arange(0, C)
    b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
    b_G, b_gl = load_gates(G + tok, t0, T, H, C)
    b_eG = tl.exp(b_G)
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    b_T = tl.load(Tinv + tok * C + p_c, mask=m_c, other=0.0)
    b_dT = tl.zeros([C, C], dtype=tl.float32)
    b_kk = tl.zeros([C, C], dtype=tl.float32)
    b_dbeta = tl.zeros([C], dtype=tl.float32)
    b_dG = tl.zeros([C], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        p_v, m_v = tile(t0, T, H, V, i_v * BV, C, BV)
        b_v = tl.load(v + tok * V + p_v, mask=m_v, other=0.0).to(tl.float32)
        b_du = tl.load(dv_new + tok * V + p_v, mask=m_v, other=0.0)
        b_dvb = mm(tl.trans(b_T), b_du, k, PREC)
        tl.store(dv + tok * V + p_v, (b_dvb * b_beta[:, None]).to(dv.dtype.element_ty), mask=m_v)
        b_dbeta += tl.sum(b_v * b_dvb, axis=1)
        b_dT += mm(b_du, tl.trans(b_v * b_beta[:, None]), k, PREC)
    for i_k in range(tl.cdiv(K, BK)):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0).to(tl.float32)
        b_dw = tl.load(dw + tok * K + p_k, mask=m_k, other=0.0)
        b_dkb = mm(tl.trans(b_T), b_dw, k, PREC)
        b_kg = b_k * b_eG[:, None]
        b_dbeta += tl.sum(b_kg * b_dkb, axis=1)
        b_dG += tl.sum(b_kg * b_dkb, axis=1) * b_beta
        b_dT += mm(b_dw, tl.trans(b_kg * b_beta[:, None]), k, PREC)
        b_kk += mm(b_k, tl.trans(b_k), k, PREC)
    b_D = decay(b_G, C, True)
    b_dA = -mm(mm(tl.trans(b_T), b_dT, k, PREC), tl.trans(b_T), k, PREC)
    b_dAe = b_dA * b_D
    b_dbeta += tl.sum(b_dAe * b_kk, axis=1)
    b_dAA = b_dAe * b_kk * b_beta[:, None]
    b_dG += tl.sum(b_dAA, axis=1) - tl.sum(b_dAA, axis=0)
    b_M = b_dAe * b_beta[:, None]
    b_M = b_M + tl.trans(b_M)
    for i_k in range(tl.cdiv(K, BK)):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0).to(tl.float32)
        b_dw = tl.load(dw + tok * K + p_k, mask=m_k, other=0.0)
        b_dk = tl.load(dk_part + tok * K + p_k, mask=m_k, other=0.0)
        b_dk += mm(tl.trans(b_T), b_dw, k, PREC) * (b_beta * b_eG)[:, None] + mm(b_M, b_k, k, PREC)
        tl.store(dk + tok * K + p_k, b_dk.to(dk.dtype.element_ty), mask=m_k)
    tl.store(dbeta + tok + rows * H, b_dbeta.to(dbeta.dtype.element_ty), mask=rows < T)
    if USE_G:
        BTH = tl.num_programs(1) // H * T * H
        for i_k in range(NK):
            b_dG += tl.load(dG_part + i_k * BTH + tok + rows * H, mask=rows < T, other=0.0)
        b_dg = tl.sum(b_dG, axis=0) - tl.cumsum(b_dG, axis=0) + b_dG
        r_g, m_g = row_map(t0, T, C, NH, 0)
        tl.store(dg + tok_base(i_b, i_h, T, H, NH) + r_g * H, b_dg.to(dg.dtype.element_ty), mask=m_g)


def chunk_bwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor, scale: float,
              initial_state: Tensor | None, do: Tensor, dht: Tensor | None, saved: dict[str, Tensor], nh: int = 1
              ) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor, Tensor | None]:
    """Gradients (dq, dk, dv, dg, dβ, dh0) in the inputs' dtypes (dh0 fp32), from the forward's saved tensors;
    shapes as in chunk_fwd (q, g, do, dq, dg with a row per token of nh micro-rows)."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    C = CHUNK
    NT = triton.cdiv(T, C)
    f32 = dict(dtype=torch.float32, device=q.device)
    prec = precision(q.dtype, K, V)
    G, Tinv, Aqk, w, h_all, v_new = (saved[n] for n in ("G", "Tinv", "Aqk", "w", "h_all", "v_new"))

    # dv_new and dw only ever enter dots: stored in the dots' operand dtype, they lose nothing (dot_operand_dtype)
    operand = dot_operand_dtype(q.dtype, K, V)
    dv_local = torch.empty(B, T, H, V, **f32)
    BKp, BVp = parallel_tiles(K, V)
    launch(chunk_dv_local_bwd_kernel, (triton.cdiv(V, BVp), NT, B * H), (Aqk, do, dv_local, T),
           dict(H=H, V=V, C=C, BV=BVp, PREC=prec, NH=nh), candidates(OUT_CONFIGS, K, V))
    dh_all = torch.empty_like(h_all)
    dv_new = torch.empty(B, T, H, V, dtype=operand, device=q.device)
    dh0 = torch.empty(B, H, K, V, **f32) if initial_state is not None else dv_local
    BK, NKB = state_blocks(K)
    configs, fallbacks = state_configs(K, BK, V, B * H)
    launch(chunk_state_bwd_kernel, lambda meta: (triton.cdiv(V, meta["BV"]), B * H),
           (q, k, w, G, do, dht if dht is not None else do, dh_all, dv_local, dv_new, dh0, scale, T, NT),
           dict(H=H, K=K, V=V, C=C, BK=BK, NKB=NKB, USE_DHT=dht is not None,
                STORE_DH0=initial_state is not None, PREC=prec, NH=nh), configs, fallbacks)

    BK, BV = BKp, BVp
    NK = triton.cdiv(K, BK)
    dq = torch.empty_like(q)
    dk_part = torch.empty(B, T, H, K, **f32)
    dw = torch.empty(B, T, H, K, dtype=operand, device=q.device)
    dG = torch.empty(NK, B, T, H, **f32)
    launch(chunk_dqk_bwd_kernel, (NT, B * H, NK),
           (q, k, G, h_all, dh_all, v_new, dv_new, do, dq, dk_part, dw, dG, scale, T, NT),
           dict(H=H, K=K, V=V, C=C, BK=BK, BV=BV, PREC=prec, NH=nh),
           candidates(PAR_CONFIGS, K, V))

    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    dbeta = torch.empty_like(beta)
    dg = torch.empty_like(g) if g is not None else None
    launch(chunk_wy_bwd_kernel, (NT, B * H),
           (k, v, beta, G, Tinv, dw, dv_new, dk_part, dG, dk, dv, dbeta, dg if dg is not None else dbeta, T, NK),
           dict(H=H, K=K, V=V, C=C, BK=BK, BV=BV, USE_G=g is not None, PREC=prec, NH=nh),
           candidates(PAR_CONFIGS, K, V))
    return dq, dk, dv, dg, dbeta, (dh0 if initial_state is not None else None)
