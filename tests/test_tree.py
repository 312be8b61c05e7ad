"""maintainers/gpu/tree.sh and run_tree.py: a commit's deltamup as a folder, run in place of the installed one (the
way two codes' numbers are compared side by side on one GPU)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _tree(commit: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "maintainers/gpu/tree.sh", commit, str(out)], cwd=ROOT, capture_output=True,
                          text=True)


def test_a_commits_tree_runs_in_place_of_the_installed_package(tmp_path):
    made = _tree("HEAD", tmp_path / "t")
    assert made.returncode == 0, made.stderr
    models = tmp_path / "t" / "deltamup" / "models"
    assert (models / "lm.py").is_file() and (tmp_path / "t" / "deltamup" / "kernels" / "triton").is_dir()
    run = subprocess.run([sys.executable, str(ROOT / "maintainers/gpu/run_tree.py"), str(tmp_path / "t"),
                          "coord-check", "--depth", "1", "--heads", "1", "--base-width", "16", "--widths", "16,32",
                          "--steps", "1", "--batch-size", "2", "--seq-len", "16", "--device", "cpu", "--raw", "--out",
                          str(tmp_path / "cc")], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"run_tree.py: {models / 'lm.py'}" in run.stderr and (tmp_path / "cc" / "coords.parquet").is_file()


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    assert _tree("HEAD", tmp_path / "t").returncode == 0
    again = _tree("HEAD", tmp_path / "t")
    assert again.returncode == 2 and again.stderr == f"tree.sh: {tmp_path / 't'} exists\n"
    unknown = _tree("no-such-commit", tmp_path / "u")
    assert unknown.returncode == 2 and unknown.stderr == "tree.sh: no commit no-such-commit\n"
    run = subprocess.run([sys.executable, str(ROOT / "maintainers/gpu/run_tree.py"), str(tmp_path / "u")],
                         capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.startswith("usage: run_tree.py TREE ARGS…")
