"""The short causal depthwise convolution with its SiLU, and optionally the L2 norm of each group of channels after
it (q's and k's heads): one pass forward, one or two backward (kernels.reference.short_conv_silu's math, then
l2_normalize's).

    z_t = Σ_j w_j x_{t−K+1+j}  (x_{<0} = 0; fp32),   y_t = SiLU(z_t),   out_t = y_t or y_t · r_t per group,
    r_t = (Σ_group y_t² + eps)^{-1/2};   backward: dy = r (dout − ŷ Σ_group ŷ·dout) with ŷ = y r (or dout),
    dz_t = dy_t · σ(z_t) (1 + z_t (1 − σ(z_t))),   dx_t = Σ_j w_j dz_{t+K−1−j},   dw_j = Σ_{b,t} dz_t x_{t−K+1+j}

x, out [B, T, C] (channels contiguous), w [C, K] fp32. A program holds one channel block of BC (64 channels, or one
whole group padded to a power of two with the norm) and a tuned number of rows. The forward reads K
shifted tiles of x (L1/L2 serve the repeats). The backward's first pass computes dz at its rows (z again from
shifted loads of x, the norm's backward within the group) and sums dw over its rows into a [programs along T · B,
C, K] fp32 buffer that one torch sum reduces (no atomics: the same dw on every run), and writes dz to an fp32
[B, T, C] buffer; the second pass forms dx from K shifted tiles of it (DRAM traffic: x, dout and dx once, dz written
and read once). A form with dx in the first pass (programs overlapping by K − 1 rows, the row shifts as 0/1 matrix
products) was timed against this one on an H200 and lost at every shape (benchmarks/short-conv.md).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import triton
import triton.language as tl
from torch import Tensor

from .l2norm import EPS as L2_EPS
from .tuning import launch, register_op

BLOCK_C = 64  # channels a program holds without the norm
EPS = tl.constexpr(L2_EPS)  # the L2 norm's
# Each kernel's candidates, timed on a GPU per shape by tuning.launch, the first on a CPU or at symbolic sizes.
# TILE: rows × channels a program holds (TILE / BC rows). Warps and tiles change no element's arithmetic, only the
# order of the sums over a row's channels (the norm) and over a program's rows (dw). On an H200 a 2048-element tile
# at 2 warps timed fastest (or within 3%) for all three passes at the width-1024 model's shapes; with 256-channel
# heads a 4096-element tile took 17% off (benchmarks/short-conv.md).
FWD_CONFIGS = tuple(dict(TILE=tile, num_warps=warps) for tile in (2048, 4096, 8192) for warps in (2, 4, 8))
# The backward's first pass: the forward's tiles (and grid), at 2 or 4 warps
BWD_CONFIGS = tuple(dict(TILE=tile, num_warps=warps) for tile in (2048, 4096, 8192) for warps in (2, 4))
CONFIGS = {"short_conv_fwd_kernel": FWD_CONFIGS, "short_conv_bwd_kernel": BWD_CONFIGS,
           "short_conv_dx_kernel": FWD_CONFIGS}
MAX_GROUP = 2048  # the norm's group must fit one program's tile: a row at the smallest TILE


@triton.jit
def _program(C, D, BT: tl.constexpr, BC: tl.constexpr):
    """This program's rows t [BT], channels c [BC] (D of them its own), the channels of them that exist, and its
    sequence."""
    t = tl.program_id(0) * BT + tl.arange(0, BT)
    c = tl.program_id(1) * D + tl.arange(0, BC)
    return t, c, (tl.arange(0, BC) < D) & (c < C), tl.program_id(2)


@triton.jit
def _z(x, w, t, c, cm, T, C, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """z at rows t [BT] and channels c [BC] (cm: the channels that exist) of one sequence (x at its start)."""
    acc = tl.zeros([BT, BC], dtype=tl.float32)
    for j in tl.static_range(K):
        ts = t - (K - 1) + j
        m = ((ts >= 0) & (ts < T))[:, None] & cm[None, :]
        b_x = tl.load(x + ts[:, None] * C + c[None, :], mask=m, other=0.0).to(tl.float32)
        acc += b_x * tl.load(w + c * K + j, mask=cm, other=0.0)[None, :]
    return acc


@triton.jit
def _dz(x, w, dout, t, c, cm, T, C, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, NORM: tl.constexpr):
    """The gradient at z, rows t, channels c; 0 at rows ≥ T (no output there). fp32 [BT, BC]."""
    b_z = _z(x, w, t, c, cm, T, C, K, BT, BC)
    m = (t < T)[:, None] & cm[None, :]
    b_dy = tl.load(dout + t[:, None] * C + c[None, :], mask=m, other=0.0).to(tl.float32)
    s = tl.sigmoid(b_z)
    if NORM:
        b_y = b_z * s
        b_r = 1.0 / tl.sqrt(tl.sum(b_y * b_y, axis=1) + EPS)
        b_yn = b_y * b_r[:, None]
        b_dy = (b_dy - b_yn * tl.sum(b_yn * b_dy, axis=1)[:, None]) * b_r[:, None]
    return b_dy * s * (1.0 + b_z * (1.0 - s))


@triton.jit
def short_conv_fwd_kernel(x, w, out, T, C, D, K: tl.constexpr, TILE: tl.constexpr, BC: tl.constexpr,
                          NORM: tl.constexpr):
    """Grid (T / BT, C / D, B) with BT = TILE / BC; D channels a program (BC ≥ D, a power of two)."""
    BT: tl.constexpr = TILE // BC
    t, c, cm, i_b = _program(C, D, BT, BC)
    x += i_b * T * C
    out += i_b * T * C
    b_z = _z(x, w, t, c, cm, T, C, K, BT, BC)
    b_y = b_z * tl.sigmoid(b_z)
    if NORM:
        b_y = b_y / tl.sqrt(tl.sum(b_y * b_y, axis=1) + EPS)[:, None]
    m = (t < T)[:, None] & cm[None, :]
    tl.store(out + t[:, None] * C + c[None, :], b_y.to(out.dtype.element_ty), mask=m)


@triton.jit
def short_conv_bwd_kernel(x, w, dout, dz, dw, T, C, D, K: tl.constexpr, TILE: tl.constexpr, BC: tl.constexpr,
                          NORM: tl.constexpr):
    """Backward, first pass. Grid (T / BT, C / D, B) with BT = TILE / BC: dz [B, T, C] fp32 at this program's rows,
    dw [B · T / BT, C, K] fp32 their sums."""
    BT: tl.constexpr = TILE // BC
    t, c, cm, i_b = _program(C, D, BT, BC)
    x += i_b * T * C
    dw += ((i_b * tl.num_programs(0) + tl.program_id(0)) * C) * K
    b_dz = _dz(x, w, dout + i_b * T * C, t, c, cm, T, C, K, BT, BC, NORM)  # 0 at rows ≥ T
    for j in tl.static_range(K):
        ts = t - (K - 1) + j
        m = ((ts >= 0) & (ts < T))[:, None] & cm[None, :]
        b_x = tl.load(x + ts[:, None] * C + c[None, :], mask=m, other=0.0).to(tl.float32)
        tl.store(dw + c * K + j, tl.sum(b_dz * b_x, axis=0), mask=cm)
    m = (t < T)[:, None] & cm[None, :]
    tl.store(dz + i_b * T * C + t[:, None] * C + c[None, :], b_dz, mask=m)


@triton.jit
def short_conv_dx_kernel(dz, w, dx, T, C, K: tl.constexpr, TILE: tl.constexpr, BC: tl.constexpr):
    """Backward, second pass. Grid (T / BT, C / BC, B) with BT = TILE / BC: dx_t = Σ_s w_{K−1−s} dz_{t+s} (dz beyond
    T is 0)."""
    BT: tl.constexpr = TILE // BC
    t, c, cm, i_b = _program(C, BC, BT, BC)
    dz += i_b * T * C
    dx += i_b * T * C
    b_dx = tl.zeros([BT, BC], dtype=tl.float32)
    for s in tl.static_range(K):
        m = (t + s < T)[:, None] & cm[None, :]
        b_w = tl.load(w + c * K + (K - 1 - s), mask=cm, other=0.0)
        b_dx += tl.load(dz + (t + s)[:, None] * C + c[None, :], mask=m, other=0.0) * b_w[None, :]
    m = (t < T)[:, None] & cm[None, :]
    tl.store(dx + t[:, None] * C + c[None, :], b_dx.to(dx.dtype.element_ty), mask=m)


def _tiles(x: Tensor, group: int) -> tuple[Callable[[dict[str, int]], tuple[int, int, int]], dict[str, int]]:
    """The grid (of a config's TILE) and the constexprs/sizes for x [B, T, C] and a norm group (0: none)."""
    B, T, C = x.shape
    D = group or BLOCK_C
    BC = triton.next_power_of_2(D)
    return lambda meta: (triton.cdiv(T, meta["TILE"] // BC), triton.cdiv(C, D), B), dict(D=D, BC=BC, NORM=group > 0)


@register_op("deltamup::short_conv_fwd", mutates_args=())
def short_conv_fwd(x: Tensor, w: Tensor, group: int) -> Tensor:
    """x [B, T, C] contiguous, w [C, K] fp32 contiguous -> SiLU(causal conv) [B, T, C] in x's dtype, each group of
    `group` channels L2-normalized (0: none)."""
    grid, meta = _tiles(x, group)
    out = torch.empty_like(x)
    launch(short_conv_fwd_kernel, grid, (x, w, out, x.shape[1], x.shape[2]), dict(K=w.shape[1], **meta),
           FWD_CONFIGS)
    return out


@register_op("deltamup::short_conv_bwd", mutates_args=())
def short_conv_bwd(x: Tensor, w: Tensor, dout: Tensor, group: int) -> tuple[Tensor, Tensor]:
    """dx [B, T, C] (x's dtype) and dw [C, K] (fp32) from x, w and dout (contiguous)."""
    B, T, C = x.shape
    K = w.shape[1]
    grid, meta = _tiles(x, group)
    dz = torch.empty(x.shape, device=x.device, dtype=torch.float32)
    dx = torch.empty_like(x)
    dw_rows = torch.empty(max(grid(c)[0] for c in BWD_CONFIGS) * B, C, K, device=x.device, dtype=torch.float32)
    dw = []

    def finish(config: dict[str, int], args: Sequence) -> None:  # what the config leaves to do (timed with it)
        x, w, _, dz, dw_rows = args[:5]  # the launch's: random ones when it times for a trace
        dw[:] = [dw_rows[:grid(config)[0] * B].sum(0)]  # the rows this config's programs wrote
        dx_grid, dx_meta = _tiles(x, 0)
        launch(short_conv_dx_kernel, dx_grid, (dz, w, dx, T, C), dict(K=K, BC=dx_meta["BC"]), FWD_CONFIGS)
    launch(short_conv_bwd_kernel, grid, (x, w, dout, dz, dw_rows, T, C), dict(K=K, **meta), BWD_CONFIGS,
           then=finish)
    return dx, dw[0]


@short_conv_fwd.register_fake
def _(x: Tensor, w: Tensor, group: int) -> Tensor:
    return torch.empty_like(x)


@short_conv_bwd.register_fake
def _(x: Tensor, w: Tensor, dout: Tensor, group: int) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(w, dtype=torch.float32)


def _setup(ctx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.group = inputs[2]


def _backward(ctx, dout: Tensor) -> tuple[Tensor, Tensor, None]:
    x, w = ctx.saved_tensors
    dx, dw = short_conv_bwd(x, w, dout.contiguous(), ctx.group)
    return dx, dw.to(w.dtype), None


short_conv_fwd.register_autograd(_backward, setup_context=_setup)


def short_conv_silu_triton(x: Tensor, weight: Tensor, norm_group: int = 0) -> Tensor:
    """SiLU(causal depthwise conv): x [B, T, C], weight [C, K] -> [B, T, C] in x's dtype, differentiable in both;
    norm_group > 0: each group of that many channels L2-normalized after the SiLU (C a multiple of it)."""
    if norm_group > MAX_GROUP:
        raise ValueError(f"short_conv_silu_triton: norm_group {norm_group} > {MAX_GROUP}, more than a program holds")
    return short_conv_fwd(x.contiguous(), weight.float().contiguous(), norm_group)
