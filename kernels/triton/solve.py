"""(I + A)^{-1} of a strictly lower-triangular 64×64 chunk matrix, in two forms.

`solve_tril`, entirely in registers: the four 16×16 diagonal blocks by forward substitution (all four at once, one
row a step), then the rest in four [64, 64] products. With D the inverses of the diagonal blocks and N = D·A_off
(A_off: A below its diagonal blocks; N is strictly block-lower with four block rows, so N⁴ = 0):
    (I + A)^{-1} = (I + N)^{-1} D = (I − N + N² − N³) D = (I − N(I − N(I − N))) D,
the last form keeping three [C, C] tiles live at a time (benchmarks/kernel-resources.md: fewer spills).

`solve_tril_blocks`, from A stored in memory (the program's own store, in L2): the same diagonal inverses, each
step's rows loaded from A (as fla's solve) instead of taken out of a register tile, then the six blocks below them
by block forward substitution, X_ij = −D_i Σ_{j≤k<i} A_ik X_kj, in sixteen 16×16 products where `solve_tril` spends
four 64×64 ones (16× the multiply-adds, mostly on zero blocks), and no [64, 64] tile live after A's store."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def inv_diag_blocks(a, C: tl.constexpr):
    """[C, C] block-diagonal (I + a_bb)^{-1} of the C / 16 diagonal 16×16 blocks a_bb of a strictly lower tile.
    The blocks are taken out stacked as x [C/16, 16, 16] (x[b, i, j] = a[16b + i, 16b + j]) and inverted together
    by forward substitution, one row a step: y_i = e_i − Σ_{j<i} x_ij y_j for all blocks at once, a reduction over
    16 rows of C/16 small blocks (a quarter of the elements of the [C, C] tile, which is where the step's time
    goes: studies/kernel-checks/solve_forms.py)."""
    NB: tl.constexpr = C // 16
    r = tl.arange(0, C)
    ri = tl.arange(0, 16)
    own = (r[:, None, None] // 16) == tl.arange(0, NB)[None, :, None]
    x = tl.reshape(tl.sum(tl.where(own, tl.reshape(a, [C, NB, 16]), 0.0), axis=1), [NB, 16, 16])
    y = tl.broadcast_to(tl.where(ri[:, None] == ri[None, :], 1.0, 0.0)[None, :, :], [NB, 16, 16])
    for i in tl.static_range(1, 16):
        x_i = tl.sum(tl.where(ri[None, :, None] == i, x, 0.0), axis=1)  # [NB, 16]: row i of every block
        y = substitute_row(y, x_i, i)
    return block_diag(y, C)


@triton.jit
def substitute_row(y, x_i, i: tl.constexpr):
    """One forward-substitution step of the stacked blocks y [NB, 16, 16] (rows < i done): row i becomes
    e_i − Σ_{j<i} x_ij y_j, with x_i [NB, 16] row i of every block."""
    ri = tl.arange(0, 16)
    y_i = tl.where(ri[None, :] == i, 1.0, 0.0) - tl.sum(x_i[:, :, None] * y, axis=1)
    return tl.where(ri[None, :, None] == i, y_i[:, None, :], y)


@triton.jit
def block_diag(y, C: tl.constexpr):
    """[C, C] block-diagonal matrix of the stacked 16×16 blocks y [C / 16, 16, 16]."""
    r = tl.arange(0, C)
    same = (r[:, None] // 16) == (r[None, :] // 16)
    wide = tl.reshape(tl.broadcast_to(tl.reshape(y, [C, 1, 16]), [C, C // 16, 16]), [C, C])  # row r's block, C/16 ×
    return tl.where(same, wide, 0.0)


@triton.jit
def solve_tril(a, C: tl.constexpr, MP: tl.constexpr):
    """(I + a)^{-1} [C, C] fp32 of a strictly lower-triangular fp32 tile a (C = 64); the four products at
    input_precision MP."""
    return merge_blocks(a, inv_diag_blocks(a, C), C, MP)


@triton.jit
def merge_blocks(a, d, C: tl.constexpr, MP: tl.constexpr):
    """(I + a)^{-1} = (I − N(I − N(I − N))) d from d [C, C], the block-diagonal inverse of a's 16×16 diagonal blocks
    (N = d·a_off); four products at input_precision MP, three [C, C] tiles live at a time."""
    r = tl.arange(0, C)
    eye = r[:, None] == r[None, :]
    n = tl.dot(d, tl.where((r[:, None] // 16) > (r[None, :] // 16), a, 0.0), input_precision=MP)
    t = tl.where(eye, 1.0, 0.0) - n
    t = tl.where(eye, 1.0, 0.0) - tl.dot(n, t, input_precision=MP)
    t = tl.where(eye, 1.0, 0.0) - tl.dot(n, t, input_precision=MP)
    return tl.dot(t, d, input_precision=MP)


@triton.jit
def inv_diag_rows(a, stride, t0, T, C: tl.constexpr):
    """[C/16, 16, 16] (I + A_bb)^{-1} of the C/16 diagonal 16×16 blocks of the strictly lower [C, C] A of the chunk
    at rows t0.. (fp32, row t at a + t·stride; rows ≥ T read as 0), by forward substitution on all blocks at once,
    each step loading row i of every block from memory."""
    NB: tl.constexpr = C // 16
    ri = tl.arange(0, 16)
    rb = tl.arange(0, NB)
    y = tl.broadcast_to(tl.where(ri[:, None] == ri[None, :], 1.0, 0.0)[None, :, :], [NB, 16, 16])
    for i in tl.static_range(1, 16):
        t = t0 + 16 * rb + i
        x_i = tl.load(a + t[:, None] * stride + 16 * rb[:, None] + ri[None, :], mask=(t < T)[:, None], other=0.0)
        y = substitute_row(y, x_i, i)
    return y


@triton.jit
def unstack4(y):
    """The four [16, 16] blocks of y [4, 16, 16]."""
    z = tl.reshape(tl.permute(y, (1, 2, 0)), [16, 16, 2, 2])  # z[:, :, b1, b0] = y[2·b1 + b0]
    even, odd = tl.split(z)
    y0, y2 = tl.split(even)
    y1, y3 = tl.split(odd)
    return y0, y1, y2, y3


@triton.jit
def _block_ptrs(base, stride, t0, T, i: tl.constexpr, j: tl.constexpr):
    """Addresses and row mask of the 16×16 block (i, j) of the chunk's [64, 64] tile at rows t0.. (row t at
    base + t·stride)."""
    r = t0 + 16 * i + tl.arange(0, 16)
    return base + r[:, None] * stride + 16 * j + tl.arange(0, 16)[None, :], (r < T)[:, None]


@triton.jit
def _load_block(a, stride, t0, T, i: tl.constexpr, j: tl.constexpr):
    p, m = _block_ptrs(a, stride, t0, T, i, j)
    return tl.load(p, mask=m, other=0.0)


@triton.jit
def _store_block(out, x, stride, t0, T, i: tl.constexpr, j: tl.constexpr):
    p, m = _block_ptrs(out, stride, t0, T, i, j)
    tl.store(p, x.to(out.dtype.element_ty), mask=m)


@triton.jit
def solve_tril_blocks(a, out, stride, t0, T, C: tl.constexpr, MP: tl.constexpr):
    """(I + A)^{-1} of the strictly lower [C, C] A (C = 64) at rows t0.. of a (fp32, row t at a + t·stride, stored
    by this program before a barrier) into out (same layout, out's dtype; zeros above the diagonal blocks): the
    diagonal inverses D_i (inv_diag_rows), then X_ij = −D_i Σ_{j≤k<i} A_ik X_kj, 16×16 products at input_precision
    MP."""
    tl.static_assert(C == 64)
    d0, d1, d2, d3 = unstack4(inv_diag_rows(a, stride, t0, T, C))
    a10 = _load_block(a, stride, t0, T, 1, 0)
    a20 = _load_block(a, stride, t0, T, 2, 0)
    a21 = _load_block(a, stride, t0, T, 2, 1)
    a30 = _load_block(a, stride, t0, T, 3, 0)
    a31 = _load_block(a, stride, t0, T, 3, 1)
    a32 = _load_block(a, stride, t0, T, 3, 2)
    x10 = -tl.dot(tl.dot(d1, a10, input_precision=MP), d0, input_precision=MP)
    x21 = -tl.dot(tl.dot(d2, a21, input_precision=MP), d1, input_precision=MP)
    x32 = -tl.dot(tl.dot(d3, a32, input_precision=MP), d2, input_precision=MP)
    s20 = tl.dot(a21, x10, tl.dot(a20, d0, input_precision=MP), input_precision=MP)
    x20 = -tl.dot(d2, s20, input_precision=MP)
    s31 = tl.dot(a32, x21, tl.dot(a31, d1, input_precision=MP), input_precision=MP)
    x31 = -tl.dot(d3, s31, input_precision=MP)
    s30 = tl.dot(a32, x20, tl.dot(a31, x10, tl.dot(a30, d0, input_precision=MP), input_precision=MP),
                 input_precision=MP)
    x30 = -tl.dot(d3, s30, input_precision=MP)
    _store_block(out, d0, stride, t0, T, 0, 0)
    _store_block(out, x10, stride, t0, T, 1, 0)
    _store_block(out, d1, stride, t0, T, 1, 1)
    _store_block(out, x20, stride, t0, T, 2, 0)
    _store_block(out, x21, stride, t0, T, 2, 1)
    _store_block(out, d2, stride, t0, T, 2, 2)
    _store_block(out, x30, stride, t0, T, 3, 0)
    _store_block(out, x31, stride, t0, T, 3, 1)
    _store_block(out, x32, stride, t0, T, 3, 2)
    _store_block(out, d3, stride, t0, T, 3, 3)
    for i in tl.static_range(3):  # the blocks above the diagonal
        for j in tl.static_range(i + 1, 4):
            _store_block(out, tl.zeros([16, 16], dtype=tl.float32), stride, t0, T, i, j)
