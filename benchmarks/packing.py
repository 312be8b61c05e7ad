"""Trials side by side on one GPU: the same N trials run as one sweep at each packing k (k trials at a time, each
given 1/k of the GPU), and what each packing gives: tokens/s of the GPU, GPU busy, the memory a trial held.

    python3 benchmarks/packing.py run SPEC --out OUT --width 1024 --packs 1 2 4 --trials 4 --steps 300 \
        [--cache-from DIR] [--set KEY=VALUE …]       on a GPU machine: OUT/pack1, OUT/pack2, … then the table
    python3 benchmarks/packing.py table OUT/pack1 OUT/pack2 …   the table again, anywhere, from the directories

Each packing runs `deltamup sweep SPEC --out OUT/pack{k} --warm-kernels --set resources.gpu=1/k` over seeds
0 … N−1 at the spec's first parametrization and optimizer and its middle LR, `steps` steps (the --set arguments
come after these, so they can change any of them, e.g. `task.path=CORPUS`). With --cache-from (a sweep's
compile-cache directory) each packing starts from a copy of it, so the comparison is of training, not of
compiling; the warm-up is shown apart and left out of the steady throughput.

Columns: trials at once, trials, wall (the driver run), warm-up, tokens/s over the wall less the warm-up (the GPU's
steady throughput; the headline), tokens/s of one trial (median), GPU busy (nvidia-smi utilisation: a kernel
running, not how much of the GPU it fills), the most memory one trial held (peak_memory_gib).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from deltamup.console import duration
from deltamup.sweeps import cost, store
from deltamup.sweeps import spec as specs

COLUMNS = ("trials at once", "trials", "wall", "warm-up", "tokens/s (wall less warm-up)", "tokens/s per trial (median)",
           "GPU busy", "GiB a trial (peak)")


def sweep_args(spec_path: Path, out: Path, width: int, pack: int, trials: int, steps: int,
               sets: list[str]) -> list[str]:
    """The `deltamup sweep` command of one packing: N seeds at one (parametrization, optimizer, LR) at `width`,
    each trial given 1/pack of a GPU."""
    spec = specs.load(spec_path, sets)
    lrs = sorted(spec.lrs)
    fixed = [f"widths=[{width}]", f"parametrizations=[{spec.parametrizations[0]}]",
             f"optimizers=[{spec.optimizers[0]}]", f"lrs=[{lrs[len(lrs) // 2]!r}]", f"seeds={list(range(trials))}",
             f"steps={steps}", f"resources.gpu={1 / pack!r}"]
    specs.load(spec_path, [*fixed, *sets])  # what the sweep would refuse, refused here, before any packing runs
    return [sys.executable, "-m", "deltamup", "sweep", str(spec_path), "--out", str(out), "--warm-kernels",
            "--progress-every", "60",
            *(a for s in (*fixed, *sets) for a in ("--set", s))]


def row(sweep: Path) -> list[str]:
    """One packing's Markdown cells from its sweep directory (ValueError where it holds no finished trial)."""
    records = [r for r in store.read_trials(sweep) if r.finished]
    if not records:
        raise ValueError(f"{sweep} holds no finished trial")
    totals = cost.totals(sweep)
    spec = store.read_spec(sweep) or {}
    gpu = (spec.get("resources") or {}).get("gpu")
    at_once = f"{1 / float(gpu):g}" if isinstance(gpu, (int, float)) and gpu else "–"
    warmup = totals.get("warmup_seconds") or 0.0
    steady = totals["tokens"] / (totals["wall_seconds"] - warmup)
    per_trial = statistics.median(r.tokens_per_s for r in records if r.tokens_per_s)
    peaks = [r.peak_memory_gib for r in records if r.peak_memory_gib is not None]
    busy = totals.get("gpu_busy")
    return [at_once, str(len(records)), duration(totals["wall_seconds"]), duration(warmup), f"{steady / 1e3:,.0f}k",
            f"{per_trial / 1e3:,.0f}k", f"{busy:.0f}%" if busy is not None else "–",
            f"{max(peaks):.1f}" if peaks else "–"]


def table(sweeps: list[Path]) -> str:
    """The Markdown table, one row a packing."""
    head = "| " + " | ".join(COLUMNS) + " |\n" + "| --- " * len(COLUMNS) + "|"
    return "\n".join([head, *("| " + " | ".join(row(s)) + " |" for s in sweeps)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run each packing's sweep (GPU), then print the table")
    run.add_argument("spec", type=Path)
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--width", type=int, required=True)
    run.add_argument("--packs", type=int, nargs="+", default=[1, 2, 4])
    run.add_argument("--trials", type=int, default=4)
    run.add_argument("--steps", type=int, default=300)
    run.add_argument("--cache-from", type=Path, help="a compile-cache directory each packing starts from")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    show = sub.add_parser("table", help="the table from packings already run")
    show.add_argument("sweeps", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.command == "table":
        try:
            print(table(args.sweeps))
        except ValueError as error:
            print(f"packing.py: {error}", file=sys.stderr)
            return 2
        return 0
    bad = [k for k in args.packs if k < 1] + ([args.trials] if args.trials < 1 else [])
    if bad or not args.spec.is_file() or (args.cache_from and not args.cache_from.is_dir()):
        what = (f"packs and trials must be ≥ 1 (got {bad})" if bad else
                f"no spec {args.spec}" if not args.spec.is_file() else f"no compile cache {args.cache_from}")
        print(f"packing.py: {what}", file=sys.stderr)
        return 2
    try:
        commands = {k: sweep_args(args.spec, args.out / f"pack{k}", args.width, k, args.trials, args.steps, args.sets)
                    for k in args.packs}
    except ValueError as error:  # SpecError included: one line before any work
        print(f"packing.py: {error}", file=sys.stderr)
        return 2
    done = []
    for pack, command in commands.items():
        out = args.out / f"pack{pack}"
        if args.cache_from and not (out / "compile-cache").exists():
            shutil.copytree(args.cache_from, out / "compile-cache")
        print(f"packing {pack}: {' '.join(command[2:])}", flush=True)
        if subprocess.run([*command, "--resume"]).returncode != 0:
            print(f"packing.py: the sweep of packing {pack} failed; the table holds the packings before it",
                  file=sys.stderr)
            break
        done.append(out)
    if done:
        print(table(done))
    return 0 if len(done) == len(args.packs) else 1


if __name__ == "__main__":
    sys.exit(main())
