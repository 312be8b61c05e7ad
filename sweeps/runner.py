"""Runs a sweep on Ray Tune: the grid's missing trials, then, with `search: refine`, the refine grid's (sweeps.refine)
or, with `search: optuna`, Optuna's (sweeps.search), GPU-packed, with a compact progress view; the sweep directory
(sweeps.store) is the source of truth, so --resume after a kill runs exactly the trials without a finished row.

    run_sweep(spec, out, address=None, resume=False)   # a local Ray cluster: 127.0.0.1 only, token auth, whatever
                                                       # the environment says (address="auto" or host:port opts out)
    run_sweep(spec, out, deadline=time.time() + 540)   # start only the trials that end by then (sweeps.time_limit)
"""
from __future__ import annotations

import logging
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deltamup.console import writable_dir
from deltamup.scaling.code import code_fingerprint
from deltamup.scaling.data import data_fingerprint, get_task

from . import store
from .packing import check_memory
from .parallel import ray_identity, release_leaked_groups
from .refine import grid_centres, refine_points
from .spec import GRID_AXES, SweepSpec, TrialPoint, parse
from .time_limit import NOT_STARTED, starts_in_time
from .trial import trial_config, trial_key
from .tuner import record_ray_errors, run_config, trainable, trial_cost, tune_config
from .warmup import warm_graphs

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AIR_NEW_OUTPUT": "0",  # verbose=0 then prints nothing
           "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}  # no CSV/TensorBoard logs: result.json only (below)
# A local cluster's security, set whatever the environment says (--address opts out: that cluster's own settings):
LOCAL_RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # every service bound to 127.0.0.1
                 "RAY_AUTH_MODE": "token"}  # token auth: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token
OBJECT_STORE_BYTES = 512 * 2**20  # trials pass only small dicts: no need for Ray's default 30% of RAM
RESUMABLE_CHANGES = GRID_AXES + ("hparams", "only", "name", "resources", "failure", "checkpoint", "search", "refine",
                                 "optuna", "tracking", "max_concurrent", "limits")


def configure_ray_env(local: bool) -> None:
    """Ray's environment; must run before `import ray` (Ray reads it at import). Where deltamup will start the local
    cluster (local, and no Ray already initialised in this process, which ray_session then uses as it is)
    LOCAL_RAY_ENV replaces what the environment says; the rest are defaults a user may override."""
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    ray = sys.modules.get("ray")
    if local and not (ray is not None and ray.is_initialized()):
        os.environ.update(LOCAL_RAY_ENV)


def check_local_security() -> None:
    """Before a local cluster starts: Ray (perhaps imported before configure_ray_env) sees LOCAL_RAY_ENV."""
    from ray._private import ray_constants
    from ray._raylet import Config

    if ray_constants.ENABLE_RAY_CLUSTER:
        raise ValueError("Ray was imported before deltamup could bind the local cluster to 127.0.0.1: import "
                         "deltamup.sweeps.runner first, or start Ray yourself and pass --address")
    Config.initialize("")  # Ray's own way to re-read RAY_AUTH_MODE after import (authentication_token_setup.py)
    private_token()


def private_token() -> None:
    """Where the environment names no token, the one Ray would create in ~/.ray/auth_token, created first and
    readable by this user only (Ray writes it with the umask's mode); an existing file is left as it is."""
    if "RAY_AUTH_TOKEN" in os.environ or "RAY_AUTH_TOKEN_PATH" in os.environ:
        return
    path = Path.home() / ".ray" / "auth_token"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))  # 256 bits, as Ray's own generator


def prepare_dir(spec: SweepSpec, out: Path, resume: bool) -> None:
    """Checks DIR before any work (check_dir) and writes the spec as run."""
    check_dir(spec, out, resume)
    store.write_spec(out, spec.to_dict())


def check_dir(spec: SweepSpec, out: Path, resume: bool) -> None:
    """ValueError (one line) where DIR cannot take this run: without --resume the directory must not hold results;
    with it, only grid axes, resources and failure/search settings may change, a corpus pin (task.tokens_sha256)
    may be added (it checks the data the task reads, it does not change them) and the task's path may move (where
    the data lies on this machine: warn_if_other_data and the pin check what it holds). The stored spec is read
    without opening its task: its path may not exist here."""
    stored = store.read_spec(out)
    if stored is not None and not resume:
        raise ValueError(f"{out} already holds a sweep: pass --resume to finish it, or another --out")
    if stored is not None:
        before, now = parse(stored, open_task=False).to_dict(), spec.to_dict()
        task_before, task_now = before.get("task"), now.get("task")
        if isinstance(task_before, dict) and isinstance(task_now, dict):
            if "tokens_sha256" in task_now:
                task_before.setdefault("tokens_sha256", task_now["tokens_sha256"])  # a pin added: the same data
            if "path" in task_now:
                task_before["path"] = task_now["path"]  # the data moved, or lies elsewhere on this machine
        for key in now:
            if key not in RESUMABLE_CHANGES and before.get(key) != now[key]:
                raise ValueError(f"spec field '{key}' differs from the sweep in {out} ({before.get(key)!r} → "
                                 f"{now[key]!r}): results would not be comparable; use another --out")


@contextmanager
def ray_session(address: str | None, num_cpus: int | None) -> Iterator[None]:
    """Ray as it is when already initialised (tests); else joins `address` or starts a local instance."""
    import ray

    if ray.is_initialized():
        yield
        return
    if address:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    else:  # a new cluster on this machine, also where RAY_ADDRESS names another: loopback, token auth
        check_local_security()
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                 logging_level=logging.WARNING, log_to_driver=False, object_store_memory=OBJECT_STORE_BYTES)
    try:
        yield
    finally:
        ray.shutdown()


def run_sweep(spec: SweepSpec, out: str | Path, address: str | None = None, resume: bool = False,
              num_cpus: int | None = None, progress_every: float = 10.0,
              beside_start: Callable[[], Callable[[], None]] | None = None,
              deadline: float | None = None) -> dict[str, Any]:
    """Runs every trial of `spec` that DIR has no finished row for (with a `deadline`, unix s: those that end by
    then, sweeps.time_limit); returns this run's line of DIR/runs.jsonl (run, trials launched, wall seconds,
    trials the deadline kept from starting, …). Bad input raises ValueError before Ray starts. `beside_start`,
    called once the input is checked, DIR is locked and a trial is to run (not where the deadline starts none),
    starts work to run beside Ray's start and the compile warm-up (the CLI's kernel check) and returns its wait,
    which runs once: before the first trial launches, or at the end."""
    if deadline is not None and spec.search == "optuna":
        raise ValueError("a time limit needs search: grid or refine (Optuna picks its trials as they finish)")
    check_memory(spec, local=address is None)
    out = writable_dir(str(out))
    with store.driver_lock(out):
        prepare_dir(spec, out, resume)
        warn_if_other_data(spec, out)
        warn_if_other_code(out)
        waits: list[Callable[[], None]] = []

        def start_beside() -> None:
            if beside_start is not None and not waits:
                waits.append(once(beside_start()))

        def wait() -> None:
            if waits:
                waits[0]()
        try:
            return run_missing(spec, out, address, num_cpus, progress_every, wait, deadline, start_beside)
        finally:
            wait()


def warn_if_other_data(spec: SweepSpec, out: Path) -> None:
    """One line when DIR's finished trials recorded data (the record's `data`) other than what this run's task
    reads: the sweep would mix them. A pinned corpus (tokens_sha256) refuses other data outright instead."""
    recorded = {r.config["data"] for r in store.read_trials(out) if r.finished and r.config.get("data")}
    if not recorded:
        return
    try:
        current = data_fingerprint(get_task(spec.task))
    except (ValueError, OSError):  # data this machine cannot open: the trials will say so
        return
    if current is not None and recorded - {current}:
        print(f"warning: {out}'s finished trials trained on data {', '.join(sorted(recorded))}; this run's task reads "
              f"{current}: the sweep would mix them (pin the corpus with tokens_sha256 to refuse other data)")


def warn_if_other_code(out: Path) -> None:
    """One line when DIR's finished trials recorded code (the record's `code`, scaling.code.code_fingerprint) other
    than this process's: the sweep would mix trials that different kernels, models or training loops trained."""
    recorded = {r.config["code"] for r in store.read_trials(out) if r.finished and r.config.get("code")}
    current = code_fingerprint()
    if recorded - {current}:
        print(f"warning: {out}'s finished trials were trained by code {', '.join(sorted(recorded))}; this run's is "
              f"{current}: the sweep would mix them (`deltamup report` counts the trials of each)")


def once(fn: Callable[[], None]) -> Callable[[], None]:
    """`fn`, run by the first call only (a later call does nothing, also where the first raised)."""
    called: list[bool] = []

    def first() -> None:
        if not called:
            called.append(True)
            fn()
    return first


def run_missing(spec: SweepSpec, out: Path, address: str | None, num_cpus: int | None,
                progress_every: float, before_trials: Callable[[], None],
                deadline: float | None = None, start_beside: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """The trials DIR has no finished row for, on Ray (the caller holds DIR's driver lock); with a deadline, no Ray
    at all where none of them would end by it. `start_beside` runs just before Ray starts (where it does)."""
    configure_ray_env(local=address is None)
    from .gpu_monitor import GpuMonitor
    from .progress import print_summary  # imports Ray: after configure_ray_env

    todo = missing_grid(spec, out)  # damaged rows: quarantined, missing
    run = len(store.read_runs(out)) + 1
    started = time.time()
    store.append_run(out, {"run": run, "started_at": started, "address": address})
    launched = not_started = 0
    if deadline is not None and todo and not missing_refine(spec, out) and not any_in_time(spec, out, todo, run,
                                                                                           deadline):
        print(f"time limit: none of the {len(todo)} trial(s) left ends in the {max(0, deadline - started):.0f} s "
              f"left by the finished trials of its width; nothing started")
        not_started, todo = len(todo), []
    if spec.tracking.mlflow is not None:
        from .tracking import mlflow_experiment  # imports mlflow, an optional package

        mlflow_experiment(spec.tracking.mlflow, out, spec.name)
    if todo or spec.search == "optuna" or missing_refine(spec, out):
        start_beside()
        with ray_session(address, num_cpus), GpuMonitor(out / "gpu.csv"):
            store.append_run(out, {"run": run} | ray_identity())
            release_leaked_groups([r for r in store.read_runs(out) if r["run"] != run])
            launched, not_started = run_grid(spec, out, todo, run, progress_every, before_trials, deadline=deadline)
            if spec.search == "refine":  # its points come from the grid's results
                more, kept = run_grid(spec, out, missing_refine(spec, out), run, progress_every, before_trials,
                                      phase="refine", deadline=deadline)
                launched, not_started = launched + more, not_started + kept
            if spec.search == "optuna":
                from .search import run_optuna  # imports Ray: after configure_ray_env

                before_trials()
                launched += run_optuna(spec, out, run, progress_every)
    line = {"run": run, "started_at": started, "finished_at": time.time(), "wall_seconds": time.time() - started,
            "launched": launched, "address": address} | ({"not_started": not_started} if deadline is not None else {})
    store.append_run(out, line)
    store.consolidate(out)
    print_summary(out)
    left = missing_grid(spec, out)
    if left:
        late = f", {not_started} of them kept from starting by the time limit" if not_started else ""
        print(f"{len(left)} grid trial(s) have no finished result (interrupted or errors{late}): "
              f"deltamup sweep {out} --resume runs them")
    if spec.search == "refine":
        print_refine_state(spec, out)
    return line


def widths_to_run(spec: SweepSpec, out: Path) -> list[int]:
    """The widths of the trials DIR still lacks (the grid's and the refinement's it asks for so far; every width with
    Optuna, which picks its trials as it goes). Empty: a run would launch nothing."""
    if spec.search == "optuna":
        return sorted(spec.widths)
    if not out.is_dir():
        return sorted({p.width for p in spec.grid()})
    return sorted({p.width for p in missing_grid(spec, out) + missing_refine(spec, out)})


def missing_grid(spec: SweepSpec, out: Path) -> list[TrialPoint]:
    """The grid's points without a finished row in DIR."""
    done = store.finished_ids(out)
    return [p for p in spec.grid() if p.key not in done]


def missing_refine(spec: SweepSpec, out: Path) -> list[TrialPoint]:
    """With `search: refine`, the refine trials the finished grid asks for that have no finished row."""
    if spec.search != "refine":
        return []
    done = store.finished_ids(out)
    return [p for p in refine_points(spec, store.read_records(out)) if trial_key(p, "refine") not in done]


def print_refine_state(spec: SweepSpec, out: Path) -> None:
    """Says which groups the refinement could not start (grid unfinished, or every grid LR diverged) and what is
    left of it."""
    centres = grid_centres(spec, store.read_records(out))
    waiting = sorted({(p.parametrization, p.optimizer, p.width) for p in spec.grid()} - set(centres))
    if waiting:
        print(f"refine: {len(waiting)} group(s) without a grid optimum (grid unfinished or all diverged), not "
              f"refined: {', '.join(f'{p} {o} w{w}' for p, o, w in waiting)}")
    left = missing_refine(spec, out)
    if left:
        print(f"{len(left)} refine trial(s) have no finished result: deltamup sweep {out} --resume runs them")


def any_in_time(spec: SweepSpec, out: Path, points: list[TrialPoint], run: int, deadline: float) -> bool:
    """Whether a trial of `points` would start now under `deadline` (one per width: they time alike)."""
    records, one_a_width = store.read_trials(out), {p.width: p for p in points}
    return any(starts_in_time(trial_config(spec, p, out, run), deadline, records) for p in one_a_width.values())


def run_grid(spec: SweepSpec, out: Path, points: list[TrialPoint], run: int, progress_every: float,
             before_trials: Callable[[], None], phase: str = "grid",
             deadline: float | None = None) -> tuple[int, int]:
    """Runs `points` as one Tuner over a grid of trial configs (of `phase`), with compile on after a compile
    warm-up (sweeps.warmup, its result in runs.jsonl as warmup_<phase>); returns (launched, kept from starting by
    `deadline`)."""
    from ray import tune  # Ray is imported once configure_ray_env has set its environment

    if not points:
        return 0, 0
    configs = sorted((trial_config(spec, p, out, run, phase) for p in points), key=trial_cost(spec), reverse=True)
    if any(c["train"]["compile"] for c in configs):  # each distinct graph compiled once, before the trials start
        store.append_run(out, {"run": run, f"warmup_{phase}": warm_graphs(spec, configs)})
    before_trials()
    tuner = tune.Tuner(trainable(spec), param_space={"trial": tune.grid_search(configs), "deadline": deadline},
                       tune_config=tune_config(spec), run_config=run_config(spec, out, f"run{run}-{phase}",
                                                                           [c["point"]["width"] for c in configs],
                                                                           progress_every))
    results = tuner.fit()
    record_ray_errors(out, results)
    return len(configs), sum((r.metrics or {}).get("status") == NOT_STARTED for r in results)
