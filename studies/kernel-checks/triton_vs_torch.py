"""Model-level check that the Triton kernels train like the PyTorch chunked path (GPU only).

Trains the same model (same seed, same batches) twice — kernel_backend "triton" and "torch" — and prints both loss
curves' summary: the largest gap of the 20-step moving average, and the final losses. bf16 autocast.

    python3 studies/kernel-checks/triton_vs_torch.py --width 512 --depth 4 --steps 200
"""
from __future__ import annotations

import argparse
import time

import torch

from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.scaling.data import get_task
from deltamup.scaling.train import TrainConfig, train


def curve(backend: str, args: argparse.Namespace) -> tuple[list[float], float]:
    config = ModelConfig(kind=args.kind, width=args.width, depth=args.depth, householder=args.householder,
                         kernel_backend=backend)
    model = build_model(config, "gdn-mup", seed=0).cuda()
    batches = get_task("sample").train_batches(args.batch_size, args.seq_len, seed=0)
    start = time.perf_counter()
    result = train(model, "gdn-mup", TrainConfig(lr=args.lr, steps=args.steps, warmup_steps=30, log_every=50), batches)
    torch.cuda.synchronize()
    return [loss for _, loss, _ in result.losses], time.perf_counter() - start


def smooth(xs: list[float], n: int = 20) -> list[float]:
    return [sum(xs[max(0, i - n + 1): i + 1]) / len(xs[max(0, i - n + 1): i + 1]) for i in range(len(xs))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", default="gdn")
    p.add_argument("--householder", type=int, default=1)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--lr", type=float, default=3e-3)
    args = p.parse_args()
    (tri, t_tri), (ref, t_ref) = curve("triton", args), curve("torch", args)
    gap = max(abs(a - b) for a, b in zip(smooth(tri), smooth(ref)))
    print(f"{args.kind} width {args.width} depth {args.depth}, {args.steps} steps of {args.batch_size}×{args.seq_len}, "
          f"bf16: final loss triton {tri[-1]:.4f} vs torch {ref[-1]:.4f}; max gap of the 20-step mean {gap:.4f}; "
          f"wall {t_tri:.1f} s vs {t_ref:.1f} s")
    for step in range(0, args.steps, max(1, args.steps // 10)):
        print(f"  step {step:4d}  triton {tri[step]:.4f}  torch {ref[step]:.4f}")


if __name__ == "__main__":
    main()
