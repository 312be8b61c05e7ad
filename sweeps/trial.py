"""One trial: build the model from the spec, train it with scaling.train.train on the device Ray assigned,
evaluate, write its row and curve into the sweep directory (before returning), and report to Ray Tune.

At each horizon (eval.horizons: fractions of the steps) the training loop stops for the validation loss on the
same batches as the final one (eval.batches forward passes, outside train_seconds): it becomes the record's
val_loss_hNN, a TensorBoard scalar, and, before the last horizon, an intermediate Ray Tune result
{"step", "horizon", "val_loss", "train_loss"} that a searcher can prune on (sweeps.search).

A non-finite loss ends the trial at once as diverged (losses inf, diverged_step set). An exception is stored with
its full traceback next to the record (results/<trial_id>.attempt<N>.traceback.txt) and raised to Ray, which
reruns the trial in a fresh worker `failure.retries` times (FailureConfig) before the driver records it as status
"error" (sweeps/tuner.py).
A trial of more than one worker (resources.workers_per_trial) trains data-parallel instead: sweeps.parallel.

Every checkpoint.every_s seconds (at a log boundary) the trial saves its state to DIR/partial/<trial_id>.pt
(scaling.checkpoint); a rerun of the trial (Ray's retry, a resumed sweep) continues from there if the checkpoint is
of the same trial config (its fingerprint: everything but run, out and checkpoint), and records resumed_from_step.
The checkpoint is removed once the trial's row is written (the driver's, for a pruned trial); an errored trial keeps
it, and so does one an interrupted sweep stopped (SIGINT, a time limit's signal), whose resume continues from it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import socket
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from deltamup import kernels
from deltamup.models import DeltaLM, ModelConfig
from deltamup.parametrizations import BaseHparams, build_model
from deltamup.parametrizations.hparams import label
from deltamup.scaling.checkpoint import Checkpointing, discard, fingerprint
from deltamup.scaling.code import code_fingerprint, installed_versions
from deltamup.scaling.compile_cache import use_cache
from deltamup.scaling.data import Batch, Task, data_fingerprint, get_task
from deltamup.scaling.data_parallel import Ranks
from deltamup.scaling.train import TrainConfig, TrainResult, lm_loss, train

from . import store
from .record import SCHEMA
from .spec import SweepSpec, TrialPoint
from .tracking import Tracker

REPORT_EVERY_S = 30.0  # intermediate tune.report at most this often: each one is a round trip to the driver


def trial_key(point: TrialPoint, phase: str) -> str:
    """A grid trial's id is its point's key; other phases prefix theirs ("refine.gdn-mup.adamw.w64.lr0.004.s1"), so
    no phase's id can collide with a grid id."""
    return point.key if phase == "grid" else f"{phase}.{point.key}"


def trial_config(spec: SweepSpec, point: TrialPoint, out: Path, run: int, phase: str = "grid") -> dict[str, Any]:
    """Everything a trial needs, as plain data (what Ray Tune hands run_trial under "trial")."""
    return {"trial_id": trial_key(point, phase), "phase": phase, "out": str(Path(out).resolve()), "run": run,
            "point": {**dataclasses.asdict(point), "hparams": dict(point.hparams)},
            "model": spec.model_config(point.width).to_dict(),
            "task": spec.task, "train": spec.train_config(point).to_dict(), "batch_size": spec.batch_size,
            "seq_len": spec.seq_len, "eval": dataclasses.asdict(spec.eval),
            "horizon_steps": spec.eval.horizon_steps(spec.steps), "sweep": spec.name,
            "tracking": dataclasses.asdict(spec.tracking), "workers": spec.resources.workers(point.width),
            "sharding": spec.resources.sharding_of(point.width), "checkpoint": dataclasses.asdict(spec.checkpoint)}


def run_trial(config: dict[str, Any]) -> None:
    """Ray Tune function trainable; config = {"trial": trial_config(...)}."""
    from ray import tune

    cfg = config["trial"]
    out = sweep_dir(cfg)
    use_cache(store.compile_cache_dir(out))
    threads, device, gpu_ids = placement()
    torch.set_num_threads(threads)
    started = last_report = time.time()
    tracker = Tracker(cfg)

    def report(metrics: dict[str, Any], now: bool = False) -> None:
        """An intermediate result for Ray Tune: horizons at once (now=True), progress at most every 30 s."""
        nonlocal last_report
        if now or time.time() - last_report >= REPORT_EVERY_S:
            tune.report(metrics)
            last_report = time.time()

    if device.type == "cuda":  # this trial's peak, not an earlier trial's in a reused worker
        torch.cuda.reset_peak_memory_stats(device)
    try:
        outcome = train_and_evaluate(cfg, device, report, tracker)
    except SystemExit:  # Ray Tune stopped the trial at a report: a pruner (the driver writes its row and drops the
        tracker.close({"status": "stopped"})  # checkpoint) or an interrupted sweep (its resume continues from it)
        raise
    except Exception:
        keep_traceback(out, cfg["trial_id"])
        tracker.close({"status": "error"})
        raise  # to Ray: FailureConfig(max_failures=retries) reruns it in a fresh worker; tuner records the last failure
    finally:
        peak = None
        if device.type == "cuda":  # the trial's peak, then its cached blocks handed back: trials sharing the GPU
            peak = torch.cuda.max_memory_reserved(device) / 2**30  # live in other processes
            torch.cuda.empty_cache()
    record, curve = trial_record(cfg, outcome, {**device_columns(device), "threads": threads, "gpu_ids": gpu_ids,
                                                "gpu_share": gpu_share(), "node_id": node_id(), "started_at": started,
                                                "finished_at": time.time(), "peak_memory_gib": peak})
    store.write_trial(out, record, curve)
    discard(store.partial_path(out, cfg["trial_id"]))
    tracker.close(record)
    tune.report(final_report(record))


def sweep_dir(cfg: dict[str, Any]) -> Path:
    """The sweep directory, checked to be visible on the node this runs on."""
    out = Path(cfg["out"])
    if not (out / "spec.yaml").exists():
        raise RuntimeError(f"sweep directory {out} is not visible on {socket.gethostname()}: "
                           "on a multi-node cluster put it on a filesystem every node mounts")
    return out


def keep_traceback(out: Path, trial_id: str) -> None:
    """Stores the exception being handled as the trial's next results/<trial_id>.attempt<N>.traceback.txt."""
    store.write_traceback(out, trial_id, f"pid {os.getpid()} on {socket.gethostname()} (node {node_id()}), "
                                         f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n\n{traceback.format_exc()}")


def device_columns(device: torch.device) -> dict[str, str | None]:
    """The record's `device` (torch's name: "cuda:0", "cpu") and `gpu_name` (the GPU's model, "NVIDIA H100 80GB
    HBM3"; None on a CPU): bf16 results can differ between GPU kinds, so a re-run names the kind it ran on."""
    gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {"device": str(device), "gpu_name": gpu_name}


def trial_record(cfg: dict[str, Any], outcome: tuple,
                 ran: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list]]:
    """(row, curve) of a trial that ran to an end: its config, its results (outcome: train_and_evaluate's), where
    and when it ran and what it held (`ran`: device, gpu_name, threads, gpu_ids, node_id, started_at, finished_at,
    peak_memory_gib) and the earlier attempts that failed (their traceback files)."""
    result, val_losses, params, metrics = outcome
    tracebacks = [p.name for p in store.traceback_paths(Path(cfg["out"]), cfg["trial_id"])]
    record = base_record(cfg) | metrics | result_columns(cfg, result, val_losses, params)
    record |= {"attempts": len(tracebacks) + 1, "tracebacks": tracebacks} | ran
    record["wall_seconds"] = record["finished_at"] - record["started_at"]
    return record, curve_columns(cfg, result)


def final_report(record: dict[str, Any]) -> dict[str, Any]:
    """What a finished trial reports to Ray Tune."""
    return {"status": record["status"], "diverged": record["diverged"], "step": record.get("steps", 0),
            "train_loss": record.get("final_train_loss", math.inf), "val_loss": record.get("val_loss", math.inf),
            "smoothed_loss": record.get("smoothed_loss", math.inf)}


def build_trial(cfg: dict[str, Any], device: torch.device) -> tuple[DeltaLM, Task, TrainConfig, Iterator[Batch]]:
    """(model on `device`, task, training config, training batches) of a trial config: what a trial trains and
    what its compiled graph is traced from (sweeps.warmup)."""
    point = cfg["point"]
    model = build_model(ModelConfig(**cfg["model"]), point["parametrization"], point["optimizer"],
                        seed=point["seed"], hparams=BaseHparams.of(point.get("hparams", {}))).to(device)
    task = get_task(cfg["task"])
    train_config = TrainConfig(**{**cfg["train"], "betas": tuple(cfg["train"]["betas"])})
    return model, task, train_config, task.train_batches(cfg["batch_size"], cfg["seq_len"], point["seed"])


def train_and_evaluate(cfg: dict[str, Any], device: torch.device, report: Any, tracker: Tracker | None,
                       ranks: Ranks | None = None) -> tuple[TrainResult, dict[str, float], int, dict[str, Any]]:
    """(training result, {val_loss_hNN: validation loss at that horizon, for the horizons reached}, parameter
    count, the record's task columns: `data` (its fingerprint), `code` (scaling.code.code_fingerprint) and
    `versions` (the torch and Triton versions in it),
    `val_batch_losses` (the final validation loss on each of its batches, in order) and the task's own metrics,
    the last two not when diverged).
    tracker None logs nothing; ranks: train data-parallel as one of several ranks (every rank evaluates the same
    weights on the same batches)."""
    point = cfg["point"]
    model, task, train_config, batches = build_trial(cfg, device)
    params = sum(p.numel() for p in model.parameters())
    eval_size = cfg["eval"]["batch_size"] or cfg["batch_size"]
    val = task.val_batches(eval_size, cfg["seq_len"], cfg["eval"]["batches"], seed=0)  # the same for every trial
    horizons, val_losses = cfg["horizon_steps"], {}
    last_batches: list[float] = []  # the final evaluation's loss on each validation batch

    def on_log(step: int, rows: list[tuple[int, float, float]]) -> None:
        if tracker is not None:
            tracker.train_rows(rows)
        report({"step": step + 1, "train_loss": finite_or_inf(rows[-1][1])})

    def on_eval(step: int, result: TrainResult) -> None:
        per_batch = validation_losses(model, val, train_config.bf16, device)
        loss = finite_or_inf(sum(per_batch) / len(per_batch))
        if step == train_config.steps:
            last_batches[:] = per_batch
        reached = [column for column, at in horizons.items() if at == step]
        val_losses.update(dict.fromkeys(reached, loss))
        if tracker is not None:
            tracker.grad_norms(result.grad_norms)
            tracker.horizon(step, loss)
        if step < train_config.steps:
            report({"step": step, "horizon": reached[-1], "val_loss": loss,
                    "train_loss": finite_or_inf(result.final_loss)}, now=True)

    result = train(model, point["parametrization"], train_config, batches, device=device, on_log=on_log,
                   eval_steps=set(horizons.values()), on_eval=on_eval, ranks=ranks,
                   checkpointing=trial_checkpointing(cfg, val_losses))
    if tracker is not None:
        tracker.grad_norms(result.grad_norms)
    fingerprints = {"data": data_fingerprint(task), "code": code_fingerprint(), "versions": installed_versions()}
    if result.diverged:
        return result, val_losses, params, fingerprints
    if last_batches and all(math.isfinite(x) for x in last_batches):
        fingerprints["val_batch_losses"] = last_batches
    metrics = task.evaluate(model, device, seed=0) if hasattr(task, "evaluate") else {}
    return result, val_losses, params, fingerprints | metrics


def trial_checkpointing(cfg: dict[str, Any], val_losses: dict[str, float]) -> Checkpointing | None:
    """The trial's checkpoints (None when checkpoint.every_s is 0): DIR/partial/<trial_id>.pt, fingerprinted by
    the trial config less run, out and checkpoint (which a resumed sweep may change), holding `val_losses`."""
    every_s = cfg["checkpoint"]["every_s"]
    if not every_s:
        return None
    config = {k: v for k, v in cfg.items() if k not in ("run", "out", "checkpoint")}
    return Checkpointing(store.partial_path(Path(cfg["out"]), cfg["trial_id"]), every_s, fingerprint(config),
                         val_losses)


@torch.no_grad()
def validation_losses(model: torch.nn.Module, batches: list, bf16: bool, device: torch.device) -> list[float]:
    """Mean next-token loss (nats) on each validation batch; their mean is the validation loss."""
    model.eval()
    losses = [lm_loss(model, (x.to(device), y.to(device)), bf16) for x, y in batches]
    model.train()
    return torch.stack(losses).tolist()


def smoothed_loss(losses: list[float], last: float, span: int) -> float:
    """EWM (alpha = 2 / (span + 1)) of the loss over the last `last` fraction of the steps, at the final step."""
    tail = losses[-max(1, round(len(losses) * last)):]
    alpha, value = 2 / (span + 1), tail[0]
    for loss in tail[1:]:
        value = alpha * loss + (1 - alpha) * value
    return value


def finite_or_inf(value: float) -> float:
    """Losses handed to Ray and searchers: NaN and ±inf become +inf (never a NaN)."""
    return value if math.isfinite(value) else math.inf


def base_record(cfg: dict[str, Any]) -> dict[str, Any]:
    """The trial's config keys as flat columns of its record (sweeps/record.py: schema, trial id, grid point, model
    fields, training settings); the point's hparams as one label column ("output_mult=2,init_mult=0.5"; "" without
    hparams axes)."""
    train_cfg = {k: v for k, v in cfg["train"].items() if k not in ("lr", "optimizer", "seed", "steps", "betas")}
    task = cfg["task"] if isinstance(cfg["task"], str) else json.dumps(cfg["task"], sort_keys=True)
    point = {**cfg["point"], "hparams": label(cfg["point"].get("hparams", {}))}
    return ({"schema": SCHEMA, "trial_id": cfg["trial_id"], "phase": cfg["phase"], "run": cfg["run"]} | point
            | cfg["model"]
            | {"task": task, "max_steps": cfg["train"]["steps"], "batch_size": cfg["batch_size"],
               "seq_len": cfg["seq_len"], "beta1": cfg["train"]["betas"][0], "beta2": cfg["train"]["betas"][1],
               "workers": cfg["workers"], "sharding": cfg["sharding"]}
            | train_cfg)


def result_columns(cfg: dict[str, Any], result: TrainResult, val_losses: dict[str, float],
                   params: int) -> dict[str, Any]:
    """The trial's outcome columns; val_losses: {val_loss_hNN: loss} for the horizons reached (the others, after a
    divergence, are inf, as is val_loss, the last horizon's, when diverged)."""
    losses = [loss for _, loss, _ in result.losses]
    smooth = cfg["eval"]
    horizons = {column: val_losses.get(column, math.inf) for column in cfg["horizon_steps"]}
    return {"status": "diverged" if result.diverged else "ok", "error": None, "diverged": result.diverged,
            "diverged_step": result.diverged_step,
            "final_train_loss": math.inf if result.diverged else finite_or_inf(losses[-1]),
            "val_loss": math.inf if result.diverged else list(horizons.values())[-1], **horizons,
            "smoothed_loss": math.inf if result.diverged else
            finite_or_inf(smoothed_loss(losses, smooth["smooth_last"], smooth["smooth_span"])),
            "clipped_fraction": result.clipped_fraction, "resumed_from_step": result.resumed_from_step,
            "steps": result.steps, "tokens": result.tokens, "train_seconds": result.seconds,
            "eval_seconds": result.eval_seconds,
            "tokens_per_s": result.tokens / result.seconds if result.seconds > 0 else None, "params": params,
            "first_step_seconds": result.first_step_seconds,
            "compile_cache_hits": result.compile_cache.get("fx_hit"),
            "compile_cache_misses": result.compile_cache.get("fx_miss"), "kernel_configs": kernels.launch_configs()}


def curve_columns(cfg: dict[str, Any], result: TrainResult) -> dict[str, list]:
    """One row per step: tokens seen after it, its train loss (NaN/inf as recorded), the LR it used, the gradient
    norm before clipping (NaN without clipping)."""
    tokens_per_step = cfg["batch_size"] * cfg["seq_len"]
    lr = cfg["point"]["lr"]
    return {"trial_id": [cfg["trial_id"]] * len(result.losses),
            "step": [s for s, _, _ in result.losses],
            "tokens": [(s + 1) * tokens_per_step for s, _, _ in result.losses],
            "train_loss": [loss for _, loss, _ in result.losses],
            "lr": [lr * factor for _, _, factor in result.losses],
            "grad_norm": result.grad_norms}


def placement() -> tuple[int, torch.device, list[str]]:
    """(torch threads = the trial's CPUs, device: cuda when Ray assigned a GPU else cpu, GPU ids)."""
    import ray

    context = ray.get_runtime_context()
    cpus = context.get_assigned_resources().get("CPU", 1.0)
    gpu_ids = context.get_accelerator_ids().get("GPU", [])
    device = torch.device("cuda" if gpu_ids and torch.cuda.is_available() else "cpu")
    return max(1, int(cpus)), device, list(gpu_ids)


def node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def gpu_share() -> float | None:
    """The share of a GPU Ray gave this process (0.5 where two trials share one), None where it gave none."""
    import ray

    return ray.get_runtime_context().get_assigned_resources().get("GPU") or None
