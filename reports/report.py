"""Build a sweep's report: tables, figures and index.html.

    report = build_report("runs/gdn-adamw")          # writes runs/gdn-adamw/report/index.html, …
    report = build_report(sweep_dir, out, coord_checks=["runs/cc-gdn-mup"])

Coordinate-check directories (`deltamup coord-check --out DIR`) inside the sweep directory are found by themselves.
"""
from __future__ import annotations

import html as _html
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from deltamup.console import duration
from deltamup.reports.analysis import Analysis, analyze, load_sweep, mixes, restrict, write_tables
from deltamup.sweeps import cost
from deltamup.sweeps.cost import first_step_text

from . import coord, html, plots
from .interpretation import interpretation
from .summary import summary_markdown

# cost_total.csv and cost.csv (the columns are sweeps/cost.py's)
COST_TOTAL_SCHEMA = {"runs": pl.Int64, "wall_seconds": pl.Float64, "trials": pl.Int64, "tokens": pl.Int64,
                     "tokens_per_s": pl.Float64, "gpu_seconds": pl.Float64, "gpu_busy": pl.Float64,
                     "warmup_seconds": pl.Float64, "first_step_share": pl.Float64}
COST_SCHEMA = {"width": pl.Int64, "trials": pl.Int64, "tokens": pl.Int64, "trial_seconds": pl.Float64,
               "tokens_per_s_trial": pl.Float64, "gpu_util": pl.Float64, "first_step_seconds": pl.Float64,
               "first_step_share": pl.Float64}

OPTIMA_SHOWN = ["parametrization", "optimizer", "width", "metric", "best_lr", "best_lr_lo", "best_lr_hi",
                "interval_method", "best_lr_grid", "best_loss", "best_loss_se", "n_seeds", "refined", "bound", "edge",
                "n_diverged_lrs", "loss_lost"]
VERDICTS_SHOWN = ["parametrization", "optimizer", "metric", "verdict", "slope", "slope_lo", "slope_hi",
                  "spread_octaves", "spread_lo", "spread_hi", "n_seeds", "interval_method"]


@dataclass(frozen=True)
class Report:
    out: Path
    page: Path
    analysis: Analysis
    files: list[Path]


def find_coord_checks(sweep_dir: Path) -> list[Path]:
    """Directories under the sweep directory (two levels deep) that hold a coordinate check."""
    return sorted({p.parent for pattern in ("*/coords.parquet", "*/*/coords.parquet")
                   for p in sweep_dir.glob(pattern) if (p.parent / "slopes.csv").is_file()})


def _status(a: Analysis) -> str:
    t = a.sweep.trials
    counts = (t["status"].value_counts().sort("status").iter_rows() if "status" in t.columns else [("ok", len(t))])
    summary = ", ".join(f"{n} {s}" for s, n in counts)
    parts = [f"<p>{len(t)} trials ({summary or 'none yet'}); optimum (best_lr) from <b>{a.metric}</b>, the seed-mean "
             "per LR (a diverged seed makes its LR diverged), refined by a parabola in log2(LR); best_lr_grid is the "
             "grid point with the lowest seed-mean.</p>"]
    if a.missing.is_empty():
        parts.append('<p class="ok">Every trial of the spec\'s grid has a result.</p>')
    else:
        parts.append(f'<p class="note">The sweep is incomplete: {len(a.missing)} of {a.grid_size} grid trials have no '
                     "result yet (still running, or lost). Optima below use the trials that finished.</p>"
                     + html.table(a.missing))
    if a.sweep.skipped:
        parts.append(f'<p class="note">Skipped {len(a.sweep.skipped)} damaged result file(s), moved to '
                     f"results/quarantine/ (their trials count as missing; --resume reruns them): "
                     f"{_html.escape(', '.join(a.sweep.skipped))}</p>")
    parts += [f'<p class="note">{_html.escape(line[0].upper() + line[1:])}.</p>' for line in mixes(a.sweep.trials)]
    if not a.failed.is_empty():
        parts.append('<p class="note">Failed trials (errors, not divergence; left out of the optima): '
                     f'{len(a.failed)}</p>'
                     + html.table(a.failed))
    bounds = a.optima.filter(pl.col("bound"))
    if not bounds.is_empty():
        where = ", ".join(f"{r['parametrization']}/{r['optimizer']} @{r['width']} ({r['edge']})"
                          for r in bounds.iter_rows(named=True))
        parts.append(f'<p class="note">Optima on the grid\'s edge are bounds, not values — extend the LR grid: '
                     f"{_html.escape(where)}.</p>")
    return "".join(parts)


def _cost(spent: pl.DataFrame, per_width: pl.DataFrame) -> str:
    t = spent.row(0, named=True)
    busy = f", GPU busy {t['gpu_busy']:.0f}%" if t["gpu_busy"] is not None else ""
    gpu = f" = {duration(t['gpu_seconds'])} of GPU time" if t["gpu_seconds"] is not None else ""
    return (f"<p>{t['trials']} trials in {t['runs']} run(s), wall {duration(t['wall_seconds'])} "
            f"({t['wall_seconds']:.0f} s: the time the sweep held the machine{gpu}), {t['tokens']:,} tokens, "
            f"{t['tokens_per_s'] or 0:,.0f} tokens/s overall{busy}{first_step_text(t)}. Per width: trial_seconds "
            "sums the trials' training time (side-by-side trials overlap); tokens_per_s_trial is one trial's "
            "throughput; first_step_share is the share of the trials' wall time spent before their first step "
            "ended (compile, autotune, one step). Tables: cost_total.csv, cost.csv.</p>" + html.table(per_width))


HEAD_TO_HEAD_NOTE = ("diff: {metric} of a minus b (nats), paired by seed, with its 90% interval (Student's t over "
                     "the seeds' differences); at own best: each at its own best grid LR at that width; at base LR: "
                     "each at the LR that was best for it at the base width (tuned there, transferred). better: "
                     "the one the interval shows lower, or neither. edge_a, edge_b: low or high where that side's "
                     "own best is its grid's lowest or highest LR (its optimum may lie beyond: provisional). Table: "
                     "head_to_head.csv.")


def build_report(sweep_dir: str | Path, out: str | Path | None = None, coord_checks: Iterable[str | Path] = (),
                 progress: Callable[[str], None] | None = None, widths: list[int] | None = None) -> Report:
    """Analyse the sweep and write tables, figures and index.html to `out` (default SWEEP_DIR/report); widths: only
    these of the sweep's widths (analysis.restrict; the cost tables stay the whole directory's)."""
    say = progress or (lambda _msg: None)
    sweep_dir = Path(sweep_dir)
    out = Path(out) if out is not None else sweep_dir / "report"
    checks = [coord.load(p) for p in [*coord_checks, *find_coord_checks(sweep_dir)]]  # bad input fails first
    sweep = load_sweep(sweep_dir)
    if widths:
        sweep = restrict(sweep, widths)
        say(f"widths {', '.join(map(str, widths))} only")
    a = analyze(sweep, progress=say)
    files = write_tables(a, out)
    (out / "summary.md").write_text(summary_markdown(a))
    files.append(out / "summary.md")
    spent = pl.DataFrame([cost.totals(sweep_dir)], schema=COST_TOTAL_SCHEMA)
    per_width = pl.DataFrame(cost.per_width(sweep_dir), schema=COST_SCHEMA)
    for name, table in (("cost_total", spent), ("cost", per_width)):
        table.write_csv(out / f"{name}.csv")
        files.append(out / f"{name}.csv")
    say("figures: loss vs LR, shifted loss, optimum vs width (and vs horizon)")
    figures = plots.all_figures(a, out)
    files += figures
    pngs = {p.stem: p for p in figures if p.suffix == ".png"}
    sections = [("Status", _status(a))]
    if not a.transfer.is_empty():
        sections.insert(0, ("Verdict", f'<p class="verdict">{_html.escape(interpretation(a))}</p>'))
        sections.append(("Transfer", f"<p>Metric: <b>{a.metric}</b>. verdict: transfers when the slope's 90% "
                                     "interval lies inside ±0.25, drifts when it excludes 0, else undetermined "
                                     "(verdict_note says why; docs/verdicts.md). slope: of log2(best LR) against "
                                     "log2(width), with its interval (slope_lo, slope_hi); spread_octaves: max − min "
                                     "of log2(best LR) over widths (0 = perfect transfer), spread_lo/hi: the range the "
                                     "widths' intervals allow; max_loss_lost: the worst loss paid at any width for "
                                     "using the base width's best LR; wider_better(_at_base_lr): the best loss (the "
                                     "loss at the base width's best LR) falls with every step in width; steps, "
                                     "tokens_per_trial, depth: the budget.</p>"
                         + html.table(a.transfer.drop("verdict_note"))
                         + "<ul>" + "".join(f"<li>{_html.escape(p)}/{_html.escape(o)}: {v} — {_html.escape(n)}</li>"
                                            for p, o, v, n in a.transfer.select("parametrization", "optimizer",
                                                                                "verdict", "verdict_note").iter_rows())
                         + "</ul>"))
        others = a.verdicts.filter(pl.col("metric") != a.metric)
        if not others.is_empty():
            headline = a.transfer.select("parametrization", "optimizer", pl.col("verdict").alias("headline"))
            shown = (others.select(VERDICTS_SHOWN).join(headline, on=["parametrization", "optimizer"], how="left")
                     .with_columns((pl.col("verdict") != pl.col("headline")).alias("disagrees")).drop("headline"))
            sections.append(("Verdict under the other metrics", "<p>The same verdict on every other loss the trials "
                             "record (highlighted: it disagrees with the headline metric's). All: verdicts.csv.</p>"
                             + html.table(shown, row_class="disagrees")))
        shown = a.optima.select([c for c in OPTIMA_SHOWN if c in a.optima.columns])
        sections.append(("Optimum per width", html.table(shown, row_class="bound")
                         + "<p>best_lr_lo, best_lr_hi: the 90% interval (interval_method seeds: a bootstrap over "
                           "seeds; fit: over the fit, with the noise in fit_noise). Highlighted rows are bounds "
                           "(optimum on the grid's edge). All columns: optima.csv.</p>"))
        if not a.head_to_head.is_empty():
            sections.append(("Head to head", f"<p>{HEAD_TO_HEAD_NOTE.format(metric=a.metric)}</p>"
                             + html.table(a.head_to_head)))
        if not a.horizon.is_empty():
            sections.append(("Horizon", "<p>Each width's optimum at each horizon (percent of the steps) and its shift "
                             "from the previous horizon with a 90% interval: settled inside ±0.25 octave, moving when "
                             "the interval excludes 0, else unclear (highlighted: moving). An optimum still moving at "
                             "100% means the budget is too short to judge transfer. Table: horizon.csv.</p>"
                             + html.table(a.horizon.with_columns((pl.col("still_moving") == "moving")
                                                                 .fill_null(False).alias("moving")),
                                          row_class="moving")))
        captions = {"loss_vs_lr": "Loss against learning rate, one line per width (band: the seeds' range); ★ "
                                  "optimum with its 90% interval, ◀/▶ a bound, ✕ diverged.",
                    "shifted_loss": "Shifted loss (loss minus the best loss at that width), as in the GDN-µP paper.",
                    "optimum_vs_width": "Optimal learning rate against width with 90% intervals; dashed: the fitted "
                                        "slope, shaded: its 90% band. Flat lines transfer.",
                    "optimum_vs_horizon": "Optimum against the training horizon, 90% intervals: a line still sloping "
                                          "at 100% means the budget is too short to judge transfer."}
        sections.append(("Figures", "".join(html.image(pngs[k], c) for k, c in captions.items() if k in pngs)))
    sections.append(("Cost", _cost(spent, per_width)))
    for i, check in enumerate(checks):
        say(f"coordinate check {check.path}")
        name = f"coord_check_{i}"
        figs = coord.figure(check, out, name)
        files += figs
        shown = check.slopes.filter(pl.col("ok").is_not_null()).with_columns(
            (pl.col("verdict") == "new").alias("bad"))
        sections.append((f"Coordinate check: {check.name}",
                         html.image(figs[0], f"Probe sizes against width ({check.path})")
                         + f"<p>{check.agree}/{check.judged} predicted slopes within their bands; "
                           f"{len(check.documented)} documented deviations (scaling/deviations.py, explained in "
                           f"docs/theory.md), {len(check.new)} new (highlighted).</p>"
                         + html.table(shown, row_class="bad")))
    title = f"deltamup report — {a.sweep.name}"
    page = out / "index.html"
    page.write_text(html.page(title, sections, a.sweep.spec))
    return Report(out, page, a, [*files, page])
