"""What each run of a sweep did with its machine: one Markdown row per driver invocation (a resumed sweep has
several), from the sweep directory's trial records, runs.jsonl and gpu.csv (the files `deltamup report`'s cost
tables come from, split by run).

    python3 benchmarks/sweep_runs.py studies/gdn-adamw/sweep studies/gdn-sgd/sweep studies/gdp2-adamw/sweep

Columns: widths and trials of the run, the GPUs its trials used, wall time, tokens, tokens/s overall (tokens / wall),
GPU busy (mean nvidia-smi utilisation of those GPUs over the run's samples), median tokens/s of one trial per
width, whether the trials were compiled, the run's compile warm-up and the share of its trials' wall time spent
before their first step ended (docs/sweeps-compile.md; – for runs that predate them).
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from deltamup.console import duration
from deltamup.sweeps import store
from deltamup.sweeps.cost import first_step_share, run_wall_seconds

COLUMNS = ("sweep", "run", "widths", "trials", "GPUs", "compiled", "wall", "tokens", "tokens/s overall", "GPU busy",
           "tokens/s per trial (median, by width)", "warm-up", "before 1st step")
HEADER = "| " + " | ".join(COLUMNS) + " |\n" + "| --- " * len(COLUMNS) + "|"


def rows(sweep: Path) -> list[str]:
    """The Markdown rows of one sweep directory, one per run; ValueError when it has no runs.jsonl."""
    runs = store.read_runs(sweep)
    if not runs:
        raise ValueError(f"{sweep} has no runs.jsonl: not a sweep directory")
    records, samples, trials = store.read_records(sweep), store.read_gpu_samples(sweep), store.read_trials(sweep)
    name = sweep.parent.name if sweep.name == "sweep" else sweep.name
    out = []
    for run in sorted(runs, key=lambda r: r["run"]):
        mine = [r for r in records if r.get("run") == run["run"]]
        if not mine:
            continue
        wall = run_wall_seconds(run, trials)
        gpus = sorted({str(g) for r in mine for g in r.get("gpu_ids") or []})
        end = run["started_at"] + wall
        busy = [u for t, g, u, _ in samples if g in gpus and run["started_at"] <= t <= end]
        tokens = sum(r.get("tokens") or 0 for r in mine)
        widths = sorted({r["width"] for r in mine})
        rates = {w: [r["tokens_per_s"] for r in mine if r["width"] == w and r.get("tokens_per_s")] for w in widths}
        per_width = " / ".join(f"{statistics.median(rates[w]) / 1e3:.0f}k" if rates[w] else "–" for w in widths)
        compiled = {bool(r.get("compile")) for r in mine}
        warmups = [w["seconds"] for k, w in run.items() if k.startswith("warmup_")]
        share = first_step_share([r for r in trials if r.run == run["run"]])
        out.append(f"| {name} | {run['run']} | {', '.join(map(str, widths))} | {len(mine)} | {len(gpus)} "
                   f"| {'yes' if compiled == {True} else 'no' if compiled == {False} else 'mixed'} | {duration(wall)} "
                   f"| {tokens / 1e6:.1f}M | {tokens / wall / 1e3:.0f}k "
                   f"| {f'{statistics.fmean(busy):.0f}%' if busy else '–'} | {per_width} "
                   f"| {duration(sum(warmups)) if warmups else '–'} | {'–' if share is None else f'{share:.0%}'} |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweeps", nargs="+", type=Path, metavar="SWEEP_DIR")
    args = p.parse_args()
    try:
        lines = [line for sweep in args.sweeps for line in rows(sweep)]
    except ValueError as e:
        raise SystemExit(f"sweep_runs: error: {e}") from None
    print("\n".join([HEADER, *lines]))


if __name__ == "__main__":
    main()
