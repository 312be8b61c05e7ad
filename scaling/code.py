"""Which code trained a run: a fingerprint of the sources a trial's numbers come from, for the trial record.

    code_fingerprint()   -> "3f9c0a1b2c3d4e5f"   (16 hex digits; equal: the same sources, torch and Triton)
    committed_fingerprints(repo, versions)   -> each commit that changed those sources, with its fingerprint

A sweep resumed after the kernels, the models, a parametrization or the training loop changed mixes trials that
different code trained: bf16 rounding that moves, a fixed bug, a changed default. The record's `code` column says
which trials share their code, as `data` says which share their data (sweeps/record.py); `deltamup code` finds the
commits whose sources give a recorded fingerprint, so what changed between two of them can be read.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

PACKAGES = ("kernels", "models", "parametrizations", "scaling")  # deltamup.<name>: what a trial's numbers come from


def _digest(files: Iterable[tuple[str, PurePosixPath, bytes]], versions: str) -> str:
    """16 hex digits of the sha256 over the versions text and each (root name, path below it, bytes) in turn."""
    h = hashlib.sha256(versions.encode())
    for name, path, data in files:
        h.update(f"\0{name}/{path.as_posix()}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def fingerprint_of(roots: dict[str, Path], versions: str) -> str:
    """The fingerprint of every *.py under each root (its name, the file's path below it and its bytes, roots by
    name, files by path) and the versions text: a file's edit, addition, removal or move changes it, its mtime
    does not."""
    return _digest(((name, PurePosixPath(path.relative_to(root).as_posix()), path.read_bytes())
                    for name, root in sorted(roots.items()) for path in sorted(root.rglob("*.py"))), versions)


@dataclass(frozen=True)
class Commit:
    sha: str      # 40 hex digits
    date: str     # the commit date, YYYY-MM-DD
    subject: str


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=True).stdout


def _blobs(repo: Path, shas: list[str], known: dict[str, bytes]) -> None:
    """Reads the blobs `shas` not yet in `known` into it, in one `git cat-file --batch`."""
    todo = [sha for sha in dict.fromkeys(shas) if sha not in known]
    out = _git(repo, "cat-file", "--batch", stdin="".join(f"{sha}\n" for sha in todo).encode())
    at = 0
    for sha in todo:  # each object: "<sha> blob <size>\n", its bytes, "\n"
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        known[sha] = out[header_end + 1:header_end + 1 + size]
        at = header_end + 2 + size


def committed_fingerprints(repo: Path, versions: str, roots: dict[str, str] | None = None,
                           since: str | None = None) -> Iterator[tuple[Commit, str]]:
    """Each commit of `repo` that changed a root's sources (newest first; from `since`, a date git reads, where
    given), with the fingerprint fingerprint_of gives its committed *.py files and `versions`. roots: name -> its
    folder in the repository (default: each of PACKAGES at the top, this repository's layout)."""
    roots = roots or {name: name for name in PACKAGES}
    log = _git(repo, "log", "--format=%H%x09%cs%x09%s", *(["--since", since] if since else []), "--",
               *roots.values()).decode()
    known: dict[str, bytes] = {}
    for line in log.splitlines():
        sha, date, subject = line.split("\t", 2)
        files: list[tuple[str, PurePosixPath, str]] = []
        listing = _git(repo, "ls-tree", "-r", "-z", sha, "--", *(f"{folder}/" for folder in roots.values())).decode()
        for entry in filter(None, listing.split("\0")):  # "<mode> <type> <sha>\t<path>"
            meta, path = entry.split("\t", 1)
            _, kind, blob = meta.split()
            if kind == "blob" and path.endswith(".py"):
                name, folder = next((n, f) for n, f in roots.items() if PurePosixPath(path).is_relative_to(f))
                files.append((name, PurePosixPath(path).relative_to(folder), blob))
        files.sort(key=lambda f: (f[0], f[1]))  # fingerprint_of's order: roots by name, files by path
        _blobs(repo, [blob for *_, blob in files], known)
        yield Commit(sha, date, subject), _digest(((name, path, known[blob]) for name, path, blob in files), versions)


def installed_version(package: str) -> str:
    """The installed version of a distribution ("2.11.0+cu130"), or "none"."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def versions_text(torch: str, triton: str) -> str:
    """The versions part of a fingerprint: the torch and Triton versions the sources ran under."""
    return f"torch {torch}; triton {triton}"


def installed_versions() -> str:
    """The versions part of this process's fingerprint: its torch's and Triton's (the trial record's `versions`)."""
    return versions_text(installed_version("torch"), installed_version("triton"))


@functools.cache
def code_fingerprint() -> str:
    """The fingerprint of this process's deltamup.kernels, .models, .parametrizations and .scaling sources with the
    installed torch's and Triton's versions (a docstring's edit counts too: equal means the same code, unequal may
    still train the same numbers)."""
    roots = {name: Path(importlib.import_module(f"deltamup.{name}").__file__).parent for name in PACKAGES}
    return fingerprint_of(roots, installed_versions())
