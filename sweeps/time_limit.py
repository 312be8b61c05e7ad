"""A sweep's time limit (`deltamup sweep --time-limit SECONDS`). Where something outside cuts the command (a batch
job's wall limit, a lent GPU's ten minutes), a trial that cannot finish before the cut only spends GPU time: its
checkpoint survives only where the next command finds the same machine. With a limit, a trial starts only if the
finished trials of its width say it ends in time; the others report NOT_STARTED, write nothing and stay missing for
`--resume`. A run none of whose trials fits starts no Ray at all.

    expected_seconds(records, cfg)   the longest wall_seconds of the finished trials that trained the trial
                                     config's model (width included; TrialRecord.trained) for its steps, batch and
                                     sequence length: those of its own run where one has finished (they ran as it
                                     will: its GPU, its packing), else those of the latest run that has any; None
                                     without any
    starts_in_time(cfg, deadline, records, now)   now + expected_seconds <= deadline; a trial nothing has timed
                                                  starts

A trial resumed from a checkpoint is timed as a whole one: the limit errs towards not starting it.
"""
from __future__ import annotations

import time
from typing import Any

from deltamup.models import ModelConfig

from .record import TrialRecord

NOT_STARTED = "not_started"  # the status a trial the limit kept from starting reports to Ray Tune (no record)


def expected_seconds(records: list[TrialRecord], cfg: dict[str, Any]) -> float | None:
    """The module docstring's expected_seconds: seconds of wall a trial of `cfg` is expected to take, or None."""
    model = ModelConfig(**cfg["model"])
    timed = [r for r in records if r.finished and r.wall_seconds and r.steps == cfg["train"]["steps"]
             and r.trained(model, cfg["batch_size"], cfg["seq_len"])]
    if not timed:
        return None
    own = [r for r in timed if r.run == cfg["run"]]
    latest = own or [r for r in timed if r.run == max(r.run or 0 for r in timed)]
    return max(r.wall_seconds for r in latest)


def starts_in_time(cfg: dict[str, Any], deadline: float, records: list[TrialRecord], now: float | None = None) -> bool:
    """Whether the trial of config `cfg` may start at `now` (default: the clock) under the limit `deadline` (unix s),
    timed by its sweep directory's `records`."""
    need = expected_seconds(records, cfg)
    return need is None or (time.time() if now is None else now) + need <= deadline
