"""Coordinate-check figures from a `deltamup coord-check --out DIR` directory (coords.parquet, slopes.csv and
check.json, which names the run).

Two panels, log-log against width: every probe's RMS at initialisation (t = 0), and the RMS of its change
x_t − x_0 at the last step — the quantities whose slopes slopes.csv judges. Probes of the same kind in different
blocks (block0.q, block1.q, …) are averaged into one line. Each probe has its own colour, marker and dash pattern;
a thin dotted line in the probe's colour shows the slope the theory expects for it, through the middle of the
measured line. The legend lists every probe drawn and marks those with a documented or a new deviation.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from deltamup import parametrizations  # noqa: E402
from deltamup.scaling.coord_check import MATRIX_PROBE_PATTERN  # noqa: E402

from .plots import save  # noqa: E402

BLOCK = r"^block\d+\."
MARKERS = "osD^vP*Xph<>"
DASHES = ["-", "--", "-.", (0, (5, 1, 1, 1, 1, 1))]


@dataclass(frozen=True)
class CoordCheckResult:
    path: Path
    coords: pl.DataFrame   # width, step, probe, rms, l1, delta_rms
    slopes: pl.DataFrame   # probe, step, slope, expected, ok, verdict, note
    meta: dict = field(default_factory=dict)  # check.json: name, parametrization, optimizer, widths, …

    @property
    def name(self) -> str:
        """The run's name (model · parametrization · optimizer · widths · steps · lr), else its folder's."""
        return self.meta.get("name") or self.path.name

    def _verdict(self, verdict: str) -> pl.DataFrame:
        return self.slopes.filter(pl.col("verdict") == verdict)

    @property
    def new(self) -> pl.DataFrame:
        """Slopes off their band that no documented deviation covers."""
        return self._verdict("new")

    @property
    def documented(self) -> pl.DataFrame:
        return self._verdict("documented")

    @property
    def judged(self) -> int:
        return self.slopes["ok"].is_not_null().sum()

    @property
    def agree(self) -> int:
        return len(self._verdict("ok"))


def load(path: str | Path) -> CoordCheckResult:
    path = Path(path)
    coords, slopes = path / "coords.parquet", path / "slopes.csv"
    if not coords.is_file() or not slopes.is_file():
        raise ValueError(f"{path} is not a coord-check directory (needs coords.parquet and slopes.csv)")
    slopes = pl.read_csv(slopes, schema_overrides={"expected": pl.String, "ok": pl.Boolean, "verdict": pl.String,
                                                   "note": pl.String})
    if "verdict" not in slopes.columns:  # written before verdicts existed: every slope off its band counts as new
        slopes = slopes.with_columns(
            pl.when(pl.col("ok").is_null()).then(None).when(pl.col("ok")).then(pl.lit("ok")).otherwise(pl.lit("new"))
            .alias("verdict"), pl.lit(None, pl.String).alias("note"))
    meta = json.loads((path / "check.json").read_text()) if (path / "check.json").is_file() else {}
    return CoordCheckResult(path, pl.read_parquet(coords), slopes, meta)


def styles(kinds: list[str]) -> dict[str, dict]:
    """A distinct (colour, marker, dash) per probe kind."""
    colors = sns.color_palette("husl", len(kinds))
    shapes = itertools.cycle(itertools.product(DASHES, MARKERS))
    return {k: dict(color=c, ls=ls, marker=mk) for k, c, (ls, mk) in zip(kinds, colors, shapes)}


def _expected(result: CoordCheckResult, kind: str, step: int) -> float | None:
    meta = result.meta
    if not meta.get("parametrization"):
        return None
    slope = parametrizations.expected_slope(meta["parametrization"], meta["optimizer"], kind)
    return None if slope is None or (slope.grows and step > 0) else slope.expected(step)


def figure(result: CoordCheckResult, out: Path, name: str) -> list[Path]:
    """name.{png,svg}: probe sizes against width at t = 0 and at the last step (the per-matrix probes of
    `--matrix-probes` left out: slopes.csv and coords.parquet hold them)."""
    sns.set_theme(style="whitegrid", context="notebook")
    coords = result.coords.filter((pl.col("probe") != "loss")
                                  & ~pl.col("probe").str.contains(MATRIX_PROBE_PATTERN)).with_columns(
        pl.col("probe").str.replace(BLOCK, "").alias("kind"))
    new_kinds = set(result.new["probe"].str.replace(BLOCK, "").to_list())
    documented_kinds = set(result.documented["probe"].str.replace(BLOCK, "").to_list())
    kinds = sorted(coords["kind"].unique().to_list())
    style = styles(kinds)
    last = int(coords["step"].max())
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.6))
    drawn, expected_drawn = set(), False
    for ax, step, column, title in ((axes[0], 0, "rms", "size at t = 0"),
                                    (axes[1], last, "delta_rms", f"change x_t − x_0 at t = {last}")):
        at = (coords.filter((pl.col("step") == step) & pl.col(column).is_finite() & (pl.col(column) > 0))
              .group_by(["kind", "width"]).agg(pl.col(column).mean()).sort("width"))
        for kind in kinds:
            g = at.filter(pl.col("kind") == kind)
            if not len(g):
                continue
            ax.plot(g["width"], g[column], ms=4, lw=1.3, **style[kind])
            drawn.add(kind)
            slope = _expected(result, kind, step)
            if slope is not None and len(g) >= 2:  # through the geometric middle of the measured line
                w, y = np.log(g["width"].to_numpy()), np.log(g[column].to_numpy())
                x = np.exp(np.array([w.min(), w.max()]))
                ax.plot(x, np.exp(y.mean() + slope * (np.log(x) - w.mean())), ls=":", lw=1.0,
                        color=style[kind]["color"], alpha=0.9)
                expected_drawn = True
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set(title=title, xlabel="width", ylabel="RMS")
    handles = [Line2D([], [], ms=4, lw=1.3, **style[k]) for k in kinds if k in drawn]
    labels = [k + (" — NEW deviation" if k in new_kinds else " — documented deviation" if k in documented_kinds
                   else "") for k in kinds if k in drawn]
    if expected_drawn:
        handles.append(Line2D([], [], ls=":", lw=1.0, color="0.3"))
        labels.append("expected slope (dotted, probe's colour)")
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.suptitle(f"Coordinate check: {result.name}\n{result.agree}/{result.judged} predicted slopes hold, "
                 f"{len(result.documented)} documented deviations, {len(result.new)} new", fontsize=10)
    fig.tight_layout()
    return save(fig, out, name)
