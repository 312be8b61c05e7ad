"""maintainers/gpu/keep.sh: a sweep directory and its compile cache tarred apart for the trip back (the cache in
xz, in parts where large) and restored; --seed / --merge: one compile cache serves every sweep directory of a study
on the GPU machine, and the one that goes back holds what each sweep that ran compiled, no file overwritten."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

KEEP = Path(__file__).parents[1] / "maintainers/gpu/keep.sh"


def _keep(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(KEEP), *map(str, args)], capture_output=True, text=True)


def _write(path: Path, text: str, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_seed_copies_the_cache_into_every_sweep_without_one(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _write(work / "sweep/runs.jsonl", "")
    _write(work / "sweep-4x/compile-cache/inductor/a.py", "graph")
    _write(work / "sweep-4x/compile-cache/triton/k/b.cubin", "kernel")
    _write(work / "sweep-4l/compile-cache/own.py", "its own")
    seeded = _keep("--seed", work)
    assert seeded.returncode == 0 and seeded.stdout == "compile cache of sweep: sweep-4l's\n"
    assert (work / "sweep/compile-cache/own.py").read_text() == "its own"  # the first sweep with a cache, by name
    assert not (work / "sweep-4x/compile-cache/own.py").exists()  # a sweep with a cache keeps its own
    assert _keep("--seed", tmp_path / "none").returncode == 0  # nothing to seed from: nothing done


def test_merge_returns_the_last_sweep_that_ran_with_the_others_files_added(tmp_path: Path) -> None:
    work, since = tmp_path / "work", tmp_path / "since"
    _write(since, "", mtime=1000)
    _write(work / "sweep/runs.jsonl", "", mtime=2000)  # ran
    _write(work / "sweep/compile-cache/shared.py", "sweep's copy")
    _write(work / "sweep/compile-cache/new.py", "compiled in sweep")
    _write(work / "sweep-4x/runs.jsonl", "", mtime=3000)  # ran last
    _write(work / "sweep-4x/compile-cache/shared.py", "sweep-4x's copy")
    _write(work / "sweep-4l/runs.jsonl", "", mtime=500)  # did not run here
    _write(work / "sweep-4l/compile-cache/stale.py", "not this command's")
    merged = _keep("--merge", work, since)
    assert merged.returncode == 0 and merged.stdout == f"{work}/sweep-4x\n"
    cache = work / "sweep-4x/compile-cache"
    assert (cache / "new.py").read_text() == "compiled in sweep"
    assert (cache / "shared.py").read_text() == "sweep-4x's copy"  # never overwritten
    assert not (cache / "stale.py").exists()  # only the sweeps that ran are merged
    _write(work / "sweep-4l/compile-cache/big.bin", "x" * 100_000)
    os.utime(since, (4000, 4000))  # nothing ran since: the largest cache goes back as it is
    assert _keep("--merge", work, since).stdout == f"{work}/sweep-4l\n"
    assert _keep("--merge", tmp_path / "empty", since).stdout == ""


def test_a_kept_cache_in_parts_restores_whole(tmp_path: Path) -> None:
    """The sweep's archive leaves its compile cache and Ray's folder out; the cache, in xz, comes in parts when over
    KEEP_PART_BYTES, and --restore untars the parts as one."""
    sweep = tmp_path / "sweep"
    _write(sweep / "results/t.json", "{}")
    _write(sweep / "ray/tmp.txt", "scratch")
    kernel = os.urandom(50_000).hex()  # incompressible enough to need several 20 kB parts
    _write(sweep / "compile-cache/triton/k/b.ptx", kernel)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "KEEP_PART_BYTES": "20000"}
    kept = subprocess.run(["bash", str(KEEP), str(sweep), str(out / "sweep.tgz"), str(out / "sweep.txz")],
                          capture_output=True, text=True, env=env)
    assert kept.returncode == 0, kept.stderr
    parts = sorted(p.name for p in out.glob("sweep.txz.*"))
    assert len(parts) >= 2 and parts[0] == "sweep.txz.00" and not (out / "sweep.txz").exists()
    listed = subprocess.run(["tar", "-tzf", str(out / "sweep.tgz")], capture_output=True, text=True).stdout
    assert "./results/t.json" in listed and "ray" not in listed and "compile-cache" not in listed
    assert _keep("--restore", out / "sweep.txz", tmp_path / "restored").returncode == 0
    assert (tmp_path / "restored/triton/k/b.ptx").read_text() == kernel
