"""Find the optimal learning rate of a sweep per (parametrization, optimizer, width) and measure how well it transfers.

A sweep directory holds spec.yaml, trials.parquet (one row per trial), curves.parquet (losses over steps) and,
while the sweep engine writes it, results/ (one row per finished trial: read first, see sweeps/store.py).

Loss of a trial: `val_loss` when every finished, non-diverged trial of the sweep has one, else `smoothed_loss`;
diverged trials (diverged flag, status "diverged" or a non-finite loss) count as +inf; trials that failed for
another reason (status "error", …) are left out and counted.

lr_curves — one row per (parametrization, optimizer, width, lr):
    loss (seed-mean; +inf when any seed diverged), loss_se (standard error across seeds; null with one seed),
    n_seeds (trials that finished), n_diverged, n_failed.

optima — one row per (parametrization, optimizer, width):
    metric            the loss column used ("val_loss" or "smoothed_loss")
    best_lr           refined optimum: vertex of the parabola in log2(LR) through the grid argmin and its two
                      neighbours (= best_lr_grid where no parabola fits); null when every LR diverged
    best_lr_grid      the measured LR with the lowest seed-mean loss (grid LRs and any an Optuna phase added)
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
    widths, n_bound   widths with an optimum, and how many of those optima are bounds
    spread_octaves    max − min of log2(best_lr) across widths (0 is perfect transfer)
    slope             least-squares slope of log2(best_lr) against log2(width) (0 is perfect transfer; SP ≈ −1)
    max_loss_lost     largest loss_lost over widths (the price of transferring the base width's LR)
    wider_better      best_loss_grid strictly decreases with width (null with fewer than two widths)
    wider_better_at_base_lr   loss_at_base_lr strictly decreases with width, over the widths where the base LR ran
                      (false where it diverged; null with fewer than two such widths): wider is better at the
                      transferred LR
    base_width, base_lr_grid
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from deltamup.sweeps import store
from deltamup.sweeps.spec import parse

KEYS = ["parametrization", "optimizer", "width"]
GRID_KEYS = [*KEYS, "lr", "seed"]
ROUND = 9  # transfer metrics are rounded to 1e-9 octaves: below that the difference is float noise
LR_DIGITS = 9  # LRs are matched on round(log2(lr), LR_DIGITS): a spec's LRs and a trial's may differ by float noise


@dataclass(frozen=True)
class Sweep:
    """A sweep directory's contents: spec (spec.yaml as a dict), trials (trials.parquet), curves (may be None)."""

    path: Path
    spec: dict
    trials: pl.DataFrame
    curves: pl.DataFrame | None


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep directory; ValueError naming what is missing when it is not one. Trials come from the engine's
    results/ (one JSON row per finished trial, so a running sweep's report is current), else trials.parquet."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"sweep directory {path} does not exist")
    spec_file, trials_file, curves_file = path / "spec.yaml", path / "trials.parquet", path / "curves.parquet"
    if not spec_file.is_file():
        raise ValueError(f"{path} is not a sweep directory: no spec.yaml")
    spec = yaml.safe_load(spec_file.read_text()) or {}
    if not isinstance(spec, dict):
        raise ValueError(f"{spec_file} is not a mapping")
    records = store.read_records(path)  # results/: the engine's source of truth, current while a sweep runs
    if records:
        trials = pl.from_arrow(store.rows_table(records, store.ID_COLUMNS))
    elif trials_file.is_file():
        trials = pl.read_parquet(trials_file)
    else:
        trials = pl.DataFrame(schema={"trial_id": pl.String, "parametrization": pl.String, "optimizer": pl.String,
                                      "width": pl.Int64, "lr": pl.Float64, "seed": pl.Int64, "status": pl.String,
                                      "diverged": pl.Boolean, "smoothed_loss": pl.Float64, "val_loss": pl.Float64})
    missing = [c for c in GRID_KEYS if c not in trials.columns]
    if missing:
        raise ValueError(f"{trials_file} lacks the columns {', '.join(missing)}")
    curves = pl.read_parquet(curves_file) if curves_file.is_file() else None
    return Sweep(path, spec, with_hparams_label(trials), curves)


def with_hparams_label(trials: pl.DataFrame) -> pl.DataFrame:
    """Trials of a sweep with hparams axes: each parametrization named with its hparams ("gdn-mup[output_mult=2]",
    sweeps.spec.TrialPoint.label), so that every table tells them apart; others unchanged."""
    if "hparams" not in trials.columns:
        return trials
    hp, name = pl.col("hparams").cast(pl.String).fill_null(""), pl.col("parametrization").cast(pl.String)
    return trials.with_columns(pl.when(hp == "").then(name).otherwise(pl.format("{}[{}]", name, hp))
                               .alias("parametrization"))


def expand_grid(spec: dict) -> pl.DataFrame:
    """Every trial a sweep spec's grid asks for: (parametrization, optimizer, width, lr, seed), the parametrization
    labelled with its hparams as in with_hparams_label. The expansion is the
    sweep engine's own (sweeps.spec.parse(...).grid()), so "missing" means exactly what the engine would still run;
    a malformed spec raises its SpecError (a ValueError naming the field)."""
    points = parse({"name": "sweep", **spec}, open_task=False).grid()
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


def loss_metric(trials: pl.DataFrame) -> str:
    """'val_loss' when every finished, non-diverged trial has a finite one, else 'smoothed_loss'."""
    if "val_loss" not in trials.columns:
        return "smoothed_loss"
    ok = _with_status(trials).filter(_finished() & ~_diverged(trials))
    if ok.is_empty() or not ok["val_loss"].cast(pl.Float64).is_finite().fill_null(False).all():
        return "smoothed_loss"
    return "val_loss"


def _diverged(trials: pl.DataFrame) -> pl.Expr:
    flag = pl.col("diverged").fill_null(False) if "diverged" in trials.columns else pl.lit(False)
    status = (pl.col("status") == "diverged").fill_null(False) if "status" in trials.columns else pl.lit(False)
    return flag | status


def _with_status(trials: pl.DataFrame) -> pl.DataFrame:
    return trials if "status" in trials.columns else trials.with_columns(pl.lit("ok").alias("status"))


def _finished() -> pl.Expr:
    """Trials that ran to an end (ok or diverged); others (error, running, …) are left out of the optimum."""
    return pl.col("status").is_in(["ok", "diverged"]).fill_null(False)


def trial_losses(trials: pl.DataFrame, metric: str | None = None) -> pl.DataFrame:
    """trials with `loss` (+inf for diverged trials) and `failed` (left out of the optimum) columns added."""
    metric = metric or loss_metric(trials)
    trials = _with_status(trials)
    if metric not in trials.columns:
        raise ValueError(f"trials have no {metric!r} column")
    raw = pl.col(metric).cast(pl.Float64)
    diverged = _diverged(trials) | ~raw.is_finite().fill_null(True)
    finished = _finished() | _diverged(trials)
    return trials.with_columns(pl.when(diverged).then(float("inf")).otherwise(raw).alias("loss"),
                               (~finished).alias("failed"))


def lr_curves(trials: pl.DataFrame, metric: str | None = None) -> pl.DataFrame:
    """Seed statistics per (parametrization, optimizer, width, lr): loss, loss_se, n_seeds, n_diverged, n_failed."""
    t = trial_losses(trials, metric)
    used = pl.col("loss").filter(~pl.col("failed"))
    finite = pl.col("loss").filter(~pl.col("failed") & pl.col("loss").is_finite())
    n = (~pl.col("failed")).sum()
    out = t.group_by([*KEYS, "lr"]).agg(
        pl.when(n > 0).then(used.mean()).otherwise(None).alias("loss"),
        pl.when((n > 1) & (n == finite.count())).then(finite.std(ddof=1) / n.sqrt()).otherwise(None)
        .alias("loss_se"),
        n.cast(pl.Int64).alias("n_seeds"),
        (pl.col("loss").is_infinite() & ~pl.col("failed")).sum().cast(pl.Int64).alias("n_diverged"),
        pl.col("failed").sum().cast(pl.Int64).alias("n_failed"),
    )
    return out.sort([*KEYS, "lr"])


def parabola_vertex(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Vertex (x*, y*) of the parabola through three points with x[0] < x[1] < x[2] and y[1] the lowest; None when
    the points are collinear or the parabola opens downwards. x* is kept inside [x[0], x[2]]."""
    if not np.all(np.isfinite(y)):
        return None
    s01, s12 = (y[1] - y[0]) / (x[1] - x[0]), (y[2] - y[1]) / (x[2] - x[1])
    a = (s12 - s01) / (x[2] - x[0])  # y = y[1] + s01·(x − x[1]) + a·(x − x[0])(x − x[1])
    if not a > 0:
        return None
    xv = float(np.clip((x[0] + x[1]) / 2 - s01 / (2 * a), x[0], x[2]))
    return xv, float(y[1] + s01 * (xv - x[1]) + a * (xv - x[0]) * (xv - x[1]))


def _optimum(curve: pl.DataFrame) -> dict:
    """The optimum of one width's seed-mean curve (sorted by lr, failed-only LRs dropped)."""
    lrs, loss = curve["lr"].to_numpy(), curve["loss"].to_numpy().astype(float)
    row = dict(best_lr=None, best_lr_grid=None, log2_best_lr=None, best_loss=None, best_loss_grid=None,
               best_loss_se=None, n_seeds=0, refined=False, bound=False, edge=None, n_lrs=len(lrs),
               n_diverged_lrs=int(np.sum(np.isinf(loss))))
    if len(lrs) == 0 or not np.any(np.isfinite(loss)):
        return row
    i = int(np.argmin(loss))
    x = np.log2(lrs)
    row.update(best_lr_grid=float(lrs[i]), best_loss_grid=float(loss[i]), best_loss_se=curve["loss_se"][i],
               n_seeds=int(curve["n_seeds"][i]), best_lr=float(lrs[i]), best_loss=float(loss[i]))
    if i == 0 or i == len(lrs) - 1:
        # A single LR is a bound on both sides; else the optimum lies at or beyond the end it sits on.
        row.update(bound=True, edge="low" if i == 0 else "high")
    else:
        vertex = parabola_vertex(x[i - 1:i + 2], loss[i - 1:i + 2])
        if vertex is not None:
            row.update(best_lr=float(2.0 ** vertex[0]), best_loss=vertex[1], refined=True)
    row["log2_best_lr"] = math.log2(row["best_lr"])
    return row


def optima(curves: pl.DataFrame, metric: str = "smoothed_loss") -> pl.DataFrame:
    """One row per (parametrization, optimizer, width) from lr_curves' output; columns in the module docstring."""
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
            .group_by(["parametrization", "optimizer"], maintain_order=True)
            .agg(pl.col("width").first().alias("base_width"), pl.col("best_lr_grid").first().alias("base_lr_grid")))
    at_base = curves.filter(pl.col("n_seeds") > 0).select(*KEYS, _lr_key(pl.col("lr")),
                                                          pl.col("loss").alias("loss_at_base_lr"))
    return (table.join(base, on=["parametrization", "optimizer"], how="left")
            .with_columns(_lr_key(pl.col("base_lr_grid")))
            .join(at_base, on=[*KEYS, "lr_key"], how="left").drop("lr_key")
            .with_columns((pl.col("loss_at_base_lr") - pl.col("best_loss_grid")).alias("loss_lost"))
            .sort(KEYS))


def transfer(optimum: pl.DataFrame) -> pl.DataFrame:
    """Transfer metrics per (parametrization, optimizer) from optima(); columns in the module docstring."""
    rows = []
    found = optimum.filter(pl.col("best_lr").is_not_null()).sort(KEYS)
    for (p, o), g in found.group_by(["parametrization", "optimizer"], maintain_order=True):
        x, y = np.log2(g["width"].to_numpy().astype(float)), g["log2_best_lr"].to_numpy()
        lost = g["loss_lost"].drop_nulls()
        rows.append(dict(parametrization=p, optimizer=o, widths=len(g), n_bound=int(g["bound"].sum()),
                         spread_octaves=round(float(y.max() - y.min()), ROUND) + 0.0,  # + 0.0: no −0
                         slope=round(float(np.polyfit(x, y, 1)[0]), ROUND) + 0.0 if len(g) >= 2 else None,
                         max_loss_lost=float(lost.max()) if len(lost) else None,
                         wider_better=_decreasing(g["best_loss_grid"]),
                         wider_better_at_base_lr=_decreasing(g["loss_at_base_lr"]),
                         base_width=int(g["base_width"][0]), base_lr_grid=float(g["base_lr_grid"][0])))
    return pl.DataFrame(rows, schema={"parametrization": pl.String, "optimizer": pl.String, "widths": pl.Int64,
                                      "n_bound": pl.Int64, "spread_octaves": pl.Float64, "slope": pl.Float64,
                                      "max_loss_lost": pl.Float64, "wider_better": pl.Boolean,
                                      "wider_better_at_base_lr": pl.Boolean, "base_width": pl.Int64,
                                      "base_lr_grid": pl.Float64})


def _decreasing(losses: pl.Series) -> bool | None:
    """Whether the losses (ordered by width; nulls, widths where it was not measured, dropped) strictly decrease;
    +inf (diverged) never does. None with fewer than two values."""
    y = losses.drop_nulls().to_numpy().astype(float)
    if len(y) < 2:
        return None
    return bool(np.all(np.isfinite(y)) and np.all(np.diff(y) < 0))


@dataclass(frozen=True)
class Analysis:
    """Everything the report shows: the sweep, its lr curves, optima, transfer metrics and missing trials."""

    sweep: Sweep
    metric: str
    curves: pl.DataFrame
    optima: pl.DataFrame
    transfer: pl.DataFrame
    grid_size: int           # trials the spec's grid asks for
    missing: pl.DataFrame    # grid points without a trial
    failed: pl.DataFrame  # trials left out (status error, …): trial_id, grid keys, status, error


def analyze(sweep: Sweep | str | Path, progress: Callable[[str], None] | None = None) -> Analysis:
    """Optima and transfer metrics of a sweep directory (or a loaded Sweep)."""
    say = progress or (lambda _msg: None)
    if not isinstance(sweep, Sweep):
        say(f"reading {sweep}")
        sweep = load_sweep(sweep)
    grid = expand_grid(sweep.spec)
    missing = missing_trials(grid, sweep.trials)
    say(f"{len(sweep.trials)} trials; {len(missing)} of the spec's {len(grid)} grid trials missing")
    metric = loss_metric(sweep.trials)
    losses = trial_losses(sweep.trials, metric)
    curves = lr_curves(sweep.trials, metric)
    say(f"optimum per width from {metric}")
    table = optima(curves, metric)
    keep = [c for c in ("trial_id", *GRID_KEYS, "status", "error") if c in losses.columns]
    return Analysis(sweep, metric, curves, table, transfer(table), len(grid), missing,
                    losses.filter(pl.col("failed")).select(keep))


def write_tables(analysis: Analysis, out: Path) -> list[Path]:
    """optima.csv/.parquet, transfer.csv/.parquet, lr_curves.csv and missing.csv (when trials are missing)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in (("optima", analysis.optima), ("transfer", analysis.transfer)):
        table.write_parquet(out / f"{name}.parquet")
        table.write_csv(out / f"{name}.csv")
        written += [out / f"{name}.csv", out / f"{name}.parquet"]
    analysis.curves.write_csv(out / "lr_curves.csv")
    written.append(out / "lr_curves.csv")
    if not analysis.missing.is_empty():
        analysis.missing.write_csv(out / "missing.csv")
        written.append(out / "missing.csv")
    return written
