"""The gated delta rule, token by token: the ground truth every other form is tested against; and the other ops'
reference forms (the q/k L2 norm, the short convolution, the readout with its cross-entropy).

Layout follows fla: q, k [B, T, H, K]; v [B, T, H, V]; g (log-space decay, ≤ 0) and beta [B, T, H];
state [B, H, K, V]. Per token t and head h:

    S_t = exp(g_t) · (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ,      o_t = scale · S_tᵀ q_t
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def l2_normalize(x: Tensor, eps: float = 1e-6) -> Tensor:
    """x / ‖x‖ over the last dimension, computed in fp32 (fla's eps convention)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + eps)).to(x.dtype)


def short_conv_silu(x: Tensor, weight: Tensor) -> Tensor:
    """SiLU(y), y_t = Σ_j w_j x_{t−K+1+j}: the causal depthwise convolution over time. x [B, T, C], weight [C, K]
    -> [B, T, C] in x's dtype (accumulated in fp32: the weight is fp32 even under autocast). K shifted products
    instead of conv1d's two transposes, so that torch.compile fuses the convolution, the SiLU and what follows."""
    K, T = weight.shape[-1], x.shape[1]
    padded = F.pad(x, (0, 0, K - 1, 0))
    y = padded[:, :T] * weight[:, 0]
    for j in range(1, K):
        y = y + padded[:, j:j + T] * weight[:, j]
    return F.silu(y).to(x.dtype)


IGNORE_INDEX = -100  # a target that counts for no loss (F.cross_entropy's default)


def linear_cross_entropy(x: Tensor, weight: Tensor, targets: Tensor, mult: Tensor) -> Tensor:
    """Mean cross-entropy (fp32) of the logits mult · x Wᵀ against targets (-100: not counted): x [..., D],
    weight [V, D], targets [...] int64, mult 0-d. The logits in x's compute dtype (bf16 under autocast), the loss in
    fp32 or finer: the models' readout and token loss, written out."""
    logits = F.linear(x, weight) * mult
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=IGNORE_INDEX)


def recurrent_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor | None,
    beta: Tensor,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Token-by-token recurrence. g=None means no decay (plain DeltaNet).

    Returns o [B, T, H, V] in v's dtype and, if asked, the final state [B, H, K, V] in fp32
    (fp64 when the inputs are fp64).
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    if scale is None:
        scale = K ** -0.5
    if use_qk_l2norm_in_kernel:
        q, k = l2_normalize(q), l2_normalize(k)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    q, k, v, beta = (x.to(acc) for x in (q, k, v, beta))
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(acc)
    outs = []
    for t in range(T):
        if g is not None:
            S = S * g[:, t].to(acc).exp()[..., None, None]
        k_t, b_t = k[:, t], beta[:, t][..., None]
        v_new = b_t * (v[:, t] - torch.einsum("bhkv,bhk->bhv", S, k_t))
        S = S + k_t[..., :, None] * v_new[..., None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]) * scale)
    o = torch.stack(outs, dim=1).to(v.dtype if v.dtype != acc else acc)
    return o, (S if output_final_state else None)
