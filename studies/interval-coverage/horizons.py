"""How often the report's horizon-shift intervals contain the truth: simulated sweeps whose optimum moves by a known
amount between two horizons of the same runs, through the code a real report runs (analysis.estimate per horizon,
then analysis.horizon_table, which pairs the horizons' bootstrap replicates by seed).

One width, four learning rates one octave apart (2^-12 … 2^-9, the 8-layer study's SP grid at width 2048) and n
seeds. Seed s's validation loss at log2 LR x and horizon h (50% or 100% of the steps) is

    a·(x − x*_h)² + o_s + e_{s,x,h},    x*_100 = x*_50 + shift,

with x*_50 uniform in [−11, −10.5], o_s ~ N(0, 0.008²) a seed's offset shared by every LR and both horizons, and
e the per-trial scatter (σ), correlated ρ between the two horizons of one run (a run's loss at 50% and at 100%
share its data order and its early steps). The report calls a shift `moving` when its 90% interval excludes 0 and
`settled` when it lies inside ±0.25 octave.

    python3 studies/interval-coverage/horizons.py [--sims 400] [--out studies/interval-coverage/horizons.md]
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

from deltamup.reports import analysis

LOG2_LRS = np.arange(-12.0, -8.0)  # 2^-12 … 2^-9
SEED_OFFSET = 0.008                # nats
SHIFTS = (0.0, 0.35)               # true shifts from 50% to 100% of the steps, octaves
STEPS = [(50, "val_loss_h50"), (100, "val_loss")]


@dataclass(frozen=True)
class Setting:
    name: str
    curvature: float     # a: nats per octave² around the optimum
    scatter: float       # σ: per-trial nats at each horizon
    correlation: float   # ρ: of one run's scatter at its two horizons
    seeds: int


SETTINGS = [
    Setting("typical, ρ = 0.5", 0.012, 0.004, 0.5, 3),
    Setting("typical, independent horizons", 0.012, 0.004, 0.0, 3),
    Setting("noisy, ρ = 0.5", 0.012, 0.012, 0.5, 3),
]


def simulate(setting: Setting, shift: float, rng: np.random.Generator) -> pl.DataFrame:
    """One sweep's trials: val_loss_h50 and val_loss (the columns analysis.estimate reads)."""
    x50 = rng.uniform(-11.0, -10.5)
    offsets = rng.normal(0.0, SEED_OFFSET, setting.seeds)
    rows = []
    for s in range(setting.seeds):
        shared = rng.normal(0.0, 1.0, len(LOG2_LRS))
        own = rng.normal(0.0, 1.0, (2, len(LOG2_LRS)))
        mix = np.sqrt(setting.correlation) * shared + np.sqrt(1 - setting.correlation) * own
        h50, h100 = (1.0 + setting.curvature * (LOG2_LRS - x) ** 2 + offsets[s] + setting.scatter * e
                     for x, e in ((x50, mix[0]), (x50 + shift, mix[1])))
        rows += [dict(parametrization="p", optimizer="adamw", width=2048, lr=2.0 ** x, seed=s, status="ok",
                      val_loss_h50=float(a), val_loss=float(b)) for x, a, b in zip(LOG2_LRS, h50, h100)]
    return pl.DataFrame(rows)


def run(setting: Setting, sims: int) -> dict:
    """Coverage of the shift's interval and the calls' rates over `sims` sweeps at each true shift."""
    rng = np.random.default_rng(0)
    held, calls = [], {s: [] for s in SHIFTS}
    for shift in SHIFTS:
        for _ in range(sims):
            trials = simulate(setting, shift, rng)
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


def table(rows: list[dict]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(f"{v:.0f}" if isinstance(v, float) and k.endswith("%") else str(v)
                                         for k, v in r.items()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=400, help="simulated sweeps per setting and true shift")
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
        args.out.write_text(f"`python3 studies/interval-coverage/horizons.py --sims {args.sims}`, {date.today()}, "
                            f"{time.time() - start:.0f} s on a CPU; 90% intervals, {args.sims} simulated sweeps per "
                            f"setting and true shift.\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
