"""Every failed attempt's traceback next to the trial's record (results/<trial_id>.attempt<N>.traceback.txt).

run_trial writes the traceback of an exception itself, then raises it to Ray. An attempt that leaves none (its worker
was killed, ran out of memory or lost its node) gets Ray's error text instead, from this Tune callback.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune import Callback

from . import store


class Tracebacks(Callback):
    """Counts a trial's traceback files when an attempt starts; at its failure, writes Ray's text if none was added."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.before: dict[str, int] = {}  # Tune's trial id → traceback files when its attempt started

    @staticmethod
    def _id(trial: Any) -> str:
        return trial.config["trial"]["trial_id"]

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.before[trial.trial_id] = len(store.traceback_paths(self.out, self._id(trial)))

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._failed(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._failed(trial)

    def _failed(self, trial: Any) -> None:
        if len(store.traceback_paths(self.out, self._id(trial))) > self.before.get(trial.trial_id, 0):
            return  # the attempt wrote its own
        text = (trial.get_error() or "(Ray kept no error text)").rpartition("Failure # ")[2]
        store.write_traceback(self.out, self._id(trial),
                              f"the attempt's worker ended without a Python traceback; Ray: Failure # {text.strip()}\n")
