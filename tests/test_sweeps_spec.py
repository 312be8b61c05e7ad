"""Sweep specs, the sweep directory's resume checks and GPU packing: no Ray needed."""
from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deltamup.cli import main
from deltamup.models import ModelConfig
from deltamup.sweeps import packing, store
from deltamup.sweeps import spec as specs
from deltamup.sweeps.runner import prepare_dir, run_sweep, widths_to_run
from deltamup.sweeps.trial import base_record, trial_config

ROOT = Path(__file__).resolve().parents[1]
VALID = {"model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "widths": [32, 64],
         "lrs": [1e-3, 1e-2], "steps": 4}


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("change, field", [
    ({"widthz": [32]}, "'widthz'"),
    ({"steps": "ten"}, "'steps'"),
    ({"widths": []}, "'widths'"),
    ({"widths": [32, "x"]}, "'widths[1]'"),
    ({"lrs": [1e-3, -0.1]}, "'lrs[1]'"),
    ({"lrs": {"log_range": [1e-2, 1e-3], "num": 3}}, "'lrs.log_range'"),
    ({"parametrizations": ["xp"]}, "'parametrizations[0]'"),
    ({"optimizers": ["lion"]}, "'optimizers[0]'"),
    ({"model": {"kind": "mamba"}}, "'model'"),
    ({"model": {"kind": "gdn", "layers": 2}}, "'model.layers'"),
    ({"model": {"kind": "gdn", "depth": 1.5}}, "'model.depth'"),
    ({"widths": [8], "model": {"kind": "gdn", "heads": 6, "base_width": 8}}, "'model'"),
    ({"task": "nope"}, "'task'"),
    ({"eval": {"batchez": 2}}, "'eval.batchez'"),
    ({"resources": {"gpu": "lots"}}, "'resources.gpu'"),
    ({"resources": {"gpu": 2}}, "'resources.gpu'"),
    ({"resources": {"gpu": {"²": 0.5}}}, "'resources.gpu.²'"),  # a digit that is not a width (found by hypothesis)
    ({"resources": {"workers_per_trial": 3}}, "'resources.workers_per_trial'"),  # batch 8 has no 3 equal shards
    ({"resources": {"workers_per_trial": {48: 2}}}, "'resources.workers_per_trial.48'"),
    ({"resources": {"workers_per_trial": {64: 2}, "gpu": 0.5}}, "'resources.gpu'"),  # a worker is a whole GPU
    ({"failure": {"retries": -1}}, "'failure.retries'"),
    ({"search": "bayes"}, "'search'"),
    ({"schedule": "linear"}, "'schedule'"),
    ({"compile": "fast"}, "'compile'"),
    ({"compile": 1}, "'compile'"),
    ({"eval": {"horizons": [0.5, 0.25, 1.0]}}, "'eval.horizons'"),
    ({"eval": {"horizons": [0.25, 0.5]}}, "'eval.horizons'"),
    ({"eval": {"horizons": [0.125, 1.0]}}, "'eval.horizons[0]'"),
    ({"eval": {"horizons": [0, 1.0]}}, "'eval.horizons[0]'"),
    ({"refine": {"factor": 3}}, "'refine.factor'"),
    ({"refine": {"points": 0}}, "'refine.points'"),
    ({"refine": {"seeds": []}}, "'refine.seeds'"),
    ({"refine": {"step": 2}}, "'refine.step'"),
    ({"optuna": {"trials": 4, "startup_trials": 4}}, "'optuna.startup_trials'"),
    ({"optuna": {"pruner": "hyperband"}}, "'optuna.pruner'"),
    ({"optuna": {"pruner_warmup_steps": -1}}, "'optuna.pruner_warmup_steps'"),
    ({"tracking": {"mlflow": {"uri": "x"}}}, "'tracking.mlflow.uri'"),
    ({"tracking": {"wandb": {"entity": "me"}}}, "'tracking.wandb.project'"),
    ({"tracking": {"tensorboard": {}}}, "'tracking.tensorboard'"),
    ({"warmup_steps": 4}, "'warmup_steps'"),
    ({"only": {"widths": [32]}}, "'only'"),
    ({"only": [{"depth": [2]}]}, "'only[0].depth'"),
    ({"only": [{"widths": [32]}, {"widths": [48]}]}, "'only[1].widths'"),  # not one of the spec's widths
    ({"only": [{"lrs": [2e-3]}]}, "'only[0].lrs'"),
    ({"only": [{"seeds": []}]}, "'only[0].seeds'"),
    ({"only": [{"widths": [32]}], "search": "optuna"}, "'only'"),
    ({"only": [{"output_mult": [2]}]}, "'only[0].output_mult'"),  # the spec has no output_mult axis
    ({"hparams": {"output_mult": [1, 2]}, "only": [{"output_mult": [4]}]}, "'only[0].output_mult'"),
    ({"search": "optuna", "optuna": {"hparams": {"temperature": [1, 2]}}}, "'optuna.hparams.temperature'"),
    ({"search": "optuna", "optuna": {"hparams": {"output_mult": [2, 1]}}}, "'optuna.hparams.output_mult'"),
    ({"optuna": {"hparams": {"output_mult": [1, 2]}}}, "'optuna.hparams'"),  # needs search: optuna
])
def test_malformed_spec_fails_with_one_line_naming_the_field(tmp_path, capsys, change, field):
    out = tmp_path / "out"
    assert main(["sweep", str(write(tmp_path, {**VALID, **change})), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("deltamup sweep: error: spec field ") and field in err[0]
    assert not out.exists()  # nothing started


def test_bad_spec_exits_2_before_ray_starts(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "deltamup", "sweep", str(write(tmp_path, {**VALID, "lrs": [-1]})),
                          "--out", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip() == "deltamup sweep: error: spec field 'lrs[0]': must be positive, got -1.0"
    assert not (tmp_path / "out").exists()


def test_spec_parses_ranges_overrides_and_round_trips(tmp_path):
    spec = specs.load(write(tmp_path, {**VALID, "lrs": {"log_range": ["1e-3", 1.6e-2], "num": 5}}),
                      ["steps=7", "eval.batches=3", "parametrizations=[sp, gdn-mup]"])
    assert spec.lrs == (0.001, 0.002, 0.004, 0.008, 0.016)
    assert (spec.steps, spec.eval.batches, spec.name) == (7, 3, "spec")
    assert spec.model["vocab_size"] == 256  # the task's vocabulary
    assert len(spec.grid()) == 2 * 2 * 5 and len({p.key for p in spec.grid()}) == 20
    assert specs.parse(spec.to_dict()) == spec
    assert specs.parse({**VALID, "compile": "blocks"}).train_config(spec.grid()[0]).compile == "blocks"
    per_width = specs.parse({**VALID, "widths": [32, 64], "batch_size": 8, "resources": {
        "gpu": {32: 0.5, 64: 1}, "workers_per_trial": {64: 2}, "sharding": {64: "fsdp"}}})
    # the sweep directory's spec.yaml, read back on --resume: per-width keys stay widths
    assert specs.parse(yaml.safe_load(yaml.safe_dump(per_width.to_dict()))) == per_width
    with pytest.raises(ValueError, match="--set expects KEY=VALUE"):
        specs.load(write(tmp_path, VALID), ["steps"])


def test_only_cells_select_the_union_of_their_points_and_what_is_left_to_run(tmp_path):
    spec = specs.parse({**VALID, "seeds": [0, 1], "only": [
        {"widths": [32], "lrs": [1e-3]}, {"widths": [64], "seeds": [1]},
        {"widths": [32], "lrs": [1e-3], "seeds": [0]}]})
    points = [(p.width, p.lr, p.seed) for p in spec.grid()]
    assert points == [(32, 1e-3, 0), (32, 1e-3, 1), (64, 1e-3, 1), (64, 1e-2, 1)]  # the third cell adds nothing
    assert specs.parse(yaml.safe_load(yaml.safe_dump(spec.to_dict()))) == spec
    assert "only" not in specs.parse(VALID).to_dict()  # a spec without cells reads as before they existed
    out = tmp_path / "sweep"
    assert widths_to_run(spec, out) == [32, 64]  # no directory yet: all of them
    out.mkdir()
    prepare_dir(spec, out, resume=False)
    for point in spec.grid()[:2]:  # width 32 finished
        row = base_record(trial_config(spec, point, out, run=1)) | {"status": "ok", "val_loss": 1.0}
        assert store.write_trial(out, row, {c: [] for c in store.CURVE_COLUMNS})
    assert widths_to_run(spec, out) == [64]
    assert widths_to_run(dataclasses.replace(spec, only=spec.only[:1]), out) == []
    prepare_dir(specs.parse({**VALID, "only": [{"widths": [64]}]}), out, resume=True)  # cells may change on resume


def test_only_cells_narrow_hparams_axes_too():
    """A cell may name hparams axes: several variants, each at its own seeds or LRs, in one sweep (one driver run,
    their trials packed together) instead of one sweep a variant."""
    spec = specs.parse({**VALID, "widths": [32], "seeds": [1, 2], "hparams": {"output_mult": [1, 4],
                        "init_mult": [0.5, 1]}, "only": [{"output_mult": [4], "init_mult": [0.5], "lrs": [1e-3]},
                                                         {"output_mult": [1], "init_mult": [1], "seeds": [2]}]})
    points = [(p.lr, p.seed, dict(p.hparams)) for p in spec.grid()]
    assert points == [(1e-3, 1, {"output_mult": 4, "init_mult": 0.5}), (1e-3, 2, {"output_mult": 4, "init_mult": 0.5}),
                      (1e-3, 2, {"output_mult": 1, "init_mult": 1}), (1e-2, 2, {"output_mult": 1, "init_mult": 1})]
    assert specs.parse(yaml.safe_load(yaml.safe_dump(spec.to_dict()))) == spec


def test_sweep_dir_refuses_a_second_start_and_an_incomparable_resume(tmp_path):
    spec = specs.parse(VALID)
    prepare_dir(spec, tmp_path, resume=False)
    with pytest.raises(ValueError, match="already holds a sweep: pass --resume"):
        prepare_dir(spec, tmp_path, resume=False)
    with pytest.raises(ValueError, match="spec field 'steps' differs"):
        prepare_dir(specs.parse({**VALID, "steps": 5}), tmp_path, resume=True)
    wider = specs.parse({**VALID, "widths": [32, 64, 128], "lrs": [3e-3]})  # grid axes may change on resume
    prepare_dir(wider, tmp_path, resume=True)
    assert specs.load(tmp_path / "spec.yaml") == wider


def test_auto_gpu_packing_shares_a_gpu_between_small_widths_only():
    resources = specs.ResourceSpec()
    gpu = 141e9
    fractions = {w: packing.gpu_fraction(ModelConfig(kind="gdn", width=w, depth=8), "adamw", 32, 1024, resources,
                                         gpu) for w in (256, 512, 1024, 1536)}
    assert fractions[256] < fractions[512] < 1 and fractions[1024] == fractions[1536] == 1.0
    assert all(f == 2.0 ** round(math.log2(f)) for f in fractions.values())  # 1/2^k shares
    tiny = packing.gpu_fraction(ModelConfig(kind="gdn", width=64, depth=1), "adamw", 4, 64, resources, gpu)
    assert tiny == resources.min_gpu_fraction
    spec = specs.parse({**VALID, "resources": {"gpu": {32: 0.25, 64: 0.5}}})
    assert packing.trial_gpus(spec, 64, "adamw", cluster_gpus=1, gpu_memory_bytes=gpu) == 0.5
    assert packing.trial_gpus(specs.parse(VALID), 64, "adamw", cluster_gpus=0, gpu_memory_bytes=gpu) == 0.0


def test_a_compiled_bf16_trial_on_a_gpu_is_sized_by_what_such_trials_held():
    """Compiled bf16 trials on GPUs hold far less for autograd than the CPU-measured bytes (benchmarks/trial-memory.md):
    their estimate, and so their GPU share, is smaller; eager, fp32 and CPU trials keep the CPU's bytes."""
    assert packing.activation_bytes({"compile": True}, on_gpu=True) == packing.COMPILED_BF16_ACTIVATION_BYTES
    assert packing.activation_bytes({"compile": "blocks"}, on_gpu=True) == packing.COMPILED_BF16_ACTIVATION_BYTES
    for train, on_gpu in (({"compile": True}, False), ({}, True), ({"compile": True, "bf16": False}, True)):
        assert packing.activation_bytes(train, on_gpu) == packing.ACTIVATION_BYTES_PER_WIDTH
    data = {**VALID, "model": {"kind": "gdn", "depth": 8, "heads": 2, "base_width": 32}, "widths": [512],
            "batch_size": 16, "seq_len": 1024}
    compiled, eager = specs.parse({**data, "compile": True}), specs.parse(data)
    share = {name: packing.trial_gpus(spec, 512, "adamw", cluster_gpus=1, gpu_memory_bytes=80e9)
             for name, spec in (("compiled", compiled), ("eager", eager))}
    assert share["compiled"] < share["eager"] < 1


def test_a_compile_warm_up_step_asks_for_its_memory_not_a_whole_gpu():
    """Trials of a model over whole_gpu_params hold a GPU; their graph's one-step warm-up asks for what its memory
    estimate needs, so graphs of several such widths compile side by side. An explicit share is kept."""
    gpu = 141e9
    spec = specs.parse({**VALID, "resources": {"whole_gpu_params": 1e3}})
    trial = packing.trial_gpus(spec, 64, "adamw", cluster_gpus=1, gpu_memory_bytes=gpu)
    step = packing.warmup_gpus(spec, 64, "adamw", trial, gpu)
    assert trial == 1.0 and step == spec.resources.min_gpu_fraction  # a tiny model: the smallest share
    assert packing.warmup_gpus(spec, 64, "adamw", 0.0, gpu) == 0.0  # no GPUs: none
    fixed = specs.parse({**VALID, "resources": {"gpu": {32: 0.25, 64: 1.0}}})
    assert packing.warmup_gpus(fixed, 64, "adamw", 1.0, gpu) == 1.0


def test_a_second_driver_on_the_same_sweep_fails_before_any_work(tmp_path):
    with store.driver_lock(tmp_path):
        with pytest.raises(ValueError, match="another driver is running the sweep"):
            run_sweep(specs.parse(VALID), tmp_path)
    assert not (tmp_path / "spec.yaml").exists()


def test_trials_get_the_mean_utilisation_of_their_own_gpus_while_they_ran(tmp_path):
    # out of time order, as two monitors' lines may interleave: the window is by time, whatever the file's order
    (tmp_path / "gpu.csv").write_text("12.0,0,60,1\n9.0,0,100,1\n13.0,0,100,1\n10.0,0,40,1\n11.0,1,90,1\n")
    curve = {c: [] for c in store.CURVE_COLUMNS}
    for trial_id, gpus in (("a", ["0"]), ("b", [])):
        store.write_trial(tmp_path, {"trial_id": trial_id, "status": "ok", "gpu_ids": gpus, "started_at": 10.0,
                                     "finished_at": 12.5}, curve)
    store.consolidate(tmp_path)
    import pyarrow.parquet as pq

    rows = {r["trial_id"]: r["gpu_util"] for r in pq.read_table(tmp_path / "trials.parquet").to_pylist()}
    assert rows == {"a": 50.0, "b": None}  # GPU 0's samples at t = 10 and 12


def test_a_spec_as_run_elsewhere_parses_without_its_data(tmp_path):
    """Reports read a sweep's spec.yaml on another machine: the task's data need not exist there, but running it
    (open_task=True, the default) still fails with the field named."""
    raw = {"widths": [32], "lrs": [1e-3], "steps": 2, "model": {"kind": "gdn", "vocab_size": 256},
           "task": {"name": "corpus", "path": str(tmp_path / "elsewhere")}}
    assert specs.parse(raw, open_task=False).grid()[0].width == 32
    with pytest.raises(specs.SpecError, match="'task'"):
        specs.parse(raw)


def test_a_pinned_corpus_is_checked_whenever_the_spec_is_read(tmp_path):
    """tokens_sha256 in the task: a spec (as a resumed sweep's spec.yaml, with vocab_size recorded) whose corpus is
    other data fails on reading, naming the task, before any trial."""
    from deltamup.scaling.data.inputs import text_files
    from deltamup.scaling.data.prepare import prepare

    (tmp_path / "a.txt").write_text("a corpus of bytes " * 300)
    sha = prepare(text_files([str(tmp_path / "a.txt")]), tmp_path / "c", progress=False)["tokens_sha256"]
    raw = {"widths": [32], "lrs": [1e-3], "steps": 2, "model": {"kind": "gdn", "vocab_size": 256},
           "task": {"name": "corpus", "path": str(tmp_path / "c"), "tokens_sha256": sha[:12]}}
    assert specs.parse(raw).task["tokens_sha256"] == sha[:12]
    raw["task"]["tokens_sha256"] = "0" * 12
    with pytest.raises(specs.SpecError, match=f"'task'.*tokens sha256 {sha[:16]}…, not the 000000000000…"):
        specs.parse(raw)
    # a sweep begun without a pin resumes with one (it checks the data, it does not change them); a pin, once
    # there, stays: another is an incomparable resume
    unpinned = {**raw, "task": {"name": "corpus", "path": str(tmp_path / "c")}}
    (tmp_path / "sweep").mkdir()
    prepare_dir(specs.parse(unpinned), tmp_path / "sweep", resume=False)
    pinned = specs.parse({**raw, "task": {**unpinned["task"], "tokens_sha256": sha[:8]}})
    prepare_dir(pinned, tmp_path / "sweep", resume=True)
    assert specs.load(tmp_path / "sweep" / "spec.yaml").task["tokens_sha256"] == sha[:8]
    with pytest.raises(ValueError, match="spec field 'task' differs"):
        prepare_dir(specs.parse({**raw, "task": {**unpinned["task"], "tokens_sha256": sha[:10]}}),
                    tmp_path / "sweep", resume=True)
    # the corpus moved (another machine unpacks it elsewhere): the sweep resumes reading it there, the pin
    # checking that it is the same data; the stored spec's path no longer exists
    (tmp_path / "c").rename(tmp_path / "moved")
    moved = {**raw, "task": {**unpinned["task"], "path": str(tmp_path / "moved"), "tokens_sha256": sha[:8]}}
    prepare_dir(specs.parse(moved), tmp_path / "sweep", resume=True)
    assert specs.load(tmp_path / "sweep" / "spec.yaml").task["path"] == str(tmp_path / "moved")


@pytest.mark.parametrize("path", sorted((ROOT / "sweeps" / "specs").glob("*.yaml"))
                         + sorted((ROOT / "studies").glob("*/*.yaml")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_spec_is_valid(path):
    """The shipped specs and the studies' specs (studies/<name>/spec.yaml, paper-budget.yaml) parse (on the
    embedded sample, so no corpus is built here; a bad field raises SpecError) and every width of their grid gives a
    valid model config (ModelConfig raises)."""
    spec = specs.load(path, ["task=sample"])
    for width in spec.widths:
        spec.model_config(width)


def test_plan_says_what_is_left_and_times_it_from_finished_trials_of_the_same_model(tmp_path, capsys):
    """`deltamup sweep SPEC --out DIR --plan`: per width the trials left, parameters, tokens per parameter and GPU
    share, and the GPU-minutes left from the measured GPU-seconds a step of DIR's finished trials of the same model
    (two that shared a GPU count half their seconds each, one alone all of them) and the most memory one of them
    held; another depth is neither timed nor sized from them. It starts nothing and writes nothing."""
    data = {**VALID, "seeds": [0, 1], "steps": 600, "resources": {"gpu": 0.5}}
    spec_path = write(tmp_path, data)
    spec = specs.load(spec_path)
    out = tmp_path / "sweep"
    out.mkdir()
    prepare_dir(spec, out, resume=False)
    # 3 of width 32's 4: two side by side on GPU 0 from t = 0 to 10 at 0.4 s a step, one alone on GPU 1 at 0.2
    timing = [(0, 0.0, 4.0), (0, 0.0, 4.0), (1, 5.0, 2.0)]
    for i, point in enumerate([p for p in spec.grid() if p.width == 32][:3]):
        gpu, start, seconds = timing[i]
        row = base_record(trial_config(spec, point, out, run=1)) | {
            "status": "ok", "val_loss": 1.0, "steps": 10, "train_seconds": seconds, "node_id": "n",
            "gpu_ids": [str(gpu)], "started_at": start, "finished_at": start + 10.0,
            "peak_memory_gib": [2.5, 3.25, None][i]}
        assert store.write_trial(out, row, {c: [] for c in store.CURVE_COLUMNS})
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert main(["sweep", str(spec_path), "--out", str(out), "--plan"]) == 0
    lines = capsys.readouterr().out.splitlines()
    params = packing.parameter_count(spec.model_config(32))
    assert lines[1].split() == ["32", "4", "1", f"{params / 1e6:.3g}M", f"{600 * 8 * 64 / params:.3g}",
                                lines[1].split()[5], "3.2", "0.5", "0.200", "2.0"]  # 1 trial × 600 × 0.2 GPU-s
    width64 = lines[2].split()
    assert width64[:3] == ["64", "4", "4"] and width64[6] == "–" and width64[-2:] == ["–", "–"]
    assert lines[3].startswith("5 of 8 trials left, 600 steps × 8 × 64 tokens a trial") and "width 64" in lines[3]
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert main(["sweep", str(spec_path), "--out", str(out), "--set", "model.depth=2", "--plan"]) == 0
    deeper = capsys.readouterr().out.splitlines()
    deeper32 = deeper[1].split()
    assert deeper32[:3] == ["32", "4", "1"] and deeper32[6] == "–" and deeper32[-2:] == ["–", "–"]
    # the plan of a resume refuses what the resume would refuse, before a GPU machine finds out
    assert main(["sweep", str(spec_path), "--out", str(out), "--set", "model.depth=2", "--plan", "--resume"]) == 2
    assert "spec field 'model' differs from the sweep" in capsys.readouterr().err
    assert main(["sweep", str(spec_path), "--out", str(out), "--set", "seeds=[0, 1, 2]", "--plan", "--resume"]) == 0


def test_plan_times_a_width_no_trial_ran_from_the_widths_that_did(tmp_path, capsys):
    """A width without finished trials is timed from two or more other widths of the same model: log-log in the
    parameter count between them, proportional to it above them, the smallest's time below; marked (est.). Trials
    of another model (depth) are not counted."""
    from deltamup.sweeps.plan import plan

    data = {**VALID, "widths": [32, 48, 64, 128, 256], "lrs": [1e-3], "steps": 600, "resources": {"gpu": 1}}
    spec_path = write(tmp_path, data)
    spec = specs.load(spec_path)
    out = tmp_path / "sweep"
    out.mkdir()
    prepare_dir(spec, out, resume=False)
    seconds = {64: 0.1, 256: 0.4}  # seconds a step, each trial alone on its GPU
    deeper = specs.parse({**data, "model": {**data["model"], "depth": 2}})
    for i, (s, width) in enumerate([(spec, 64), (spec, 256), (deeper, 64)]):
        point = next(p for p in s.grid() if p.width == width)
        point = dataclasses.replace(point, seed=7) if s is deeper else point  # a trial of its own beside 64's
        row = base_record(trial_config(s, point, out, run=1)) | {
            "status": "ok", "val_loss": 1.0, "steps": 10, "node_id": "n",
            "train_seconds": 10 * (9.0 if s is deeper else seconds[width]), "gpu_ids": [str(i)], "started_at": 0.0,
            "finished_at": 10.0}
        assert store.write_trial(out, row, {c: [] for c in store.CURVE_COLUMNS})
    rows = {r["width"]: r for r in plan(spec, out)}
    n = {w: packing.parameter_count(spec.model_config(w)) for w in rows}
    assert not rows[64]["step_estimated"] and rows[64]["step_seconds"] == pytest.approx(0.1)
    assert rows[128]["step_estimated"]  # the depth-2 trial at 64 is another model: not in 64's time
    slope = math.log(0.4 / 0.1) / math.log(n[256] / n[64])
    assert rows[128]["step_seconds"] == pytest.approx(0.1 * (n[128] / n[64]) ** slope)
    assert rows[48]["step_seconds"] == pytest.approx(0.1) and rows[32]["step_seconds"] == pytest.approx(0.1)
    assert rows[128]["minutes_left"] == pytest.approx(600 * rows[128]["step_seconds"] / 60)
    assert main(["sweep", str(spec_path), "--out", str(out), "--plan"]) == 0
    text = capsys.readouterr().out
    assert text.count("(est.)") == 2 * 3 + 1 and "width 32, 48, 128 (est.)" in text
    one = {**data, "widths": [64, 128]}  # one measured width is not enough to time another
    assert plan(specs.parse(one), tmp_path / "none")[1]["step_seconds"] is None


def test_plan_counts_an_optuna_search_s_own_trials(tmp_path):
    """With search: optuna each width holds the grid's trials and optuna.trials more per (parametrization,
    optimizer); none has run in a fresh directory."""
    from deltamup.sweeps.plan import plan

    spec = specs.parse({**VALID, "parametrizations": ["sp", "gdn-mup"], "search": "optuna",
                        "optuna": {"trials": 5, "startup_trials": 2, "pruner_startup_trials": 2}})
    rows = plan(spec, tmp_path / "none")
    assert [(r["width"], r["trials"], r["left"]) for r in rows] == [(32, 2 * 2 + 5 * 2, 14), (64, 14, 14)]
