"""The coordinate check on models deltamup did not build: fla's GatedDeltaNet (through `--model-factory` and the
fla role map) measures what the check on deltamup's own model measures, and a user's factory runs from the CLI."""
from __future__ import annotations

import functools

import polars as pl
import pytest
import torch

from deltamup.cli import main
from deltamup.models import ModelConfig
from deltamup.parametrizations import FLA, build_model
from deltamup.scaling import coord_check

fla_models = pytest.importorskip("fla.models", reason="flash-linear-attention 0.6 is not installed",
                                 exc_type=ModuleNotFoundError)  # an fla that fails to import fails the tests
from test_export_fla import deltamup_name  # noqa: E402

WIDTHS, BASE = (128, 256, 512), 256
CONFIG = ModelConfig(kind="gdn", depth=2, heads=6, base_width=BASE)
SMALL = dict(steps=2, batch_size=2, seq_len=32, device="cpu")


def fla_gdn(width: int, optimizer: str) -> torch.nn.Module:
    """fla's GatedDeltaNet with deltamup's head layout, holding the weights deltamup's model draws at this width
    (seed 0), so the two checks start from the same point and differ only in how they measure and train."""
    config = CONFIG.with_width(width)
    model = fla_models.GatedDeltaNetForCausalLM(fla_models.GatedDeltaNetConfig(
        hidden_size=width, num_hidden_layers=config.depth, num_heads=config.heads, head_dim=config.head_k_dim,
        expand_v=2, intermediate_size=config.mlp_hidden, vocab_size=config.vocab_size, norm_eps=config.norm_eps,
        tie_word_embeddings=True, use_cache=False, fuse_norm=False, fuse_swiglu=False, fuse_cross_entropy=False,
        fuse_linear_cross_entropy=False))
    ours = dict(build_model(config, "gdn-mup", optimizer, seed=0).named_parameters())
    model.load_state_dict({n: ours[deltamup_name(n)].detach() for n, _ in model.named_parameters()}, strict=False)
    return model


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_fla_model_gets_the_verdicts_of_ours(optimizer: str) -> None:
    ours = coord_check.fit_slopes(coord_check.run(coord_check.CoordCheck(
        CONFIG, "gdn-mup", optimizer, WIDTHS, **SMALL)), "gdn-mup", optimizer, "gdn")
    check = coord_check.CoordCheck(None, "gdn-mup", optimizer, WIDTHS, model_factory=functools.partial(
        fla_gdn, optimizer=optimizer), base_width=BASE, roles=FLA, kind="gdn", init=False, **SMALL)
    theirs = coord_check.fit_slopes(coord_check.run(check), "gdn-mup", optimizer, check.model_kind)
    judged = theirs.filter(pl.col("ok").is_not_null())
    assert {"embed", "logits", "block0.alpha_pre", "block1.beta_pre", "block0.readout", "block1.mixer_out",
            "block0.mlp_out", "update.hidden", "update.gate_matrix", "update.embedding"} <= set(judged["probe"])
    both = ours.join(theirs, on=["probe", "step"], suffix="_fla")
    assert len(both) == len(theirs)  # every probe fla's check has, ours has too (fla cannot tap q, k, v, state)
    assert (both["verdict"].fill_null("-") == both["verdict_fla"].fill_null("-")).all(), both.filter(
        pl.col("verdict") != pl.col("verdict_fla"))
    assert (both["slope"] - both["slope_fla"]).abs().max() < 0.02  # fp32 rounding, amplified by Adam


def test_fla_model_from_its_own_init_gets_the_tables_init(monkeypatch) -> None:
    """init=True (the default): the factory's weights are re-drawn per the table, as for ours, the short convs
    included (the table's width-independent U(±K^-½), where fla's own init draws N(0, 0.02²))."""
    check = coord_check.CoordCheck(None, "gdn-mup", "adamw", (128, 256), model_factory=functools.partial(
        fla_gdn, optimizer="adamw"), base_width=BASE, roles=FLA, kind="gdn", **SMALL)
    model = coord_check.prepare(check)[256].model
    attn = model.model.layers[0].attn
    assert attn.q_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert attn.v_conv1d.weight.abs().max().item() <= 0.5 and attn.v_conv1d.weight.std().item() == pytest.approx(
        0.5 / 3 ** 0.5, rel=0.1)


def test_cli_model_factory_writes_a_named_run(tmp_path, capsys) -> None:
    out = tmp_path / "cc"
    argv = ["coord-check", "--model-factory", "user_model:make_model", "--base-width", "32", "--widths", "32,64",
            "--steps", "1", "--batch-size", "2", "--seq-len", "16", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "predicted slopes within their bands" in printed
    slopes = pl.read_csv(out / "slopes.csv")
    assert {"embed", "logits", "block0.readout", "block1.mixer_out", "block0.w_alpha",
            "update.gate_scalar"} <= set(slopes["probe"])
    assert (out / "coords.png").stat().st_size > 10_000
    assert "user_model:make_model · gdn-mup · adamw · widths 32–64" in (out / "check.json").read_text()


@pytest.mark.parametrize("argv,message", [
    (["--model-factory", "user_model:make_model", "--widths", "32,66"],
     "model factory user_model:make_model at width 66: ValueError: width 66 is not divisible by the 4 heads"),
    (["--model-factory", "nowhere_module:make"], "--model-factory 'nowhere_module:make': cannot import nowhere_module"),
    (["--model-factory", "user_model"], "expected MODULE:NAME"),
    (["--model-factory", "user_model:nothing"], "user_model has no nothing"),
    (["--model-factory", "user_model:make_model", "--roles", "nope"], "unknown role map 'nope'"),
    (["--roles", "fla"], "--roles goes with --model-factory"),
    (["--model-factory", "user_model:make_model_with_a_temperature", "--widths", "32,64"],
     "cannot classify 1 parameter (* = grows with width): temperature [1]: a fixed-size vector outside a norm"),
])
def test_bad_factory_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message) -> None:
    code = main(["coord-check", "--base-width", "32", "--steps", "1", "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "o" / "coords.parquet").exists()

