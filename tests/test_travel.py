"""maintainers/gpu/travel.sh: the evidence a GPU command never reads leaves the work tree and comes back from git,
the named studies' sweeps stay, and nothing uncommitted is ever removed."""
from __future__ import annotations

import subprocess
from pathlib import Path

TRAVEL = Path(__file__).parents[1] / "maintainers/gpu/travel.sh"
EVIDENCE = ["studies/b/sweep/results/y.json", "studies/a/report/loss.png", "studies/a/report/optima.csv",
            "studies/coord-checks/w/slopes.csv", "benchmarks/logs/run.log", "docs/figure.svg"]
KEPT = ["studies/a/run.sh", "studies/a/sweep/results/x.json", "studies/a/sweep/spec.yaml", "studies/b/run.sh",
        "studies/b/README.md", "studies/coord-checks/compare.py", "kernels/k.py"]


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for name in EVIDENCE + KEPT:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    return repo


def _travel(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(TRAVEL), *args], cwd=repo, capture_output=True, text=True)


def test_away_takes_the_evidence_but_the_named_study_sweep_and_back_restores_it(tmp_path):
    repo = _repo(tmp_path)
    away = _travel(repo, "away", "a")
    assert away.returncode == 0 and f"{len(EVIDENCE)} evidence files out" in away.stdout
    assert [n for n in EVIDENCE if (repo / n).exists()] == []
    assert [n for n in KEPT if not (repo / n).exists()] == []
    size = _travel(repo, "size", "kernels")
    assert size.returncode == 0 and size.stdout.startswith("work tree ") and "of 67.1 MB" in size.stdout
    back = _travel(repo, "back")
    assert back.returncode == 0 and f"{len(EVIDENCE)} evidence files restored" in back.stdout
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""


def test_away_refuses_uncommitted_evidence_and_an_unknown_study_before_removing_anything(tmp_path):
    repo = _repo(tmp_path)
    unknown = _travel(repo, "away", "nosuch")
    assert unknown.returncode == 2 and "no study nosuch" in unknown.stderr
    (repo / "studies/a/report/optima.csv").write_text("changed")
    changed = _travel(repo, "away", "a")
    assert changed.returncode == 1 and "studies/a/report/optima.csv" in changed.stderr
    assert [n for n in EVIDENCE if not (repo / n).exists()] == []


def test_size_fails_over_the_limit_and_on_a_missing_carry_path(tmp_path):
    repo = _repo(tmp_path)
    (repo / "big.bin").write_bytes(b"\0")
    with open(repo / "big.bin", "r+b") as f:
        f.truncate(70_000_000)  # sparse: du -b counts its apparent size
    over = _travel(repo, "size")
    assert over.returncode == 1 and "over the limit" in over.stderr
    missing = _travel(repo, "size", "no/such")
    assert missing.returncode == 2 and "no carry path no/such" in missing.stderr
