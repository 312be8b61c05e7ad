"""S3 word problem, one layer: DeltaProduct with n_h = 2 Householder factors and β ∈ [0, 2] against n_h = 1
(DeltaNet with negative eigenvalues) and against n_h = 2 with β ∈ [0, 1], same budget, several seeds.

The DeltaProduct paper (§5.1, Fig. 3) finds that in one layer S3 needs n_h ≥ 2 *and* β ∈ [0, 2]. This script is the
CPU-sized check of that claim with the project's model, parametrization (SP) and training loop:

    python3 studies/s3/s3_householder.py | tee studies/s3/s3_householder.txt

CPU-sized means: width 64, 4 heads, no decay gate (as in the paper's state-tracking runs), untied readout, words of
length 32 (not 128) and 3000 steps × 32 words ≈ 1e5 sequences (the paper: ~2e8). Every variant first learns the
positions the short convolution can see, then the parity of the permutation (the Z2 quotient; loss ≈ 0.97 at
length 32); only n_h = 2 with β ∈ [0, 2] can leave that plateau, and at this budget it does so in some seeds only
(studies/s3/s3_householder_explore.txt has the runs that chose these settings).

On a GPU, closer to the paper (length-128 words, evaluation to 512, the paper's 12 heads of 32, lr 1e-3, 8 seeds
per variant), --jobs runs at a time (default 3) as processes sharing the GPU, over as many time-limited invocations
as it takes: rerun the same command until it skips 24 of 24 runs.

    timeout -k 20 -s TERM 530 python3 studies/s3/s3_householder.py --device cuda --seeds 8 --seq-len 128 \
        --test-length 512 --width 384 --heads 12 --lr 1e-3 --batch-size 256 --steps 8000 --compile --jobs 3 \
        --out studies/s3/s3_gpu.txt --checkpoint-dir /tmp/s3-ckpt

--out FILE: each run appends its result line to FILE as it ends (the line printed on stdout, which solved.py reads),
and the runs FILE already holds are skipped; FILE must describe the same configuration (its header line).
--checkpoint-dir DIR: each run saves model, optimizer, step and RNG state there every --checkpoint-every steps (500;
the data stream is replayed up to that step when it continues) and continues from it when rerun, to the result of an
uninterrupted run; the checkpoint is removed once the run's line is in FILE. A kill (Ctrl-C, SIGTERM from timeout)
ends the worker processes too and loses at most the steps since each running run's last checkpoint.
--time-steps K: before the study, time K steps of each variant alone in this process (after the kernel warm-up) and
print steps/s and the projected wall time at --jobs, ASSUMING that processes sharing the GPU slow down linearly
(--seeds 0: only time).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import os
import shlex
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import torch
from solved import read  # studies/s3/solved.py, beside this script (its folder is on sys.path)

from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.scaling.checkpoint import Checkpointing, discard, fingerprint
from deltamup.scaling.data import get_task
from deltamup.scaling.tasks.word_problems import WordProblem
from deltamup.scaling.train import TrainConfig, train

VARIANTS = {  # label: (householder, allow_neg_eigval)
    "n_h=1 β∈[0,2]": (1, True),
    "n_h=2 β∈[0,1]": (2, False),
    "n_h=2 β∈[0,2]": (2, True),
}
LOG_EVERY = 50  # steps between progress lines
Job = tuple[str, int, argparse.Namespace]  # (variant label, seed, arguments)


class Parser(argparse.ArgumentParser):
    """Argument errors as one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        raise SystemExit(f"{self.prog}: error: {message}")


def setup(label: str, seed: int, args: argparse.Namespace,
          steps: int | None = None) -> tuple[WordProblem, ModelConfig, TrainConfig]:
    """The task, model and training configuration of one run (`steps` instead of args.steps when given)."""
    householder, neg = VARIANTS[label]
    task = get_task({"name": "s3", "test_length": args.test_length, "report_lengths": report_lengths(args)})
    config = ModelConfig(kind="deltaproduct", householder=householder, allow_neg_eigval=neg, gated=False,
                         depth=1, width=args.width, heads=args.heads, vocab_size=task.vocab_size,
                         base_width=args.width, tie_embeddings=args.tied)
    steps = steps or args.steps
    train_config = TrainConfig(lr=args.lr, steps=steps, warmup_steps=steps // 20, weight_decay=0.0, seed=seed,
                               log_every=log_every(args), compile=args.compile)
    return task, config, train_config


def log_every(args: argparse.Namespace) -> int:
    """Steps between the loss syncs (log boundaries): the progress lines' and the checkpoints' common divisor
    (checkpoints are saved at log boundaries). It changes no finite run's result, only how often the host waits
    for the GPU."""
    return math.gcd(LOG_EVERY, args.checkpoint_every) if args.checkpoint_dir is not None else LOG_EVERY


def checkpoint_path(directory: Path, label: str, seed: int) -> Path:
    householder, neg = VARIANTS[label]
    return directory / f"nh{householder}-beta0-{2 if neg else 1}-seed{seed}.pt"


def run(label: str, seed: int, args: argparse.Namespace, steps: int | None = None) -> dict[str, float]:
    """Trains and evaluates one (variant, seed): {loss (final train loss), acc@t, last_acc@t, seq_acc@t (t in
    report_lengths), minutes (training, over every continuation, plus the evaluation)}. With args.checkpoint_dir
    the run saves itself there (model, optimizer, step, RNG state; the data stream is replayed up to its step) every
    args.checkpoint_every steps and continues from what it finds there. `steps`: a short run of that many steps
    instead (the kernel warm-up), never checkpointed."""
    task, config, train_config = setup(label, seed, args, steps)
    model = build_model(config, "sp", seed=seed).to(args.device)
    checkpointing = None
    if args.checkpoint_dir is not None and steps is None:
        what = {"model": dataclasses.asdict(config), "batch_size": args.batch_size, "seq_len": args.seq_len,
                "train": {k: v for k, v in train_config.to_dict().items() if k != "log_every"},
                "device": torch.device(args.device).type}
        checkpointing = Checkpointing(checkpoint_path(args.checkpoint_dir, label, seed), fingerprint=fingerprint(what),
                                      every_steps=args.checkpoint_every)

    def log(step: int, rows: list[tuple[int, float, float]]) -> None:
        if (step + 1) % LOG_EVERY == 0 or step + 1 == train_config.steps:
            print(f"  {label} seed {seed} step {step + 1} loss {rows[-1][1]:.3f}", file=sys.stderr, flush=True)

    result = train(model, "sp", train_config, task.train_batches(args.batch_size, args.seq_len, seed),
                   device=args.device, on_log=log, checkpointing=checkpointing)
    if result.resumed_from_step:
        print(f"  {label} seed {seed}: steps 1–{result.resumed_from_step} came from its checkpoint",
              file=sys.stderr, flush=True)
    began = time.perf_counter()
    metrics = task.evaluate(model, args.device, seed=seed)
    return {"loss": result.final_loss, **metrics, "minutes": (result.seconds + time.perf_counter() - began) / 60}


def run_job(job: Job) -> tuple[str, int, dict[str, float] | str]:
    """(label, seed, metrics or the error) of one run, on one CPU thread. The run's line is appended to args.out
    and its checkpoint removed here, as it ends: a kill of the parent process loses no finished run."""
    label, seed, args = job
    torch.set_num_threads(1)
    try:
        row = run(label, seed, args)
    except Exception as e:  # reported by the parent; the other runs go on
        return label, seed, f"{type(e).__name__}: {e}"
    if args.out is not None:
        append(args.out, [result_line(label, seed, row)])
    if args.checkpoint_dir is not None:
        discard(checkpoint_path(args.checkpoint_dir, label, seed))
    return label, seed, row


def outcomes(jobs: list[Job], processes: int) -> Iterator[tuple[str, int, dict[str, float] | str]]:
    """run_job's outcome of each job as it ends: in this process when `processes` is 1, else in that many spawned
    processes (CUDA-safe), which are terminated when this ends (an interrupt, SIGTERM) before they have."""
    if processes == 1:
        yield from map(run_job, jobs)
        return
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        yield from pool.imap_unordered(run_job, jobs)


def time_variant(label: str, args: argparse.Namespace) -> tuple[float, float]:
    """(training steps a second, seconds of one evaluation) of `label` alone in this process: args.time_steps steps
    of seed 0, the first (allocations, any compilation) left out, synced."""
    task, config, train_config = setup(label, 0, args, steps=args.time_steps)
    model = build_model(config, "sp", seed=0).to(args.device)
    result = train(model, "sp", train_config, task.train_batches(args.batch_size, args.seq_len, 0),
                   device=args.device)
    began = time.perf_counter()
    task.evaluate(model, args.device, seed=0)
    return (args.time_steps - 1) / (result.seconds - result.first_step_seconds), time.perf_counter() - began


def report_lengths(args: argparse.Namespace) -> tuple[int, ...]:
    return tuple(sorted({args.seq_len, min(2 * args.seq_len, args.test_length), args.test_length}))


def describe(args: argparse.Namespace) -> str:
    """The header line naming what a result line measures (a result file holds runs of one description)."""
    return (f"# S3 word problem, 1 layer, width {args.width}, {args.heads} heads, no gate, "
            f"{'tied' if args.tied else 'untied'} embeddings, SP, AdamW lr {args.lr}, "
            f"{args.steps} steps × {args.batch_size} words of length {args.seq_len} (cosine, 5% warm-up); "
            f"test on 256 words of length {args.test_length}; chance = 1/6 = 0.167")


def result_line(label: str, seed: int, row: dict[str, float]) -> str:
    """One run's line, as solved.py reads it."""
    return f"{label}  seed {seed}: " + "  ".join(f"{k} {v:.3f}" for k, v in row.items())


def append(path: Path, lines: list[str]) -> None:
    """Appends `lines` to `path` in one write (processes appending at once do not interleave) and syncs it."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, "".join(line + "\n" for line in lines).encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def check(p: Parser, args: argparse.Namespace) -> tuple[list[str], list[int], dict[str, dict[int, dict]]]:
    """The variants, the seeds and the runs already in args.out ({label: {seed: metrics}}); a bad argument ends
    the script with one line."""
    labels = args.variants.split(";")
    unknown = [label for label in labels if label not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    try:
        seeds = [int(s) for s in args.seed_list.split(",")] if args.seed_list else list(range(args.seeds))
    except ValueError:
        p.error(f"--seed-list {args.seed_list!r}: expected comma-separated integers")
    for name in ("steps", "batch_size", "seq_len", "jobs", "checkpoint_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be ≥ 1, got {getattr(args, name)}")
    if args.seeds < 0 or min(seeds, default=0) < 0:
        p.error("seeds must not be negative")
    if args.time_steps is not None and args.time_steps < 2:
        p.error(f"--time-steps must be ≥ 2 (the first step is left out), got {args.time_steps}")
    if args.seq_len > args.test_length:
        p.error(f"--seq-len {args.seq_len} is longer than --test-length {args.test_length}")
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        p.error(f"--device {args.device}: {str(e).splitlines()[0]}")
    try:
        for label in labels:
            setup(label, 0, args)
    except ValueError as e:
        p.error(str(e).splitlines()[0])
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: no CUDA GPU here")
    if args.checkpoint_dir is not None:
        try:
            args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            p.error(f"--checkpoint-dir {args.checkpoint_dir}: {e.strerror}")
        if not os.access(args.checkpoint_dir, os.W_OK | os.X_OK):
            p.error(f"--checkpoint-dir {args.checkpoint_dir}: not writable")
    done: dict[str, dict[int, dict]] = {}
    if args.out is not None:
        try:
            with open(args.out, "a"):
                pass
        except OSError as e:
            p.error(f"--out {args.out}: {e.strerror}")
        other = {line for line in args.out.read_text().splitlines() if line.startswith("# S3 word problem")}
        if other - {describe(args)}:
            p.error(f"--out {args.out} holds runs of another configuration ({(other - {describe(args)}).pop()[2:]})")
        done = read([args.out])
    return labels, seeds, done


def parser() -> Parser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3, help="seeds 0 … N−1")
    p.add_argument("--seed-list", default=None, help="comma-separated seeds instead (e.g. 0,2)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--test-length", type=int, default=128)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--tied", action="store_true", help="tied embeddings (default: a separate readout matrix)")
    p.add_argument("--variants", default=";".join(VARIANTS), help="semicolon-separated labels")
    p.add_argument("--jobs", type=int, default=3,
                   help="runs at once: processes, one CPU thread each (1: in this process); on cuda they share the GPU")
    p.add_argument("--device", default="cpu", help="cpu or cuda (every run's process on the same GPU)")
    p.add_argument("--out", type=Path, default=None,
                   help="append each finished run's line to FILE as it ends; runs already in FILE are skipped")
    p.add_argument("--checkpoint-dir", type=Path, default=None,
                   help="each run saves itself to DIR/<variant>-seed<N>.pt and continues from it when rerun")
    p.add_argument("--checkpoint-every", type=int, default=500, help="steps between a run's checkpoints")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile each run's step (one graph around the kernels: 1.7x the steps a second on "
                        "an H200; the warm-up fills the on-disk caches the runs share)")
    p.add_argument("--time-steps", type=int, default=None, metavar="K",
                   help="first time K steps of each variant alone here and project the study's wall time")
    return p


def main() -> None:
    p = parser()
    args = p.parse_args()
    labels, seeds, done = check(p, args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # as Ctrl-C: the workers end too
    torch.set_num_threads(1)  # as each run's process (the timing and the warm-up run here)
    pending = [(label, seed, args) for seed in seeds for label in labels if seed not in done.get(label, {})]
    header = ["# python3 studies/s3/s3_householder.py " + shlex.join(sys.argv[1:]), describe(args)]
    print("\n".join(header), flush=True)
    if args.out is not None:
        print(f"# {len(seeds) * len(labels) - len(pending)} of {len(seeds) * len(labels)} runs already in "
              f"{args.out}: skipped", flush=True)
        if pending:
            append(args.out, header)
    if args.checkpoint_dir is not None:  # a kill between a run's line and the removal of its checkpoint left it
        for label in labels:
            for seed in done.get(label, {}):
                discard(checkpoint_path(args.checkpoint_dir, label, seed))
    used = [label for label in labels if any(label == job[0] for job in pending)] or \
        (labels if args.time_steps else [])
    if torch.device(args.device).type == "cuda" and used:  # compile the kernels once, here, before the processes
        for label in used:
            run(label, 0, args, steps=2)
        print(f"# kernels compiled for {len(used)} variants", flush=True)
    if args.time_steps:
        project(used, pending, args)
    failed = 0
    for label, seed, row in outcomes(pending, args.jobs):
        if isinstance(row, str):
            failed += 1
            print(f"{label} seed {seed}: failed: {row}", file=sys.stderr, flush=True)
            continue
        print(result_line(label, seed, row), flush=True)  # each run's line as soon as it ends
        done.setdefault(label, {})[seed] = {k: float(f"{v:.3f}") for k, v in row.items()}  # as --out holds it
    summary(labels, seeds, done, args)
    if failed:
        raise SystemExit(f"{failed} of {len(pending)} runs failed (their checkpoints, if any, are kept)")


def project(labels: list[str], pending: list[Job], args: argparse.Namespace) -> None:
    """Prints each variant's steps/s alone and the study's projected wall time at args.jobs: on a shared GPU under
    the assumption of linear slowdown (j processes each run j times slower, so the GPU does one run's work at a
    time), and the bound of no slowdown (j processes as fast as one, e.g. each on its own CPU core)."""
    minutes = {}  # label: minutes of one run alone
    j = min(args.jobs, len(pending)) or args.jobs
    for label in labels:
        rate, evaluation = time_variant(label, args)
        minutes[label] = (args.steps / rate + evaluation) / 60
        print(f"# timed {label}: {rate:.2f} steps/s alone ({args.time_steps} steps, the first left out), "
              f"evaluation {evaluation:.1f} s: a run of {args.steps} steps ≈ {minutes[label]:.1f} min alone, "
              f"≈ {j * minutes[label]:.1f} min with {j} at once on one GPU (assuming linear slowdown)", flush=True)
    work = sum(minutes[label] for label, _, _ in pending)
    print(f"# projected wall time of the {len(pending)} runs to do (each from step 0) at --jobs {args.jobs}: "
          f"≈ {work:.1f} min on one GPU ASSUMING linear slowdown (not measured: {j} runs at once each {j}× slower); "
          f"≈ {work / j:.1f} min if they did not slow each other (e.g. each on its own CPU core)", flush=True)


def summary(labels: list[str], seeds: list[int], done: dict[str, dict[int, dict]], args: argparse.Namespace) -> None:
    """The table over every run of these variants and seeds that has a result (this call's or --out's)."""
    t = args.seq_len
    print(f"\n{'variant':<16} mean acc@{t}  mean acc@{args.test_length}  seeds with seq_acc@{t} > 0.9")
    for label in labels:
        rows = [done[label][seed] for seed in seeds if seed in done.get(label, {})]
        if not rows:
            continue
        accs = [r[f"acc@{t}"] for r in rows]
        longer = [r[f"acc@{args.test_length}"] for r in rows]
        solved = sum(r[f"seq_acc@{t}"] > 0.9 for r in rows)
        print(f"{label:<16} {statistics.mean(accs):>11.3f}  {statistics.mean(longer):>12.3f}  "
              f"{solved}/{len(accs)}")


if __name__ == "__main__":
    main()
