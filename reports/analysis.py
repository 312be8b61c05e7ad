"""Find the optimal learning rate of a sweep per (parametrization, optimizer, width), with a 90% interval, and judge
whether it transfers across widths.

A sweep directory holds spec.yaml and results/ (one row per finished trial, the engine's source of truth: see
sweeps/store.py), or only trials.parquet (one row per trial), its merge.

Metric: the loss a table's optimum is found on, named in its `metric` column. The headline metric is `val_loss`
when every finished, non-diverged trial of the sweep has one, else `smoothed_loss` (the EWM of the train loss at
the end); every other complete one (`val_loss`, `smoothed_loss`, `final_train_loss`, and the horizons
`val_loss_h25`, `val_loss_h50`, …: validation loss at that percentage of the steps) gets its own verdict
(verdicts.csv). Diverged trials (diverged flag, status "diverged" or a non-finite loss) count as +inf (at a horizon
only a non-finite value does: a trial may diverge after it), and so does a finite loss above ln V (V the vocabulary),
the loss of the uniform prediction every trial starts near: a run that ends worse than it began has blown up even
where its loss stayed finite, and its value would otherwise pass for a seed's luck in the seed-adjusted means;
trials that failed for another reason (status "error", …) are left out and counted.

lr_curves — one row per (parametrization, optimizer, width, lr):
    metric, loss (seed-mean of `metric`; +inf when any seed diverged), loss_se (standard error across seeds; null
    with one seed), loss_min, loss_max (the seeds' range; null when a seed diverged), n_seeds (trials that
    finished), n_diverged, n_failed, seed_adjusted. Where a width's seeds ran different LRs (3 seeds at the optimum,
    one beside it), `loss` is the seed-adjusted mean and seed_adjusted is true (reports/intervals.py, seed_adjusted):
    each seed's offset, measured on the LRs it shares with the others, is taken out first, so a lucky seed alone at
    one LR does not move the optimum there; with every seed at every LR it is the plain mean.

optima — one row per (parametrization, optimizer, width):
    metric            the loss column the optimum is found on
    best_lr           the fitted optimum: vertex of the parabola in log2(LR) through the grid argmin and its two
                      neighbours (least squares through every LR within an octave of it where the grid is finer), on
                      the seed-mean `metric` (= best_lr_grid where no parabola fits); null when every LR diverged
    best_lr_lo, best_lr_hi   its 90% interval (reports/intervals.py: a bootstrap over seeds, or over the fit);
                      a bound's is open beyond its edge: best_lr_lo 0 at a low edge, best_lr_hi inf at a high one
    interval_method   "seeds" (≥ 3 seeds at best_lr_grid: a bootstrap over seeds) or "fit" (fewer: a bootstrap over
                      the fit, with an assumed noise level)
    fit_noise, fit_noise_from   for "fit", and for "seeds" at a width with LRs fewer than 3 seeds ran (the scatter
                      added there): the noise σ (nats, of one trial's loss) assumed, and where it came from
    scatter_floor, scatter_floored   for "seeds": the seed × LR scatter σ (nats) at this width, pooled over the sweep's
                      parametrizations (one the F test names as scattering more has its own, and the others' pool
                      leaves each such out: intervals.scatter_floors), that sets the least spread of the interval, and
                      whether it set it (the seeds' own bootstrap was narrower); null without it
    scatter_own, scatter_own_dof   this parametrization's own piece of that pool: its seed × LR scatter σ (nats) at
                      this width and its degrees of freedom; null without any (the report names each group whose own
                      is larger than the others' at a width by a step-down F test: intervals.scatter_unlike)
    best_lr_grid      the measured LR with the lowest seed-mean `metric` (grid LRs and any a search phase added)
    log2_best_lr      log2(best_lr)
    best_loss         loss at the refined optimum (parabola value; the grid minimum where not refined)
    best_loss_grid    the lowest seed-mean loss on the grid
    best_loss_se      standard error across seeds at best_lr_grid (null with one seed)
    n_seeds           seeds that finished at best_lr_grid
    refined           whether the parabola refined the optimum
    bound             the optimum is on the grid's edge: a bound on the optimum, not a value (extend the grid)
    edge              "low" | "high" for a bound (the true optimum is at or beyond that end), else null
    n_lrs, n_diverged_lrs   grid LRs measured at that width, and how many of them diverged (any seed)
    base_width        the smallest width of that (parametrization, optimizer): where the LR is tuned
    base_lr_grid      best_lr_grid at base_width
    loss_at_base_lr   seed-mean loss at this width when trained with base_lr_grid (measured, not interpolated;
                      null when that LR was not run at this width)
    loss_lost         loss_at_base_lr − best_loss_grid (0 at the base width; +inf when base_lr_grid diverges here)

transfer — one row per (parametrization, optimizer):
    metric, verdict   transfers | drifts | undetermined (reports/verdict.py), verdict_note: why, in a few words
    slope, slope_lo, slope_hi   least-squares slope of log2(best_lr) against log2(width), octaves per octave of
                      width (0 is perfect transfer; SP ≈ −1), and its 90% interval (bootstrap replicates; ±inf
                      on the side a bound could push it)
    spread_octaves    max − min of log2(best_lr) across widths (0 is perfect transfer)
    spread_lo, spread_hi   the smallest and largest spread the widths' 90% intervals allow (0 when they overlap;
                      max − min of a noisy optimum is biased up, so its own bootstrap would not cover it; inf
                      with a bound)
    n_seeds           the fewest seeds any width's optimum rests on
    interval_method   "seeds" when every width's interval is a seed bootstrap, else "fit"
    widths, n_bound   widths with an optimum, and how many of those optima are bounds
    max_loss_lost     largest loss_lost over widths (the price of transferring the base width's LR)
    wider_better      best_loss_grid strictly decreases with width (null with fewer than two widths)
    wider_better_at_base_lr   loss_at_base_lr strictly decreases with width, over the widths where the base LR ran
                      (false where it diverged; null with fewer than two such widths): wider is better at the
                      transferred LR
    base_width, base_lr_grid
    steps, tokens_per_trial, depth   the budget the verdict was measured at (from the spec)

verdicts — transfer's rows for every complete metric (the headline one first).

horizon — one row per (parametrization, optimizer, width, horizon) for the groups whose trials all record validation
loss at several horizons (horizon_trials: every group, or those run since a sweep began recording them): horizon
(percent of the steps), metric, best_lr, best_lr_lo, best_lr_hi, bound, and the optimum's shift from the previous
horizon (shift_octaves, shift_lo, shift_hi; log2 of the ratio; open where a bound could push it) with
`still_moving` ∈ {moving, settled, unclear} read from the shift's interval like a verdict (±0.25 octave).

search — with an Optuna phase, per (parametrization, optimizer, width): searched (its trials), the best finished
trial over grid and search (best_trial, best_lr, best_hparams, best_val_loss), the grid's best (grid_best_lr,
grid_best_val_loss) and gain (nats). Optuna trials that sampled hparams are in this table only, not in the LR
curves above.
"""
from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from deltamup.sweeps import store
from deltamup.sweeps.record import FIELD_TYPES
from deltamup.sweeps.spec import parse

from . import intervals, verdict
from .head_to_head import SCHEMA as HEAD_TO_HEAD_SCHEMA
from .head_to_head import head_to_head

KEYS = ["parametrization", "optimizer", "width"]
GROUP = ["parametrization", "optimizer"]
GRID_KEYS = [*KEYS, "lr", "seed"]
ROUND = 9  # transfer metrics are rounded to 1e-9 octaves: below that the difference is float noise
LR_DIGITS = 9  # LRs are matched on round(log2(lr), LR_DIGITS): a spec's LRs and a trial's may differ by float noise
METRICS = ("val_loss", "smoothed_loss", "final_train_loss")
HORIZON = re.compile(r"^val_loss_h(\d+)$")  # validation loss at that percentage of the steps; val_loss is 100
DTYPES = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}
# the trial record's typed columns (sweeps/record.py), as polars dtypes: a sweep without trials yet has these
TRIAL_SCHEMA = {name: DTYPES.get(next((a for a in typing.get_args(hint) if a is not type(None)), hint), pl.String)
                for name, hint in FIELD_TYPES.items()}


def study_name(folder: Path, kind: str) -> str:
    """What a study's folder of this kind ("sweep", "report") is called: its parent's name for the folder `kind`
    (studies/gdn-sgd/sweep → gdn-sgd), with the suffix for `kind`-SUFFIX (studies/gdn-adamw-8l/sweep-4l →
    gdn-adamw-8l (4l)); any other folder by its own name."""
    where = folder.resolve()
    if where.name == kind:
        return where.parent.name
    if where.name.startswith(f"{kind}-"):
        return f"{where.parent.name} ({where.name.removeprefix(f'{kind}-')})"
    return where.name


@dataclass(frozen=True)
class Sweep:
    """A sweep directory's contents: spec (spec.yaml as a dict), trials (one row per trial), skipped (damaged result
    files in results/quarantine/ whose trial has no valid record)."""

    path: Path
    spec: dict
    trials: pl.DataFrame
    skipped: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The sweep's name in titles (study_name): gdn-sgd-noclip for studies/gdn-sgd-noclip/sweep."""
        return study_name(self.path, "sweep")


def sources(trials: pl.DataFrame, column: str) -> dict[str | None, int]:
    """Trials per value of a provenance column, most first: "data" (the record's data fingerprint), "code" (the code
    that trained them) or "gpu_name" (the GPU's model); None: not recorded. More than one key: the sweep's trials
    did not all train on the same data, by the same code or on the same GPU model."""
    if trials.is_empty():
        return {}
    values = trials[column] if column in trials.columns else pl.Series(column, [None] * len(trials), dtype=pl.Utf8)
    return dict(values.value_counts(sort=True).iter_rows())


MIXES = (("data", "on the same recorded data (the record's data, a prepared corpus's tokens sha256)"),
         ("code", "trained by the same code (the record's code; `deltamup code DIR` names its commits)"),
         ("gpu_name", "trained on the same GPU model (the record's gpu_name)"))


def mixes(trials: pl.DataFrame) -> list[str]:
    """A line for each provenance column (data, code, gpu_name) whose values differ across the trials, counting the
    trials of each ("not recorded" for none); no line where every trial shares one."""
    lines = []
    for column, what in MIXES:
        counts = sources(trials, column)
        if len(counts) > 1:
            lines.append(f"trials not all {what}: "
                         + ", ".join(f"{k or 'not recorded'} ({n} trials)" for k, n in counts.items()))
    return lines


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep directory; ValueError naming what is missing when it is not one. Trials come from the engine's
    results/ (one record per finished trial, checked against sweeps/record.py's schema, so a running sweep's report
    is current; a damaged one is moved to results/quarantine/ and skipped), else trials.parquet."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"sweep directory {path} does not exist")
    spec_file, trials_file = path / "spec.yaml", path / "trials.parquet"
    if not spec_file.is_file():
        raise ValueError(f"{path} is not a sweep directory: no spec.yaml")
    spec = yaml.safe_load(spec_file.read_text()) or {}
    if not isinstance(spec, dict):
        raise ValueError(f"{spec_file} is not a mapping")
    records = store.read_records(path)  # results/: the engine's source of truth, current while a sweep runs
    if records:
        trials = pl.from_arrow(store.rows_table(records))
    elif trials_file.is_file():
        trials = pl.read_parquet(trials_file)
    else:
        trials = pl.DataFrame(schema=TRIAL_SCHEMA)
    missing = [c for c in GRID_KEYS if c not in trials.columns]
    if missing:
        raise ValueError(f"{trials_file} lacks the columns {', '.join(missing)}")
    return Sweep(path, spec, with_hparams_label(trials), tuple(store.skipped(path)))


def with_hparams_label(trials: pl.DataFrame) -> pl.DataFrame:
    """Trials of a sweep with hparams axes: each parametrization named with its hparams ("gdn-mup[output_mult=2]",
    sweeps.spec.TrialPoint.label), so that every table tells them apart; others unchanged."""
    if "hparams" not in trials.columns:
        return trials
    hp, name = pl.col("hparams").cast(pl.String).fill_null(""), pl.col("parametrization").cast(pl.String)
    return trials.with_columns(pl.when(hp == "").then(name).otherwise(pl.format("{}[{}]", name, hp))
                               .alias("parametrization"))


def restrict(sweep: Sweep, widths: list[int]) -> Sweep:
    """The sweep as if its spec had only these widths (its trials and grid: `only` cells narrowed the same way, a
    cell left without widths dropped); ValueError naming a width without a trial."""
    have = sorted(set(sweep.trials["width"].to_list()))
    absent = [w for w in widths if w not in have]
    if absent:
        raise ValueError(f"no trials at width {absent[0]} in {sweep.path} (widths with trials: "
                         f"{', '.join(map(str, have)) or 'none'})")
    trials = sweep.trials.filter(pl.col("width").is_in(widths))
    spec = {**sweep.spec, "widths": [w for w in sweep.spec.get("widths", widths) if w in widths]}
    if sweep.spec.get("only"):
        cells = [{**c, "widths": [w for w in c["widths"] if w in widths]} if "widths" in c else c
                 for c in sweep.spec["only"]]
        spec["only"] = [c for c in cells if c.get("widths", True)]
        if not spec["only"]:
            spec["widths"] = []  # no cell at these widths: no grid points (expand_grid)
    return dataclasses.replace(sweep, spec=spec, trials=trials)


def expand_grid(spec: dict) -> pl.DataFrame:
    """Every trial a sweep spec's grid asks for: (parametrization, optimizer, width, lr, seed), the parametrization
    labelled with its hparams as in with_hparams_label. The expansion is the
    sweep engine's own (sweeps.spec.parse(...).grid()), so "missing" means exactly what the engine would still run;
    a malformed spec raises its SpecError (a ValueError naming the field). No widths (a restriction to widths the
    spec as last run does not name): no grid points."""
    points = parse({"name": "sweep", **spec}, open_task=False).grid() if spec.get("widths", True) else []
    return pl.DataFrame([dict(parametrization=p.label, optimizer=p.optimizer, width=p.width, lr=p.lr,
                              seed=p.seed) for p in points],
                        schema={"parametrization": pl.String, "optimizer": pl.String, "width": pl.Int64,
                                "lr": pl.Float64, "seed": pl.Int64})


def _lr_key(lr: pl.Expr) -> pl.Expr:
    return lr.log(2).round(LR_DIGITS).alias("lr_key")


def missing_trials(grid: pl.DataFrame, trials: pl.DataFrame) -> pl.DataFrame:
    """The grid points (expand_grid's output) that have no trial yet (a sweep still running, or trials lost)."""
    grid = grid.with_columns(_lr_key(pl.col("lr")))
    done = trials.select(pl.col("parametrization").cast(pl.String), pl.col("optimizer").cast(pl.String),
                         pl.col("width").cast(pl.Int64), _lr_key(pl.col("lr").cast(pl.Float64)),
                         pl.col("seed").cast(pl.Int64)).unique()
    return grid.join(done, on=["parametrization", "optimizer", "width", "lr_key", "seed"], how="anti").drop("lr_key")


def _complete(trials: pl.DataFrame, metric: str) -> bool:
    """Whether every finished, non-diverged trial has a finite `metric`."""
    if metric not in trials.columns:
        return False
    ok = _with_status(trials).filter(_finished() & ~_diverged(trials))
    return not ok.is_empty() and bool(ok[metric].cast(pl.Float64).is_finite().fill_null(False).all())


def loss_metric(trials: pl.DataFrame) -> str:
    """The headline metric: 'val_loss' when every finished, non-diverged trial has a finite one, else
    'smoothed_loss'."""
    return "val_loss" if _complete(trials, "val_loss") else "smoothed_loss"


def horizons(trials: pl.DataFrame) -> list[tuple[int, str]]:
    """(percent of the steps, metric) for each complete horizon, in order (val_loss is 100%); empty unless there
    are at least two."""
    found = {int(m.group(1)): c for c in trials.columns if (m := HORIZON.match(c)) and _complete(trials, c)}
    if _complete(trials, "val_loss"):
        found[100] = "val_loss"
    return sorted(found.items()) if len(found) >= 2 else []


def horizon_trials(trials: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """What the horizon table is computed on: the trials of the (parametrization, optimizer, width) groups whose
    finished trials all record every horizon some trial records, and those horizons (horizons()). Every trial when
    all record them; a sweep that began recording horizons part-way has its later groups (say, a width run since).
    No trials and no horizons when no group has two."""
    columns = [c for c in trials.columns if HORIZON.match(c)] + ["val_loss"]
    whole = [key for key, g in trials.group_by(KEYS, maintain_order=True) if all(_complete(g, c) for c in columns)]
    if len(columns) < 2 or not whole:
        return trials.clear(), []
    subset = trials.join(pl.DataFrame(whole, schema=trials.select(KEYS).schema, orient="row"), on=KEYS, how="semi")
    return subset, horizons(subset)


def metrics(trials: pl.DataFrame) -> list[str]:
    """Every metric a verdict can be computed on: the headline one first, then the other complete METRICS, then the
    horizons."""
    names = [loss_metric(trials)]
    names += [m for m in METRICS if m not in names and _complete(trials, m)]
    return names + [m for _, m in horizons(trials) if m not in names]


def _diverged(trials: pl.DataFrame) -> pl.Expr:
    flag = pl.col("diverged").fill_null(False) if "diverged" in trials.columns else pl.lit(False)
    status = (pl.col("status") == "diverged").fill_null(False) if "status" in trials.columns else pl.lit(False)
    return flag | status


def _blew_up(trials: pl.DataFrame, raw: pl.Expr) -> pl.Expr:
    """A finite loss above ln V (nats; V the record's vocab_size), worse than the uniform prediction."""
    if "vocab_size" not in trials.columns:
        return pl.lit(False)
    return (raw > pl.col("vocab_size").cast(pl.Float64).log()).fill_null(False)


def _with_status(trials: pl.DataFrame) -> pl.DataFrame:
    return trials if "status" in trials.columns else trials.with_columns(pl.lit("ok").alias("status"))


def _finished() -> pl.Expr:
    """Trials that ran to an end (ok or diverged); others (error, pruned, running, …) are left out of the optimum."""
    return pl.col("status").is_in(["ok", "diverged"]).fill_null(False)


def trial_losses(trials: pl.DataFrame, metric: str | None = None) -> pl.DataFrame:
    """trials with `loss` (+inf for diverged trials) and `failed` (left out of the optimum) columns added. At a
    horizon a diverged trial counts as +inf only where its value is not finite (it may diverge later)."""
    metric = metric or loss_metric(trials)
    trials = _with_status(trials)
    if metric not in trials.columns:
        raise ValueError(f"trials have no {metric!r} column")
    raw = pl.col(metric).cast(pl.Float64)
    flagged = _diverged(trials) & (~raw.is_finite().fill_null(True) if HORIZON.match(metric) else pl.lit(True))
    diverged = flagged | ~raw.is_finite().fill_null(True) | _blew_up(trials, raw)
    finished = _finished() | _diverged(trials)
    return trials.with_columns(pl.when(diverged).then(float("inf")).otherwise(raw).alias("loss"),
                               (~finished).alias("failed"))


def lr_curves(trials: pl.DataFrame, metric: str | None = None) -> pl.DataFrame:
    """Seed statistics per (parametrization, optimizer, width, lr): loss, loss_se, loss_min, loss_max, n_seeds,
    n_diverged, n_failed."""
    metric = metric or loss_metric(trials)
    return _curves(trial_losses(trials, metric), metric)


def _curves(t: pl.DataFrame, metric: str) -> pl.DataFrame:
    used = pl.col("loss").filter(~pl.col("failed"))
    finite = pl.col("loss").filter(~pl.col("failed") & pl.col("loss").is_finite())
    n = (~pl.col("failed")).sum()
    out = t.group_by([*KEYS, "lr"]).agg(
        pl.when(n > 0).then(used.mean()).otherwise(None).alias("loss"),
        pl.when((n > 1) & (n == finite.count())).then(finite.std(ddof=1) / n.sqrt()).otherwise(None)
        .alias("loss_se"),
        pl.when((n > 0) & (n == finite.count())).then(finite.min()).otherwise(None).alias("loss_min"),
        pl.when((n > 0) & (n == finite.count())).then(finite.max()).otherwise(None).alias("loss_max"),
        n.cast(pl.Int64).alias("n_seeds"),
        (pl.col("loss").is_infinite() & ~pl.col("failed")).sum().cast(pl.Int64).alias("n_diverged"),
        pl.col("failed").sum().cast(pl.Int64).alias("n_failed"),
    )
    return _seed_adjusted(t, out).with_columns(pl.lit(metric).alias("metric")).sort([*KEYS, "lr"])


def _per_seed(trials: pl.DataFrame, seeds: dict, lrs: dict) -> np.ndarray:
    """(S, L) the trials' `loss` at the seeds' and LRs' indices (seeds: {seed: row}, lrs: {lr: column}); NaN where
    a seed did not run an LR."""
    per_seed = np.full((len(seeds), len(lrs)), np.nan)
    for s, lr, loss in trials.select("seed", "lr", "loss").iter_rows():
        per_seed[seeds[s], lrs[lr]] = loss
    return per_seed


def _seed_adjusted(t: pl.DataFrame, curves: pl.DataFrame) -> pl.DataFrame:
    """curves with `loss` seed-adjusted (intervals.seed_adjusted) at each width whose seeds ran different LRs."""
    done = t.filter(~pl.col("failed"))
    adjusted = []
    for key, g in done.group_by(KEYS):
        seeds = {s: i for i, s in enumerate(sorted(set(g["seed"].to_list())))}
        lrs = {lr: j for j, lr in enumerate(sorted(set(g["lr"].to_list())))}
        per_seed = _per_seed(g, seeds, lrs)
        if intervals.unbalanced(per_seed):
            mean = intervals.seed_adjusted(per_seed, np.ones(len(seeds)))[0]
            adjusted += [dict(zip(KEYS, key), lr=lr, adjusted=float(mean[j])) for lr, j in lrs.items()]
    table = pl.DataFrame(adjusted, schema={"parametrization": pl.String, "optimizer": pl.String, "width": pl.Int64,
                                           "lr": pl.Float64, "adjusted": pl.Float64})
    return (curves.join(table, on=[*KEYS, "lr"], how="left")
            .with_columns(pl.coalesce("adjusted", "loss").alias("loss"),
                          pl.col("adjusted").is_not_null().alias("seed_adjusted")).drop("adjusted"))


EDGES = {-1: "low", 1: "high"}


def _optimum(curve: pl.DataFrame) -> dict:
    """The optimum of one width's seed-mean curve (sorted by lr, failed-only LRs dropped)."""
    lrs, loss = curve["lr"].to_numpy(), curve["loss"].to_numpy().astype(float)
    row = dict(best_lr=None, best_lr_grid=None, log2_best_lr=None, best_loss=None, best_loss_grid=None,
               best_loss_se=None, n_seeds=0, refined=False, bound=False, edge=None, n_lrs=len(lrs),
               n_diverged_lrs=int(np.sum(np.isinf(loss))))
    if len(lrs) == 0 or not np.any(np.isfinite(loss)):
        return row
    v = intervals.vertices(np.log2(lrs), loss)
    i, refined, edge = int(v.index[0]), bool(v.refined[0]), int(v.edge[0])
    row.update(best_lr_grid=float(lrs[i]), best_loss_grid=float(loss[i]), best_loss_se=curve["loss_se"][i],
               n_seeds=int(curve["n_seeds"][i]), best_lr=float(2.0 ** v.x[0]) if refined else float(lrs[i]),
               best_loss=float(v.y[0]), refined=refined, bound=edge != 0, edge=EDGES.get(edge))
    row["log2_best_lr"] = math.log2(row["best_lr"])
    return row


def optima(curves: pl.DataFrame, metric: str = "smoothed_loss") -> pl.DataFrame:
    """Point estimates, one row per (parametrization, optimizer, width) from lr_curves' output (the module
    docstring's optima columns without the intervals: `estimate` adds those)."""
    rows = []
    for key, curve in curves.filter(pl.col("n_seeds") > 0).sort([*KEYS, "lr"]).group_by(KEYS, maintain_order=True):
        rows.append(dict(zip(KEYS, key), metric=metric, **_optimum(curve)))
    schema = {"parametrization": pl.String, "optimizer": pl.String, "width": pl.Int64, "metric": pl.String,
              "best_lr": pl.Float64, "best_lr_grid": pl.Float64, "log2_best_lr": pl.Float64,
              "best_loss": pl.Float64, "best_loss_grid": pl.Float64, "best_loss_se": pl.Float64,
              "n_seeds": pl.Int64, "refined": pl.Boolean, "bound": pl.Boolean, "edge": pl.String,
              "n_lrs": pl.Int64, "n_diverged_lrs": pl.Int64}
    table = pl.DataFrame(rows, schema=schema)
    return _with_loss_lost(table, curves)


def _with_loss_lost(table: pl.DataFrame, curves: pl.DataFrame) -> pl.DataFrame:
    """Adds base_width, base_lr_grid, loss_at_base_lr and loss_lost (see the module docstring)."""
    base = (table.filter(pl.col("best_lr_grid").is_not_null()).sort("width")
            .group_by(GROUP, maintain_order=True)
            .agg(pl.col("width").first().alias("base_width"), pl.col("best_lr_grid").first().alias("base_lr_grid")))
    at_base = curves.filter(pl.col("n_seeds") > 0).select(*KEYS, _lr_key(pl.col("lr")),
                                                          pl.col("loss").alias("loss_at_base_lr"))
    return (table.join(base, on=GROUP, how="left")
            .with_columns(_lr_key(pl.col("base_lr_grid")))
            .join(at_base, on=[*KEYS, "lr_key"], how="left").drop("lr_key")
            .with_columns((pl.col("loss_at_base_lr") - pl.col("best_loss_grid")).alias("loss_lost"))
            .sort(KEYS))


Replicates = dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]  # (p, o) → (widths (W,), log2 optima (B, W))
INTERVAL_SCHEMA = {"best_lr_lo": pl.Float64, "best_lr_hi": pl.Float64, "interval_method": pl.String,
                   "fit_noise": pl.Float64, "fit_noise_from": pl.String, "scatter_floor": pl.Float64,
                   "scatter_floored": pl.Boolean, "scatter_own": pl.Float64, "scatter_own_dof": pl.Int64}


@dataclass(frozen=True)
class Estimate:
    """One metric's lr curves, optima (with intervals) and transfer table, and the bootstrap replicates behind them."""

    metric: str
    curves: pl.DataFrame
    optima: pl.DataFrame
    transfer: pl.DataFrame
    replicates: Replicates


def _widths(group: pl.DataFrame, trials: pl.DataFrame, curves: pl.DataFrame) -> list[intervals.Width]:
    """The measurements behind each optimum of one (parametrization, optimizer): rows of `group` (optima with a
    best_lr, sorted by width); `trials`: that group's finished trials with `loss`."""
    seeds = {s: i for i, s in enumerate(sorted(trials["seed"].unique().to_list()))}
    out = []
    for r in group.iter_rows(named=True):
        curve = curves.filter((pl.col("width") == r["width"]) & (pl.col("n_seeds") > 0)).sort("lr")
        lrs = {lr: j for j, lr in enumerate(curve["lr"].to_list())}
        per_seed = _per_seed(trials.filter(pl.col("width") == r["width"]), seeds, lrs)
        out.append(intervals.Width(np.log2(curve["lr"].to_numpy()), per_seed, curve["loss"].to_numpy().astype(float),
                                   curve["n_seeds"].to_numpy(), r["n_seeds"],
                                   "seeds" if r["n_seeds"] >= intervals.MIN_SEEDS else "fit"))
    return out


def estimate(trials: pl.DataFrame, metric: str | None = None, budget: dict | None = None) -> Estimate:
    """Curves, optima with 90% intervals, and the transfer table with verdicts, on one metric (default: the
    headline one). `budget`: steps, tokens_per_trial, depth, copied into the transfer table."""
    metric = metric or loss_metric(trials)
    losses = trial_losses(trials, metric)
    used = losses.filter(~pl.col("failed"))
    curves = _curves(losses, metric)
    noise, source = intervals.fit_noise(used, curves, KEYS)
    table = optima(curves, metric)
    replicates: Replicates = {}
    extra = []
    found = table.filter(pl.col("best_lr").is_not_null()).sort(KEYS)
    groups = {}
    for (p, o), group in found.group_by(GROUP, maintain_order=True):
        mine = (pl.col("parametrization") == p) & (pl.col("optimizer") == o)
        groups[(p, o)] = group, _widths(group, used.filter(mine), curves.filter(mine))
    own = {(p, o, width): intervals.seed_lr_scatter(w.per_seed, w.curve) for (p, o), (group, widths) in groups.items()
           for width, w in zip(group["width"], widths)}
    floors = intervals.scatter_floors(own)
    for (p, o), (group, widths) in groups.items():
        widths = [dataclasses.replace(w, scatter_floor=floors[(p, o, width)])
                  for w, width in zip(widths, group["width"])]
        reps = intervals.replicate_optima(widths, noise, intervals.rng(p, o), intervals.rng(p, o, metric))
        reps, raised = intervals.with_scatter_floor(widths, reps, intervals.rng(p, o, metric, "floor"))
        replicates[(p, o)] = (group["width"].to_numpy(), reps)
        lows, highs = intervals.interval(reps, group["log2_best_lr"].to_numpy(), [w.method for w in widths])
        for w, width, edge, lo, hi, up in zip(widths, group["width"], group["edge"], lows, highs, raised):
            fit = w.method == "fit" or bool(intervals.thin_scatter(w, noise).any())  # σ assumed somewhere
            lo, hi = intervals.width_interval(lo, hi, edge, w)
            floor = w.scatter_floor[0] if w.method == "seeds" and w.scatter_floor[1] else None
            mine, mine_dof = intervals.pooled_sigma([own[(p, o, width)]])
            extra.append(dict(parametrization=p, optimizer=o, width=width, best_lr_lo=2.0 ** lo, best_lr_hi=2.0 ** hi,
                              interval_method=w.method, fit_noise=noise if fit else None,
                              fit_noise_from=source if fit else None, scatter_floor=floor,
                              scatter_floored=bool(up) if floor is not None else None,
                              scatter_own=mine if mine_dof else None, scatter_own_dof=mine_dof or None))
    table = table.join(pl.DataFrame(extra, schema={"parametrization": pl.String, "optimizer": pl.String,
                                                   "width": pl.Int64, **INTERVAL_SCHEMA}), on=KEYS, how="left")
    at = table.columns.index("best_lr") + 1
    order = [*table.columns[:at], *INTERVAL_SCHEMA, *(c for c in table.columns[at:] if c not in INTERVAL_SCHEMA)]
    table = table.select(order)
    return Estimate(metric, curves, table, transfer(table, replicates, budget or {}), replicates)


TRANSFER_SCHEMA = {"parametrization": pl.String, "optimizer": pl.String, "metric": pl.String,
                   "verdict": pl.String, "slope": pl.Float64, "slope_lo": pl.Float64, "slope_hi": pl.Float64,
                   "spread_octaves": pl.Float64, "spread_lo": pl.Float64, "spread_hi": pl.Float64,
                   "n_seeds": pl.Int64, "interval_method": pl.String, "widths": pl.Int64, "n_bound": pl.Int64,
                   "max_loss_lost": pl.Float64, "wider_better": pl.Boolean, "wider_better_at_base_lr": pl.Boolean,
                   "base_width": pl.Int64, "base_lr_grid": pl.Float64, "steps": pl.Int64,
                   "tokens_per_trial": pl.Int64, "depth": pl.Int64, "verdict_note": pl.String}


def _octaves(value: float | None) -> float | None:
    """Rounded to ROUND digits (+ 0.0: no −0); ±inf (an interval opened by a bound) kept; None for NaN."""
    if value is None or np.isnan(value):
        return None
    return round(float(value), ROUND) + 0.0 if np.isfinite(value) else float(value)


def transfer(optimum: pl.DataFrame, replicates: Replicates, budget: dict) -> pl.DataFrame:
    """Transfer metrics and verdict per (parametrization, optimizer) from estimate()'s optima and replicates;
    columns in the module docstring."""
    rows = []
    found = optimum.filter(pl.col("best_lr").is_not_null()).sort(KEYS)
    for (p, o), g in found.group_by(GROUP, maintain_order=True):
        x, y = np.log2(g["width"].to_numpy().astype(float)), g["log2_best_lr"].to_numpy()
        reps = replicates[(p, o)][1]
        with np.errstate(divide="ignore"):  # a low bound's best_lr_lo is 0: −inf octaves
            lo, hi = np.log2(g["best_lr_lo"].to_numpy()), np.log2(g["best_lr_hi"].to_numpy())
        slope = slope_lo = slope_hi = None
        method = "seeds" if (g["interval_method"] == "seeds").all() else "fit"
        if len(g) >= 2:
            weights = intervals.slope_weights(x)
            slope = float(weights @ y)
            slope_lo, slope_hi = open_as_widths(intervals.interval(reps @ weights, slope, method), weights, lo, hi)
        n_seeds = int(g["n_seeds"].min())
        noise = g["fit_noise"].drop_nulls()
        call, note = verdict.verdict(_octaves(slope_lo), _octaves(slope_hi), n_seeds, method, x, g["edge"].to_list(),
                                     float(noise[0]) if len(noise) else None)
        lost = g["loss_lost"].drop_nulls()
        rows.append(dict(parametrization=p, optimizer=o, metric=g["metric"][0], verdict=call, slope=_octaves(slope),
                         slope_lo=_octaves(slope_lo), slope_hi=_octaves(slope_hi),
                         spread_octaves=_octaves(y.max() - y.min()), spread_lo=_octaves(max(0.0, lo.max() - hi.min())),
                         spread_hi=_octaves(hi.max() - lo.min()), n_seeds=n_seeds, interval_method=method,
                         widths=len(g),
                         n_bound=int(g["bound"].sum()), max_loss_lost=float(lost.max()) if len(lost) else None,
                         wider_better=_decreasing(g["best_loss_grid"]),
                         wider_better_at_base_lr=_decreasing(g["loss_at_base_lr"]),
                         base_width=int(g["base_width"][0]), base_lr_grid=float(g["base_lr_grid"][0]),
                         steps=budget.get("steps"), tokens_per_trial=budget.get("tokens_per_trial"),
                         depth=budget.get("depth"), verdict_note=note))
    return pl.DataFrame(rows, schema=TRANSFER_SCHEMA)


def open_as_widths(interval: tuple[float, float], coefficients: np.ndarray, lows: np.ndarray, highs: np.ndarray
                   ) -> tuple[float, float]:
    """The interval of a linear statistic Σ c_k · x_k of widths' log2 optima, open on each side an open end of a
    width's interval (lows, highs in log2; ∓inf: a bound, or a fit interval at an end of its grid) could push it."""
    below = ["low" if np.isneginf(x) else None for x in lows]
    above = ["high" if np.isposinf(x) else None for x in highs]
    return intervals.open_bounds(*intervals.open_bounds(*interval, coefficients, below), coefficients, above)


def _decreasing(losses: pl.Series) -> bool | None:
    """Whether the losses (ordered by width; nulls, widths where it was not measured, dropped) strictly decrease;
    +inf (diverged) never does. None with fewer than two values."""
    y = losses.drop_nulls().to_numpy().astype(float)
    if len(y) < 2:
        return None
    return bool(np.all(np.isfinite(y)) and np.all(np.diff(y) < 0))


HORIZON_SCHEMA = {"parametrization": pl.String, "optimizer": pl.String, "width": pl.Int64, "horizon": pl.Int64,
                  "metric": pl.String, "best_lr": pl.Float64, "best_lr_lo": pl.Float64, "best_lr_hi": pl.Float64,
                  "bound": pl.Boolean, "shift_octaves": pl.Float64, "shift_lo": pl.Float64, "shift_hi": pl.Float64,
                  "still_moving": pl.String}
MOVING = {"inside": "settled", "excludes_zero": "moving", "unclear": "unclear"}


def horizon_table(estimates: dict[str, Estimate], steps: list[tuple[int, str]]) -> pl.DataFrame:
    """Each width's optimum at each horizon (percent of the steps, metric) and its shift from the previous horizon,
    with the shift's interval from paired replicates (the same seed draws at every horizon)."""
    rows, before = [], {}
    for pct, metric in steps:
        e, now = estimates[metric], {}
        for r in e.optima.filter(pl.col("best_lr").is_not_null()).sort(KEYS).iter_rows(named=True):
            widths, reps = e.replicates[(r["parametrization"], r["optimizer"])]
            key = (r["parametrization"], r["optimizer"], r["width"])
            with np.errstate(divide="ignore"):  # a low bound's best_lr_lo is 0: −inf octaves
                ends = np.log2([r["best_lr_lo"], r["best_lr_hi"]])
            now[key] = (r["log2_best_lr"], reps[:, int(np.flatnonzero(widths == r["width"])[0])], ends,
                        r["interval_method"])
            row = {k: r[k] for k in ("parametrization", "optimizer", "width", "best_lr", "best_lr_lo", "best_lr_hi",
                                     "bound")} | dict(horizon=pct, metric=metric)
            if key in before:
                method = "seeds" if now[key][3] == before[key][3] == "seeds" else "fit"
                ends = np.array([now[key][2], before[key][2]])
                lo, hi = open_as_widths(intervals.interval(now[key][1] - before[key][1],
                                                           now[key][0] - before[key][0], method),
                                        np.array([1.0, -1.0]), ends[:, 0], ends[:, 1])
                row |= dict(shift_octaves=_octaves(now[key][0] - before[key][0]), shift_lo=_octaves(lo),
                            shift_hi=_octaves(hi), still_moving=MOVING[verdict.classify(lo, hi)])
            rows.append(row)
        before = now
    return pl.DataFrame(rows, schema=HORIZON_SCHEMA).sort([*KEYS, "horizon"])


def budget(spec: dict, widths: list[int]) -> dict:
    """What one trial of the sweep trains for: steps, tokens_per_trial (steps × batch × sequence), depth. widths: the
    trials' (the spec as last run may name none of a restriction's widths; the budget does not depend on width)."""
    s = parse({"name": "sweep", **spec, "widths": spec.get("widths") or widths}, open_task=False)
    return dict(steps=s.steps, tokens_per_trial=s.steps * s.batch_size * s.seq_len,
                depth=s.model_config(s.widths[0]).depth)


@dataclass(frozen=True)
class Analysis:
    """Everything the report shows: the sweep, its headline metric's lr curves, optima and transfer table, every
    metric's verdicts, the horizon table, the parametrizations head to head, and missing and failed trials."""

    sweep: Sweep
    metric: str
    curves: pl.DataFrame
    optima: pl.DataFrame
    transfer: pl.DataFrame
    grid_size: int           # trials the spec's grid asks for
    missing: pl.DataFrame    # grid points without a trial
    failed: pl.DataFrame     # trials left out (status error, …): trial_id, grid keys, status, error
    budget: dict = field(default_factory=dict)                 # steps, tokens_per_trial, depth
    estimates: dict[str, Estimate] = field(default_factory=dict)  # every metric's, the headline one first
    verdicts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TRANSFER_SCHEMA))
    horizon: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HORIZON_SCHEMA))
    head_to_head: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HEAD_TO_HEAD_SCHEMA))
    search: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SEARCH_SCHEMA))  # search_table


SEARCH_SCHEMA = {"parametrization": pl.String, "optimizer": pl.String, "width": pl.Int64, "searched": pl.Int64,
                 "best_trial": pl.String, "best_lr": pl.Float64, "best_hparams": pl.String,
                 "best_val_loss": pl.Float64, "grid_best_lr": pl.Float64, "grid_best_val_loss": pl.Float64,
                 "gain": pl.Float64}


def _searched_hparams(trials: pl.DataFrame) -> pl.Expr:
    """Trials of the Optuna phase that sampled hparams (optuna.hparams): points of their own, not of an LR curve."""
    if "phase" not in trials.columns or "hparams" not in trials.columns:
        return pl.lit(False)
    return ((pl.col("phase").cast(pl.String) == "optuna")
            & (pl.col("hparams").cast(pl.String).fill_null("") != "")).fill_null(False)


def search_table(trials: pl.DataFrame) -> pl.DataFrame:
    """For a sweep with an Optuna phase, per (parametrization, optimizer, width): how many trials the search ran
    (pruned ones included), its best finished trial over the grid and the search by val_loss (trial id, LR, hparams
    label, "" for the defaults, val_loss), the grid's best beside it, and the gain (grid best − best, nats). Empty
    without an Optuna phase."""
    if "phase" not in trials.columns or not (trials["phase"].cast(pl.String) == "optuna").any():
        return pl.DataFrame(schema=SEARCH_SCHEMA)
    base = pl.col("parametrization").cast(pl.String).str.replace(r"\[.*\]$", "")
    hparams = pl.col("hparams").cast(pl.String).fill_null("") if "hparams" in trials.columns else pl.lit("")
    trials = trials.with_columns(base.alias("parametrization"), hparams.alias("hparams"),
                                 pl.col("phase").cast(pl.String))
    ok = trials.filter((pl.col("status") == "ok") & pl.col("val_loss").cast(pl.Float64).is_finite().fill_null(False))
    rows = []
    for (p, o, w), g in trials.sort(KEYS).group_by(KEYS, maintain_order=True):
        done = ok.filter((pl.col("parametrization") == p) & (pl.col("optimizer") == o) & (pl.col("width") == w))
        if done.is_empty():
            continue
        best = done.sort("val_loss").row(0, named=True)
        row = dict(parametrization=p, optimizer=o, width=w, searched=int((g["phase"] == "optuna").sum()),
                   best_trial=best["trial_id"], best_lr=best["lr"], best_hparams=best["hparams"],
                   best_val_loss=best["val_loss"])
        grid = done.filter(pl.col("phase") == "grid").sort("val_loss")
        if grid.height:
            row |= dict(grid_best_lr=grid["lr"][0], grid_best_val_loss=grid["val_loss"][0],
                        gain=grid["val_loss"][0] - best["val_loss"])
        rows.append(row)
    return pl.DataFrame(rows, schema=SEARCH_SCHEMA)


def analyze(sweep: Sweep | str | Path, progress: Callable[[str], None] | None = None) -> Analysis:
    """Optima, intervals and verdicts of a sweep directory (or a loaded Sweep), on every complete metric. Optuna
    trials that sampled hparams are left out of the LR curves (each is a point of its own hparams) and reported in
    the search table with the rest of the search."""
    say = progress or (lambda _msg: None)
    if not isinstance(sweep, Sweep):
        say(f"reading {sweep}")
        sweep = load_sweep(sweep)
    searched = search_table(sweep.trials)
    sweep = dataclasses.replace(sweep, trials=sweep.trials.filter(~_searched_hparams(sweep.trials)))
    grid = expand_grid(sweep.spec)
    missing = missing_trials(grid, sweep.trials)
    say(f"{len(sweep.trials)} trials; {len(missing)} of the spec's {len(grid)} grid trials missing")
    spent = budget(sweep.spec, sorted(set(sweep.trials["width"].to_list())))
    names = metrics(sweep.trials)
    say(f"optimum per width with 90% intervals from {names[0]} (also: {', '.join(names[1:]) or 'nothing else'})")
    estimates = {m: estimate(sweep.trials, m, spent) for m in names}
    main = estimates[names[0]]
    losses = trial_losses(sweep.trials, names[0])
    timed, steps = horizon_trials(sweep.trials)
    if steps and timed.height < sweep.trials.height:  # the groups that record every horizon, estimated on their own
        say(f"horizons: {timed.height} of {sweep.trials.height} trials record all of them")
        by_horizon = {m: estimate(timed, m, spent) for _, m in steps}
    else:
        by_horizon = estimates
    keep = [c for c in ("trial_id", *GRID_KEYS, "status", "error") if c in losses.columns]
    return Analysis(sweep, main.metric, main.curves, main.optima, main.transfer, len(grid), missing,
                    losses.filter(pl.col("failed")).select(keep), spent, estimates,
                    pl.concat([e.transfer for e in estimates.values()]),
                    horizon_table(by_horizon, steps), head_to_head(losses, main.optima), searched)


def write_tables(analysis: Analysis, out: Path) -> list[Path]:
    """optima, transfer and verdicts (.csv and .parquet), lr_curves.csv, horizon.csv (when trials record
    horizons), head_to_head.csv (when two parametrizations share an optimizer), search.csv (with an Optuna phase)
    and missing.csv (when trials are missing); an optional table left in `out` by an earlier report is removed when
    it is empty now (a finished sweep's report lists no missing trials)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in (("optima", analysis.optima), ("transfer", analysis.transfer),
                        ("verdicts", analysis.verdicts)):
        table.write_parquet(out / f"{name}.parquet")
        table.write_csv(out / f"{name}.csv")
        written += [out / f"{name}.csv", out / f"{name}.parquet"]
    for name, table in (("lr_curves", analysis.curves), ("horizon", analysis.horizon),
                        ("head_to_head", analysis.head_to_head), ("search", analysis.search),
                        ("missing", analysis.missing)):
        if name == "lr_curves" or not table.is_empty():
            table.write_csv(out / f"{name}.csv")
            written.append(out / f"{name}.csv")
        else:
            (out / f"{name}.csv").unlink(missing_ok=True)
    return written
