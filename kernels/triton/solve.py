"""(I + A)^{-1} of a strictly lower-triangular 64×64 chunk matrix, in place in global memory: forward substitution
on the four 16×16 diagonal blocks at once, then the block merge (T_ij = −T_ii Σ_{j≤l<i} A_il T_lj). The caller puts
a barrier before and after (the matrix is written and re-read by the same program)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _block(base, t0, T, H, C: tl.constexpr, bi: tl.constexpr, bj: tl.constexpr):
    """Offsets and mask of the 16×16 block (bi, bj) of the chunk's [C, C] rows (stride H·C)."""
    r = tl.arange(0, 16)
    rows = t0 + bi * 16 + r
    return rows[:, None] * (H * C) + bj * 16 + r[None, :], (rows[:, None] < T)


@triton.jit
def _load(base, t0, T, H, C: tl.constexpr, bi: tl.constexpr, bj: tl.constexpr):
    p, m = _block(base, t0, T, H, C, bi, bj)
    return tl.load(base + p, mask=m, other=0.0)


@triton.jit
def _store(base, x, t0, T, H, C: tl.constexpr, bi: tl.constexpr, bj: tl.constexpr):
    p, m = _block(base, t0, T, H, C, bi, bj)
    tl.store(base + p, x, mask=m)


@triton.jit
def _diag_row(base, t0, T, H, C: tl.constexpr, i):
    """[C]: row i of each 16×16 diagonal block of A in that block's columns, entries j < i only (rows ≥ T: 0)."""
    r = tl.arange(0, C)
    row = t0 + (r // 16) * 16 + i
    return tl.load(base + row * (H * C) + r, mask=(row < T) & (r % 16 < i), other=0.0)


@triton.jit
def _inv_diag(base, t0, T, H, C: tl.constexpr):
    """Overwrite the four 16×16 diagonal blocks of A with their inverses (I + A_bb)^{-1}. One [C, C] register tile
    holds all four (block diagonal, from the identity); step i builds row i of every inverse from row i of every
    block, T_i = e_i − Σ_{j<i} A_ij T_j, with one reduction, while the rows of step i + 1 load."""
    r = tl.arange(0, C)
    same = (r[:, None] // 16) == (r[None, :] // 16)
    t = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    a = _diag_row(base, t0, T, H, C, 1)
    for i in range(1, 16):  # row 0 of every inverse is e_0
        a_next = _diag_row(base, t0, T, H, C, tl.minimum(i + 1, 15))  # the last one is unused
        t_i = tl.where(r % 16 == i, 1.0, -tl.sum(a[:, None] * t, axis=0))
        t = tl.where((r[:, None] % 16 == i) & same, t_i[None, :], t)
        a = a_next
    tl.debug_barrier()  # every row of A's diagonal blocks has been read
    rows = t0 + r
    tl.store(base + rows[:, None] * (H * C) + r[None, :], t, mask=same & (rows[:, None] < T))


@triton.jit
def _mm(a, b):
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def solve_tril_64(base, t0, T, H, C: tl.constexpr):
    """Overwrite the chunk's A (rows t0.., stride H·C from `base`, C = 64) with (I + A)^{-1}; the blocks above the
    diagonal are already 0."""
    _inv_diag(base, t0, T, H, C)
    tl.debug_barrier()
    t11 = _load(base, t0, T, H, C, 0, 0)
    t22 = _load(base, t0, T, H, C, 1, 1)
    t33 = _load(base, t0, T, H, C, 2, 2)
    t44 = _load(base, t0, T, H, C, 3, 3)
    a21 = _load(base, t0, T, H, C, 1, 0)
    a31 = _load(base, t0, T, H, C, 2, 0)
    a32 = _load(base, t0, T, H, C, 2, 1)
    a41 = _load(base, t0, T, H, C, 3, 0)
    a42 = _load(base, t0, T, H, C, 3, 1)
    a43 = _load(base, t0, T, H, C, 3, 2)
    t21 = -_mm(t22, _mm(a21, t11))
    t32 = -_mm(t33, _mm(a32, t22))
    t43 = -_mm(t44, _mm(a43, t33))
    t31 = -_mm(t33, _mm(a31, t11) + _mm(a32, t21))
    t42 = -_mm(t44, _mm(a42, t22) + _mm(a43, t32))
    t41 = -_mm(t44, _mm(a41, t11) + _mm(a42, t21) + _mm(a43, t31))
    tl.debug_barrier()
    _store(base, t21, t0, T, H, C, 1, 0)
    _store(base, t31, t0, T, H, C, 2, 0)
    _store(base, t32, t0, T, H, C, 2, 1)
    _store(base, t41, t0, T, H, C, 3, 0)
    _store(base, t42, t0, T, H, C, 3, 1)
    _store(base, t43, t0, T, H, C, 3, 2)
