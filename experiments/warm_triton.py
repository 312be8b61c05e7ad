"""Compile the Triton kernels for the head dims a GPU session will use, one process per head dim, in parallel,
so that later runs find them in Triton's cache (compiling takes 60–90 s per shape on an H200; every candidate config
the launcher times is compiled here). The calls are the model's (models/mixer.py): DeltaProduct_n's entry point,
q/k normalised outside, g fp32, β in the inputs' dtype.

    python3 experiments/warm_triton.py 32 64 128 192                    # Gated DeltaNet (n_h = 1)
    python3 experiments/warm_triton.py 32 64 128 192 --householder 2    # Gated DeltaProduct_2
    python3 experiments/warm_triton.py 128 192 --householder 1 2        # both, one process per (K, n_h)
"""
from __future__ import annotations

import argparse
import subprocess
import sys

import torch


def warm(K: int, n: int) -> None:
    from deltamup import kernels
    V, B, T, H = 2 * K, 2, 128, 6
    bf16 = dict(device="cuda", dtype=torch.bfloat16, requires_grad=True)
    for final_state in (False, True):
        for gated in (True, False):
            q = torch.randn(B, T, H, K, **bf16)
            k = torch.randn(B, T * n, H, K, **bf16)
            v = torch.randn(B, T * n, H, V, **bf16)
            g = -torch.rand(B, T, H, device="cuda", requires_grad=True) if gated else None
            beta = torch.rand(B, T * n, H, **bf16)
            o, s = kernels.chunk_gated_delta_product(kernels.l2_normalize(q), kernels.l2_normalize(k), v, g, beta,
                                                     num_householder=n, output_final_state=final_state,
                                                     backend="triton")
            (o.float().sum() + (s.sum() if s is not None else 0)).backward()
    torch.cuda.synchronize()
    print(f"warm K={K} n_h={n}", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("head_dims", type=int, nargs="+")
    p.add_argument("--householder", type=int, nargs="+", default=[1],
                   help="DeltaProduct's n_h, one or several (1: the gated delta rule)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        warm(args.head_dims[0], args.householder[0])
    else:
        procs = [subprocess.Popen([sys.executable, __file__, "--one", str(k), "--householder", str(n)])
                 for k in args.head_dims for n in args.householder]
        sys.exit(max(p.wait() for p in procs))
