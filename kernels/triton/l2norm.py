"""L2 normalisation over the last dimension in one pass each way, differentiable: use_qk_l2norm_in_kernel's q/k norm
when a gradient is needed (function.py; a forward without one scales the rows inside the chunk passes instead,
chunk_fwd.py, and writes no normalised copies).

    y = x · r,  r = (Σ x² + eps)^{-1/2}        (fp32 inside; y in x's dtype; the reference's formula)
    dx = r · (dy − y · Σ y·dy)                  (y recomputed in fp32 from x)
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .tuning import pow2

ROWS = 16  # rows of x per program
EPS = 1e-6  # kernels.reference.l2_normalize's (fla's)


@triton.jit
def l2norm_fwd_kernel(x, y, N, eps, D: tl.constexpr, BD: tl.constexpr, R: tl.constexpr):
    """Grid (N / R,). x, y [N, D]."""
    rows = tl.program_id(0) * R + tl.arange(0, R)
    cols = tl.arange(0, BD)
    p = rows[:, None] * D + cols[None, :]
    m = (rows[:, None] < N) & (cols[None, :] < D)
    b_x = tl.load(x + p, mask=m, other=0.0).to(tl.float32)
    b_r = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=1) + eps)
    tl.store(y + p, (b_x * b_r[:, None]).to(y.dtype.element_ty), mask=m)


@triton.jit
def l2norm_bwd_kernel(x, dy, dx, N, eps, D: tl.constexpr, BD: tl.constexpr, R: tl.constexpr):
    """Grid (N / R,). x, dy, dx [N, D]."""
    rows = tl.program_id(0) * R + tl.arange(0, R)
    cols = tl.arange(0, BD)
    p = rows[:, None] * D + cols[None, :]
    m = (rows[:, None] < N) & (cols[None, :] < D)
    b_x = tl.load(x + p, mask=m, other=0.0).to(tl.float32)
    b_dy = tl.load(dy + p, mask=m, other=0.0).to(tl.float32)
    b_r = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=1) + eps)
    b_y = b_x * b_r[:, None]
    b_dx = (b_dy - b_y * tl.sum(b_y * b_dy, axis=1)[:, None]) * b_r[:, None]
    tl.store(dx + p, b_dx.to(dx.dtype.element_ty), mask=m)


@torch.library.custom_op("deltamup::l2norm_fwd", mutates_args=())
def l2norm_fwd(x: Tensor, eps: float) -> Tensor:
    """x [..., D] contiguous -> x / ‖x‖ over D."""
    D = x.shape[-1]
    N = x.numel() // D
    y = torch.empty_like(x)
    l2norm_fwd_kernel[(triton.cdiv(N, ROWS),)](x, y, N, eps, D=D, BD=pow2(D), R=ROWS, num_warps=4)
    return y


@torch.library.custom_op("deltamup::l2norm_bwd", mutates_args=())
def l2norm_bwd(x: Tensor, dy: Tensor, eps: float) -> Tensor:
    """dx [..., D] from x and dy (both contiguous)."""
    D = x.shape[-1]
    N = x.numel() // D
    dx = torch.empty_like(x)
    l2norm_bwd_kernel[(triton.cdiv(N, ROWS),)](x, dy, dx, N, eps, D=D, BD=pow2(D), R=ROWS, num_warps=4)
    return dx


@l2norm_fwd.register_fake
def _(x: Tensor, eps: float) -> Tensor:
    return torch.empty_like(x)


@l2norm_bwd.register_fake
def _(x: Tensor, dy: Tensor, eps: float) -> Tensor:
    return torch.empty_like(x)


def _l2norm_setup(ctx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(inputs[0])
    ctx.eps = inputs[1]


def _l2norm_backward(ctx, dy: Tensor) -> tuple[Tensor, None]:
    return l2norm_bwd(ctx.saved_tensors[0], dy.contiguous(), ctx.eps), None


l2norm_fwd.register_autograd(_l2norm_backward, setup_context=_l2norm_setup)
