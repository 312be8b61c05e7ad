"""A sweep's time limit (`deltamup sweep --time-limit SECONDS`). Where something outside cuts the command (a batch
job's wall limit, a lent GPU's ten minutes), a trial that cannot finish before the cut only spends GPU time: its
checkpoint survives only where the next command finds the same machine. With a limit, a trial starts only if the
finished trials of its width say it ends in time; the others report NOT_STARTED, write nothing and stay missing for
`--resume`. A run none of whose trials fits starts no Ray at all.

    trial_seconds(records, cfg)   the longest wall_seconds of the sweep directory's finished trials at the trial
                                  config's width with its model, steps, batch and sequence length: those of its own
                                  run where one has finished (they ran as it will: its GPU, its packing), else those
                                  of the latest run that has any; None without any
    starts_in_time(out, cfg, deadline, now)   now + trial_seconds <= deadline; a trial nothing has timed starts

A trial resumed from a checkpoint is timed as a whole one: the limit errs towards not starting it.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from . import store
from .record import TrialRecord

NOT_STARTED = "not_started"  # the status a trial the limit kept from starting reports to Ray Tune (no record)


def same_model(record: TrialRecord, cfg: dict[str, Any]) -> bool:
    """Whether `record` trained the model, steps, batch and sequence length of trial config `cfg`."""
    return (record.width == cfg["point"]["width"] and record.steps == cfg["train"]["steps"]
            and all(cfg["model"].get(k) == v for k, v in record.model.items())
            and (record.config.get("batch_size"), record.config.get("seq_len")) == (cfg["batch_size"],
                                                                                   cfg["seq_len"]))


def trial_seconds(records: list[TrialRecord], cfg: dict[str, Any]) -> float | None:
    """The module docstring's trial_seconds: seconds of wall a trial of `cfg` is expected to take, or None."""
    timed = [r for r in records if r.finished and r.wall_seconds and same_model(r, cfg)]
    if not timed:
        return None
    own = [r for r in timed if r.run == cfg["run"]]
    latest = own or [r for r in timed if r.run == max(r.run or 0 for r in timed)]
    return max(r.wall_seconds for r in latest)


def starts_in_time(out: Path, cfg: dict[str, Any], deadline: float, now: float | None = None) -> bool:
    """Whether the trial of config `cfg` may start at `now` (default: the clock) under the limit `deadline` (unix s)."""
    need = trial_seconds(store.read_trials(out), cfg)
    return need is None or (time.time() if now is None else now) + need <= deadline
