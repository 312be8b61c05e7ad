"""maintainers/gpu/tree.sh and run_tree.py: a commit's deltamup as a folder, run in place of the installed one (the
way two codes' numbers are compared side by side on one GPU)."""
from __future__ import annotations

import json
import os
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


def test_a_sweep_by_an_older_commit_trains_in_that_commits_code(tmp_path):
    """studies/gdn-adamw-8l/run.sh recheck-code runs the commit that trained the study's first trials (e59e93a) on
    its own spec, from its tree: Ray's workers import the tree's deltamup (their records are that code's, without
    the `code` field later records carry), not the checkout's, on a Ray instance of their own where another runs
    (the session's test cluster). run_tree.py refuses a sweep from any folder but the tree's, whose deltamup/ the
    workers would import instead; the part without the tree is one line."""
    from deltamup.scaling.data.inputs import text_files
    from deltamup.scaling.data.prepare import prepare

    (tmp_path / "a.txt").write_text("Gated DeltaNet and DeltaProduct share one kernel. " * 200)
    prepare(text_files([str(tmp_path / "a.txt")]), tmp_path / "corpus", progress=False)
    tree = tmp_path / "tree"
    assert _tree("e59e93a", tree).returncode == 0 and (tree / "studies/gdn-adamw-8l/spec.yaml").is_file()
    small = ("steps=2 warmup_steps=1 batch_size=1 seq_len=32 compile=false eval.batches=1 resources.gpu=0 "
             "model.depth=1 seeds=[0]")  # the part's two LRs at seed 0 (it runs seeds 0–2)
    part = ["bash", "studies/gdn-adamw-8l/run.sh", str(tmp_path / "sweep"), str(tmp_path / "corpus"), "recheck-code"]
    run = subprocess.run(part, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "TREE": str(tree), "PART_SETS": small})
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "sweep-recheck-original-code" / "results").glob("*.json")]
    assert len(records) == 2 and all(r["status"] == "ok" and "code" not in r for r in records)
    assert {r["lr"] for r in records} == {2.0**-9, 2.0**-8}
    refused = subprocess.run([sys.executable, str(ROOT / "maintainers/gpu/run_tree.py"), str(tree), "sweep", "x"],
                             cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stderr.startswith("run_tree.py: a sweep runs from TREE")
    missing = subprocess.run(part, cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "TREE": str(tmp_path / "none")})
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        f"part recheck-code needs commit e59e93a's tree at {tmp_path / 'none'}: bash maintainers/gpu/tree.sh e59e93a "
        f"{tmp_path / 'none'}"]
