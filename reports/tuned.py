"""From a sweep's optimum to an export for a target width: which LR, tuned where, with what provenance.

The export carries the LR tuned at one width to another, which is only justified when the sweep's verdict for that
parametrization and optimizer is `transfers` (reports/verdict.py). Otherwise it is refused, unless the caller allows
an unverified export: then the file's provenance says so in `warning`, next to the verdict and its slope interval.
"""
from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime

import polars as pl

from deltamup.parametrizations.export import Export, make_export
from deltamup.parametrizations.hparams import parse_label
from deltamup.reports.analysis import Analysis
from deltamup.reports.interpretation import interval
from deltamup.sweeps.spec import parse

VERDICT_KEYS = ("verdict", "verdict_note", "slope", "slope_lo", "slope_hi", "spread_octaves", "spread_lo",
                "spread_hi", "n_seeds", "interval_method")


def verdict_sentence(t: dict) -> str:
    """'the transfer verdict for gdn-mup/adamw on val_loss is undetermined (slope +0.05 [−0.18, +0.25] octave per
    octave of width, 1 seed: …)'."""
    seeds = f"{t['n_seeds']} seed{'s' * (t['n_seeds'] != 1)}"
    return (f"the transfer verdict for {t['parametrization']}/{t['optimizer']} on {t['metric']} is {t['verdict']} "
            f"(slope {interval(t['slope'], t['slope_lo'], t['slope_hi'])} octave per octave of width, {seeds}: "
            f"{t['verdict_note']})")


def export_from_sweep(analysis: Analysis, parametrization: str, optimizer: str, width: int,
                      tuned_width: int | None = None, allow_bound: bool = False,
                      allow_unverified: bool = False, from_search: bool = False) -> Export:
    """The export at `width` of the optimum found at `tuned_width` (default: the sweep's smallest width with an
    optimum, the proxy one tunes on). ValueError when the sweep has no such optimum, only a bound of one (unless
    allow_bound), or a verdict other than `transfers` for a width other than tuned_width (unless allow_unverified:
    then provenance["warning"] says so).

    In a sweep with hparams axes `parametrization` may name one variant ("gdn-mup[output_mult=2]") or the
    parametrization alone ("gdn-mup"): then the variant with the lowest loss at the tuned width is exported, its
    hparams (the tuned base values) applied at `width` through the table (Export.hparams, weight_decay).

    from_search: the LR and hparams of the Optuna search's best trial at tuned_width (analysis.search: the grid's
    and the search's trials, one seed) instead of the fitted grid optimum; the verdict still gates it, and the
    provenance names the trial."""
    found = analysis.optima.filter((pl.col("optimizer") == optimizer) & pl.col("best_lr").is_not_null())
    parametrization = _variant(found, parametrization, tuned_width)
    rows = found.filter(pl.col("parametrization") == parametrization).sort("width")
    if rows.is_empty():
        have = sorted({f"{p}/{o}" for p, o in analysis.optima.select("parametrization", "optimizer").iter_rows()})
        raise ValueError(f"the sweep has no optimum for {parametrization}/{optimizer} (it has: "
                         f"{', '.join(have) or 'no finished trials'})")
    tuned_width = tuned_width or int(rows["width"][0])
    at = rows.filter(pl.col("width") == tuned_width)
    if at.is_empty():
        raise ValueError(f"no optimum at width {tuned_width} for {parametrization}/{optimizer}; widths with one: "
                         f"{', '.join(map(str, rows['width']))}")
    best = at.row(0, named=True)
    if best["bound"] and not allow_bound:
        raise ValueError(f"the optimum at width {tuned_width} is on the {best['edge']} edge of the LR grid "
                         f"({best['best_lr']:g}): a bound, not a value. Extend the grid, or pass --allow-bound")
    t = analysis.transfer.filter((pl.col("parametrization") == parametrization)
                                 & (pl.col("optimizer") == optimizer)).row(0, named=True)
    warning = None
    if t["verdict"] != "transfers" and width != tuned_width:
        if not allow_unverified:
            raise ValueError(f"{verdict_sentence(t)}: its LR is not shown to carry from width {tuned_width} to "
                             f"{width}; pass --allow-unverified to export it anyway")
        warning = (f"UNVERIFIED: {verdict_sentence(t)}; the LR tuned at width {tuned_width} is not shown to carry to "
                   f"width {width}")
    spec = parse({"name": analysis.sweep.path.name, **analysis.sweep.spec}, open_task=False)
    train = dict(spec.train)
    name, _, text = parametrization.partition("[")
    hparams, lr, searched = parse_label(text.rstrip("]")), best["best_lr"], {}
    if from_search:
        found = analysis.search.filter((pl.col("parametrization") == name) & (pl.col("optimizer") == optimizer)
                                       & (pl.col("width") == tuned_width))
        if found.is_empty():
            raise ValueError(f"no Optuna search of {name}/{optimizer} at width {tuned_width} in the sweep (a spec "
                             "with search: optuna runs one)")
        row = found.row(0, named=True)
        hparams, lr = parse_label(row["best_hparams"]), row["best_lr"]
        searched = {f"search_{k}": row[k] for k in ("best_trial", "best_val_loss", "grid_best_val_loss", "gain",
                                                    "searched")}
    weight_decay = float(hparams.pop("weight_decay", train.pop("weight_decay", 0.0)))
    spec_file = analysis.sweep.path / "spec.yaml"
    provenance = dict(
        sweep=str(analysis.sweep.path.resolve()), spec_name=spec.name,
        spec_sha256=hashlib.sha256(spec_file.read_bytes()).hexdigest(), task=spec.task, steps=spec.steps,
        batch_size=spec.batch_size, seq_len=spec.seq_len, metric=analysis.metric,
        best_lr=best["best_lr"], best_lr_lo=best["best_lr_lo"], best_lr_hi=best["best_lr_hi"],
        best_lr_grid=best["best_lr_grid"], refined=best["refined"], bound=best["bound"],
        edge=best["edge"], best_loss=best["best_loss"], best_loss_se=best["best_loss_se"],
        **{k: t[k] for k in VERDICT_KEYS}, **({"warning": warning} if warning else {}),
        trials=len(analysis.sweep.trials), missing_trials=len(analysis.missing), variant=parametrization,
        **searched, created_utc=datetime.now(UTC).isoformat(timespec="seconds"))
    # an interval's end a bound leaves open (±inf, 0 for an LR) is written null: strict JSON has no infinity
    provenance = {k: None if isinstance(v, float) and (math.isinf(v) or (k == "best_lr_lo" and v == 0)) else v
                  for k, v in provenance.items()}
    return make_export(name, optimizer, spec.model_config(width), lr=lr, weight_decay=weight_decay,
                       tuned_width=tuned_width, train=train, provenance=provenance, hparams=hparams)


def _variant(optima: pl.DataFrame, parametrization: str, tuned_width: int | None) -> str:
    """`parametrization` when the optima have it, else its hparams variant ("name[...]") with the lowest best loss
    at tuned_width (default: the smallest width any variant has an optimum at); unchanged when it has none."""
    labels = set(optima["parametrization"])
    variants = optima.filter(pl.col("parametrization").str.starts_with(f"{parametrization}["))
    if parametrization in labels or variants.is_empty():
        return parametrization
    width = tuned_width or int(variants["width"].min())
    at = variants.filter(pl.col("width") == width).sort("best_loss_grid")
    return at["parametrization"][0] if not at.is_empty() else parametrization
