"""(I + A)^{-1} of a strictly lower-triangular 64×64 chunk matrix held in registers as its ten 16×16 blocks on and
below the diagonal: the four diagonal blocks by forward substitution (four independent chains, one row a step), then
the block merge T_ij = −T_ii Σ_{j≤l<i} A_il T_lj with 16×16 dots. Nothing goes through global memory."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _subst_row(a, t, i):
    """Step i of the forward substitution of one 16×16 block: row i of t = (I + a)^{-1} from its final rows < i,
    t_i = e_i − Σ_{j<i} a_ij t_j (a strictly lower; rows ≥ i of t are not read)."""
    r = tl.arange(0, 16)
    a_i = tl.sum(tl.where(r[:, None] == i, a, 0.0), axis=0)  # row i of a, indexed by column (0 from column i on)
    t_i = tl.where(r == i, 1.0, 0.0) - tl.sum(a_i[:, None] * t, axis=0)
    return tl.where(r[:, None] == i, t_i[None, :], t)


@triton.jit
def inv_diag(a0, a1, a2, a3):
    """(I + a_b)^{-1} of four strictly lower-triangular [16, 16] fp32 blocks. Rows 0 and 1 of each inverse are those
    of I − a_b; rows 2..15 follow in 14 steps, each advancing all four blocks."""
    r = tl.arange(0, 16)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    t0, t1, t2, t3 = eye - a0, eye - a1, eye - a2, eye - a3
    for i in range(2, 16):
        t0 = _subst_row(a0, t0, i)
        t1 = _subst_row(a1, t1, i)
        t2 = _subst_row(a2, t2, i)
        t3 = _subst_row(a3, t3, i)
    return t0, t1, t2, t3


@triton.jit
def _mm(a, b, MP: tl.constexpr):
    return tl.dot(a, b, input_precision=MP)


@triton.jit
def merge(t00, t11, t22, t33, a10, a20, a21, a30, a31, a32, MP: tl.constexpr):
    """The blocks below the diagonal of T = (I + A)^{-1} (returned as t10, t20, t21, t30, t31, t32) from the
    diagonal blocks' inverses t_ii and A's blocks a_ij (i > j), all [16, 16] fp32; dots at input_precision MP."""
    t10 = -_mm(t11, _mm(a10, t00, MP), MP)
    t21 = -_mm(t22, _mm(a21, t11, MP), MP)
    t32 = -_mm(t33, _mm(a32, t22, MP), MP)
    t20 = -_mm(t22, _mm(a20, t00, MP) + _mm(a21, t10, MP), MP)
    t31 = -_mm(t33, _mm(a31, t11, MP) + _mm(a32, t21, MP), MP)
    t30 = -_mm(t33, _mm(a30, t00, MP) + _mm(a31, t10, MP) + _mm(a32, t20, MP), MP)
    return t10, t20, t21, t30, t31, t32
