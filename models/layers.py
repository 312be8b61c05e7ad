"""Small building blocks, each parameter tagged with its role."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from deltamup import kernels

from .roles import Role, tagged


class Linear(nn.Module):
    """y = x Wᵀ with W [out, in] of a given role; no bias (none of the models uses one)."""

    def __init__(self, fan_in: int, fan_out: int, role: Role) -> None:
        super().__init__()
        self.weight = tagged(nn.Parameter(torch.empty(fan_out, fan_in)), role)
        nn.init.normal_(self.weight, std=fan_in ** -0.5)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight)


class RMSNorm(nn.Module):
    """x / rms(x) ⊙ gain over the last dimension (computed in fp32)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = tagged(nn.Parameter(torch.ones(dim)), Role.NORM_GAIN)

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class ShortConv(nn.Module):
    """Causal depthwise convolution over time, then SiLU, then (norm_group > 0) the L2 norm of each group of that
    many channels (q's and k's heads). x [B, T, C] -> [B, T, C]. `backend`: kernels.short_conv_silu's ("torch", the
    shifted products torch.compile fuses; "triton", its own kernels; ModelConfig.conv_backend)."""

    def __init__(self, channels: int, kernel_size: int, norm_group: int = 0, backend: str = "torch") -> None:
        super().__init__()
        self.backend, self.norm_group = backend, norm_group
        self.weight = tagged(nn.Parameter(torch.empty(channels, 1, kernel_size)), Role.CONV)
        init_short_conv(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return kernels.short_conv_silu(x, self.weight[:, 0], self.backend, self.norm_group)


class SwiGLU(nn.Module):
    """W_down (SiLU(W_gate x) ⊙ W_up x)."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.gate = Linear(width, hidden, Role.HIDDEN)
        self.up = Linear(width, hidden, Role.HIDDEN)
        self.down = Linear(hidden, width, Role.HIDDEN)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


def init_short_conv(weight: Tensor, generator: torch.Generator | None = None) -> None:
    """PyTorch's Conv1d default for a depthwise kernel [channels, 1, K]: U(±K^-½), width-independent."""
    bound = weight.shape[-1] ** -0.5
    with torch.no_grad():
        weight.uniform_(-bound, bound, generator=generator)


def inverse_softplus(x: Tensor) -> Tensor:
    return x + torch.log(-torch.expm1(-x))


def init_decay_scalars(A_log: Tensor, dt_bias: Tensor, a_range: tuple[float, float] = (0.0, 16.0),
                       dt_range: tuple[float, float] = (1e-3, 0.1)) -> None:
    """Mamba-2 / fla decay initialisation: A ~ U(a_range) stored as log A; dt log-uniform in dt_range, stored as
    softplus⁻¹(dt). Width-independent: both have shape [heads]."""
    with torch.no_grad():
        A_log.copy_(torch.empty_like(A_log).uniform_(*a_range).clamp_min(1e-4).log())
        lo, hi = math.log(dt_range[0]), math.log(dt_range[1])
        dt = torch.exp(torch.empty_like(dt_bias).uniform_(lo, hi)).clamp_min(1e-4)
        dt_bias.copy_(inverse_softplus(dt))
