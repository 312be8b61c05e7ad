"""One trial on one GPU and data-parallel on several (resources.workers_per_trial), through the sweep driver: does
the loss curve stay the same, and how much faster is it? Writes a markdown table.

Three single-trial sweeps of the same spec (sample task, width 2048 by default): 1 GPU seed 0; N GPUs seed 0 (same
global batch and steps: each GPU takes batch_size / N rows); 1 GPU seed 1, whose distance from the first is the seed
noise the N-GPU curve should stay well inside. Per run: the smoothed train loss (EWM, span eval.smooth_span, over
every step), max |Δ| of that curve against the 1-GPU seed-0 curve, tokens/s of the trial's training loop, speed-up.
On a GPU the Triton kernels of the trial's head shape are compiled first (deltamup.kernels.warm, into Triton's
cache), so that no timed run pays for compiling; each run still times its kernels' launch configs once (seconds).

    python benchmarks/ddp_trial.py --out benchmarks/ddp-trial-h200x2.md     # a machine with 2 GPUs
    python benchmarks/ddp_trial.py --smoke                                   # tiny, CPU workers (gloo): checks it

--dir keeps the sweeps (default: a temporary directory); run again with the same --dir, finished runs are kept.
Imports no polars (the GPU machine has none).
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

from deltamup.kernels.warm import warm_shapes
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.runner import configure_ray_env, ray_session, run_sweep

FULL = {"width": 2048, "depth": 8, "heads": 12, "steps": 200, "batch_size": 16, "seq_len": 1024, "lr": 2e-3,
        "cpu": 4, "gpu": 1}
SMOKE = {"width": 64, "depth": 1, "heads": 2, "steps": 12, "batch_size": 8, "seq_len": 64, "lr": 1e-2,
         "cpu": 1, "gpu": 0}


def trial_spec(args: argparse.Namespace, workers: int, seed: int) -> specs.SweepSpec:
    return specs.parse({
        "name": f"w{args.width}-{workers}x-s{seed}-{args.steps}", "task": "sample",
        "model": {"kind": "gdn", "depth": args.depth, "heads": args.heads, "base_width": 256},
        "widths": [args.width], "lrs": [args.lr], "parametrizations": ["gdn-mup"], "optimizers": ["adamw"],
        "seeds": [seed], "steps": args.steps, "warmup_steps": max(1, args.steps // 10), "batch_size": args.batch_size,
        "seq_len": args.seq_len, "log_every": max(1, min(10, args.steps // 4)), "eval": {"batches": 4},
        "resources": {"cpu": args.cpu, "gpu": args.gpu, "workers_per_trial": workers}, "failure": {"retries": 0}})


def smoothed(losses: list[float], span: int) -> list[float]:
    """EWM (alpha = 2 / (span + 1)) of the per-step loss, at every step."""
    alpha, value, out = 2 / (span + 1), losses[0], []
    for loss in losses:
        value = alpha * loss + (1 - alpha) * value
        out.append(value)
    return out


def run(args: argparse.Namespace, workers: int, seed: int) -> dict:
    """Runs (or finds finished in --dir) the one-trial sweep; its record and smoothed loss curve."""
    spec = trial_spec(args, workers, seed)
    out = args.dir / spec.name
    run_sweep(spec, out, resume=(out / "spec.yaml").exists(), progress_every=60)
    (point,) = spec.grid()
    record = store.read_record(store.record_path(out, point.key))
    if record is None or record["status"] != "ok":
        sys.exit(f"{spec.name}: the trial did not finish ok ({(record or {}).get('error')}); see {out}")
    losses = pq.read_table(store.curve_path(out, point.key)).column("train_loss").to_pylist()
    return record | {"curve": smoothed(losses, spec.eval.smooth_span)}


def table(runs: list[tuple[str, dict]]) -> str:
    base = runs[0][1]
    lines = ["| run | workers | seed | smoothed loss | val loss | max \\|Δ smoothed loss\\| vs 1st | tokens/s | "
             "speed-up |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, r in runs:
        gap = max(abs(a - b) for a, b in zip(r["curve"], base["curve"]))
        lines.append(f"| {label} | {r['workers']} | {r['seed']} | {r['smoothed_loss']:.4f} | {r['val_loss']:.4f} | "
                     f"{gap:.2e} | {r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / base['tokens_per_s']:.2f}× |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny settings, CPU workers (gloo)")
    p.add_argument("--gpus", type=int, default=2, help="workers of the data-parallel run")
    for key, value in FULL.items():
        p.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=None, help=f"default {value}")
    p.add_argument("--dir", type=Path, help="where the sweeps go (default: a temporary directory)")
    p.add_argument("--out", type=Path, help="write the markdown here")
    args = p.parse_args()
    for key, value in (SMOKE if args.smoke else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.dir = args.dir or Path(tempfile.mkdtemp(prefix="ddp-trial-"))
    n = args.gpus
    if not args.smoke and torch.cuda.device_count() < n:
        sys.exit(f"needs {n} GPUs, this machine has {torch.cuda.device_count()} (--smoke runs on CPUs)")
    if not args.smoke:
        config = trial_spec(args, 1, 0).model_config(args.width)
        _, off = warm_shapes([(config.head_k_dim, config.head_v_dim, config.householder, config.is_gated)])
        if off:
            from deltamup.kernels.triton import tuning

            tuning.exclude(off)  # before Ray starts: its processes inherit the list
            print(f"kernel configs off fp64 on this GPU, left out: {', '.join(off)}")
    configure_ray_env(local=True)
    started = time.time()
    with ray_session(None, None):
        one, many = ("1 CPU worker", f"{n} CPU workers (gloo)") if args.smoke else ("1 GPU", f"{n} GPUs (nccl)")
        runs = [(one, run(args, 1, 0)), (many, run(args, n, 0)), (f"{one}, seed 1", run(args, 1, 1))]
    import ray

    gpu = (f"{torch.cuda.device_count()} × {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else
           f"no GPU, {os.cpu_count()} CPUs")
    gaps = [max(abs(a - b) for a, b in zip(r["curve"], runs[0][1]["curve"])) for _, r in runs]
    speedup = runs[1][1]["tokens_per_s"] / runs[0][1]["tokens_per_s"]
    report = "\n".join([
        f"# One trial on 1 and {n} workers (data-parallel), width {args.width}",
        "",
        f"Machine: {gpu} ({platform.machine()}); torch {torch.__version__}, Ray {ray.__version__}. Command: "
        f"`python {' '.join(sys.argv)}` ({time.time() - started:.0f} s).",
        f"Trial: GDN, gdn-mup, AdamW lr {args.lr:g}, width {args.width}, depth {args.depth}, {args.heads} heads, "
        f"sample task, {args.steps} steps of {args.batch_size} × {args.seq_len} tokens (global batch), bf16 on GPUs.",
        "",
        table(runs),
        "",
        f"- Loss curve on {n} workers vs 1: max |Δ smoothed loss| {gaps[1]:.2e} = {gaps[1] / gaps[2]:.1e} × the seed "
        f"noise ({gaps[2]:.2e}): {'within' if gaps[1] < gaps[2] else 'NOT within'} seed noise.",
        f"- Speed-up of the training loop on {n} workers: {speedup:.2f}× ({speedup / n:.0%} scaling efficiency).",
        "",
        "Smoothed loss: EWM (span 20) of the per-step train loss; max |Δ| over every step against the first row. "
        "The seed-1 row is seed noise (another initialisation and data order). tokens/s: the trial's training loop "
        "(global tokens / its seconds), without Ray's start-up.",
    ])
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    if any(not math.isfinite(r["smoothed_loss"]) for _, r in runs):
        sys.exit("a run diverged")


if __name__ == "__main__":
    main()
