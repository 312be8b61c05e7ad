"""`search: refine`: after the coarse grid, a finer grid around each width's grid optimum, with more seeds.

For each (parametrization, optimizer, width) whose grid trials have all finished, the centre is the grid LR with the
lowest seed-mean validation loss (diverged trials count as inf). The refine grid is centre · factor^k for |k| ≤ points,
each LR with every refine seed, less the (LR, seed) pairs the grid itself ran; an LR within 0.1% of a grid LR is that
grid LR (factor 1.414 lands on a ×2 grid's points). Refine trials have phase "refine" and ids "refine.<point key>".
The set is a function of the finished grid rows only, so a killed and resumed refine runs exactly what is missing.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from .spec import SweepSpec, TrialPoint

Group = tuple[str, str, int]  # (parametrization, optimizer, width)
METRIC = "val_loss"           # the loss that picks a centre (as the reports' optimum, where every trial has one)
SNAP = 1e-3                   # relative distance below which a refine LR is a grid LR


def group_of(record: dict[str, Any]) -> Group:
    return record["parametrization"], record["optimizer"], record["width"]


def best_lr(records: list[dict[str, Any]], metric: str = "smoothed_loss") -> tuple[float | None, float]:
    """(LR with the lowest seed-mean `metric`, that loss); diverged, errored and pruned trials count as inf."""
    by_lr: dict[float, list[float]] = defaultdict(list)
    for r in records:
        loss = r.get(metric) if r["status"] == "ok" else None  # records have every field: None where unknown
        by_lr[r["lr"]].append(math.inf if loss is None else loss)
    if not by_lr:
        return None, math.inf
    lr = min(by_lr, key=lambda k: statistics.fmean(by_lr[k]))
    return lr, statistics.fmean(by_lr[lr])


def grid_centres(spec: SweepSpec, records: list[dict[str, Any]]) -> dict[Group, float]:
    """Each group's grid LR with the lowest seed-mean val_loss, for the groups whose every grid trial of `spec`
    has a finished row and whose best loss is finite (all diverged: no centre)."""
    finished = {r["trial_id"]: r for r in records if r.get("phase") == "grid" and r["status"] in ("ok", "diverged")}
    groups: dict[Group, list[dict[str, Any]]] = {}
    incomplete = set()
    for point in spec.grid():
        group = (point.parametrization, point.optimizer, point.width)
        if point.key in finished:
            groups.setdefault(group, []).append(finished[point.key])
        else:
            incomplete.add(group)
    centres = {}
    for group, rows in groups.items():
        lr, loss = best_lr(rows, METRIC)
        if group not in incomplete and lr is not None and math.isfinite(loss):
            centres[group] = lr
    return centres


def refine_lrs(centre: float, spec: SweepSpec) -> list[float]:
    """centre · factor^k for k = -points … points (6 significant digits), snapped onto grid LRs within SNAP."""
    lrs = []
    for k in range(-spec.refine.points, spec.refine.points + 1):
        lr = float(f"{centre * spec.refine.factor ** k:.6g}")
        lrs.append(next((g for g in spec.lrs if abs(g / lr - 1) < SNAP), lr))
    return lrs


def refine_points(spec: SweepSpec, records: list[dict[str, Any]]) -> list[TrialPoint]:
    """Every refine trial the finished grid asks for (finished or not), groups in grid order."""
    centres = grid_centres(spec, records)
    points = []
    for group in dict.fromkeys((p.parametrization, p.optimizer, p.width) for p in spec.grid()):
        if group not in centres:
            continue
        for lr in refine_lrs(centres[group], spec):
            points += [TrialPoint(*group, lr, seed) for seed in spec.refine.seeds
                       if not (lr in spec.lrs and seed in spec.seeds)]  # the grid ran that one
    return points
