"""The mechanisms of GDN-µP, one at a time (docs/theory.md): the √d before the output RMSNorm is that norm's eps
divided by d; AdamW's ε is a per-role rule of the table; SGD without clipping is plain SGD."""
import dataclasses
from pathlib import Path

import polars as pl
import pytest
import torch

from deltamup import parametrizations
from deltamup.models import ModelConfig, Role
from deltamup.models.layers import RMSNorm
from deltamup.parametrizations import tables
from deltamup.scaling import coord_check
from deltamup.scaling.data.sample import sample_batches
from deltamup.scaling.train import TrainConfig, train
from deltamup.sweeps import spec as specs
from deltamup.sweeps.trial import result_columns, trial_config

# norm_eps 1e-4: o's mean square at init is then comparable to the eps at these widths, so that dropping the √d
# changes training visibly while writing it as eps/d must not.
SMALL = dict(kind="gdn", depth=1, heads=2, base_width=32, vocab_size=256, norm_eps=1e-4)


def losses(parametrization: str, width: int, optimizer: str, steps: int = 4) -> list[float]:
    model = parametrizations.build_model(ModelConfig(width=width, **SMALL), parametrization, optimizer, seed=0)
    config = TrainConfig(optimizer=optimizer, lr=1e-2 if optimizer == "adamw" else 0.1, steps=steps, log_every=1,
                         bf16=False)
    return [loss for _, loss, _ in train(model, parametrization, config, sample_batches(4, 32, seed=0)).losses]


def at_init(name: str, probe_suffix: str) -> pl.DataFrame:
    """The fitted width slopes at t = 0 of the probes ending in probe_suffix: a 1-step AdamW coordinate check of
    table `name` at widths 32–256 (depth 1, norm eps 1e-6), with each slope's verdict against the table."""
    config = ModelConfig(**{**SMALL, "norm_eps": 1e-6})
    check = coord_check.CoordCheck(config, name, "adamw", (32, 64, 128, 256), steps=1, batch_size=2, seq_len=16,
                                   device="cpu")
    fitted = coord_check.fit_slopes(coord_check.run(check), name, "adamw", "gdn")
    return fitted.filter((fitted["step"] == 0) & fitted["probe"].str.ends_with(probe_suffix))


def test_rmsnorm_of_a_scaled_input_is_rmsnorm_with_eps_over_the_scale_squared():
    x = torch.randn(3, 5, 16, dtype=torch.float64) * 1e-3
    c, eps = 16.0, 1e-6
    torch.testing.assert_close(RMSNorm(16, eps).double()(c * x), RMSNorm(16, eps / c**2).double()(x))


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_sqrt_d_before_the_norm_trains_as_eps_over_d(optimizer):
    for width in (64, 128):
        sqrt_d, eps_over_d = losses("gdn-mup", width, optimizer), losses("gdn-mup-normeps", width, optimizer)
        assert sqrt_d == pytest.approx(eps_over_d, rel=1e-5, abs=0), width
        neither = losses("gdn-mup-nosqrtd", width, optimizer)
        assert max(abs(a - b) for a, b in zip(sqrt_d[1:], neither[1:])) > 1e-3, width  # the eps does matter here


@pytest.mark.parametrize("name,output_eps", [("gdn-mup-normeps", 1e-4 / 128), ("gdn-mup-epsregime", 1e-4 * 100)])
def test_the_readout_eps_lands_on_the_output_norm_only(name, output_eps):
    """gdn-mup-normeps: the √d written as the output norm's ε / d; gdn-mup-epsregime: no √d and that ε × 100."""
    config = ModelConfig(width=128, **SMALL)
    model = parametrizations.build_model(config, name)
    block = model.blocks[0]
    assert block.mixer.o_norm.eps == pytest.approx(output_eps)
    assert block.mixer_norm.eps == block.mlp_norm.eps == model.final_norm.eps == 1e-4
    assert model.multipliers.readout == 1.0


def test_adam_eps_is_a_per_role_rule():
    config = ModelConfig(width=128, **SMALL)  # m = 4
    model = parametrizations.build_model(config, "gdn-mup-adameps")
    groups = {g["role"]: g for g in parametrizations.build_optimizer(model, "gdn-mup-adameps", "adamw", lr=1e-3,
                                                                     eps=1e-8).param_groups}
    assert groups["hidden"]["eps"] == pytest.approx(1e-8 / 4)
    assert groups["embedding"]["eps"] == pytest.approx(1e-8 / 4)
    assert groups["gate_matrix"]["eps"] == pytest.approx(1e-8 / 2)
    plain = parametrizations.build_optimizer(model, "gdn-mup", "adamw", lr=1e-3, eps=1e-8).param_groups
    assert {g["eps"] for g in plain} == {1e-8}
    sgd = parametrizations.build_optimizer(model, "gdn-mup-adameps", "sgd", lr=1e-3).param_groups
    assert all("eps" not in g for g in sgd)


@pytest.mark.parametrize("grad_clip", [None, 0])
def test_sgd_without_clipping_runs_unclipped_and_records_no_clipped_fraction(grad_clip):
    raw = {"model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "widths": [64], "lrs": [0.5],
           "optimizers": ["sgd"], "steps": 3, "batch_size": 4, "seq_len": 32, "log_every": 1, "momentum": 0.98,
           "grad_clip": grad_clip}
    spec = specs.parse(raw)
    point = spec.grid()[0]
    config = spec.train_config(point)
    assert not config.grad_clip

    def run(train_config):
        model = parametrizations.build_model(spec.model_config(64), "gdn-mup", "sgd", seed=0)
        result = train(model, "gdn-mup", train_config, sample_batches(4, 32, seed=0))
        return model, result

    unclipped, result = run(config)
    assert result.clipped_fraction is None and len(result.grad_norms) == 3
    cfg = trial_config(spec, point, Path("unused"), run=1)
    assert result_columns(cfg, result, {}, 0)["clipped_fraction"] is None
    # a threshold that binds changes the updates (SGD: lr · g · min(1, c/‖g‖)); one that never binds does not
    clipped, binding = run(dataclasses.replace(config, grad_clip=1e-3))
    loose, never = run(dataclasses.replace(config, grad_clip=1e6))
    assert binding.clipped_fraction == 1.0 and never.clipped_fraction == 0.0
    weights = [dict(m.named_parameters())["blocks.0.mlp.up.weight"] for m in (unclipped, clipped, loose)]
    assert torch.equal(weights[0], weights[2]) and not torch.allclose(weights[0], weights[1])


def test_long_coordinate_check_runs_the_sweep_schedule_and_records_every_n_steps():
    check = coord_check.CoordCheck(ModelConfig(**{**SMALL, "norm_eps": 1e-6}), "gdn-mup", "adamw", (32, 64), steps=4,
                                   batch_size=2, seq_len=16, device="cpu", schedule="cosine", warmup_steps=1,
                                   grad_clip=1e-3, weight_decay=0.1, every=2)
    rows = coord_check.collect(check)
    assert {r["step"] for r in rows} == {0, 2, 4}
    grads = [r for r in rows if r["probe"].startswith("grad.")]
    assert {r["probe"] for r in grads} >= {"grad.hidden", "grad.embedding", "grad.gate_scalar"}
    assert all(0 < r["rms"] <= 1e-3 for r in grads)  # clipped to a global norm of 1e-3
    config = check.train_config
    assert (config.schedule, config.warmup_steps, config.weight_decay) == ("cosine", 1, 0.1)


def test_gate_rules_alone_decide_whether_the_gate_pre_activations_grow_with_width():
    """gdn-mup-mupgates is GDN-µP with naive µP's gate rules only: at init W_α x grows like √d there (the blow-up
    GDN-µP's σ/√m init removes) and not under gdn-mup; the slope test is the table's own expectation."""
    slopes = {}
    for name in ("gdn-mup", "gdn-mup-mupgates"):
        fitted = at_init(name, "alpha_pre")
        slopes[name] = fitted["slope"].to_list()
        assert fitted["verdict"].to_list() == ["ok"] * len(fitted), name
    assert all(s > 0.35 for s in slopes["gdn-mup-mupgates"]) and all(abs(s) < 0.15 for s in slopes["gdn-mup"])


def test_at_the_base_width_the_eps_and_gate_variants_train_as_gdn_mup_and_part_from_it_above():
    """m = 1: Adam's ε × 1/m and naive µP's gate rules (init σ, LR × 1) are GDN-µP's own (ε, σ/√m, LR × 1/m), so the
    study's runs of them at width 256 are replicates of GDN-µP (studies/gdn-adamw-8l); at m = 4 each differs."""
    base = losses("gdn-mup", 32, "adamw")
    for variant in ("gdn-mup-adameps", "gdn-mup-mupgates"):
        assert losses(variant, 32, "adamw") == base, variant
    wide = losses("gdn-mup", 128, "adamw")  # m = 4: ε / 4 moves the losses by ~3e-5, the gate rules by ~9e-4
    for variant in ("gdn-mup-adameps", "gdn-mup-mupgates"):
        assert max(abs(a - b) for a, b in zip(losses(variant, 128, "adamw"), wide)) > 1e-6, variant


@pytest.mark.parametrize("variant,roles", [("gdn-mup-sgdgates", {"gate_matrix", "beta_matrix"}),
                                           ("gdn-mup-sgdhidden", {"hidden"})])
def test_sgd_variant_moves_only_one_roles_sgd_learning_rate_by_one_over_sqrt_m(variant, roles):
    """gdn-mup-sgdgates: W_α, W_β's SGD LR × 1/m where GDN-µP's is × 1/√m; gdn-mup-sgdhidden: the hidden matrices'
    × 1/√m where GDN-µP's is × 1. Either is × 1/√m of GDN-µP's for its role (½ at m = 4); every other group, and
    every AdamW group, as GDN-µP's."""
    model = parametrizations.build_model(ModelConfig(width=128, **SMALL), "gdn-mup", seed=0)  # m = 4
    for optimizer in ("sgd", "adamw"):
        lrs = {name: {g["role"]: g["lr"] for g in parametrizations.build_optimizer(model, name, optimizer, 0.1)
                      .param_groups}
               for name in ("gdn-mup", variant)}
        assert lrs["gdn-mup"].keys() == lrs[variant].keys()
        for group_role, lr in lrs["gdn-mup"].items():
            expected = 0.5 if optimizer == "sgd" and str(group_role) in roles else 1.0
            assert lrs[variant][group_role] / lr == pytest.approx(expected), (optimizer, group_role)


def test_naive_gate_rules_apart_are_one_rule_each_and_together_mupgates_under_adamw():
    """gdn-mup-gateinit takes naive µP's gate-matrix init alone: W_α x grows like √d at init, its learning rates are
    GDN-µP's. gdn-mup-gatelr takes their AdamW LR alone (× 1: m = 4 times GDN-µP's at width 128), its init and every
    SGD rate GDN-µP's. Under AdamW the two rules together are gdn-mup-mupgates'."""
    for name, grows in (("gdn-mup-gateinit", True), ("gdn-mup-gatelr", False)):
        slopes = at_init(name, "alpha_pre")["slope"].to_list()
        assert slopes and all((s > 0.35) if grows else (abs(s) < 0.15) for s in slopes), name
    model = parametrizations.build_model(ModelConfig(width=128, **SMALL), "gdn-mup", seed=0)  # m = 4
    gates = {"gate_matrix", "beta_matrix"}
    for optimizer in ("sgd", "adamw"):
        lrs = {name: {str(g["role"]): g["lr"] for g in parametrizations.build_optimizer(model, name, optimizer, 0.1)
                      .param_groups}
               for name in ("gdn-mup", "gdn-mup-gateinit", "gdn-mup-gatelr", "gdn-mup-mupgates")}
        assert lrs["gdn-mup-gateinit"] == lrs["gdn-mup"]
        for role, lr in lrs["gdn-mup"].items():
            moved = optimizer == "adamw" and role in gates
            assert lrs["gdn-mup-gatelr"][role] == pytest.approx(4 * lr if moved else lr), (optimizer, role)
            if optimizer == "adamw":
                assert lrs["gdn-mup-gatelr"][role] == pytest.approx(lrs["gdn-mup-mupgates"][role]), role
    for role in (Role.GATE_MATRIX, Role.BETA_MATRIX):
        assert tables.GDN_MUP_GATEINIT.rules[role].init == tables.GDN_MUP_MUPGATES.rules[role].init


def test_naive_mup_under_adamw_is_gdn_mup_without_sqrt_d_with_its_gate_rules_and_hidden_weight_decay():
    """Under AdamW naive µP differs from GDN-µP by three rules and no other: no √d before the output norm
    (gdn-mup-nosqrtd), W_α, W_β's init and LR (gdn-mup-mupgates) and the hidden matrices' weight decay × m
    (gdn-mup-mupwd). The three taken from their tables into one give naive µP's init std, LR, weight decay and ε for
    every role and its multipliers at m = 4, and train as it does with weight decay on; leaving out any one does not."""
    gates = (Role.GATE_MATRIX, Role.BETA_MATRIX, Role.GATE_SCALAR)
    parts = {"sqrtd": {}, "gates": {role: tables.GDN_MUP_MUPGATES.rules[role] for role in gates},
             "wd": {Role.HIDDEN: tables.GDN_MUP_MUPWD.rules[Role.HIDDEN]}}

    def union(*names: str) -> parametrizations.Parametrization:
        rules = {**tables.GDN_MUP.rules, **{role: rule for name in names for role, rule in parts[name].items()}}
        multipliers = (tables.GDN_MUP_NOSQRTD if "sqrtd" in names else tables.GDN_MUP).multipliers
        return dataclasses.replace(tables.GDN_MUP, name="+".join(names), rules=rules, multipliers=multipliers)

    def table(p: str | parametrizations.Parametrization) -> tuple:
        rules = [parametrizations.resolve(p, role, "adamw", 4.0, 128.0) for role in Role]
        return ([(r.role, r.init_std, r.lr_mult, r.wd_mult, r.eps_mult) for r in rules],
                parametrizations.multipliers(p, "adamw", 4.0, 128.0))

    assert table(union("sqrtd", "gates", "wd")) == table("mup")
    for left_out in parts:
        assert table(union(*(name for name in parts if name != left_out))) != table("mup"), left_out
    model = parametrizations.build_model(ModelConfig(width=128, **SMALL), "gdn-mup-mupwd", seed=0)
    decay = {str(g["role"]): g["weight_decay"] for g in parametrizations.build_optimizer(
        model, "gdn-mup-mupwd", "adamw", 0.1, weight_decay=0.1).param_groups}
    assert decay.pop("hidden") == pytest.approx(0.4) and set(decay.values()) <= {0.0, 0.1}

    config = TrainConfig(optimizer="adamw", lr=1e-2, steps=4, log_every=1, bf16=False, weight_decay=0.1)
    trained = {}
    for p in ("mup", union("sqrtd", "gates", "wd"), union("sqrtd", "gates")):
        model = parametrizations.build_model(ModelConfig(width=128, **SMALL), p, "adamw", seed=0)
        trained[getattr(p, "name", p)] = [loss for _, loss, _ in
                                          train(model, p, config, sample_batches(4, 32, seed=0)).losses]
    assert trained["sqrtd+gates+wd"] == trained["mup"]
    assert trained["sqrtd+gates"] != trained["mup"]


def test_code_convolution_init_on_gdn_mup_shrinks_v_alone_and_its_nosqrtd_twin_drops_only_the_sqrt_d():
    """gdn-mup-codeconv: GDN-µP with the code variant's convolution init (0.5/√d), every learning rate and
    multiplier GDN-µP's; v's RMS at t = 0 then shrinks like d^-1/2 where GDN-µP's is flat. gdn-mup-codeconv-nosqrtd
    also drops the √d before the output norm, and nothing else."""
    from deltamup.models.roles import role_of

    slopes = {name: at_init(name, ".v")["slope"].to_list() for name in ("gdn-mup", "gdn-mup-codeconv")}
    assert slopes["gdn-mup"] and all(abs(s) < 0.15 for s in slopes["gdn-mup"])
    assert slopes["gdn-mup-codeconv"] and all(-0.65 < s < -0.35 for s in slopes["gdn-mup-codeconv"])
    for width in (32, 128):
        model = parametrizations.build_model(ModelConfig(width=width, **SMALL), "gdn-mup-codeconv", "adamw", seed=0)
        convs = [p for p in model.parameters() if role_of(p) == Role.CONV]
        assert convs and all(p.std().item() == pytest.approx(0.5 * width**-0.5, rel=0.25) for p in convs)
        for optimizer in ("sgd", "adamw"):
            lrs = {name: [(str(g["role"]), g["lr"]) for g in parametrizations.build_optimizer(
                       parametrizations.build_model(ModelConfig(width=width, **SMALL), name, optimizer, seed=0),
                       name, optimizer, 0.1).param_groups]
                   for name in ("gdn-mup", "gdn-mup-codeconv", "gdn-mup-codeconv-nosqrtd")}
            assert lrs["gdn-mup-codeconv"] == lrs["gdn-mup"] == lrs["gdn-mup-codeconv-nosqrtd"]
    assert tables.GDN_MUP_CODECONV.multipliers == tables.GDN_MUP.multipliers
    assert tables.GDN_MUP_CODECONV_NOSQRTD.multipliers == tables.GDN_MUP_NOSQRTD.multipliers
    assert tables.GDN_MUP_CODECONV_NOSQRTD.rules == tables.GDN_MUP_CODECONV.rules


def _conv_relative_step(name: str, width: int) -> float:
    """‖ΔW‖ / ‖W₀‖ over the short convolutions after one AdamW step of table `name` (seed 0, one batch)."""
    from deltamup.models.roles import role_of

    model = parametrizations.build_model(ModelConfig(width=width, **SMALL), name, "adamw", seed=0)
    before = [p.detach().clone() for p in model.parameters() if role_of(p) == Role.CONV]
    config = TrainConfig(optimizer="adamw", lr=1e-3, weight_decay=0.1, steps=1, schedule="constant", bf16=False)
    train(model, name, config, sample_batches(4, 32, seed=0))
    after = [p.detach() for p in model.parameters() if role_of(p) == Role.CONV]
    change = sum(((a - b) ** 2).sum() for a, b in zip(after, before)) ** 0.5
    return (change / sum((b ** 2).sum() for b in before) ** 0.5).item()


@pytest.mark.parametrize("width", [48, 192])
def test_the_code_convolution_inits_two_effects_apart(width):
    """gdn-mup-convstep gives the convs at their own init the relative AdamW step the code's init (0.5/√d) gives them
    (√(d/3) times GDN-µP's); gdn-mup-codeconv-ownstep gives the code's init GDN-µP's relative step. Only the convs'
    AdamW LR and weight decay differ from the table each starts from (LR × wd kept), and SGD not at all."""
    from deltamup.models.roles import role_of

    c = (width / 3) ** 0.5
    steps = {name: _conv_relative_step(name, width)
             for name in ("gdn-mup", "gdn-mup-codeconv", "gdn-mup-convstep", "gdn-mup-codeconv-ownstep")}
    assert steps["gdn-mup-codeconv"] / steps["gdn-mup"] == pytest.approx(c, rel=0.15)
    assert steps["gdn-mup-convstep"] == pytest.approx(steps["gdn-mup-codeconv"], rel=0.1)
    assert steps["gdn-mup-codeconv-ownstep"] == pytest.approx(steps["gdn-mup"], rel=0.1)
    for variant, start in (("gdn-mup-convstep", "gdn-mup"), ("gdn-mup-codeconv-ownstep", "gdn-mup-codeconv")):
        models = {name: parametrizations.build_model(ModelConfig(width=width, **SMALL), name, "adamw", seed=0)
                  for name in (variant, start)}
        assert all(torch.equal(a, b) for a, b in zip(*(m.parameters() for m in models.values())))
        for optimizer in ("adamw", "sgd"):
            groups = {name: {str(g["role"]): (g["lr"], g["weight_decay"]) for g in parametrizations.build_optimizer(
                          model, name, optimizer, 0.1, weight_decay=0.1).param_groups}
                      for name, model in models.items()}
            conv = str(Role.CONV)
            others = {role: v for role, v in groups[variant].items() if role != conv}
            assert others == {role: v for role, v in groups[start].items() if role != conv}
            factor = 1.0 if optimizer == "sgd" else c if variant == "gdn-mup-convstep" else 1 / c
            (lr, wd), (lr0, wd0) = groups[variant][conv], groups[start][conv]
            assert lr == pytest.approx(lr0 * factor) and wd == pytest.approx(wd0 / factor)
        assert any(role_of(p) == Role.CONV for p in models[variant].parameters())
