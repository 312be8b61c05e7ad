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
FLAGGED = " (--torch, --triton)"  # marks versions taken from the flags, where no record names them


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


def recorded(sources: list[str], default_versions: str) -> dict[tuple[str, str], int | None]:
    """(fingerprint, versions) -> finished trials that recorded it (None: named on the command line), in order;
    versions `default_versions` + FLAGGED where no record names them."""
    wanted: dict[tuple[str, str], int | None] = {}
    for source in sources:
        if Path(source).is_dir():
            if not store.results_dir(Path(source)).is_dir():
                raise ValueError(f"{source} is not a sweep directory (no results/)")
            counts = Counter((r.config["code"], r.config.get("versions") or default_versions + FLAGGED)
                             for r in store.read_trials(Path(source)) if r.finished and r.config.get("code"))
            if not counts:
                raise ValueError(f"{source}: no finished trial recorded its code")
            for key, n in counts.most_common():
                wanted[key] = (wanted.get(key) or 0) + n
        elif FINGERPRINT.fullmatch(source.lower()):
            wanted.setdefault((source.lower(), default_versions + FLAGGED), None)
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
    found: dict[tuple[str, str], list[tuple[int, Commit]]] = {key: [] for key in wanted}  # (age in the log, commit)
    for versions in dict.fromkeys(v for _, v in wanted):
        for age, (commit, fingerprint) in enumerate(committed_fingerprints(repo, versions.removesuffix(FLAGGED),
                                                                           since=args.since)):
            if (fingerprint, versions) in found:
                found[fingerprint, versions].append((age, commit))
    print(f"commits whose sources of deltamup.{', .'.join(PACKAGES)} give each fingerprint")
    rows = []
    for (fp, versions), commits in found.items():
        trials = "" if wanted[fp, versions] is None else wanted[fp, versions]
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
    lost = [fp for (fp, _), commits in found.items() if not commits]
    if lost:
        print(f"\nno commit gives {', '.join(lost)}: sources not committed, other versions (--torch, --triton), "
              f"or older than --since")
        return 1
    return 0
