"""The delta-rule token mixer: DeltaNet, Gated DeltaNet and (Gated) DeltaProduct_{n_h} in one module.

x [B, T, d] -> y [B, T, d]. Per head (H heads, key dim dk, value dim dv), with n_h micro-steps per token:
    q = L2norm(SiLU(conv4(W_q x))),  k_j = L2norm(SiLU(conv4(W_k,j x))),  v_j = SiLU(conv4(W_v,j x))  (per head)
    g = −exp(A_log) · softplus(W_α x + dt_bias)          (gated kinds only; log-space decay)
    β_j = σ(W_β,j x)  or 2σ(·) with negative eigenvalues
    S ← exp(g) S;  S ← (I − β_j k_j k_jᵀ) S + β_j k_j v_jᵀ  for j = 1..n_h;   o = dk^−½ Sᵀ q
    y = mixer_output_mult · W_o [RMSNorm(readout_mult · o; norm_eps · readout_eps) ⊙ w_norm ⊙ SiLU(W_g x)]
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from deltamup import kernels

from .config import ModelConfig, Multipliers
from .layers import Linear, RMSNorm, ShortConv, init_decay_scalars
from .roles import Role, tagged
from .taps import recording, tap


class DeltaMixer(nn.Module):
    def __init__(self, config: ModelConfig, multipliers: Multipliers, name: str) -> None:
        super().__init__()
        d, H, n = config.width, config.heads, config.householder
        dk, dv = config.head_k_dim, config.head_v_dim
        self.name, self.heads, self.householder = name, H, n
        self.head_k_dim, self.head_v_dim = dk, dv
        self.allow_neg_eigval = config.allow_neg_eigval
        self.stack_gates = config.stack_gates
        self.kernel_backend = config.kernel_backend
        # readout and mixer_output as 0-d buffers, as in DeltaLM (graph inputs under torch.compile)
        self.register_buffer("readout_mult", torch.tensor(float(multipliers.readout)), persistent=False)
        self.register_buffer("mixer_output_mult", torch.tensor(float(multipliers.mixer_output)), persistent=False)
        self.q_proj = Linear(d, H * dk, Role.HIDDEN)
        self.k_proj = Linear(d, n * H * dk, Role.HIDDEN)
        self.v_proj = Linear(d, n * H * dv, Role.HIDDEN)
        self.g_proj = Linear(d, H * dv, Role.HIDDEN)
        self.o_proj = Linear(H * dv, d, Role.HIDDEN)
        self.b_proj = Linear(d, n * H, Role.BETA_MATRIX)
        conv = config.conv_backend
        self.q_conv = ShortConv(H * dk, config.conv_size, dk, conv)  # q, k L2-normalized per head
        self.k_conv = ShortConv(n * H * dk, config.conv_size, dk, conv)
        self.v_conv = ShortConv(n * H * dv, config.conv_size, 0, conv)
        self.gated = config.is_gated
        if self.gated:
            self.a_proj = Linear(d, H, Role.GATE_MATRIX)
            self.A_log = tagged(nn.Parameter(torch.empty(H)), Role.GATE_SCALAR)
            self.dt_bias = tagged(nn.Parameter(torch.empty(H)), Role.GATE_SCALAR)
            init_decay_scalars(self.A_log, self.dt_bias)
        self.o_norm = RMSNorm(dv, config.norm_eps * multipliers.readout_eps)

    def forward(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        H, n, dk, dv = self.heads, self.householder, self.head_k_dim, self.head_v_dim
        q = self.q_conv(self.q_proj(x)).reshape(B, T, H, dk)
        k = self.k_conv(self.k_proj(x)).reshape(B, T * n, H, dk)
        v = self.v_conv(self.v_proj(x)).reshape(B, T * n, H, dv)
        beta_pre, alpha_pre = self.gate_inputs(x)
        beta_pre = beta_pre.reshape(B, T * n, H)
        beta = beta_pre.float().sigmoid() * (2.0 if self.allow_neg_eigval else 1.0)
        g = None
        if self.gated:
            g = -self.A_log.float().exp() * F.softplus(alpha_pre.float() + self.dt_bias)
            tap("alpha_pre", alpha_pre, self)
        tap("beta_pre", beta_pre, self)
        tap("q", q, self)
        tap("k", k, self)
        tap("v", v, self)
        o, state = kernels.chunk_gated_delta_product(
            q, k, v, g, beta.to(q.dtype), num_householder=n, output_final_state=recording(),
            backend=self.kernel_backend)
        if state is not None:
            tap("state", state, self)
        o = o * self.readout_mult
        tap("readout", o, self)
        gate = F.silu(self.g_proj(x)).view(B, T, H, dv)
        y = self.o_proj((self.o_norm(o) * gate).reshape(B, T, H * dv)) * self.mixer_output_mult
        tap("mixer_out", y, self)
        return y

    def gate_inputs(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """W_β x [B, T, n·H] and W_α x [B, T, H] (None ungated): one GEMM each, or with stack_gates one over
        [W_β; W_α; 0] (rows padded to a multiple of 8; the same products)."""
        if not self.stack_gates:
            return self.b_proj(x), self.a_proj(x) if self.gated else None
        weights = [self.b_proj.weight] + ([self.a_proj.weight] if self.gated else [])
        stacked = torch.cat(weights)
        both = F.linear(x, F.pad(stacked, (0, 0, 0, -stacked.shape[0] % 8)))
        rows = self.b_proj.weight.shape[0]
        return both[..., :rows], both[..., rows:stacked.shape[0]] if self.gated else None
