"""Two parametrizations of one sweep, paired by seed at every learning rate both ran at one width, at every horizon.

The report's head-to-head compares each at its own best LR and at the base width's; this lists a − b (validation
loss, nats) seed by seed at each common LR and at 25%, 50% and 100% of the steps, with their mean and its 90% interval
(Student's t over the paired differences, as the report's head-to-head), so a gap that holds at every LR,
or grows with the steps, shows as such. Finished trials only (a diverged seed leaves its pair out).

    python3 studies/paired_gap.py DIR A B WIDTH     e.g. studies/gdn-sgd-noclip/sweep gdn-mup gdn-mup-nosqrtd 1024
"""
from __future__ import annotations

import math
import sys

import polars as pl

from deltamup.reports.analysis import horizons, load_sweep
from deltamup.reports.intervals import mean_interval


def gaps(trials: pl.DataFrame, a: str, b: str, width: int) -> pl.DataFrame:
    """One row per (lr, horizon): the seeds both finished, a − b per seed and their mean."""
    ok = trials.filter(pl.col("status") == "ok", pl.col("width") == width)
    steps = horizons(ok) or [(100, "val_loss")]
    rows = []
    for pct, metric in steps:
        pa = ok.filter(pl.col("parametrization") == a).select("lr", "seed", pl.col(metric).alias("a"))
        pb = ok.filter(pl.col("parametrization") == b).select("lr", "seed", pl.col(metric).alias("b"))
        pairs = pa.join(pb, on=["lr", "seed"]).sort("lr", "seed")
        for (lr,), group in pairs.group_by("lr", maintain_order=True):
            diff = (group["a"] - group["b"]).to_numpy()
            mean, lo, hi = mean_interval(diff)
            rows.append({"log2_lr": round(math.log2(lr)), "horizon_pct": pct, "seeds": group["seed"].to_list(),
                         "a_minus_b": [round(d, 3) for d in diff], "mean": round(mean, 4),
                         "lo": None if lo is None else round(lo, 4), "hi": None if hi is None else round(hi, 4)})
    return pl.DataFrame(rows).sort("log2_lr", "horizon_pct") if rows else pl.DataFrame()


def main(argv: list[str]) -> None:
    if len(argv) != 4 or not argv[3].isdigit():
        raise SystemExit("usage: python3 studies/paired_gap.py DIR A B WIDTH")
    directory, a, b, width = argv[0], argv[1], argv[2], int(argv[3])
    try:
        trials = load_sweep(directory).trials
    except ValueError as e:
        raise SystemExit(f"paired_gap.py: {e}") from None
    table = gaps(trials, a, b, width)
    if table.is_empty():
        raise SystemExit(f"paired_gap.py: {a} and {b} share no finished (lr, seed) at width {width} in {directory}")
    print(f"{a} − {b}, val_loss (nats), width {width}, paired by seed ({directory})")
    print("| log2 LR | % of steps | seeds | a − b by seed | mean [90%] |")
    print("| --- | --- | --- | --- | --- |")
    for r in table.iter_rows(named=True):
        spread = f" [{r['lo']:+.4f}, {r['hi']:+.4f}]" if r["lo"] is not None else ""
        print(f"| {r['log2_lr']} | {r['horizon_pct']} | {', '.join(map(str, r['seeds']))} | "
              f"{', '.join(f'{d:+.3f}' for d in r['a_minus_b'])} | {r['mean']:+.4f}{spread} |")


if __name__ == "__main__":
    main(sys.argv[1:])
