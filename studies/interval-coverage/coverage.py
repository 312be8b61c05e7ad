"""How often the report's 90% intervals contain the truth: simulated sweeps with a known optimum, through the same
code path a real sweep takes (deltamup.reports.analysis.estimate), at the noise levels the 8-layer study measured.

Each simulated sweep has two widths (256, 1024: two octaves apart), four learning rates one octave apart
(2^-10 … 2^-7) at each, and n seeds. Seed s's validation loss at width w and log2 LR x is

    a·u² + b·u³ + o_s + e_{s,w,x},    u = x − x*_w,

with x*_w the true optimum (uniform in [−9, −8.5] at 256, plus 2 × the true slope at 1024), o_s ~ N(0, 0.008²) a
seed's offset shared by every LR and width (the study's seeds differ by about that much), and e ~ N(0, σ²) the
per-trial scatter that moves a vertex (the study's seed × LR interaction: 0.002–0.018 nats, 0.004 typical at 256).
b ≠ 0 makes the bowl asymmetric (steeper above the optimum: at b = a/5 one octave above costs 1.5× one octave
below, about what the study's curves show either way round), which a three-point parabola fits with a bias. A
setting's tail (share, d) adds ± d to each trial's e with probability share (trial_scatter).

    python3 studies/interval-coverage/coverage.py [--sims 400] [--out studies/interval-coverage/coverage.md]

With --groups N, N parametrizations per sweep under the same noise, whose seed × LR scatter the report's floor
pools (counted on the first). With --pool F1,F2,…, one parametrization per factor, each with that multiple of the
setting's trial scatter (counted on the first): a pool that does not scatter alike, as naive µP's seeds at width
2048 in the 8-layer study (about 7× GDN-µP's and SP's). The report floors each parametrization the F test names
(intervals.scatter_unlike, stepping down from the noisiest) at its own scatter and the others at their pool without
them; --floor-rule pooled runs the rule it replaced (`pooled_floors`): every parametrization at the pool of all.

    python3 studies/interval-coverage/coverage.py --pool 1,7,1 [--floor-rule pooled] [--sims 400] [--out FILE]

Prints one row per setting: how often each width's 90% interval holds x*_w, how often the slope's holds the true
slope, and the verdicts' frequencies at a true slope of 0 and of +0.35; then how often the 5th–95th percentiles of
the same bootstrap replicates would have held them (the rule the seed intervals do not use).

With --horizons: the horizon shift's intervals instead (analysis.horizon_table). One width, four learning rates one
octave apart (2^-12 … 2^-9, the 8-layer study's SP grid at width 2048) and n seeds; seed s's validation loss at
log2 LR x and horizon h (50% or 100% of the steps) is a·(x − x*_h)² + o_s + e_{s,x,h}, x*_100 = x*_50 + shift,
x*_50 uniform in [−11, −10.5], o_s shared by every LR and both horizons, and e the per-trial scatter correlated ρ
between the two horizons of one run. Prints how often the shift's 90% interval holds the true shift (0 or +0.35)
and how often it is called `moving` (the interval excludes 0) or `settled` (inside ±0.25 octave).

    python3 studies/interval-coverage/coverage.py --horizons [--sims 400] [--out studies/interval-coverage/horizons.md]

With --edges: optima the noise or the grid puts on an end of the LRs. Single-seed sweeps, whose intervals come from
the fit bootstrap (σ assumed: the 0.01-nat floor), and 3-seed sweeps on a short grid. The same two widths and bowl
on two grids: three LRs one octave apart (2^-9 … 2^-7) around a true optimum uniform in [−9.5, −6.5], so it often
lies beyond an end of the grid (the 4× part of the 8-layer study: each width's previous optimum and its two
neighbours), and the four LRs above with the optimum inside. Prints how often each width's interval holds x*_w,
apart for widths whose best grid LR is an edge (a bound) and the rest, how often the slope's holds the true slope,
and how often a width's interval is open; each by the report's rule and by the alternative (fit: Efron's
bias-corrected percentiles of the same replicates; both methods: a bound's interval closed where the replicates end,
open only on the bound's side).

    python3 studies/interval-coverage/coverage.py --edges [--sims 400] [--out studies/interval-coverage/edges.md]

With --unbalanced: the seed-adjusted mean against the plain one, on the studies' unbalanced designs. Seed 0 runs
every LR of a width; seeds 1 and 2 then run seed 0's best grid LR and its two neighbours (the `seeds_around` parts:
five LRs 2^-11 … 2^-7, the true optimum uniform in [−10, −8]), or seed 0's best alone (the 4× part's `long-seeds`
head-to-head cells: three LRs 2^-9 … 2^-7, the optimum in [−9.5, −6.5]). The same bowl as above, at a true slope of
0 and +0.35. Prints, by the report's rule (seed-adjusted where the seeds ran different LRs, and the seed bootstrap
adding σ/√n at LRs fewer than 3 seeds ran), by the plain seed mean and by the seed bootstrap without that scatter:
how often the best grid LR is the grid LR nearest the true optimum, how often each width's interval and the
slope's hold the truth, and how often a width's interval is open.

    python3 studies/interval-coverage/coverage.py --unbalanced [--sims 400] \
        [--out studies/interval-coverage/unbalanced.md]

With --conditional: how often each width's 90% interval holds x*_w given how wide it came out: the settings above at
a true slope of 0, each width's interval put in a bin by its width in octaves (narrower than 0.25, 0.25–0.5, 0.5–1,
wider or open). Prints each bin's share of the widths and how often their intervals held the optimum: the 90% is an
average over draws, and this says whether a narrow interval (three seeds whose own optima agree by chance) still
holds it. Then the same for the slope's interval (its width in octaves per octave of width, the same bins) and the
true slope.

    python3 studies/interval-coverage/coverage.py --conditional [--sims 2000] \
        [--out studies/interval-coverage/conditional.md]

With --head-to-head: the head-to-head table's intervals instead (reports.head_to_head, "own best"). Two
parametrizations at one width, the same four learning rates and n seeds; seed s's loss for parametrization p is
m_p + a·(x − x*_p)² + o_s + e_{s,p,x}, x*_a uniform in [−9, −8.5] and x*_b one octave below it (SP's optimum below
GDN-µP's, as at width 1024 in the studies), o_s shared by both (pairing by seed removes it), m_b = 1 and m_a = 1 + Δ.
The truth is the difference of the two true curves' minima over the grid, what "each at its own best grid LR" means
without noise. Prints how often the 90% interval holds it and how often each side is called lower, at Δ = 0 and at
Δ = +0.03 (the 0.03–0.04 nats the DeltaProduct₂ study measured).

    python3 studies/interval-coverage/coverage.py --head-to-head [--sims 400] \
        [--out studies/interval-coverage/head-to-head.md]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from deltamup.reports import analysis, intervals
from deltamup.reports.head_to_head import head_to_head

WIDTHS = (256, 1024)
LOG2_LRS = np.arange(-10.0, -6.0)  # 2^-10 … 2^-7
SEED_OFFSET = 0.008                # nats


@dataclass(frozen=True)
class Setting:
    name: str
    curvature: float     # a: nats per octave² around the optimum
    asymmetry: float     # b: nats per octave³
    scatter: float       # σ: per-trial nats
    seeds: int
    log2_lrs: tuple[float, ...] = tuple(LOG2_LRS)
    truth: tuple[float, float] = (-9.0, -8.5)  # the range of the true log2 optimum at width 256
    tail: tuple[float, float] = (0.0, 0.0)     # (share, nats): that share of trials ± that far off, on top of σ
    widths: tuple[int, ...] = WIDTHS            # the first is the base: its optimum is drawn from `truth`


def trial_scatter(scatter: float, tail: tuple[float, float], n: int, rng: np.random.Generator) -> NDArray:
    """n trials' scatter: N(0, σ²), and where tail = (share, d) ≠ 0 each trial ± d more with probability share
    (part `recheck` of the 8-layer study: one re-run of six 0.025 nats from its original, five within 0.009)."""
    e = rng.normal(0.0, scatter, n)
    share, size = tail
    if share:  # drawn only here, so that the settings without a tail keep their random stream
        e = e + (rng.random(n) < share) * rng.choice((-size, size), n)
    return e


SETTINGS = [
    Setting("typical (study, width 256)", 0.012, 0.0, 0.004, 3),
    Setting("quiet", 0.012, 0.0, 0.002, 3),
    Setting("noisy (study, width 1024)", 0.012, 0.0, 0.012, 3),
    Setting("flat bowl", 0.006, 0.0, 0.004, 3),
    Setting("asymmetric bowl, 1.5 : 1", 0.012, 0.0024, 0.004, 3),
    Setting("asymmetric bowl, 3 : 1", 0.012, 0.006, 0.004, 3),
    Setting("noisy, 5 seeds", 0.012, 0.0, 0.012, 5),
    Setting("typical, one trial in six 0.025 off", 0.012, 0.0, 0.004, 3, tail=(1 / 6, 0.025)),
]


def simulate(setting: Setting, slope: float, rng: np.random.Generator, pool: tuple[float, ...] = (1.0,)
             ) -> tuple[pl.DataFrame, np.ndarray]:
    """One sweep's trials (the columns analysis.estimate reads) and the true log2 optima per width (W,) of its
    parametrization "p". `pool`: each parametrization's trial scatter as a multiple of the setting's σ, p's first;
    with more than one, parametrizations "p1", "p2", … beside p, each its own optimum and seeds' offsets: a study's
    other parametrizations, whose seed × LR scatter the report's floor pools with p's (reports/intervals.py,
    with_scatter_floor)."""
    lrs = np.array(setting.log2_lrs)
    rows, truths = [], []
    for g, factor in enumerate(pool):
        base = rng.uniform(*setting.truth)
        widths = np.array(setting.widths)
        truths.append(base + slope * np.log2(widths / widths[0]))
        offsets = rng.normal(0.0, SEED_OFFSET, setting.seeds)
        for w, x_star in zip(setting.widths, truths[-1]):
            u = lrs - x_star
            bowl = setting.curvature * u ** 2 + setting.asymmetry * u ** 3
            for s in range(setting.seeds):
                losses = 1.0 + bowl + offsets[s] + trial_scatter(setting.scatter * factor, setting.tail, len(u), rng)
                rows += [dict(parametrization=f"p{g or ''}", optimizer="adamw", width=w, lr=2.0 ** x, seed=s,
                              val_loss=float(v), status="ok") for x, v in zip(lrs, losses)]
    return pl.DataFrame(rows), truths[0]


def simulated_estimate(setting: Setting, slope: float, rng: np.random.Generator, pool: tuple[float, ...] = (1.0,)
                       ) -> tuple[analysis.Estimate, pl.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """One simulated sweep through the report's estimate: the estimate (its tables p's rows only), p's optima by
    width, the true log2 optima and the intervals' ends in log2 (∓inf where open)."""
    trials, truth = simulate(setting, slope, rng, pool)
    est = analysis.estimate(trials, "val_loss")
    mine = pl.col("parametrization") == "p"
    est = dataclasses.replace(est, optima=est.optima.filter(mine), transfer=est.transfer.filter(mine))
    optima = est.optima.sort("width")
    with np.errstate(divide="ignore"):  # a low bound's best_lr_lo is 0
        lo, hi = np.log2(optima["best_lr_lo"].to_numpy()), np.log2(optima["best_lr_hi"].to_numpy())
    return est, optima, truth, lo, hi


def run(setting: Setting, sims: int, pool: tuple[float, ...] = (1.0,)) -> dict:
    """Coverage and verdict rates of `sims` sweeps at a true slope of 0 and `sims` at +0.35."""
    rng = np.random.default_rng(0)
    held, slope_held, verdicts = [], [], {0.0: [], 0.35: []}
    pct_held, pct_slope_held = [], []
    for true_slope in verdicts:
        for _ in range(sims):
            est, optima, truth, lo, hi = simulated_estimate(setting, true_slope, rng, pool)
            held += list((lo <= truth) & (truth <= hi))
            (row,) = est.transfer.to_dicts()
            slope_held.append(row["slope_lo"] <= true_slope <= row["slope_hi"])
            verdicts[true_slope].append(row["verdict"])
            _, reps = est.replicates[("p", "adamw")]
            points = optima["log2_best_lr"].to_numpy()
            lo, hi = intervals.interval(reps, points, "fit")  # "fit": the 5th-95th percentiles (and the point)
            pct_held += list((lo <= truth) & (truth <= hi))
            weights = intervals.slope_weights(np.log2(np.array(setting.widths, float)))
            lo, hi = intervals.interval(reps @ weights, float(weights @ points), "fit")
            pct_slope_held.append(bool(lo <= true_slope <= hi))

    def share(calls: list[str], verdict: str) -> float:
        return 100 * calls.count(verdict) / len(calls)

    return {"setting": setting.name, "a": setting.curvature, "b": setting.asymmetry, "σ": setting.scatter,
            "seeds": setting.seeds,
            "optimum covered %": 100 * np.mean(held), "slope covered %": 100 * np.mean(slope_held),
            "slope 0: transfers %": share(verdicts[0.0], "transfers"),
            "slope 0: drifts %": share(verdicts[0.0], "drifts"),
            "slope +0.35: drifts %": share(verdicts[0.35], "drifts"),
            "slope +0.35: transfers %": share(verdicts[0.35], "transfers"),
            "percentiles: optimum covered %": 100 * np.mean(pct_held),
            "percentiles: slope covered %": 100 * np.mean(pct_slope_held)}


WIDTH_BINS = ((0.0, 0.25), (0.25, 0.5), (0.5, 1.0), (1.0, np.inf))  # an interval's width, octaves


def run_conditional(setting: Setting, sims: int, pool: tuple[float, ...] = (1.0,)) -> dict:
    """Each width's coverage by the width of its interval, and the slope's by the width of its own, over `sims`
    sweeps at a true slope of 0."""
    rng = np.random.default_rng(0)
    spans, held, slope_spans, slope_held = [], [], [], []
    for _ in range(sims):
        est, _, truth, lo, hi = simulated_estimate(setting, 0.0, rng, pool)
        spans += list(hi - lo)
        held += list((lo <= truth) & (truth <= hi))
        (row,) = est.transfer.to_dicts()
        slope_spans.append(row["slope_hi"] - row["slope_lo"])
        slope_held.append(row["slope_lo"] <= 0.0 <= row["slope_hi"])
    row = {"setting": setting.name, "σ": setting.scatter, "seeds": setting.seeds}
    for what, span, hit in (("optimum", spans, held), ("slope", slope_spans, slope_held)):
        span, hit = np.array(span), np.array(hit)
        row[f"{what} covered %"] = 100 * hit.mean()
        prefix = "" if what == "optimum" else "slope "
        for low, high in WIDTH_BINS:
            inside = (span >= low) & (span < high) if np.isfinite(high) else span >= low
            name = (f"< {high:g}" if low == 0 else f"≥ {low:g} or open" if not np.isfinite(high)
                    else f"{low:g}–{high:g}")
            row[f"{prefix}{name} oct: share %"] = 100 * inside.mean()
            row[f"{prefix}{name} oct: covered %"] = 100 * hit[inside].mean() if inside.any() else float("nan")
    return row


AROUND = (-9.0, -8.0, -7.0)  # three LRs around a previous optimum (the 8-layer study's 4× part)
EDGE_SETTINGS = [
    Setting("3 LRs, optimum anywhere in [−9.5, −6.5]", 0.012, 0.0, 0.010, 1, AROUND, (-9.5, -6.5)),
    Setting("3 LRs, flat bowl", 0.006, 0.0, 0.010, 1, AROUND, (-9.5, -6.5)),
    Setting("3 LRs, quieter than assumed", 0.012, 0.0, 0.004, 1, AROUND, (-9.5, -6.5)),
    Setting("4 LRs, optimum inside", 0.012, 0.0, 0.010, 1),
    Setting("4 LRs, flat bowl", 0.006, 0.0, 0.010, 1),
    Setting("3 LRs, 3 seeds", 0.012, 0.0, 0.004, 3, AROUND, (-9.5, -6.5)),
    Setting("3 LRs, 3 seeds, noisy", 0.012, 0.0, 0.012, 3, AROUND, (-9.5, -6.5)),
]


def bias_corrected(replicates: NDArray, point: float) -> tuple[float, float]:
    """The alternative to the report's fit intervals: Efron's bias-corrected 90% percentile interval (ties with the
    point count half)."""
    v = replicates[~np.isnan(replicates)]
    below = (np.sum(v < point) + 0.5 * np.sum(v == point)) / len(v)
    z0 = intervals.NORMAL.inv_cdf(min(max(below, 0.5 / len(v)), 1 - 0.5 / len(v)))
    z = intervals.Z
    lo, hi = (np.percentile(v, 100 * intervals.NORMAL.cdf(2 * z0 + sign * z)) for sign in (-1, 1))
    return float(lo), float(hi)


def run_edges(setting: Setting, sims: int) -> dict:
    """Coverage of the intervals, by the report's rule and by the alternative, over `sims` sweeps at a true slope of
    0 and `sims` at +0.35."""
    rng = np.random.default_rng(0)
    weights = intervals.slope_weights(np.log2(np.array(WIDTHS, float)))
    held: dict[str, dict[str, list[bool]]] = {rule: {"edge": [], "inside": [], "slope": [], "open": []}
                                              for rule in ("report", "alternative")}
    for true_slope in (0.0, 0.35):
        for _ in range(sims):
            est, optima, truth, lo, hi = simulated_estimate(setting, true_slope, rng)
            (row,) = est.transfer.to_dicts()
            points, edges = optima["log2_best_lr"].to_numpy(), optima["edge"].to_list()
            reps = est.replicates[("p", "adamw")][1]
            fit = setting.seeds < intervals.MIN_SEEDS
            alternative = bias_corrected if fit else (lambda r, p: tuple(intervals.interval(r, p, "seeds")))
            old = [intervals.open_bounds(*alternative(reps[:, k], points[k]), [1.0], [edges[k]]) for k in range(len(WIDTHS))]
            old_slope = intervals.open_bounds(*alternative(reps @ weights, float(weights @ points)), weights, edges)
            for rule, bounds, slope_bounds in (("report", list(zip(lo, hi)), (row["slope_lo"], row["slope_hi"])),
                                               ("alternative", old, old_slope)):
                for (a, b), x, edge in zip(bounds, truth, edges):
                    held[rule]["edge" if edge else "inside"].append(a <= x <= b)
                    held[rule]["open"].append(bool(np.isinf(a) or np.isinf(b)))
                held[rule]["slope"].append(slope_bounds[0] <= true_slope <= slope_bounds[1])
    out: dict = {"setting": setting.name, "seeds": setting.seeds, "LRs": len(setting.log2_lrs), "a": setting.curvature,
                 "σ": setting.scatter, "edge optima %": 100 * len(held["report"]["edge"]) / (2 * sims * len(WIDTHS))}
    for rule, h in held.items():
        out |= {f"{rule}: {k} covered %": 100 * np.mean(h[k]) for k in ("edge", "inside", "slope")}
        out[f"{rule}: open %"] = 100 * np.mean(h["open"])
    return out


HORIZON_LRS = np.arange(-12.0, -8.0)  # 2^-12 … 2^-9: the 8-layer study's SP grid at width 2048
SHIFTS = (0.0, 0.35)                  # true shifts from 50% to 100% of the steps, octaves
STEPS = [(50, "val_loss_h50"), (100, "val_loss")]


@dataclass(frozen=True)
class HorizonSetting:
    name: str
    curvature: float     # a: nats per octave² around the optimum
    scatter: float       # σ: per-trial nats at each horizon
    correlation: float   # ρ: of one run's scatter at its two horizons
    seeds: int


HORIZON_SETTINGS = [
    HorizonSetting("typical, ρ = 0.5", 0.012, 0.004, 0.5, 3),
    HorizonSetting("typical, independent horizons", 0.012, 0.004, 0.0, 3),
    HorizonSetting("noisy, ρ = 0.5", 0.012, 0.012, 0.5, 3),
]


def simulate_horizons(setting: HorizonSetting, shift: float, rng: np.random.Generator) -> pl.DataFrame:
    """One sweep's trials: val_loss_h50 and val_loss (the columns analysis.estimate reads)."""
    x50 = rng.uniform(-11.0, -10.5)
    offsets = rng.normal(0.0, SEED_OFFSET, setting.seeds)
    rows = []
    for s in range(setting.seeds):
        shared = rng.normal(0.0, 1.0, len(HORIZON_LRS))
        own = rng.normal(0.0, 1.0, (2, len(HORIZON_LRS)))
        mix = np.sqrt(setting.correlation) * shared + np.sqrt(1 - setting.correlation) * own
        h50, h100 = (1.0 + setting.curvature * (HORIZON_LRS - x) ** 2 + offsets[s] + setting.scatter * e
                     for x, e in ((x50, mix[0]), (x50 + shift, mix[1])))
        rows += [dict(parametrization="p", optimizer="adamw", width=2048, lr=2.0 ** x, seed=s, status="ok",
                      val_loss_h50=float(a), val_loss=float(b)) for x, a, b in zip(HORIZON_LRS, h50, h100)]
    return pl.DataFrame(rows)


def run_horizons(setting: HorizonSetting, sims: int) -> dict:
    """Coverage of the shift's interval and the calls' rates over `sims` sweeps at each true shift."""
    rng = np.random.default_rng(0)
    held, calls = [], {s: [] for s in SHIFTS}
    for shift in SHIFTS:
        for _ in range(sims):
            trials = simulate_horizons(setting, shift, rng)
            table = analysis.horizon_table({m: analysis.estimate(trials, m) for _, m in STEPS}, STEPS)
            (row,) = table.filter(pl.col("horizon") == 100).to_dicts()
            held.append(row["shift_lo"] <= shift <= row["shift_hi"])
            calls[shift].append(row["still_moving"])

    def share(shift: float, call: str) -> float:
        return 100 * calls[shift].count(call) / len(calls[shift])

    return {"setting": setting.name, "a": setting.curvature, "σ": setting.scatter, "ρ": setting.correlation,
            "seeds": setting.seeds, "shift covered %": 100 * np.mean(held),
            "shift 0: settled %": share(0.0, "settled"), "shift 0: moving %": share(0.0, "moving"),
            "shift +0.35: moving %": share(0.35, "moving"), "shift +0.35: settled %": share(0.35, "settled")}


GAPS = (0.0, 0.03)  # true Δ = a − b at each one's best grid LR, nats
PAIR_WIDTH = 1024


@dataclass(frozen=True)
class PairSetting:
    name: str
    curvature: float     # a: nats per octave² around each optimum
    scatter: float       # σ: per-trial nats
    seeds: int
    tail: tuple[float, float] = (0.0, 0.0)     # as Setting.tail


PAIR_SETTINGS = [
    PairSetting("typical (study, width 256)", 0.012, 0.004, 3),
    PairSetting("noisy (study, width 1024)", 0.012, 0.012, 3),
    PairSetting("flat bowl, noisy", 0.006, 0.012, 3),
    PairSetting("noisy, 5 seeds", 0.012, 0.012, 5),
    PairSetting("typical, one trial in six 0.025 off", 0.012, 0.004, 3, tail=(1 / 6, 0.025)),
]


def simulate_pair(setting: PairSetting, gap: float, rng: np.random.Generator) -> tuple[pl.DataFrame, float]:
    """One sweep's trials of parametrizations a and b at one width, and the true a − b at each one's best grid LR."""
    x_a = rng.uniform(-9.0, -8.5)
    offsets = rng.normal(0.0, SEED_OFFSET, setting.seeds)
    true_min, rows = {}, []
    for name, x_star, floor in (("a", x_a, 1.0 + gap), ("b", x_a - 1.0, 1.0)):
        curve = floor + setting.curvature * (LOG2_LRS - x_star) ** 2
        true_min[name] = float(curve.min())
        for s in range(setting.seeds):
            losses = curve + offsets[s] + trial_scatter(setting.scatter, setting.tail, len(LOG2_LRS), rng)
            rows += [dict(parametrization=name, optimizer="adamw", width=PAIR_WIDTH, lr=2.0 ** x, seed=s,
                          val_loss=float(v), status="ok") for x, v in zip(LOG2_LRS, losses)]
    return pl.DataFrame(rows), true_min["a"] - true_min["b"]


def run_pair(setting: PairSetting, sims: int) -> dict:
    """Coverage of the own-best difference's interval and the calls' rates over `sims` sweeps at each true Δ."""
    rng = np.random.default_rng(0)
    held, calls = [], {g: [] for g in GAPS}
    for gap in GAPS:
        for _ in range(sims):
            trials, truth = simulate_pair(setting, gap, rng)
            est = analysis.estimate(trials, "val_loss")
            (row,) = head_to_head(analysis.trial_losses(trials, "val_loss"), est.optima).to_dicts()
            held.append(row["diff_lo"] <= truth <= row["diff_hi"])
            calls[gap].append(row["better"])

    def share(gap: float, call: str) -> float:
        return 100 * calls[gap].count(call) / len(calls[gap])

    return {"setting": setting.name, "a": setting.curvature, "σ": setting.scatter, "seeds": setting.seeds,
            "difference covered %": 100 * np.mean(held), "Δ 0: a lower %": share(0.0, "a"),
            "Δ 0: b lower %": share(0.0, "b"), "Δ +0.03: b lower %": share(0.03, "b"),
            "Δ +0.03: a lower %": share(0.03, "a")}


@dataclass(frozen=True)
class DesignSetting:
    name: str
    scatter: float       # σ: per-trial nats
    seed_offset: float   # sd of a seed's offset shared by all its LRs, nats
    neighbours: bool     # seeds 1 and 2 at seed 0's best and its neighbours (else at its best only)
    log2_lrs: tuple[float, ...]
    truth: tuple[float, float]


AROUND5 = (-11.0, -10.0, -9.0, -8.0, -7.0)
DESIGN_SETTINGS = [
    DesignSetting("around seed 0's best, typical", 0.004, SEED_OFFSET, True, AROUND5, (-10.0, -8.0)),
    DesignSetting("around seed 0's best, offsets 2x", 0.004, 2 * SEED_OFFSET, True, AROUND5, (-10.0, -8.0)),
    DesignSetting("around seed 0's best, noisy", 0.012, SEED_OFFSET, True, AROUND5, (-10.0, -8.0)),
    DesignSetting("seed 0's best only, typical", 0.004, SEED_OFFSET, False, AROUND, (-9.5, -6.5)),
    DesignSetting("seed 0's best only, offsets 2x", 0.004, 2 * SEED_OFFSET, False, AROUND, (-9.5, -6.5)),
    DesignSetting("seed 0's best only, noisy", 0.012, SEED_OFFSET, False, AROUND, (-9.5, -6.5)),
]


def simulate_design(setting: DesignSetting, slope: float, rng: np.random.Generator) -> tuple[pl.DataFrame, NDArray]:
    """One unbalanced sweep's trials (seed 0 everywhere, seeds 1 and 2 where the design puts them) and its true log2
    optima per width (W,)."""
    truth = rng.uniform(*setting.truth) + slope * np.log2(np.array(WIDTHS) / WIDTHS[0])
    offsets = rng.normal(0.0, setting.seed_offset, 3)
    lrs = np.array(setting.log2_lrs)
    rows = []
    for w, x_star in zip(WIDTHS, truth):
        curve = 1.0 + 0.012 * (lrs - x_star) ** 2
        seed0 = curve + offsets[0] + rng.normal(0.0, setting.scatter, len(lrs))
        best = int(np.argmin(seed0))
        more = range(max(0, best - 1), min(len(lrs), best + 2)) if setting.neighbours else [best]
        cells = [(0, i, seed0[i]) for i in range(len(lrs))]
        cells += [(s, i, curve[i] + offsets[s] + rng.normal(0.0, setting.scatter)) for s in (1, 2) for i in more]
        rows += [dict(parametrization="p", optimizer="adamw", width=w, lr=2.0 ** lrs[i], seed=s, val_loss=float(v),
                      status="ok") for s, i, v in cells]
    return pl.DataFrame(rows), truth


def run_design(setting: DesignSetting, sims: int) -> dict:
    """The report's rule and two others on the same `sims` sweeps at a true slope of 0 and `sims` at +0.35: the
    plain seed mean (the report's code with every design read as balanced: intervals.unbalanced) and the seed
    bootstrap without the scatter at LRs fewer seeds ran (intervals.thin_scatter 0)."""
    rng = np.random.default_rng(0)
    lrs = np.array(setting.log2_lrs)
    report = (intervals.unbalanced, intervals.thin_scatter)
    rules = {"report": report, "plain mean": (lambda per_seed: False, report[1]),
             "no thin scatter": (report[0], lambda width, noise: np.zeros(len(width.x)))}
    held = {rule: {"grid": [], "optimum": [], "slope": [], "open": []} for rule in rules}
    for true_slope in (0.0, 0.35):
        for _ in range(sims):
            trials, truth = simulate_design(setting, true_slope, rng)
            nearest = lrs[np.abs(lrs[None, :] - truth[:, None]).argmin(1)]
            for rule, (unbalanced, thin_scatter) in rules.items():
                intervals.unbalanced, intervals.thin_scatter = unbalanced, thin_scatter
                try:
                    est = analysis.estimate(trials, "val_loss")
                finally:
                    intervals.unbalanced, intervals.thin_scatter = report
                optima = est.optima.sort("width")
                with np.errstate(divide="ignore"):
                    lo, hi = np.log2(optima["best_lr_lo"].to_numpy()), np.log2(optima["best_lr_hi"].to_numpy())
                (row,) = est.transfer.to_dicts()
                held[rule]["grid"] += list(np.log2(optima["best_lr_grid"].to_numpy()) == nearest)
                held[rule]["optimum"] += list((lo <= truth) & (truth <= hi))
                held[rule]["open"] += list(np.isinf(lo) | np.isinf(hi))
                held[rule]["slope"].append(row["slope_lo"] <= true_slope <= row["slope_hi"])
    out: dict = {"design": setting.name, "LRs": len(lrs), "σ": setting.scatter, "seed offsets": setting.seed_offset}
    for rule, h in held.items():
        out |= {f"{rule}: best grid LR right %": 100 * np.mean(h["grid"]),
                f"{rule}: optimum covered %": 100 * np.mean(h["optimum"]),
                f"{rule}: slope covered %": 100 * np.mean(h["slope"]), f"{rule}: open %": 100 * np.mean(h["open"])}
    return out


def table(rows: list[dict]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(f"{v:.0f}" if isinstance(v, float) and k.endswith("%") else str(v)
                                         for k, v in r.items()) + " |")
    return "\n".join(lines)


def _factors(text: str) -> tuple[float, ...]:
    """--pool's 'F1,F2,…': positive scatter factors, at least two."""
    try:
        factors = tuple(float(f) for f in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if len(factors) < 2 or min(factors) <= 0:
        raise argparse.ArgumentTypeError(f"expected two or more positive factors, got {text!r}")
    return factors


def pooled_floors(own: intervals.Floors) -> intervals.Floors:
    """The pooled floor rule (--floor-rule pooled), in intervals.scatter_floors' terms: every group at a width floored
    at the pool of all the groups there, whether or not they scatter alike."""
    return {key: intervals.pooled_sigma(piece for (_, _, width), piece in own.items() if width == key[2])
            for key in own}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=400, help="simulated sweeps per setting and true slope or shift")
    parser.add_argument("--out", type=Path, help="also write the table, with its command and date, here")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--horizons", action="store_true", help="the horizon shift's intervals instead")
    mode.add_argument("--head-to-head", action="store_true", help="the head-to-head differences' intervals instead")
    mode.add_argument("--edges", action="store_true", help="intervals of optima on an end of the grid, one seed and 3")
    mode.add_argument("--conditional", action="store_true",
                      help="each width's coverage by how wide its interval came out")
    mode.add_argument("--unbalanced", action="store_true",
                      help="the seed-adjusted mean against the plain one where seeds ran different LRs")
    parser.add_argument("--groups", type=int, default=1,
                        help="parametrizations per simulated sweep under one noise, whose scatter the floor pools "
                             "(counted on the first; the default mode and --conditional)")
    parser.add_argument("--pool", type=_factors, metavar="F1,F2,…",
                        help="one parametrization per factor, each with that multiple of the trial scatter (a pool "
                             "that does not scatter alike; counted on the first); instead of --groups")
    parser.add_argument("--floor-rule", choices=("report", "pooled"), default="report",
                        help="pooled: every parametrization floored at the pool of all, the one the F test names "
                             "too (the report floors it at its own scatter, the others without it)")
    parser.add_argument("--no-scatter-floor", action="store_true",
                        help="the seed intervals without the floor from the sweep's seed × LR scatter")
    args = parser.parse_args(argv)
    if args.sims < 1:
        parser.error("--sims must be at least 1")
    if args.groups < 1:
        parser.error("--groups must be at least 1")
    if args.pool and args.groups != 1:
        parser.error("--pool names the parametrizations itself: not with --groups")
    pool = args.pool or (1.0,) * args.groups
    if len(pool) > 1 and (args.horizons or args.head_to_head or args.edges or args.unbalanced):
        parser.error("--groups above 1 and --pool: only with the default mode or --conditional")
    if args.floor_rule == "pooled":
        intervals.scatter_floors = pooled_floors
    if args.no_scatter_floor:
        intervals.with_scatter_floor = lambda widths, replicates, jitter: (replicates, np.zeros(len(widths), bool))
    if args.out and not args.out.parent.is_dir():
        parser.error(f"--out: no directory {args.out.parent}")
    start = time.time()
    rows = []
    settings, run_one, flag, truth = ((HORIZON_SETTINGS, run_horizons, " --horizons", "shift") if args.horizons else
                                      (PAIR_SETTINGS, run_pair, " --head-to-head", "difference") if args.head_to_head
                                      else (EDGE_SETTINGS, run_edges, " --edges", "slope") if args.edges
                                      else (DESIGN_SETTINGS, run_design, " --unbalanced", "slope") if args.unbalanced
                                      else (SETTINGS, run_conditional, " --conditional", "slope 0")
                                      if args.conditional
                                      else (SETTINGS, run, "", "slope"))
    for setting in settings:
        rows.append(run_one(setting, args.sims, pool) if len(pool) > 1 else run_one(setting, args.sims))
        print(f"{setting.name}: {time.time() - start:.0f} s", file=sys.stderr)
    text = table(rows)
    print(text)
    if args.out:
        flag += (f" --groups {args.groups}" * (args.groups > 1)
                 + (f" --pool {','.join(f'{f:g}' for f in args.pool)}" if args.pool else "")
                 + " --floor-rule pooled" * (args.floor_rule == "pooled")
                 + " --no-scatter-floor" * args.no_scatter_floor)
        command = f"python3 studies/interval-coverage/coverage.py{flag} --sims {args.sims}"
        args.out.write_text(f"`{command}`, {date.today()}, {time.time() - start:.0f} s on a CPU; 90% intervals, "
                            f"{args.sims} simulated sweeps per setting and true {truth}.\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
