"""Device-side pieces shared by the Triton chunk kernels: tile addressing, gates, decay masks, dots, the state held
as row blocks in registers. (Tile sizes, configs and the launcher: tuning.py.)

Layout everywhere: a [B, T, H, D] tensor is read per (b, h) as rows t with stride H·D; [B, T, H] per-token scalars
with stride H. One program handles one chunk of C = 64 rows (or walks all chunks, for the state passes).
DeltaProduct_NH runs over T = T_tok·NH micro-rows: k, v, β and the intermediates have a row per micro-row, while
q, o, do, dq ([B, T_tok, H, ·]) and g, dg ([B, T_tok, H]) are read and written through row_map / tile with NH
(micro-row r is token r // NH, held only at one phase PH of r % NH: NH − 1 for q/o/do/dq, 0 for g/dg).
"""
from __future__ import annotations

import triton
import triton.language as tl

CHUNK = 64


@triton.jit
def row_map(t0, T, C: tl.constexpr, NH: tl.constexpr, PH: tl.constexpr):
    """Micro-rows t0.. of a chunk (T of them in all) as rows of a tensor with one row per token of NH micro-rows:
    the token index r // NH and whether that tensor holds micro-row r (r < T and r % NH == PH). NH = 1 (the plain
    rule, one token a row) is the identity: rows t0.. and r < T."""
    rows = t0 + tl.arange(0, C)
    if NH == 1:
        idx = rows
        keep = rows < T
    else:
        idx = rows // NH
        keep = (rows < T) & (rows % NH == PH)
    return idx, keep


@triton.jit
def tok_base(i_b, i_h, T, H, NH: tl.constexpr):
    """Offset of (b, token 0, h) in a [B, T / NH, H] tensor (T micro-rows, NH per token)."""
    if NH == 1:
        base = i_b * T * H + i_h
    else:
        base = i_b * (T // NH) * H + i_h
    return base


@triton.jit
def tile(t0, T, H, D, d0, C: tl.constexpr, BD: tl.constexpr, NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """Offsets and mask of the [C, BD] tile of micro-rows t0.. and columns d0.. of a [T / NH, H, D] slice: each
    micro-row r addresses token r // NH and is masked unless r % NH == PH (see row_map; NH = 1: rows t0.. of a
    [T, H, D] slice)."""
    rows, keep = row_map(t0, T, C, NH, PH)
    cols = d0 + tl.arange(0, BD)
    offs = rows[:, None] * (H * D) + cols[None, :]
    mask = keep[:, None] & (cols[None, :] < D)
    return offs, mask


@triton.jit
def load_gates(G_base, t0, T, H, C: tl.constexpr):
    """Cumulative log-gates G [C] of a chunk (padded rows carry the last valid value) and that last value gl."""
    rows = t0 + tl.arange(0, C)
    last = tl.minimum(t0 + C, T) - 1
    gl = tl.load(G_base + last * H)
    G = tl.load(G_base + rows * H, mask=rows < T, other=0.0)
    G = tl.where(rows < T, G, gl)
    return G, gl


@triton.jit
def decay(G, C: tl.constexpr, STRICT: tl.constexpr):
    """e^{G_i − G_j} on the causal part (i > j if STRICT else i ≥ j), 0 elsewhere; [C, C] fp32."""
    r = tl.arange(0, C)
    if STRICT:
        m = r[:, None] > r[None, :]
    else:
        m = r[:, None] >= r[None, :]
    return tl.where(m, tl.exp(tl.where(m, G[:, None] - G[None, :], 0.0)), 0.0)


@triton.jit
def mm(a, b, ref_ptr, PREC: tl.constexpr):
    """a @ b with fp32 accumulation. PREC (see precision): "half", operands in ref_ptr's dtype (an input's, bf16 or
    fp16, as fla's kernels); "ieee", exact fp32 operands (fp32 inputs); "tf32", fp32 operands at tf32."""
    if PREC == "half":
        dt = ref_ptr.dtype.element_ty
        out = tl.dot(a.to(dt), b.to(dt))
    else:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=PREC)
    return out


@triton.jit
def state_block(i_k, rv, K, V, BK: tl.constexpr):
    """Offsets and mask of rows i_k·BK.. and columns rv of a [K, V] state."""
    rk = i_k * BK + tl.arange(0, BK)
    return rk[:, None] * V + rv[None, :], (rk[:, None] < K) & (rv[None, :] < V)


@triton.jit
def load_state(base, i_k, rv, K, V, BK: tl.constexpr):
    """The [BK, BV] block of rows i_k·BK.. and columns rv of the [K, V] state at `base`, as stored."""
    p, m = state_block(i_k, rv, K, V, BK)
    return tl.load(base + p, mask=m, other=0.0)


@triton.jit
def store_state(base, b_s, i_k, rv, K, V, BK: tl.constexpr):
    """Store the fp32 block b_s [BK, BV] at rows i_k·BK.. and columns rv of the [K, V] state at `base`."""
    p, m = state_block(i_k, rv, K, V, BK)
    tl.store(base + p, b_s.to(base.dtype.element_ty), mask=m)


@triton.jit
def dot_rows(x, t0, T, H, K, i_k, b_s, C: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
             NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """X[chunk, K block i_k] @ b_s → [C, BV] fp32, for X [T, H, K] at `x` (or [T / NH, H, K], rows mapped as in
    tile) and b_s [BK, BV] (cast to X's dtype)."""
    p, m = tile(t0, T, H, K, i_k * BK, C, BK, NH, PH)
    b_x = tl.load(x + p, mask=m, other=0.0)
    return _dot_as(b_x, b_s, PREC)


@triton.jit
def dot_trans(x, t0, T, H, K, i_k, b_r, C: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
              NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """X[chunk, K block i_k]ᵀ @ b_r → [BK, BV] fp32, for X [T, H, K] at `x` (or [T / NH, H, K], rows mapped as in
    tile) and b_r [C, BV] (cast to X's dtype)."""
    p, m = tile(t0, T, H, K, i_k * BK, C, BK, NH, PH)
    b_x = tl.load(x + p, mask=m, other=0.0)
    return _dot_as(tl.trans(b_x), b_r, PREC)


@triton.jit
def _dot_as(a, b, PREC: tl.constexpr):
    """a @ b with b cast to a's dtype (the state passes: operands in the inputs' dtype; PREC as in mm)."""
    if PREC == "half":
        out = tl.dot(a, b.to(a.dtype))
    else:
        out = tl.dot(a, b.to(a.dtype), input_precision=PREC)
    return out


@triton.jit
def load_states(base, rv, K, V, BK: tl.constexpr, BV: tl.constexpr, NKB: tl.constexpr, LOAD: tl.constexpr):
    """A [K, BV] state column block as four fp32 [BK, BV] row blocks: the first NKB loaded from `base` if LOAD,
    the rest (and all of them otherwise) zeros."""
    b1 = tl.zeros([BK, BV], dtype=tl.float32)
    b2 = tl.zeros([BK, BV], dtype=tl.float32)
    b3 = tl.zeros([BK, BV], dtype=tl.float32)
    b4 = tl.zeros([BK, BV], dtype=tl.float32)
    if LOAD:
        b1 += load_state(base, 0, rv, K, V, BK).to(tl.float32)
        if NKB > 1:
            b2 += load_state(base, 1, rv, K, V, BK).to(tl.float32)
        if NKB > 2:
            b3 += load_state(base, 2, rv, K, V, BK).to(tl.float32)
        if NKB > 3:
            b4 += load_state(base, 3, rv, K, V, BK).to(tl.float32)
    return b1, b2, b3, b4


@triton.jit
def store_states(base, b1, b2, b3, b4, rv, K, V, BK: tl.constexpr, NKB: tl.constexpr):
    """Store the first NKB row blocks of a state column block (see load_states) at `base`."""
    store_state(base, b1, 0, rv, K, V, BK)
    if NKB > 1:
        store_state(base, b2, 1, rv, K, V, BK)
    if NKB > 2:
        store_state(base, b3, 2, rv, K, V, BK)
    if NKB > 3:
        store_state(base, b4, 3, rv, K, V, BK)


@triton.jit
def dot_rows_states(x, t0, T, H, K, b1, b2, b3, b4, C: tl.constexpr, BK: tl.constexpr, NKB: tl.constexpr,
                    PREC: tl.constexpr, NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """X[chunk] @ S → [C, BV] fp32, for X [T, H, K] at `x` (or [T / NH, H, K], rows mapped as in tile) and the state
    column block S given as row blocks."""
    acc = dot_rows(x, t0, T, H, K, 0, b1, C, BK, PREC, NH, PH)
    if NKB > 1:
        acc += dot_rows(x, t0, T, H, K, 1, b2, C, BK, PREC, NH, PH)
    if NKB > 2:
        acc += dot_rows(x, t0, T, H, K, 2, b3, C, BK, PREC, NH, PH)
    if NKB > 3:
        acc += dot_rows(x, t0, T, H, K, 3, b4, C, BK, PREC, NH, PH)
    return acc


@triton.jit
def add_trans_states(b1, b2, b3, b4, decay, x, t0, T, H, K, b_r, C: tl.constexpr, BK: tl.constexpr,
                     NKB: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """decay · S + X[chunk]ᵀ b_r for the state column block S (row blocks b1..b4), X [T, H, K] at `x` (or
    [T / NH, H, K], rows mapped as in tile), b_r [C, BV]; blocks beyond NKB come back unchanged."""
    b1 = b1 * decay + dot_trans(x, t0, T, H, K, 0, b_r, C, BK, PREC, NH, PH)
    if NKB > 1:
        b2 = b2 * decay + dot_trans(x, t0, T, H, K, 1, b_r, C, BK, PREC, NH, PH)
    if NKB > 2:
        b3 = b3 * decay + dot_trans(x, t0, T, H, K, 2, b_r, C, BK, PREC, NH, PH)
    if NKB > 3:
        b4 = b4 * decay + dot_trans(x, t0, T, H, K, 3, b_r, C, BK, PREC, NH, PH)
    return b1, b2, b3, b4


@triton.jit
def load_row_blocks(x, t0, T, H, K, C: tl.constexpr, BK: tl.constexpr, NKB: tl.constexpr):
    """A chunk's rows of X [T, H, K] at `x` as NKB ≤ 4 column blocks [C, BK] in X's dtype (the rest zeros): loaded
    once for two products of a step (dot_blocks_states, add_trans_blocks)."""
    p, m = tile(t0, T, H, K, 0, C, BK)
    x1 = tl.load(x + p, mask=m, other=0.0)
    x2 = tl.zeros([C, BK], dtype=x1.dtype)
    x3 = tl.zeros([C, BK], dtype=x1.dtype)
    x4 = tl.zeros([C, BK], dtype=x1.dtype)
    if NKB > 1:
        p, m = tile(t0, T, H, K, BK, C, BK)
        x2 = tl.load(x + p, mask=m, other=0.0)
    if NKB > 2:
        p, m = tile(t0, T, H, K, 2 * BK, C, BK)
        x3 = tl.load(x + p, mask=m, other=0.0)
    if NKB > 3:
        p, m = tile(t0, T, H, K, 3 * BK, C, BK)
        x4 = tl.load(x + p, mask=m, other=0.0)
    return x1, x2, x3, x4


@triton.jit
def dot_blocks_states(x1, x2, x3, x4, b1, b2, b3, b4, NKB: tl.constexpr, PREC: tl.constexpr):
    """X @ S → [C, BV] fp32 for X given as column blocks (load_row_blocks) and the state column block S as row
    blocks (as dot_rows_states, without loading X)."""
    acc = _dot_as(x1, b1, PREC)
    if NKB > 1:
        acc += _dot_as(x2, b2, PREC)
    if NKB > 2:
        acc += _dot_as(x3, b3, PREC)
    if NKB > 3:
        acc += _dot_as(x4, b4, PREC)
    return acc


@triton.jit
def add_trans_blocks(b1, b2, b3, b4, decay, x1, x2, x3, x4, b_r, NKB: tl.constexpr, PREC: tl.constexpr):
    """decay · S + Xᵀ b_r for the state column block S (row blocks b1..b4) and X given as column blocks
    (load_row_blocks), b_r [C, BV] (as add_trans_states, without loading X)."""
    b1 = b1 * decay + _dot_as(tl.trans(x1), b_r, PREC)
    if NKB > 1:
        b2 = b2 * decay + _dot_as(tl.trans(x2), b_r, PREC)
    if NKB > 2:
        b3 = b3 * decay + _dot_as(tl.trans(x3), b_r, PREC)
    if NKB > 3:
        b4 = b4 * decay + _dot_as(tl.trans(x4), b_r, PREC)
    return b1, b2, b3, b4
