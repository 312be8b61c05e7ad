"""Do two coordinate checks measure the same width exponents? Joins the slopes.csv of each run (probe, step) and
prints, per pair, how far the fitted slopes lie apart (median, share within 0.1, the largest gaps) and where the
in-band verdicts differ.

    cd studies/coord-checks && python3 compare_coord_checks.py h200-bf16-triton-256-1536 \
        cpu-fp32-128-1024 h200-fp32-128-4096 > gpu-bf16-vs-fp32.md

The first directory is compared with each of the others, for every check (sub-directory) they share.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl


def compare(a: Path, b: Path, worst: int = 5) -> list[str]:
    """Markdown lines comparing the slopes of check directories a and b."""
    j = pl.read_csv(a / "slopes.csv").join(pl.read_csv(b / "slopes.csv"), on=["probe", "step"], suffix="_b")
    j = j.with_columns((pl.col("slope") - pl.col("slope_b")).abs().alias("gap"))
    gaps = j["gap"]
    lines = [f"- {len(j)} (probe, step) slopes: median gap {gaps.median():.3f}, mean {gaps.mean():.3f}, "
             f"{(gaps < 0.1).mean():.0%} within 0.1, largest {gaps.max():.2f}; "
             f"in band: {j['ok'].sum()} vs {j['ok_b'].sum()}"]
    for r in j.sort("gap", descending=True).head(worst).iter_rows(named=True):
        lines.append(f"  - {r['probe']} step {r['step']}: {r['slope']:+.2f} vs {r['slope_b']:+.2f}"
                     f" (expected {r['expected'] or 'not tested'})")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first", type=Path, help="a directory of coordinate checks (one sub-directory per check)")
    p.add_argument("others", type=Path, nargs="+")
    args = p.parse_args()
    for d in (args.first, *args.others):
        if not d.is_dir():
            raise SystemExit(f"compare_coord_checks: {d} is not a directory")
    print(f"# Coordinate-check slopes: {args.first.name} against {', '.join(o.name for o in args.others)}\n")
    for other in args.others:
        for check in sorted(c.name for c in args.first.iterdir() if (c / "slopes.csv").exists()):
            if (other / check / "slopes.csv").exists():
                print(f"## {check}: {args.first.name} vs {other.name}\n")
                print("\n".join(compare(args.first / check, other / check)) + "\n")


if __name__ == "__main__":
    main()
