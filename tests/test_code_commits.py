"""From a recorded code fingerprint back to the commits (scaling.code.committed_fingerprints, `deltamup code`): a
commit's committed sources give the fingerprint a trial trained from that work tree recorded."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from deltamup.cli import main
from deltamup.scaling.code import PACKAGES, committed_fingerprints, fingerprint_of, versions_text

VERSIONS = versions_text("1.0", "2.0")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def work_tree_fingerprint(repo: Path) -> str:
    return fingerprint_of({name: repo / name for name in PACKAGES}, VERSIONS)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[tuple[str, str]]]:
    """A repository of deltamup's layout and three commits: the sources; one file edited; a file that is not
    Python added (the same fingerprint). Returns it and each commit's (sha, work-tree fingerprint), oldest first."""
    repo = tmp_path / "repo"
    for name in PACKAGES:
        (repo / name).mkdir(parents=True)
        (repo / name / "__init__.py").write_text(f"# {name}\n")
    # paths whose order differs between a plain string sort and fingerprint_of's path order ("-" sorts before "/")
    (repo / "kernels" / "triton").mkdir()
    (repo / "kernels" / "triton" / "a.py").write_text("A = 1\n")
    (repo / "kernels" / "triton-x.py").write_text("X = 1\n")
    (repo / "README.md").write_text("outside the packages\n")
    git(repo, "init", "-q")
    commits = []
    for change in (None, ("kernels/triton/a.py", "A = 2\n"), ("models/notes.txt", "not Python\n")):
        if change:
            (repo / change[0]).write_text(change[1])
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {len(commits)}")
        commits.append((git(repo, "rev-parse", "HEAD"), work_tree_fingerprint(repo)))
    return repo, commits


def test_each_commit_gives_the_fingerprint_of_its_work_tree(repo) -> None:
    path, commits = repo
    got = [(c.sha, fingerprint) for c, fingerprint in committed_fingerprints(path, VERSIONS)]
    assert got == commits[::-1]  # newest first
    assert commits[0][1] != commits[1][1] == commits[2][1]  # the text file changes no fingerprint
    assert {fp for _, fp in committed_fingerprints(path, versions_text("1.0", "2.1"))}.isdisjoint(
        fp for _, fp in commits)  # other versions, other fingerprints


def test_the_command_names_the_commits_and_the_diff_between_them(repo, capsys) -> None:
    path, commits = repo
    (first, old), (second, _), (third, new) = commits
    code = main(["code", old, new, "--repo", str(path), "--torch", "1.0", "--triton", "2.0"])
    out = capsys.readouterr().out
    assert code == 0
    assert first[:10] in out and second[:10] in out and third[:10] in out  # new: both commits that give it
    assert f"git diff --stat {first[:10]} {third[:10]}" in out
    assert "kernels/triton/a.py" in out and "notes.txt" in out


def test_a_fingerprint_no_commit_gives_is_said_and_exits_1(repo, capsys) -> None:
    path, commits = repo
    assert main(["code", commits[0][1], "--repo", str(path), "--torch", "9", "--triton", "2.0"]) == 1
    assert f"no commit gives {commits[0][1]}" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["12345"], "not a code fingerprint (16 hex digits) or a sweep directory: 12345"),
    (["0123456789abcdef", "--repo", "{tmp}"], "is not a git repository"),
    (["0123456789abcdef", "--repo", "{repo}"], "has no models, parametrizations, scaling at its top"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    other = tmp_path / "other"
    (other / "kernels").mkdir(parents=True)
    git(other, "init", "-q")
    (tmp_path / "plain").mkdir()
    args = [a.format(tmp=tmp_path / "plain", repo=other) for a in args]
    assert main(["code", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_sweep_directory_stands_for_the_codes_its_trials_recorded(repo, tmp_path: Path, capsys) -> None:
    """Each finished trial's code, with the versions its record names (the flags' where it names none), counted;
    an unfinished trial's is not."""
    from deltamup.sweeps import store
    from deltamup.sweeps.record import TrialRecord, trial_id

    path, commits = repo
    (first, old), _, (third, new) = commits
    sweep = tmp_path / "sweep"
    for seed, (status, code, versions) in enumerate([("ok", old, VERSIONS), ("ok", new, VERSIONS),
                                                     ("ok", new, None), ("error", "ffffffffffffffff", VERSIONS)]):
        tid = trial_id("gdn-mup", "adamw", 64, 1e-3, seed)
        config = {"code": code} | ({"versions": versions} if versions else {})
        store.write_trial(sweep, TrialRecord(tid, status, phase="grid", run=1, parametrization="gdn-mup",
                                             optimizer="adamw", width=64, lr=1e-3, seed=seed, config=config),
                          {c: [] for c in store.CURVE_COLUMNS})
    assert main(["code", str(sweep), "--repo", str(path), "--torch", "1.0", "--triton", "2.0"]) == 0
    out = capsys.readouterr().out
    rows = [re.match(r"(\w{16})  (torch .*?) {2,}(\d+) {2,}(\w{10})", line) for line in out.splitlines()]
    assert [r.groups() for r in rows if r] == [  # old's commit; new's two commits, with each versions
        (old, VERSIONS, "1", first[:10]), (new, VERSIONS, "1", third[:10]), (new, VERSIONS, "1", commits[1][0][:10]),
        (new, VERSIONS + " (--torch, --triton)", "1", third[:10]),
        (new, VERSIONS + " (--torch, --triton)", "1", commits[1][0][:10])]
    assert f"git diff --stat {first[:10]} {third[:10]}" in out and "ffffffffffffffff" not in out
    assert main(["code", str(sweep), "--repo", str(path), "--torch", "9", "--triton", "2.0"]) == 1  # not found
    assert main(["code", str(tmp_path), "--repo", str(path)]) == 2
    assert "is not a sweep directory" in capsys.readouterr().err
