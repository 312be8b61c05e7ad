"""How far a systematic shift of one grid cell moves a transfer verdict: every seed of one (width, LR) cell moved by
the same ±SHIFT nats, as a code or GPU-kind change moved the 8-layer study's width-256 cell at 2^-8 by −0.010 nats
(studies/gdn-adamw-8l/recheck.md), and the report's estimate (optima, slope interval, verdict) recomputed. The
report's intervals carry the seeds' scatter; a shift common to a cell's seeds is not in them.

    python3 studies/interval-coverage/shift_sensitivity.py DIR [--shift 0.010] [--widths 256,1024,2048]
        [--parametrizations sp,gdn-mup]

One row per parametrization (the sweep's report metric, as `deltamup report` computes it): the verdict and slope
interval as measured, the range of the slope over every cell moved either way, the verdicts that occur, and the cell
and sign that give the lowest and the highest slope with their intervals.
"""
from __future__ import annotations

import argparse
import sys

import polars as pl

from deltamup.reports.analysis import budget, estimate, load_sweep, loss_metric, restrict
from deltamup.reports.interpretation import interval


def shifted(trials: pl.DataFrame, metric: str, cell: dict, shift: float) -> pl.DataFrame:
    """trials with `metric` moved by `shift` nats in every trial of the cell (its parametrization, optimizer, width
    and lr)."""
    cell = pl.all_horizontal(pl.col(k) == v for k, v in cell.items())
    return trials.with_columns(pl.when(cell).then(pl.col(metric) + shift).otherwise(pl.col(metric)).alias(metric))


def slope_text(row: dict) -> str:
    """"drifts +0.20 [+0.06, +0.34]": a transfer row's verdict, slope and interval, as the report writes them."""
    if row["slope"] is None:
        return row["verdict"]
    return f"{row['verdict']} {interval(row['slope'], row['slope_lo'], row['slope_hi'])}"


def sensitivity(trials: pl.DataFrame, budget: dict, shift: float, names: list[str] | None = None) -> pl.DataFrame:
    """One row per (parametrization, optimizer) with ≥ 2 widths' optima (of `names` only, where given): as measured,
    and under each of its cells moved by ±shift (see the module docstring). Every estimate is of the whole sweep, as
    the report's: the noise it assumes for thin LRs is pooled over every parametrization."""
    metric = loss_metric(trials)
    measured = estimate(trials, metric, budget).transfer.filter(pl.col("widths") >= 2)
    if names is not None:
        measured = measured.filter(pl.col("parametrization").is_in(names))
    rows = []
    for base in measured.iter_rows(named=True):
        p, o = base["parametrization"], base["optimizer"]
        mine = trials.filter((pl.col("parametrization") == p) & (pl.col("optimizer") == o))
        runs = []
        for width, lr in mine.select("width", "lr").unique().sort("width", "lr").iter_rows():
            cell = {"parametrization": p, "optimizer": o, "width": width, "lr": lr}
            for sign in (-1, 1):
                moved = estimate(shifted(trials, metric, cell, sign * shift), metric, budget).transfer.filter(
                    (pl.col("parametrization") == p) & (pl.col("optimizer") == o))
                if len(moved) and moved["slope"][0] is not None:
                    runs.append((moved.row(0, named=True), width, lr, sign))
        if not runs:
            continue
        low = min(runs, key=lambda r: r[0]["slope"])
        high = max(runs, key=lambda r: r[0]["slope"])
        verdicts = sorted({r[0]["verdict"] for r in runs})

        def where(run: tuple) -> str:
            row, width, lr, sign = run
            return f"{width} @ {lr:.3g} {'+' if sign > 0 else '−'}: {slope_text(row)}"
        rows.append({"parametrization": base["parametrization"], "optimizer": base["optimizer"],
                     "measured": slope_text(base), "slope range": f"{low[0]['slope']:+.2f} … {high[0]['slope']:+.2f}",
                     "verdicts": ", ".join(verdicts), "lowest": where(low), "highest": where(high)})
    return pl.DataFrame(rows)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--shift", type=float, default=0.010, help="nats (default 0.010)")
    parser.add_argument("--widths", help="e.g. 256,1024,2048 (default: every width with trials)")
    parser.add_argument("--parametrizations", help="e.g. sp,gdn-mup (default: all)")
    args = parser.parse_args(argv)
    if not args.shift > 0:
        raise SystemExit(f"shift_sensitivity.py: --shift must be > 0 nats, not {args.shift}")
    try:
        sweep = load_sweep(args.dir)
        if args.widths:
            sweep = restrict(sweep, [int(w) for w in args.widths.split(",")])
    except ValueError as e:
        raise SystemExit(f"shift_sensitivity.py: {e}") from None
    trials, names = sweep.trials, None
    if args.parametrizations:
        names = args.parametrizations.split(",")
        unknown = sorted(set(names) - set(trials["parametrization"].to_list()))
        if unknown:
            raise SystemExit(f"shift_sensitivity.py: no trials of {unknown[0]} in {args.dir}")
    table = sensitivity(trials, budget(sweep.spec, sorted(set(trials["width"].to_list()))), args.shift, names)
    print(f"`python3 studies/interval-coverage/shift_sensitivity.py {' '.join(argv)}`: each (width, LR) cell's "
          f"trials moved by ±{args.shift} nats together, the report's estimate recomputed; slope in octaves per "
          f"octave of width, 90% intervals.\n")
    print("| " + " | ".join(table.columns) + " |")
    print("| " + " | ".join("---" for _ in table.columns) + " |")
    for row in table.iter_rows():
        print("| " + " | ".join(str(v) for v in row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
