"""Data-parallel trials: a width with resources.workers_per_trial = N > 1 trains each of its trials over N workers
with Ray Train's TorchTrainer (DDP or FSDP as resources.sharding says; nccl on GPUs, gloo on CPUs), launched from
inside the trial's Ray Tune function, which only drives it (Ray Train's pattern for Tune over distributed runs).
Train reserves the workers in a placement group of its own (N bundles of `cpu` CPUs and a whole GPU or none); the
Tune trial holds driver_resources: a share of the head node's resource, so it runs there (as Ray recommends for
Train drivers), holds no CPU a worker could need, and no more drivers wait at once than the cluster can run.

Every rank runs the one-device trial's training and evaluation (sweeps.trial.train_and_evaluate) as one of N ranks
(scaling.data_parallel: the spec's batch_size is the global batch, results do not depend on N); rank 0 writes the
trial's row and curve and keeps its TensorBoard/MLflow logs. Checkpoints (checkpoint.every_s): rank 0 saves them, and
every rank of a rerun continues from the same one (the sweep directory is on a filesystem every node mounts). A trial
whose workers fail keeps the first failing rank's traceback and raises to Ray Tune, which reruns it
`failure.retries` times and then records it as an error, as it does a one-device trial (sweeps.tuner). A
data-parallel trial reports to Ray Tune once, at its end: no intermediate results, so a searcher does not prune it.
"""
from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.distributed as dist

from deltamup.scaling.checkpoint import discard
from deltamup.scaling.compile_cache import use_cache
from deltamup.scaling.data_parallel import Ranks

from . import store
from .tracking import Tracker
from .trial import (
    device_columns,
    final_report,
    gpu_share,
    keep_traceback,
    node_id,
    placement,
    sweep_dir,
    train_and_evaluate,
    trial_record,
)

HEAD = "node:__internal_head__"  # Ray's head-node resource: 1.0 on the head node, none elsewhere
DRIVER_SHARE = 0.9  # of HEAD for data-parallel drivers: Ray Train's own helper actors take 0.001 of it each


def driver_resources(workers: int, worker: dict[str, float], cluster: dict[str, float]) -> dict[str, float]:
    """The Tune resources of a data-parallel trial's driver: DRIVER_SHARE × the share of the cluster's GPUs
    (CPUs for CPU workers) its `workers` workers of `worker` resources take, of HEAD. ValueError when they need
    more than the cluster has."""
    kind = "GPU" if worker.get("GPU") else "CPU"
    need = workers * worker[kind] / cluster.get(kind, 0.0) if cluster.get(kind) else math.inf
    if need > 1:
        raise ValueError(f"a trial of {workers} workers needs {workers * worker[kind]:g} {kind}s, the Ray cluster "
                         f"has {cluster.get(kind, 0.0):g}: lower resources.workers_per_trial or resources.cpu")
    return {HEAD: round(DRIVER_SHARE * need, 4)}


def train_worker(loop_config: dict[str, Any]) -> None:
    """One rank of a data-parallel trial (Ray Train's train_loop_per_worker); loop_config = {"trial": trial
    config}."""
    import ray.train
    import ray.train.torch

    cfg = loop_config["trial"]
    context = ray.train.get_context()
    ranks = Ranks(context.get_world_rank(), context.get_world_size(), cfg["sharding"])
    out = sweep_dir(cfg)
    use_cache(store.compile_cache_dir(out))
    threads, _, gpu_ids = placement()
    torch.set_num_threads(threads)
    device = ray.train.torch.get_device()
    if device.type == "cuda":
        torch.cuda.set_device(device)  # nccl collectives (all_gather_object below) run on the current device
    started = time.time()
    tracker = Tracker(cfg) if ranks.rank == 0 else None
    try:
        outcome = train_and_evaluate(cfg, device, lambda metrics, now=False: None, tracker, ranks)
    except Exception:
        if tracker is not None:
            tracker.close()
        raise
    places: list[Any] = [None] * ranks.world
    dist.all_gather_object(places, (node_id(), gpu_ids))
    if ranks.rank == 0:
        record, curve = trial_record(cfg, outcome, {
            **device_columns(device), "threads": threads, "gpu_ids": [g for _, ids in places for g in ids],
            "gpu_share": gpu_share(), "node_id": node_id(), "started_at": started, "finished_at": time.time()})
        record["worker_nodes"] = [node for node, _ in places]
        store.write_trial(out, record, curve)
        discard(store.partial_path(out, cfg["trial_id"]))
        tracker.close(record)


def fit(cfg: dict[str, Any], attempt: int, worker: dict[str, float]) -> None:
    """Runs the trial once on cfg["workers"] Ray Train workers of `worker` resources ({"CPU": c, "GPU": 0 or 1});
    raises the first failed rank's error."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    trainer = TorchTrainer(
        train_worker, train_loop_config={"trial": cfg},
        scaling_config=ScalingConfig(num_workers=cfg["workers"], use_gpu=worker.get("GPU", 0) > 0,
                                     resources_per_worker={k: v for k, v in worker.items() if v}),
        run_config=RunConfig(name=f"{cfg['trial_id']}.attempt{attempt}",
                             storage_path=str(sweep_dir(cfg) / "ray" / "train"),
                             failure_config=FailureConfig(max_failures=0)))  # retries: Ray Tune's, as any trial
    try:
        trainer.fit()
    except Exception as e:
        failures = getattr(e, "worker_failures", None)  # ray.train.WorkerGroupError: {rank: the rank's error}
        if failures:
            raise failures[min(failures)] from None
        raise


def run_data_parallel(config: dict[str, Any], worker: dict[str, float]) -> None:
    """Ray Tune function trainable of a data-parallel trial (config = {"trial": trial_config(...)}): fits it once and
    reports to Tune what rank 0 recorded; a failure keeps its traceback and raises (Ray Tune retries the trial)."""
    from ray import tune

    cfg = config["trial"]
    out = sweep_dir(cfg)
    path = store.record_path(out, cfg["trial_id"])
    try:
        fit(cfg, len(store.traceback_paths(out, cfg["trial_id"])) + 1, worker)
    except Exception:
        if (store.read_record(path) or {}).get("status") not in store.FINISHED:  # a row rank 0 wrote is kept
            keep_traceback(out, cfg["trial_id"])
            raise
    tune.report(final_report(store.read_record(path)))


def ray_identity() -> dict[str, str]:
    """The cluster (its head node's id) and Ray job this driver runs as, for release_leaked_groups."""
    import ray

    head = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(HEAD))
    return {"ray_head": head, "ray_job": ray.get_runtime_context().get_job_id()}


def release_leaked_groups(runs: list[dict[str, Any]]) -> int:
    """Removes the placement groups that earlier drivers of this sweep (`runs`: store.read_runs, with their
    ray_identity) left on this cluster; returns how many. A driver killed at the moment one of its TorchTrainers
    reserves its workers can leave that group behind on a persistent cluster (Ray 2.60 registers it after the job's
    death and no one removes it): it would hold the workers' CPUs and GPUs from the resumed sweep for good. The
    sweep's driver lock guarantees that those drivers are gone; a group id ends with its job's id."""
    import ray
    from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group

    me = ray_identity()
    jobs = {r["ray_job"] for r in runs if r.get("ray_head") == me["ray_head"] and r.get("ray_job")} - {me["ray_job"]}
    leaked = [g for g, info in placement_group_table().items() if info["state"] != "REMOVED" and g[-8:] in jobs]
    for group in leaked:
        remove_placement_group(PlacementGroup(ray.PlacementGroupID.from_hex(group)))
    return len(leaked)
