"""Coordinate-check figures from a `deltamup coord-check --out DIR` directory (coords.parquet, slopes.csv).

Two panels, log-log against width: every probe's RMS at initialisation (t = 0), and the RMS of its change
x_t − x_0 at the last step — the quantities whose slopes slopes.csv judges. Probes of the same kind in different
blocks (block0.q, block1.q, …) are averaged into one line; a dashed line has a slope off its expected exponent.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

from .plots import save  # noqa: E402

BLOCK = r"^block\d+\."


@dataclass(frozen=True)
class CoordCheckResult:
    path: Path
    coords: pl.DataFrame   # width, step, probe, rms, l1, delta_rms
    slopes: pl.DataFrame   # probe, step, slope, expected, ok

    @property
    def failed(self) -> pl.DataFrame:
        return self.slopes.filter(pl.col("ok").is_not_null() & ~pl.col("ok").fill_null(True))

    @property
    def judged(self) -> int:
        return self.slopes["ok"].is_not_null().sum()


def load(path: str | Path) -> CoordCheckResult:
    path = Path(path)
    coords, slopes = path / "coords.parquet", path / "slopes.csv"
    if not coords.is_file() or not slopes.is_file():
        raise ValueError(f"{path} is not a coord-check directory (needs coords.parquet and slopes.csv)")
    return CoordCheckResult(path, pl.read_parquet(coords),
                            pl.read_csv(slopes, schema_overrides={"expected": pl.String, "ok": pl.Boolean}))


def figure(result: CoordCheckResult, out: Path, name: str) -> list[Path]:
    """name.{png,svg}: probe sizes against width at t = 0 and at the last step."""
    sns.set_theme(style="whitegrid", context="notebook")
    coords = result.coords.filter(pl.col("probe") != "loss").with_columns(
        pl.col("probe").str.replace(BLOCK, "").alias("kind"))
    failed_kinds = set(result.failed["probe"].str.replace(BLOCK, "").to_list())
    kinds = sorted(coords["kind"].unique().to_list())
    colors = dict(zip(kinds, sns.color_palette("husl", len(kinds))))
    last = int(coords["step"].max())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, step, column, title in ((axes[0], 0, "rms", "size at t = 0"),
                                    (axes[1], last, "delta_rms", f"change x_t − x_0 at t = {last}")):
        at = (coords.filter((pl.col("step") == step) & pl.col(column).is_finite() & (pl.col(column) > 0))
              .group_by(["kind", "width"]).agg(pl.col(column).mean()).sort("width"))
        for kind in kinds:
            g = at.filter(pl.col("kind") == kind)
            if len(g):
                ax.plot(g["width"], g[column], marker="o", ms=3, lw=1.3, color=colors[kind],
                        ls="--" if kind in failed_kinds else "-", label=kind)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set(title=title, xlabel="width", ylabel="RMS")
    legend = {}
    for ax in axes:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend(list(legend.values()), list(legend), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               frameon=False)
    fig.suptitle(f"Coordinate check: {result.path.name} ({result.judged - len(result.failed)}/{result.judged} "
                 "predicted slopes hold; dashed: off)")
    fig.tight_layout()
    return save(fig, out, name)
