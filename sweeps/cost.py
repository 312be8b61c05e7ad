"""What a sweep cost: the wall time its runs held the machine (for a GPU study, its GPU time), tokens and throughput,
overall and per width, from the sweep directory's trial records (results/), runs.jsonl and gpu.csv.

Plain dicts: the sweep driver prints them on the GPU machine, which has no polars (reports/report.py makes the
tables).

totals — one row:
    runs            driver invocations (a resumed sweep has several)
    wall_seconds    their wall time summed (a killed run counts until its last finished trial)
    trials, tokens  finished trial records and the tokens they trained on
    tokens_per_s    tokens / wall_seconds: the sweep's throughput with its trials packed side by side
    gpu_seconds     each run's wall time × the GPUs its trials ran on (null when no trial ran on a GPU): a run
                    given two GPUs costs twice its wall time
    gpu_busy        mean GPU utilisation (%) over the sweep's gpu.csv samples (null without them)
    warmup_seconds  wall time of the runs' compile warm-ups (sweeps.warmup; part of wall_seconds; null without)
    first_step_share  the trials' first_step_seconds summed over their wall_seconds: the share of trial time spent
                    before the first step ended (compile, autotune, one step; null without first_step_seconds)

per_width — one row per width:
    trials, tokens  as above, at that width
    trial_seconds   the trials' training time summed (trials running side by side overlap: this is not wall time)
    tokens_per_s_trial  mean throughput of one trial (tokens / its training seconds)
    gpu_util        mean utilisation (%) of the trial's GPUs while it ran, over its trials (null without samples)
    first_step_seconds  mean over its trials, and first_step_share as above, at that width
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from deltamup.console import duration

from . import store
from .record import TrialRecord


def run_wall_seconds(run: dict[str, Any], records: list[TrialRecord]) -> float:
    """A run's wall time: its end line's, or for a killed run (no end line) until its last finished trial."""
    if "wall_seconds" in run:
        return float(run["wall_seconds"])
    last = max((r.finished_at for r in records if r.run == run["run"] and r.finished_at is not None),
               default=run["started_at"])
    return last - run["started_at"]


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def first_step_share(records: list[TrialRecord]) -> float | None:
    """Σ first_step_seconds / Σ wall_seconds over the records that have both (None without any)."""
    timed = [r for r in records if r.first_step_seconds is not None and r.wall_seconds]
    return sum(r.first_step_seconds for r in timed) / sum(r.wall_seconds for r in timed) if timed else None


def totals(out: str | Path) -> dict[str, Any]:
    """The sweep's cost in one row (columns in the module docstring)."""
    out = Path(out)
    records, runs, samples = store.read_trials(out), store.read_runs(out), store.read_gpu_samples(out)
    walls = {run["run"]: run_wall_seconds(run, records) for run in runs}
    gpus = {number: {g for r in records if r.run == number for g in r.gpu_ids or []} for number in walls}
    wall = sum(walls.values())
    tokens = sum(r.tokens or 0 for r in records)
    warmups = [w["seconds"] for run in runs for k, w in run.items() if k.startswith("warmup_")]
    return dict(runs=len(runs), wall_seconds=wall, trials=len(records), tokens=tokens,
                tokens_per_s=tokens / wall if wall > 0 else None,
                gpu_seconds=sum(walls[n] * len(gpus[n]) for n in walls) if any(gpus.values()) else None,
                gpu_busy=_mean([u for _, _, u, _ in samples]),
                warmup_seconds=sum(warmups) if warmups else None,
                first_step_share=first_step_share(records))


def per_width(out: str | Path) -> list[dict[str, Any]]:
    """The trials' cost per width (columns in the module docstring)."""
    out = Path(out)
    records, samples = store.read_trials(out), store.read_gpu_samples(out)
    rows = []
    for width in sorted({r.width for r in records if r.width is not None}):
        group = [r for r in records if r.width == width]
        utils = [u for r in group if (u := store.trial_gpu_util(r.to_row(), samples)) is not None]
        rows.append(dict(width=width, trials=len(group), tokens=sum(r.tokens or 0 for r in group),
                         trial_seconds=sum(r.train_seconds or 0.0 for r in group),
                         tokens_per_s_trial=_mean([r.tokens_per_s for r in group if r.tokens_per_s]),
                         gpu_util=_mean(utils),
                         first_step_seconds=_mean([r.first_step_seconds for r in group
                                                   if r.first_step_seconds is not None]),
                         first_step_share=first_step_share(group)))
    return rows


def first_step_text(total: dict[str, Any]) -> str:
    """totals' compile cost as text for a summary line: ", compile warm-up 1m35s, 12% of trial time before the
    first step" (the parts it has data for; "" for neither)."""
    warmup = f", compile warm-up {duration(total['warmup_seconds'])}" if total["warmup_seconds"] is not None else ""
    share = total["first_step_share"]
    return warmup + (f", {share:.0%} of trial time before the first step" if share is not None else "")
