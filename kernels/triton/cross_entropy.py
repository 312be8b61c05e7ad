"""The readout and the mean cross-entropy in one op, its gradient computed in the forward (the math:
kernels.reference.linear_cross_entropy):

    z = c · x Wᵀ [N, V],   loss = mean over rows with a target (≠ IGNORE_INDEX) of lse(z) − z_target,
    dL/d(x Wᵀ) = c · (softmax(z) − onehot(target)) / n   (rows without a target: 0),   n = rows with a target.

x [N, D] and W [V, D] in the compute dtype (bf16 under autocast), c a 0-d tensor (the logits multiplier). The
forward runs the GEMM (torch.mm), then one kernel a row reads the row twice: the online max and sum of e^z, then
e^{z − lse} for the gradient, which it writes ([N, V] in the GEMM's dtype, saved for the backward in place of the
logits). The backward is two GEMMs of that gradient (dx = G W, dW = Gᵀ x) times the loss's upstream gradient. What
this replaces: a compiled F.cross_entropy reads the logits twice forward and once more, with a write of the same
size, backward; here the logits are read twice and the gradient written once, all in the forward.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from ..reference import IGNORE_INDEX
from .tuning import launch, register_op

NEG = tl.constexpr(-1e30)  # below any logit: the max's start and the padding columns' value
# BV columns of a row a step; timed per shape on a GPU, the first on a CPU or at symbolic sizes
CONFIGS = (dict(BV=4096, num_warps=8), dict(BV=2048, num_warps=4), dict(BV=8192, num_warps=16))


@triton.jit
def linear_ce_fwd_kernel(logits, targets, mult, n_valid, loss, grad, V, BV: tl.constexpr, IGNORE_INDEX: tl.constexpr):
    """Grid (N,). logits, grad [N, V] (contiguous), targets [N] int64, mult and n_valid 0-d fp32; loss [N] fp32:
    this row's lse − z_target (0 without a target); grad: c (softmax − onehot) / n_valid (0 without a target)."""
    row = tl.program_id(0).to(tl.int64)
    logits += row * V
    grad += row * V
    c = tl.load(mult).to(tl.float32)
    target = tl.load(targets + row)
    # per lane: the running max and the sum of e^{z − max}; columns past V count as NEG (a lane that never sees a
    # column sums 1s, weighted e^{NEG − max} = 0 at the end)
    b_m = tl.full([BV], NEG, dtype=tl.float32)
    b_s = tl.zeros([BV], dtype=tl.float32)
    for v0 in range(0, V, BV):
        cols = v0 + tl.arange(0, BV)
        b_z = tl.where(cols < V, tl.load(logits + cols, mask=cols < V, other=0.0).to(tl.float32) * c, NEG)
        b_new = tl.maximum(b_m, b_z)
        b_s = b_s * tl.exp(b_m - b_new) + tl.exp(b_z - b_new)
        b_m = b_new
    m = tl.max(b_m, axis=0)
    lse = m + tl.log(tl.sum(b_s * tl.exp(b_m - m), axis=0))
    valid = target != IGNORE_INDEX
    z_target = tl.load(logits + tl.where(valid, target, 0)).to(tl.float32) * c
    tl.store(loss + row, tl.where(valid, lse - z_target, 0.0))
    scale = tl.where(valid, c / tl.load(n_valid), 0.0)
    for v0 in range(0, V, BV):
        cols = v0 + tl.arange(0, BV)
        b_z = tl.load(logits + cols, mask=cols < V, other=0.0).to(tl.float32) * c
        b_g = tl.exp(b_z - lse) - tl.where(cols == target, 1.0, 0.0)
        tl.store(grad + cols, (b_g * scale).to(grad.dtype.element_ty), mask=cols < V)


@register_op("deltamup::linear_cross_entropy_fwd", mutates_args=())
def linear_cross_entropy_fwd(x: Tensor, weight: Tensor, targets: Tensor, mult: Tensor) -> tuple[Tensor, Tensor]:
    """The mean loss (0-d fp32) and the gradient at x Wᵀ ([N, V], x's dtype) for x [N, D], weight [V, D] (the same
    dtype), targets [N] int64, mult 0-d."""
    logits = torch.mm(x, weight.t())
    targets = targets.contiguous()
    n_valid = (targets != IGNORE_INDEX).sum().float()
    losses = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    grad = torch.empty_like(logits)
    launch(linear_ce_fwd_kernel, (x.shape[0],), (logits, targets, mult.float(), n_valid, losses, grad, logits.shape[1]),
           dict(IGNORE_INDEX=IGNORE_INDEX), CONFIGS)
    return losses.sum() / n_valid, grad


@linear_cross_entropy_fwd.register_fake
def _(x: Tensor, weight: Tensor, targets: Tensor, mult: Tensor) -> tuple[Tensor, Tensor]:
    return x.new_empty((), dtype=torch.float32), x.new_empty(x.shape[0], weight.shape[0])


def _setup(ctx, inputs: tuple, output: tuple) -> None:
    ctx.save_for_backward(inputs[0], inputs[1], output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)  # no [N, V] of zeros for the gradient output's own (absent) gradient


def _backward(ctx, dloss: Tensor, _: Tensor | None) -> tuple[Tensor, Tensor, None, None]:
    x, weight, grad = ctx.saved_tensors
    scale = dloss.to(x.dtype)
    return torch.mm(grad, weight) * scale, torch.mm(grad.t(), x) * scale, None, None


linear_cross_entropy_fwd.register_autograd(_backward, setup_context=_setup)


def linear_cross_entropy_triton(x: Tensor, weight: Tensor, targets: Tensor, mult: Tensor) -> Tensor:
    """Mean cross-entropy (0-d fp32) of mult · x Wᵀ against targets (IGNORE_INDEX: not counted): x [..., D],
    weight [V, D], targets [...] int64, mult 0-d. Under autocast x and W are cast to its dtype, as F.linear would be."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        x, weight = x.to(dtype), weight.to(dtype)
    else:
        weight = weight.to(x.dtype)
    return linear_cross_entropy_fwd(x.reshape(-1, x.shape[-1]).contiguous(), weight.contiguous(),
                                    targets.reshape(-1), mult)[0]
