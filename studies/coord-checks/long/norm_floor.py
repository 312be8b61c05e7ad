"""How close o comes to the output RMSNorm's eps, and what a check's widths did, from coordinate checks' files.

RMSNorm(c·o; ε) = RMSNorm(o; ε/c²) (docs/theory.md), so the norm damps o where mean(o²) is not large against its
effective eps ε_eff = ε · readout_eps / readout² (ε = ModelConfig.norm_eps; the multipliers from the check's
parametrization at each width). The readout probe is c·o, so mean(o²)/ε_eff = rms(readout)² / (ε · readout_eps).
For each check directory: the probe-batch loss at the last step, each block's mixer-output change at the last step,
and mean(o²)/ε_eff per block at the steps asked for, one column per width.

    python3 studies/coord-checks/long/norm_floor.py DIR [DIR ...] [--steps 0,20,100]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl

from deltamup.parametrizations import registry


def floor_ratio(check: dict, width: int, readout_rms: float) -> float:
    """mean(o²) / ε_eff for one width: rms of the readout probe (c·o) squared over the norm's own eps."""
    base = check["model"]["base_width"]
    mult = registry.multipliers(check["parametrization"], check["optimizer"], width / base, width)
    return readout_rms**2 / (check["model"]["norm_eps"] * mult.readout_eps)


def table(directory: Path, steps: list[int]) -> str:
    """One check's lines: loss and mixer-output change at its last step, mean(o²)/ε_eff at `steps`."""
    check = json.loads((directory / "check.json").read_text())
    coords = pl.read_parquet(directory / "coords.parquet")
    widths = sorted(coords["width"].unique().to_list())
    last = check["steps"]

    def at(probe: str, step: int, column: str) -> list[float]:
        rows = coords.filter(pl.col("probe") == probe, pl.col("step") == step).sort("width")
        return rows[column].to_list()

    lines = [f"{directory.name} ({check['parametrization']}, {check['optimizer']}, lr {check['lr']:g}), "
             f"widths {', '.join(map(str, widths))}",
             f"  loss at t = {last}: " + ", ".join(f"{v:.3f}" for v in at("loss", last, "rms"))]
    blocks = sorted({p.split(".")[0] for p in coords["probe"].unique() if p.endswith(".readout")})
    for block in blocks:
        change = at(f"{block}.mixer_out", last, "delta_rms")
        lines.append(f"  {block} mixer-output change at t = {last}: " + ", ".join(f"{v:.2f}" for v in change))
        for step in steps:
            ratios = [floor_ratio(check, w, r) for w, r in zip(widths, at(f"{block}.readout", step, "rms"))]
            lines.append(f"  {block} mean(o²)/eps_eff at t = {step}: " + ", ".join(f"{v:.1f}" for v in ratios))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="coordinate-check output folders")
    ap.add_argument("--steps", default="0,20,100", help="steps at which to show mean(o²)/eps (comma-separated)")
    args = ap.parse_args()
    missing = [d for d in args.dirs if not (d / "coords.parquet").is_file() or not (d / "check.json").is_file()]
    if missing:
        raise SystemExit(f"norm_floor.py: no check.json and coords.parquet in {missing[0]}")
    steps = [int(s) for s in args.steps.split(",")]
    print("\n\n".join(table(d, steps) for d in args.dirs))


if __name__ == "__main__":
    main()
