"""One trial: build the model from the spec, train it with scaling.train.train on the device Ray assigned,
evaluate, write its row and curve into the sweep directory (before returning), and report to Ray Tune.

A non-finite loss ends the trial at once as diverged (losses inf, diverged_step set). An exception is retried
`retries` times in place, then recorded as status "error" with its text: the trial itself never fails for Ray.
"""
from __future__ import annotations

import dataclasses
import json
import math
import socket
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from deltamup.models import ModelConfig
from deltamup.parametrizations import BaseHparams, build_model
from deltamup.parametrizations.hparams import label
from deltamup.scaling.data import get_task
from deltamup.scaling.train import TrainConfig, TrainResult, lm_loss, train

from . import store
from .spec import SweepSpec, TrialPoint

REPORT_EVERY_S = 30.0  # intermediate tune.report at most this often: each one is a round trip to the driver


def trial_config(spec: SweepSpec, point: TrialPoint, out: Path, run: int, phase: str = "grid") -> dict[str, Any]:
    """Everything a trial needs, as plain data (what Ray Tune hands run_trial under "trial")."""
    return {"trial_id": point.key, "phase": phase, "out": str(Path(out).resolve()), "run": run,
            "point": {**dataclasses.asdict(point), "hparams": dict(point.hparams)},
            "model": spec.model_config(point.width).to_dict(),
            "task": spec.task, "train": spec.train_config(point).to_dict(), "batch_size": spec.batch_size,
            "seq_len": spec.seq_len, "eval": dataclasses.asdict(spec.eval), "retries": spec.failure.retries}


def run_trial(config: dict[str, Any]) -> None:
    """Ray Tune function trainable; config = {"trial": trial_config(...)}."""
    from ray import tune

    cfg = config["trial"]
    out = Path(cfg["out"])
    if not (out / "spec.yaml").exists():
        raise RuntimeError(f"sweep directory {out} is not visible on {socket.gethostname()}: "
                           "on a multi-node cluster put it on a filesystem every node mounts")
    threads, device, gpu_ids = placement()
    torch.set_num_threads(threads)
    started = time.time()
    outcome, error, attempts, last_report = None, None, 0, started

    def report(step: int, loss: float) -> None:
        nonlocal last_report
        if time.time() - last_report >= REPORT_EVERY_S:
            tune.report({"step": step, "train_loss": finite_or_inf(loss)})
            last_report = time.time()

    while outcome is None and attempts <= cfg["retries"]:
        attempts += 1
        try:
            outcome = train_and_evaluate(cfg, device, report)
        except Exception as e:  # recorded, never raised: a failed trial is a result of the sweep
            error = "".join(traceback.format_exception_only(e)).strip()
            traceback.print_exc()
        if device.type == "cuda":  # hand cached blocks back: trials sharing the GPU live in other processes
            torch.cuda.empty_cache()
    record = base_record(cfg) | {"attempts": attempts, "device": str(device), "threads": threads, "gpu_ids": gpu_ids,
                                 "node_id": node_id(), "started_at": started, "finished_at": time.time()}
    if outcome is None:
        record |= {"status": "error", "error": error, "diverged": False}
        curve = {c: [] for c in store.CURVE_COLUMNS}
    else:
        result, val_loss, params, metrics = outcome
        record |= metrics | result_columns(cfg, result, val_loss, params)
        curve = curve_columns(cfg, result)
    record["wall_seconds"] = record["finished_at"] - started
    store.write_trial(out, record, curve)
    tune.report({"status": record["status"], "diverged": record["diverged"], "step": record.get("steps", 0),
                 "train_loss": record.get("final_train_loss", math.inf),
                 "smoothed_loss": record.get("smoothed_loss", math.inf)})


def train_and_evaluate(cfg: dict[str, Any], device: torch.device,
                       report: Any) -> tuple[TrainResult, float | None, int, dict[str, float]]:
    """(training result, validation loss or None when diverged, parameter count, the task's own metrics)."""
    point = cfg["point"]
    model = build_model(ModelConfig(**cfg["model"]), point["parametrization"], point["optimizer"],
                        seed=point["seed"], hparams=BaseHparams.of(point.get("hparams", {}))).to(device)
    params = sum(p.numel() for p in model.parameters())
    task = get_task(cfg["task"])
    train_config = TrainConfig(**{**cfg["train"], "betas": tuple(cfg["train"]["betas"])})
    batches = task.train_batches(cfg["batch_size"], cfg["seq_len"], point["seed"])
    result = train(model, point["parametrization"], train_config, batches, device=device,
                   on_log=lambda step, rows: report(step, rows[-1][1]))
    if result.diverged:
        return result, None, params, {}
    eval_size = cfg["eval"]["batch_size"] or cfg["batch_size"]
    val = task.val_batches(eval_size, cfg["seq_len"], cfg["eval"]["batches"], seed=0)  # the same for every trial
    metrics = task.evaluate(model, device, seed=0) if hasattr(task, "evaluate") else {}
    return result, validation_loss(model, val, train_config.bf16, device), params, metrics


@torch.no_grad()
def validation_loss(model: torch.nn.Module, batches: list, bf16: bool, device: torch.device) -> float:
    """Mean next-token loss (nats) over the validation batches."""
    model.eval()
    losses = [lm_loss(model, (x.to(device), y.to(device)), bf16) for x, y in batches]
    model.train()
    return torch.stack(losses).mean().item()


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
    """The trial's config keys as flat columns (trial id, grid point, model fields, training settings); the point's
    hparams as one label column ("output_mult=2,init_mult=0.5"; "" without hparams axes)."""
    train_cfg = {k: v for k, v in cfg["train"].items() if k not in ("lr", "optimizer", "seed", "steps", "betas")}
    task = cfg["task"] if isinstance(cfg["task"], str) else json.dumps(cfg["task"], sort_keys=True)
    point = {**cfg["point"], "hparams": label(cfg["point"].get("hparams", {}))}
    return ({"trial_id": cfg["trial_id"], "phase": cfg["phase"], "run": cfg["run"]} | point | cfg["model"]
            | {"task": task, "max_steps": cfg["train"]["steps"], "batch_size": cfg["batch_size"],
               "seq_len": cfg["seq_len"], "beta1": cfg["train"]["betas"][0], "beta2": cfg["train"]["betas"][1]}
            | train_cfg)


def result_columns(cfg: dict[str, Any], result: TrainResult, val_loss: float | None, params: int) -> dict[str, Any]:
    losses = [loss for _, loss, _ in result.losses]
    smooth = cfg["eval"]
    return {"status": "diverged" if result.diverged else "ok", "error": None, "diverged": result.diverged,
            "diverged_step": result.diverged_step,
            "final_train_loss": math.inf if result.diverged else finite_or_inf(losses[-1]),
            "val_loss": math.inf if val_loss is None else finite_or_inf(val_loss),
            "smoothed_loss": math.inf if result.diverged else
            finite_or_inf(smoothed_loss(losses, smooth["smooth_last"], smooth["smooth_span"])),
            "clipped_fraction": result.clipped_fraction,
            "steps": result.steps, "tokens": result.tokens, "train_seconds": result.seconds,
            "tokens_per_s": result.tokens / result.seconds if result.seconds > 0 else None, "params": params}


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
