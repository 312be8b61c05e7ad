"""The learning rates a study's next part runs, from the trials its sweep directory holds (used by studies/*/run.sh).

    python3 studies/optima.py DIR optimum WIDTH PARAM DEFAULT   log2 of the best LR by mean val_loss over ≥ 3 seeds,
                                                                 among ≥ 3 such LRs; else DEFAULT
    python3 studies/optima.py DIR seed0 WIDTH PARAM DEFAULT     log2 of the best LR among seed 0's trials; else DEFAULT
    python3 studies/optima.py DIR edges                         "width param log2(lr)" per (width, parametrization)
                                                                 whose 3-seed optimum is its smallest or largest LR:
                                                                 the LR one octave beyond it

Only finished trials (`status: ok`) count; LRs are read as whole octaves (round(log2 lr)).
"""
from __future__ import annotations

import glob
import json
import math
import statistics
import sys


def losses(out: str) -> dict[tuple[int, str], dict[int, dict[int, float]]]:
    """{(width, parametrization): {log2 lr: {seed: val_loss}}} of the finished trials under out/results."""
    by: dict[tuple[int, str], dict[int, dict[int, float]]] = {}
    for path in glob.glob(f"{out}/results/*.json"):
        r = json.load(open(path))
        if r["status"] == "ok":
            octave = round(math.log2(r["lr"]))
            by.setdefault((r["width"], r["parametrization"]), {}).setdefault(octave, {})[r["seed"]] = r["val_loss"]
    return by


def main(argv: list[str]) -> None:
    out, mode = argv[0], argv[1]
    by = losses(out)
    three = {k: {e: statistics.mean(s.values()) for e, s in lrs.items() if len(s) >= 3} for k, lrs in by.items()}
    if mode in ("optimum", "seed0"):
        width, param, default = int(argv[2]), argv[3], argv[4]
        if mode == "optimum":
            means = three.get((width, param), {})
            print(min(means, key=means.get) if len(means) >= 3 else default)
        else:
            seed0 = {e: s[0] for e, s in by.get((width, param), {}).items() if 0 in s}
            print(min(seed0, key=seed0.get) if seed0 else default)
    elif mode == "edges":
        for (width, param), means in sorted(three.items()):
            if len(means) >= 3:
                best = min(means, key=means.get)
                if best in (min(means), max(means)):
                    print(width, param, best - 1 if best == min(means) else best + 1)
    else:
        raise SystemExit(f"optima.py: unknown mode {mode!r} (optimum, seed0, edges)")


if __name__ == "__main__":
    main(sys.argv[1:])
