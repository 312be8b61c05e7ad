"""Which code trained a run: a fingerprint of the sources a trial's numbers come from, for the trial record.

    code_fingerprint()   -> "3f9c0a1b2c3d4e5f"   (16 hex digits; equal: the same sources, torch and Triton)

A sweep resumed after the kernels, the models, a parametrization or the training loop changed mixes trials that
different code trained: bf16 rounding that moves, a fixed bug, a changed default. The record's `code` column says
which trials share their code, as `data` says which share their data (sweeps/record.py).
"""
from __future__ import annotations

import functools
import hashlib
import importlib
from importlib import metadata
from pathlib import Path

PACKAGES = ("kernels", "models", "parametrizations", "scaling")  # deltamup.<name>: what a trial's numbers come from


def fingerprint_of(roots: dict[str, Path], versions: str) -> str:
    """16 hex digits of the sha256 over every *.py under each root (its name, the file's path below it and its
    bytes, in that order) and the versions text: a file's edit, addition, removal or move changes it, its mtime
    does not."""
    h = hashlib.sha256(versions.encode())
    for name, root in sorted(roots.items()):
        for path in sorted(root.rglob("*.py")):
            h.update(f"\0{name}/{path.relative_to(root).as_posix()}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


@functools.cache
def code_fingerprint() -> str:
    """The fingerprint of this process's deltamup.kernels, .models, .parametrizations and .scaling sources with the
    installed torch's and Triton's versions (a docstring's edit counts too: equal means the same code, unequal may
    still train the same numbers)."""
    roots = {name: Path(importlib.import_module(f"deltamup.{name}").__file__).parent for name in PACKAGES}
    return fingerprint_of(roots, f"torch {_version('torch')}; triton {_version('triton')}")
