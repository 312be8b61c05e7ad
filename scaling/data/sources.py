"""Where the default corpus comes from: the Python sources that ship with the interpreter and with the packages
deltamup depends on, so every machine that can run deltamup can build it offline.

A Source is one distribution (or "stdlib") at one version and the sorted list of its .py files; the corpus is the
prose (docstrings and comments, scaling.data.pysource) of those files, in that order.
"""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
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


def distribution_source(name: str, folder: Path | None = None) -> Source:
    """The .py files an installed distribution's RECORD lists (folder: the one unpacked there, pinned_folder, instead
    of the installed one); ValueError if it is not installed."""
    try:
        dist = (metadata.distribution(name) if folder is None
                else next(iter(metadata.distributions(name=name, path=[str(folder)]))))
    except (metadata.PackageNotFoundError, StopIteration):
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


def find_source(name: str, folder: Path | None = None) -> Source:
    return stdlib_source() if name == "stdlib" else distribution_source(name, folder)


def sources_like(manifest: dict, cache: Path) -> tuple[tuple[str, ...], dict[str, Path]]:
    """The sources a default corpus's manifest lists, in its order, and for each whose version here is another, a
    folder holding the listed version (pinned_folder). ValueError in one line, before any build: a manifest of
    other text, another Python's standard library, or a version pip cannot fetch."""
    names, folders = [], {}
    for item in manifest["inputs"]:
        name, version = item["name"], item.get("version")
        if name not in DEFAULT_SOURCES or version is None:
            raise ValueError(f"the manifest lists {name!r}, not a source of the default corpus: only a default "
                             "corpus can be rebuilt from its manifest")
        names.append(name)
        if name == "stdlib":
            if version != platform.python_version():
                raise ValueError(f"the manifest's standard library is Python {version}'s, this is "
                                 f"{platform.python_version()}: rebuild it with that Python")
        elif version != _installed_version(name):
            folders[name] = pinned_folder(name, version, cache)
    return tuple(names), folders


def _installed_version(name: str) -> str | None:
    try:
        return source_version(name)
    except ValueError:
        return None


def pinned_folder(name: str, version: str, cache: Path) -> Path:
    """cache/sources/<name>-<version>/: the distribution's wheel at that version, fetched by pip (no dependencies,
    the index pip is configured with) and unpacked, kept for the next build. ValueError (one line) where pip
    cannot fetch it."""
    folder = cache / "sources" / f"{name}-{version}"
    if (folder / ".complete").exists():
        return folder
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                              "-d", tmp, f"{name}=={version}"], capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if run.returncode or not wheels:
            reason = (run.stderr.strip().splitlines() or ["no wheel came"])[-1]
            raise ValueError(f"corpus source {name} {version}: pip cannot fetch it ({reason})")
        shutil.rmtree(folder, ignore_errors=True)
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(folder)
    (folder / ".complete").touch()
    return folder
