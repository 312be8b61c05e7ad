"""The same trials in two sweep directories: a study's finished points re-run beside the originals (after a code
change, on another machine), trial by trial, with the mean difference and its 90% interval per grid point.

    python3 studies/recheck.py ORIGINAL RERUN      e.g. studies/gdn-adamw-8l/sweep studies/gdn-adamw-8l/sweep-recheck

A trial pairs with the one of the same trial_id (parametrization, optimizer, width, LR, seed, hparams); finished
trials only. Each side's `code` (the record's fingerprint of the code that trained it) and `gpu_name` (the GPU's
model) are listed, so a difference can be put down to the code, the GPU kind or, where both agree, to the run.
"""
from __future__ import annotations

import math
import sys

import polars as pl

from deltamup.reports.analysis import load_sweep
from deltamup.reports.intervals import student_t

KEY = ["parametrization", "optimizer", "width", "log2_lr", "seed", "hparams"]  # a trial's grid point and seed


def pairs(original: pl.DataFrame, rerun: pl.DataFrame) -> pl.DataFrame:
    """One row per trial finished on both sides (matched by grid point and seed, the LR to 6 digits of its log2, so
    an older record's rounded trial id still pairs): both validation losses, rerun − original, each side's code and
    GPU model."""
    def ok(trials: pl.DataFrame, name: str) -> pl.DataFrame:
        def text(column: str) -> pl.Expr:  # None where the records predate the column
            return pl.col(column) if column in trials.columns else pl.lit(None, dtype=pl.String)
        hparams = pl.col("hparams").fill_null("") if "hparams" in trials.columns else pl.lit("")
        return trials.filter(pl.col("status") == "ok").select(
            "parametrization", "optimizer", "width", pl.col("lr").log(2).round(6).alias("log2_lr"), "seed",
            hparams.alias("hparams"), pl.col("lr").alias(f"lr_{name}"), pl.col("val_loss").alias(name),
            text("code").alias(f"code_{name}"), text("gpu_name").alias(f"gpu_{name}"))
    joined = ok(original, "original").join(ok(rerun, "rerun"), on=KEY)
    return joined.with_columns((pl.col("rerun") - pl.col("original")).alias("diff")).sort(
        "parametrization", "width", "log2_lr", "seed")


def summary(paired: pl.DataFrame) -> pl.DataFrame:
    """Per (parametrization, width, lr): the seeds, each one's rerun − original, their mean and its 90% t interval
    (NaN bounds for one seed)."""
    rows = []
    for (p, w, log2_lr), group in paired.group_by("parametrization", "width", "log2_lr", maintain_order=True):
        d = group["diff"].to_numpy()
        mean = float(d.mean())
        half = student_t(len(d) - 1) * float(d.std(ddof=1)) / math.sqrt(len(d)) if len(d) >= 2 else math.nan
        rows.append({"parametrization": p, "width": w, "log2_lr": log2_lr,
                     "seeds": group["seed"].to_list(), "diffs": d.tolist(), "mean_diff": mean, "lo": mean - half,
                     "hi": mean + half})
    return pl.DataFrame(rows)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python3 studies/recheck.py ORIGINAL RERUN")
    try:
        original, rerun = (load_sweep(d).trials for d in argv)
    except ValueError as e:
        raise SystemExit(f"recheck.py: {e}") from None
    paired = pairs(original, rerun)
    if paired.is_empty():
        raise SystemExit(f"recheck.py: no trial finished in both {argv[0]} and {argv[1]}")
    for side in ("original", "rerun"):
        for what in ("code", "gpu"):
            values = paired[f"{what}_{side}"].fill_null("not recorded").value_counts(sort=True).iter_rows()
            print(f"{side} {what}: " + ", ".join(f"{v} ({n} trials)" for v, n in values))
    print("| parametrization | width | log2 lr | seeds | rerun − original (nats), 90% interval | per seed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in summary(paired).iter_rows(named=True):
        interval = "" if math.isnan(row["lo"]) else f" [{row['lo']:+.4f}, {row['hi']:+.4f}]"
        per_seed = ", ".join(f"s{s} {d:+.4f}" for s, d in zip(row["seeds"], row["diffs"]))
        print(f"| {row['parametrization']} | {row['width']} | {row['log2_lr']:.2f} | {len(row['seeds'])} | "
              f"{row['mean_diff']:+.4f}{interval} | {per_seed} |")


if __name__ == "__main__":
    main(sys.argv[1:])
