"""The short causal depthwise convolution with its SiLU, one pass each way (kernels.reference.short_conv_silu's math).

    z_t = Σ_j w_j x_{t−K+1+j}  (x_{<0} = 0; fp32),   y_t = SiLU(z_t) in x's dtype
    dz_t = dy_t · σ(z_t) (1 + z_t (1 − σ(z_t))),   dx_t = Σ_j w_j dz_{t+K−1−j},   dw_j = Σ_{b,t} dz_t x_{t−K+1+j}

x, y [B, T, C] (channels contiguous), w [C, K] fp32. The backward recomputes z, at the tile's T rows and the K − 1
rows after it that dx needs, from shifted loads of x (L1/L2 serve the repeats): its DRAM traffic is x, dy and dx
once, and a [B · T / BT, C, K] fp32 buffer of per-program dw sums that one torch sum reduces (no atomics: the same
dw on every run).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

BT, BC = 32, 64  # time rows and channels per program


@triton.jit
def _z(x, w, t, c, T, C, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """z at rows t [BT] and channels c [BC] of one sequence (x at its start), fp32 [BT, BC]."""
    acc = tl.zeros([BT, BC], dtype=tl.float32)
    for j in tl.static_range(K):
        ts = t - (K - 1) + j
        m = ((ts >= 0) & (ts < T))[:, None] & (c < C)[None, :]
        b_x = tl.load(x + ts[:, None] * C + c[None, :], mask=m, other=0.0).to(tl.float32)
        acc += b_x * tl.load(w + c * K + j, mask=c < C, other=0.0)[None, :]
    return acc


@triton.jit
def _dz(x, w, dy, t, c, T, C, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """dy · SiLU'(z) at rows t, channels c; 0 at rows ≥ T (no output there). fp32 [BT, BC]."""
    b_z = _z(x, w, t, c, T, C, K, BT, BC)
    m = (t < T)[:, None] & (c < C)[None, :]
    b_dy = tl.load(dy + t[:, None] * C + c[None, :], mask=m, other=0.0).to(tl.float32)
    s = tl.sigmoid(b_z)
    return b_dy * s * (1.0 + b_z * (1.0 - s))


@triton.jit
def short_conv_fwd_kernel(x, w, y, T, C, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """Grid (T / BT, C / BC, B)."""
    i_t, i_c, i_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    t = i_t * BT + tl.arange(0, BT)
    c = i_c * BC + tl.arange(0, BC)
    x += i_b * T * C
    y += i_b * T * C
    b_z = _z(x, w, t, c, T, C, K, BT, BC)
    m = (t < T)[:, None] & (c < C)[None, :]
    tl.store(y + t[:, None] * C + c[None, :], (b_z * tl.sigmoid(b_z)).to(y.dtype.element_ty), mask=m)


@triton.jit
def short_conv_bwd_kernel(x, w, dy, dx, dw, T, C, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """Grid (T / BT, C / BC, B). dw: [B · T / BT, C, K] fp32, this program's sums over its rows."""
    i_t, i_c, i_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    t = i_t * BT + tl.arange(0, BT)
    c = i_c * BC + tl.arange(0, BC)
    x += i_b * T * C
    dy += i_b * T * C
    dx += i_b * T * C
    dw += ((i_b * tl.num_programs(0) + i_t) * C) * K
    b_dz = _dz(x, w, dy, t, c, T, C, K, BT, BC)
    b_dx = b_dz * tl.load(w + c * K + (K - 1), mask=c < C, other=0.0)[None, :]
    for j in tl.static_range(K):
        ts = t - (K - 1) + j
        m = ((ts >= 0) & (ts < T))[:, None] & (c < C)[None, :]
        b_x = tl.load(x + ts[:, None] * C + c[None, :], mask=m, other=0.0).to(tl.float32)
        tl.store(dw + c * K + j, tl.sum(b_dz * b_x, axis=0), mask=c < C)
    for s in tl.static_range(1, K):  # dz at the rows s ahead, through tap K − 1 − s
        b_w = tl.load(w + c * K + (K - 1 - s), mask=c < C, other=0.0)
        b_dx += _dz(x, w, dy, t + s, c, T, C, K, BT, BC) * b_w[None, :]
    m = (t < T)[:, None] & (c < C)[None, :]
    tl.store(dx + t[:, None] * C + c[None, :], b_dx.to(dx.dtype.element_ty), mask=m)


def _grid(x: Tensor) -> tuple[int, int, int]:
    B, T, C = x.shape
    return triton.cdiv(T, BT), triton.cdiv(C, BC), B


@torch.library.custom_op("deltamup::short_conv_fwd", mutates_args=())
def short_conv_fwd(x: Tensor, w: Tensor) -> Tensor:
    """x [B, T, C] contiguous, w [C, K] fp32 contiguous -> SiLU(causal conv) [B, T, C] in x's dtype."""
    y = torch.empty_like(x)
    short_conv_fwd_kernel[_grid(x)](x, w, y, x.shape[1], x.shape[2], K=w.shape[1], BT=BT, BC=BC, num_warps=4)
    return y


@torch.library.custom_op("deltamup::short_conv_bwd", mutates_args=())
def short_conv_bwd(x: Tensor, w: Tensor, dy: Tensor) -> tuple[Tensor, Tensor]:
    """dx [B, T, C] (x's dtype) and dw [C, K] (fp32) from x, w and dy (contiguous)."""
    grid = _grid(x)
    dx = torch.empty_like(x)
    dw = torch.empty(grid[0] * grid[2], *w.shape, device=x.device, dtype=torch.float32)
    short_conv_bwd_kernel[grid](x, w, dy, dx, dw, x.shape[1], x.shape[2], K=w.shape[1], BT=BT, BC=BC, num_warps=4)
    return dx, dw.sum(0)


@short_conv_fwd.register_fake
def _(x: Tensor, w: Tensor) -> Tensor:
    return torch.empty_like(x)


@short_conv_bwd.register_fake
def _(x: Tensor, w: Tensor, dy: Tensor) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(w, dtype=torch.float32)


def _setup(ctx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _backward(ctx, dy: Tensor) -> tuple[Tensor, Tensor]:
    x, w = ctx.saved_tensors
    dx, dw = short_conv_bwd(x, w, dy.contiguous())
    return dx, dw.to(w.dtype)


short_conv_fwd.register_autograd(_backward, setup_context=_setup)


def short_conv_silu_triton(x: Tensor, weight: Tensor) -> Tensor:
    """SiLU(causal depthwise conv): x [B, T, C], weight [C, K] -> [B, T, C] in x's dtype, differentiable in both."""
    return short_conv_fwd(x.contiguous(), weight.float().contiguous())
