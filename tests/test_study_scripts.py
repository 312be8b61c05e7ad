"""The studies' run scripts: studies/optima.py picks the next part's learning rates from the trials a sweep
directory holds, studies/parts.sh runs a part's groups as one sweep, and every studies/*/run.sh parses and refuses
an unknown part in one line."""
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import polars as pl
import pytest
import yaml

from deltamup.cli import main
from deltamup.scaling.data.inputs import text_files
from deltamup.scaling.data.prepare import prepare
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.runner import prepare_dir
from deltamup.sweeps.trial import base_record, trial_config

ROOT = Path(__file__).resolve().parent.parent


def script(path: str, monkeypatch: pytest.MonkeyPatch | None = None) -> ModuleType:
    """The study script ROOT/`path` loaded as a module (with `monkeypatch`, also in sys.modules for the test, where
    its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(f"study_{Path(path).stem}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
RUN_SCRIPTS = sorted(ROOT.glob("studies/*/run.sh"))


def sets(lines: str) -> dict:
    """optima.py's --set lines (KEY=YAML), read back."""
    return {key: yaml.safe_load(value) for key, value in (line.split("=", 1) for line in lines.splitlines())}


def optima(out: Path, *args: str) -> str:
    result = subprocess.run([sys.executable, str(ROOT / "studies/optima.py"), str(out), *args], capture_output=True,
                            text=True, check=True)
    return result.stdout.strip()


def write_trials(out: Path, losses: dict[tuple[int, int], float], status: str = "ok") -> None:
    """Trial records of SP at width 256: {(log2 lr, seed): val_loss}."""
    (out / "results").mkdir(parents=True, exist_ok=True)
    for (octave, seed), loss in losses.items():
        record = {"width": 256, "parametrization": "sp", "lr": 2.0 ** octave, "seed": seed, "status": status,
                  "val_loss": loss}
        (out / "results" / f"sp.w256.lr{octave}.s{seed}.{status}.json").write_text(json.dumps(record))


def test_optimum_seed0_and_edges(tmp_path: Path) -> None:
    # seed 0 alone prefers 2^-8; over 3 seeds 2^-9 is best, and it is the grid's smallest LR: an edge
    write_trials(tmp_path, {(-9, 0): 1.02, (-8, 0): 1.00, (-7, 0): 1.05,
                            (-9, 1): 0.95, (-8, 1): 1.01, (-7, 1): 1.06,
                            (-9, 2): 0.96, (-8, 2): 1.00, (-7, 2): 1.04})
    assert optima(tmp_path, "seed0", "256", "sp", "-5") == "-8"
    assert optima(tmp_path, "optimum", "256", "sp", "-5") == "-9"
    assert sets(optima(tmp_path, "edges")) == {
        "widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -10], "seeds": [0, 1, 2],
        "only": [{"widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -10]}]}
    # seeds 1 and 2 around seed 0's optimum 2^-8 at 256, around the default 2^-6 where nothing ran (512)
    assert sets(optima(tmp_path, "around", "256 512", "sp", "-6")) == {
        "widths": [256, 512], "parametrizations": ["sp"], "lrs": [2.0 ** e for e in range(-9, -4)], "seeds": [1, 2],
        "only": [{"widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -8, 2.0 ** -9, 2.0 ** -7]},
                 {"widths": [512], "parametrizations": ["sp"], "lrs": [2.0 ** -6, 2.0 ** -7, 2.0 ** -5]}]}
    assert optima(tmp_path, "optimum", "512", "sp", "-5") == "-5"      # nothing at that width: the default
    assert optima(tmp_path, "seed0", "256", "gdn-mup", "-6") == "-6"


def test_seed0_edges_and_given_cells(tmp_path: Path) -> None:
    write_trials(tmp_path, {(-9, 0): 1.1, (-8, 0): 1.0, (-7, 0): 0.9})  # seed 0 alone: best at the high edge
    assert optima(tmp_path, "edges") == ""  # no LR has 3 seeds
    assert sets(optima(tmp_path, "edges0")) == {
        "widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -6], "seeds": [0],
        "only": [{"widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -6]}]}
    assert sets(optima(tmp_path, "cells", "0,1", "1024 gdn-mup -10 -9", "256 sp -8")) == {
        "widths": [256, 1024], "parametrizations": ["gdn-mup", "sp"], "lrs": [2.0 ** -10, 2.0 ** -9, 2.0 ** -8],
        "seeds": [0, 1], "only": [{"widths": [1024], "parametrizations": ["gdn-mup"], "lrs": [2.0 ** -10, 2.0 ** -9]},
                                  {"widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -8]}]}


def test_a_seed0_optimum_needs_three_lrs(tmp_path: Path) -> None:
    # a part centred on seed 0's best would otherwise follow its own first trials: one trial at 2^-9 made 2^-9 the
    # "optimum", the next group 2^-10 … 2^-8, and the lower trial there moved it again
    write_trials(tmp_path, {(-9, 0): 0.90})
    assert optima(tmp_path, "seed0", "256", "sp", "-8") == "-8"
    write_trials(tmp_path, {(-10, 0): 0.98})
    assert optima(tmp_path, "seed0", "256", "sp", "-8") == "-8"
    assert sets(optima(tmp_path, "around", "256", "sp", "-8"))["only"] == [
        {"widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -8, 2.0 ** -9, 2.0 ** -7]}]
    assert optima(tmp_path, "edges0") == ""
    write_trials(tmp_path, {(-8, 0): 0.91})  # three LRs: 2^-9 is seed 0's optimum, inside them
    assert optima(tmp_path, "seed0", "256", "sp", "-8") == "-9"


def test_unfinished_trials_and_too_few_seeds_do_not_count(tmp_path: Path) -> None:
    write_trials(tmp_path, {(-9, 0): 1.0, (-8, 0): 0.9, (-7, 0): 1.1, (-9, 1): 1.0, (-8, 1): 0.9})
    write_trials(tmp_path, {(-6, 0): 0.1}, status="diverged")
    assert optima(tmp_path, "seed0", "256", "sp", "0") == "-8"        # the diverged 2^-6 is not an optimum
    assert optima(tmp_path, "optimum", "256", "sp", "-4") == "-4"     # no LR has 3 seeds yet
    assert optima(tmp_path, "edges") == ""


def test_a_diverged_seed_marks_an_edge_and_is_never_an_optimum(tmp_path: Path) -> None:
    # 2^-5 is the one LR whose 3 seeds all finished; a seed diverged at 2^-4 and at 2^-3: the 3-seed optimum is
    # 2^-5 and on the low edge of the 3-seed LRs, so the next LR down runs
    low = tmp_path / "low"
    write_trials(low, {(-6, 0): 2.47, (-5, 0): 2.47, (-5, 1): 2.46, (-5, 2): 2.47,
                       (-4, 0): 2.35, (-4, 1): 2.40, (-3, 0): 2.9})
    write_trials(low, {(-4, 2): 1.0, (-3, 1): 1.0, (-3, 2): 1.0}, status="diverged")
    assert optima(low, "optimum", "256", "sp", "0") == "-5"
    assert optima(low, "seed0", "256", "sp", "0") == "-4"
    assert sets(optima(low, "edges"))["only"] == [{"widths": [256], "parametrizations": ["sp"], "lrs": [2.0 ** -6]}]
    # the optimum on the high edge with a seed diverged one LR up: past the edge of stability, nothing to run
    high = tmp_path / "high"
    write_trials(high, {(e, seed): 2.5 - 0.1 * e for e in (-8, -7) for seed in range(3)}
                 | {(-6, seed): 2.0 for seed in range(3)} | {(-5, 0): 1.9})
    write_trials(high, {(-5, 1): 1.0}, status="diverged")
    assert optima(high, "optimum", "256", "sp", "0") == "-6"
    assert optima(high, "edges") == ""
    # the same with that seed blown up to a finite loss above ln V (V = 256: 5.55 nats), as the report counts it
    blown = tmp_path / "blown"
    shutil.copytree(high / "results", blown / "results")
    (blown / "results" / "sp.w256.lr-5.s1.diverged.json").unlink()
    record = {"width": 256, "parametrization": "sp", "lr": 2.0 ** -5, "seed": 1, "status": "ok", "val_loss": 11.8,
              "vocab_size": 256}
    (blown / "results" / "sp.w256.lr-5.s1.ok.json").write_text(json.dumps(record))
    assert optima(blown, "edges") == ""


def test_a_part_runs_its_groups_as_one_sweep_over_only_cells(tmp_path: Path) -> None:
    """parts.sh's seeds_around through the real CLI on a sweep whose cells are all finished: one driver run, the
    cells in its spec as run, no kernel warm-up and no trial launched; with PLAN=1, the same part's plan and no
    driver run, with PART_SETS's settings."""
    (tmp_path / "a.txt").write_text("Gated DeltaNet and DeltaProduct share one kernel. " * 200)
    prepare(text_files([str(tmp_path / "a.txt")]), tmp_path / "corpus", progress=False)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "task": {"name": "corpus"},
        "widths": [32, 64], "lrs": [2.0 ** e for e in range(-9, -4)], "parametrizations": ["sp"],
        "seeds": [0, 1, 2], "steps": 2, "seq_len": 16}))
    spec = specs.load(spec_path, [f"task.path={tmp_path / 'corpus'}"])
    out = tmp_path / "sweep"
    out.mkdir()
    prepare_dir(spec, out, resume=False)
    for p in spec.grid():  # every point finished; seed 0's best LR: 2^-7 at width 32, 2^-6 at 64
        best = -7 if p.width == 32 else -6
        loss = 1 + abs(round(math.log2(p.lr)) - best) / 10
        row = base_record(trial_config(spec, p, out, run=1)) | {"status": "ok", "val_loss": loss}
        store.write_trial(out, row, {c: [] for c in store.CURVE_COLUMNS})
    script = (f"set -eu; DIR={out}; CORPUS={tmp_path / 'corpus'}; SPEC={spec_path}; source studies/parts.sh; "
              "seeds_around '32 64' sp -9")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    runs = store.read_runs(out)
    assert [r["launched"] for r in runs if "launched" in r] == [0]  # one driver run, nothing left to launch
    assert "--warm-kernels" not in result.stdout  # nothing left to run: no kernel work started for it
    as_run = store.read_spec(out)
    assert as_run["seeds"] == [1, 2] and as_run["only"] == [
        {"widths": [32], "parametrizations": ["sp"], "lrs": [2.0 ** -7, 2.0 ** -8, 2.0 ** -6]},
        {"widths": [64], "parametrizations": ["sp"], "lrs": [2.0 ** -6, 2.0 ** -7, 2.0 ** -5]}]
    planned = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "PLAN": "1",
                                  "PART_SETS": "resources.gpu=0.5 resources.gpu_memory_gb=40"})
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert "0 of 12 trials left" in planned.stdout and len(store.read_runs(out)) == len(runs)  # planned, not run
    assert "GPU shares for 40 GB GPUs" in planned.stdout  # PART_SETS reach every sweep of the part
    said = []
    for deadline in (time.time() - 1, time.time() + 600):  # past: no sweep runs; ahead: each gets --time-limit
        limited = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                                 env={**os.environ, "PYTHONPATH": str(ROOT), "PART_DEADLINE": str(int(deadline))})
        assert limited.returncode == 0, limited.stderr[-2000:]
        said.append(limited.stdout)
    assert said[0].strip() == f"time limit reached: the sweep into {out} not run"
    lines = [r for r in store.read_runs(out) if "launched" in r]
    assert len(lines) == 2 and "not_started" not in lines[0] and lines[1]["not_started"] == 0


def test_another_sweep_directory_starts_from_dirs_compile_cache(tmp_path: Path) -> None:
    """parts.sh's seed_cache: a sibling sweep directory without a cache gets a copy of DIR's (warm-up stamps
    included, so its kernels and graphs are not warmed again; file times kept, so that keep.sh --cache does not take
    a copy for something compiled); one with its own keeps it, DIR itself and a plan are left alone."""
    main, other, own = tmp_path / "sweep", tmp_path / "sweep-recheck", tmp_path / "sweep-4x"
    (main / "compile-cache/deltamup-warmed").mkdir(parents=True)
    (main / "compile-cache/deltamup-warmed/graph.json").write_text("{}")
    os.utime(main / "compile-cache/deltamup-warmed/graph.json", (1000, 1000))
    (own / "compile-cache").mkdir(parents=True)
    script = (f"set -eu; DIR={main}; source studies/parts.sh; seed_cache {other}; seed_cache {own}; "
              f"seed_cache {main}/")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert (other / "compile-cache/deltamup-warmed/graph.json").read_text() == "{}"
    assert (other / "compile-cache/deltamup-warmed/graph.json").stat().st_mtime == 1000
    assert not list((own / "compile-cache").iterdir())
    assert result.stdout.strip() == f"compile cache of {other}: {main}'s"
    planned = tmp_path / "sweep-long"
    script = f"DIR={main}; SPEC=nope.yaml; CORPUS=nope; PLAN=1; source studies/parts.sh; sweep_to {planned}"
    subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert not planned.exists()  # a plan copies nothing (its sweep refuses the missing spec)


@pytest.mark.parametrize("script", RUN_SCRIPTS, ids=lambda p: p.parent.name)
def test_run_scripts_parse_and_refuse_an_unknown_part_before_any_work(script: Path, tmp_path: Path) -> None:
    """An unknown part after a known one is refused in one line before the known one starts: nothing is printed
    to stdout and no sweep directory is made."""
    subprocess.run(["bash", "-n", str(script)], check=True)
    known = "base" if script.parent.name == "gdn-adamw-8l" else "seeds"
    result = subprocess.run(["bash", str(script), str(tmp_path / "sweep"), str(tmp_path / "corpus"), known, "nope"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().startswith("unknown part nope") and len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_the_gpu_part_runner_refuses_an_unknown_study_before_any_work(tmp_path: Path) -> None:
    result = subprocess.run(["bash", "maintainers/gpu/part.sh", "nope", "10", "base"], capture_output=True, text=True,
                            cwd=ROOT, env={**os.environ, "OUT": str(tmp_path)})
    assert result.returncode == 2 and result.stderr.strip() == "part.sh: no study nope (studies/nope/run.sh)"
    assert not list(tmp_path.iterdir())
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    result = subprocess.run(["bash", "maintainers/gpu/part.sh", "gdn-sgd-noclip", "10", "hidden"], capture_output=True,
                            text=True, cwd=ROOT, env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == "part.sh: OUT is not set (the folder whose files come back)"


def norm_floor_lines(out: Path) -> dict[str, list[float]]:
    """studies/coord-checks/long/norm_floor.py's lines for one check folder (its `table`, at steps 0 and 2):
    {label: values by width}."""
    module = script("studies/coord-checks/long/norm_floor.py")
    return {label.strip(): [float(v) for v in values.split(",")]
            for label, values in (line.split(": ", 1) for line in module.table(out, [0, 2]).splitlines()[1:])}


def test_norm_floor_reads_o_against_the_norms_effective_eps(tmp_path: Path) -> None:
    """GDN-µP's √d and its eps/d form are one model, so o's distance to the effective floor is the same in both;
    without either, the floor is d times higher."""
    names = ("gdn-mup", "gdn-mup-normeps", "gdn-mup-nosqrtd")
    for p in names:  # in this process: three `deltamup` processes would spend most of their time importing
        assert main(["coord-check", "-p", p, "--optimizer", "sgd", "--widths", "64,128", "--depth", "1", "--steps",
                     "2", "--lr", "0.01", "--every", "1", "--device", "cpu", "--out", str(tmp_path / p)]) == 0
    lines = {p: norm_floor_lines(tmp_path / p) for p in names}
    ratio = "block0 mean(o²)/eps_eff at t = 0"
    assert lines["gdn-mup"][ratio] == pytest.approx(lines["gdn-mup-normeps"][ratio], rel=1e-3)
    assert [r * d for r, d in zip(lines["gdn-mup-nosqrtd"][ratio], (64, 128))] == pytest.approx(
        lines["gdn-mup"][ratio], rel=1e-3)
    assert lines["gdn-mup"]["loss at t = 2"] == pytest.approx(lines["gdn-mup-normeps"]["loss at t = 2"], abs=2e-3)


def test_paired_gap_pairs_by_seed_at_each_common_lr_and_horizon(tmp_path: Path) -> None:
    """studies/paired_gap.py: a − b for the seeds both finished at each LR and horizon; a diverged seed or an LR
    only one side ran drops out; a third parametrization without horizons leaves a and b's horizons in."""
    module = script("studies/paired_gap.py")
    rows = []
    for p, shift in (("a", 0.5), ("b", 0.0)):
        for lr in (2.0**-6, 2.0**-5):
            for seed in (0, 1):
                loss = 2.0 + shift + seed / 10 + lr
                rows.append({"parametrization": p, "width": 256, "lr": lr, "seed": seed, "status": "ok",
                             "val_loss": loss, "val_loss_h50": loss + 1.0})
    rows.append({"parametrization": "a", "width": 256, "lr": 2.0**-4, "seed": 0, "status": "ok", "val_loss": 1.0,
                 "val_loss_h50": 1.0})  # b never ran 2^-4
    rows[-2]["status"] = "diverged"  # b at 2^-5, seed 1
    table = module.gaps(pl.DataFrame(rows), "a", "b", 256)
    assert table["log2_lr"].to_list() == ["-6", "-6", "-5", "-5"]
    assert table["at"].to_list() == [50, 100, 50, 100]
    assert table["seeds"].to_list() == [[0, 1], [0, 1], [0], [0]]
    assert table["a_minus_b"].to_list() == [[0.5, 0.5], [0.5, 0.5], [0.5], [0.5]]
    assert table["lo"].to_list() == table["hi"].to_list() == [0.5, 0.5, None, None]  # no spread; one seed: none
    unequal = module.gaps(pl.DataFrame(rows).with_columns(
        pl.when(pl.col("parametrization") == "a").then(pl.col("val_loss") + pl.col("seed") * 0.2)
        .otherwise(pl.col("val_loss")).alias("val_loss")), "a", "b", 256).filter(pl.col("at") == 100)
    assert unequal["mean"][0] == 0.6 and unequal["lo"][0] < 0.6 - 0.5 and unequal["hi"][0] > 0.6 + 0.5  # t(1): 6.3
    crossed = module.gaps(pl.DataFrame(rows), "a", "b", 256, lrs=(-5, -6))  # a at 2^-5 against b at 2^-6
    assert crossed["log2_lr"].to_list() == ["-5 / -6"] * 2 and crossed["at"].to_list() == [50, 100]
    assert crossed["seeds"].to_list() == [[0, 1], [0, 1]]  # b's diverged seed is at 2^-5, not in this pair
    assert crossed["a_minus_b"].to_list() == [[round(0.5 + 2.0**-5 - 2.0**-6, 3)] * 2] * 2
    assert module.gaps(pl.DataFrame(rows), "a", "b", 256, lrs=(-4, -4)).is_empty()  # b never ran 2^-4
    # where the sides' records name different GPUs or code, or one side's none, trained_by tells them apart
    assert module.trained_by(pl.DataFrame(rows), ["a", "b"], 256) == {"a": ["not recorded"], "b": ["not recorded"]}
    named = pl.DataFrame(rows).with_columns(
        pl.when(pl.col("parametrization") == "a").then(pl.lit("H100")).alias("gpu_name"),
        pl.when(pl.col("parametrization") == "a").then(pl.lit("c0de")).alias("code"))
    assert module.trained_by(named, ["a", "b"], 256) == {"a": ["H100, code c0de"], "b": ["not recorded"]}
    older = pl.DataFrame([*rows, {"parametrization": "c", "width": 256, "lr": 2.0**-6, "seed": 0, "status": "ok",
                                  "val_loss": 2.0, "val_loss_h50": None}])  # a third, run before horizons were kept
    assert module.gaps(older, "a", "b", 256)["at"].to_list() == [50, 100, 50, 100]
    run = subprocess.run([sys.executable, str(ROOT / "studies/paired_gap.py"), str(tmp_path), "a", "b", "256"],
                         capture_output=True, text=True)
    assert run.returncode != 0 and run.stderr.count("\n") == 1 and "no spec.yaml" in run.stderr
    # the end's interval counts the validation batches where every pair recorded them (reports.intervals)
    batched = pl.DataFrame(rows).with_columns(pl.concat_str(pl.lit("["), pl.col("val_loss") - 0.01, pl.lit(", "),
                                                            pl.col("val_loss") + 0.01, pl.lit("]"))
                                              .alias("val_batch_losses"))
    ends = module.gaps(batched, "a", "b", 256).filter(pl.col("at") == 100)
    assert ends["batches"].to_list() == [2, 2] and ends["mean"].to_list() == [0.5, 0.5]
    assert module.gaps(batched, "a", "b", 256).filter(pl.col("at") == 50)["batches"].to_list() == [None, None]
    # --train: the mean training loss over the 100 steps up to 100, 300, …, the last; a's gap opens at step 200
    trials = pl.DataFrame([{"trial_id": f"{p}{seed}", "parametrization": p, "width": 256, "lr": 2.0**-6,
                            "seed": seed, "status": "ok"} for p in "ab" for seed in (0, 1)])
    curves = pl.DataFrame([{"trial_id": f"{p}{seed}", "step": step,
                            "train_loss": 3.0 - step / 1000 + seed + (0.2 if p == "a" and step >= 200 else 0.0)}
                           for p in "ab" for seed in (0, 1) for step in range(400)])
    windowed, at = module.train_windows(trials, curves)
    assert at == [(100, "train_100"), (300, "train_300"), (400, "train_400")]
    assert windowed.filter(pl.col("trial_id") == "b0")["train_100"][0] == pytest.approx(3.0 - 49.5 / 1000)
    table = module.gaps(windowed, "a", "b", 256, at=at)
    assert table["at"].to_list() == [100, 300, 400]
    assert table["mean"].to_list() == pytest.approx([0.0, 0.2, 0.2])
    # --minus: (a − b) − (c − d) by seed, at the LRs all four ran; 0 where the two changes' effects add
    effect = {"a": 0.3, "b": 0.2, "c": 0.1, "d": 0.0}  # a = b's change + c's change: additive
    square = pl.DataFrame([{"parametrization": p, "width": 256, "lr": lr, "seed": seed, "status": "ok",
                            "val_loss": 2.0 + effect[p] + seed / 10 + (0.05 * seed if p == "a" else 0.0)}
                           for p in "abcd" for lr in (2.0**-6, 2.0**-5) for seed in (0, 1, 2)
                           if not (p == "d" and lr == 2.0**-5)])  # d never ran 2^-5
    both = module.gaps(square, "a", "b", 256, minus=("c", "d"))
    assert both["log2_lr"].to_list() == ["-6"] and both["seeds"].to_list() == [[0, 1, 2]]
    assert both["a_minus_b"][0].to_list() == pytest.approx([0.0, 0.05, 0.1])  # a's extra gain grows with the seed
    assert both["mean"][0] == pytest.approx(0.05) and both["lo"][0] < 0.0 < both["hi"][0]
    with pytest.raises(ValueError):
        module.gaps(square, "a", "b", 256, lrs=(-6, -6), minus=("c", "d"))
    with pytest.raises(ValueError):
        module.gaps(square, "a", "b", 256, minus=("a", "d"))  # the four must differ
    # --rerun: a parametrization's trials at the width that the re-run holds stand in for the original's, the
    # other widths and parametrizations kept
    rerun = square.filter(pl.col("parametrization") == "d").with_columns(pl.col("val_loss") - 0.1)
    wider = square.filter(pl.col("parametrization") == "d").with_columns(pl.lit(512, dtype=pl.Int64).alias("width"))
    merged = module.with_rerun(pl.concat([square, wider]), pl.concat([rerun, wider.with_columns(pl.lit(9.0)
                                                                                       .alias("val_loss"))]), 256)
    assert merged.height == square.height + wider.height
    d256 = merged.filter(pl.col("parametrization") == "d", pl.col("width") == 256)["val_loss"]
    assert d256.to_list() == pytest.approx((rerun["val_loss"]).to_list())
    assert merged.filter(pl.col("width") == 512)["val_loss"].to_list() == wider["val_loss"].to_list()
    assert module.gaps(merged, "c", "d", 256)["mean"].to_list() == pytest.approx([0.2])


def test_noise_by_lr_pools_the_seed_spread_by_position_from_the_best_lr(tmp_path: Path) -> None:
    """studies/interval-coverage/noise_by_lr.py: each LR's seed SD goes to its place relative to its width's best
    grid LR; a cell with a diverged seed drops out; a side with too few degrees of freedom takes the fallback."""
    from deltamup.reports import analysis

    module = script("studies/interval-coverage/noise_by_lr.py")
    cells = {-10: (1.10, 1.12), -9: (1.00, 1.02), -8: (1.20, 1.30)}  # the best LR in the middle
    rows = [{"parametrization": "sp", "optimizer": "adamw", "width": w, "lr": 2.0**octave, "seed": seed,
             "status": "ok", "val_loss": loss + w / 1e4}
            for w in (256, 512) for octave, losses in cells.items() for seed, loss in enumerate(losses)]

    def measure(rows: list[dict]) -> dict[int, tuple[float, int]]:
        trials = pl.DataFrame(rows)
        return module.spread_by_position(analysis.trial_losses(trials).filter(~pl.col("failed")),
                                         analysis.lr_curves(trials))

    spread = measure(rows)
    assert list(spread) == [-1, 0, 1] and [dof for _, dof in spread.values()] == [2, 2, 2]
    assert [round(sd, 4) for sd, _ in spread.values()] == [0.0141, 0.0141, 0.0707]
    rows.append({**rows[-1], "seed": 2, "status": "diverged", "val_loss": float("nan")})  # width 512 at 2^-8
    assert measure(rows)[1][1] == 1
    sides = module.by_side({-2: (0.1, 2), -1: (0.2, 2), 0: (0.3, 1), 1: (0.4, 4)}, fallback=9.0)
    assert sides == {-1: pytest.approx(0.025 ** 0.5), 0: 9.0, 1: 0.4}


def test_hparams_study_runs_its_best_variants_and_the_defaults_as_one_sweep(tmp_path: Path) -> None:
    """studies/gdn-hparams-8l/run.sh `seeds` on seed 0's grid: the three best variants other than the defaults and
    the defaults, ranked on seed 0 alone (a seed-1 record of another variant changes nothing), as `only` cells of one
    sweep at seeds 1 and 2 (PLAN=1: its plan, nothing run); `edge` has no 3-seed optimum yet and runs nothing."""
    (tmp_path / "a.txt").write_text("Gated DeltaNet and DeltaProduct share one kernel. " * 200)
    prepare(text_files([str(tmp_path / "a.txt")]), tmp_path / "corpus", progress=False)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "task": {"name": "corpus"},
        "widths": [256], "lrs": [2.0 ** e for e in (-10, -9, -8)], "parametrizations": ["gdn-mup"],
        "hparams": {"output_mult": [0.25, 1, 4, 16], "init_mult": [0.5, 1]}, "seeds": [0, 1, 2], "steps": 2,
        "seq_len": 16}))
    spec = specs.load(spec_path, [f"task.path={tmp_path / 'corpus'}"])
    out = tmp_path / "sweep"
    out.mkdir()
    prepare_dir(spec, out, resume=False)
    rank = {(16, 0.5): 0.0, (4, 1): 0.01, (0.25, 1): 0.02, (1, 1): 0.03, (4, 0.5): 0.04}  # seed 0's, best first
    for p in spec.grid():
        h = dict(p.hparams)
        key = (h["output_mult"], h["init_mult"])
        if p.seed == 0 or (p.seed == 1 and key == (16, 1)):  # (16, 1): best by its mean over seeds 0-1, not at 0
            loss = 1 + rank.get(key, 0.1) - (0.5 if p.seed == 1 else 0) + abs(math.log2(p.lr) + 9) / 100
            row = base_record(trial_config(spec, p, out, run=1)) | {"status": "ok", "val_loss": loss}
            store.write_trial(out, row, {c: [] for c in store.CURVE_COLUMNS})
    result = subprocess.run(["bash", "studies/gdn-hparams-8l/run.sh", str(out), str(tmp_path / "corpus"), "seeds",
                             "edge"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "PLAN": "1", "SPEC": str(spec_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    picked = [line for line in result.stderr.splitlines() if line.startswith("seeds ")]
    assert picked == ["seeds 1,2: output_mult 16, init_mult 0.5", "seeds 1,2: output_mult 4, init_mult 1",
                      "seeds 1,2: output_mult 0.25, init_mult 1", "seeds 1,2: output_mult 1, init_mult 1"]
    assert result.stdout.count("trials left") == 1 and "24 of 24 trials left" in result.stdout  # edge: none


def test_hparams_study_goes_one_octave_past_an_edge_optimum_at_the_wide_width(tmp_path: Path) -> None:
    """studies/gdn-hparams-8l/run.sh `transfer-edge`: a width-1024 variant whose 3-seed optimum is the highest LR
    `transfer` ran gets the octave above it (PLAN=1: its plan, nothing run); one with its optimum inside gets none."""
    (tmp_path / "a.txt").write_text("Gated DeltaNet and DeltaProduct share one kernel. " * 200)
    prepare(text_files([str(tmp_path / "a.txt")]), tmp_path / "corpus", progress=False)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "task": {"name": "corpus"},
        "widths": [1024], "lrs": [2.0 ** e for e in (-11, -10, -9, -8)], "parametrizations": ["gdn-mup"],
        "hparams": {"output_mult": [1, 4], "init_mult": [0.5, 1]}, "seeds": [0, 1, 2], "steps": 2, "seq_len": 16}))
    spec = specs.load(spec_path, [f"task.path={tmp_path / 'corpus'}"])
    out = tmp_path / "sweep"
    out.mkdir()
    prepare_dir(spec, out, resume=False)
    best = {(4, 0.5): -9, (1, 1): -10}  # the 3-seed optimum of the two variants run: on the edge, inside
    for p in spec.grid():
        h = dict(p.hparams)
        key = (h["output_mult"], h["init_mult"])
        if key in best and math.log2(p.lr) <= -9:  # `transfer` ran 2^-11 … 2^-9
            loss = 1 + abs(math.log2(p.lr) - best[key]) / 100 + p.seed / 1000
            row = base_record(trial_config(spec, p, out, run=1)) | {"status": "ok", "val_loss": loss}
            store.write_trial(out, row, {c: [] for c in store.CURVE_COLUMNS})
    result = subprocess.run(["bash", "studies/gdn-hparams-8l/run.sh", str(out), str(tmp_path / "corpus"),
                             "transfer-edge"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "PLAN": "1", "SPEC": str(spec_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    picked = [line for line in result.stdout.splitlines() if line.startswith("width 1024")]
    assert picked == ["width 1024: output_mult 4, init_mult 0.5, at 2^-8 (beyond its optimum on the grid's edge)"]
    assert result.stdout.count("trials left") == 1 and "3 of 3 trials left" in result.stdout


def test_hparams_study_parts_that_transfer_the_best_variant_refuse_a_directory_without_one(tmp_path: Path) -> None:
    """`transfer` and `default` take the best variant with 3 seeds at width 256: where DIR has none (a wrong DIR,
    or parts base and seeds not run), one line and exit 2, before any sweep starts."""
    for part in ("transfer", "default"):
        result = subprocess.run(["bash", "studies/gdn-hparams-8l/run.sh", str(tmp_path), str(tmp_path / "corpus"),
                                 part], capture_output=True, text=True, cwd=ROOT, timeout=120,
                                env={**os.environ, "PYTHONPATH": str(ROOT), "PLAN": "1"})
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == f"run.sh: no variant in {tmp_path} has 3 seeds at width 256 to rank (parts base " \
                                "and seeds make them)\n"


def test_slope_table_spread_is_the_mean_and_range_over_the_checks(tmp_path: Path) -> None:
    """studies/coord-checks/slope_table.py --spread: one more column, mean [min, max] of a slope over the
    directories (seeds of one check); a check without the slope shows '–' and does not count."""
    dirs = []
    for name, slope in (("s0", -0.40), ("s1", -0.10), ("s2", None)):
        d = tmp_path / name
        d.mkdir()
        rows = [dict(probe="block0.mlp_out", step=100, slope=slope)] if slope is not None else []
        pl.DataFrame(rows or [dict(probe="other", step=100, slope=0.0)]).write_csv(d / "slopes.csv")
        dirs.append(str(d))
    out = subprocess.run([sys.executable, str(ROOT / "studies/coord-checks/slope_table.py"), *dirs, "--probes",
                          "block0.mlp_out", "--steps", "100", "--spread"], capture_output=True, text=True, check=True)
    row = next(line for line in out.stdout.splitlines() if line.startswith("| block0.mlp_out"))
    assert [c.strip() for c in row.strip("|").split("|")] == ["block0.mlp_out", "100", "-0.40", "-0.10", "–",
                                                              "-0.25 [-0.40, -0.10]"]


def test_slope_table_pool_averages_a_matrix_probe_over_blocks_and_checks(tmp_path: Path) -> None:
    """slope_table.py --pool align: one row per matrix, the mean [min, max] of align.blocks.<i>.<matrix> over every
    block and directory at each step; other probes and steps do not count; --probes and --pool exclude each other."""
    dirs = []
    for name, shift in (("s0", 0.0), ("s1", -0.2)):
        d = tmp_path / name
        d.mkdir()
        rows = [dict(probe=f"align.blocks.{b}.mlp.down", step=100, slope=-0.1 * b + shift) for b in range(3)]
        rows += [dict(probe="align.blocks.0.mlp.down", step=50, slope=9.0),
                 dict(probe="dWx.blocks.0.mlp.down", step=100, slope=9.0),
                 dict(probe="align.blocks.1.mixer.o_proj", step=100, slope=-0.5)]
        pl.DataFrame(rows).write_csv(d / "slopes.csv")
        dirs.append(str(d))
    script = str(ROOT / "studies/coord-checks/slope_table.py")
    out = subprocess.run([sys.executable, script, *dirs, "--pool", "align", "--steps", "100"],
                         capture_output=True, text=True, check=True)
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out.stdout.splitlines()[2:]}
    assert rows == {"mixer.o_proj": "-0.50 [-0.50, -0.50]", "mlp.down": "-0.20 [-0.40, +0.00]"}
    for name, k in (("s0", 1.0), ("s1", 2.0)):  # --pair: the slope between two widths, from coords.parquet
        pl.DataFrame([dict(width=w, step=100, probe="srank.blocks.0.mlp.up", rms=1.0, delta_rms=(w / 64) ** (k / 4))
                      for w in (64, 128, 256)]).write_parquet(tmp_path / name / "coords.parquet")
    paired = subprocess.run([sys.executable, script, *dirs, "--pool", "srank", "--pair", "128,256", "--steps", "100"],
                            capture_output=True, text=True, check=True)
    assert paired.stdout.splitlines()[2] == "| mlp.up | +0.38 [+0.25, +0.50] |"
    both = subprocess.run([sys.executable, script, *dirs, "--pool", "align", "--probes", "x", "--steps", "100"],
                          capture_output=True, text=True)
    assert both.returncode != 0 and "one of them" in both.stderr
    for bad, said in ((["--pool", "srank", "--pair", "128,512"], "has no width [512]"),
                      (["--probes", "x", "--pair", "128,256"], "--pair goes with --pool"),
                      (["--pool", "align", "--spread"], "go with --probes")):
        refused = subprocess.run([sys.executable, script, *dirs, *bad, "--steps", "100"], capture_output=True,
                                 text=True)
        assert refused.returncode != 0 and said in refused.stderr and not refused.stdout, bad


def test_slope_table_loss_lists_the_probe_batch_loss_per_width(tmp_path: Path) -> None:
    """slope_table.py --loss: per check and step, the probe-batch loss of each width from coords.parquet ('–' for a
    width a check lacks); other probes do not count."""
    dirs = []
    for name, widths in (("a", (32, 64)), ("b", (32,))):
        d = tmp_path / name
        d.mkdir()
        rows = [dict(width=w, step=t, probe=probe, rms=w / 100 + t + (9.0 if probe != "loss" else 0.0))
                for w in widths for t in (0, 5) for probe in ("loss", "block0.mlp_out")]
        pl.DataFrame(rows).write_parquet(d / "coords.parquet")
        dirs.append(str(d))
    out = subprocess.run([sys.executable, str(ROOT / "studies/coord-checks/slope_table.py"), *dirs, "--loss",
                          "--steps", "5"], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[2:] == ["| a | 5 | 5.320 | 5.640 |", "| b | 5 | 5.320 | – |"]


def test_recheck_pairs_the_same_trials_of_two_sweeps(tmp_path: Path) -> None:
    """studies/recheck.py: a trial pairs with the same grid point and seed in the other sweep (an LR equal to 6
    digits of its log2 too, as an older rounded record's), finished on both sides; per point the mean rerun −
    original with a t interval over the seeds, none for one seed; a directory that is not a sweep is one line."""
    module = script("studies/recheck.py")

    def trials(rows: list[tuple], code: str | None) -> pl.DataFrame:
        return pl.DataFrame([{"parametrization": p, "optimizer": "adamw", "width": 1024, "lr": lr, "seed": s,
                              "hparams": "", "status": st, "val_loss": v, "code": code} for p, lr, s, st, v in rows])

    original = trials([("sp", 2.0**-10 * (1 + 1e-9), 0, "ok", 1.0), ("sp", 2.0**-10, 1, "ok", 1.1),
                       ("sp", 2.0**-10, 2, "ok", 1.2), ("gdn-mup", 2.0**-8, 0, "ok", 0.9),
                       ("gdn-mup", 2.0**-8, 1, "diverged", math.inf)], None)
    rerun = trials([("sp", 2.0**-10, 0, "ok", 1.01), ("sp", 2.0**-10, 1, "ok", 1.12), ("sp", 2.0**-10, 2, "ok", 1.23),
                    ("gdn-mup", 2.0**-8, 0, "ok", 0.85), ("gdn-mup", 2.0**-8, 1, "ok", 0.8),
                    ("gdn-mup", 2.0**-7, 0, "ok", 0.7)], "0123456789abcdef")
    rerun = rerun.with_columns(pl.lit("NVIDIA H100 80GB HBM3").alias("gpu_name"))  # the original predates it
    paired = module.pairs(original, rerun)
    assert paired.height == 4 and paired["code_rerun"].unique().to_list() == ["0123456789abcdef"]
    assert paired["gpu_rerun"].unique().to_list() == ["NVIDIA H100 80GB HBM3"]
    assert paired["gpu_original"].null_count() == 4
    rows = {r["parametrization"]: r for r in module.summary(paired).iter_rows(named=True)}
    assert rows["sp"]["seeds"] == [0, 1, 2] and rows["sp"]["diffs"] == pytest.approx([0.01, 0.02, 0.03])
    from deltamup.reports.intervals import student_t

    half = student_t(2) * 0.01 / math.sqrt(3)  # the reports' 90% interval of a mean over 3 seeds (t ≈ 2.92)
    assert half == pytest.approx(2.92 * 0.01 / math.sqrt(3), rel=0.015)
    assert (rows["sp"]["mean_diff"], rows["sp"]["lo"], rows["sp"]["hi"]) == pytest.approx((0.02, 0.02 - half,
                                                                                           0.02 + half), rel=1e-4)
    assert rows["gdn-mup"]["diffs"] == pytest.approx([-0.05]) and math.isnan(rows["gdn-mup"]["lo"])
    run = subprocess.run([sys.executable, str(ROOT / "studies/recheck.py"), str(tmp_path), str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode != 0 and run.stderr.count("\n") == 1 and "no spec.yaml" in run.stderr


@pytest.mark.parametrize(("part", "message"), [
    ("recheck-h200", "part recheck-h200 runs on an H200 only; this machine's GPU: none"),
    ("recheck-seeds", "part recheck-seeds runs on an H100 only (the cells' GPU kind); this machine's GPU: none")])
def test_a_part_of_one_gpu_kind_refuses_another_before_any_work(tmp_path: Path, part: str, message: str) -> None:
    """studies/gdn-adamw-8l/run.sh recheck-h200 measures the GPU kind, recheck-seeds adds seeds to cells of one: on
    a machine without that GPU (this one has none) each is one line and exit 2, and no sweep directory is made."""
    run = subprocess.run(["bash", "studies/gdn-adamw-8l/run.sh", str(tmp_path / "sweep"), str(tmp_path / "corpus"),
                          part], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [message]
    assert not any(tmp_path.iterdir())


def test_data_build_names_the_build_each_driver_run_read(tmp_path: Path) -> None:
    """studies/data_build.py: a run's recorded step-0 loss, recomputed on each candidate build, names the build it
    came from (the runs here trained on a, on b, on neither), --runs checks those alone; a CORPUS that is not a
    prepared one is one line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shas = {}
    for name, words in (("a", "one build of a corpus "), ("b", "another build, with other words ")):
        (tmp_path / f"{name}.txt").write_text(words * 400)
        shas[name] = prepare(text_files([str(tmp_path / f"{name}.txt")]), tmp_path / name,
                             progress=False)["tokens_sha256"][:16]
    module = script("studies/data_build.py")
    out = tmp_path / "sweep"
    (out / "results").mkdir(parents=True)
    base = {"kind": "gdn", "depth": 1, "heads": 1, "base_width": 16, "vocab_size": 256, "width": 16,
            "parametrization": "gdn-mup", "optimizer": "adamw", "hparams": "", "batch_size": 2, "seq_len": 32,
            "status": "ok", "lr": 1e-3}
    for run, seed, corpus in ((1, 0, "a"), (2, 1, "b"), (3, 0, None)):
        record = {**base, "seed": seed, "run": run, "trial_id": f"t{run}"}
        loss = module.first_batch_loss(record, tmp_path / corpus) + 1e-4 if corpus else 9.0  # + bf16's rounding
        (out / "results" / f"t{run}.json").write_text(json.dumps(record))
        pq.write_table(pa.table({"step": [0, 1], "train_loss": [loss, loss - 0.1]}), store.curve_path(out, f"t{run}"))
    result = subprocess.run([sys.executable, str(ROOT / "studies/data_build.py"), str(out), str(tmp_path / "a"),
                             str(tmp_path / "b")], capture_output=True, text=True, check=True)
    rows = [line.split(" | ") for line in result.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0][-1] == "read |" and [row[-1] for row in rows[1:]] == [f"{shas['a']} |", f"{shas['b']} |",
                                                                          "not told |"]
    only = subprocess.run([sys.executable, str(ROOT / "studies/data_build.py"), str(out), str(tmp_path / "a"),
                           "--runs", "2"], capture_output=True, text=True, check=True)
    assert [line.split(" | ")[0] for line in only.stdout.splitlines() if line.startswith("| ")][2:] == ["| 2"]
    bad = subprocess.run([sys.executable, str(ROOT / "studies/data_build.py"), str(out), str(tmp_path)],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "not a prepared corpus" in bad.stderr


def test_shift_sensitivity_moves_one_cell_and_brackets_the_measured_slope(tmp_path: Path) -> None:
    """studies/interval-coverage/shift_sensitivity.py: a shift moves every seed of one (width, LR) cell and nothing
    else; a vanishing shift leaves the slope where it was measured, a larger one spreads it around it; bad input is
    one line and a non-zero exit."""
    from test_analysis import surface_spec, surface_trials, write_sweep

    from deltamup.reports import analysis

    module = script("studies/interval-coverage/shift_sensitivity.py")
    trials = surface_trials({"sp": -0.5, "gdn-mup": 0.0}, seeds=3, noise=0.002).filter(  # two widths, six LRs
        pl.col("width").is_in([256, 1024]), pl.col("lr").is_between(2.0**-10, 2.0**-5))
    moved = module.shifted(trials, "val_loss", {"parametrization": "sp", "optimizer": "adamw", "width": 1024,
                                                "lr": 2.0**-7}, 0.03)
    changed = (moved["val_loss"] - trials["val_loss"]).abs() > 1e-12
    cell = (trials["parametrization"] == "sp") & (trials["width"] == 1024) & (trials["lr"] == 2.0**-7)
    assert changed.to_list() == cell.to_list() and int(cell.sum()) == 3  # its three seeds, nothing else
    budget = {"steps": 50, "tokens_per_trial": 25600, "depth": 2}
    measured = analysis.estimate(trials, "val_loss", budget).transfer.sort("parametrization")

    def ranges(shift: float) -> dict[str, tuple[float, float]]:
        table = module.sensitivity(trials, budget, shift)
        return {p: tuple(float(v) for v in r.split(" … ")) for p, r in table.select("parametrization", "slope range")
                .iter_rows()}

    still, spread = ranges(1e-6), ranges(0.02)
    for p, slope in measured.select("parametrization", "slope").iter_rows():
        assert still[p] == pytest.approx((slope, slope), abs=0.006)  # the table's two decimals
        assert spread[p][0] < slope - 0.02 and spread[p][1] > slope + 0.02
    sweep = write_sweep(tmp_path / "sweep", trials, surface_spec(trials))
    for args, says in ((["--shift", "0"], "--shift must be > 0"), (["--parametrizations", "mup"], "no trials of mup")):
        run = subprocess.run([sys.executable, str(ROOT / "studies/interval-coverage/shift_sensitivity.py"), str(sweep),
                              *args], capture_output=True, text=True)
        assert run.returncode == 1 and says in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_conditional_coverage_bins_each_widths_interval_by_how_wide_it_came_out(monkeypatch) -> None:
    """studies/interval-coverage/coverage.py --conditional: every width's interval falls in one bin of its width, and
    every slope's in one of its own; the bins' shares add up to all and their coverages, weighted by share, to the
    overall one; quieter trials give narrower intervals."""
    import math

    module = script("studies/interval-coverage/coverage.py", monkeypatch)
    quiet, noisy = (module.run_conditional(module.Setting(name, 0.012, 0.0, scatter, 3), 12)
                    for name, scatter in (("quiet", 0.002), ("noisy", 0.012)))
    for row in (quiet, noisy):
        for what in ("optimum", "slope"):
            mine = {k: v for k, v in row.items() if k.startswith("slope") == (what == "slope")}
            shares = [v for k, v in mine.items() if k.endswith("share %")]
            covered = [v for k, v in mine.items() if k.endswith("oct: covered %")]
            assert len(shares) == len(module.WIDTH_BINS) and sum(shares) == pytest.approx(100)
            assert sum(s * c for s, c in zip(shares, covered) if not math.isnan(c)) / 100 == pytest.approx(
                row[f"{what} covered %"])
    for prefix in ("", "slope "):
        assert quiet[f"{prefix}< 0.25 oct: share %"] > noisy[f"{prefix}< 0.25 oct: share %"]
        assert noisy[f"{prefix}≥ 1 or open oct: share %"] > quiet[f"{prefix}≥ 1 or open oct: share %"]


def test_power_separates_quiet_designs_from_noisy_ones_and_times_them(tmp_path: Path, monkeypatch) -> None:
    """studies/interval-coverage/power.py: with more seeds and less scatter the report says `transfers` more often
    at a true slope of 0 and its slope interval is narrower; a design's GPU time is the sum over its widths of the
    trials' measured (or interpolated) GPU-seconds, times LRs and seeds; a record without its GPU, or of another GPU
    kind, does not count."""
    monkeypatch.syspath_prepend(str(ROOT / "studies/interval-coverage"))
    module = script("studies/interval-coverage/power.py", monkeypatch)
    widths = (256, 1024, 2048)
    grid = tuple(module.GRIDS.values())[0]
    quiet, noisy = (module.power(module.Setting("s", 0.012, 0.0, scatter, seeds, log2_lrs=grid, widths=widths), 40)
                    for scatter, seeds in ((0.002, 8), (0.012, 3)))
    assert quiet["slope 0: transfers %"] > noisy["slope 0: transfers %"] + 30
    assert quiet["slope 0: interval width (median)"] < noisy["slope 0: interval width (median)"] / 2
    (tmp_path / "results").mkdir()
    for i, (width, seconds, share, gpu) in enumerate([(256, 80.0, 0.25, "H100"), (256, 100.0, 0.25, "H100"),
                                                      (1024, 60.0, 1.0, "H100"), (1024, 999.0, 1.0, None),
                                                      (1024, 30.0, 1.0, "NVIDIA H200")]):
        record = {"status": "ok", "width": width, "train_seconds": seconds, "gpu_share": share, "gpu_name": gpu}
        (tmp_path / "results" / f"t{i}.json").write_text(json.dumps(record))
    measured = module.trial_gpu_seconds(tmp_path)
    assert measured == {256: 22.5, 1024: 60.0}
    assert module.gpu_seconds_at(512, measured) == pytest.approx((22.5 * 60.0) ** 0.5)
    with pytest.raises(ValueError):
        module.gpu_seconds_at(2048, measured)


def test_power_widths_runs_one_width_set_of_its_own(tmp_path: Path, monkeypatch) -> None:
    """power.py --widths: the designs at that width set only, timed by its widths, the flag in the table's command
    line; widths not increasing, or fewer than two, exit 2 before any simulation."""
    monkeypatch.syspath_prepend(str(ROOT / "studies/interval-coverage"))
    module = script("studies/interval-coverage/power.py", monkeypatch)
    for bad in ("2048,256", "256", "256,256"):
        with pytest.raises(SystemExit) as exit_:
            module.main(["--widths", bad, "--sims", "10"])
        assert exit_.value.code == 2
    monkeypatch.setattr(module, "SEEDS", (3,))
    monkeypatch.setattr(module, "SCATTERS", (0.008,))
    monkeypatch.setattr(module, "GRIDS", dict(list(module.GRIDS.items())[:1]))
    assert module.main(["--widths", "256,2048", "--sims", "10", "--out", str(tmp_path / "p.md")]) == 0
    text = (tmp_path / "p.md").read_text()
    assert "--sims 10 --widths 256,2048`" in text
    rows = [line for line in text.splitlines() if line.startswith("| 256")]
    assert len(rows) == 1 and rows[0].startswith("| 256, 2048 |")
    measured = module.trial_gpu_seconds()
    hours = (measured[256] + measured[2048]) * 4 * 3 / 3600
    assert rows[0].rstrip(" |").endswith(f"{round(hours, 1)}")


def test_naming_counts_how_often_the_f_test_names_each_group(tmp_path: Path, capsys) -> None:
    """studies/interval-coverage/naming.py: a group seven times the others' scatter is named in most draws, the
    quiet ones in about 1% (the test's level); the table is written where --out says; bad input exits 2."""
    module = script("studies/interval-coverage/naming.py")
    shares = module.named_shares((1, 7, 1), 4, 400, np.random.default_rng(0))
    assert shares[1] > 80 and shares[0] < 3 and shares[2] < 3
    assert module.main(["--draws", "50", "--out", str(tmp_path / "n.md")]) == 0
    rows = [line for line in (tmp_path / "n.md").read_text().splitlines() if line.startswith("| 1")]
    assert len(rows) == sum(f[0] == 1 for f in module.SETTINGS)
    with pytest.raises(SystemExit) as exit_:
        module.main(["--draws", "0"])
    assert exit_.value.code == 2
