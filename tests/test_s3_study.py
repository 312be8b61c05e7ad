"""studies/s3/s3_householder.py over several calls: a study killed mid-run continues the run from its checkpoint
(scaling/checkpoint.py, every --checkpoint-every steps) to the uninterrupted run's result, a rerun skips the runs its
--out file already holds, and solved.py reads that file. One tiny run on the CPU."""
from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

STUDY = Path(__file__).resolve().parent.parent / "studies" / "s3"
LABEL = "n_h=2 β∈[0,2]"
TINY = ["--steps", "80", "--width", "32", "--heads", "2", "--seq-len", "16", "--test-length", "32",
        "--batch-size", "8", "--variants", LABEL, "--seed-list", "0,1", "--jobs", "1"]


@pytest.fixture(scope="module")
def study():
    """The script as a module (solved.py, beside it, importable as `solved`)."""
    sys.path.insert(0, str(STUDY))
    spec = importlib.util.spec_from_file_location("s3_householder", STUDY / "s3_householder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(STUDY))


def without_minutes(line: str) -> str:
    return re.sub(r"  minutes \S+$", "", line)


def test_a_killed_study_skips_the_runs_out_holds_and_continues_the_cut_one_from_its_checkpoint(study, tmp_path):
    """Seeds 0 and 1 one after the other; killed once seed 1 has saved a checkpoint (its first, at step 20)."""
    out, folder = tmp_path / "s3.txt", tmp_path / "ckpt"
    argv = [sys.executable, str(STUDY / "s3_householder.py"), *TINY, "--out", str(out), "--checkpoint-dir",
            str(folder), "--checkpoint-every", "20"]
    checkpoint = study.checkpoint_path(folder, LABEL, 1)
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not checkpoint.exists() and child.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL, "the study ended before it was killed"
    from solved import read  # studies/s3/solved.py
    assert list(read([out])[LABEL]) == [0] and checkpoint.exists()
    assert not study.checkpoint_path(folder, LABEL, 0).exists()  # removed once its line was written

    rerun = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert "# 1 of 2 runs already in" in rerun.stdout
    came = re.search(rf"{re.escape(LABEL)} seed 1: steps 1–(\d+) came from its checkpoint", rerun.stderr)
    assert came and 0 < int(came[1]) < 80 and int(came[1]) % 20 == 0, rerun.stderr
    assert not checkpoint.exists() and not list(folder.iterdir())  # no checkpoint, nor a killed save's leftover

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script's runs: CPU results agree bit for bit only at one thread count
    try:
        row = study.run(LABEL, 1, study.parser().parse_args(TINY))  # uninterrupted, not checkpointed
    finally:
        torch.set_num_threads(threads)
    lines = [without_minutes(line) for line in out.read_text().splitlines() if ": loss " in line]
    assert lines[1:] == [without_minutes(study.result_line(LABEL, 1, row))] and len(lines) == 2
    runs = read([out])[LABEL]
    assert sorted(runs) == [0, 1] and runs[1]["loss"] == float(f"{row['loss']:.3f}") and "seq_acc@16" in runs[1]
