"""Where a sweep's GPU time goes: each driver run's wall split into phases, with the GPU's busy share in each.

    python3 benchmarks/sweep_idle.py studies/gdn-adamw-8l/sweep

Phases of a run, from runs.jsonl, the trial records and gpu.csv (nvidia-smi's utilisation of the GPUs the run's
trials used, about one sample a second):
- before trials: the driver's start to the first trial's start (Ray, the kernels' and the compile warm-up);
- first steps: from a trial's start to the end of its first step (its process, the model, loading the compiled
  graph, one step), where no other trial is past its own first step;
- training: the rest of the time some trial is running (training, evaluation, checkpoints);
- between trials: inside the first start and the last finish, no trial running;
- after trials: the last finished trial's end to the driver's end line (trials still running when a time limit cut
  the run, which a later run resumes from their checkpoints, and the driver's shutdown);
- runs that finished none: the whole of a run in which no trial finished (cut by a time limit; its GPUs are those
  with samples in it).
Each phase's seconds are summed over runs; its GPU busy is the mean utilisation of the samples that fall in it.
Unused GPU time (GPU-seconds × (1 − busy)) is what a change to that phase can win back.
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from deltamup.console import duration
from deltamup.sweeps import store
from deltamup.sweeps.cost import run_wall_seconds
from deltamup.sweeps.record import TrialRecord

PHASES = ("before trials", "first steps", "training", "between trials", "after trials", "runs that finished none")
Span = tuple[float, float]


def union(spans: Iterable[Span]) -> list[Span]:
    """Sorted, merged intervals."""
    out: list[list[float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def subtract(spans: list[Span], cut: list[Span]) -> list[Span]:
    """spans minus cut (both merged)."""
    out = []
    for a, b in spans:
        for c, d in cut:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
        if a < b:
            out.append((a, b))
    return out


def phase_spans(start: float, end: float, trials: list[TrialRecord]) -> dict[str, list[Span]]:
    """The intervals of each phase of one run [start, end] (PHASES)."""
    ran = [(r.started_at, r.finished_at) for r in trials if r.started_at is not None and r.finished_at is not None]
    if not ran:
        return {**{p: [] for p in PHASES}, "runs that finished none": [(start, end)]}
    first, last = min(a for a, _ in ran), max(b for _, b in ran)
    running = union(ran)
    past_first = union((r.started_at + (r.first_step_seconds or 0.0), r.finished_at) for r in trials
                       if r.started_at is not None and r.finished_at is not None)
    return {"before trials": [(start, first)],
            "first steps": subtract(running, past_first),
            "training": past_first,
            "between trials": subtract([(first, last)], running),
            "after trials": [(last, max(last, end))], "runs that finished none": []}


def phases(sweep: Path) -> dict[str, dict[str, float]]:
    """Per phase, summed over the sweep's runs: seconds, GPU-seconds (× the run's GPUs), busy GPU-seconds and
    samples."""
    runs, trials, samples = store.read_runs(sweep), store.read_trials(sweep), store.read_gpu_samples(sweep)
    out = {p: dict(seconds=0.0, gpu_seconds=0.0, busy_gpu_seconds=0.0, samples=0) for p in PHASES}
    for run in runs:
        mine = [r for r in trials if r.run == run["run"]]
        start = run["started_at"]
        end = start + run_wall_seconds(run, trials)
        gpus = sorted({str(g) for r in mine for g in r.gpu_ids or []}
                      or {g for t, g, _, _ in samples if start <= t <= end})
        if not gpus:
            continue
        spans = phase_spans(start, end, mine)
        here = [(t, u) for t, g, u, _ in samples if g in gpus and start <= t <= end]
        for name, ss in spans.items():
            seconds = sum(b - a for a, b in ss)
            util = [u for t, u in here if any(a <= t < b for a, b in ss)]
            busy = sum(util) / len(util) / 100 if util else 0.0
            out[name]["seconds"] += seconds
            out[name]["gpu_seconds"] += seconds * len(gpus)
            out[name]["busy_gpu_seconds"] += seconds * len(gpus) * busy
            out[name]["samples"] += len(util)
    return out


def table(sweep: Path) -> str:
    """The Markdown table of phases (module docstring)."""
    rows = phases(sweep)
    total = sum(r["gpu_seconds"] for r in rows.values())
    idle = sum(r["gpu_seconds"] - r["busy_gpu_seconds"] for r in rows.values())
    lines = [f"{sweep}: {duration(sum(r['seconds'] for r in rows.values()))} of wall, "
             f"{duration(total)} of GPU time, {1 - idle / total:.0%} busy" if total else f"{sweep}: no GPU samples",
             "", "| phase | wall | share of GPU time | GPU busy | unused GPU time | share of all unused |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, r in rows.items():
        unused = r["gpu_seconds"] - r["busy_gpu_seconds"]
        busy = f"{r['busy_gpu_seconds'] / r['gpu_seconds']:.0%}" if r["samples"] else "–"
        lines.append(f"| {name} | {duration(r['seconds'])} | {r['gpu_seconds'] / total:.0%} | {busy} "
                     f"| {duration(unused)} | {unused / idle:.0%} |" if total and idle else f"| {name} | – |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweeps", nargs="+", type=Path, metavar="SWEEP_DIR")
    args = p.parse_args()
    for sweep in args.sweeps:
        if not store.read_runs(sweep):
            raise SystemExit(f"sweep_idle: error: {sweep} has no runs.jsonl: not a sweep directory")
    print("\n\n".join(table(sweep) for sweep in args.sweeps))


if __name__ == "__main__":
    main()
