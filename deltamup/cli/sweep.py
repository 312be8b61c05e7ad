"""`deltamup sweep SPEC`: a learning-rate sweep across widths on Ray Tune (see sweeps/spec.py for the format)."""
from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from deltamup.scaling.compile_cache import use_cache
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.plan import plan, plan_text
from deltamup.sweeps.runner import check_dir, run_sweep, widths_to_run

if TYPE_CHECKING:  # the Triton kernels are imported where used: `deltamup kernels check` on a CPU must import them
    from deltamup.kernels.warm import Shape  # after it selects Triton's interpreter


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="learning-rate sweep across widths on Ray Tune (resumable)")
    p.add_argument("spec", help="sweep spec (YAML), or a sweep directory (its spec.yaml) to resume")
    p.add_argument("--out", help="sweep directory (default runs/sweeps/<spec name>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec field, e.g. --set steps=200 --set eval.batches=2 (repeatable)")
    p.add_argument("--resume", action="store_true", help="finish the trials DIR has no finished result for")
    p.add_argument("--address", help="join this Ray cluster (e.g. auto, or host:port) instead of a local one")
    p.add_argument("--num-cpus", type=int, help="CPUs of the local Ray instance (default: all)")
    p.add_argument("--progress-every", type=float, default=10.0, help="seconds between progress lines")
    p.add_argument("--warm-kernels", action="store_true",
                   help="compile the Triton kernels for the spec's head shapes, one process per shape, so that the "
                        "trials find them in the sweep's Triton cache, DIR/compile-cache (on a GPU with the triton or "
                        "auto kernel backend; with compile: true the sweep's compile warm-up does this too), and check "
                        "every candidate config there against fp64: those off it are left out of the trials' "
                        "autotuning. Compiles first, then checks beside Ray's start and the compile warm-up; the "
                        "trials launch once the check is done. Only the widths left to run, nothing when none is")
    p.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="the time this command has (counted from its start), where something outside will cut it: "
                        "a trial starts only if the sweep's finished trials of its width say it ends within it; the "
                        "others stay missing for --resume (sweeps/time_limit.py). Grid and refine sweeps")
    p.add_argument("--plan", action="store_true",
                   help="print, per width, the trials left, parameters, tokens per parameter, memory and GPU share a "
                        "trial, and the GPU time left where DIR has finished trials of the same model to time; run "
                        "nothing. With --resume, first refuse what the resume would refuse (a changed spec)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    started = time.time()
    if args.time_limit is not None and not args.time_limit > 0:
        raise ValueError(f"--time-limit must be a positive number of seconds, got {args.time_limit:g}")
    path = Path(args.spec)
    if path.is_dir():  # `deltamup sweep DIR --resume`
        spec = specs.load(path / "spec.yaml", args.set)
        out = Path(args.out or path)
    else:
        spec = specs.load(path, args.set)
        out = Path(args.out or Path("runs/sweeps") / spec.name)
    if args.num_cpus is not None and args.num_cpus < 1:
        raise ValueError(f"--num-cpus must be positive, got {args.num_cpus}")
    if args.plan:
        if args.resume:  # the resume it plans refused here as the run would refuse it, not on the GPU machine
            check_dir(spec, out, resume=True)
        print(plan_text(spec, plan(spec, out)))
        return 0
    kernel_check = None
    if args.warm_kernels:
        use_cache(store.compile_cache_dir(out))  # the folder the trials' Triton cache is in (sweeps.trial)
        kernel_check = lambda: start_kernel_check(spec, widths_to_run(spec, out), out)  # noqa: E731
    run_sweep(spec, out, address=args.address, resume=args.resume, num_cpus=args.num_cpus,
              progress_every=args.progress_every, beside_start=kernel_check,
              deadline=None if args.time_limit is None else started + args.time_limit)
    return 0


def kernel_shapes(spec: specs.SweepSpec, widths: list[int]) -> set[Shape]:
    """The (K, V, householder, gated, conv taps) head shapes the spec trains with at `widths` (taps 0: the short
    convolution is not Triton's)."""
    configs = [spec.model_config(w) for w in widths]
    return {(c.head_k_dim, c.head_v_dim, c.householder, c.is_gated, c.conv_size if c.conv_backend == "triton" else 0)
            for c in configs}


def warm_kernels(spec: specs.SweepSpec, widths: list[int], check: bool = True) -> list[str]:
    """Compiles the Triton kernels for every head shape of the spec at `widths` (those left to run) and, with
    `check`, checks each candidate config there against fp64 (nothing to do without widths, a GPU or the Triton
    backend); returns the "pass@config" of those off fp64. A shape that fails to compile is reported and left to the
    trials."""
    reason = nothing_to_warm(spec, widths)
    if reason is not None:
        print(f"--warm-kernels: {reason}, nothing to compile")
        return []
    from deltamup.kernels.warm import warm_shapes

    failed, off = warm_shapes(kernel_shapes(spec, widths), check)
    if failed:
        print(f"--warm-kernels: {failed} shape(s) failed to compile; the trials will try again")
    return off


def nothing_to_warm(spec: specs.SweepSpec, widths: list[int]) -> str | None:
    """Why warm_kernels has nothing to do for these widths on this machine, or None."""
    import torch

    if not widths:
        return "no trial left to run"
    if not torch.cuda.is_available() or spec.model_config(widths[0]).kernel_backend not in ("auto", "triton"):
        return "no GPU or no Triton backend here"
    return None


def start_kernel_check(spec: specs.SweepSpec, widths: list[int], out: Path) -> Callable[[], None]:
    """Compiles the kernels (warm_kernels without the check: the sweep's compile warm-up then finds them in the
    cache instead of compiling them beside it), then checks them against fp64 in a thread (its work runs in
    processes of its own) beside Ray's start and the compile warm-up. Names the file of configs to leave out
    (tuning.EXCLUDE_FILE_ENV, DIR/compile-cache/kernels-off-fp64: per machine, like the cache) for the processes Ray
    starts, and returns what the runner calls before its first trial launches: wait for the check, write the file,
    say what it left out (exclude); where the check raised, raise, so that no trial runs without it (the runner
    calls it once: runner.once)."""
    from deltamup.kernels.triton.tuning import EXCLUDE_FILE_ENV

    path = (store.compile_cache_dir(out) / "kernels-off-fp64").resolve()  # trials run in folders of their own
    path.unlink(missing_ok=True)  # an earlier run's, maybe on another GPU
    os.environ[EXCLUDE_FILE_ENV] = str(path)
    warm_kernels(spec, widths, check=False)
    if nothing_to_warm(spec, widths) is not None:  # said once, by warm_kernels
        return lambda: exclude([], path, EXCLUDE_FILE_ENV)
    found: list[str] = []
    failed: list[BaseException] = []

    def check() -> None:
        try:
            found.extend(warm_kernels(spec, widths))
        except BaseException as e:  # noqa: BLE001 — raised again in finish, before any trial launches
            failed.append(e)
    thread = threading.Thread(target=check, daemon=True)
    thread.start()

    def finish() -> None:
        thread.join()
        if failed:
            raise RuntimeError(f"--warm-kernels: the kernel check failed: {failed[0]!r}") from failed[0]
        exclude(found, path, EXCLUDE_FILE_ENV)
    return finish


def exclude(off: list[str], path: Path, variable: str) -> None:
    """Writes the configs `off` ("pass@config") to `path` (whole or not at all), for the trials' launchers
    (the environment `variable`, tuning.EXCLUDE_FILE_ENV, names it for them), and says so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{e}\n" for e in off))
    tmp.replace(path)
    if off:
        print(f"--warm-kernels: {len(off)} kernel config(s) off fp64 on this GPU, left out of the trials' "
              f"autotuning: {', '.join(off)} ({path}; with --address, name it in {variable} on the "
              f"cluster's nodes too)")
