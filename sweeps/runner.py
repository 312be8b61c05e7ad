"""Runs a sweep on Ray Tune: the grid's missing trials (and Optuna's, with `search: optuna`), GPU-packed, with a
compact progress view; the sweep directory (sweeps.store) is the source of truth, so --resume after a kill runs
exactly the trials without a finished row.

    run_sweep(spec, out, address=None, resume=False)   # local Ray by default (loopback, token auth on)
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deltamup.console import writable_dir

from . import store
from .spec import GRID_AXES, SweepSpec, TrialPoint, parse
from .trial import trial_config
from .tuner import record_ray_errors, run_config, trainable, trial_cost, tune_config

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AIR_NEW_OUTPUT": "0",  # verbose=0 then prints nothing
           "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}  # no CSV/TensorBoard logs: result.json only (below)
LOCAL_RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # Ray then binds every service to 127.0.0.1
OBJECT_STORE_BYTES = 512 * 2**20  # trials pass only small dicts: no need for Ray's default 30% of RAM
RESUMABLE_CHANGES = GRID_AXES + ("hparams", "name", "resources", "failure", "search", "optuna", "max_concurrent")


def configure_ray_env(local: bool) -> None:
    """Ray's environment; must run before `import ray` (Ray reads it at import)."""
    for key, value in {**RAY_ENV, **(LOCAL_RAY_ENV if local else {})}.items():
        os.environ.setdefault(key, value)


def prepare_dir(spec: SweepSpec, out: Path, resume: bool) -> None:
    """Checks DIR before any work (ValueError: one line) and writes the spec as run. Without --resume the
    directory must not hold results; with it, only grid axes, resources and failure/search settings may change."""
    stored = store.read_spec(out)
    if stored is not None and not resume:
        raise ValueError(f"{out} already holds a sweep: pass --resume to finish it, or another --out")
    if stored is not None:
        before, now = parse(stored).to_dict(), spec.to_dict()
        for key in now:
            if key not in RESUMABLE_CHANGES and before.get(key) != now[key]:
                raise ValueError(f"spec field '{key}' differs from the sweep in {out} ({before.get(key)!r} → "
                                 f"{now[key]!r}): results would not be comparable; use another --out")
    store.write_spec(out, spec.to_dict())


@contextmanager
def ray_session(address: str | None, num_cpus: int | None) -> Iterator[None]:
    """Ray as it is when already initialised (tests); else joins `address` or starts a local instance."""
    import ray

    if ray.is_initialized():
        yield
        return
    if address:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False, object_store_memory=OBJECT_STORE_BYTES)
    try:
        yield
    finally:
        ray.shutdown()


def run_sweep(spec: SweepSpec, out: str | Path, address: str | None = None, resume: bool = False,
              num_cpus: int | None = None, progress_every: float = 10.0) -> dict[str, Any]:
    """Runs every trial of `spec` that DIR has no finished row for; returns this run's line of DIR/runs.jsonl
    (run, trials launched, wall seconds, …). Bad input raises ValueError before Ray starts."""
    out = writable_dir(str(out))
    with store.driver_lock(out):
        prepare_dir(spec, out, resume)
        return run_missing(spec, out, address, num_cpus, progress_every)


def run_missing(spec: SweepSpec, out: Path, address: str | None, num_cpus: int | None,
                progress_every: float) -> dict[str, Any]:
    """The trials DIR has no finished row for, on Ray (the caller holds DIR's driver lock)."""
    configure_ray_env(local=address is None)
    from .gpu_monitor import GpuMonitor
    from .progress import print_summary  # imports Ray: after configure_ray_env

    run = len(store.read_runs(out)) + 1
    started = time.time()
    store.append_run(out, {"run": run, "started_at": started, "address": address})
    todo = [p for p in spec.grid() if p.key not in store.finished_ids(out)]
    launched = 0
    if todo or spec.search == "optuna":
        with ray_session(address, num_cpus), GpuMonitor(out / "gpu.csv"):
            launched += run_grid(spec, out, todo, run, progress_every)
            if spec.search == "optuna":
                from .search import run_optuna  # imports Ray: after configure_ray_env

                launched += run_optuna(spec, out, run, progress_every)
    line = {"run": run, "started_at": started, "finished_at": time.time(), "wall_seconds": time.time() - started,
            "launched": launched, "address": address}
    store.append_run(out, line)
    store.consolidate(out)
    print_summary(out)
    left = [p for p in spec.grid() if p.key not in store.finished_ids(out)]
    if left:
        print(f"{len(left)} grid trial(s) have no finished result (interrupted or errors): "
              f"deltamup sweep {out} --resume runs them")
    return line


def run_grid(spec: SweepSpec, out: Path, points: list[TrialPoint], run: int, progress_every: float) -> int:
    """Runs `points` as one Tuner over a grid of trial configs; returns how many were launched."""
    from ray import tune  # Ray is imported once configure_ray_env has set its environment

    if not points:
        return 0
    configs = sorted((trial_config(spec, p, out, run) for p in points), key=trial_cost(spec), reverse=True)
    tuner = tune.Tuner(trainable(spec), param_space={"trial": tune.grid_search(configs)},
                       tune_config=tune_config(spec), run_config=run_config(spec, out, f"run{run}-grid",
                                                                           [c["point"]["width"] for c in configs],
                                                                           progress_every))
    record_ray_errors(out, tuner.fit())
    return len(configs)
