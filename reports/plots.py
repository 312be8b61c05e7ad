"""The sweep's figures (matplotlib + seaborn, written as PNG and SVG); every legend lists only what is drawn:

- loss vs LR, one line per width (ordered colour map), one panel per parametrization (rows: optimizers), the seeds'
  range as a band (with several seeds), the optimum marked with its 90% interval as a horizontal bar (★ refined or
  grid value; ◀/▶ a bound at the grid's low/high edge), diverged LRs as ✕ above the curves; losses far above the
  rest (more than 3× the best loss's distance to the upper quartile) leave the top of the panel;
- the paper's "shifted loss" view: the same with each width's best grid loss subtracted;
- the optimal LR against width, one line per parametrization: each width's 90% interval as a bar, the fitted slope
  as a dashed line in its 90% band (from the bootstrap replicates), hollow markers for bounds;
- when trials record several horizons: each width's optimum (with its interval) against the horizon.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

from deltamup.reports import intervals  # noqa: E402
from deltamup.reports.analysis import Analysis  # noqa: E402
from deltamup.reports.interpretation import interval  # noqa: E402

PALETTE = "viridis"  # ordered: narrow widths dark, wide widths bright
EDGE_MARKERS = {"low": "<", "high": ">"}


def save(fig: plt.Figure, out: Path, name: str) -> list[Path]:
    """name.png (110 dpi) and name.svg in `out`; the same figure gives the same bytes (no dates, fixed SVG ids), so
    committed reports change only where the data did."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    fig.savefig(paths[0], dpi=110, bbox_inches="tight", metadata={"Software": None})
    with plt.rc_context({"svg.hashsalt": name}):
        fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return paths


def _panels(analysis: Analysis) -> tuple[list[str], list[str]]:
    optimizers = sorted(analysis.curves["optimizer"].unique().to_list())
    names = list(dict.fromkeys(analysis.sweep.spec.get("parametrizations") or []))
    names += sorted(set(analysis.curves["parametrization"].unique().to_list()) - set(names))
    return optimizers, [p for p in names if p in set(analysis.curves["parametrization"].to_list())]


def width_colors(widths: list[int]) -> dict[int, tuple]:
    return dict(zip(sorted(widths), sns.color_palette(PALETTE, len(widths))))


def panel_top(values: np.ndarray, shifted: bool) -> float:
    """Upper end of a loss-vs-LR panel's curves. The shifted view zooms in on the optima (as the paper's does):
    the upper quartile. The plain view shows every loss unless a few blown-up ones (SGD at its largest LRs) would
    flatten the rest: it ends at 3× the distance from the best loss to the upper quartile."""
    if not len(values):
        return 1.0
    q75 = float(np.quantile(values, 0.75))
    return q75 if shifted else min(float(values.max()), float(values.min()) + 3 * (q75 - float(values.min())))


def _legend_extras(drawn: set[str]) -> tuple[list, list[str]]:
    """Legend handles for the markers a loss-vs-LR figure drew, in a fixed order."""
    entries = {"band": (plt.Rectangle((0, 0), 1, 1, color="0.6", alpha=0.25), "seed range (min–max)"),
               "optimum": (plt.Line2D([], [], ls="-", marker="*", color="0.3", markeredgecolor="black", ms=9),
                           "optimum, 90% interval"),
               **{f"bound-{edge}": (plt.Line2D([], [], ls="", marker=m, color="0.3", markeredgecolor="black", ms=9),
                                    f"bound ({edge} edge of the grid)") for edge, m in EDGE_MARKERS.items()},
               "diverged": (plt.Line2D([], [], ls="", marker="x", color="0.3", ms=7), "diverged")}
    shown = [entries[k] for k in entries if k in drawn]
    return [h for h, _ in shown], [label for _, label in shown]


def loss_vs_lr(analysis: Analysis, out: Path, shifted: bool = False) -> list[Path]:
    """loss_vs_lr.{png,svg} (or shifted_loss.{png,svg} with shifted=True)."""
    sns.set_theme(style="whitegrid", context="notebook")
    optimizers, names = _panels(analysis)
    colors = width_colors(analysis.curves["width"].unique().to_list())
    fig, axes = plt.subplots(len(optimizers), len(names), figsize=(4.6 * len(names), 3.8 * len(optimizers)),
                             squeeze=False, sharex=True)
    optimum = analysis.optima
    drawn: set[str] = set()
    for r, optimizer in enumerate(optimizers):
        for c, name in enumerate(names):
            ax = axes[r][c]
            curves = analysis.curves.filter((pl.col("optimizer") == optimizer) & (pl.col("parametrization") == name)
                                            & (pl.col("n_seeds") > 0))
            finite = curves.filter(pl.col("loss").is_finite())
            rows = optimum.filter((pl.col("optimizer") == optimizer) & (pl.col("parametrization") == name))
            shift = {w: (b if shifted and b is not None else 0.0)
                     for w, b in zip(rows["width"], rows["best_loss_grid"])}
            values = np.array([loss - shift.get(w, 0.0) for w, loss in zip(finite["width"], finite["loss"])])
            bottom = float(values.min()) if len(values) else 0.0
            top = panel_top(values, shifted)
            span = max(top - bottom, 1e-3)
            above = top + 0.08 * span  # where diverged LRs are drawn, one row per width
            for i, (width, g) in enumerate(curves.sort("width", "lr").group_by("width", maintain_order=True)):
                w = width[0]
                ok = g.filter(pl.col("loss").is_finite())
                ax.plot(ok["lr"], ok["loss"].to_numpy() - shift.get(w, 0.0), color=colors[w], marker="o", ms=3.5,
                        lw=1.4, label=f"width {w}")
                spread = ok.filter((pl.col("n_seeds") > 1) & pl.col("loss_min").is_not_null())
                if len(spread):
                    ax.fill_between(spread["lr"], spread["loss_min"].to_numpy() - shift.get(w, 0.0),
                                    spread["loss_max"].to_numpy() - shift.get(w, 0.0), color=colors[w], alpha=0.2,
                                    lw=0)
                    drawn.add("band")
                div = g.filter(~pl.col("loss").is_finite())
                if len(div):
                    ax.scatter(div["lr"], np.full(len(div), above + 0.03 * span * i), marker="x", color=colors[w],
                               s=36, zorder=4)
                    drawn.add("diverged")
            for o in rows.filter(pl.col("best_lr").is_not_null()).iter_rows(named=True):
                y = o["best_loss"] - shift.get(o["width"], 0.0)
                if o.get("best_lr_lo") is not None:
                    ax.errorbar([o["best_lr"]], [y], xerr=lr_bars([o["best_lr"]], [o["best_lr_lo"]], [o["best_lr_hi"]]),
                                color=colors[o["width"]], lw=1.2, capsize=3, zorder=4)
                ax.scatter([o["best_lr"]], [y], marker=EDGE_MARKERS.get(o["edge"], "*"), s=150,
                           color=colors[o["width"]], edgecolor="black", linewidth=0.8, zorder=5)
                drawn.add(f"bound-{o['edge']}" if o["bound"] else "optimum")
            if len(curves.filter(~pl.col("loss").is_finite())):
                ax.axhline(above, color="0.6", lw=0.6, ls=":")
                ax.text(0.01, above, "✕ diverged", transform=ax.get_yaxis_transform(), va="bottom", fontsize=8,
                        color="0.35")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{name} · {optimizer}")
            ax.set_xlabel("learning rate")
            ax.set_ylabel(f"{'shifted ' if shifted else ''}{analysis.metric.replace('_', ' ')}"
                          + (" − best at width" if shifted else ""))
            ax.set_ylim(bottom - 0.04 * span, above + 0.03 * span * (len(colors) + 1))
    handles, labels = axes[0][0].get_legend_handles_labels()
    extra_handles, extra_labels = _legend_extras(drawn)
    fig.legend(handles + extra_handles, labels + extra_labels, loc="center left", bbox_to_anchor=(1.0, 0.5),
               frameon=False)
    fig.suptitle(("Shifted loss (loss − best loss at that width)" if shifted else "Loss against learning rate")
                 + f" — {analysis.sweep.name}")
    fig.tight_layout()
    return save(fig, out, "shifted_loss" if shifted else "loss_vs_lr")


def lr_bars(lr: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> np.ndarray:
    """Error-bar lengths (2, N) below and above each LR of its interval; an end a bound leaves open (0, inf) gets
    none: the bound's marker says which way the optimum may lie."""
    lr, lo, hi = (np.asarray(v, float) for v in (lr, lo, hi))
    return np.stack([np.where(lo > 0, lr - lo, 0.0), np.where(np.isfinite(hi), hi - lr, 0.0)])


def slope_band(widths: np.ndarray, replicates: np.ndarray, points: np.ndarray, grid: np.ndarray,
               method: str) -> tuple[np.ndarray, np.ndarray]:
    """The 90% band of the least-squares line of log2 optimum against log2 width, at log2 widths `grid`: each
    grid point's interval (intervals.interval, by the slope's `method`) over the lines through bootstrap replicates
    (B, W) of the optima, around the line through the point estimates `points` (W,)."""
    x = np.log2(widths.astype(float))
    weights = intervals.slope_weights(x)

    def lines(optima: np.ndarray) -> np.ndarray:
        return optima.mean(-1)[..., None] + (optima @ weights)[..., None] * (grid - x.mean())

    return intervals.interval(lines(replicates), lines(points), method)


def optimum_vs_width(analysis: Analysis, out: Path) -> list[Path]:
    """optimum_vs_width.{png,svg}: best LR against width per parametrization, one panel per optimizer."""
    sns.set_theme(style="whitegrid", context="notebook")
    optimizers, names = _panels(analysis)
    colors = dict(zip(names, sns.color_palette("colorblind", len(names))))
    fig, axes = plt.subplots(1, len(optimizers), figsize=(5.6 * len(optimizers), 4.4 + 0.2 * len(names)),
                             squeeze=False)
    transfer = {(t["parametrization"], t["optimizer"]): t for t in analysis.transfer.iter_rows(named=True)}
    replicates = analysis.estimates[analysis.metric].replicates if analysis.estimates else {}
    for ax, optimizer in zip(axes[0], optimizers):
        bounds = False
        for name in names:
            g = analysis.optima.filter((pl.col("optimizer") == optimizer) & (pl.col("parametrization") == name)
                                       & pl.col("best_lr").is_not_null()).sort("width")
            if g.is_empty():
                continue
            t, color = transfer[(name, optimizer)], colors[name]
            widths, lr = g["width"].to_numpy(), g["best_lr"].to_numpy()
            ax.errorbar(widths, lr, yerr=lr_bars(lr, g["best_lr_lo"].to_numpy(), g["best_lr_hi"].to_numpy()),
                        color=color, lw=0, elinewidth=1.2, capsize=3, zorder=3)
            label = f"{name}: {t['verdict']}"
            if t["slope"] is not None:
                label += f", slope {interval(t['slope'], t['slope_lo'], t['slope_hi'])}"
                grid = np.linspace(np.log2(widths[0]), np.log2(widths[-1]), 50)
                fit = np.polyval(np.polyfit(np.log2(widths.astype(float)), g["log2_best_lr"].to_numpy(), 1), grid)
                ax.plot(2 ** grid, 2 ** fit, color=color, lw=1.5, ls="--", label=label)
                if (name, optimizer) in replicates:
                    lo, hi = slope_band(*replicates[(name, optimizer)], g["log2_best_lr"].to_numpy(), grid,
                                        t["interval_method"])
                    ax.fill_between(2 ** grid, 2 ** lo, 2 ** hi, color=color, alpha=0.15, lw=0)
            bound = g["bound"].to_numpy()
            ax.scatter(widths[~bound], lr[~bound], color=color, s=36, zorder=4,
                       label=None if t["slope"] is not None else label)
            if bound.any():
                bounds = True
                ax.scatter(widths[bound], lr[bound], facecolor="white", edgecolor=color, s=48, linewidth=1.5,
                           zorder=4)
        ax.set(xlabel="width", ylabel="optimal learning rate", title=optimizer)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        handles, labels = ax.get_legend_handles_labels()
        if bounds:
            handles.append(plt.Line2D([], [], ls="", marker="o", mfc="white", mec="0.3", ms=7))
            labels.append("bound (grid edge)")
        ax.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below: hides no point
    fig.suptitle(f"Optimal learning rate against width on {analysis.metric} (bars, band: 90%; flat = transfers)")
    fig.tight_layout()
    return save(fig, out, "optimum_vs_width")


def optimum_vs_horizon(analysis: Analysis, out: Path) -> list[Path]:
    """optimum_vs_horizon.{png,svg}: each width's optimum against the horizon (percent of the steps), one panel per
    parametrization (rows: optimizers); empty when trials record one horizon."""
    h = analysis.horizon
    if h.is_empty():
        return []
    sns.set_theme(style="whitegrid", context="notebook")
    optimizers, names = _panels(analysis)
    colors = width_colors(h["width"].unique().to_list())
    fig, axes = plt.subplots(len(optimizers), len(names), figsize=(4.6 * len(names), 3.6 * len(optimizers)),
                             squeeze=False, sharey=True)
    for r, optimizer in enumerate(optimizers):
        for c, name in enumerate(names):
            ax = axes[r][c]
            mine = h.filter((pl.col("optimizer") == optimizer) & (pl.col("parametrization") == name))
            for (w,), g in mine.sort("width", "horizon").group_by("width", maintain_order=True):
                lr = g["best_lr"].to_numpy()
                ax.errorbar(g["horizon"], lr, yerr=lr_bars(lr, g["best_lr_lo"].to_numpy(), g["best_lr_hi"].to_numpy()),
                            color=colors[w], marker="o", ms=4, lw=1.4, capsize=3, label=f"width {w}")
            ax.set(title=f"{name} · {optimizer}", xlabel="horizon (% of the steps)", ylabel="optimal learning rate")
            ax.set_yscale("log", base=2)
            ax.set_xticks(sorted(h["horizon"].unique().to_list()))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle("Optimum against the training horizon (bars: 90%): still sloping at 100% = the budget is too short")
    fig.tight_layout()
    return save(fig, out, "optimum_vs_horizon")


def all_figures(analysis: Analysis, out: Path) -> list[Path]:
    """Every sweep figure; an empty list when no trial has finished yet."""
    if analysis.curves.filter(pl.col("n_seeds") > 0).is_empty():
        return []
    return [*loss_vs_lr(analysis, out), *loss_vs_lr(analysis, out, shifted=True), *optimum_vs_width(analysis, out),
            *optimum_vs_horizon(analysis, out)]

