"""Naive µP (`mup`) is exactly what microsoft/mup does to this model: same per-parameter LR and weight decay,
same init scale, same logit multiplier."""
import pytest

from deltamup import parametrizations
from deltamup.models import ModelConfig, Role, role_of
from deltamup.parametrizations import build_model
from deltamup.parametrizations.table import per_optimizer

mup = pytest.importorskip("mup")


def models_at(kind, width, householder=1):
    base = ModelConfig(kind=kind, width=256, depth=2, householder=householder)
    return [build_model(base.with_width(w), "sp", seed=0) for w in (256, 512, width)]


def mup_groups(model, optimizer, lr, wd):
    decay = [p for p in model.parameters() if parametrizations.resolve("mup", role_of(p), optimizer, 1, 1).wd_mult]
    no_decay = [p for p in model.parameters()
                if not parametrizations.resolve("mup", role_of(p), optimizer, 1, 1).wd_mult]
    groups = [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]
    opt = (mup.MuAdamW if optimizer == "adamw" else mup.MuSGD)(groups, lr=lr)
    return {id(p): (g["lr"], g["weight_decay"]) for g in opt.param_groups for p in g["params"]}


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
@pytest.mark.parametrize("kind,householder", [("gdn", 1), ("deltaproduct", 2), ("deltanet", 1)])
def test_registry_matches_mup_library(optimizer, kind, householder):
    base, delta, model = models_at(kind, 1024, householder)
    mup.set_base_shapes(model, base, delta=delta, rescale_params=False)
    lr, wd = 0.01, 0.1
    theirs = mup_groups(model, optimizer, lr, wd)
    ours = parametrizations.build_optimizer(model, "mup", optimizer, lr, weight_decay=wd)
    checked = 0
    for group in ours.param_groups:
        for p in group["params"]:
            their_lr, their_wd = theirs[id(p)]
            # mup takes each tensor's own fan-in ratio (⌈8d/3⌉ rounds: 2731/683 = 3.998 for the MLP); we take m
            assert group["lr"] == pytest.approx(their_lr, rel=2e-3), (group["role"], tuple(p.shape))
            assert group["weight_decay"] == pytest.approx(their_wd, rel=2e-3), (group["role"], tuple(p.shape))
            checked += 1
    assert checked == len(list(model.parameters()))
    # init: mup.init.normal_(std) keeps vector-like stds and divides matrix-like ones by √(width_mult)
    for p in model.parameters():
        rule = parametrizations.resolve("mup", role_of(p), optimizer, 4.0, 1024)
        sp_std = parametrizations.resolve("sp", role_of(p), optimizer, 4.0, 1024).init_std
        if rule.init_std is None:
            assert sp_std is None
            continue
        mup_std = sp_std * (p.infshape.width_mult() ** -0.5 if p.infshape.ninf() == 2 else 1.0)
        assert rule.init_std == pytest.approx(mup_std, rel=2e-3), (role_of(p), tuple(p.shape))
    # MuReadout / MuSharedReadout multiply the logits by 1 / width_mult of the readout weight
    logits = per_optimizer(parametrizations.get("mup").multipliers["logits"], optimizer)(4.0, 1024)
    assert logits == pytest.approx(1 / model.embedding.infshape.width_mult())
    assert parametrizations.multipliers("mup", optimizer, 4.0, 1024).readout == 1.0


def test_gate_rules_differ_from_naive_mup_under_sgd():
    """The defect GDN-µP fixes: naive µP moves the gate-matrix LR up with width under SGD, GDN-µP down."""
    naive = parametrizations.resolve("mup", Role.GATE_MATRIX, "sgd", 4.0, 1024).lr_mult
    gdn = parametrizations.resolve("gdn-mup", Role.GATE_MATRIX, "sgd", 4.0, 1024).lr_mult
    assert naive == pytest.approx(4.0) and gdn == pytest.approx(0.5)
    scalar = parametrizations.resolve("gdn-mup", Role.GATE_SCALAR, "sgd", 4.0, 1024).lr_mult
    assert scalar == pytest.approx(2.0)
