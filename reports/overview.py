"""Several studies side by side, from their report folders' committed tables (transfer.csv, cost_total.csv): the
spread of the optimal LR in octaves per parametrization and study, whether wider is better at the transferred LR,
and what each study cost.

    deltamup overview studies/gdn-adamw/report studies/gdn-sgd/report studies/gdp2-adamw/report

A study is named after the folder above its report folder when that is called `report` (`deltamup report`'s
default, SWEEP_DIR/report, and the studies/<name>/report layout) or `report-<what>` (then "<name> (<what>)", e.g.
a report restricted with --widths); else after the report folder itself. A study's cost is listed once: a
restricted report of a study already listed is the same sweep.
"""
from __future__ import annotations

from pathlib import Path

import polars as pl

from deltamup.console import duration
from deltamup.reports.analysis import study_name
from deltamup.reports.interpretation import interval


def load(report_dir: str | Path) -> tuple[str, pl.DataFrame, pl.DataFrame]:
    """(study name, transfer table, cost_total table) of a report folder; ValueError naming what is missing."""
    folder = Path(report_dir)
    missing = [n for n in ("transfer.csv", "cost_total.csv") if not (folder / n).is_file()]
    if missing:
        raise ValueError(f"{folder} is not a report folder of this version: no {', '.join(missing)} "
                         "(run deltamup report again)")
    return study_name(folder, "report"), pl.read_csv(folder / "transfer.csv"), pl.read_csv(folder / "cost_total.csv")


def _cell(row: dict | None) -> str:
    """A study's result for one parametrization: the verdict and slope interval (report folders that have them), the
    spread in octaves over how many widths, bounds and the wider-better flag."""
    if row is None:
        return "–"
    bounds = f", {row['n_bound']} bound{'s' * (row['n_bound'] != 1)}" if row["n_bound"] else ""
    wider = {True: "", False: "; wider **not** better at base LR", None: ""}[row["wider_better_at_base_lr"]]
    widths = f"{row['widths']} width{'s' * (row['widths'] != 1)}"
    verdict = ""
    if row.get("verdict") is not None:
        verdict = f"**{row['verdict']}**, slope {interval(row['slope'], row['slope_lo'], row['slope_hi'])}; "
    return f"{verdict}{row['spread_octaves']:.2f} ({widths}{bounds}{wider})"


def overview_markdown(report_dirs: list[str | Path]) -> str:
    """Two tables: spreads (rows: parametrizations; columns: studies) and costs (one row per study)."""
    studies = [load(d) for d in report_dirs]
    names = [name for name, _, _ in studies]
    params = sorted({p for _, t, _ in studies for p in t["parametrization"].to_list()})
    lines = ["| parametrization | " + " | ".join(f"{n}: verdict, slope [90%]; spread (octaves)" for n in names) + " |",
             "|" + " --- |" * (len(names) + 1)]
    for p in params:
        cells = []
        for _, transfer, _ in studies:
            rows = transfer.filter(pl.col("parametrization") == p).to_dicts()
            cells.append(_cell(rows[0] if rows else None))
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += ["", "| study | trials | runs | wall | GPU time | tokens | tokens/s | GPU busy |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    listed: set[str] = set()
    for name, _, cost in studies:
        study = name.split(" (")[0]
        if study in listed:
            continue  # a restricted report of a study above: the same sweep, the same cost
        listed.add(study)
        c = cost.row(0, named=True)
        busy = "–" if c["gpu_busy"] is None else f"{c['gpu_busy']:.0f}%"
        rate = "–" if c["tokens_per_s"] is None else f"{c['tokens_per_s']:,.0f}"
        gpu = duration(c["gpu_seconds"]) if c.get("gpu_seconds") is not None else "–"
        lines.append(f"| {name} | {c['trials']} | {c['runs']} | {duration(c['wall_seconds'])} | {gpu} | "
                     f"{c['tokens']:,} | {rate} | {busy} |")
    lines += ["", "Verdict: from the 90% interval of the slope of log₂ optimal LR against log₂ width (transfers: "
                  "inside ±0.25; drifts: excludes 0; docs/verdicts.md). Spread: max − min of log₂ of the optimal LR "
                  "over the widths with an optimum (0 is perfect transfer; one grid step is 1.00); bounds: optima on "
                  "the LR grid's edge. Wall: the time the "
                  "sweep's runs held the machine; GPU time: each run's wall × the GPUs its trials ran on. From each "
                  "folder's transfer.csv and cost_total.csv (`deltamup report`)."]
    return "\n".join(lines) + "\n"
