"""Fault injection: damaged result files, a trial that raises, a trial killed mid-run, a driver killed mid-sweep, two
drivers, a full disk. Each ends with nothing lost and a one-line message. Sweeps run on the shared Ray cluster of
tests/conftest.py with tiny models (tests/test_sweeps.py's TINY)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import yaml
from test_sweeps import tiny_spec

from deltamup.cli import main
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.runner import run_sweep

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "sweep-v0"
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
SMALL = {"widths": [32], "parametrizations": ["gdn-mup"]}  # two trials: lrs 1e-3 and 1e-2


def contents(out: Path) -> dict[str, bytes]:
    """Every result file of the sweep (records, curves, tracebacks), by name."""
    return {p.name: p.read_bytes() for p in store.results_dir(out).glob("*") if p.is_file()}


def damage(results: Path) -> dict[str, str]:
    """The damages the probe found, one file each: {file name: what it now holds}."""
    good = json.loads((results / "sp.adamw.w1536.lr0.03125.s0.json").read_text())
    truncated = results / "gdn-mup.adamw.w1024.lr0.00195312.s0.json"
    truncated.write_text(truncated.read_text()[:672])
    (results / "mup.adamw.w1024.lr0.000488281.s0.json").write_text("[]")
    (results / "sp.adamw.w1024.lr0.03125.s0.json").write_text(json.dumps({k: v for k, v in good.items()
                                                                           if k != "status"}))
    (results / "sp.adamw.w768.lr0.03125.s0.json").write_text(json.dumps(good | {"width": "wide"}))
    return {"gdn-mup.adamw.w1024.lr0.00195312.s0.json": "not valid JSON", "mup.adamw.w1024.lr0.000488281.s0.json":
            "expected a JSON object", "sp.adamw.w1024.lr0.03125.s0.json": "'status' is missing",
            "sp.adamw.w768.lr0.03125.s0.json": "'width' must be an integer"}


def test_damaged_result_files_are_named_moved_aside_and_the_report_works_on_the_rest(tmp_path, capsys):
    out = Path(shutil.copytree(FIXTURE, tmp_path / "sweep"))
    damaged = damage(store.results_dir(out))
    assert main(["report", str(out)]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("damaged result file")]
    assert len(notes) == 4 and all(any(n in line for n in damaged) for line in notes)
    assert "Expecting ',' delimiter" in captured.err  # the JSON error, with the file it is in
    assert "skipped 4 damaged result file(s)" in captured.out
    assert sorted(p.name for p in store.quarantine_dir(out).glob("*.json")) == sorted(damaged)
    assert [r.trial_id for r in store.read_trials(out)] == ["sp.adamw.w1536.lr0.03125.s0"]  # the intact one
    assert "Skipped 4 damaged" in (out / "report" / "index.html").read_text()
    assert main(["export", str(out), "-p", "sp", "--optimizer", "adamw", "--width", "2048", "--out",
                 str(tmp_path / "x.yaml"), "--allow-bound", "--allow-unverified"]) == 0


def test_a_resume_reruns_exactly_the_damaged_trial_and_a_failing_one_writes_nothing(cluster, tmp_path, capsys):
    spec_path = tiny_spec(tmp_path, **SMALL)
    out = tmp_path / "sweep"
    run_sweep(specs.load(spec_path), out, progress_every=60)
    victim = store.record_path(out, specs.load(spec_path).grid()[0].key)
    victim.write_text(victim.read_text()[:100])
    (out / "trials.parquet").unlink()
    before, runs = contents(out), (out / "runs.jsonl").read_text()
    # a resume that fails (a spec field changed) writes nothing, and leaves even the damaged file where it is
    assert main(["sweep", str(out), "--resume", "--set", "steps=7"]) == 2
    assert "spec field 'steps' differs" in capsys.readouterr().err
    assert contents(out) == before and (out / "runs.jsonl").read_text() == runs
    line = run_sweep(specs.load(spec_path), out, resume=True, progress_every=60)
    assert line["launched"] == 1 and f"damaged result file {victim}" in capsys.readouterr().err
    assert len(store.finished_ids(out)) == 2 and store.quarantine_dir(out).joinpath(victim.name).is_file()
    assert {k: v for k, v in contents(out).items() if k != victim.name and "curve" not in k} == \
        {k: v for k, v in before.items() if k != victim.name and "curve" not in k}  # the other trial untouched


def test_a_trial_that_raises_is_retried_by_ray_in_a_fresh_worker_with_every_traceback_kept(cluster, tmp_path):
    # an empty validation split makes the evaluation after training raise inside the trial
    spec = specs.load(tiny_spec(tmp_path, widths=[32], parametrizations=["sp"], lrs=[1e-3],
                                task={"name": "sample", "val_fraction": 0.0}, failure={"retries": 1}))
    out = tmp_path / "sweep"
    run_sweep(spec, out, progress_every=60)
    (row,) = pl.read_parquet(out / "trials.parquet").to_dicts()
    assert row["status"] == "error" and row["attempts"] == 2  # 1 + retries, not (1 + retries)²
    assert "ValueError" in row["error"] and "too long" in row["error"]
    names = json.loads(row["tracebacks"])
    assert names == [f"{row['trial_id']}.attempt{n}.traceback.txt" for n in (1, 2)]
    texts = [(store.results_dir(out) / n).read_text() for n in names]
    assert all("Traceback (most recent call last)" in t and "train_and_evaluate" in t for t in texts)
    assert texts[0].split(" on ")[0] != texts[1].split(" on ")[0]  # "pid N on host": another worker process
    assert store.finished_ids(out) == set()  # an errored trial is not finished: a resume runs it again


def ray_trial_pids() -> list[int]:
    """Processes running a Tune function trial on this session's cluster (its actor table: another cluster on the
    machine, e.g. another pytest worker's, keeps its trials)."""
    from ray._private.state import actors

    return [a["Pid"] for a in actors().values()
            if a["State"] == "ALIVE" and a["ActorClassName"].endswith("ImplicitFunc") and a["Pid"]]


def test_a_trial_killed_mid_run_is_rerun_and_its_death_recorded(cluster, tmp_path):
    spec = specs.load(tiny_spec(tmp_path, widths=[32], parametrizations=["sp"], lrs=[1e-3], steps=600,
                                log_every=100, failure={"retries": 1}))  # ≥ 3 s of training on 2 cores
    out = tmp_path / "sweep"
    killed: list[int] = []

    def kill_first_trial() -> None:
        deadline = time.time() + 120
        while not killed and time.time() < deadline:
            pids = ray_trial_pids()
            if pids:
                time.sleep(1.0)  # into its run, well before its end
                try:
                    os.kill(pids[0], signal.SIGKILL)
                except ProcessLookupError:
                    continue
                killed.append(pids[0])
            time.sleep(0.1)

    killer = threading.Thread(target=kill_first_trial)
    killer.start()
    run_sweep(spec, out, progress_every=60)
    killer.join()
    assert killed
    (record,) = store.read_trials(out)
    assert record.status == "ok" and record.attempts == 2 and record.steps == 600
    (death,) = record.tracebacks
    assert "without a Python traceback" in (store.results_dir(out) / death).read_text()


def test_a_second_driver_is_refused_in_one_line_before_writing(tmp_path, capsys):
    spec_path = tiny_spec(tmp_path, **SMALL)
    out = tmp_path / "sweep"
    out.mkdir()
    with store.driver_lock(out):
        assert main(["sweep", str(spec_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"deltamup sweep: error: another driver is running the sweep in {out}"
    assert sorted(p.name for p in out.iterdir()) == ["driver.lock"]


def full_disk() -> None:
    """In the child: every write of a byte fails (EFBIG), as on a full disk; works as root too, where a read-only
    folder would not stop a write."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_a_full_disk_stops_each_command_in_one_line_and_loses_nothing(tmp_path):
    out = Path(shutil.copytree(FIXTURE, tmp_path / "sweep"))
    spec = store.read_spec(out) | {"task": "sample", "seq_len": 64}  # runnable here (the study's corpus is not)
    (out / "spec.yaml").write_text(yaml.safe_dump(spec))
    before = contents(out)
    for argv in (["sweep", str(out), "--resume"], ["report", str(out)],
                 ["export", str(out), "-p", "sp", "--optimizer", "adamw", "--width", "64", "--out",
                  str(tmp_path / "t.yaml"), "--allow-bound"]):
        done = subprocess.run([sys.executable, "-m", "deltamup", *argv], cwd=ROOT, env=ENV, capture_output=True,
                              text=True, timeout=120, preexec_fn=full_disk)
        err = done.stderr.strip()
        assert done.returncode in (1, 2) and "\n" not in err, err
        assert err.startswith(f"deltamup {argv[0]}: error:"), err  # e.g. "cannot write in …: File too large"
    assert contents(out) == before and not (out / "runs.jsonl").exists()
