"""deltamup: µP scaling and learning-rate transfer for delta-rule linear RNNs (Gated DeltaNet, DeltaProduct).

Layers, each importing only those below it (tests/test_layout.py enforces the order):

    deltamup.kernels            kernels/           the gated delta rule: reference, chunked PyTorch, Triton
    deltamup.models             models/            ModelConfig, DeltaLM, parameter roles, probe taps
    deltamup.parametrizations   parametrizations/  the rule tables, build_model, build_optimizer, export
    deltamup.scaling            scaling/           one model at one width: training loop, data, tasks, coord check
    deltamup.sweeps             sweeps/            learning-rate sweeps across widths on Ray Tune
    deltamup.reports            reports/           analysis (optima, transfer verdicts), figures, report pages
    deltamup.cli                deltamup/cli/      the `deltamup` command

deltamup.console (plain-text tables, durations, checked output folders) imports nothing of deltamup and may be used
by any layer. The names below are loaded on first use, so `import deltamup.kernels` does not pull in the rest.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ModelConfig": "deltamup.models",
    "DeltaLM": "deltamup.models",
    "build_model": "deltamup.parametrizations",
    "build_optimizer": "deltamup.parametrizations",
    "load_export": "deltamup.parametrizations",
    "parametrize": "deltamup.parametrizations",
    "RoleMap": "deltamup.parametrizations",
    "chunk_gated_delta_rule": "deltamup.kernels",
    "chunk_gated_delta_product": "deltamup.kernels",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'deltamup' has no attribute {name!r}")
