"""Export → load → param groups: the same per-parameter LRs as the registry; shape mismatches and unsafe files
refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

from deltamup import parametrizations
from deltamup.models import ModelConfig, Role, tagged
from deltamup.parametrizations import build_model
from deltamup.parametrizations import export as ex
from deltamup.parametrizations.rolemap import RoleMap

SMALL = dict(depth=2, heads=2, vocab_size=64, base_width=64)


def per_param(opt: torch.optim.Optimizer) -> dict[int, tuple[float, float]]:
    return {id(p): (g["lr"], g["weight_decay"]) for g in opt.param_groups for p in g["params"]}


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("kind", ["gdn", "deltaproduct"])
def test_round_trip_gives_the_registrys_param_groups(tmp_path: Path, fmt: str, kind: str) -> None:
    config = ModelConfig(kind=kind, width=192, householder=2 if kind == "deltaproduct" else 1, **SMALL)
    for name in parametrizations.names():
        for optimizer in parametrizations.OPTIMIZERS:
            exp = ex.make_export(name, optimizer, config, lr=3e-3, weight_decay=0.1, tuned_width=64,
                                 train={"betas": (0.9, 0.98)}, provenance={"sweep": "synthetic"})
            path = ex.write_export(exp, tmp_path / f"{name}-{optimizer}.{fmt}", fmt)
            loaded = parametrizations.load_export(path)
            assert loaded == ex.from_dict(json.loads(json.dumps(exp.to_dict())))
            model = build_model(config, name, optimizer, seed=0)
            got = loaded.build_optimizer(model)
            want = parametrizations.build_optimizer(model, name, optimizer, lr=3e-3, weight_decay=0.1)
            assert per_param(got) == per_param(want)
            if optimizer == "adamw":
                assert got.param_groups[0]["betas"] == (0.9, 0.98)


def test_export_values_at_the_target_and_the_tuned_width() -> None:
    config = ModelConfig(width=256, **SMALL)  # m = 4
    exp = ex.make_export("gdn-mup", "adamw", config, lr=1e-2, weight_decay=0.1, tuned_width=64)
    hidden = exp.groups["hidden"]
    assert (exp.width_mult, hidden.lr_mult, hidden.lr) == (4.0, 0.25, pytest.approx(2.5e-3))
    assert hidden.init_std == pytest.approx(0.02 / 2) and hidden.tuned["init_std"] == pytest.approx(0.02)
    assert hidden.tuned["lr"] == pytest.approx(1e-2)
    assert exp.groups["gate_scalar"].weight_decay == 0 and exp.groups["norm_gain"].init_std is None
    assert exp.multipliers["readout"] == pytest.approx(16.0) and exp.tuned_multipliers["readout"] == pytest.approx(8.0)
    assert exp.multipliers["logits"] == pytest.approx(0.25)
    model = build_model(config, "gdn-mup")
    assert sum(g.elements for g in exp.groups.values()) == sum(p.numel() for p in model.parameters())
    assert "readout" not in exp.groups  # tied embeddings


def test_huge_width_exports_without_building_weights() -> None:
    exp = ex.make_export("gdn-mup", "adamw", ModelConfig(width=8192, depth=24), lr=3e-3, tuned_width=256)
    assert exp.groups["hidden"].elements > 10 ** 10 and exp.groups["hidden"].lr == pytest.approx(3e-3 / 32)


def test_shape_mismatch_says_so(tmp_path: Path) -> None:
    exp = ex.make_export("gdn-mup", "adamw", ModelConfig(width=192, **SMALL), lr=3e-3)
    model = build_model(ModelConfig(width=128, **SMALL), "gdn-mup")
    with pytest.raises(ValueError, match=r"for a model with width=192; the model has width=128"):
        exp.build_optimizer(model)


class UserModel(nn.Module):
    """A model of the user's own with plain nn layers and names deltamup knows nothing of."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(64, width)
        self.fc = nn.Linear(width, width, bias=False)
        self.ln = nn.LayerNorm(width, bias=False)


USER_MAP = RoleMap("user", ((r"^wte\.", Role.EMBEDDING), (r"^fc\.", Role.HIDDEN), (r"^ln\.", Role.NORM_GAIN)))


def test_role_map_gives_a_users_model_the_registrys_rules() -> None:
    model = UserModel(256)
    roles = USER_MAP.roles(model)
    opt = parametrizations.build_optimizer(model, "gdn-mup", "adamw", lr=1e-2, width_mult=4.0, width=256, roles=roles)
    lrs = {str(g["role"]): g["lr"] for g in opt.param_groups}
    assert lrs == {"embedding": pytest.approx(1e-2), "hidden": pytest.approx(2.5e-3), "norm_gain": pytest.approx(1e-2)}
    parametrizations.initialize(USER_MAP.tag(model), "gdn-mup", "adamw", width_mult=4.0, width=256)
    assert model.fc.weight.std().item() == pytest.approx(0.01, rel=0.05)
    assert torch.equal(model.ln.weight, torch.ones(256))  # module default kept
    with pytest.raises(ValueError, match=r"no pattern for the parameters ln\.weight"):
        RoleMap("partial", USER_MAP.patterns[:2]).roles(model)


def test_shape_mismatch_of_a_mapped_model_names_the_roles() -> None:
    big, small = UserModel(256), UserModel(128)
    for m in (big, small):
        for p in m.parameters():
            tagged(p, USER_MAP.role(next(n for n, q in m.named_parameters() if q is p)))
    exp = ex.Export(parametrization="gdn-mup", optimizer="adamw", width=256, base_width=64, width_mult=4.0, lr=1e-2,
                    weight_decay=0.0, tuned_width=64, model={}, multipliers={}, tuned_multipliers={},
                    groups={role: ex.RoleExport(lr=0, lr_mult=0, weight_decay=0, wd_mult=0, init_std=None,
                                                tensors=n, elements=e, tuned={})
                            for role, (n, e) in ex.role_sizes(big).items()})
    exp.check_model(big)
    with pytest.raises(ValueError, match=r"hidden: export 1 tensors / 65,536 elements, model 1 / 16,384"):
        exp.check_model(small, USER_MAP.roles(small))


def test_a_changed_registry_is_caught(tmp_path: Path) -> None:
    config = ModelConfig(width=128, **SMALL)
    doc = ex.make_export("gdn-mup", "adamw", config, lr=1e-2).to_dict()
    doc["groups"]["hidden"]["lr"] *= 2
    with pytest.raises(ValueError, match="rule for hidden gives lr"):
        ex.from_dict(doc).build_optimizer(build_model(config, "gdn-mup"))


def test_unsafe_or_foreign_files_are_refused(tmp_path: Path) -> None:
    evil = tmp_path / "evil.yaml"
    evil.write_text("!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ValueError, match="cannot parse"):
        parametrizations.load_export(evil)
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"lr": 1e-3}))
    with pytest.raises(ValueError, match="not a deltamup export"):
        parametrizations.load_export(other)
    doc = ex.make_export("sp", "adamw", ModelConfig(width=128, **SMALL), lr=1e-2).to_dict()
    del doc["groups"]
    with pytest.raises(ValueError, match="field .groups.: missing"):
        ex.from_dict(doc)
    with pytest.raises(ValueError, match="does not exist"):
        parametrizations.load_export(tmp_path / "nope.yaml")
    with pytest.raises(ValueError, match="unknown export format"):
        ex.write_export(ex.from_dict(ex.make_export("sp", "adamw", ModelConfig(width=128, **SMALL), lr=1).to_dict()),
                        tmp_path / "x", "toml")
