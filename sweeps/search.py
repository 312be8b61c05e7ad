"""`search: optuna`: after the grid, search each (parametrization, optimizer, width)'s learning rate with Optuna.

One persistent study per group in DIR/optuna.db (sqlite; `optuna-dashboard sqlite:///DIR/optuna.db` shows it):

- Warm start: every finished grid trial of the group is added to its study as a completed trial, with its val_loss
  as value and its horizon losses (val_loss_hNN) as intermediate values at their steps. TPE's random start-up
  (optuna.startup_trials) counts these, so the sampler is guided from the first Optuna trial on when the grid has
  at least that many.
- Sampling: lr log-uniform within ± optuna.octaves of the group's best grid LR (refine.grid_centres), and each of
  optuna.hparams (output_mult, embed_mult, init_mult, weight_decay: the base model's other hyperparameters)
  log-uniform in its [lo, hi], jointly with the LR; seed: the grid's first; the objective is the trial's val_loss
  (inf when diverged). The grid trials enter with those hyperparameters at their defaults (1, and the spec's
  weight decay; a decay of 0 is left out: it has no log).
- Pruning: each horizon result a trial reports to Ray Tune is reported to its study (trial.report(val_loss, step));
  when the study's pruner (optuna.pruner: median) says so, the Ray Tune stopper below ends the trial, the study
  records it PRUNED and DIR/results gets a row with status "pruned" (its horizons so far, pruned_step), which is
  not an error and is never rerun.

A Ray Tune Searcher drives all studies at once, so groups run side by side. A resumed sweep reopens the studies:
trials a killed driver left RUNNING are told from their rows in DIR/results (or marked failed), and only the
missing budget (optuna.trials Optuna trials per group, pruned ones included) is run.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import optuna
from ray.tune.search import Searcher

from deltamup.parametrizations.hparams import HPARAMS, BaseHparams
from deltamup.scaling.checkpoint import discard
from deltamup.scaling.train import TrainConfig

from . import store
from .refine import Group, grid_centres, group_of
from .spec import SweepSpec, TrialPoint
from .trial import base_record, trial_config, trial_key
from .tuner import record_ray_errors, run_config, trainable, tune_config

COMPLETE, PRUNED, FAIL, RUNNING = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
                                   optuna.trial.TrialState.FAIL, optuna.trial.TrialState.RUNNING)


def study_name(group: Group) -> str:
    return f"{group[0]}.{group[1]}.w{group[2]}"


def storage_url(out: Path) -> str:
    return f"sqlite:///{(Path(out) / 'optuna.db').resolve()}"


def objective(record: dict[str, Any]) -> float:
    """A finished trial's value for its study: val_loss, inf when diverged (never NaN)."""
    value = record.get("val_loss", math.inf) if record["status"] == "ok" else math.inf
    return value if math.isfinite(value) else math.inf


class StudySearcher(Searcher):
    """Suggests trials for the group with the most budget left, prunes through `prune` (the run's stopper), and
    tells each study its trials' val_loss (inf when diverged), PRUNED, or FAIL (error)."""

    def __init__(self, spec: SweepSpec, out: Path, run: int, centres: dict[Group, float]) -> None:
        super().__init__(metric="train_loss", mode="min")  # in every report; studies get val_loss
        self.spec, self.out, self.run = spec, out, run
        self.horizon_steps = spec.eval.horizon_steps(spec.steps)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.studies = {g: optuna.create_study(study_name=study_name(g), storage=storage_url(out),
                                               direction="minimize", load_if_exists=True,
                                               sampler=self._sampler(run), pruner=self._pruner()) for g in centres}
        span = 2.0 ** spec.optuna.octaves
        self.ranges = {g: optuna.distributions.FloatDistribution(lr / span, lr * span, log=True)
                       for g, lr in centres.items()}
        self.dims = {k: optuna.distributions.FloatDistribution(*spec.optuna.hparams[k], log=True)
                     for k in HPARAMS if k in spec.optuna.hparams}
        defaults = {**vars(BaseHparams()), "weight_decay": spec.train.get("weight_decay", TrainConfig.weight_decay)}
        self.defaults = {k: defaults[k] for k in self.dims if defaults[k] > 0}  # the grid's values, for warm start
        records = store.read_records(out)
        for group, study in self.studies.items():
            self._warm_start(study, [r for r in records if r.get("phase") == "grid" and group_of(r) == group
                                     and r["status"] in ("ok", "diverged")])
            self._settle_stale(study)
        self.remaining = {g: max(0, spec.optuna.trials - len(self._own_trials(study, (COMPLETE, PRUNED))))
                          for g, study in self.studies.items()}
        self.pending: dict[str, tuple[Group, optuna.Trial, dict[str, Any]]] = {}  # Ray Tune trial id → Optuna trial
        self.pruned: dict[str, dict[str, float]] = {}  # Ray trial id → {val_loss_hNN: loss} reported before pruning

    def _sampler(self, run: int) -> optuna.samplers.BaseSampler:
        seed = self.spec.optuna.seed + 1000 * run  # a new stream per invocation: a resume does not repeat LRs
        if self.spec.optuna.sampler == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(n_startup_trials=self.spec.optuna.startup_trials, seed=seed)

    def _pruner(self) -> optuna.pruners.BasePruner:
        if self.spec.optuna.pruner == "none":
            return optuna.pruners.NopPruner()
        return optuna.pruners.MedianPruner(n_startup_trials=self.spec.optuna.pruner_startup_trials,
                                           n_warmup_steps=self.spec.optuna.pruner_warmup_steps)

    @staticmethod
    def _own_trials(study: optuna.Study, states: tuple) -> list[optuna.trial.FrozenTrial]:
        """The study's Optuna-phase trials (not the grid trials it was warm-started with) in `states`."""
        return [t for t in study.get_trials(states=states) if t.user_attrs.get("phase") == "optuna"]

    def _intermediate(self, record: dict[str, Any]) -> dict[int, float]:
        """{step: val_loss_hNN} of a row's finite horizon losses, the last horizon (= its value) left out."""
        columns = list(self.horizon_steps)[:-1]
        return {self.horizon_steps[c]: record[c] for c in columns
                if isinstance(record.get(c), (int, float)) and math.isfinite(record[c])}

    def _warm_start(self, study: optuna.Study, grid: list[dict[str, Any]]) -> None:
        """Adds the finished grid trials the study does not hold yet as completed trials (a grid resumed with more
        seeds or LRs adds its new ones on the next run)."""
        known = {t.user_attrs.get("trial_id") for t in study.get_trials(deepcopy=False)}
        if not grid:
            return
        lrs = [r["lr"] for r in grid]
        wide = optuna.distributions.FloatDistribution(min(lrs), max(lrs), log=True) if min(lrs) < max(lrs) else \
            optuna.distributions.FloatDistribution(min(lrs), min(lrs) * 2, log=True)
        at = {k: optuna.distributions.FloatDistribution(min(self.dims[k].low, v), max(self.dims[k].high, v), log=True)
              for k, v in self.defaults.items()}  # each range widened to hold the grid's default
        study.add_trials([optuna.trial.create_trial(
            params={"lr": r["lr"], **self.defaults}, distributions={"lr": wide, **at}, value=objective(r),
            intermediate_values=self._intermediate(r), user_attrs={"trial_id": r["trial_id"], "phase": "grid"})
            for r in grid if r["trial_id"] not in known])

    def _settle_stale(self, study: optuna.Study) -> None:
        """Trials a killed driver asked for: told from their rows if they finished, else marked failed."""
        for trial in study.get_trials(states=(RUNNING,)):
            record = store.read_record(store.record_path(self.out, trial.user_attrs.get("trial_id", "")))
            self._tell(study, trial.number, record)

    @staticmethod
    def _tell(study: optuna.Study, number: int, record: dict[str, Any] | None) -> None:
        status = (record or {}).get("status")
        if status == "pruned":
            study.tell(number, state=PRUNED)
        elif status in ("ok", "diverged"):
            study.tell(number, objective(record))
        else:
            study.tell(number, state=FAIL)

    def save(self, checkpoint_path: str) -> None:
        """Nothing to save for Ray Tune: the studies are in DIR/optuna.db, the trials in DIR/results."""

    def restore(self, checkpoint_path: str) -> None:
        """See save."""

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
            asked = study.ask({"lr": self.ranges[group], **self.dims})
            hparams = tuple((k, float(f"{asked.params[k]:.6g}")) for k in self.dims)
            point = TrialPoint(*group, float(f"{asked.params['lr']:.6g}"), self.spec.seeds[0], hparams)
            asked.set_user_attr("trial_id", trial_key(point, "optuna"))
            asked.set_user_attr("phase", "optuna")
            record = store.read_record(store.record_path(self.out, trial_key(point, "optuna")))
            if record is None or record["status"] not in store.FINISHED:
                break
            self._tell(study, asked.number, record)
        self.remaining[group] -= 1
        config = trial_config(self.spec, point, self.out, self.run, phase="optuna")
        self.pending[trial_id] = (group, asked, config)
        return {"trial": config}

    def prune(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Ray Tune stopper (called on every result, before the searcher): reports a horizon result's val_loss to
        the trial's study at its step and returns whether the study's pruner stops the trial."""
        if trial_id not in self.pending or "horizon" not in result:
            return False
        _, asked, _ = self.pending[trial_id]
        asked.report(result["val_loss"], result["step"])
        self.pruned.setdefault(trial_id, {})[result["horizon"]] = result["val_loss"]
        if asked.should_prune():
            self.pruned[trial_id]["pruned_step"] = result["step"]
            return True
        return False

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        group, asked, config = self.pending.pop(trial_id)
        seen = self.pruned.pop(trial_id, {})
        if "pruned_step" in seen:
            self.studies[group].tell(asked.number, state=PRUNED)
            step = seen.pop("pruned_step")
            record = base_record(config) | {"status": "pruned", "error": None, "diverged": False, "steps": step,
                                            "pruned_step": step} | seen
            store.write_trial(self.out, record, {c: [] for c in store.CURVE_COLUMNS})
            discard(store.partial_path(self.out, config["trial_id"]))
            return
        status = (result or {}).get("status")
        record = {"status": status, "val_loss": (result or {}).get("val_loss", math.inf)}
        self._tell(self.studies[group], asked.number, None if error else record)


def run_optuna(spec: SweepSpec, out: Path, run: int, progress_every: float) -> int:
    """Runs the Optuna trials the studies still lack; returns how many were launched."""
    from ray import tune

    searcher = StudySearcher(spec, out, run, grid_centres(spec, store.read_records(out)))
    total = searcher.total_remaining
    if total == 0:
        return 0
    tuner = tune.Tuner(trainable(spec), tune_config=tune_config(spec, search_alg=searcher, num_samples=total),
                       run_config=run_config(spec, out, f"run{run}-optuna", searcher.widths(), progress_every,
                                             stop=searcher.prune))
    record_ray_errors(out, tuner.fit())
    return total
