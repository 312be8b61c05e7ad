"""parametrize on a model the library has never seen (tests/user_model.py): roles from base/delta shapes alone give
the same per-parameter learning rates, weight decays, init scales and forward multipliers as deltamup's own model of
the same architecture, under every parametrization and optimizer; the multipliers survive a state_dict round trip;
bad input is one ValueError line."""
from __future__ import annotations

import pytest
import torch
from user_model import UserLM, ours_name

from deltamup import parametrizations
from deltamup.models import ModelConfig, Multipliers, Role, role_of
from deltamup.parametrizations import build_model, parametrize

WIDTH, BASE, DELTA = 192, 64, 128
BETAS = {f"layers.{i}.mix.w_beta.weight": Role.BETA_MATRIX for i in range(2)}  # W_β named, the rest from shapes


def config(tied: bool) -> ModelConfig:
    return ModelConfig(width=WIDTH, depth=2, heads=2, vocab_size=64, base_width=BASE, tie_embeddings=tied)


def by_param(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, tuple[float, float]]:
    ids = {id(p): n for n, p in model.named_parameters()}
    return {ids[id(p)]: (g["lr"], g["weight_decay"]) for g in optimizer.param_groups for p in g["params"]}


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
@pytest.mark.parametrize("name", parametrizations.names())
def test_user_model_gets_our_rules_from_shapes_alone(name: str, optimizer: str, tied: bool) -> None:
    ours = build_model(config(tied), name, optimizer, seed=0)
    user = UserLM(WIDTH, tied=tied)
    rules = parametrizations.get(name).rules  # a table with a rule for W_β alone needs W_β named: shapes can't tell
    roles = BETAS if rules[Role.BETA_MATRIX] != rules[Role.GATE_MATRIX] else None
    p = parametrize(user, name, optimizer, base_model=UserLM(BASE, tied=tied), delta_model=UserLM(DELTA, tied=tied),
                    roles=roles)
    assert (p.width, p.base_width) == (WIDTH, BASE)
    theirs_params, ours_params = dict(user.named_parameters()), dict(ours.named_parameters())
    assert sorted(map(ours_name, theirs_params)) == sorted(ours_params)
    for n in theirs_params:  # the role, hence the init std, of every parameter (W_β: shapes can't tell it from W_α)
        ours_role = role_of(ours_params[ours_name(n)])
        assert p.roles[n] == (Role.GATE_MATRIX if ours_role is Role.BETA_MATRIX and not roles else ours_role), n
        want = parametrizations.resolve(name, role_of(ours_params[ours_name(n)]), optimizer, WIDTH / BASE, WIDTH)
        assert p.rule(n).init_std == want.init_std, n
    lrs = by_param(user, p.build_optimizer(lr=0.01, weight_decay=0.1))
    want = by_param(ours, parametrizations.build_optimizer(ours, name, optimizer, lr=0.01, weight_decay=0.1))
    assert {ours_name(n): v for n, v in lrs.items()} == want
    assert p.multipliers == ours.multipliers
    # the hidden matrices were re-drawn at the table's std (all of them together: ~2·10⁵ draws)
    hidden = torch.cat([theirs_params[n].detach().flatten() for n, r in p.roles.items() if str(r) == "hidden"])
    std = parametrizations.resolve(name, p.roles["layers.0.mix.wq.weight"], optimizer, WIDTH / BASE, WIDTH).init_std
    assert hidden.std().item() == pytest.approx(std, rel=0.02)
    # DeltaLM's weights in the user's model: the same logits, so every multiplier acts where DeltaLM applies it
    user.load_state_dict({n: ours_params[ours_name(n)] for n in theirs_params}, strict=False)
    tokens = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(user(tokens), ours(tokens), rtol=1e-4, atol=1e-5)


def test_sites_and_structure_found() -> None:
    p = parametrize(UserLM(WIDTH), "gdn-mup", "adamw", base_model=UserLM(BASE), delta_model=UserLM(DELTA))
    assert {(s.module, s.field, s.side) for s in p.sites} == {
        ("layers.0.mix.out_norm", "readout", "input"), ("layers.1.mix.out_norm", "readout", "input"),
        ("head", "logits", "output")}
    assert [m.name for m in p.structure.mixers] == ["layers.0.mix", "layers.1.mix"]
    assert {r["role"] for r in p.describe() if r["parameter"].endswith(("A_log", "dt_bias"))} == {"gate_scalar"}
    assert {r["role"] for r in p.describe() if "w_alpha" in r["parameter"] or "w_beta" in r["parameter"]} == {
        "gate_matrix"}


def test_a_rule_for_w_beta_alone_needs_w_beta_named() -> None:
    """A table that sets W_β apart from W_α (gdn-mup-betalr) refuses a model whose W_β only shapes found (it would
    train at W_α's rule); named by roles=, W_β takes its own rule (AdamW × m^-5/4) and W_α keeps GDN-µP's (× 1/m)."""
    models = dict(base_model=UserLM(BASE), delta_model=UserLM(DELTA))
    with pytest.raises(ValueError, match="W_β is not told apart"):
        parametrize(UserLM(WIDTH), "gdn-mup-betalr", "adamw", **models)
    p = parametrize(UserLM(WIDTH), "gdn-mup-betalr", "adamw", roles=BETAS, **models)
    lrs = by_param(p.model, p.build_optimizer(lr=0.01))
    alpha, beta = lrs["layers.0.mix.w_alpha.weight"][0], lrs["layers.0.mix.w_beta.weight"][0]
    assert alpha == pytest.approx(0.01 * BASE / WIDTH) and beta == pytest.approx(0.01 * (BASE / WIDTH) ** 1.25)


def test_model_with_base_shapes_needs_no_delta_when_it_is_wider_and_one_when_not() -> None:
    p = parametrize(UserLM(WIDTH), "mup", "sgd", base_model=UserLM(BASE))
    assert p.width_mult == WIDTH / BASE and p.multipliers == Multipliers(logits=BASE / WIDTH)
    with pytest.raises(ValueError, match="pass delta_model="):
        parametrize(UserLM(BASE), "mup", "sgd", base_model=UserLM(BASE))
    at_base = parametrize(UserLM(BASE), "gdn-mup", "adamw", base_model=UserLM(BASE), delta_model=UserLM(DELTA))
    assert at_base.width_mult == 1 and at_base.multipliers.readout == BASE ** 0.5


@pytest.mark.parametrize("load_into_fresh", [True, False])
def test_multipliers_survive_a_state_dict_round_trip(tmp_path, load_into_fresh: bool) -> None:
    def make():
        return parametrize(UserLM(WIDTH), "gdn-mup", "adamw", base_model=UserLM(BASE), delta_model=UserLM(DELTA))

    p = make()
    opt = p.build_optimizer(lr=1e-2)
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    for _ in range(2):  # trained weights, not the initialisation
        opt.zero_grad()
        p.model(tokens).square().mean().backward()
        opt.step()
    torch.save(p.model.state_dict(), tmp_path / "model.pt")
    state = torch.load(tmp_path / "model.pt")
    assert state["layers.0.mix.out_norm.deltamup_readout_input"].item() == pytest.approx(WIDTH ** 0.5)
    fresh = make().model if load_into_fresh else UserLM(WIDTH)
    if not load_into_fresh:  # a model without the hooks refuses the checkpoint instead of running without them
        with pytest.raises(RuntimeError, match="deltamup_readout_input"):
            fresh.load_state_dict(state)
        return
    fresh.load_state_dict(state)
    with torch.no_grad():
        assert torch.equal(fresh(tokens), p.model(tokens))


def test_parametrize_twice_replaces_the_multipliers() -> None:
    model = UserLM(WIDTH)
    parametrize(model, "gdn-mup", "adamw", base_model=UserLM(BASE), delta_model=UserLM(DELTA))
    parametrize(model, "sp", "adamw", base_model=UserLM(BASE), delta_model=UserLM(DELTA), init=False)
    assert not [k for k in model.state_dict() if "deltamup" in k]
    twin = UserLM(WIDTH)
    twin.load_state_dict(model.state_dict())
    tokens = torch.randint(0, 64, (1, 8))
    with torch.no_grad():
        assert torch.equal(model(tokens), twin(tokens))


class Scaled(UserLM):
    def __init__(self, width: int) -> None:
        super().__init__(width)
        self.temperature = torch.nn.Parameter(torch.ones(1))
        self.bias = torch.nn.Parameter(torch.zeros(width))


class Other(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(64, width)


@pytest.mark.parametrize("make,base,message", [
    (lambda: Scaled(WIDTH), lambda: Scaled(BASE),
     r"^cannot classify 2 parameters \(\* = grows with width\): temperature \[1\]: a fixed-size vector outside a "
     r"norm .*; bias \[192\*\]: a vector that grows with width outside a norm \(a bias\?\); give them roles"),
    (lambda: UserLM(WIDTH), lambda: Other(BASE),
     r"^the base model is not the model's architecture: it lacks final\.weight, head"),
    (lambda: UserLM(WIDTH), lambda: UserLM(BASE, depth=3), r"^the base model is not the model's architecture: it "
                                                           r"has layers\.2\.ffn\.w1\.weight"),
    (lambda: build_model(config(False)), lambda: UserLM(BASE),
     r"^a DeltaLM takes its parametrization when it is built"),
])
def test_bad_input_is_one_value_error_line(make, base, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        parametrize(make(), "gdn-mup", "adamw", base_model=base())
    assert "\n" not in str(err.value)


def test_roles_argument_classifies_what_shapes_cannot() -> None:
    from deltamup.models import Role

    p = parametrize(Scaled(WIDTH), "gdn-mup", "sgd", base_model=Scaled(BASE),
                    roles={"temperature": Role.GATE_SCALAR, "bias": Role.NORM_GAIN})
    assert p.roles["temperature"] is Role.GATE_SCALAR and p.roles["bias"] is Role.NORM_GAIN
    with pytest.raises(ValueError, match="roles= names parameters the model does not have: nope"):
        parametrize(UserLM(WIDTH), "gdn-mup", "sgd", base_model=UserLM(BASE), roles={"nope": Role.HIDDEN})


def test_export_applies_to_any_width_from_its_base_width() -> None:
    from deltamup.parametrizations.export import make_export

    exp = make_export("gdn-mup", "sgd", ModelConfig(width=128, depth=2, heads=2, vocab_size=64, base_width=BASE),
                      lr=0.1, weight_decay=0.01)
    p = exp.parametrize(UserLM(WIDTH), base_model=UserLM(BASE))
    assert (p.parametrization, p.optimizer, p.width_mult) == ("gdn-mup", "sgd", WIDTH / BASE)
    with pytest.raises(ValueError, match=r"^the base model has width 128; this export's rules are relative to base "
                                         r"width 64"):
        exp.parametrize(UserLM(WIDTH), base_model=UserLM(DELTA))


@pytest.mark.parametrize("name,suggested", [("gdn-mup-codconv", "gdn-mup-codeconv"), ("GDN-MUP", "gdn-mup"),
                                            ("nope", None)])
def test_an_unknown_name_gets_the_closest_names_in_one_short_line(name: str, suggested: str | None) -> None:
    """The registry outgrew a message that lists every name; the line names the closest ones instead."""
    with pytest.raises(ValueError) as error:
        parametrizations.get(name)
    message = str(error.value)
    assert "\n" not in message and len(message) < 300 and f"unknown parametrization {name!r}" in message
    assert ("did you mean" in message) == (suggested is not None)
    if suggested:
        assert message.split("did you mean ")[1].split(" or ")[0].rstrip("?") == suggested
