"""What a sweep would run and cost, before it runs (`deltamup sweep SPEC --plan`): per width, the trials its grid
holds and those the sweep directory still lacks, the model's parameters and the tokens a parameter sees, the memory
a trial needs and the GPU share `gpu: auto` would give it, and, where the directory already holds finished trials of
the same model and batch at that width, the GPU time left.

    plan(spec, out) -> one row per width:
        width, trials, left      grid (refinement, Optuna) trials, and those without a finished row in out
        params, tokens_per_param the model's parameters; tokens a trial (steps × batch × sequence) over them
        memory_gib, gpu_share    a trial's estimated peak memory (GiB; sweeps.packing) and the GPU share it asks for
        step_seconds             the measured mean GPU-seconds a step of out's finished trials at this width with
                                 this model (every field the record holds) and batch: a trial's seconds a step × its
                                 GPUs ÷ the trials that shared them with it on average (gpu_step_seconds); a
                                 trial without GPUs counts its own seconds a step. At a width none ran, estimated
                                 from the widths that did, of the same model but for its width (estimated_step,
                                 which errs long outside their range): None where fewer than two did
        step_estimated           whether step_seconds is that estimate
        measured_gib             the most GPU memory one of those trials held (peak_memory_gib); None without
                                 (trials on a CPU, or none yet)
        minutes_left             left × steps × step_seconds / 60: GPU-minutes of training steps (for trials
                                 without GPUs, gpu_share 0: their minutes); None without step_seconds

Nothing is started or written. With `search: optuna` the trials are the grid's and `optuna.trials` more per
(parametrization, optimizer) at each width.
"""
from __future__ import annotations

import bisect
import math
import statistics
from pathlib import Path
from typing import Any

from . import store
from .packing import activation_bytes, gpu_memory_bytes, parameter_count, trial_gpus, trial_memory_bytes
from .record import TrialRecord
from .refine import refine_points
from .runner import missing_grid, missing_refine
from .spec import SweepSpec


def plan(spec: SweepSpec, out: Path) -> list[dict[str, Any]]:
    """The rows of the module docstring, one per width of the spec."""
    points = spec.grid()
    if spec.search == "refine" and out.is_dir():
        points = points + refine_points(spec, store.read_records(out))
    left = (missing_grid(spec, out) + missing_refine(spec, out)) if out.is_dir() else points
    records = store.read_trials(out) if out.is_dir() else []
    gpu_memory = gpu_memory_bytes(spec.resources)
    tokens = spec.steps * spec.batch_size * spec.seq_len
    timed = [r for r in records if r.train_seconds and r.steps]
    same_at = {w: _same_model(spec, w, timed) for w in {r.width for r in timed} | {p.width for p in points}}
    measured = {w: statistics.mean(gpu_step_seconds(r, records) for r in same) for w, same in same_at.items() if same}
    rows = []
    for width in sorted({p.width for p in points}):
        config, same = spec.model_config(width), same_at[width]
        step_seconds = measured.get(width)
        estimated = step_seconds is None and len(measured) >= 2
        if estimated:
            step_seconds = estimated_step({parameter_count(spec.model_config(w)): t for w, t in measured.items()},
                                          parameter_count(config))
        held = [r.peak_memory_gib for r in same if r.peak_memory_gib is not None]
        share = max(trial_gpus(spec, width, o, 1.0, gpu_memory) for o in spec.optimizers)
        n_trials, n_left = sum(p.width == width for p in points), sum(p.width == width for p in left)
        if spec.search == "optuna":  # its trials per (parametrization, optimizer) group, after the grid
            searched = spec.optuna.trials * len(spec.parametrizations) * len(spec.optimizers)
            done = sum(r.phase == "optuna" and r.width == width and r.finished for r in records)
            n_trials, n_left = n_trials + searched, n_left + max(0, searched - done)
        params = parameter_count(config)
        memory = max(trial_memory_bytes(config, o, spec.batch_size, spec.seq_len,
                                        activation=activation_bytes(spec.train, on_gpu=share > 0))
                     for o in spec.optimizers)
        minutes = n_left * spec.steps * step_seconds / 60 if step_seconds is not None else None
        rows.append(dict(
            width=width, trials=n_trials, left=n_left,
            params=params, tokens_per_param=tokens / params,
            memory_gib=memory / 2**30, measured_gib=max(held, default=None), gpu_share=share,
            step_seconds=step_seconds, step_estimated=estimated, minutes_left=minutes))
    return rows


def _same_model(spec: SweepSpec, width: int, timed: list[TrialRecord]) -> list[TrialRecord]:
    """The timed trials that trained the spec's model at `width` on its batches (none where the spec's model
    cannot take that width)."""
    try:
        config = spec.model_config(width)
    except ValueError:
        return []
    return [r for r in timed if r.trained(config, spec.batch_size, spec.seq_len)]


def estimated_step(seconds_at: dict[int, float], params: int) -> float:
    """GPU-seconds a step of a model of `params` parameters, from those measured at other sizes ({params: seconds},
    at least two). Between two measured sizes, linear in log seconds against log params; above the largest,
    proportional to params (a compute-bound step: the measured log-log slope grows with size, towards 1 where the
    GEMMs dominate, so this errs long); below the smallest, the smallest's time (a step's fixed costs: errs long
    as well)."""
    xs = sorted(seconds_at)
    if params >= xs[-1]:
        return seconds_at[xs[-1]] * params / xs[-1]
    if params <= xs[0]:
        return seconds_at[xs[0]]
    i = bisect.bisect_left(xs, params)
    x0, x1, y0, y1 = (math.log(xs[i - 1]), math.log(xs[i]), math.log(seconds_at[xs[i - 1]]),
                      math.log(seconds_at[xs[i]]))
    return math.exp(y0 + (y1 - y0) * (math.log(params) - x0) / (x1 - x0))


def gpu_step_seconds(trial: TrialRecord, records: list[TrialRecord]) -> float:
    """The trial's GPU-seconds a step: its seconds a step × its GPUs ÷ how many trials held each of them on average
    while it ran (itself included; the others' overlap with its last attempt, from the records' node, GPU ids and
    times). Trials that were cut and never finished leave no record, so a trial packed beside one counts alone."""
    seconds = trial.train_seconds / trial.steps
    gpus = {(trial.node_id, g) for g in trial.gpu_ids or []}
    start, end = trial.started_at or 0.0, trial.finished_at or 0.0
    if not gpus or end <= start:
        return seconds
    shared = sum(max(0.0, min(end, r.finished_at or 0.0) - max(start, r.started_at or 0.0))
                 for r in records if r is not trial and gpus & {(r.node_id, g) for g in r.gpu_ids or []})
    return seconds * len(gpus) / (1 + shared / (end - start))


def _estimate(row: dict[str, Any], text: str) -> str:
    """A plan cell, marked where its time is estimated from other widths."""
    return f"{text} (est.)" if row.get("step_estimated") else text


def plan_text(spec: SweepSpec, rows: list[dict[str, Any]]) -> str:
    """The plan as an aligned table with a total line."""
    on_gpus = any(r["gpu_share"] for r in rows)
    unit = "GPU-minutes" if on_gpus else "trial-minutes"
    head = ("width", "trials", "left", "params", "tokens/param", "GiB a trial", "GiB (measured)", "GPU share",
            "GPU-s a step (measured)", f"{unit} left")
    body = [(str(r["width"]), str(r["trials"]), str(r["left"]), f"{r['params'] / 1e6:.3g}M",
             f"{r['tokens_per_param']:.3g}", f"{r['memory_gib']:.1f}",
             f"{r['measured_gib']:.1f}" if r["measured_gib"] is not None else "–", f"{r['gpu_share']:g}",
             _estimate(r, f"{r['step_seconds']:.3f}") if r["step_seconds"] is not None else "–",
             _estimate(r, f"{r['minutes_left']:.1f}") if r["minutes_left"] is not None else "–") for r in rows]
    widths = [max(len(c) for c in column) for column in zip(head, *body)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in (head, *body)]
    known = [r["minutes_left"] for r in rows if r["minutes_left"] is not None and r["left"]]
    guessed = [str(r["width"]) for r in rows if r.get("step_estimated") and r["left"]]
    unmeasured = [str(r["width"]) for r in rows if r["minutes_left"] is None and r["left"]]
    total = (f"{sum(r['left'] for r in rows)} of {sum(r['trials'] for r in rows)} trials left, "
             f"{spec.steps} steps × {spec.batch_size} × {spec.seq_len} tokens a trial")
    if on_gpus:
        total += f", GPU shares for {gpu_memory_bytes(spec.resources) / 1e9:.0f} GB GPUs (resources.gpu_memory_gb)"
    if known:
        where = (f", width {', '.join(guessed)} (est.) timed from the other widths' trials of this model (log "
                 "GPU-s a step against log parameters)" if guessed else " at the measured widths")
        total += (f"; ≈ {sum(known):.1f} {unit} of training steps{where} (evaluation, compile warm-up and the gaps "
                  "between trials come on top)")
    if unmeasured:
        total += f"; no finished trial of this model to time at width {', '.join(unmeasured)}"
    return "\n".join(lines + [total])
