"""(I + A)^{-1} of a strictly lower-triangular 64×64 chunk matrix, entirely in registers: the four 16×16 diagonal
blocks by forward substitution on the [64, 64] tile (all four at once, one row a step), then the rest in four
[64, 64] products. With D the inverses of the diagonal blocks and N = D·A_off (A_off: A below its diagonal blocks;
N is strictly block-lower with four block rows, so N⁴ = 0):
    (I + A)^{-1} = (I + N)^{-1} D = (I − N)(I + N²) D."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _inv_diag(a, C: tl.constexpr):
    """[C, C] (C = 64) block-diagonal (I + a_bb)^{-1} of the four 16×16 diagonal blocks a_bb of a strictly lower
    tile. Built column by column in its transpose u (u = Dᵀ; column i of u is row i of D): step i computes row i of
    all four inverses from their rows < i, D_i = e_i − Σ_{j<i} a_ij D_j, as u · a_i, a reduction within rows of u.
    The rows a_i come from s [16, C], row i of every diagonal block side by side, summed once over the four block
    rows; in the dot layout the tile comes in (16 rows a warp) neither step exchanges data between warps."""
    r = tl.arange(0, C)
    same = (r[:, None] // 16) == (r[None, :] // 16)
    s = tl.sum(tl.reshape(tl.where(same, a, 0.0), [C // 16, 16, C]), axis=0)  # s[i, c] = a[16(c//16) + i, c]
    ri = tl.arange(0, 16)
    u = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    for i in tl.static_range(1, 16):
        a_i = tl.sum(tl.where(ri[:, None] == i, s, 0.0), axis=0)
        d_i = tl.where(r % 16 == i, 1.0, -tl.sum(u * a_i[None, :], axis=1))
        u = tl.where((r[None, :] % 16 == i) & same, d_i[:, None], u)
    return tl.trans(u)


@triton.jit
def solve_tril(a, C: tl.constexpr, MP: tl.constexpr):
    """(I + a)^{-1} [C, C] fp32 of a strictly lower-triangular fp32 tile a (C = 64); the four products at
    input_precision MP."""
    r = tl.arange(0, C)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    d = _inv_diag(a, C)
    n = tl.dot(d, tl.where((r[:, None] // 16) > (r[None, :] // 16), a, 0.0), input_precision=MP)
    m = tl.dot(eye - n, eye + tl.dot(n, n, input_precision=MP), input_precision=MP)
    return tl.dot(m, d, input_precision=MP)
