"""`deltamup code`: the commits whose sources give a trial record's `code` fingerprint; what changed between them."""
from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from deltamup.console import print_table
from deltamup.scaling.code import PACKAGES, Commit, committed_fingerprints, installed_version, versions_text

FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("code", help="find the commits that give recorded code fingerprints; the diff between them",
                       description="Each FINGERPRINT (a trial record's `code`, 16 hex digits) with the commits of "
                                   "--repo whose deltamup.kernels, .models, .parametrizations and .scaling sources "
                                   "give it under the torch and Triton versions the trials ran with; with two or "
                                   "more found, `git diff --stat` of those sources from each to the next. A "
                                   "fingerprint no commit gives was made from sources not committed, under other "
                                   "versions, or before --since.")
    p.add_argument("fingerprints", nargs="+", metavar="FINGERPRINT")
    for package in ("torch", "triton"):
        p.add_argument(f"--{package}", default=installed_version(package),
                       help=f"the {package} version the trials ran with, as importlib.metadata gives it (default: "
                            "the installed one)")
    p.add_argument("--since", help="only commits from this date on (any date git reads, e.g. 2026-12-01)")
    p.add_argument("--repo", type=Path, default=Path("."), help="the repository's root (default: .)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    wanted = [f.lower() for f in args.fingerprints]
    bad = [f for f in wanted if not FINGERPRINT.fullmatch(f)]
    if bad:
        raise ValueError(f"not a code fingerprint (16 hex digits): {', '.join(bad)}")
    top = subprocess.run(["git", "-C", str(args.repo), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0:
        raise ValueError(f"--repo {args.repo} is not a git repository")
    repo = Path(top.stdout.strip())
    missing = [name for name in PACKAGES if not (repo / name).is_dir()]
    if missing:
        raise ValueError(f"--repo {args.repo} has no {', '.join(missing)} at its top: not deltamup's layout")
    versions = versions_text(args.torch, args.triton)
    found: dict[str, list[Commit]] = {f: [] for f in wanted}
    for commit, fingerprint in committed_fingerprints(repo, versions, since=args.since):
        if fingerprint in found:
            found[fingerprint].append(commit)
    print(f"sources of deltamup.{', .'.join(PACKAGES)}; {versions}")
    print_table([{"fingerprint": f, "commit": c.sha[:10] if c else "none", "date": c.date if c else "",
                  "subject": c.subject if c else ""} for f, commits in found.items() for c in commits or [None]])
    newest = [commits[0] for commits in found.values() if commits]  # git log lists the newest first
    for a, b in zip(newest, newest[1:]):
        print(f"\ngit diff --stat {a.sha[:10]} {b.sha[:10]} -- {' '.join(PACKAGES)}")
        print(subprocess.run(["git", "-C", str(repo), "diff", "--stat", a.sha, b.sha, "--", *PACKAGES],
                             capture_output=True, text=True, check=True).stdout.rstrip() or "(no change)")
    lost = [f for f, commits in found.items() if not commits]
    if lost:
        print(f"\nno commit gives {', '.join(lost)}: sources not committed, other versions (--torch, --triton), "
              f"or older than --since")
        return 1
    return 0
