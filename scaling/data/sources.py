"""Where the default corpus comes from: the Python sources that ship with the interpreter and with the packages
deltamup depends on, so every machine that can run deltamup can build it offline.

A Source is one distribution (or "stdlib") at one version and the sorted list of its .py files; the corpus is the
prose (docstrings and comments, scaling.data.pysource) of those files, in that order.
"""
from __future__ import annotations

import platform
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# The standard library, then deltamup's dependencies and theirs (each is required, directly or transitively, by
# pyproject.toml's dependencies: tests/test_data_corpus.py checks it), largest first.
DEFAULT_SOURCES = ("stdlib", "torch", "ray", "sympy", "pandas", "numpy", "sqlalchemy", "matplotlib", "networkx",
                   "fonttools", "polars", "pyarrow", "mpmath", "optuna", "triton", "seaborn", "alembic", "jinja2",
                   "pyyaml")
STDLIB_EXCLUDE = ("site-packages", "dist-packages", "idlelib", "lib2to3/tests/data", "test/badsyntax")


@dataclass(frozen=True)
class Source:
    name: str
    version: str
    root: Path
    files: tuple[str, ...]  # paths relative to root, POSIX, sorted

    def path(self, relative: str) -> Path:
        return self.root / relative


def stdlib_source() -> Source:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    files = [f for f in files if not any(f.startswith(x) or f"/{x}" in f"/{f}" for x in STDLIB_EXCLUDE)]
    return Source("stdlib", platform.python_version(), root, tuple(files))


def distribution_source(name: str) -> Source:
    """The .py files an installed distribution's RECORD lists; ValueError if it is not installed."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise ValueError(f"corpus source {name!r} is not installed (pip install {name})") from None
    root = Path(dist.locate_file(""))
    files = sorted({f.as_posix() for f in dist.files or () if f.suffix == ".py" and not f.as_posix().startswith("..")})
    return Source(name, dist.version, root, tuple(f for f in files if (root / f).is_file()))


def source_version(name: str) -> str:
    """The version a source has here, without listing its files; ValueError if it is not installed."""
    if name == "stdlib":
        return platform.python_version()
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        raise ValueError(f"corpus source {name!r} is not installed (pip install {name})") from None


def find_source(name: str) -> Source:
    return stdlib_source() if name == "stdlib" else distribution_source(name)
