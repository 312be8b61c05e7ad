"""How much does gradient clipping shrink SGD's steps, per width and parametrization? (study gdn-sgd)

Trains the first steps of a study's trials on the CPU, with the study's own model, schedule, momentum and clip
threshold, and records the global gradient norm before clipping. While the norm is above the threshold (1.0 in the
paper's recipe), SGD's step is lr · g / ‖g‖: a width-dependent norm then moves the effective learning rate with
width, whatever the parametrization's LR table says. The batch is smaller than the study's (noise adds to the norm
at small batches), so the numbers indicate the study's norms rather than copy them.

    python3 studies/gdn-sgd/clipping/sgd_clipping.py --task-path /tmp/deltamup/corpus \\
        --widths 256 512 768 1024 --steps 48 --out studies/gdn-sgd/clipping/norms.csv
"""
from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from deltamup.parametrizations import build_model
from deltamup.scaling.data import get_task
from deltamup.scaling.train import lm_loss, make_optimizer, optimizer_step
from deltamup.sweeps import spec as sweep_spec
from deltamup.sweeps.spec import TrialPoint

SPEC = Path(__file__).resolve().parents[1] / "spec.yaml"  # the study's spec, next to this folder
COLUMNS = ["parametrization", "width", "lr", "step", "loss", "grad_norm", "clip_scale"]


def grad_norms(spec: sweep_spec.SweepSpec, point: TrialPoint, steps: int, batch_size: int,
               seq_len: int) -> list[dict]:
    """Rows (COLUMNS) for the first `steps` steps."""
    config = spec.train_config(point)
    model = build_model(spec.model_config(point.width), point.parametrization, point.optimizer, seed=point.seed)
    optimizer = make_optimizer(model, point.parametrization, config)
    batches = get_task(spec.task).train_batches(batch_size, seq_len, point.seed)
    rows = []
    for step in range(steps):
        loss = lm_loss(model, next(batches), config.bf16)
        norm = optimizer_step(model, optimizer, loss, step, config).item()
        rows.append(dict(parametrization=point.parametrization, width=point.width, lr=point.lr, step=step,
                         loss=loss.item(), grad_norm=norm, clip_scale=min(1.0, config.grad_clip / norm)))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", type=Path, default=SPEC)
    p.add_argument("--task-path", required=True, help="the prepared corpus (deltamup data prepare)")
    p.add_argument("--widths", type=int, nargs="+", default=[256, 768, 1024])
    p.add_argument("--parametrizations", nargs="+", default=["sp", "mup", "gdn-mup"])
    p.add_argument("--lr", type=float, default=2**-5, help="base LR (the study's optima are 2^-6 … 2^-4)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--out", type=Path, required=True, help="CSV, written after every (parametrization, width)")
    args = p.parse_args()
    spec = sweep_spec.load(args.spec, [f"task.path={args.task_path}"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for width in args.widths:
            for name in args.parametrizations:
                start = time.perf_counter()
                rows = grad_norms(spec, TrialPoint(name, "sgd", width, args.lr, 0), args.steps, args.batch_size,
                                  args.seq_len)
                writer.writerows(rows)
                f.flush()
                norms = [r["grad_norm"] for r in rows]
                print(f"{name:8s} {width:5d}  norm step 0 {norms[0]:.2f}, last {norms[-1]:.2f}, "
                      f"min {min(norms):.2f}; mean clip scale {sum(r['clip_scale'] for r in rows) / len(rows):.3f}"
                      f"  ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
