"""Two parametrizations of one sweep, paired by seed at every learning rate both ran at one width, at every horizon.

The report's head-to-head compares each at its own best LR and at the base width's; this lists a − b (validation
loss, nats) seed by seed at each common LR and at 25%, 50% and 100% of the steps, with their mean and its 90% interval
(Student's t over the paired differences, as the report's head-to-head), so a gap that holds at every LR,
or grows with the steps, shows as such. With EA EB, A at 2^EA against B at 2^EB instead (each at its own best LR,
say), at every horizon. Finished trials only (a diverged seed leaves its pair out).
With --train, the training loss instead, its mean over the 100 steps up to steps 100, 300, 600, 900 and the last
(DIR/curves.parquet): paired by seed the two saw the same batches, so this says when in the run a gap opens, also
for trials that record no horizons.
With --minus C D, the difference of two gaps instead, (A − B) − (C − D), seed by seed at each LR all four ran: the
interaction of two changes in a 2 × 2 (A both, B and C one each, D neither: how much more A gains than B and C
together), 0 where their effects add.
With --rerun DIR2, a parametrization's trials at WIDTH that DIR2 holds (a re-run of some of DIR's, the same trial
ids, by other code or on another GPU kind: studies/recheck.py) stand in for DIR's, so that the variants DIR ran
later are paired with their baseline as re-run beside them.
Where the sides' trials record different GPUs or code (or one side none: trials from before the record named them),
a line after the table says so: a shift common to one side's seeds is not in these intervals.

    python3 studies/paired_gap.py DIR A B WIDTH [EA EB] [--train] [--minus C D] [--rerun DIR2]
    e.g. studies/gdn-sgd-noclip/sweep gdn-mup gdn-mup-nosqrtd 1024
"""
from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from deltamup.reports.analysis import horizons, load_sweep
from deltamup.reports.head_to_head import BATCHES, batch_differences, provenance
from deltamup.reports.intervals import mean_interval, seed_batch_interval

TRAIN_STEPS = (100, 300, 600, 900)  # --train: the windows' last steps, and the trials' last
TRAIN_WINDOW = 100                  # steps a window's mean training loss is over


def train_windows(trials: pl.DataFrame, curves: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """(trials with a column train_S per window: the mean training loss over steps S − TRAIN_WINDOW < step ≤ S,
    steps counted from 1; the (S, column) pairs), S in TRAIN_STEPS and the last step every trial reached."""
    last = int(curves.group_by("trial_id").agg(pl.col("step").max())["step"].min()) + 1
    ends = [s for s in TRAIN_STEPS if s < last] + [last]
    means = curves.group_by("trial_id").agg(
        pl.col("train_loss").filter((pl.col("step") + 1 > s - TRAIN_WINDOW) & (pl.col("step") + 1 <= s)).mean()
        .alias(f"train_{s}") for s in ends)
    return trials.join(means, on="trial_id"), [(s, f"train_{s}") for s in ends]


def gaps(trials: pl.DataFrame, a: str, b: str, width: int, lrs: tuple[int, int] | None = None,
         at: list[tuple[int, str]] | None = None, minus: tuple[str, str] | None = None) -> pl.DataFrame:
    """One row per (lr, point `at`): the seeds both finished, a − b per seed and their mean. log2_lr: the LR's log2
    where both sides share it; with lrs = (EA, EB), a at 2^EA against b at 2^EB, log2_lr "EA / EB". `at`: (label,
    column) pairs, by default the validation loss at each horizon (label: % of the steps) both sides record. At the
    end (100%) where every pair's trials recorded their loss on each validation batch, the interval counts the
    batches as a sample too (reports.intervals.seed_batch_interval; `batches`: how many, else None). With
    minus = (c, d), (a − b) − (c − d) per seed at each LR all four share (not with lrs)."""
    names = [a, b, *(minus or ())]
    if minus is not None and (lrs is not None or len(set(names)) < 4):
        raise ValueError("minus pairs four different parametrizations at a common LR (no lrs)")
    ok = trials.filter(pl.col("status") == "ok", pl.col("width") == width, pl.col("parametrization").is_in(names))
    steps = at or horizons(ok) or [(100, "val_loss")]  # the horizons every side's trials all record
    rows = []
    for pct, metric in steps:
        per_batch = at is None and pct == 100 and BATCHES in ok.columns
        more = [BATCHES] if per_batch else []
        side = {n: ok.filter(pl.col("parametrization") == n).select("lr", "seed", pl.col(metric).alias(n), *more)
                .rename({BATCHES: f"{BATCHES}_{i}"} if per_batch else {}) for i, n in enumerate(names)}
        if lrs is None:
            pairs = side[names[0]]
            for n in names[1:]:
                pairs = pairs.join(side[n], on=["lr", "seed"])
            pairs = pairs.sort("lr", "seed")
            label = pl.col("lr").log(2).round().cast(pl.Int64).cast(pl.String)
        else:
            pairs = side[a].filter(pl.col("lr") == 2.0 ** lrs[0]).drop("lr").join(
                side[b].filter(pl.col("lr") == 2.0 ** lrs[1]).drop("lr"), on="seed").sort("seed")
            label = pl.lit(f"{lrs[0]} / {lrs[1]}")
        for (log2_lr,), group in pairs.with_columns(label.alias("log2_lr")).group_by("log2_lr", maintain_order=True):
            seeds = group["seed"].to_list()
            diff = (group[a] - group[b]).to_numpy()
            by_batch = batch_differences(*(dict(zip(seeds, group[f"{BATCHES}_{i}"])) for i in (0, 1)),
                                         seeds) if per_batch else None
            if minus is not None:
                diff = diff - (group[minus[0]] - group[minus[1]]).to_numpy()
                cd = batch_differences(*(dict(zip(seeds, group[f"{BATCHES}_{i}"])) for i in (2, 3)),
                                       seeds) if by_batch is not None else None
                by_batch = None if cd is None or cd.shape != by_batch.shape else by_batch - cd
            mean, lo, hi = mean_interval(diff) if by_batch is None else seed_batch_interval(by_batch)
            rows.append({"log2_lr": log2_lr, "at": pct, "seeds": seeds,
                         "batches": None if by_batch is None else by_batch.shape[1],
                         "a_minus_b": [round(d, 3) for d in diff], "mean": round(mean, 4),
                         "lo": None if lo is None else round(lo, 4), "hi": None if hi is None else round(hi, 4)})
    if not rows:
        return pl.DataFrame()
    table = pl.DataFrame(rows)
    if lrs is None:  # by LR (numerically), then horizon
        return table.sort(pl.col("log2_lr").cast(pl.Int64), "at")
    return table.sort("at")


def trained_by(trials: pl.DataFrame, names: list[str], width: int) -> dict[str, list[str]]:
    """Each parametrization's distinct "GPU, code" among its finished trials at `width` (reports.head_to_head's
    provenance; "not recorded" for a trial whose record names neither, as before the record kept them)."""
    ok = trials.filter(pl.col("status") == "ok", pl.col("width") == width)
    return {name: sorted("not recorded" if gpu is None and code is None
                         else f"{gpu or 'GPU not recorded'}, code {code or 'not recorded'}"
                         for gpu, code in provenance(ok.filter(pl.col("parametrization") == name)))
            for name in names}


def with_rerun(trials: pl.DataFrame, rerun: pl.DataFrame, width: int) -> pl.DataFrame:
    """`trials` with each parametrization's trials at `width` that `rerun` holds taken from `rerun` instead."""
    again = rerun.filter(pl.col("width") == width)
    names = again["parametrization"].unique().to_list()
    kept = trials.filter(~((pl.col("width") == width) & pl.col("parametrization").is_in(names)))
    return pl.concat([kept, again], how="diagonal_relaxed")


def main(argv: list[str]) -> None:
    usage = ("usage: python3 studies/paired_gap.py DIR A B WIDTH [EA EB] [--train] [--minus C D] [--rerun DIR2]   "
             "(EA, EB: log2 of A's and B's LR; --minus: (A − B) − (C − D) at each common LR; --rerun: DIR2's trials "
             "of a parametrization at WIDTH stand in for DIR's)")
    train = "--train" in argv
    argv = [x for x in argv if x != "--train"]
    rerun = None
    if "--rerun" in argv:
        i = argv.index("--rerun")
        if len(argv) < i + 2:
            raise SystemExit(usage)
        if train:
            raise SystemExit("paired_gap.py: --rerun reads the validation losses only; --train's curves are one "
                             "directory's")
        rerun, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    minus = None
    if "--minus" in argv:
        i = argv.index("--minus")
        if len(argv) < i + 3:
            raise SystemExit(usage)
        minus, argv = (argv[i + 1], argv[i + 2]), argv[:i] + argv[i + 3:]
    if len(argv) not in (4, 6) or not argv[3].isdigit() or (minus and len(argv) == 6):
        raise SystemExit(usage)
    try:
        lrs = (int(argv[4]), int(argv[5])) if len(argv) == 6 else None
    except ValueError:
        raise SystemExit(usage) from None
    directory, a, b, width = argv[0], argv[1], argv[2], int(argv[3])
    if minus and len({a, b, *minus}) < 4:
        raise SystemExit(f"paired_gap.py: --minus needs four different parametrizations, got {a} {b} {minus[0]} "
                         f"{minus[1]}")
    try:
        trials = load_sweep(directory).trials
        if rerun is not None:
            trials = with_rerun(trials, load_sweep(rerun).trials, width)
    except ValueError as e:
        raise SystemExit(f"paired_gap.py: {e}") from None
    at = None
    if train:
        if not (Path(directory) / "curves.parquet").is_file():
            raise SystemExit(f"paired_gap.py: {directory} has no curves.parquet (deltamup report rebuilds it)")
        trials, at = train_windows(trials, pl.read_parquet(Path(directory) / "curves.parquet"))
    table = gaps(trials, a, b, width, lrs, at, minus)
    sides = f"{a} and {b}" if minus is None else f"{a}, {b}, {minus[0]} and {minus[1]}"
    if table.is_empty():
        shared = "(lr, seed)" if lrs is None else f"seed at 2^{lrs[0]} and 2^{lrs[1]}"
        raise SystemExit(f"paired_gap.py: {sides} share no finished {shared} at width {width} in {directory}")
    metric = f"training loss, mean of the {TRAIN_WINDOW} steps up to each" if train else "val_loss"
    contrast = f"{a} − {b}" if minus is None else f"({a} − {b}) − ({minus[0]} − {minus[1]})"
    source = directory if rerun is None else f"{directory}, with {rerun}'s re-runs"
    print(f"{contrast}, {metric} (nats), width {width}, paired by seed ({source})")
    column = "a − b" if minus is None else "(a − b) − (c − d)"
    print(f"| log2 LR | {'step' if train else '% of steps'} | seeds | {column} by seed | mean [90%] |")
    print("| --- | --- | --- | --- | --- |")
    for r in table.iter_rows(named=True):
        spread = f" [{r['lo']:+.4f}, {r['hi']:+.4f}]" if r["lo"] is not None else ""
        spread += f" (seeds and {r['batches']} validation batches)" if r["batches"] else ""
        print(f"| {r['log2_lr']} | {r['at']} | {', '.join(map(str, r['seeds']))} | "
              f"{', '.join(f'{d:+.3f}' for d in r['a_minus_b'])} | {r['mean']:+.4f}{spread} |")
    made = trained_by(trials, [a, b, *(minus or ())], width)
    if len({tuple(v) for v in made.values()}) > 1:
        sides = "; ".join(f"{n}: {' + '.join(v)}" for n, v in made.items())
        print(f"the sides trained on different GPUs or code ({sides}): a shift common to one side's seeds is not in "
              "these intervals (studies/gdn-adamw-8l/recheck.md)")


if __name__ == "__main__":
    main(sys.argv[1:])
