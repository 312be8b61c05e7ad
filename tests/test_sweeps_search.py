"""Horizons, refinement, Optuna (warm start, intermediate values, pruning) and tracking, on conftest's real Ray
cluster (two nodes of one CPU). Tiny models: width 16–32, depth 1, seq 32, at most 30 steps."""
from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from tensorboardX.proto import event_pb2

from deltamup.cli import main
from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.parametrizations.hparams import parse_label
from deltamup.reports.analysis import analyze
from deltamup.reports.tuned import export_from_sweep
from deltamup.scaling.data import get_task
from deltamup.scaling.train import TrainConfig, train
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.refine import refine_points
from deltamup.sweeps.runner import prepare_dir, run_sweep
from deltamup.sweeps.search import StudySearcher, storage_url, study_name
from deltamup.sweeps.tracking import tensorboard_dir

SMALL = {"model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 16}, "widths": [16, 32],
         "lrs": [4e-3, 1.6e-2], "parametrizations": ["gdn-mup"], "steps": 12, "batch_size": 4, "seq_len": 32,
         "log_every": 3, "eval": {"batches": 2}, "resources": {"cpu": 1, "gpu": 0}, "failure": {"retries": 0}}


def write_spec(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "small", **SMALL, **changes}))
    return path


def tensorboard_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} from the TFRecord event files in `folder` (length, crc, Event proto, crc)."""
    scalars: dict[str, dict[int, float]] = {}
    for path in folder.glob("events.out.tfevents.*"):
        data, i = path.read_bytes(), 0
        while i < len(data):
            (size,) = struct.unpack("<Q", data[i:i + 8])
            event = event_pb2.Event.FromString(data[i + 12:i + 12 + size])
            i += 12 + size + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars


def test_evaluating_at_horizons_leaves_training_unchanged():
    """on_eval runs after exactly the given steps with the losses synced up to there, the loop goes on in train
    mode after an evaluation in eval mode, and the losses are those of a run without evaluations."""
    task = get_task("sample")
    val = task.val_batches(4, 32, 2, seed=0)

    def run(eval_steps):
        model = build_model(ModelConfig(kind="gdn", width=16, depth=1, heads=2, base_width=16), "gdn-mup", "adamw",
                            seed=0)
        seen = []

        def on_eval(step, result):
            model.eval()
            with torch.no_grad():
                model(val[0][0])
            seen.append((step, result.steps, len(result.losses)))

        result = train(model, "gdn-mup", TrainConfig(lr=1e-2, steps=10, log_every=4), task.train_batches(4, 32, 0),
                       eval_steps=eval_steps, on_eval=on_eval)
        assert model.training
        return result, seen

    plain, _ = run(())
    evaluated, seen = run({3, 5, 10})
    assert seen == [(3, 3, 3), (5, 5, 5), (10, 10, 10)]
    assert [loss for _, loss, _ in evaluated.losses] == [loss for _, loss, _ in plain.losses]
    assert evaluated.eval_seconds > 0


def test_refine_points_are_the_neighbours_of_each_widths_optimum_with_more_seeds():
    spec = specs.parse({**SMALL, "lrs": [1e-3, 2e-3, 4e-3, 8e-3], "seeds": [0, 1], "search": "refine",
                        "refine": {"factor": 2 ** 0.5, "points": 2, "seeds": [0, 1, 2]}})
    loss = {16: {1e-3: 5.0, 2e-3: 4.0, 4e-3: 4.5, 8e-3: 6.0}, 32: {1e-3: 5.0, 2e-3: 4.6, 4e-3: 4.4, 8e-3: 9.0}}
    records = [{"trial_id": p.key, "phase": "grid", "parametrization": p.parametrization, "optimizer": p.optimizer,
                "width": p.width, "lr": p.lr, "seed": p.seed, "status": "ok",
                "val_loss": loss[p.width][p.lr] + 0.01 * p.seed} for p in spec.grid()]
    points = refine_points(spec, records)
    r2 = 2 ** 0.5
    for width, centre in ((16, 2e-3), (32, 4e-3)):
        lrs = sorted({p.lr for p in points if p.width == width})
        expected = [centre / 2, centre / r2, centre, centre * r2, centre * 2]
        assert lrs == pytest.approx(expected, rel=1e-5)
        assert centre / 2 in lrs and centre * 2 in lrs  # ×2 away: exactly the grid's own LRs
        for lr in lrs:  # the grid ran seeds 0 and 1 at its LRs: only seed 2 is new there
            seeds = sorted(p.seed for p in points if p.width == width and p.lr == lr)
            assert seeds == ([2] if lr in spec.lrs else [0, 1, 2])
    # a group with an unfinished grid trial gets no refinement yet
    assert {p.width for p in refine_points(spec, records[1:])} == {32}


def test_killed_refine_resumes_without_rerunning_finished_trials(cluster, kill_driver, tmp_path):
    """A driver running `search: refine` is killed during the refinement; the resume runs exactly the refine trials
    without a row. The refine LRs are the ×√2 neighbours of each width's grid optimum, with the extra seed; every
    trial recorded its horizons and wrote them, with its training curve, to TensorBoard."""
    spec_path = write_spec(tmp_path, steps=16, log_every=4, search="refine",
                           refine={"factor": 2 ** 0.5, "points": 1, "seeds": [0, 1]})
    spec = specs.load(spec_path)
    out = tmp_path / "sweep"

    def refined() -> list[Path]:
        return sorted(store.results_dir(out).glob("refine.*.json"))

    kill_driver(spec_path, out, until=lambda: len(refined()) >= 2)
    before = {p.name: p.read_bytes() for p in store.results_dir(out).glob("*.json")}
    n_refined = sum(name.startswith("refine.") for name in before)
    assert 2 <= n_refined < 10, "the driver was killed during the refinement"
    line = run_sweep(spec, out, resume=True, progress_every=60)
    assert line["launched"] == 10 - n_refined
    after = {p.name: p.read_bytes() for p in store.results_dir(out).glob("*.json")}
    assert {name: after[name] for name in before} == before  # finished rows untouched
    records = store.read_records(out)
    assert {r["status"] for r in records} == {"ok"} and len(records) == 4 + 10
    for width in spec.widths:
        grid = {r["lr"]: r["val_loss"] for r in records if r["phase"] == "grid" and r["width"] == width}
        centre = min(grid, key=grid.get)
        refine = [r for r in records if r["phase"] == "refine" and r["width"] == width]
        assert all(r["trial_id"].startswith("refine.gdn-mup.adamw.") for r in refine)  # never a grid id
        expected = {(float(f"{centre * f:.6g}"), s) for f in (2 ** -0.5, 1, 2 ** 0.5) for s in (0, 1)} - {(centre, 0)}
        assert {(r["lr"], r["seed"]) for r in refine} == expected
    steps = spec.eval.horizon_steps(spec.steps)
    assert steps == {"val_loss_h25": 4, "val_loss_h50": 8, "val_loss_h100": 16}
    row = next(r for r in records if r["phase"] == "grid")
    assert row["val_loss"] == row["val_loss_h100"] and row["val_loss_h25"] > row["val_loss_h50"] > row["val_loss"]
    scalars = tensorboard_scalars(tensorboard_dir(out, row["trial_id"]))
    assert sorted(scalars["train/loss"]) == sorted(scalars["train/lr"]) == list(range(1, 17))
    assert sorted(scalars["train/grad_norm"]) == list(range(1, 17))
    assert scalars["val/loss"] == pytest.approx({step: row[column] for column, step in steps.items()})


def test_optuna_samples_within_its_octaves_of_each_groups_best_grid_lr(tmp_path):
    """Without Ray: the searcher's suggestions for each (parametrization, optimizer, width) lie within ± `octaves` of
    that group's centre and spread over it, and stop when the budget is spent."""
    spec = specs.parse({"name": "small", **SMALL, "search": "optuna",
                        "optuna": {"trials": 12, "octaves": 1.0, "sampler": "random"}})
    centres = {("gdn-mup", "adamw", 16): 4e-3, ("gdn-mup", "adamw", 32): 1e-3}
    searcher = StudySearcher(spec, tmp_path, run=1, centres=centres)
    suggested = [searcher.suggest(f"t{i}")["trial"]["point"] for i in range(24)]
    assert searcher.suggest("t24") == StudySearcher.FINISHED
    for width, centre in ((16, 4e-3), (32, 1e-3)):
        lrs = [p["lr"] for p in suggested if p["width"] == width]
        assert len(lrs) == 12 and all(centre / 2 * 0.999 <= lr <= centre * 2 * 1.001 for lr in lrs)
        assert max(lrs) / min(lrs) > 2  # they spread over the range, not one point


def test_optuna_samples_the_base_hparams_with_the_lr_and_warm_starts_at_their_defaults(tmp_path):
    """Without Ray: optuna.hparams are sampled log-uniform in their ranges jointly with the LR, each suggestion's
    point (and trial id) carries them, and the grid trials enter the study at the defaults (output_mult 1, the spec's
    weight decay)."""
    spec = specs.parse({"name": "small", **SMALL, "weight_decay": 0.1, "search": "optuna", "optuna": {
        "trials": 8, "sampler": "random", "hparams": {"output_mult": [0.25, 4.0], "weight_decay": [0.01, 1.0]}}})
    group = ("gdn-mup", "adamw", 16)
    grid = {"trial_id": "gdn-mup.adamw.w16.lr0.004.s0", "phase": "grid", "parametrization": "gdn-mup",
            "optimizer": "adamw", "width": 16, "lr": 4e-3, "seed": 0, "status": "ok", "val_loss": 3.0}
    searcher = StudySearcher(spec, tmp_path, run=1, centres={group: 4e-3})
    searcher._warm_start(searcher.studies[group], [grid])
    (warm,) = searcher.studies[group].get_trials()
    assert warm.params == {"lr": 4e-3, "output_mult": 1.0, "weight_decay": 0.1} and warm.value == 3.0
    points = [searcher.suggest(f"t{i}")["trial"]["point"] for i in range(8)]
    outs, decays = [p["hparams"]["output_mult"] for p in points], [p["hparams"]["weight_decay"] for p in points]
    assert all(0.25 <= v <= 4.0 for v in outs) and all(0.01 <= v <= 1.0 for v in decays)
    assert max(outs) / min(outs) > 2 and max(decays) / min(decays) > 2  # spread over the ranges
    ids = [searcher.pending[f"t{i}"][2]["trial_id"] for i in range(8)]
    assert len(set(ids)) == 8 and all("output_mult" in i and "weight_decay" in i for i in ids)


def test_an_optuna_sweep_over_hparams_trains_them_and_reports_its_search(cluster, tmp_path):
    """The grid at the defaults, then Optuna trials that each train their sampled output_mult; the report's LR
    curves hold the grid's LRs only and its search table the group's best trial."""
    spec = specs.load(write_spec(tmp_path, widths=[16], lrs=[4e-3, 1.6e-2], search="optuna", optuna={
        "trials": 2, "startup_trials": 1, "pruner": "none", "hparams": {"output_mult": [0.5, 2.0]}}))
    out = tmp_path / "sweep"
    assert run_sweep(spec, out, progress_every=60)["launched"] == 2 + 2
    searched = [r for r in store.read_records(out) if r["phase"] == "optuna"]
    assert len(searched) == 2 and all(r["status"] == "ok" for r in searched)
    assert all(0.5 <= parse_label(r["hparams"])["output_mult"] <= 2.0 for r in searched)
    assert len({r["val_loss"] for r in searched}) == 2
    report = analyze(out)
    assert sorted(report.curves["lr"].to_list()) == [4e-3, 1.6e-2]
    (row,) = report.search.iter_rows(named=True)
    every = store.read_records(out)
    assert row["searched"] == 2 and row["best_val_loss"] == min(r["val_loss"] for r in every)
    assert row["grid_best_val_loss"] == min(r["val_loss"] for r in every if r["phase"] == "grid")
    export = export_from_sweep(report, "gdn-mup", "adamw", 32, allow_bound=True, allow_unverified=True,
                               from_search=True)  # the search's best (LR, hparams), carried to width 32
    assert export.lr == pytest.approx(row["best_lr"]) and export.hparams == parse_label(row["best_hparams"])
    assert export.provenance["search_best_trial"] == row["best_trial"] and export.tuned_width == 16


def test_optuna_warm_starts_from_the_grid_reports_horizons_and_prunes_a_hopeless_trial(cluster, tmp_path):
    """The grid's trials enter each study as completed trials with their horizon losses; the Optuna trials report
    theirs; an LR 800× below the optimum (enqueued, as a user can) is pruned at the first horizon, recorded as
    "pruned" (not an error, never rerun), and the study in DIR/optuna.db holds every trial with its state; a resume
    with a larger budget continues that study."""
    spec_path = write_spec(tmp_path, widths=[16], lrs=[1e-3, 4e-3, 1.6e-2])
    out = tmp_path / "sweep"
    run_sweep(specs.load(spec_path), out, progress_every=60)
    group = ("gdn-mup", "adamw", 16)
    optuna.create_study(study_name=study_name(group), storage=storage_url(out), direction="minimize",
                        load_if_exists=True).enqueue_trial({"lr": 2e-5})
    optuna_spec = {"trials": 3, "octaves": 10.0, "startup_trials": 1, "pruner": "median", "pruner_startup_trials": 2}
    spec = specs.load(write_spec(tmp_path, widths=[16], lrs=[1e-3, 4e-3, 1.6e-2], search="optuna",
                                 optuna=optuna_spec))
    assert run_sweep(spec, out, resume=True, progress_every=60)["launched"] == 3
    study = optuna.load_study(study_name=study_name(group), storage=f"sqlite:///{out / 'optuna.db'}")
    records = {r["trial_id"]: r for r in store.read_records(out)}
    assert spec.eval.horizon_steps(spec.steps) == {"val_loss_h25": 3, "val_loss_h50": 6, "val_loss_h100": 12}
    warm = [t for t in study.trials if t.user_attrs["phase"] == "grid"]
    assert len(warm) == 3 and all(t.state == optuna.trial.TrialState.COMPLETE for t in warm)
    for t in warm:
        row = records[t.user_attrs["trial_id"]]
        assert t.params["lr"] == row["lr"] and t.value == row["val_loss"]
        assert t.intermediate_values == {3: row["val_loss_h25"], 6: row["val_loss_h50"]}
    tuned = [t for t in study.trials if t.user_attrs["phase"] == "optuna"]
    assert len(tuned) == 3 and all(t.intermediate_values for t in tuned)
    (hopeless,) = [t for t in tuned if t.params["lr"] == 2e-5]
    assert hopeless.state == optuna.trial.TrialState.PRUNED and list(hopeless.intermediate_values) == [3]
    row = records[hopeless.user_attrs["trial_id"]]
    assert row["status"] == "pruned" and row["error"] is None and row["pruned_step"] == 3
    assert row["val_loss_h25"] == hopeless.intermediate_values[3] > max(r["val_loss_h25"] for r in records.values()
                                                                       if r["phase"] == "grid")
    assert row["trial_id"] in store.finished_ids(out)
    best = min(warm, key=lambda t: t.value).params["lr"]
    for t in tuned:
        assert t.user_attrs["trial_id"].startswith("optuna.")  # never a grid id
        assert best * 2 ** -10 * 0.999 <= t.params["lr"] <= best * 2 ** 10 * 1.001  # within ± `octaves` of the best
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert records[t.user_attrs["trial_id"]]["val_loss"] == t.value
    # the budget counts pruned trials: a resume launches nothing; a larger budget adds only the missing trials to
    # the same persistent study
    assert run_sweep(spec, out, resume=True, progress_every=60)["launched"] == 0
    spec = specs.load(write_spec(tmp_path, widths=[16], lrs=[1e-3, 4e-3, 1.6e-2], search="optuna",
                                 optuna={**optuna_spec, "trials": 4}))
    assert run_sweep(spec, out, resume=True, progress_every=60)["launched"] == 1
    (summary,) = optuna.get_all_study_summaries(storage_url(out))
    assert summary.n_trials == 3 + 4  # the grid trials it was warm-started with, then its own


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow is not installed")
def test_mlflow_gets_one_run_per_trial_with_its_curves(cluster, tmp_path):
    from mlflow.tracking import MlflowClient

    spec = specs.load(write_spec(tmp_path, widths=[16], lrs=[4e-3], steps=6, tracking={"mlflow": {}}))
    out = tmp_path / "sweep"
    run_sweep(spec, out, progress_every=60)
    (row,) = store.read_records(out)
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("small").experiment_id])
    assert run.info.run_name == row["trial_id"] and run.info.status == "FINISHED"
    assert float(run.data.params["lr"]) == 4e-3 and run.data.metrics["val_loss"] == pytest.approx(row["val_loss"])
    assert [m.step for m in client.get_metric_history(run.info.run_id, "train_loss")] == list(range(1, 7))
    assert {m.step for m in client.get_metric_history(run.info.run_id, "val_loss")} >= {2, 3, 6}


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
def test_a_tracker_whose_package_is_missing_fails_before_ray_starts(tmp_path, capsys, tracker):
    if importlib.util.find_spec(tracker) is not None:
        pytest.skip(f"{tracker} is installed here")
    settings = {"project": "p"} if tracker == "wandb" else {}
    out = tmp_path / "out"
    assert main(["sweep", str(write_spec(tmp_path, tracking={tracker: settings})), "--out", str(out)]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err == (f"deltamup sweep: error: spec field 'tracking.{tracker}': needs the {tracker} package, which is "
                   f"not installed: pip install {tracker}, or remove the key")
    assert not out.exists()


def test_the_new_keys_parse_round_trip_and_override(tmp_path):
    path = write_spec(tmp_path, search="refine", eval={"batches": 2, "horizons": [0.1, 0.5, 1.0]},
                      refine={"factor": 1.414, "points": 2, "seeds": [0, 1, 2]},
                      optuna={"trials": 10, "startup_trials": 5, "pruner": "none"},
                      tracking={"wandb": {"project": "p", "mode": "offline"}})
    raw = yaml.safe_load(path.read_text())
    for override in ("refine.seeds=[3, 4]", "eval.horizons=[0.2, 1.0]"):
        specs.apply_override(raw, override)
    spec = specs.parse(raw, open_task=False)  # reading a spec as run needs no wandb (running it does)
    assert spec.refine == specs.RefineSpec(factor=1.414, points=2, seeds=(3, 4))
    assert spec.eval.horizon_steps(spec.steps) == {"val_loss_h20": 2, "val_loss_h100": 12}
    assert specs.parse(spec.to_dict(), open_task=False) == spec


def test_a_grid_sweep_can_be_resumed_as_a_refinement_but_not_with_other_horizons(tmp_path):
    grid = specs.parse(SMALL)
    prepare_dir(grid, tmp_path, resume=False)
    refine = specs.parse({**SMALL, "search": "refine", "refine": {"seeds": [0, 1, 2, 3]}})
    prepare_dir(refine, tmp_path, resume=True)  # `deltamup sweep DIR --resume --set search=refine`
    assert specs.load(tmp_path / "spec.yaml").refine.seeds == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="spec field 'eval' differs"):
        prepare_dir(specs.parse({**SMALL, "eval": {"batches": 2, "horizons": [0.5, 1.0]}}), tmp_path, resume=True)
