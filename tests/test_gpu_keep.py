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
    _write(work / "sweep-4l/compile-cache/own.py", "its own", mtime=1000)
    seeded = _keep("--seed", work)
    assert seeded.returncode == 0 and seeded.stdout == "compile cache of sweep: sweep-4l's\n"
    assert (work / "sweep/compile-cache/own.py").read_text() == "its own"  # the first sweep with a cache, by name
    assert (work / "sweep/compile-cache/own.py").stat().st_mtime == 1000  # a copy is not a compile (--cache)
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


def test_only_what_changed_since_the_parts_started_is_kept(tmp_path: Path) -> None:
    """--touched: a sweep directory changed where a file other than Ray's scratch, the checkpoints and the compile
    cache is newer than SINCE; keep.sh with SINCE tars the compile cache only where something in it is newer (a cache
    carried in and only read does not take one of the returned files)."""
    since = tmp_path / "since"
    _write(since, "", mtime=1000)
    sweep = tmp_path / "sweep"
    _write(sweep / "results/old.json", "{}", mtime=500)
    _write(sweep / "ray/session.log", "scratch")
    _write(sweep / "partial/t/ckpt.pt", "checkpoint")
    _write(sweep / "compile-cache/inductor/graph.py", "carried in", mtime=500)
    assert _keep("--touched", sweep, since).returncode == 1  # scratch, checkpoints and the cache do not count
    out = tmp_path / "out"
    out.mkdir()
    assert _keep(sweep, out / "sweep.tgz", out / "cache.txz", since).returncode == 0
    assert (out / "sweep.tgz").exists() and not list(out.glob("cache.txz*"))  # the cache only read: not returned
    _write(sweep / "results/new.json", "{}")
    _write(sweep / "compile-cache/triton/k/new.cubin", "compiled here")
    assert _keep("--touched", sweep, since).returncode == 0
    assert _keep("--cache", sweep, out / "cache.txz", since).returncode == 0
    assert _keep("--restore", out / "cache.txz", tmp_path / "restored").returncode == 0
    assert (tmp_path / "restored/triton/k/new.cubin").read_text() == "compiled here"
    assert (tmp_path / "restored/inductor/graph.py").read_text() == "carried in"  # the whole cache, merged


def test_every_with_since_tars_only_the_sweeps_the_parts_changed(tmp_path: Path) -> None:
    import signal
    import time

    since, work, out = tmp_path / "since", tmp_path / "work", tmp_path / "out"
    _write(since, "", mtime=1000)
    _write(work / "sweep/results/committed.json", "{}", mtime=500)  # a committed sweep these parts did not run
    _write(work / "sweep-neg/results/committed.json", "{}", mtime=500)
    out.mkdir()
    loop = subprocess.Popen(["bash", str(KEEP), "--every", "0.2", str(work), str(out), str(since)])
    try:
        _write(work / "sweep-neg/results/new.json", "{}")
        deadline = time.time() + 30
        while not (out / "sweep-neg.tgz").exists() and time.time() < deadline:
            time.sleep(0.1)
    finally:
        loop.send_signal(signal.SIGTERM)
        assert loop.wait(timeout=30) == 0
    assert sorted(p.name for p in out.iterdir()) == ["sweep-neg.tgz"]


def test_fit_leaves_caches_out_largest_first_then_packs_the_results(tmp_path: Path) -> None:
    """--fit: at most KEEP_MAX_FILES (8) files come back from a command; compile caches go first, the largest (a
    cache's parts counted together) first; where the results alone are still too many, they come as one tar."""
    import tarfile

    out = tmp_path / "out"
    results = ["a/a.log", "a/sweep.tgz", "b/b.log", "b/sweep.tgz", "b/sweep-neg.tgz", "c/c.log", "c/sweep.tgz"]
    for name in results:
        _write(out / name, name)
    _write(out / "a/compile-cache/sweep.txz", "x" * 3000)
    _write(out / "b/compile-cache/sweep-neg.txz.00", "x" * 2000)  # 4000 together: the largest
    _write(out / "b/compile-cache/sweep-neg.txz.01", "x" * 2000)
    fitted = _keep("--fit", out)
    assert fitted.returncode == 0
    assert fitted.stdout == f"keep.sh: 10 files under {out}, 8 come back: left out the compile cache " \
                            f"{out}/b/compile-cache/sweep-neg.txz\n"
    assert (out / "a/compile-cache/sweep.txz").exists() and not list((out / "b/compile-cache").iterdir())
    assert _keep("--fit", out).stdout == ""  # 8 files: nothing to do
    few = subprocess.run(["bash", str(KEEP), "--fit", str(out)], capture_output=True, text=True,
                         env={**os.environ, "KEEP_MAX_FILES": "5"})
    assert few.returncode == 0 and "left out the compile cache" in few.stdout and "results.tar" in few.stdout
    assert [p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()] == ["results.tar"]
    with tarfile.open(out / "results.tar") as tar:
        assert sorted(n.removeprefix("./") for n in tar.getnames()) == sorted(results)
        assert tar.extractfile("./b/sweep-neg.tgz").read() == b"b/sweep-neg.tgz"
