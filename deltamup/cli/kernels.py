"""`deltamup kernels check`: every candidate launch config of every Triton pass against the recurrence in fp64, on
this machine, before a sweep trusts the autotuner with them.

    deltamup kernels check                                   # the model's heads at widths 512, 1024, 1536
    deltamup kernels check --head-dims 128x256 --kernel chunk_wu_aqk_fwd_kernel
    deltamup kernels check --head-dims 128x256 --householder 2    # DeltaProduct_2's compiled passes
    deltamup kernels check --head-dims 128x256 --qk-norm-in-kernel  # the passes that normalise q and k themselves
    deltamup kernels check --head-dims 128x256 --forward-only        # the forward with no backward to follow

Each pass runs each of its candidates in turn (the other passes at their first) on B 2, T 300 (a ragged last
chunk), H 2, random gates, β ∈ [0, 2] and an initial state; the table lists the largest relative error of the
output, the final state and every gradient. The short convolution's kernels likewise, at the q/k (heads
normalized) and v widths of those heads, against its PyTorch form (out, dx, dw). Exit 1 when one is at or above the
tolerance (the kernel tests' bars: 1e-2 in bf16 and fp16, 1e-4 in fp32). On a CPU, Triton's interpreter ignores
warps and stages: it checks the kernels, not the configs.
"""
from __future__ import annotations

import argparse
import os

import torch

from deltamup.console import print_table

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def head_dims(text: str) -> tuple[int, int]:
    try:
        K, V = (int(n) for n in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not KxV, e.g. 128x256") from None
    if K < 1 or V < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: K and V must be positive")
    return K, V


def shape(text: str) -> tuple[int, int, int]:
    try:
        B, T, H = (int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not B,T,H, e.g. 2,300,2") from None
    if min(B, T, H) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: B, T and H must be positive")
    return B, T, H


def register(subparsers: argparse._SubParsersAction) -> None:
    kernels = subparsers.add_parser("kernels", help="check the Triton kernels' launch configs on this machine",
                                    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = kernels.add_subparsers(dest="kernels_command", required=True, metavar="ACTION")
    c = sub.add_parser("check", help="every candidate config of every pass against fp64")
    c.add_argument("--head-dims", type=head_dims, nargs="+", default=[(64, 128), (128, 256), (192, 384)],
                   metavar="KxV", help="head dims (default: the model's at widths 512, 1024, 1536)")
    c.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                   help="input dtype (default: bf16 on a GPU, fp32 on a CPU, where bf16 is refused: the interpreter "
                        "mis-computes bf16 dots)")
    c.add_argument("--kernel", default=None, help="only this pass's candidates (e.g. chunk_wu_aqk_fwd_kernel)")
    c.add_argument("--shape", type=shape, default=(2, 300, 2), metavar="B,T,H")
    c.add_argument("--householder", type=int, default=1, metavar="N_H",
                   help="DeltaProduct's n_h: T tokens of N_H micro-rows (its passes compile apart; default 1)")
    c.add_argument("--qk-norm-in-kernel", action="store_true",
                   help="q and k normalised inside the forward's passes (use_qk_l2norm_in_kernel without a "
                   "gradient; its passes compile apart): the forward's outputs only")
    c.add_argument("--forward-only", action="store_true",
                   help="the forward that no backward follows (no input needs a gradient; it stores nothing for "
                   "one, and its passes compile apart): the forward's outputs only")
    c.add_argument("--tolerance", type=float, default=None, help="fail at this relative error or above "
                   "(default: 1e-2 for bf16 and fp16, 1e-4 for fp32)")
    c.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is first imported
    from deltamup.kernels.triton import selfcheck

    passes = selfcheck.PASSES + selfcheck.CONV_PASSES
    if args.kernel is not None and args.kernel not in passes:
        raise ValueError(f"no pass named {args.kernel!r}; the passes: {', '.join(passes)}")
    if args.householder < 1:
        raise ValueError(f"--householder {args.householder}: must be at least 1")
    if args.tolerance is not None and not args.tolerance > 0:
        raise ValueError(f"--tolerance {args.tolerance:g}: must be positive")
    if args.dtype == "bf16" and not cuda:
        raise ValueError("--dtype bf16 needs a GPU: Triton's CPU interpreter mis-computes bf16 dots (off by ~1e22); "
                         "use fp16 or fp32 here")
    dtype = DTYPES[args.dtype] if args.dtype else (torch.bfloat16 if cuda else torch.float32)
    tolerance = args.tolerance if args.tolerance is not None else selfcheck.TOLERANCE[dtype]
    if not cuda:
        print("no GPU: Triton's interpreter ignores warps and stages, so this checks the kernels, not the configs "
              "(a candidate that differs from an earlier one only in those shares its run: `run`)")
    rows, failed, unfit = [], 0, 0
    B, T, H = args.shape
    for K, V in args.head_dims:
        results = []
        if args.kernel is None or args.kernel in selfcheck.PASSES:
            results += selfcheck.check(K, V, dtype, args.shape, args.kernel, householder=args.householder,
                                       norm=args.qk_norm_in_kernel, forward_only=args.forward_only)
        if args.kernel is None or args.kernel in selfcheck.CONV_PASSES:  # q's (heads normalized) and v's
            for channels, group in ((H * K, K), (H * V, 0)):
                results += selfcheck.check_short_conv(channels, group, dtype, (B, T), args.kernel)
        for r in results:
            off = r.off(tolerance)
            failed += off
            unfit += not r.fits
            ok = "NO" if off else "yes" if r.fits else "does not fit"
            rows.append({"K": K, "V": V, "kernel": r.kernel, "candidate": r.candidate, "config": r.config,
                         "max rel. error": f"{r.error:.1e}" if r.fits else "–", "worst": r.worst, "ok": ok,
                         **({} if cuda else {"run": r.candidate if r.run_as is None else r.run_as})})
    print_table(rows)
    print(f"{len(rows) - failed - unfit} of {len(rows)} configs within {tolerance:g} of fp64 "
          f"({str(dtype).removeprefix('torch.')} inputs, B,T,H = {','.join(map(str, args.shape))})"
          + (f", n_h {args.householder}" if args.householder > 1 else "")
          + (", q and k normalised in the kernels" if args.qk_norm_in_kernel else "")
          + (", the forward alone" if args.forward_only or args.qk_norm_in_kernel else "")
          + (f"; {unfit} do not fit this GPU's shared memory (the launcher skips them)" if unfit else ""))
    return 1 if failed else 0
