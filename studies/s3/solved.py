"""How many seeds solved S3 per variant, over the result files of s3_householder.py, and Fisher's exact test of
n_h = 2, β ∈ [0, 2] against each other variant (one-sided: does it solve more often?).

    python3 studies/s3/solved.py studies/s3/s3_householder.txt studies/s3/s3_householder_seeds3-7.txt
    python3 studies/s3/solved.py --length 512 studies/s3/s3_gpu.txt      # the GPU runs, solved at 4x their length

A seed counts once (the first file that has it); solved means seq_acc > 0.9 at --length (the training length by
default, as in s3_householder.py's summary; a longer one asks whether the solution extrapolates).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from scipy.stats import fisher_exact

LINE = re.compile(r"^(?P<label>n_h=\d β∈\[0,\d\])\s+seed (?P<seed>\d+): (?P<metrics>.*)$")
CLAIM = "n_h=2 β∈[0,2]"


def read(paths: list[Path]) -> dict[str, dict[int, dict[str, float]]]:
    """{variant: {seed: metrics}} from the files' result lines."""
    runs: dict[str, dict[int, dict[str, float]]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            m = LINE.match(line)
            if m:
                values = m["metrics"].split()
                metrics = {k: float(v) for k, v in zip(values[::2], values[1::2])}
                runs.setdefault(m["label"], {}).setdefault(int(m["seed"]), metrics)
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--length", type=int, default=32, help="the training length whose seq_acc decides 'solved'")
    args = p.parse_args()
    runs = read(args.files)
    solved = {label: sum(r[f"seq_acc@{args.length}"] > 0.9 for r in seeds.values()) for label, seeds in runs.items()}
    print(f"{'variant':<16} seeds  mean acc@{args.length}  solved  seeds solved")
    for label, seeds in sorted(runs.items()):
        which = ",".join(str(s) for s, r in sorted(seeds.items()) if r[f"seq_acc@{args.length}"] > 0.9) or "-"
        mean = sum(r[f"acc@{args.length}"] for r in seeds.values()) / len(seeds)
        print(f"{label:<16} {len(seeds):>5}  {mean:>{len(f'mean acc@{args.length}')}.3f}  {solved[label]:>6}  {which}")
    if CLAIM not in runs:
        return
    n = len(runs[CLAIM])
    for label, seeds in sorted(runs.items()):
        if label == CLAIM:
            continue
        table = [[solved[CLAIM], n - solved[CLAIM]], [solved[label], len(seeds) - solved[label]]]
        _, p_value = fisher_exact(table, alternative="greater")
        print(f"{CLAIM} ({solved[CLAIM]}/{n}) vs {label} ({solved[label]}/{len(seeds)}): Fisher's exact test, "
              f"one-sided p = {p_value:.2g}")


if __name__ == "__main__":
    main()
