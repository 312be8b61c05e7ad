"""How often the report's F test (intervals.scatter_unlike, stepping down) names each group at one width, where the
groups' seed × LR scatters are the given multiples of one σ, each measured on DOF degrees of freedom (4: three
seeds at three LRs, as the studies' cells): σ_g² ~ (factor_g σ)² χ²_dof / dof, DRAWS draws a setting.

    python3 studies/interval-coverage/naming.py [--draws 4000] [--dof 4] [--out FILE]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from deltamup.reports import intervals

SETTINGS = ((1, 1, 1), (1, 7, 1), (7, 1, 1), (1, 7, 3), (1, 7, 7, 1), (1, 1, 1, 1))


def named_shares(factors: tuple[int, ...], dof: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """The share of draws in which the test names each group (%)."""
    counts = np.zeros(len(factors))
    for _ in range(draws):
        groups = {str(i): (f * float(np.sqrt(rng.chisquare(dof) / dof)), dof) for i, f in enumerate(factors)}
        for unlike in intervals.scatter_unlike(groups):
            counts[int(unlike.group)] += 1
    return 100 * counts / draws


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--dof", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.draws < 1 or args.dof < 1:
        parser.error("--draws and --dof must be positive")
    rng = np.random.default_rng(0)
    lines = [f"`python3 studies/interval-coverage/naming.py --draws {args.draws} --dof {args.dof}`: the share of "
             f"draws (%) in which the F test (1%, stepping down) names each group; each group's scatter on "
             f"{args.dof} degrees of freedom.", "", "| scatter, multiples of σ | named % by group |", "| --- | --- |"]
    for factors in SETTINGS:
        shares = named_shares(factors, args.dof, args.draws, rng)
        lines.append(f"| {', '.join(map(str, factors))} | {', '.join(f'{s:.1f}' for s in shares)} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
