"""How often the report's 90% intervals contain the truth: simulated sweeps with a known optimum, through the same
code path a real sweep takes (deltamup.reports.analysis.estimate), at the noise levels the 8-layer study measured.

Each simulated sweep has two widths (256, 1024: two octaves apart), four learning rates one octave apart
(2^-10 … 2^-7) at each, and n seeds. Seed s's validation loss at width w and log2 LR x is

    a·u² + b·u³ + o_s + e_{s,w,x},    u = x − x*_w,

with x*_w the true optimum (uniform in [−9, −8.5] at 256, plus 2 × the true slope at 1024), o_s ~ N(0, 0.008²) a
seed's offset shared by every LR and width (the study's seeds differ by about that much), and e ~ N(0, σ²) the
per-trial scatter that moves a vertex (the study's seed × LR interaction: 0.002–0.018 nats, 0.004 typical at 256).
b ≠ 0 makes the bowl asymmetric (steeper above the optimum: at b = a/5 one octave above costs 1.5× one octave
below, about what the study's curves show either way round), which a three-point parabola fits with a bias.

    python3 studies/interval-coverage/coverage.py [--sims 400] [--out studies/interval-coverage/coverage.md]

Prints one row per setting: how often each width's 90% interval holds x*_w, how often the slope's holds the true
slope, and the verdicts' frequencies at a true slope of 0 and of +0.35; then how often the 5th–95th percentiles of
the same bootstrap replicates would have held them (the rule the seed intervals do not use).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl

from deltamup.reports import analysis, intervals

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


SETTINGS = [
    Setting("typical (study, width 256)", 0.012, 0.0, 0.004, 3),
    Setting("quiet", 0.012, 0.0, 0.002, 3),
    Setting("noisy (study, width 1024)", 0.012, 0.0, 0.012, 3),
    Setting("flat bowl", 0.006, 0.0, 0.004, 3),
    Setting("asymmetric bowl, 1.5 : 1", 0.012, 0.0024, 0.004, 3),
    Setting("asymmetric bowl, 3 : 1", 0.012, 0.006, 0.004, 3),
    Setting("noisy, 5 seeds", 0.012, 0.0, 0.012, 5),
]


def simulate(setting: Setting, slope: float, rng: np.random.Generator) -> tuple[pl.DataFrame, np.ndarray]:
    """One sweep's trials (the columns analysis.estimate reads) and its true log2 optima per width (W,)."""
    base = rng.uniform(-9.0, -8.5)
    truth = base + slope * np.log2(np.array(WIDTHS) / WIDTHS[0])
    offsets = rng.normal(0.0, SEED_OFFSET, setting.seeds)
    rows = []
    for w, x_star in zip(WIDTHS, truth):
        u = LOG2_LRS - x_star
        bowl = setting.curvature * u ** 2 + setting.asymmetry * u ** 3
        for s in range(setting.seeds):
            losses = 1.0 + bowl + offsets[s] + rng.normal(0.0, setting.scatter, len(u))
            rows += [dict(parametrization="p", optimizer="adamw", width=w, lr=2.0 ** x, seed=s, val_loss=float(v),
                          status="ok") for x, v in zip(LOG2_LRS, losses)]
    return pl.DataFrame(rows), truth


def run(setting: Setting, sims: int) -> dict:
    """Coverage and verdict rates of `sims` sweeps at a true slope of 0 and `sims` at +0.35."""
    rng = np.random.default_rng(0)
    held, slope_held, verdicts = [], [], {0.0: [], 0.35: []}
    pct_held, pct_slope_held = [], []
    for true_slope in verdicts:
        for _ in range(sims):
            trials, truth = simulate(setting, true_slope, rng)
            est = analysis.estimate(trials, "val_loss")
            optima = est.optima.sort("width")
            with np.errstate(divide="ignore"):  # a low bound's best_lr_lo is 0
                lo, hi = np.log2(optima["best_lr_lo"].to_numpy()), np.log2(optima["best_lr_hi"].to_numpy())
            held += list((lo <= truth) & (truth <= hi))
            (row,) = est.transfer.to_dicts()
            slope_held.append(row["slope_lo"] <= true_slope <= row["slope_hi"])
            verdicts[true_slope].append(row["verdict"])
            _, reps = est.replicates[("p", "adamw")]
            points = optima["log2_best_lr"].to_numpy()
            lo, hi = intervals.interval(reps, points, "fit")  # "fit": bias-corrected percentiles
            pct_held += list((lo <= truth) & (truth <= hi))
            weights = intervals.slope_weights(np.log2(np.array(WIDTHS, float)))
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


def table(rows: list[dict]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(f"{v:.0f}" if isinstance(v, float) and k.endswith("%") else str(v)
                                         for k, v in r.items()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=400, help="simulated sweeps per setting and true slope")
    parser.add_argument("--out", type=Path, help="also write the table, with its command and date, here")
    args = parser.parse_args(argv)
    if args.sims < 1:
        parser.error("--sims must be at least 1")
    if args.out and not args.out.parent.is_dir():
        parser.error(f"--out: no directory {args.out.parent}")
    start = time.time()
    rows = []
    for setting in SETTINGS:
        rows.append(run(setting, args.sims))
        print(f"{setting.name}: {time.time() - start:.0f} s", file=sys.stderr)
    text = table(rows)
    print(text)
    if args.out:
        args.out.write_text(f"`python3 studies/interval-coverage/coverage.py --sims {args.sims}`, {date.today()}, "
                            f"{time.time() - start:.0f} s on a CPU; 90% intervals, {args.sims} simulated sweeps per "
                            f"setting and true slope.\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
