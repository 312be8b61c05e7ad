"""A sweep's time limit (`deltamup sweep --time-limit SECONDS`). Where something outside cuts the command (a batch
job's wall limit, a lent GPU's ten minutes), a trial that cannot finish before the cut only spends GPU time: its
checkpoint survives only where the next command finds the same machine. With a limit, a trial starts only if the
finished trials of its width say it ends in time; the others report NOT_STARTED, write nothing and stay missing for
`--resume`. A run none of whose trials fits starts no Ray at all, nor the work beside its start (the CLI's kernel
check: sweeps.runner.run_sweep).

    expected_seconds(records, cfg, share)   the longest wall_seconds of the finished trials that trained the
                                     trial config's model (width included; TrialRecord.trained) for its steps, batch
                                     and sequence length: those of its own run where one has finished (they ran as
                                     it will: its GPU, its packing), else those of the latest run at its GPU share
                                     (`share`, what Ray gave it), else of the latest run with any, each stretched by
                                     its recorded share over `share` where that is larger (a trial on half the GPU
                                     one had alone takes up to twice as long); None without any
    starts_in_time(cfg, deadline, records, now, share)   now + expected_seconds <= deadline; a trial nothing has
                                                         timed starts

A trial resumed from a checkpoint is timed as a whole one: the limit errs towards not starting it. Records older
than `gpu_share` have no share and are not stretched (docs/sweeps.md, what that costs a packed trial).
"""
from __future__ import annotations

import time
from typing import Any

from deltamup.models import ModelConfig

from .record import TrialRecord

NOT_STARTED = "not_started"  # the status a trial the limit kept from starting reports to Ray Tune (no record)


def expected_seconds(records: list[TrialRecord], cfg: dict[str, Any], share: float | None = None) -> float | None:
    """The module docstring's expected_seconds: seconds of wall a trial of `cfg` given `share` of a GPU (None: none,
    or not known) is expected to take, or None."""
    model = ModelConfig(**cfg["model"])
    timed = [r for r in records if r.finished and r.wall_seconds and r.steps == cfg["train"]["steps"]
             and r.trained(model, cfg["batch_size"], cfg["seq_len"])]
    if not timed:
        return None
    own = [r for r in timed if r.run == cfg["run"]]
    if own:
        return max(r.wall_seconds for r in own)
    alike = [r for r in timed if share is not None and r.gpu_share == share] or timed
    latest = [r for r in alike if r.run == max(r.run or 0 for r in alike)]
    return max(r.wall_seconds * (max(1.0, (r.gpu_share or 0.0) / share) if share else 1.0) for r in latest)


def starts_in_time(cfg: dict[str, Any], deadline: float, records: list[TrialRecord], now: float | None = None,
                   share: float | None = None) -> bool:
    """Whether the trial of config `cfg`, given `share` of a GPU, may start at `now` (default: the clock) under the
    limit `deadline` (unix s), timed by its sweep directory's `records`."""
    need = expected_seconds(records, cfg, share)
    return need is None or (time.time() if now is None else now) + need <= deadline
