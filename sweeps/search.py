"""`search: optuna`: after the grid, refine each (parametrization, optimizer, width)'s learning rate with Optuna.

One persistent study per group in DIR/optuna.db (sqlite) samples lr log-uniformly within ± `optuna.octaves` of that
group's best grid LR (seed-mean smoothed loss; first seed only for the new trials). A Ray Tune Searcher drives all
studies at once, so groups run side by side. A resumed sweep reopens the studies: trials a killed driver left
RUNNING are told from their rows in DIR/results (or marked failed), and only the missing budget is run.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import optuna
from ray.tune.search import Searcher

from . import store
from .progress import best_lr
from .spec import SweepSpec, TrialPoint
from .trial import trial_config
from .tuner import record_ray_errors, run_config, trainable, tune_config

Group = tuple[str, str, int]  # (parametrization, optimizer, width)


def study_name(group: Group) -> str:
    return f"{group[0]}.{group[1]}.w{group[2]}"


def storage_url(out: Path) -> str:
    return f"sqlite:///{(Path(out) / 'optuna.db').resolve()}"


class StudySearcher(Searcher):
    """Suggests trials for the group with the most budget left; tells each study its trials' smoothed loss
    (inf when diverged: never NaN) or FAIL (error)."""

    def __init__(self, spec: SweepSpec, out: Path, run: int, centres: dict[Group, float]) -> None:
        super().__init__(metric="train_loss", mode="min")  # in every report; studies get the final smoothed_loss
        self.spec, self.out, self.run = spec, out, run
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.studies = {g: optuna.create_study(study_name=study_name(g), storage=storage_url(out),
                                               direction="minimize", load_if_exists=True,
                                               sampler=self._sampler(run)) for g in centres}
        span = 2.0 ** spec.optuna.octaves
        self.ranges = {g: optuna.distributions.FloatDistribution(lr / span, lr * span, log=True)
                       for g, lr in centres.items()}
        for study in self.studies.values():
            self._settle_stale(study)
        self.remaining = {g: max(0, spec.optuna.trials - len(study.get_trials(states=(optuna.trial.TrialState
                                                                                      .COMPLETE,))))
                          for g, study in self.studies.items()}
        self.pending: dict[str, tuple[Group, int]] = {}

    def _sampler(self, run: int) -> optuna.samplers.BaseSampler:
        seed = self.spec.optuna.seed + 1000 * run  # a new stream per invocation: a resume does not repeat LRs
        if self.spec.optuna.sampler == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed)

    def _settle_stale(self, study: optuna.Study) -> None:
        """Trials a killed driver asked for: told from their rows if they finished, else marked failed."""
        for trial in study.get_trials(states=(optuna.trial.TrialState.RUNNING,)):
            record = store.read_record(store.record_path(self.out, trial.user_attrs.get("trial_id", "")))
            if record is not None and record["status"] in store.FINISHED:
                study.tell(trial.number, record["smoothed_loss"])
            else:
                study.tell(trial.number, state=optuna.trial.TrialState.FAIL)

    @property
    def total_remaining(self) -> int:
        return sum(self.remaining.values())

    def widths(self) -> list[int]:
        """One entry per trial still to run (for the progress view)."""
        return [g[2] for g, n in self.remaining.items() for _ in range(n)]

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        open_groups = [g for g, n in self.remaining.items() if n > 0]
        if not open_groups:
            return Searcher.FINISHED
        group = max(open_groups, key=lambda g: self.remaining[g])
        study = self.studies[group]
        while True:  # an LR whose trial already finished (6 significant digits) is told at once, then re-asked
            asked = study.ask({"lr": self.ranges[group]})
            point = TrialPoint(*group, float(f"{asked.params['lr']:.6g}"), self.spec.seeds[0])
            asked.set_user_attr("trial_id", point.key)
            record = store.read_record(store.record_path(self.out, point.key))
            if record is None or record["status"] not in store.FINISHED:
                break
            study.tell(asked, record["smoothed_loss"])
        self.remaining[group] -= 1
        self.pending[trial_id] = (group, asked.number)
        return {"trial": trial_config(self.spec, point, self.out, self.run, phase="optuna")}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        group, number = self.pending.pop(trial_id)
        status = (result or {}).get("status")
        if error or status not in store.FINISHED:
            self.studies[group].tell(number, state=optuna.trial.TrialState.FAIL)
        else:
            loss = result["smoothed_loss"]
            self.studies[group].tell(number, loss if math.isfinite(loss) else math.inf)


def grid_centres(spec: SweepSpec, out: Path) -> dict[Group, float]:
    """Each group's best grid LR; groups whose every grid trial diverged or failed are left out."""
    records = [r for r in store.read_records(out) if r.get("phase") == "grid"]
    centres = {}
    for group in {(p.parametrization, p.optimizer, p.width) for p in spec.grid()}:
        lr, loss = best_lr([r for r in records if (r["parametrization"], r["optimizer"], r["width"]) == group])
        if lr is not None and math.isfinite(loss):
            centres[group] = lr
    return centres


def run_optuna(spec: SweepSpec, out: Path, run: int, progress_every: float) -> int:
    """Runs the Optuna trials the studies still lack; returns how many were launched."""
    from ray import tune

    searcher = StudySearcher(spec, out, run, grid_centres(spec, out))
    total = searcher.total_remaining
    if total == 0:
        return 0
    tuner = tune.Tuner(trainable(spec), tune_config=tune_config(spec, search_alg=searcher, num_samples=total),
                       run_config=run_config(spec, out, f"run{run}-optuna", searcher.widths(), progress_every))
    record_ray_errors(out, tuner.fit())
    return total
