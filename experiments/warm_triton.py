"""Compile the Triton kernels for the head dims a GPU session will use, one process per head dim, in parallel,
so that later runs find them in Triton's cache (compiling takes 60–90 s per shape on an H200).

    python3 experiments/warm_triton.py 32 64 128 192
"""
from __future__ import annotations

import subprocess
import sys

import torch


def warm(K: int) -> None:
    import kernels

    V = 2 * K
    for final_state in (False, True):
        for gated in (True, False):
            q, k = (torch.randn(2, 128, 6, K, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in "qk")
            v = torch.randn(2, 128, 6, V, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            g = -torch.rand(2, 128, 6, device="cuda", requires_grad=True) if gated else None
            beta = torch.rand(2, 128, 6, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            o, s = kernels.chunk_gated_delta_rule(q, kernels.l2_normalize(k), v, g, beta,
                                                  output_final_state=final_state, backend="triton")
            (o.float().sum() + (s.sum() if s is not None else 0)).backward()
    torch.cuda.synchronize()
    print(f"warm K={K}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        warm(int(sys.argv[2]))
    else:
        procs = [subprocess.Popen([sys.executable, __file__, "--one", k]) for k in sys.argv[1:]]
        sys.exit(max(p.wait() for p in procs))
