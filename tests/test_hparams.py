"""Transfer more than the LR: the base model's other hyperparameters as grid axes of a sweep spec, applied to the
trial's model, recorded, told apart by the report and carried into the export (parametrizations/hparams.py)."""
from pathlib import Path

import pytest
import torch

from deltamup.cli import main
from deltamup.models import ModelConfig
from deltamup.parametrizations import BaseHparams, build_model, load_export
from deltamup.reports.analysis import analyze
from deltamup.reports.tuned import export_from_sweep
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.trial import train_and_evaluate, trial_config, trial_record

RAW = {"name": "hp", "model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "widths": [32, 64],
       "lrs": [3e-3, 1e-2, 3e-2], "parametrizations": ["gdn-mup"], "steps": 6, "batch_size": 4, "seq_len": 32,
       "log_every": 3, "eval": {"batches": 2}, "resources": {"cpu": 1, "gpu": 0}}


def test_hparams_axes_multiply_the_grid_and_keep_the_old_ids():
    plain = specs.parse(RAW)
    assert plain.grid()[0].key == "gdn-mup.adamw.w32.lr0.003.s0" and "hparams" not in plain.to_dict()
    spec = specs.parse({**RAW, "hparams": {"init_mult": [1, 2], "output_mult": [0.5, 4]}})
    keys = [p.key for p in spec.grid()]
    assert len(keys) == len(set(keys)) == 2 * 3 * 4
    assert "gdn-mup.adamw.w32.lr0.003.s0.output_mult4.init_mult2" in keys  # hparams in HPARAMS order
    assert spec.grid()[-1].label == "gdn-mup[output_mult=4,init_mult=2]"
    assert specs.parse(spec.to_dict()).grid() == spec.grid()  # the spec as run reads back to the same trials
    decay = specs.parse({**RAW, "hparams": {"weight_decay": [0, 0.1]}})
    assert sorted(decay.train_config(p).weight_decay for p in decay.grid()) == [0.0] * 6 + [0.1] * 6


@pytest.mark.parametrize("change,problem", [
    ({"hparams": {"readout_mult": [1]}}, "hparams.readout_mult': unknown hyperparameter"),
    ({"hparams": {"output_mult": [0]}}, "hparams.output_mult[0]': output_mult must be a positive number"),
    ({"hparams": {"output_mult": [1, 1]}}, "needs distinct values"),
    ({"hparams": {"weight_decay": [-1]}}, "must not be negative"),
    ({"hparams": {"weight_decay": [0.1]}, "weight_decay": 0.1}, "given both"),
    ({"hparams": {"init_mult": [2]}, "search": "optuna"}, "refine and Optuna tune the learning rate only"),
])
def test_bad_hparams_are_one_clear_error(change, problem):
    with pytest.raises(specs.SpecError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        specs.parse({**RAW, **change})


def test_hparams_reach_the_model_through_the_table():
    config = ModelConfig(kind="gdn", depth=1, heads=2, base_width=32, width=128)  # m = 4
    base, tuned = (build_model(config, "gdn-mup", seed=0, hparams=h)
                   for h in (BaseHparams(), BaseHparams(output_mult=3.0, embed_mult=2.0, init_mult=0.5)))
    assert base.multipliers.logits == pytest.approx(0.25) and tuned.multipliers.logits == pytest.approx(0.75)
    assert tuned.multipliers.embedding == 2.0 and tuned.multipliers.readout == base.multipliers.readout
    for name in ("embedding", "blocks.0.mlp.up.weight"):
        a, b = (dict(m.named_parameters())[name].std().item() for m in (base, tuned))
        assert b == pytest.approx(a / 2, rel=0.05), name


def run_without_ray(spec: specs.SweepSpec, out: Path) -> None:
    """Every grid trial through the trial's own functions (config, training, record, curve) into the store."""
    out.mkdir()
    store.write_spec(out, spec.to_dict())
    for point in spec.grid():
        cfg = trial_config(spec, point, out, run=1)
        outcome = train_and_evaluate(cfg, torch.device("cpu"), lambda *_, **__: None, None)
        store.write_trial(out, *trial_record(cfg, outcome, {"device": "cpu", "threads": 1, "gpu_ids": [],
                                                            "node_id": "test", "started_at": 0.0,
                                                            "finished_at": 1.0}))


def test_a_grid_over_one_hparam_trains_distinct_trials_and_exports_the_best(tmp_path):
    spec = specs.parse({**RAW, "widths": [32], "lrs": [3e-3, 1e-2], "hparams": {"output_mult": [0.25, 4]}})
    out = tmp_path / "sweep"
    run_without_ray(spec, out)
    records = {r["trial_id"]: r for r in store.read_records(out)}
    assert set(records) == {p.key for p in spec.grid()}
    low, high = (records[f"gdn-mup.adamw.w32.lr0.01.s0.output_mult{v}"] for v in ("0.25", "4"))
    assert (low["hparams"], high["hparams"]) == ("output_mult=0.25", "output_mult=4")
    assert low["val_loss"] != high["val_loss"]  # same LR, seed and data: only the multiplier differs
    analysis = analyze(out)
    assert set(analysis.optima["parametrization"]) == {"gdn-mup[output_mult=0.25]", "gdn-mup[output_mult=4]"}
    assert analysis.missing.is_empty() and (analysis.curves["n_seeds"] == 1).all()  # variants never mix
    at_base = analysis.optima.filter(analysis.optima["width"] == 32).sort("best_loss_grid")
    winner = at_base["parametrization"][0]
    exp = export_from_sweep(analysis, "gdn-mup", "adamw", width=128, allow_bound=True, allow_unverified=True)
    mult = float(winner.split("=")[1].rstrip("]"))
    assert exp.parametrization == "gdn-mup" and exp.hparams == {"output_mult": mult}
    assert exp.provenance["variant"] == winner
    assert exp.multipliers["logits"] == pytest.approx(mult / 4) and exp.tuned_multipliers["logits"] == mult
    other = next(p for p in at_base["parametrization"] if p != winner)
    chosen = export_from_sweep(analysis, other, "adamw", width=128, allow_bound=True, allow_unverified=True)
    assert chosen.hparams == {"output_mult": float(other.split("=")[1].rstrip("]"))}
    path = tmp_path / "export.yaml"  # the same through the CLI, naming the variant
    assert main(["export", str(out), "-p", other, "--optimizer", "adamw", "--width", "128", "--out", str(path),
                 "--allow-bound", "--allow-unverified"]) == 0
    assert load_export(path).hparams == chosen.hparams
