"""`deltamup code`: the commits whose sources give a trial record's `code` fingerprint; what changed between them."""
from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter
from pathlib import Path

from deltamup.console import print_table
from deltamup.scaling.code import PACKAGES, Commit, committed_fingerprints, installed_version, versions_text
from deltamup.sweeps import store

FINGERPRINT = re.compile(r"[0-9a-f]{16}")
Key = tuple[str, str, bool]  # (fingerprint, versions text, whether the versions came from the flags, not a record)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("code", help="the commits behind recorded code fingerprints, and the diff between them",
                       description="The commits of --repo whose deltamup.kernels, .models, .parametrizations and "
                                   ".scaling sources give each code fingerprint (a trial record's `code`, 16 hex "
                                   "digits) under the torch and Triton versions it was made with; with two or more "
                                   "found, `git diff --stat` of those sources from each to the next, in the order "
                                   "committed. A sweep directory stands for the fingerprints its finished trials "
                                   "recorded, each with the versions its records name. A fingerprint no commit "
                                   "gives was made from sources not committed, under other versions, or before "
                                   "--since.")
    p.add_argument("sources", nargs="+", metavar="FINGERPRINT|SWEEP_DIR")
    for package in ("torch", "triton"):
        p.add_argument(f"--{package}", default=installed_version(package),
                       help=f"the {package} version a fingerprint was made with, as importlib.metadata gives it, "
                            "where no record names it (default: the installed one)")
    p.add_argument("--since", help="only commits from this date on (any date git reads, e.g. 2026-12-01)")
    p.add_argument("--repo", type=Path, default=Path("."), help="the repository's root (default: .)")
    p.set_defaults(run=run)


def recorded(sources: list[str], default_versions: str) -> dict[Key, int | None]:
    """(fingerprint, versions, from the flags) -> finished trials that recorded it (None: named on the command
    line), in order; the versions are `default_versions` where no record names them."""
    wanted: dict[Key, int | None] = {}
    for source in sources:
        if Path(source).is_dir():
            if not store.results_dir(Path(source)).is_dir():
                raise ValueError(f"{source} is not a sweep directory (no results/)")
            counts = Counter((r.config["code"], r.config.get("versions") or default_versions,
                              not r.config.get("versions"))
                             for r in store.read_trials(Path(source)) if r.finished and r.config.get("code"))
            if not counts:
                raise ValueError(f"{source}: no finished trial recorded its code")
            for key, n in counts.most_common():
                wanted[key] = (wanted.get(key) or 0) + n
        elif FINGERPRINT.fullmatch(source.lower()):
            wanted.setdefault((source.lower(), default_versions, True), None)
        else:
            raise ValueError(f"not a code fingerprint (16 hex digits) or a sweep directory: {source}")
    return wanted


def run(args: argparse.Namespace) -> int:
    top = subprocess.run(["git", "-C", str(args.repo), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0:
        raise ValueError(f"--repo {args.repo} is not a git repository")
    repo = Path(top.stdout.strip())
    missing = [name for name in PACKAGES if not (repo / name).is_dir()]
    if missing:
        raise ValueError(f"--repo {args.repo} has no {', '.join(missing)} at its top: not deltamup's layout")
    wanted = recorded(args.sources, versions_text(args.torch, args.triton))
    found: dict[Key, list[tuple[int, Commit]]] = {key: [] for key in wanted}  # (age in the log, commit)
    for versions in dict.fromkeys(v for _, v, _ in wanted):
        for age, (commit, fingerprint) in enumerate(committed_fingerprints(repo, versions, since=args.since)):
            for flagged in (False, True):
                if (fingerprint, versions, flagged) in found:
                    found[fingerprint, versions, flagged].append((age, commit))
    print(f"commits whose sources of deltamup.{', .'.join(PACKAGES)} give each fingerprint")
    rows = []
    for (fp, versions, flagged), commits in found.items():
        trials = "" if wanted[fp, versions, flagged] is None else wanted[fp, versions, flagged]
        versions += " (--torch, --triton)" * flagged
        for _, c in commits or [(None, None)]:
            rows.append({"fingerprint": fp, "versions": versions, "trials": trials, "commit": c.sha[:10] if c else
                         "none", "date": c.date if c else "", "subject": c.subject if c else ""})
    print_table(rows)
    newest = {commits[0][1].sha: commits[0] for commits in found.values() if commits}  # each code's newest commit
    ordered = [c for _, c in sorted(newest.values(), key=lambda ac: -ac[0])]  # oldest first
    for a, b in zip(ordered, ordered[1:]):
        print(f"\ngit diff --stat {a.sha[:10]} {b.sha[:10]} -- {' '.join(PACKAGES)}")
        print(subprocess.run(["git", "-C", str(repo), "diff", "--stat", a.sha, b.sha, "--", *PACKAGES],
                             capture_output=True, text=True, check=True).stdout.rstrip() or "(no change)")
    lost = [fp for (fp, _, _), commits in found.items() if not commits]
    if lost:
        print(f"\nno commit gives {', '.join(lost)}: sources not committed, other versions (--torch, --triton), "
              f"or older than --since")
        return 1
    return 0
