"""What a decisive verdict costs: how often the report calls a parametrization `transfers` or `drifts` when its
optimum moves 0, +0.2 or +0.35 octave per octave of width, by the number of seeds, the widths and the learning-rate
grid, at the seed × LR scatter the 8-layer study measured; with the GPU time of each design's trials for one
parametrization, from that study's trials.

Simulated sweeps (coverage.py's loss model and the report's code path, analysis.estimate): a bowl of curvature
0.012 nats per octave², seed offsets N(0, 0.008²), per-trial scatter σ, the base width's optimum uniform in
[2^-9, 2^-8.5]. Designs: widths 256, 1024, 2048 (the study's complete ones) or 256 … 2048 with 512 and 1536;
3, 5 or 8 seeds; the study's four LRs one octave apart (2^-10 … 2^-7) or seven half an octave apart over the same
span. σ: 0.004, 0.008 and 0.012 nats (GDN-µP's scatter in the study's one-GPU-kind re-runs: 0.003, 0.008 and
0.006 at widths 256, 1024, 2048; the width of their slope interval, 0.65 at 3 seeds, is this model's at about
0.012). The GPU time: the median GPU-seconds of training a trial at widths 256, 1024 and 2048 in
the 8-layer study's H100 records (train_seconds × gpu_share), 512 and 1536 interpolated in log time against
log width; evaluation, compile warm-up and the gaps between trials come on top.

    python3 studies/interval-coverage/power.py [--sims 250] [--span OCTAVES] [--widths W,W,…] [--out FILE]

--widths runs one width set of its own instead of the two above (e.g. 256,2048: the study's ends alone, where a
slope's leverage is).

--span sets the report's fit window (reports/intervals.py, SPAN): the vertex is fitted through every LR within that
many octaves of the best grid LR; 0 fits it through the best and its two neighbours alone, whatever the grid.
"""
from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
from coverage import Setting, simulated_estimate, table  # beside this script (its folder is on sys.path)

from deltamup.reports import intervals

STUDY = Path(__file__).resolve().parents[1] / "gdn-adamw-8l" / "sweep"
SPAN = intervals.SPAN  # the report's own fit window
WIDTH_SETS = ((256, 1024, 2048), (256, 512, 1024, 1536, 2048))
GRIDS = {"4 LRs, 1 octave apart": tuple(np.arange(-10.0, -6.5, 1.0)),
         "7 LRs, ½ octave apart": tuple(np.arange(-10.0, -6.75, 0.5))}
SEEDS = (3, 5, 8)
SCATTERS = (0.004, 0.008, 0.012)
# true slopes, octaves of optimal LR per octave of width: none; the 8-layer study's GDN-µP estimate over 256–2048 on
# all its trials (inside the ±0.25 a `transfers` verdict allows); and coverage.py's drift, outside it
SLOPES = (0.0, 0.2, 0.35)


def trial_gpu_seconds(sweep: Path = STUDY, gpu: str = "H100") -> dict[int, float]:
    """{width: median GPU-seconds of a trial's training} from the sweep's records whose GPU's name holds `gpu` and
    that record their share of it."""
    by: dict[int, list[float]] = {}
    for path in glob.glob(f"{sweep}/results/*.json"):
        record = json.loads(Path(path).read_text())
        if record["status"] == "ok" and gpu in (record.get("gpu_name") or "") and record.get("gpu_share"):
            by.setdefault(record["width"], []).append(record["train_seconds"] * record["gpu_share"])
    return {width: statistics.median(seconds) for width, seconds in sorted(by.items())}


def gpu_seconds_at(width: int, measured: dict[int, float]) -> float:
    """A trial's GPU-seconds at `width`: measured, or interpolated in log time against log width."""
    if width in measured:
        return measured[width]
    x, y = np.log2(list(measured)), np.log(list(measured.values()))
    if not x[0] < np.log2(width) < x[-1]:
        raise ValueError(f"width {width} is outside the measured widths {list(measured)}")
    return float(np.exp(np.interp(np.log2(width), x, y)))


def power(setting: Setting, sims: int) -> dict:
    """The report's verdicts at each true slope of SLOPES (% of `sims` sweeps), the median width of the slope's
    interval at 0 (octaves per octave of width), and how often the interval held the true slope."""
    rng = np.random.default_rng(0)
    calls: dict[float, list[str]] = {slope: [] for slope in SLOPES}
    widths, held = [], []
    for slope in SLOPES:
        for _ in range(sims):
            est = simulated_estimate(setting, slope, rng)[0]
            (row,) = est.transfer.to_dicts()
            calls[slope].append(row["verdict"])
            held.append(row["slope_lo"] <= slope <= row["slope_hi"])
            if slope == 0.0:
                widths.append(row["slope_hi"] - row["slope_lo"])

    def share(slope: float, verdict: str) -> float:
        return 100 * calls[slope].count(verdict) / sims

    return {"slope 0: transfers %": share(0.0, "transfers"), "slope 0: drifts %": share(0.0, "drifts"),
            "slope 0: interval width (median)": round(float(np.median(widths)), 2),
            "slope +0.2: transfers %": share(0.2, "transfers"), "slope +0.2: drifts %": share(0.2, "drifts"),
            "slope +0.35: drifts %": share(0.35, "drifts"), "slope held %": 100 * float(np.mean(held))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=250, help="simulated sweeps per design and true slope")
    parser.add_argument("--span", type=float, default=intervals.SPAN,
                        help="octaves either side of the best grid LR the vertex is fitted over (0: its neighbours)")
    parser.add_argument("--widths", type=lambda text: tuple(int(w) for w in text.split(",")),
                        help="one width set, comma-separated, instead of the study's two")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.widths is not None and (len(args.widths) < 2 or list(args.widths) != sorted(set(args.widths))):
        parser.error("--widths needs two or more widths, increasing")
    if args.sims < 10:
        parser.error("--sims must be at least 10")
    if args.span < 0:
        parser.error("--span must not be negative")
    intervals.SPAN = args.span
    measured = trial_gpu_seconds()
    if not measured:
        parser.error(f"no trial in {STUDY} names an H100 and its share of it: nothing to time the designs by")
    started = time.time()
    rows = []
    for widths in (args.widths,) if args.widths else WIDTH_SETS:
        seconds = sum(gpu_seconds_at(w, measured) for w in widths)  # one seed at one LR at every width
        for grid_name, grid in GRIDS.items():
            for seeds in SEEDS:
                for scatter in SCATTERS:
                    setting = Setting(f"{len(widths)} widths, {grid_name}", 0.012, 0.0, scatter, seeds,
                                      log2_lrs=grid, widths=widths)
                    rows.append({"widths": ", ".join(map(str, widths)), "grid": grid_name, "seeds": seeds,
                                 "σ": scatter, **power(setting, args.sims),
                                 "GPU-hours a parametrization": round(seconds * len(grid) * seeds / 3600, 1)})
    timing = ", ".join(f"{w}: {s:.0f} s" for w, s in measured.items())
    flag = f" --span {args.span:g}" * (args.span != SPAN) + (f" --widths {','.join(map(str, args.widths))}"
                                                           if args.widths else "")
    text = (f"`python3 studies/interval-coverage/power.py --sims {args.sims}{flag}` ({date.today()}, "
            f"{time.time() - started:.0f} s): {args.sims} simulated sweeps per design and true slope. A trial's "
            f"training in GPU-seconds (H100, the 8-layer study's records): {timing}; widths 512 and 1536 "
            f"interpolated.\n\n" + table(rows) + "\n")
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
