"""Sweeps on a real Ray cluster: conftest's two-node cluster (ray.cluster_utils.Cluster, 1 CPU per node) for the
session.

Tiny models (width 32–48, depth 1, seq 32, a few steps) so that the whole file runs in about two minutes."""
from __future__ import annotations

import os

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only (read when ray is imported)

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
import ray
import yaml

from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.runner import run_sweep

ROOT = Path(__file__).resolve().parents[1]
TINY = {"model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "widths": [32, 48],
        "lrs": [1e-3, 1e-2], "parametrizations": ["sp", "gdn-mup"], "steps": 6, "batch_size": 4, "seq_len": 32,
        "log_every": 3, "eval": {"batches": 2}, "resources": {"cpu": 1, "gpu": 0}, "failure": {"retries": 0}}
REQUIRED_TRIAL_COLUMNS = {"trial_id", "parametrization", "optimizer", "width", "lr", "seed", "kind", "depth",
                          "householder", "final_train_loss", "val_loss", "smoothed_loss", "diverged",
                          "diverged_step", "clipped_fraction", "steps", "tokens", "wall_seconds", "tokens_per_s",
                          "status", "error"}


def tiny_spec(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny", **TINY, **changes}))
    return path


def test_tiny_grid_runs_end_to_end_and_a_huge_lr_diverges(cluster, tmp_path):
    """Run as the CLI runs it and without polars, as on the GPU machine (../shared/gpu/README.md): the driver, its
    progress lines and its closing cost summary need none (an import of polars in the summary once cost a GPU call)."""
    spec_path = tiny_spec(tmp_path, lrs=[1e-3, 1e-2, 1e3])
    spec = specs.load(spec_path)
    out = tmp_path / "sweep"
    code = ("import sys; sys.modules['polars'] = None; from deltamup.cli import main; "
            f"sys.exit(main(['sweep', {str(spec_path)!r}, '--out', {str(out)!r}, '--address', {cluster.address!r}]))")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "12 trials (8 ok, 4 diverged, 0 errors)" in done.stdout and "tokens/s overall" in done.stdout
    assert store.read_runs(out)[0]["launched"] == 12
    trials = pl.read_parquet(out / "trials.parquet")
    assert REQUIRED_TRIAL_COLUMNS <= set(trials.columns)
    assert sorted(trials["trial_id"]) == sorted(p.key for p in spec.grid())
    assert trials["node_id"].null_count() == 0 and set(trials["node_id"]) <= {n["NodeID"] for n in ray.nodes()}
    good, bad = trials.filter(pl.col("lr") < 1), trials.filter(pl.col("lr") == 1e3)
    assert set(good["status"]) == {"ok"} and good["error"].null_count() == 8 and not good["diverged"].any()
    assert (good["tokens"] == 6 * 4 * 32).all() and (good["steps"] == 6).all()
    assert good["val_loss"].is_finite().all() and (good["val_loss"] < 5.6).all()  # below ln(256): it learned
    per_batch = [json.loads(x) for x in good["val_batch_losses"]]  # eval.batches: 2, their mean the val_loss
    assert all(len(x) == 2 and sum(x) / 2 == pytest.approx(v, rel=1e-6) for x, v in zip(per_batch, good["val_loss"]))
    assert bad["val_batch_losses"].null_count() == 4  # a diverged trial has none
    assert set(bad["status"]) == {"diverged"} and bad["diverged"].all()
    # the loop checks losses once per log interval (3 steps): it stops at the first check after the NaN
    assert (bad["smoothed_loss"] == float("inf")).all() and (bad["diverged_step"] < bad["steps"]).all()
    assert (bad["steps"] <= 3).all()
    curves = pd.read_parquet(out / "curves.parquet")
    assert list(curves.columns) == ["trial_id", "step", "tokens", "train_loss", "lr", "grad_norm"]
    good_curves = curves[curves.trial_id.isin(good["trial_id"].to_list())]
    assert good_curves.groupby("trial_id").size().eq(6).all()
    assert (good_curves["grad_norm"] > 0).all()  # the default grad_clip (1.0) is on: every step's norm is recorded
    clipped = {t: (g["grad_norm"] > 1.0).mean() for t, g in good_curves.groupby("trial_id")}
    assert all(good["clipped_fraction"][i] == pytest.approx(clipped[t]) for i, t in enumerate(good["trial_id"]))
    # nothing left: a resume launches no trial and keeps every row
    assert run_sweep(spec, out, resume=True)["launched"] == 0
    assert pl.read_parquet(out / "trials.parquet").height == 12


def test_work_beside_the_start_is_waited_for_before_the_trials_launch(cluster, tmp_path):
    """run_sweep's beside_start (--warm-kernels' background check): started once the input is checked and a trial
    is to run, its wait called once, before any trial has run; with nothing left to run or bad input, never started."""
    spec = specs.load(tiny_spec(tmp_path, widths=[32], lrs=[1e-3], parametrizations=["sp"]))
    out = tmp_path / "sweep"
    seen: list[str] = []

    def beside_start():
        seen.append("started")
        return lambda: seen.append(f"waited, {len(store.finished_ids(out))} finished")
    run_sweep(spec, out, address=cluster.address, beside_start=beside_start)
    assert seen == ["started", "waited, 0 finished"] and len(store.finished_ids(out)) == 1
    run_sweep(spec, out, address=cluster.address, resume=True, beside_start=beside_start)
    assert len(seen) == 2  # nothing left to run: no kernel work for it
    with pytest.raises(ValueError, match="already holds a sweep"):  # no --resume
        run_sweep(spec, out, address=cluster.address, beside_start=beside_start)
    assert len(seen) == 2

    def failing() -> None:
        seen.append("raised")
        raise RuntimeError("the kernel check failed")
    with pytest.raises(RuntimeError, match="kernel check failed"):  # raised before a trial, not waited for again
        run_sweep(specs.load(tiny_spec(tmp_path, widths=[32], lrs=[1e-2], parametrizations=["sp"])), out,
                  address=cluster.address, resume=True, beside_start=lambda: failing)
    assert seen[2:] == ["raised"] and len(store.finished_ids(out)) == 1


def test_trials_with_a_gpu_share_are_packed_onto_the_gpu_together(cluster, tmp_path):
    spec = specs.load(tiny_spec(tmp_path, widths=[32], parametrizations=["gdn-mup"], lrs=[1e-3, 3e-3, 1e-2, 3e-2],
                                steps=30, resources={"cpu": 0.5, "gpu": {32: 0.5}}))
    out = tmp_path / "sweep"
    run_sweep(spec, out, progress_every=60)
    rows = pl.read_parquet(out / "trials.parquet").to_dicts()
    assert all(json.loads(r["gpu_ids"]) == ["0"] and r["device"] == "cpu" for r in rows)  # no CUDA on this machine
    assert {r["gpu_share"] for r in rows} == {0.5}  # the share Ray gave each: what a later run's time limit reads
    gpu_node = next(n["NodeID"] for n in ray.nodes() if n["Resources"].get("GPU"))
    assert {r["node_id"] for r in rows} == {gpu_node}  # they ran on the second node, the one with the GPU
    spans = sorted((r["started_at"], r["finished_at"]) for r in rows)
    assert any(b_start < a_end for (_, a_end), (b_start, _) in zip(spans, spans[1:]))  # two shared the GPU at once


def test_store_keeps_the_first_finished_row_and_writes_without_polars(tmp_path, monkeypatch):
    curve = {"trial_id": ["t"], "step": [0], "tokens": [8], "train_loss": [5.0], "lr": [1e-3], "grad_norm": [2.0]}
    first = {"trial_id": "t", "status": "error", "error": "boom", "lr": 1e-3}
    assert store.write_trial(tmp_path, first, curve)
    assert store.write_trial(tmp_path, {**first, "status": "ok", "error": None, "val_loss": 4.0}, curve)
    assert not store.write_trial(tmp_path, {**first, "status": "ok", "error": None, "val_loss": 9.0}, curve)
    assert json.loads(store.record_path(tmp_path, "t").read_text())["val_loss"] == 4.0
    monkeypatch.setitem(sys.modules, "polars", None)  # the GPU machine: pyarrow only
    assert store.consolidate(tmp_path) == (1, 1)
    assert pd.read_parquet(tmp_path / "trials.parquet")["val_loss"].tolist() == [4.0]
