"""Models: any width works, every parameter has a role, the head layout follows the paper, probes see every call."""
import math

import pytest
import torch

from deltamup.models import ModelConfig, Role, role_of
from deltamup.models.taps import record, tap
from deltamup.parametrizations import build_model


@pytest.mark.parametrize("kind,householder,width", [
    ("deltanet", 1, 64), ("gdn", 1, 257), ("gdn", 1, 1563), ("deltaproduct", 2, 97), ("deltaproduct", 3, 130)])
def test_any_width_runs(kind, householder, width):
    config = ModelConfig(kind=kind, width=width, depth=1, householder=householder, allow_neg_eigval=True)
    model = build_model(config, "gdn-mup", seed=0)
    tokens = torch.randint(0, 256, (2, 11))
    logits = model(tokens)
    assert logits.shape == (2, 11, 256) and torch.isfinite(logits).all()
    logits.float().square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_paper_head_layout():
    for width, dk in [(256, 32), (512, 64), (768, 96), (1024, 128), (1536, 192), (1563, 195)]:
        c = ModelConfig(width=width)
        assert (c.heads, c.head_k_dim, c.head_v_dim) == (6, dk, 2 * dk)


def test_every_parameter_has_a_role_and_shapes_follow_it():
    model = build_model(ModelConfig(kind="deltaproduct", householder=2, width=96, depth=2), "sp", seed=0)
    H, n = 6, 2
    seen = {}
    for name, p in model.named_parameters():
        seen.setdefault(role_of(p), []).append(name)
        if role_of(p) == Role.GATE_MATRIX:
            assert p.shape[0] in (H, n * H) and p.shape[1] == 96
        if role_of(p) == Role.GATE_SCALAR:
            assert p.shape == (H,)
    assert set(seen) == set(Role) - {Role.READOUT}  # tied embeddings
    untied = build_model(ModelConfig(width=96, depth=1, tie_embeddings=False), "sp", seed=0)
    assert Role.READOUT in {role_of(p) for p in untied.parameters()}


@pytest.mark.parametrize("kind,householder", [("gdn", 1), ("deltanet", 1), ("deltaproduct", 2)])
def test_stacked_gate_matmul_is_the_same_model(kind, householder):
    """ModelConfig(stack_gates=True): W_β x and W_α x from one GEMM over the stacked, padded weights give the same
    logits, probes and gradients as one GEMM each (fp64), with the same parameters."""
    torch.manual_seed(0)
    tokens = torch.randint(0, 256, (2, 13))
    runs = []
    for stack in (False, True):
        config = ModelConfig(kind=kind, householder=householder, width=70, depth=2, stack_gates=stack)
        model = build_model(config, "gdn-mup", seed=0).double()
        with record() as recorder:
            logits = model(tokens)
        logits.square().mean().backward()
        runs.append((logits, recorder.tensors, {n: p.grad for n, p in model.named_parameters()}))
    (logits, probes, grads), (stacked_logits, stacked_probes, stacked_grads) = runs
    torch.testing.assert_close(stacked_logits, logits, rtol=1e-12, atol=1e-12)
    assert stacked_probes.keys() == probes.keys() and any("beta_pre" in key for key in probes)
    for key in probes:
        torch.testing.assert_close(stacked_probes[key], probes[key], rtol=1e-6, atol=1e-7)  # probes: fp32
    assert stacked_grads.keys() == grads.keys()
    for name in grads:
        torch.testing.assert_close(stacked_grads[name], grads[name], rtol=1e-10, atol=1e-12, msg=name)


def test_deltanet_has_no_decay_gate():
    roles = {role_of(p) for p in build_model(ModelConfig(kind="deltanet", width=64, depth=1)).parameters()}
    assert Role.GATE_SCALAR not in roles


@pytest.mark.parametrize("bad,match", [
    (dict(kind="mamba"), "unknown model kind"),
    (dict(width=16), "too small for 6 heads"),
    (dict(kind="gdn", householder=2), "needs kind='deltaproduct'"),
    (dict(depth=0), "depth must be positive"),
])
def test_bad_configs_are_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**bad)


def test_parametrization_sets_init_and_multipliers():
    model = build_model(ModelConfig(width=1024, depth=1), "gdn-mup", seed=0)
    W_q = model.blocks[0].mixer.q_proj.weight
    assert W_q.std().item() == pytest.approx(0.01, rel=0.02)  # 0.02 / √m, m = 4
    assert model.multipliers.logits == pytest.approx(0.25)
    assert model.multipliers.readout == pytest.approx(32.0)  # √d
    assert build_model(ModelConfig(width=1024, depth=1), "sp", seed=0).blocks[0].mixer.q_proj.weight.std().item() \
        == pytest.approx(0.02, rel=0.02)


def test_probes_are_named_per_block_and_do_not_hide_repeated_calls():
    model = build_model(ModelConfig(width=64, depth=2), "gdn-mup", seed=0)
    with record() as rec:
        model(torch.randint(0, 256, (1, 8)))
        tap("embed", torch.ones(2))  # a second call of the same probe is kept, not overwritten
    names = set(rec.tensors)
    for i in range(2):
        for probe in ("q", "k", "v", "state", "readout", "alpha_pre", "beta_pre", "mixer_out", "mlp_out"):
            assert f"block{i}.{probe}" in names
    assert {"embed", "embed#2", "logits"} <= names
    q = rec.tensors["block0.q"]
    torch.testing.assert_close(q.norm(dim=-1), torch.ones(q.shape[:-1]), rtol=1e-3, atol=1e-3)  # L2 norm, eps 1e-6


def test_training_with_build_optimizer_reduces_loss():
    from deltamup.scaling.data import get_task
    from deltamup.scaling.train import TrainConfig, train

    model = build_model(ModelConfig(width=64, depth=1), "gdn-mup", seed=0)
    task = get_task("sample")
    result = train(model, "gdn-mup", TrainConfig(lr=1e-2, steps=30, warmup_steps=3, log_every=10),
                   task.train_batches(4, 32, seed=0))
    assert not result.diverged and result.steps == 30
    assert result.losses[-1][1] < result.losses[0][1] - 1.0
    assert len(result.losses) == 30


def test_training_records_the_gradient_norm_before_clipping():
    """Step 0's recorded norm is the global gradient norm of the initial model on the first batch; the clipped
    share follows the threshold; without clipping nothing is recorded."""
    from deltamup.scaling.data import get_task
    from deltamup.scaling.train import TrainConfig, lm_loss, train

    batch = next(get_task("sample").train_batches(4, 32, seed=0))
    model = build_model(ModelConfig(width=64, depth=1), "gdn-mup", "sgd", seed=0)
    lm_loss(model, batch).backward()
    norm_at_init = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()

    def run(grad_clip):
        config = TrainConfig(optimizer="sgd", lr=0.05, steps=6, grad_clip=grad_clip, log_every=4)
        return train(build_model(ModelConfig(width=64, depth=1), "gdn-mup", "sgd", seed=0), "gdn-mup", config,
                     get_task("sample").train_batches(4, 32, seed=0))

    tight, loose, off = run(1e-6), run(1e6), run(None)
    assert len(tight.grad_norms) == 6 and tight.grad_norms[0] == pytest.approx(norm_at_init, rel=1e-4)
    assert tight.clipped_fraction == 1.0 and loose.clipped_fraction == 0.0
    assert loose.grad_norms[0] == pytest.approx(norm_at_init, rel=1e-4)
    assert off.clipped_fraction is None and all(math.isnan(n) for n in off.grad_norms)


def test_divergence_is_detected():
    from deltamup.scaling.data import get_task
    from deltamup.scaling.train import TrainConfig, train

    model = build_model(ModelConfig(width=64, depth=1), "sp", seed=0)
    result = train(model, "sp", TrainConfig(optimizer="sgd", lr=1e6, steps=40, grad_clip=None, log_every=5),
                   get_task("sample").train_batches(2, 16, seed=0))
    assert result.diverged and result.diverged_step is not None and result.steps < 40


def test_compiled_loss_matches_eager_and_skips_probes():
    """TrainConfig(compile=True): model + cross-entropy through torch.compile give the eager loss and gradients;
    probes are off inside the compiled graph (a Recorder around it sees nothing, and nothing breaks)."""
    from deltamup.scaling.train import TrainConfig, lm_loss, loss_function

    model = build_model(ModelConfig(width=32, depth=1, heads=2), "gdn-mup", seed=0)
    batch = (torch.randint(0, 256, (2, 24)), torch.randint(0, 256, (2, 24)))
    with record() as recorder:
        compiled = loss_function(TrainConfig(compile=True))(model, batch)
    compiled.backward()
    compiled_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    eager = lm_loss(model, batch)
    eager.backward()
    assert recorder.tensors == {}
    assert torch.allclose(compiled, eager, rtol=1e-5)
    for p, g in zip(model.parameters(), compiled_grads):
        assert torch.allclose(p.grad, g, rtol=1e-4, atol=1e-6)


def test_compiled_blocks_share_one_graph_and_match_eager():
    """TrainConfig(compile="blocks"): every block of the model runs one traced graph (a block's name, used only by
    its probes, is not a constant of it), with eager's loss and gradients; lm_loss (evaluation) stays eager.
    Dynamo's own capture (its eager backend); Inductor's code generation is the whole-model test's above."""
    from torch._dynamo.utils import counters

    from deltamup.scaling.train import compile_blocks, lm_loss, token_loss

    model = build_model(ModelConfig(width=32, depth=3, heads=2), "gdn-mup", seed=0)
    batch = (torch.randint(0, 256, (2, 24)), torch.randint(0, 256, (2, 24)))
    eager = lm_loss(model, batch)
    eager.backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch._dynamo.reset()
    counters.clear()
    compile_blocks(model, backend="eager")
    compiled = token_loss(model, batch)
    compiled.backward()
    assert counters["stats"]["unique_graphs"] == 1 and not counters["recompiles"]
    with torch.no_grad():
        assert torch.allclose(lm_loss(model, batch), eager, rtol=1e-5)  # evaluation: eager, compiles nothing
    assert counters["stats"]["unique_graphs"] == 1 and not counters["recompiles"]
    assert torch.allclose(compiled, eager, rtol=1e-5)
    for p, g in zip(model.parameters(), eager_grads):
        assert torch.allclose(p.grad, g, rtol=1e-4, atol=1e-6)


def test_compile_modes_are_checked_before_any_work():
    from deltamup.scaling.data import get_task
    from deltamup.scaling.train import TrainConfig, train

    with pytest.raises(ValueError, match="unknown compile mode 'fast'"):
        TrainConfig(compile="fast")
    with pytest.raises(ValueError, match="compile: blocks needs deltamup's model"):
        train(torch.nn.Linear(4, 4), "sp", TrainConfig(compile="blocks", steps=1),
              get_task("sample").train_batches(2, 16, 0))
