"""State-tracking and formal-language tasks (DeltaProduct §5): group word problems S3, S4, A5, S5, Z_n and the
formal languages parity and modular arithmetic with and without brackets, registered in scaling.data's task
registry (`task: s3`, `task: {name: zn, n: 5}`, `task: parity`, …), plus their metrics (scaling.tasks.metrics)."""
from __future__ import annotations

from . import formal_languages, word_problems  # noqa: F401  (registers the tasks)
from .groups import PermutationGroup, alternating, cyclic, group, symmetric

__all__ = ["PermutationGroup", "alternating", "cyclic", "group", "symmetric"]
