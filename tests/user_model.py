"""A Gated DeltaNet language model written the way a user would write it (nn.Embedding, nn.Linear, nn.Conv1d,
nn.RMSNorm, its own names), unknown to the library: the held-out model of tests/test_parametrize.py.

It computes the same function as deltamup's DeltaLM of the same ModelConfig (same head layout, same order of
operations), so with DeltaLM's weights copied in (OURS_NAME maps the names) both give the same logits: a check that
`parametrize` put every forward multiplier where DeltaLM applies it."""
from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F
from torch import nn

from deltamup import kernels


class Mixer(nn.Module):
    def __init__(self, width: int, heads: int, dk: int, dv: int, conv: int = 4) -> None:
        super().__init__()
        self.heads, self.dk, self.dv = heads, dk, dv
        self.wq, self.wk = nn.Linear(width, heads * dk, bias=False), nn.Linear(width, heads * dk, bias=False)
        self.wv, self.wgate = nn.Linear(width, heads * dv, bias=False), nn.Linear(width, heads * dv, bias=False)
        self.wout = nn.Linear(heads * dv, width, bias=False)
        self.w_beta, self.w_alpha = nn.Linear(width, heads, bias=False), nn.Linear(width, heads, bias=False)
        self.convs = nn.ModuleList(nn.Conv1d(c, c, conv, groups=c, padding=conv - 1, bias=False)
                                   for c in (heads * dk, heads * dk, heads * dv))
        self.A_log = nn.Parameter(torch.empty(heads).uniform_(0, 16).clamp_min(1e-4).log())
        self.dt_bias = nn.Parameter(torch.full((heads,), -2.0))
        self.out_norm = nn.RMSNorm(dv, eps=1e-6)

    def conv(self, i: int, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.convs[i](x.transpose(1, 2))[..., : x.shape[1]].transpose(1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        H, dk, dv = self.heads, self.dk, self.dv
        q = kernels.l2_normalize(self.conv(0, self.wq(x)).reshape(B, T, H, dk))
        k = kernels.l2_normalize(self.conv(1, self.wk(x)).reshape(B, T, H, dk))
        v = self.conv(2, self.wv(x)).reshape(B, T, H, dv)
        beta = self.w_beta(x).float().sigmoid()
        g = -self.A_log.float().exp() * F.softplus(self.w_alpha(x).float() + self.dt_bias)
        o, _ = kernels.chunk_gated_delta_product(q, k, v, g, beta, num_householder=1, backend="torch")
        gate = F.silu(self.wgate(x)).view(B, T, H, dv)
        return self.wout((self.out_norm(o) * gate).reshape(B, T, H * dv))


class Layer(nn.Module):
    def __init__(self, width: int, heads: int, dk: int, dv: int) -> None:
        super().__init__()
        hidden = math.ceil(8 / 3 * width)
        self.pre_mix, self.pre_ffn = nn.RMSNorm(width, eps=1e-6), nn.RMSNorm(width, eps=1e-6)
        self.mix = Mixer(width, heads, dk, dv)
        self.ffn = nn.ModuleDict(dict(w1=nn.Linear(width, hidden, bias=False), w3=nn.Linear(width, hidden, bias=False),
                                      w2=nn.Linear(hidden, width, bias=False)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mix(self.pre_mix(x))
        h = self.pre_ffn(x)
        return x + self.ffn["w2"](F.silu(self.ffn["w1"](h)) * self.ffn["w3"](h))


class UserLM(nn.Module):
    """tokens [B, T] -> logits [B, T, vocab]. Key head dim round(0.75·width/heads), value head dim twice that."""

    def __init__(self, width: int, depth: int = 2, heads: int = 2, vocab: int = 64, tied: bool = False) -> None:
        super().__init__()
        dk = round(0.75 * width / heads)
        self.tok = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(Layer(width, heads, dk, 2 * dk) for _ in range(depth))
        self.final = nn.RMSNorm(width, eps=1e-6)
        self.head = nn.Linear(width, vocab, bias=False)
        if tied:
            self.head.weight = self.tok.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.final(x))


# UserLM parameter name -> DeltaLM parameter name
RENAMES = [(r"^tok\.weight$", "embedding"), (r"^head\.", "readout."), (r"^final\.", "final_norm."),
           (r"^layers\.", "blocks."), (r"\.pre_mix\.", ".mixer_norm."), (r"\.pre_ffn\.", ".mlp_norm."),
           (r"\.mix\.", ".mixer."), (r"\.w_?(q|k|v|out|gate|beta|alpha)\.", r".\1_proj."),
           (r"\.out_proj\.", ".o_proj."),
           (r"\.gate_proj\.", ".g_proj."), (r"\.beta_proj\.", ".b_proj."), (r"\.alpha_proj\.", ".a_proj."),
           (r"\.convs\.0\.", ".q_conv."), (r"\.convs\.1\.", ".k_conv."), (r"\.convs\.2\.", ".v_conv."),
           (r"\.out_norm\.", ".o_norm."), (r"\.ffn\.w1\.", ".mlp.gate."), (r"\.ffn\.w3\.", ".mlp.up."),
           (r"\.ffn\.w2\.", ".mlp.down.")]


def ours_name(name: str) -> str:
    for pattern, repl in RENAMES:
        name = re.sub(pattern, repl, name)
    return name


HEADS = 4


def make_model(width: int) -> UserLM:
    """The factory `deltamup coord-check --model-factory user_model:make_model` takes: a user model whose attention
    layout needs the width to be a multiple of its heads."""
    if width % HEADS:
        raise ValueError(f"width {width} is not divisible by the {HEADS} heads")
    return UserLM(width, heads=HEADS, vocab=256)


def make_model_with_a_temperature(width: int) -> UserLM:
    """make_model plus a learned scalar no rule covers: parametrize must refuse it."""
    model = make_model(width)
    model.temperature = nn.Parameter(torch.ones(1))
    return model
