"""Fill Triton's on-disk kernel cache for given head shapes before a sweep, one process per shape, in parallel, and
check every candidate config there against fp64.

Every candidate config the launcher times is one compilation per head shape (9 s for K = 32, 13 s for K = 128 on an
H200 with an empty cache); a sweep's trials of one width share that shape, so compiling it once up front keeps the
trials that start together from compiling it side by side. The calls are the model's (models/mixer.py): q/k
normalised outside, g in fp32, β and the rest in bf16, forward and backward, with and without the final state;
with the Triton short convolution (ModelConfig.conv_backend "triton"), its kernels too, at q/k's channels (each
head normalized) and v's. Then each pass runs each of its candidates against the recurrence in fp64 at the same
heads and n_h (triton/selfcheck.py; the convolution's against its PyTorch form), and the ones off fp64 are returned,
for the launcher to leave out (tuning.EXCLUDE_ENV, or the file tuning.EXCLUDE_FILE_ENV names, which `deltamup sweep
--warm-kernels` writes).

A shape warmed and checked once leaves a stamp in Triton's cache folder, keyed by the kernels' sources, torch,
Triton, the GPU's name and the shape: a later sweep on that cache (the same machine, or the cache carried to one
of the same kind) finds its compiled kernels there and reuses the check's result instead of running it again
(about a minute a shape on an H200). The stamp lives and goes with the binaries it vouches for.

    warm_shapes([(32, 64, 1, True, 0), (128, 256, 1, True, 4)])  # (K, V, householder, gated, conv taps) a shape
    python -m deltamup.kernels.warm 128 256 --householder 2      # one shape, in this process
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import torch
import triton

from . import chunk_gated_delta_product, l2_normalize, short_conv_silu

Shape = tuple[int, int, int, bool, int]  # (head K, head V, householder steps, gated, conv taps: 0 without the
#                                           Triton short convolution)
H = 6  # heads of the warm and check calls (the kernels compile alike for any count: it is a grid size)


def warm(K: int, V: int, householder: int = 1, gated: bool = True, conv_taps: int = 0) -> None:
    """Run the Triton kernels once for this head shape on the current GPU (B 2, T 128, H 6); with conv_taps, the
    short convolution's too, at q/k's and v's channels."""
    B, T, n = 2, 128, householder
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
    for channels, group in ((H * K, K), (H * V, 0)) if conv_taps else ():
        x = torch.randn(B, T, channels, **bf16)
        w = torch.randn(channels, conv_taps, device="cuda", requires_grad=True)
        short_conv_silu(x, w, "triton", group).float().sum().backward()
    torch.cuda.synchronize()


def check(K: int, V: int, householder: int = 1, gated: bool = True, conv_taps: int = 0) -> tuple[list[str], int]:
    """The "pass@config" of every candidate off fp64 at these head dims, n_h and gate on the current GPU (B 2, T 300,
    H 6, bf16, no initial or final state: the kernels the trials compile; with conv_taps, the short convolution's at
    q/k's and v's channels), each printed with its error; and how many do not fit the GPU's shared memory (the
    launcher skips those)."""
    from .triton import selfcheck

    results = selfcheck.check(K, V, torch.bfloat16, (2, 300, H), states=False, householder=householder,
                              gated=gated)
    for channels, group in ((H * K, K), (H * V, 0)) if conv_taps else ():
        results += selfcheck.check_short_conv(channels, group, torch.bfloat16, (2, 300), taps=conv_taps)
    off = [r for r in results if r.off(selfcheck.TOLERANCE[torch.bfloat16])]
    for r in off:
        print(f"off fp64 at K={K} V={V}: {r.kernel} {r.config}: {r.worst} {r.error:.1e}", flush=True)
    return [f"{r.kernel}@{r.config}" for r in off], sum(not r.fits for r in results)


def stamp_path(K: int, V: int, householder: int, gated: bool, conv_taps: int = 0) -> Path:
    """Where the check's result for this shape is kept: Triton's cache folder (TRITON_CACHE_DIR, else Triton's
    default), under a name that changes with any kernel source, torch, Triton, the GPU or the shape."""
    digest = hashlib.sha256()
    for source in sorted((Path(__file__).parent / "triton").glob("*.py")) + [Path(__file__)]:
        digest.update(source.read_bytes())
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    digest.update(f"{torch.__version__}|{triton.__version__}|{gpu}|{K}|{V}|{householder}|{gated}|{conv_taps}".encode())
    cache = os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache"
    return Path(cache) / "deltamup-checked" / f"{digest.hexdigest()[:32]}.json"


def warm_shapes(shapes: Iterable[Shape], check: bool = True) -> tuple[int, list[str]]:
    """Warm, and check where `check`, every shape in its own process (compilation is CPU work: the shapes compile in
    parallel); prints one line per shape. Returns the number of shapes that failed and the "pass@config" of the
    candidates off fp64."""
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (K, V, n, gated, taps) in enumerate(sorted(set(shapes))):
            cmd = [sys.executable, "-m", "deltamup.kernels.warm", str(K), str(V), "--householder", str(n),
                   "--conv-taps", str(taps), *(["--off-fp64", str(Path(tmp) / f"{i}.json")] if check else [])]
            procs.append((subprocess.Popen(cmd + ([] if gated else ["--no-gate"])), Path(tmp) / f"{i}.json"))
        failed, off = 0, []
        for proc, path in procs:
            failed += proc.wait() != 0
            off += json.loads(path.read_text()) if path.exists() else []
    return failed, sorted(set(off))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("K", type=int, help="key head dim")
    p.add_argument("V", type=int, help="value head dim")
    p.add_argument("--householder", type=int, default=1, help="DeltaProduct's n_h (1: the gated delta rule)")
    p.add_argument("--no-gate", action="store_true", help="plain DeltaNet (no decay gate)")
    p.add_argument("--conv-taps", type=int, default=0,
                   help="the Triton short convolution's kernel size, to warm and check it too (0: not)")
    p.add_argument("--off-fp64", type=Path, default=None,
                   help="then check every candidate config against fp64 and write those off it here (JSON list)")
    args = p.parse_args()
    if min(args.K, args.V, args.householder) < 1 or args.conv_taps < 0:
        p.error("K, V and --householder must be positive, --conv-taps 0 or more")
    shape = (args.K, args.V, args.householder, not args.no_gate, args.conv_taps)
    stamp = stamp_path(*shape)
    name = f"K={args.K} V={args.V} n_h={args.householder}" + (f" conv {args.conv_taps}" if args.conv_taps else "")
    if stamp.is_file():  # its kernels are in this cache too
        found = json.loads(stamp.read_text())
        if args.off_fp64 is not None:
            args.off_fp64.write_text(json.dumps(found["off"]))
        print(f"kernels for {name} warmed and checked against fp64 in this "
              f"cache before (same sources, torch, Triton and GPU; {stamp}): {len(found['off'])} off", flush=True)
        return
    t0 = time.time()
    warm(*shape)
    print(f"kernels warm for {name} in {time.time() - t0:.0f} s", flush=True)
    if args.off_fp64 is not None:
        t0 = time.time()
        off, unfit = check(*shape)
        args.off_fp64.write_text(json.dumps(off))
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps({"off": off, "unfit": unfit}))
        print(f"kernel configs checked against fp64 for {name} in {time.time() - t0:.0f} s: "
              f"{len(off)} off" + (f", {unfit} do not fit the shared memory (never launched)" if unfit else ""),
              flush=True)


if __name__ == "__main__":
    main()
