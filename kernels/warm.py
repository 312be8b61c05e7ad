"""Fill Triton's on-disk kernel cache for given head shapes before a sweep, one process per shape, in parallel.

Every candidate config the launcher times is one compilation per head shape (9 s for K = 32, 13 s for K = 128 on an
H200 with an empty cache); a sweep's trials of one width share that shape, so compiling it once up front keeps the
trials that start together from compiling it side by side. The calls are the model's (models/mixer.py): q/k
normalised outside, g in fp32, β and the rest in bf16, forward and backward, with and without the final state.

    warm_shapes([(32, 64, 1, True), (128, 256, 1, True)])    # (K, V, householder, gated) per shape
    python -m deltamup.kernels.warm 128 256 --householder 2   # one shape, in this process
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Iterable

import torch

from . import chunk_gated_delta_product, l2_normalize

Shape = tuple[int, int, int, bool]  # (head K, head V, householder steps, gated)


def warm(K: int, V: int, householder: int = 1, gated: bool = True) -> None:
    """Run the Triton kernels once for this head shape on the current GPU (B 2, T 128, H 6)."""
    B, T, H, n = 2, 128, 6, householder
    bf16 = dict(device="cuda", dtype=torch.bfloat16, requires_grad=True)
    for final_state in (False, True):
        q = torch.randn(B, T, H, K, **bf16)
        k = torch.randn(B, T * n, H, K, **bf16)
        v = torch.randn(B, T * n, H, V, **bf16)
        g = -torch.rand(B, T, H, device="cuda", requires_grad=True) if gated else None
        beta = torch.rand(B, T * n, H, **bf16)
        o, s = chunk_gated_delta_product(l2_normalize(q), l2_normalize(k), v, g, beta, num_householder=n,
                                         output_final_state=final_state, backend="triton")
        (o.float().sum() + (s.sum() if s is not None else 0)).backward()
    torch.cuda.synchronize()


def warm_shapes(shapes: Iterable[Shape]) -> int:
    """Warm every shape in its own process (compilation is CPU work: the shapes compile in parallel); prints one
    line per shape and returns the number of shapes that failed."""
    procs = []
    for K, V, n, gated in sorted(set(shapes)):
        cmd = [sys.executable, "-m", "deltamup.kernels.warm", str(K), str(V), "--householder", str(n)]
        procs.append(subprocess.Popen(cmd + ([] if gated else ["--no-gate"])))
    return sum(p.wait() != 0 for p in procs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("K", type=int, help="key head dim")
    p.add_argument("V", type=int, help="value head dim")
    p.add_argument("--householder", type=int, default=1, help="DeltaProduct's n_h (1: the gated delta rule)")
    p.add_argument("--no-gate", action="store_true", help="plain DeltaNet (no decay gate)")
    args = p.parse_args()
    t0 = time.time()
    warm(args.K, args.V, args.householder, not args.no_gate)
    print(f"kernels warm for K={args.K} V={args.V} n_h={args.householder} in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
