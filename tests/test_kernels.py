"""The chunked PyTorch gated delta rule and DeltaProduct against the token-by-token recurrence."""
import math

import pytest
import torch
import torch.nn.functional as F

from deltamup.kernels import chunk_gated_delta_product, chunk_gated_delta_rule, recurrent_gated_delta_rule
from deltamup.kernels.chunk_torch import chunk_gated_delta_rule_torch


def inputs(B, T, H, K, V, gate="random", beta_max=1.0, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=g, dtype=dtype)
    k = F.normalize(torch.randn(B, T, H, K, generator=g, dtype=dtype), dim=-1)
    v = torch.randn(B, T, H, V, generator=g, dtype=dtype)
    beta = beta_max * torch.rand(B, T, H, generator=g, dtype=dtype)
    gates = {"random": -torch.rand(B, T, H, generator=g, dtype=dtype) * 0.5,
             "zero": torch.zeros(B, T, H, dtype=dtype), "none": None}
    return q, k, v, gates[gate], beta


@pytest.mark.parametrize("B,T,H,K,V", [(1, 1, 1, 3, 2), (2, 37, 3, 5, 7), (1, 64, 2, 16, 8), (2, 130, 2, 7, 33),
                                       (1, 200, 1, 33, 17)])
@pytest.mark.parametrize("gate", ["random", "zero", "none"])
def test_chunked_matches_recurrent(B, T, H, K, V, gate):
    q, k, v, g, beta = inputs(B, T, H, K, V, gate=gate, beta_max=2.0)
    h0 = torch.randn(B, H, K, V, dtype=torch.float64)
    o_ref, s_ref = recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, backend="torch")
    torch.testing.assert_close(o, o_ref, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(s, s_ref, rtol=1e-9, atol=1e-9)


def test_zero_gate_equals_no_gate_exactly():
    q, k, v, g, beta = inputs(1, 70, 2, 8, 8, gate="zero")
    o0, s0 = chunk_gated_delta_rule_torch(q, k, v, g, beta, output_final_state=True)
    o1, s1 = chunk_gated_delta_rule_torch(q, k, v, None, beta, output_final_state=True)
    assert torch.equal(o0, o1) and torch.equal(s0, s1)


def test_l2norm_in_kernel_and_scale():
    q, k, v, g, beta = inputs(1, 20, 2, 6, 4)
    k_raw = k * (0.5 + 3 * torch.rand(1, 20, 2, 1, dtype=torch.float64))
    o1, _ = chunk_gated_delta_rule(q, k_raw, v, g, beta, use_qk_l2norm_in_kernel=True, scale=0.3, backend="torch")
    o2, _ = recurrent_gated_delta_rule(F.normalize(q, dim=-1), k, v, g, beta, scale=0.3)
    torch.testing.assert_close(o1, o2, rtol=1e-5, atol=1e-5)  # eps inside the rsqrt (fla) vs F.normalize


def test_gradients_by_gradcheck():
    q, k, v, g, beta = inputs(1, 9, 1, 3, 2, gate="random", beta_max=2.0)
    h0 = torch.randn(1, 1, 3, 2, dtype=torch.float64)
    args = [t.clone().requires_grad_() for t in (q, k, v, g, beta, h0)]

    def f(q, k, v, g, beta, h0):
        o, s = chunk_gated_delta_rule_torch(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                            chunk_size=4)
        return o, s

    assert torch.autograd.gradcheck(f, args)


def test_chunked_gradients_match_recurrent():
    q, k, v, g, beta = inputs(2, 70, 2, 5, 6, beta_max=2.0)
    grads = []
    for rule in (recurrent_gated_delta_rule, chunk_gated_delta_rule_torch):
        args = [t.clone().requires_grad_() for t in (q, k, v, g, beta)]
        o, s = rule(*args, output_final_state=True)
        (o.sin().sum() + s.cos().sum()).backward()
        grads.append([a.grad for a in args])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-8)


def direct_delta_product(q, k, v, g, beta, n):
    """DeltaProduct as written in deltaproduct.md: per token, gate then n Householder micro-steps."""
    B, T, H, K = q.shape
    S = torch.zeros(B, H, K, v.shape[-1], dtype=q.dtype)
    out = []
    for t in range(T):
        if g is not None:
            S = S * g[:, t].exp()[..., None, None]
        for j in range(n):
            kk, vv, bb = k[:, t * n + j], v[:, t * n + j], beta[:, t * n + j][..., None]
            S = S - bb[..., None] * kk[..., :, None] * (kk[..., :, None] * S).sum(-2, keepdim=True) \
                + bb[..., None] * kk[..., :, None] * vv[..., None, :]
        out.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]) * K ** -0.5)
    return torch.stack(out, 1), S


@pytest.mark.parametrize("n,gated", [(1, True), (2, True), (3, False), (4, True)])
@pytest.mark.parametrize("backend", ["torch", "recurrent"])
def test_delta_product_interleaving(n, gated, backend):
    B, T, H, K, V = 2, 23, 2, 6, 5
    q, _, _, g, _ = inputs(B, T, H, K, V, gate="random" if gated else "none")
    _, k, v, _, beta = inputs(B, T * n, H, K, V, beta_max=2.0, seed=1)
    o_ref, s_ref = direct_delta_product(q, k, v, g, beta, n)
    o, s = chunk_gated_delta_product(q, k, v, g, beta, num_householder=n, output_final_state=True, backend=backend)
    torch.testing.assert_close(o, o_ref, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(s, s_ref, rtol=1e-9, atol=1e-9)


def householder_product(keys, betas):
    K = keys[0].shape[-1]
    A = torch.eye(K, dtype=torch.float64)
    for k, b in zip(keys, betas):
        A = (torch.eye(K, dtype=torch.float64) - b * torch.outer(k, k)) @ A
    return A


def test_householder_product_norm_at_most_one():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        keys = F.normalize(torch.randn(3, 5, generator=g, dtype=torch.float64), dim=-1)
        betas = 2 * torch.rand(3, generator=g, dtype=torch.float64)
        assert torch.linalg.matrix_norm(householder_product(keys, betas), ord=2) <= 1 + 1e-12


def test_identical_keys_collapse_to_one_factor():
    k = F.normalize(torch.randn(4, dtype=torch.float64), dim=0)
    betas = torch.tensor([0.3, 1.7, 0.9], dtype=torch.float64)
    beta_eff = 1 - torch.prod(1 - betas)
    torch.testing.assert_close(householder_product([k] * 3, betas),
                               torch.eye(4, dtype=torch.float64) - beta_eff * torch.outer(k, k))


def test_two_reflections_at_60_degrees_rotate_by_120():
    a = math.pi / 3
    k1 = torch.tensor([1.0, 0.0], dtype=torch.float64)
    k2 = torch.tensor([math.cos(a), math.sin(a)], dtype=torch.float64)
    R = householder_product([k1, k2], torch.tensor([2.0, 2.0], dtype=torch.float64))
    torch.testing.assert_close(R @ R.T, torch.eye(2, dtype=torch.float64))  # orthogonal
    assert torch.linalg.det(R).item() == pytest.approx(1.0)  # a rotation, not a reflection
    assert torch.trace(R).item() == pytest.approx(2 * math.cos(2 * a))  # by 120°
    torch.testing.assert_close(torch.linalg.matrix_power(R, 3), torch.eye(2, dtype=torch.float64))
    assert torch.linalg.eigvals(R).imag.abs().max() > 0.5  # complex eigenvalues: a mod-3 counter


def test_unknown_backend_is_rejected():
    q, k, v, g, beta = inputs(1, 4, 1, 2, 2)
    with pytest.raises(ValueError, match="unknown kernel backend"):
        chunk_gated_delta_rule(q, k, v, g, beta, backend="cuda-magic")
    from deltamup.models import ModelConfig
    with pytest.raises(ValueError, match="unknown conv backend 'cuda'; choose one of torch, triton"):
        ModelConfig(conv_backend="cuda")
