"""Data-parallel trials (resources.workers_per_trial) on the session's two-node Ray cluster (tests/conftest.py):
two CPU workers (gloo) of one CPU each on two nodes of one CPU, so every two-worker trial spans both nodes (its
driver holds no CPU). Tiny models (width 32, depth 1, 10 steps)."""
from __future__ import annotations

import os

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only (read when ray is imported)

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray
import torch
import yaml
from ray.util.placement_group import placement_group_table

from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.scaling.data import get_task
from deltamup.scaling.data_parallel import Ranks
from deltamup.scaling.train import TrainConfig, train
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.parallel import ray_identity, release_leaked_groups
from deltamup.sweeps.runner import run_sweep
from deltamup.sweeps.trial import train_and_evaluate, trial_config

TINY = {"model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "widths": [32], "lrs": [1e-2],
        "parametrizations": ["gdn-mup"], "steps": 10, "batch_size": 8, "seq_len": 32, "log_every": 5,
        "eval": {"batches": 2}, "resources": {"cpu": 1, "gpu": 0, "workers_per_trial": 2},
        "failure": {"retries": 0}}


def tiny_spec(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "ddp", **TINY, **changes}))
    return path


def losses(out: Path, trial_id: str) -> list[float]:
    return pq.read_table(store.curve_path(out, trial_id)).column("train_loss").to_pylist()


def unsynced_losses(cfg: dict) -> list[float]:
    """The losses two ranks would log if their gradients were never all-reduced: each trains alone on its rows
    r::2 of every global batch; the logged loss is their mean."""
    point, config = cfg["point"], TrainConfig(**{**cfg["train"], "betas": tuple(cfg["train"]["betas"])})
    curves = []
    for rank in range(2):
        task = get_task(cfg["task"])
        batches = Ranks(rank, 2).shard(task.train_batches(cfg["batch_size"], cfg["seq_len"], point["seed"]))
        model = build_model(ModelConfig(**cfg["model"]), point["parametrization"], point["optimizer"], point["seed"])
        result = train(model, point["parametrization"], config, batches)
        curves.append([loss for _, loss, _ in result.losses])
    return [(a + b) / 2 for a, b in zip(*curves)]


def test_two_worker_trials_across_two_nodes_match_one_worker_and_resume_after_a_kill(cluster, kill_driver,
                                                                                     tmp_path):
    """Width 32 data-parallel (DDP), width 48 sharded (FSDP: the model and its AdamW moments split over the two
    workers, reduce-scatter of the gradients, all-gather of the weights); each trains the one-worker trial's steps.
    (That a diverging run stops every rank at the same loss check: tests/test_checkpoint.py, two gloo processes.)"""
    spec_path = tiny_spec(tmp_path, widths=[32, 48],
                          resources={**TINY["resources"], "sharding": {32: "ddp", 48: "fsdp"}})
    spec = specs.load(spec_path)
    out = tmp_path / "sweep"
    # a group the killed driver leaked holds CPUs until the resume releases it
    kill_driver(spec_path, out, until=lambda: store.finished_ids(out), cpus_back=False)
    before = {p.name: p.read_bytes() for p in store.results_dir(out).glob("*.json")}
    assert len(before) == 1, "the driver was killed after one trial and before the end"
    line = run_sweep(spec, out, resume=True, progress_every=60)
    assert line["launched"] == len(spec.grid()) - 1
    after = {p.name: p.read_bytes() for p in store.results_dir(out).glob("*.json")}
    assert {name: after[name] for name in before} == before  # the finished row untouched
    rows = {r["trial_id"]: r for r in store.read_records(out)}
    assert sorted(rows) == sorted(p.key for p in spec.grid())
    assert [r["run"] for r in rows.values()].count(2) == len(rows) - 1
    killed = store.read_runs(out)[0]["ray_job"]  # nothing of the killed driver's holds resources any more
    assert all(info["state"] == "REMOVED" for g, info in placement_group_table().items() if g.endswith(killed))
    for point in spec.grid():
        row = rows[point.key]
        assert row["workers"] == 2 and set(row["worker_nodes"]) == {n["NodeID"] for n in ray.nodes()}  # both nodes
        assert row["sharding"] == {32: "ddp", 48: "fsdp"}[point.width]
        assert len(list((out / "tensorboard" / point.key).glob("events.*"))) == 1  # rank 0's logs only
        assert row["status"] == "ok" and row["tokens"] == 10 * 8 * 32
        # the same trial on one worker: the one-device trial's own training and evaluation, in this process
        cfg = trial_config(spec, point, out, run=1)
        result, val_losses, _, _ = train_and_evaluate(cfg, torch.device("cpu"), lambda *_, **__: None, None)
        one, two = [loss for _, loss, _ in result.losses], losses(out, point.key)
        gap = max(abs(a - b) for a, b in zip(two, one))
        assert len(two) == 10 and gap < 1e-4
        assert len(val_losses) == 3 and all(abs(row[c] - v) < 1e-4 for c, v in val_losses.items())  # horizons
        print(f"max |Δ loss| from one worker at width {point.width} ({row['sharding']}): two workers {gap:.2g}")
        if point.width == 32:  # the bar tells synced ranks from unsynced ones (measured: 4.8e-7 against 0.092)
            broken = max(abs(a - b) for a, b in zip(unsynced_losses(cfg), one))
            assert broken > 100 * 1e-4, f"two workers without the all-reduce: max |Δ loss| {broken:.2g}"


def test_a_resumed_driver_releases_the_placement_groups_of_its_dead_predecessors(cluster, tmp_path):
    """A detached group made by a driver that has exited stands in for a group a killed driver leaked."""
    code = ("import ray; from ray.util.placement_group import placement_group; "
            f"ray.init(address={cluster.address!r}, log_to_driver=False); "
            "g = placement_group([{'CPU': 0.5}], lifetime='detached'); ray.get(g.ready()); "
            "print(ray.get_runtime_context().get_job_id(), g.id.hex())")
    job, group = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                timeout=120).stdout.split()
    assert placement_group_table()[group]["state"] == "CREATED"
    earlier = [{"run": 1, "ray_job": job, "ray_head": "another cluster"}]
    assert release_leaked_groups(earlier) == 0  # a run on another cluster: its job id means nothing here
    assert release_leaked_groups([{**earlier[0], **ray_identity(), "ray_job": job}]) == 1
    assert placement_group_table()[group]["state"] == "REMOVED"


def test_a_data_parallel_trial_that_raises_is_retried_by_ray_with_its_tracebacks_kept(cluster, tmp_path):
    # an empty validation split makes every rank's evaluation raise after training
    spec = specs.load(tiny_spec(tmp_path, task={"name": "sample", "val_fraction": 0.0}, failure={"retries": 1}))
    out = tmp_path / "sweep"
    run_sweep(spec, out, address=cluster.address, progress_every=60)
    (row,) = store.read_records(out)
    assert row["status"] == "error" and row["attempts"] == 2 and "too long" in row["error"]
    assert row["tracebacks"] == [f"{row['trial_id']}.attempt{n}.traceback.txt" for n in (1, 2)]
    texts = [(store.results_dir(out) / name).read_text() for name in row["tracebacks"]]
    assert all("Traceback (most recent call last)" in t and "ValueError" in t for t in texts)
    assert store.finished_ids(out) == set()


def test_an_unknown_sharding_is_one_line_before_ray_starts(tmp_path):
    with pytest.raises(specs.SpecError, match=r"^spec field 'resources.sharding': expected one of ddp, fsdp, got "
                                              r"'zero3'$"):
        specs.load(tiny_spec(tmp_path, resources={**TINY["resources"], "sharding": "zero3"}))
