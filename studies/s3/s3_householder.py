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
per variant, all 24 runs as processes sharing the GPU):

    python3 studies/s3/s3_householder.py --device cuda --jobs 24 --seeds 8 --seq-len 128 --test-length 512 \
        --width 384 --heads 12 --lr 1e-3 --batch-size 256 --steps 8000
"""
from __future__ import annotations

import argparse
import multiprocessing
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch

from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.scaling.data import get_task
from deltamup.scaling.train import TrainConfig, train

VARIANTS = {  # label: (householder, allow_neg_eigval)
    "n_h=1 β∈[0,2]": (1, True),
    "n_h=2 β∈[0,1]": (2, False),
    "n_h=2 β∈[0,2]": (2, True),
}


def run(label: str, seed: int, args: argparse.Namespace) -> dict[str, float]:
    householder, neg = VARIANTS[label]
    task = get_task({"name": "s3", "test_length": args.test_length, "report_lengths": report_lengths(args)})
    config = ModelConfig(kind="deltaproduct", householder=householder, allow_neg_eigval=neg, gated=False,
                         depth=1, width=args.width, heads=args.heads, vocab_size=task.vocab_size,
                         base_width=args.width, tie_embeddings=args.tied)
    model = build_model(config, "sp", seed=seed)
    train_config = TrainConfig(lr=args.lr, steps=args.steps, warmup_steps=args.steps // 20, weight_decay=0.0,
                               seed=seed, log_every=50)
    start = time.perf_counter()
    log = lambda step, rows: print(f"  {label} seed {seed} step {step + 1} loss {rows[-1][1]:.3f}",  # noqa: E731
                                   file=sys.stderr, flush=True)
    result = train(model.to(args.device), "sp", train_config, task.train_batches(args.batch_size, args.seq_len, seed),
                   device=args.device, on_log=log)
    metrics = task.evaluate(model, args.device, seed=seed)
    return {"loss": result.final_loss, **metrics, "minutes": (time.perf_counter() - start) / 60}


def report_lengths(args: argparse.Namespace) -> tuple[int, ...]:
    return tuple(sorted({args.seq_len, min(2 * args.seq_len, args.test_length), args.test_length}))


def run_job(job: tuple[str, int, argparse.Namespace]) -> dict[str, float]:
    torch.set_num_threads(1)
    return run(*job)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    p.add_argument("--jobs", type=int, default=3, help="runs in parallel (processes), one CPU thread each")
    p.add_argument("--device", default="cpu", help="cpu or cuda (every run's process on the same GPU)")
    args = p.parse_args()
    labels = args.variants.split(";")
    unknown = [label for label in labels if label not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: no CUDA GPU here")
    print("# python3 studies/s3/s3_householder.py " + shlex.join(sys.argv[1:]))
    print(f"# S3 word problem, 1 layer, width {args.width}, {args.heads} heads, no gate, "
          f"{'tied' if args.tied else 'untied'} embeddings, SP, AdamW lr {args.lr}, "
          f"{args.steps} steps × {args.batch_size} words of length {args.seq_len} (cosine, 5% warm-up); "
          f"test on 256 words of length {args.test_length}; chance = 1/6 = 0.167", flush=True)
    if args.device.startswith("cuda"):  # compile the GPU kernels once, here, before 24 processes would all at once
        for label in labels:
            run(label, 0, argparse.Namespace(**{**vars(args), "steps": 2}))
        print(f"# kernels compiled for {len(labels)} variants", flush=True)
    seeds = [int(s) for s in args.seed_list.split(",")] if args.seed_list else list(range(args.seeds))
    jobs = [(label, seed, args) for seed in seeds for label in labels]
    rows: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:  # CUDA-safe
        futures = {pool.submit(run_job, job): job for job in jobs}
        for future in as_completed(futures):  # each run's line as soon as it ends: a cut keeps the finished ones
            (label, seed, _), row = futures[future], future.result()
            rows[label].append(row)
            print(f"{label}  seed {seed}: " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    t = args.seq_len
    print(f"\n{'variant':<16} mean acc@{t}  mean acc@{args.test_length}  seeds with seq_acc@{t} > 0.9")
    for label in labels:
        accs = [r[f"acc@{t}"] for r in rows[label]]
        longer = [r[f"acc@{args.test_length}"] for r in rows[label]]
        solved = sum(r[f"seq_acc@{t}"] > 0.9 for r in rows[label])
        print(f"{label:<16} {statistics.mean(accs):>11.3f}  {statistics.mean(longer):>12.3f}  "
              f"{solved}/{len(accs)}")


if __name__ == "__main__":
    main()
