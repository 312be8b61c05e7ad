"""A sweep's headline table as Markdown (summary.md in every report): per parametrization and optimizer, the best LR
at each width, the spread and slope in octaves, the best loss from the narrowest to the widest width, and whether
wider is better at the transferred LR — the table a README shows, produced by `deltamup report`, not by hand."""
from __future__ import annotations

import polars as pl

from deltamup.reports.analysis import Analysis

EDGE_SIGN = {"low": "≤ ", "high": "≥ "}  # a bound: the optimum is at or beyond the grid's edge


def _lr(row: dict | None) -> str:
    if row is None or row["best_lr"] is None:
        return "–"
    return f"{EDGE_SIGN.get(row['edge'] or '', '')}{row['best_lr']:.2g}"


def _flag(value: bool | None) -> str:
    return "–" if value is None else "yes" if value else "**no**"


def summary_markdown(a: Analysis) -> str:
    """The table (one row per parametrization × optimizer, widths as columns) and a line on how to read it."""
    if a.transfer.is_empty():
        return "No finished trials yet.\n"
    widths = sorted(a.optima["width"].unique().to_list())
    header = ["parametrization", "optimizer", *(f"best LR @{w}" for w in widths), "spread (octaves)", "slope",
              f"best {a.metric} @{widths[0]} → @{widths[-1]}", "wider better", "… at the base width's LR"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for t in a.transfer.sort("optimizer", "parametrization").iter_rows(named=True):
        mine = a.optima.filter((pl.col("parametrization") == t["parametrization"])
                               & (pl.col("optimizer") == t["optimizer"]))
        rows = {r["width"]: r for r in mine.iter_rows(named=True)}
        losses = [(w, r["best_loss_grid"]) for w, r in sorted(rows.items()) if r["best_loss_grid"] is not None]
        slope = "–" if t["slope"] is None else f"{t['slope']:+.2f}"
        if len(losses) > 1:
            loss = f"{losses[0][1]:.3f} → {losses[-1][1]:.3f}"
        else:
            loss = f"{losses[0][1]:.3f} (@{losses[0][0]} only)" if losses else "–"
        lines.append("| " + " | ".join([
            t["parametrization"], t["optimizer"], *(_lr(rows.get(w)) for w in widths), f"{t['spread_octaves']:.2f}",
            slope, loss, _flag(t["wider_better"]),
            _flag(t["wider_better_at_base_lr"])]) + " |")
    missing = f" {len(a.missing)} of the grid's {a.grid_size} trials have no result yet." if len(a.missing) else ""
    lines += ["", f"Best LR: the vertex of a parabola in log₂ LR through the grid's best LR and its two neighbours "
                  f"(≤ / ≥: the optimum is on the grid's low / high edge, a bound); losses: the grid's best "
                  f"{a.metric} per width; spread and slope: of log₂ best LR over the widths with an optimum "
                  f"(0 is perfect transfer).{missing}"]
    return "\n".join(lines) + "\n"
