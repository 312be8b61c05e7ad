"""Parametrizations head to head at each width: how much lower one's loss is than another's, paired by seed.

Two comparisons per width and pair (a, b) of one optimizer:
- "own best": each at its own best grid LR at that width (what tuning at every width gives);
- "base LR" (wider widths only): each at the LR that was best for it at the base width, the smallest width where
  both have an optimum (what tuning at the base width and transferring gives: µP's promise).

The best grid LR is the optimum table's best_lr_grid (the argmin of the seed-mean loss). The difference a − b
(nats) is averaged over the seeds both ran at those LRs, paired by seed (seeds share data order and init, so pairing
removes that noise); its interval is Student's t over the paired differences at intervals.LEVEL, null below 2 seeds.
On the validation loss, where every trial of the pair recorded its loss on each validation batch
(`val_batch_losses`), the interval counts the batches as a sample too (intervals.seed_batch_interval: they are the
same for every trial, so a t over seeds leaves their error out); `val_batches` says how many it counted, null where
the interval is over the seeds alone.
A diverged trial's loss is +inf: the difference is then ±inf without an interval (none at all where the sides
diverge in different seeds, or both in one). `better` reads the interval: "a" or "b" where it excludes 0, "neither"
where it holds 0, null without an interval (and, with ±inf, the one that did not diverge).
`edge_a`, `edge_b` (own best only): "low" or "high" where that side's best grid LR is its grid's lowest or highest
(the optimum table's `edge`), so its own best may lie beyond what ran and the comparison is provisional.
`same_gpu`, `same_code`: whether the paired trials of the two sides name the same GPU models, and the same code
fingerprints (scaling.code: any edit of the sources changes it, a kernel rewrite as a new parametrization table), in
their records (a record naming none counts as one value, "not recorded"), null without a pair. Where false, a shift
common to one side's seeds is not in the interval; the summary's line names different GPUs.

    head_to_head(losses, optima) -> optimizer, width, a, b, at, lr_a, lr_b, n_seeds, diff, diff_lo, diff_hi, better,
                                    val_batches, edge_a, edge_b, same_gpu, same_code
"""
from __future__ import annotations

import itertools
import json

import numpy as np
import polars as pl

from .intervals import mean_interval, seed_batch_interval

SCHEMA = {"optimizer": pl.String, "width": pl.Int64, "a": pl.String, "b": pl.String, "at": pl.String,
          "lr_a": pl.Float64, "lr_b": pl.Float64, "n_seeds": pl.Int64, "diff": pl.Float64, "diff_lo": pl.Float64,
          "diff_hi": pl.Float64, "better": pl.String, "val_batches": pl.Int64, "edge_a": pl.String,
          "edge_b": pl.String, "same_gpu": pl.Boolean, "same_code": pl.Boolean}
BATCHES = "val_batch_losses"  # the trial record's final validation loss on each batch (JSON text in trials)
PROVENANCE = ("gpu_name", "code")  # what the trial record says trained it (null: not recorded, as in older records)


def provenance(trials: pl.DataFrame, columns: tuple[str, ...] = PROVENANCE) -> set[tuple]:
    """The distinct values of `columns` (default (gpu_name, code)) in `trials`' records, None for what a record (or
    the table) does not name."""
    return set(trials.select((pl.col(c) if c in trials.columns else pl.lit(None)).alias(c) for c in columns)
               .iter_rows())


def paired(losses: pl.DataFrame, a: tuple[str, str, int, float], b: tuple[str, str, int, float],
           batches: bool = False) -> dict:
    """n_seeds, diff, diff_lo, diff_hi, better, val_batches, same_gpu, same_code for a − b, a and b each
    (parametrization, optimizer, width, lr); `batches`: the losses are the final validation loss, whose per-batch
    values the interval may use."""
    def rows_of(key: tuple[str, str, int, float]) -> pl.DataFrame:
        p, o, w, lr = key
        return losses.filter((pl.col("parametrization") == p) & (pl.col("optimizer") == o) & (pl.col("width") == w)
                             & (pl.col("lr") == lr))

    def at(key: tuple[str, str, int, float], column: str) -> dict[int, object]:
        rows = rows_of(key)
        return dict(zip(rows["seed"].to_list(), rows[column].to_list()))

    la, lb = at(a, "loss"), at(b, "loss")
    seeds = sorted(set(la) & set(lb))
    d = np.array([la[s] - lb[s] for s in seeds], dtype=float)
    paired_rows = [rows_of(key).filter(pl.col("seed").is_in(seeds)) for key in (a, b)]
    same = {f"same_{what}": provenance(paired_rows[0], (column,)) == provenance(paired_rows[1], (column,))
            if seeds else None for what, column in (("gpu", "gpu_name"), ("code", "code"))}
    out = {"n_seeds": len(seeds), "diff": None, "diff_lo": None, "diff_hi": None, "better": None,
           "val_batches": None} | same
    infinite = d[np.isinf(d)]
    if not seeds or np.isnan(d).any() or len(set(np.sign(infinite))) > 1:  # NaN: both diverged in a seed
        return out
    if infinite.size:  # one side diverged in some seed, always the same side
        return out | {"diff": float(infinite[0]), "better": "b" if infinite[0] > 0 else "a"}
    by_batch = batch_differences(at(a, BATCHES), at(b, BATCHES), seeds) if batches and BATCHES in losses.columns \
        else None
    if by_batch is not None:
        out["diff"], lo, hi = seed_batch_interval(by_batch)
        out["val_batches"] = by_batch.shape[1]
    else:
        out["diff"], lo, hi = mean_interval(d)
    if lo is not None:
        out |= {"diff_lo": lo, "diff_hi": hi, "better": "b" if lo > 0 else "a" if hi < 0 else "neither"}
    return out


def batch_differences(a: dict[int, object], b: dict[int, object], seeds: list[int]) -> np.ndarray | None:
    """[seeds, batches] of a − b on each validation batch (`val_batch_losses` as JSON text, by seed), or None where
    a seed of either side lacks them or their counts differ."""
    rows = []
    for seed in seeds:
        if not isinstance(a.get(seed), str) or not isinstance(b.get(seed), str):
            return None
        xa, xb = json.loads(a[seed]), json.loads(b[seed])
        if len(xa) != len(xb) or len(xa) < 2:
            return None
        rows.append(np.asarray(xa, dtype=float) - np.asarray(xb, dtype=float))
    return np.stack(rows) if rows else None


def head_to_head(losses: pl.DataFrame, optima: pl.DataFrame) -> pl.DataFrame:
    """The table of the module docstring; `losses`: analysis.trial_losses rows (failed trials are left out),
    `optima`: the same metric's optimum table (its best_lr_grid per parametrization, optimizer and width)."""
    losses = losses.filter(~pl.col("failed"))
    on_val = "metric" in optima.columns and set(optima["metric"].to_list()) == {"val_loss"}
    found = optima.filter(pl.col("best_lr_grid").is_not_null())
    best = {(p, o, w): lr for p, o, w, lr in
            found.select("parametrization", "optimizer", "width", "best_lr_grid").iter_rows()}
    edge = {(p, o, w): e for p, o, w, e in found.select("parametrization", "optimizer", "width", "edge").iter_rows()} \
        if "edge" in optima.columns else {}
    rows = []
    for optimizer in sorted({o for _, o, _ in best}):
        names = sorted({p for p, o, _ in best if o == optimizer})
        for a, b in itertools.combinations(names, 2):
            widths = sorted({w for p, o, w in best if o == optimizer and p == a}
                            & {w for p, o, w in best if o == optimizer and p == b})
            if not widths:
                continue
            base = widths[0]
            for width in widths:
                for at, wa in (("own best", width), ("base LR", base))[:1 if width == base else 2]:
                    lr_a, lr_b = best[(a, optimizer, wa)], best[(b, optimizer, wa)]
                    own = at == "own best"
                    rows.append({"optimizer": optimizer, "width": width, "a": a, "b": b, "at": at, "lr_a": lr_a,
                                 "lr_b": lr_b} | paired(losses, (a, optimizer, width, lr_a),
                                                         (b, optimizer, width, lr_b), batches=on_val)
                                | {"edge_a": edge.get((a, optimizer, width)) if own else None,
                                   "edge_b": edge.get((b, optimizer, width)) if own else None})
    return pl.DataFrame(rows, schema=SCHEMA)


def describe(row: dict) -> str:
    """One line: "at width 1024, base LR: sp − gdn-mup = +0.025 [+0.015, +0.036] nats, 3 seeds: gdn-mup lower",
    and where a side's own best is on its grid's edge "(provisional: sp's best is its grid's high LR)", where the
    sides' records name different GPU models "(the sides' records name different GPUs)"."""
    if row["diff"] is None:
        return f"at width {row['width']}, {row['at']}: {row['a']} vs {row['b']}: no seed ran both"
    spread = (f" [{row['diff_lo']:+.3f}, {row['diff_hi']:+.3f}]" if row["diff_lo"] is not None else "")
    winner = {"a": f"{row['a']} lower", "b": f"{row['b']} lower", "neither": "no difference shown",
              None: "no interval"}[row["better"]]
    batches = f" and {row['val_batches']} validation batches" if row.get("val_batches") else ""
    edges = [f"{row[side]}'s best is its grid's {row[f'edge_{side}']} LR" for side in ("a", "b")
             if row.get(f"edge_{side}")]
    provisional = f" (provisional: {', '.join(edges)})" if edges else ""
    apart = " (the sides' records name different GPUs)" if row.get("same_gpu") is False else ""
    return (f"at width {row['width']}, {row['at']}: {row['a']} − {row['b']} = {row['diff']:+.3f}{spread} nats, "
            f"{row['n_seeds']} seed{'s' if row['n_seeds'] != 1 else ''}{batches}: {winner}{provisional}{apart}")
