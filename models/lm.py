"""The language model: embedding → depth × [x + mixer(norm(x)); x + SwiGLU(norm(x))] → norm → readout."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from deltamup import kernels

from .config import ModelConfig, Multipliers
from .layers import Linear, RMSNorm, SwiGLU
from .mixer import DeltaMixer
from .roles import Role, tagged
from .taps import tap


class Block(nn.Module):
    def __init__(self, config: ModelConfig, multipliers: Multipliers, index: int) -> None:
        super().__init__()
        self.name = f"block{index}"
        self.mixer_norm = RMSNorm(config.width, config.norm_eps)
        self.mixer = DeltaMixer(config, multipliers, self.name)
        self.mlp_norm = RMSNorm(config.width, config.norm_eps)
        self.mlp = SwiGLU(config.width, config.mlp_hidden)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.mixer(self.mixer_norm(x))
        y = self.mlp(self.mlp_norm(x))
        tap("mlp_out", y, self)
        return x + y


class DeltaLM(nn.Module):
    """tokens [B, T] (int64) -> logits [B, T, vocab]; with targets [B, T], the mean next-token loss (0-d fp32)
    instead, through kernels.linear_cross_entropy (config.loss_backend "triton": the logits never materialised as
    such, their gradient computed in the forward)."""

    def __init__(self, config: ModelConfig, multipliers: Multipliers = Multipliers()) -> None:
        super().__init__()
        self.config, self.multipliers = config, multipliers
        # the factors as 0-d fp32 buffers, not Python floats: inputs of a compiled graph rather than constants in it,
        # so that parametrizations differing only in them share one graph (sweeps/warmup.py)
        self.register_buffer("embedding_mult", torch.tensor(float(multipliers.embedding)), persistent=False)
        self.register_buffer("logits_mult", torch.tensor(float(multipliers.logits)), persistent=False)
        self.embedding = tagged(nn.Parameter(torch.empty(config.vocab_size, config.width)), Role.EMBEDDING)
        nn.init.normal_(self.embedding, std=0.02)
        self.blocks = nn.ModuleList(Block(config, multipliers, i) for i in range(config.depth))
        self.final_norm = RMSNorm(config.width, config.norm_eps)
        self.readout = None if config.tie_embeddings else Linear(config.width, config.vocab_size, Role.READOUT)

    def forward(self, tokens: Tensor, targets: Tensor | None = None) -> Tensor:
        x = F.embedding(tokens, self.embedding) * self.embedding_mult
        tap("embed", x)
        for block in self.blocks:
            x = block(x)
        x = self.final_norm(x)
        weight = self.embedding if self.readout is None else self.readout.weight
        if targets is not None:
            return kernels.linear_cross_entropy(x, weight, targets, self.logits_mult, self.config.loss_backend)
        logits = F.linear(x, weight) * self.logits_mult
        tap("logits", logits)
        return logits
