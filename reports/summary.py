"""A sweep's headline as Markdown (summary.md in every report): the generated interpretation paragraph, then per
parametrization and optimizer the verdict, the slope and spread with their 90% intervals, the best LR at each width
with its interval, the best loss from the narrowest to the widest width, and whether wider is better at the
transferred LR; then the parametrizations head to head (reports/head_to_head.py), where trials record horizons
each group's optimum inside the runs, and after an Optuna phase its best trial per group — the table a README
shows, produced by `deltamup report`, not by hand."""
from __future__ import annotations

import polars as pl

from deltamup.reports.analysis import Analysis, mixes
from deltamup.reports.head_to_head import describe
from deltamup.reports.interpretation import interpretation, interval, lr_interval

EDGE_SIGN = {"low": "≤ ", "high": "≥ "}  # a bound: the optimum is at or beyond the grid's edge


def _lr(row: dict | None) -> str:
    if row is None or row["best_lr"] is None:
        return "–"
    span = f" {lr_interval(row.get('best_lr_lo'), row.get('best_lr_hi'))}" if row.get("best_lr_lo") is not None else ""
    return f"{EDGE_SIGN.get(row['edge'] or '', '')}{row['best_lr']:.2g}{span}"


def _flag(value: bool | None) -> str:
    return "–" if value is None else "yes" if value else "**no**"


def summary_markdown(a: Analysis) -> str:
    """The paragraph, the table (one row per parametrization × optimizer, widths as columns) and how to read it."""
    if a.transfer.is_empty():
        return "No finished trials yet.\n"
    widths = sorted(a.optima["width"].unique().to_list())
    header = ["parametrization", "optimizer", "verdict", "slope [90%]", "spread (octaves) [90%]", "seeds",
              *(f"best_lr @{w}" for w in widths), f"best {a.metric} @{widths[0]} → @{widths[-1]}", "wider better",
              "… at the base width's LR"]
    lines = [interpretation(a), "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for t in a.transfer.sort("optimizer", "parametrization").iter_rows(named=True):
        mine = a.optima.filter((pl.col("parametrization") == t["parametrization"])
                               & (pl.col("optimizer") == t["optimizer"]))
        rows = {r["width"]: r for r in mine.iter_rows(named=True)}
        losses = [(w, r["best_loss_grid"]) for w, r in sorted(rows.items()) if r["best_loss_grid"] is not None]
        if len(losses) > 1:
            loss = f"{losses[0][1]:.3f} → {losses[-1][1]:.3f}"
        else:
            loss = f"{losses[0][1]:.3f} (@{losses[0][0]} only)" if losses else "–"
        lines.append("| " + " | ".join([
            t["parametrization"], t["optimizer"], f"**{t['verdict']}**",
            interval(t["slope"], t["slope_lo"], t["slope_hi"]),
            interval(t["spread_octaves"], t["spread_lo"], t["spread_hi"], signed=False),
            f"{t['n_seeds']} ({t['interval_method']})", *(_lr(rows.get(w)) for w in widths), loss,
            _flag(t["wider_better"]), _flag(t["wider_better_at_base_lr"])]) + " |")
    missing = f" {len(a.missing)} of the grid's {a.grid_size} trials have no result yet." if len(a.missing) else ""
    lines += ["", f"Metric: {a.metric}. best_lr: the fitted vertex of a parabola in log₂ LR through the grid's best "
                  f"LR (best_lr_grid, in optima.csv) and its two neighbours (every LR within an octave of it where "
                  f"the grid is finer), on the seed-mean {a.metric}, with its 90% interval in brackets (≤ / ≥: the "
                  f"optimum is on the grid's low / high edge, a bound); seeds: the "
                  f"fewest any width's optimum rests on, and how its interval was made (seeds: bootstrap over "
                  f"seeds; fit: over the fit, with an assumed noise). Losses: the grid's best {a.metric} per width. "
                  f"Every metric's verdict: verdicts.csv.{missing}"]
    adjusted = (a.curves.filter(pl.col("seed_adjusted")).select("parametrization", "optimizer", "width").unique()
                .sort("parametrization", "optimizer", "width"))
    if not adjusted.is_empty():
        where = ", ".join(f"{p}/{o} @{w}" for p, o, w in adjusted.iter_rows())
        lines += ["", f"Seed-adjusted means (the seeds ran different LRs there: each seed's offset, measured on the "
                      f"LRs it shares with the others, is taken out before LRs are compared; lr_curves.csv's "
                      f"seed_adjusted): {where}."]
    lines += [line for mixed in mixes(a.sweep.trials) for line in ("", f"{mixed[0].upper() + mixed[1:]}.")]
    if not a.head_to_head.is_empty():
        lines += ["", f"Head to head ({a.metric}, a − b in nats, paired by seed, 90% intervals; head_to_head.csv):", ""]
        lines += [f"- {describe(r)}" for r in a.head_to_head.iter_rows(named=True)]
        seeds_only = a.head_to_head.filter(pl.col("diff_lo").is_not_null() & pl.col("val_batches").is_null()).height
        if a.metric == "val_loss" and seeds_only:
            lines += ["", f"{seeds_only} of these intervals are over the seeds alone (their trials predate "
                          f"val_batch_losses): every trial is scored on the same validation batches, so those "
                          f"batches' sampling error is common to the seeds and not in them (docs/verdicts.md)."]
    return "\n".join(lines + horizon_lines(a.horizon) + search_lines(a.search)) + "\n"


def search_lines(search: pl.DataFrame) -> list[str]:
    """The Optuna phase's best trial per group beside the grid's best; nothing without a search."""
    if search.is_empty():
        return []
    lines = ["", "The search (search.csv: Optuna after the grid, one seed; hparams: the base values it sampled with "
                 "the LR, – for the defaults):", "",
             "| parametrization | optimizer | width | trials searched | best LR | best hparams | best val_loss | "
             "grid's best LR | grid's best val_loss | gain (nats) |", "|" + " --- |" * 10]
    for r in search.iter_rows(named=True):
        grid = ("–", "–", "–") if r["grid_best_lr"] is None else (
            f"{r['grid_best_lr']:.3g}", f"{r['grid_best_val_loss']:.4f}", f"{r['gain']:+.4f}")
        lines.append("| " + " | ".join([r["parametrization"], r["optimizer"], str(r["width"]), str(r["searched"]),
                                        f"{r['best_lr']:.3g}", r["best_hparams"] or "–",
                                        f"{r['best_val_loss']:.4f}", *grid]) + " |")
    return lines


def horizon_lines(horizon: pl.DataFrame) -> list[str]:
    """The optimum at each horizon per (parametrization, optimizer, width) and its last shift with its 90% interval
    and call (moving / settled / unclear); nothing without a horizon table."""
    if horizon.is_empty():
        return []
    pcts = sorted(horizon["horizon"].unique().to_list())
    header = ["parametrization", "optimizer", "width", *(f"best LR @{p}%" for p in pcts),
              f"shift {pcts[-2]}% → {pcts[-1]}% (octaves) [90%]"]
    lines = ["", "The optimum inside the runs (horizon.csv: the groups whose trials all record every horizon; points "
                 "of one schedule, not shorter runs, so a shift mixes the budget with the schedule's decay):", "",
             "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for (p, o, w), g in horizon.sort("parametrization", "optimizer", "width").group_by(
            ["parametrization", "optimizer", "width"], maintain_order=True):
        at = {r["horizon"]: r for r in g.iter_rows(named=True)}
        lrs = [("bound " if at[h]["bound"] else "") + f"{at[h]['best_lr']:.2g}" if h in at else "–" for h in pcts]
        last = at.get(pcts[-1])
        shift = "–" if last is None or last["shift_octaves"] is None else \
            f"{interval(last['shift_octaves'], last['shift_lo'], last['shift_hi'])}: {last['still_moving']}"
        lines.append("| " + " | ".join([p, o, str(w), *lrs, shift]) + " |")
    return lines
