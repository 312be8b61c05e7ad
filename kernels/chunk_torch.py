"""The chunked gated delta rule in PyTorch (WY representation, UT transform), differentiable by autograd.

Same signature and layout as kernels.reference.recurrent_gated_delta_rule. Within a chunk of C tokens, with G the
cumulative log-gate, A = strictly_lower(β_i (k_i·k_j) e^{G_i−G_j}) and T = (I + A)^{-1}:
    w = T (β e^G ⊙ K),  u = T (β ⊙ V)                                   (per chunk, in parallel)
    v_new = u − w h;   o = scale [(Q ⊙ e^G) h + causal(Q Kᵀ ⊙ e^{G_i−G_j}) v_new]
    h ← e^{G_C} h + (K ⊙ e^{G_C−G})ᵀ v_new                               (sequential over chunks)
T is padded to a multiple of C with k = 0, β = 0, g = 0, which leaves the state untouched.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .reference import l2_normalize

CHUNK = 64


def chunk_gated_delta_rule_torch(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor | None,
    beta: Tensor,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    chunk_size: int = CHUNK,
) -> tuple[Tensor, Tensor | None]:
    B, T, H, K = q.shape
    V = v.shape[-1]
    if scale is None:
        scale = K ** -0.5
    if use_qk_l2norm_in_kernel:
        q, k = l2_normalize(q), l2_normalize(k)
    out_dtype = v.dtype
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    if g is None:
        g = beta.new_zeros(B, T, H)
    C = min(chunk_size, T)
    pad = (-T) % C
    # [B, T, H, D] -> [B, H, N, C, D] in the accumulation dtype
    def split(x: Tensor) -> Tensor:
        x = x.to(acc)
        if pad:
            x = F.pad(x, (0, 0) * (x.dim() == 4) + (0, 0, 0, pad))
        return x.reshape(B, -1, C, H, *x.shape[3:]).transpose(1, 3).transpose(2, 3)

    qc, kc, vc = split(q), split(k), split(v)
    gc, bc = split(g), split(beta)  # [B, H, N, C]
    G = gc.cumsum(-1)
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    diff = G[..., :, None] - G[..., None, :]
    decay = torch.where(causal, diff, torch.full_like(diff, float("-inf"))).exp()  # e^{G_i−G_j}, 0 above diagonal
    A = (bc[..., :, None] * (kc @ kc.transpose(-1, -2)) * decay).tril(-1)
    eye = torch.eye(C, dtype=acc, device=q.device)
    Tmat = torch.linalg.solve_triangular(eye + A, eye, upper=False, unitriangular=True)
    w = Tmat @ (kc * (bc * G.exp())[..., None])
    u = Tmat @ (vc * bc[..., None])
    attn = (qc @ kc.transpose(-1, -2)) * decay  # inclusive causal
    q_decayed = qc * G.exp()[..., None]
    k_to_end = kc * (G[..., -1:] - G).exp()[..., None]

    h = q.new_zeros(B, H, K, V, dtype=acc) if initial_state is None else initial_state.to(acc)
    outs = []
    for n in range(qc.shape[2]):
        v_new = u[:, :, n] - w[:, :, n] @ h
        outs.append(q_decayed[:, :, n] @ h + attn[:, :, n] @ v_new)
        h = G[:, :, n, -1, None, None].exp() * h + k_to_end[:, :, n].transpose(-1, -2) @ v_new
    o = torch.stack(outs, dim=2) * scale  # [B, H, N, C, V]
    o = o.permute(0, 2, 3, 1, 4).reshape(B, -1, H, V)[:, :T]
    return o.to(out_dtype), (h if output_final_state else None)
