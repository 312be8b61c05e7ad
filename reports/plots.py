"""The sweep's figures (matplotlib + seaborn, written as PNG and SVG):

- loss vs LR, one line per width (ordered colour map), one panel per parametrization (rows: optimizers), the
  optimum marked (★ refined or grid value; ◀/▶ a bound at the grid's low/high edge), diverged LRs as ✕ above the
  curves, error bars = standard error across seeds; losses far above the rest (more than 3× the best loss's
  distance to the upper quartile) leave the top of the panel;
- the paper's "shifted loss" view: the same with each width's best grid loss subtracted;
- the optimal LR against width, one line per parametrization (hollow markers: bounds).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

from deltamup.reports.analysis import Analysis  # noqa: E402

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


def loss_vs_lr(analysis: Analysis, out: Path, shifted: bool = False) -> list[Path]:
    """loss_vs_lr.{png,svg} (or shifted_loss.{png,svg} with shifted=True)."""
    sns.set_theme(style="whitegrid", context="notebook")
    optimizers, names = _panels(analysis)
    colors = width_colors(analysis.curves["width"].unique().to_list())
    fig, axes = plt.subplots(len(optimizers), len(names), figsize=(4.6 * len(names), 3.8 * len(optimizers)),
                             squeeze=False, sharex=True)
    optimum = analysis.optima
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
                y = ok["loss"].to_numpy() - shift.get(w, 0.0)
                ax.errorbar(ok["lr"], y, yerr=ok["loss_se"].fill_null(0).to_numpy(), color=colors[w], marker="o",
                            ms=3.5, lw=1.4, capsize=2, label=f"width {w}")
                div = g.filter(~pl.col("loss").is_finite())
                ax.scatter(div["lr"], np.full(len(div), above + 0.03 * span * i), marker="x", color=colors[w], s=36,
                           zorder=4)
            for o in rows.filter(pl.col("best_lr").is_not_null()).iter_rows(named=True):
                marker = EDGE_MARKERS.get(o["edge"], "*")
                ax.scatter([o["best_lr"]], [o["best_loss"] - shift.get(o["width"], 0.0)], marker=marker, s=150,
                           color=colors[o["width"]], edgecolor="black", linewidth=0.8, zorder=5)
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
    handles += [plt.Line2D([], [], ls="", marker=m, color="0.3", markeredgecolor="black", ms=9)
                for m in ("*", "<", "x")]
    labels += ["optimum", "bound (grid edge)", "diverged"]
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle(("Shifted loss (loss − best loss at that width)" if shifted else "Loss against learning rate")
                 + f" — {analysis.sweep.spec.get('name', analysis.sweep.path.name)}")
    fig.tight_layout()
    return save(fig, out, "shifted_loss" if shifted else "loss_vs_lr")


def optimum_vs_width(analysis: Analysis, out: Path) -> list[Path]:
    """optimum_vs_width.{png,svg}: best LR against width per parametrization, one panel per optimizer."""
    sns.set_theme(style="whitegrid", context="notebook")
    optimizers, names = _panels(analysis)
    colors = dict(zip(names, sns.color_palette("colorblind", len(names))))
    fig, axes = plt.subplots(1, len(optimizers), figsize=(5.2 * len(optimizers), 4.0), squeeze=False)
    transfer = {(t["parametrization"], t["optimizer"]): t for t in analysis.transfer.iter_rows(named=True)}
    for ax, optimizer in zip(axes[0], optimizers):
        for name in names:
            g = analysis.optima.filter((pl.col("optimizer") == optimizer) & (pl.col("parametrization") == name)
                                       & pl.col("best_lr").is_not_null()).sort("width")
            if g.is_empty():
                continue
            t = transfer[(name, optimizer)]
            slope = "" if t["slope"] is None else f", slope {t['slope']:+.2f}"
            ax.plot(g["width"], g["best_lr"], color=colors[name], lw=1.5,
                    label=f"{name} (spread {t['spread_octaves']:.2f} oct{slope})")
            bound = g["bound"].to_numpy()
            ax.scatter(g["width"].to_numpy()[~bound], g["best_lr"].to_numpy()[~bound], color=colors[name], s=36,
                       zorder=3)
            ax.scatter(g["width"].to_numpy()[bound], g["best_lr"].to_numpy()[bound], facecolor="white",
                       edgecolor=colors[name], s=48, linewidth=1.5, zorder=3)
        ax.set(xscale="log", yscale="log", xlabel="width", ylabel="optimal learning rate", title=optimizer)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.legend(fontsize=8, title="hollow: bound", title_fontsize=8)
    fig.suptitle("Optimal learning rate against width (flat = transfers)")
    fig.tight_layout()
    return save(fig, out, "optimum_vs_width")


def all_figures(analysis: Analysis, out: Path) -> list[Path]:
    """Every sweep figure; an empty list when no trial has finished yet."""
    if analysis.curves.filter(pl.col("n_seeds") > 0).is_empty():
        return []
    return [*loss_vs_lr(analysis, out), *loss_vs_lr(analysis, out, shifted=True), *optimum_vs_width(analysis, out)]

