"""How a sweep's trials are handed to Ray Tune: their resources (GPU packing), the Tune and run configs (one retry
mechanism: FailureConfig(max_failures=failure.retries), each retry in a fresh worker; sweeps/tracebacks.py keeps every
failed attempt's traceback), and an error record for each trial Ray gave up on. Ray is imported inside each
function: the caller sets Ray's environment first (runner.configure_ray_env), and Ray reads it at import."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from . import store
from .packing import gpu_memory_bytes, parameter_count, trial_gpus
from .parallel import driver_resources, run_data_parallel
from .spec import SweepSpec
from .time_limit import NOT_STARTED, starts_in_time
from .trial import base_record, gpu_share, run_trial, sweep_dir


def trial_cost(spec: SweepSpec) -> Any:
    """Sort key: parameters × micro-steps, so the longest trials start first (tighter packing)."""
    sizes = {w: parameter_count(spec.model_config(w)) for w in spec.widths}
    return lambda config: sizes[config["point"]["width"]] * config["model"]["householder"]


Resources = dict[tuple[int, str], dict[str, float]]  # per (width, optimizer): {"CPU": c, "GPU": g}


def trial_resources(spec: SweepSpec) -> tuple[Resources, Resources]:
    """(each data-parallel worker's resources, each trial's Tune bundle) per (width, optimizer): a one-device trial
    gets spec.resources.cpu CPUs and the GPU share packing chooses; a data-parallel one's workers `cpu` CPUs and a
    whole GPU each where its width would get any GPU share, its driver a share of the head node (driver_resources).
    Needs Ray initialised; ValueError when a data-parallel width needs more than the cluster has."""
    import ray

    cluster = ray.cluster_resources()
    memory = gpu_memory_bytes(spec.resources)
    gpus = {(w, o): trial_gpus(spec, w, o, cluster.get("GPU", 0.0), memory) for w in spec.widths
            for o in spec.optimizers}
    workers = {key: {"CPU": spec.resources.cpu, "GPU": 1.0 if share > 0 else 0.0} for key, share in gpus.items()}
    bundles = {(w, o): driver_resources(spec.resources.workers(w), workers[(w, o)], cluster)
               if spec.resources.workers(w) > 1 else {"CPU": spec.resources.cpu, "GPU": share}
               for (w, o), share in gpus.items()}
    return workers, bundles


def trainable(spec: SweepSpec) -> Any:
    """The Tune function of every trial, with its resources (trial_resources): run_trial for a one-device trial,
    run_data_parallel, which drives its TorchTrainer's workers, for a data-parallel one. Under a time limit (the
    config's "deadline", unix s) a trial that would not end in time reports NOT_STARTED instead (sweeps.time_limit)."""
    from ray import tune
    from ray.tune.execution.placement_groups import PlacementGroupFactory

    workers, bundles = trial_resources(spec)

    def key(config: dict) -> tuple[int, str]:
        return config["trial"]["point"]["width"], config["trial"]["point"]["optimizer"]

    def resources(config: dict) -> PlacementGroupFactory:
        return PlacementGroupFactory([{k: v for k, v in bundles[key(config)].items() if v}])

    def trial(config: dict) -> None:
        deadline = config.get("deadline")
        if deadline is not None:
            records = store.read_trials(sweep_dir(config["trial"]))
            if not starts_in_time(config["trial"], deadline, records, share=gpu_share()):
                tune.report({"status": NOT_STARTED})
                return
        if config["trial"]["workers"] > 1:
            run_data_parallel(config, workers[key(config)])
        else:
            run_trial(config)

    return tune.with_resources(trial, resources)


def tune_config(spec: SweepSpec, **kwargs: Any) -> Any:
    from ray import tune

    def name(trial: Any) -> str:
        return trial.config["trial"]["trial_id"]

    return tune.TuneConfig(max_concurrent_trials=spec.max_concurrent, trial_name_creator=name,
                           trial_dirname_creator=name, reuse_actors=True, **kwargs)


def run_config(spec: SweepSpec, out: Path, name: str, widths: list[int], progress_every: float,
               stop: Any = None) -> Any:
    """widths: one entry per trial to run (the progress view's totals); stop: a Ray Tune stopper (trial id,
    result) → bool, e.g. a pruner (sweeps.search)."""
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback

    from .progress import Progress
    from .tracebacks import Tracebacks

    earlier = Counter(r["width"] for r in store.read_records(out) if r["status"] in store.FINISHED)
    return tune.RunConfig(storage_path=str((out / "ray").resolve()), name=name, verbose=0, stop=stop,
                          failure_config=tune.FailureConfig(max_failures=spec.failure.retries),
                          callbacks=[Progress(widths, progress_every, earlier), Tracebacks(out), JsonLoggerCallback()])


def record_ray_errors(out: Path, results: Any) -> None:
    """Trials Ray gave up on (every attempt raised, or its worker died) get an error row naming their tracebacks;
    its error is the last line of the last one."""
    for result in results:
        cfg = result.config["trial"] if result.config else None
        if result.error is None or cfg is None or store.read_record(store.record_path(out, cfg["trial_id"])):
            continue
        paths = store.traceback_paths(out, cfg["trial_id"])
        lines = (paths[-1].read_text() if paths else str(result.error)).strip().splitlines()
        record = base_record(cfg) | {"status": "error", "diverged": False, "error": lines[-1] if lines else "error",
                                     "attempts": len(paths), "tracebacks": [p.name for p in paths]}
        store.write_trial(out, record, {c: [] for c in store.CURVE_COLUMNS})
