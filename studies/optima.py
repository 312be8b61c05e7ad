"""The learning rates a study's next part runs, from the trials its sweep directory holds (used by studies/*/run.sh).

    python3 studies/optima.py DIR optimum WIDTH PARAM DEFAULT   log2 of the best LR by mean val_loss over ≥ 3 seeds,
                                                                 among ≥ 3 such LRs; else DEFAULT
    python3 studies/optima.py DIR seed0 WIDTH PARAM DEFAULT     log2 of the best LR among ≥ 3 LRs of seed 0's trials;
                                                                 else DEFAULT
    python3 studies/optima.py DIR around "WIDTHS" "PARAMS" E0   one sweep's --set lines: seeds 1 and 2 at each
                                                                 (width, param)'s seed-0 optimum e (among ≥ 3 LRs;
                                                                 E0 without one), e/2 and 2e
    python3 studies/optima.py DIR edges                         one sweep's --set lines: seeds 0–2 one octave beyond
                                                                 each (width, param)'s 3-seed optimum that is its
                                                                 smallest or largest LR (nothing: no such optimum;
                                                                 none where a seed already diverged)
    python3 studies/optima.py DIR edges0                        the same for seed 0's optimum among ≥ 3 LRs, seed 0
    python3 studies/optima.py DIR cells SEEDS "W P E E…" …      one sweep's --set lines for the given cells (width,
                                                                 parametrization, log2 of its LRs), SEEDS e.g. 0,1,2

The --set lines name the widths, parametrizations and LRs the sweep's axes need and the `only` cells that pick the
points (sweeps/spec.py), so that a part is one driver run whatever the number of groups; what each cell is goes to
stderr. Finished trials count (`status: ok`, and `diverged` or a loss above ln V as an infinite loss: an LR where a
seed diverged is never an optimum, and an optimum beside it is on an edge); LRs are read as whole octaves
(round(log2 lr)). An optimum counts only among ≥ 3 LRs: with one or two, the best is wherever the first trials
happened to run, and a part centred on it would follow its own first trials down (or up) the grid.
"""
from __future__ import annotations

import glob
import json
import math
import statistics
import sys

Cell = tuple[int, str, list[int]]  # (width, parametrization, log2 of its LRs)


def losses(out: str) -> dict[tuple[int, str], dict[int, dict[int, float]]]:
    """{(width, parametrization): {log2 lr: {seed: val_loss}}} of the finished trials under out/results; a diverged
    trial counts as inf (worse than any loss: the LR is past the edge of stability), and so does one that ended above
    ln V, worse than the uniform prediction (as in the report: reports/analysis.py)."""
    by: dict[tuple[int, str], dict[int, dict[int, float]]] = {}
    for path in glob.glob(f"{out}/results/*.json"):
        r = json.load(open(path))
        if r["status"] in ("ok", "diverged"):
            loss = r["val_loss"] if r["status"] == "ok" else math.inf
            loss = math.inf if loss > math.log(r.get("vocab_size") or math.inf) else loss
            octave = round(math.log2(r["lr"]))
            by.setdefault((r["width"], r["parametrization"]), {}).setdefault(octave, {})[r["seed"]] = loss
    return by


def best(means: dict[int, float]) -> int | None:
    """The log2 LR of the lowest finite loss in means {log2 lr: loss} (None: fewer than 3 LRs, or none finite)."""
    finite = {e: x for e, x in means.items() if math.isfinite(x)}
    return min(finite, key=finite.get) if finite and len(means) >= 3 else None


def sets(cells: list[Cell], seeds: list[int]) -> list[str]:
    """The --set lines of one sweep over `cells` with `seeds` (none without cells)."""
    if not cells:
        return []
    widths = sorted({w for w, _, _ in cells})
    params = list(dict.fromkeys(p for _, p, _ in cells))
    octaves = sorted({e for _, _, es in cells for e in es})
    only = [{"widths": [w], "parametrizations": [p], "lrs": [2.0 ** e for e in es]} for w, p, es in cells]
    return [f"widths={json.dumps(widths)}", f"parametrizations={json.dumps(params)}",
            f"lrs={json.dumps([2.0 ** e for e in octaves])}", f"seeds={json.dumps(seeds)}",
            f"only={json.dumps(only)}"]


def main(argv: list[str]) -> None:
    out, mode = argv[0], argv[1]
    by = losses(out)
    three = {k: {e: statistics.mean(s.values()) for e, s in lrs.items() if len(s) >= 3} for k, lrs in by.items()}
    seed0 = {k: {e: s[0] for e, s in lrs.items() if 0 in s} for k, lrs in by.items()}
    if mode in ("optimum", "seed0"):
        width, param, default = int(argv[2]), argv[3], argv[4]
        found = best((three if mode == "optimum" else seed0).get((width, param), {}))
        print(default if found is None else found)
    elif mode == "around":
        cells = []
        for width in map(int, argv[2].split()):
            for param in argv[3].split():
                e = best(seed0.get((width, param), {}))
                e = int(argv[4]) if e is None else e
                print(f"seeds 1-2: {param} at width {width} around its seed-0 optimum 2^{e}", file=sys.stderr)
                cells.append((width, param, [e, e - 1, e + 1]))
        print("\n".join(sets(cells, [1, 2])))
    elif mode in ("edges", "edges0"):
        cells = []
        for (width, param), means in sorted((three if mode == "edges" else seed0).items()):
            e = best(means)
            if e is None or e not in (min(means), max(means)):
                continue
            beyond = e - 1 if e == min(means) else e + 1
            if math.inf in by[(width, param)].get(beyond, {}).values():
                continue  # a seed diverged there: past the edge of stability, not a better LR
            print(f"edge: {param} at width {width}, 2^{beyond}", file=sys.stderr)
            cells.append((width, param, [beyond]))
        if cells:
            print("\n".join(sets(cells, [0, 1, 2] if mode == "edges" else [0])))
    elif mode == "cells":
        seeds = [int(s) for s in argv[2].split(",")]
        cells = [(int(w), p, [int(e) for e in es]) for w, p, *es in (c.split() for c in argv[3:])]
        print("\n".join(sets(cells, seeds)))
    else:
        raise SystemExit(f"optima.py: unknown mode {mode!r} (optimum, seed0, around, edges, edges0, cells)")


if __name__ == "__main__":
    main(sys.argv[1:])
