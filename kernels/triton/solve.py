"""(I + A)^{-1} of a strictly lower-triangular 64×64 chunk matrix, entirely in registers: the four 16×16 diagonal
blocks by forward substitution (all four at once, one row a step), then the rest in four [64, 64] products. With D
the inverses of the diagonal blocks and N = D·A_off (A_off: A below its diagonal blocks; N is strictly block-lower
with four block rows, so N⁴ = 0):
    (I + A)^{-1} = (I + N)^{-1} D = (I − N + N² − N³) D = (I − N(I − N(I − N))) D,
the last form keeping three [C, C] tiles live at a time (benchmarks/kernel-resources.md: fewer spills)."""
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
