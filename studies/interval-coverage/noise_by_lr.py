"""The seed-to-seed spread of the loss by LR, measured where a sweep ran several seeds, and what it would do to the
report's intervals if the scatter added at thin LRs followed it.

The report assumes one noise level σ per sweep (reports/intervals.py `fit_noise`: the seed spread pooled over each
width's best grid LR and its two neighbours). This script pools the same spread by position instead: the LR's
place on the grid relative to its width's best grid LR (−1 the LR below, +1 the LR above), over every
(parametrization, optimizer, width) cell with two or more finished seeds. Then it runs the report's estimate twice:
as it is, and with the scatter at LRs fewer than 3 seeds ran (`thin_scatter`) set to the σ of that LR's side —
below the best LR, at it, or above it, each pooled over the sweep (the report's σ where a side has fewer than
MIN_DOF degrees of freedom) — and prints every slope interval.

    python3 studies/interval-coverage/noise_by_lr.py studies/gdn-adamw-8l/sweep studies/gdp2-adamw/sweep \\
        studies/gdn-sgd-noclip/sweep [--out studies/interval-coverage/noise-by-lr.md]
"""
from __future__ import annotations

import argparse
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl

from deltamup.reports import analysis, intervals
from deltamup.reports.interpretation import interval

MIN_DOF = 4  # degrees of freedom a side needs for its own σ


def spread_by_position(losses: pl.DataFrame, curves: pl.DataFrame) -> dict[int, tuple[float, int]]:
    """{position: (pooled seed SD of the loss in nats, degrees of freedom)}, position = the LR's grid index minus
    its width's best grid LR's (on the report's curve), over cells with ≥ 2 finished seeds, all finite. `losses`:
    the finished trials with `loss` (analysis.trial_losses); `curves`: analysis.lr_curves."""
    pooled: dict[int, list[tuple[float, int]]] = {}
    for key, curve in curves.filter(pl.col("n_seeds") > 0).sort([*analysis.KEYS, "lr"]).group_by(
            analysis.KEYS, maintain_order=True):
        y = curve["loss"].to_numpy().astype(float)
        if not np.isfinite(y).any():
            continue
        best = int(np.argmin(np.where(np.isfinite(y), y, np.inf)))
        cell = losses.filter(pl.all_horizontal(pl.col(k) == v for k, v in zip(analysis.KEYS, key)))
        for j, lr in enumerate(curve["lr"].to_list()):
            loss = cell.filter(pl.col("lr") == lr)["loss"].to_numpy()
            if len(loss) >= 2 and np.isfinite(loss).all():
                pooled.setdefault(j - best, []).append((float(loss.var(ddof=1)) * (len(loss) - 1), len(loss) - 1))
    return {k: (float(np.sqrt(sum(s for s, _ in v) / sum(d for _, d in v))), sum(d for _, d in v))
            for k, v in sorted(pooled.items())}


def by_side(spread: dict[int, tuple[float, int]], fallback: float) -> dict[int, float]:
    """{−1: σ below the best LR, 0: at it, +1: above it}, pooled over the positions of each side."""
    out = {}
    for side in (-1, 0, 1):
        cells = [(sd, dof) for k, (sd, dof) in spread.items() if np.sign(k) == side]
        dof = sum(d for _, d in cells)
        out[side] = float(np.sqrt(sum(sd ** 2 * d for sd, d in cells) / dof)) if dof >= MIN_DOF else fallback
    return out


def slopes(trials: pl.DataFrame, sides: dict[int, float] | None) -> pl.DataFrame:
    """The transfer table's slope interval per (parametrization, optimizer): the report's, or with thin LRs'
    scatter taken from `sides`."""
    report = intervals.thin_scatter

    def thin_scatter(width: intervals.Width, noise: float) -> np.ndarray:
        best = int(np.argmin(np.where(np.isfinite(width.curve), width.curve, np.inf)))
        sigma = np.array([sides[int(np.sign(j - best))] for j in range(len(width.x))])
        return report(width, 1.0) * sigma  # the report's rule (where, and ÷ √n) with each LR's own σ

    if sides is not None:
        intervals.thin_scatter = thin_scatter
    try:
        est = analysis.estimate(trials)
    finally:
        intervals.thin_scatter = report
    return est.transfer.select("parametrization", "optimizer", "slope", "slope_lo", "slope_hi", "verdict")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep directories (each with results/)")
    parser.add_argument("--out", type=Path, help="also write the tables, with the command and date, here")
    args = parser.parse_args(argv)
    for s in args.sweeps:
        if not (s / "results").is_dir():
            parser.error(f"{s}: no results/ (not a sweep directory)")
    if args.out and not args.out.parent.is_dir():
        parser.error(f"--out: no directory {args.out.parent}")
    start = time.time()
    spreads, rows = [], []
    for s in args.sweeps:
        trials = analysis.load_sweep(s).trials
        losses, curves = analysis.trial_losses(trials).filter(~pl.col("failed")), analysis.lr_curves(trials)
        spread = spread_by_position(losses, curves)
        noise, source = intervals.fit_noise(losses, curves, analysis.KEYS)
        sides = by_side(spread, noise)
        spreads.append(f"| {s} | {noise:.4f} ({source}) | "
                       + "; ".join(f"{k:+d}: {sd:.4f} ({dof})" for k, (sd, dof) in spread.items())
                       + f" | {sides[-1]:.4f} / {sides[0]:.4f} / {sides[1]:.4f} |")
        both = slopes(trials, None).join(slopes(trials, sides), on=["parametrization", "optimizer"],
                                         suffix="_by_side")
        for r in both.iter_rows(named=True):
            rows.append(f"| {s} | {r['parametrization']} | {r['optimizer']} | "
                        f"{interval(r['slope'], r['slope_lo'], r['slope_hi'])} {r['verdict']} | "
                        f"{interval(r['slope_by_side'], r['slope_lo_by_side'], r['slope_hi_by_side'])} "
                        f"{r['verdict_by_side']} |")
        print(f"{s}: {time.time() - start:.0f} s", file=sys.stderr)
    text = ("| sweep | the report's σ | seed SD by position from the best grid LR (dof) | σ below / at / above |\n"
            "| --- | --- | --- | --- |\n" + "\n".join(spreads) + "\n\n"
            "| sweep | parametrization | optimizer | slope [90%], the report | with thin LRs' σ by side |\n"
            "| --- | --- | --- | --- | --- |\n" + "\n".join(rows))
    print(text)
    if args.out:
        command = "python3 studies/interval-coverage/noise_by_lr.py " + " ".join(str(s) for s in args.sweeps)
        args.out.write_text(f"`{command}`, {date.today()}, {time.time() - start:.0f} s on a CPU; seed SD in nats "
                            f"of the report's loss.\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
