"""`deltamup quickstart`: the whole workflow on the embedded sample, CPU-sized (a few minutes on 2 cores).

coordinate check (GDN-µP, AdamW) → learning-rate sweep (sweeps/specs/quickstart.yaml: SP vs GDN-µP) → report →
verdict → export of the tuned hyperparameters for a model 8× wider than the widest swept.

Run again, it resumes (finished trials and the coordinate check are kept; `--resume` says so explicitly);
`--fresh` deletes what an earlier quick-start wrote in OUT and starts over.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from deltamup.console import writable_dir
from deltamup.sweeps import store
from deltamup.sweeps.spec import SPECS_DIR

SPEC = SPECS_DIR / "quickstart.yaml"
STUDY = "studies/gdn-adamw-8l/"  # the GPU study that measures the effect the quick-start's budget cannot
SHOWN = {"sp": "drifts", "gdn-mup": "transfers"}  # the verdicts that would show the effect at the quick-start's budget


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quickstart", help="coord check → sweep → report → export on the embedded sample (CPU)")
    p.add_argument("--out", default="runs/quickstart", help="directory for everything (default runs/quickstart)")
    p.add_argument("--export-width", type=int, default=1024, help="width to export tuned hyperparameters for")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="keep what an earlier quick-start in OUT finished and run the rest (the default)")
    again.add_argument("--fresh", action="store_true",
                       help="delete what an earlier quick-start wrote in OUT and start over")
    p.set_defaults(run=run)


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def outputs(out: Path) -> dict[str, Path]:
    return {"coord-check": out / "coord-check", "sweep": out / "sweep", "export": out / "train.yaml"}


def prepare(out: Path, fresh: bool) -> str:
    """What this run does with OUT: 'new' (nothing there yet), 'resume' (an earlier quick-start's results are kept)
    or 'fresh' (they were deleted). Refuses, before deleting anything, an OUT whose sweep/ or coord-check/ holds
    something a quick-start did not write."""
    paths = outputs(out)
    foreign = [p for p, mark in ((paths["sweep"], "spec.yaml"), (paths["coord-check"], "coords.parquet"))
               if p.is_dir() and any(p.iterdir()) and not (p / mark).is_file()]
    if foreign:
        raise ValueError(f"{foreign[0]} exists and was not written by a quick-start: pass another --out")
    earlier = store.read_spec(paths["sweep"]) is not None or (paths["coord-check"] / "coords.parquet").is_file()
    if not earlier:
        return "new"
    if not fresh:
        return "resume"
    for path in paths.values():
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return "fresh"


def verdict_lines(analysis) -> list[str]:
    """The quick-start's closing words from its sweep's Analysis: each verdict with its intervals, and whether this
    budget shows the effect or only the machinery."""
    from deltamup.reports.interpretation import budget_text, verdict_line

    t = analysis.transfer
    lines = [f"verdict on {analysis.metric}, 90% intervals ({budget_text(analysis)}):"]
    lines += [f"  {verdict_line(r)}" for r in t.sort("parametrization").iter_rows(named=True)]
    found = dict(zip(t["parametrization"], t["verdict"]))
    if all(found.get(p) == v for p, v in SHOWN.items()):
        lines.append("At this budget the quick-start shows the effect: SP's optimal LR drifts with width and "
                     "GDN-µP's transfers.")
        return lines
    shown = [f"{p} {v}" for p, v in SHOWN.items() if found.get(p) == v]
    missing = [f"{p} is {found.get(p, 'missing')} ({v} would show it)" for p, v in SHOWN.items() if found.get(p) != v]
    lines.append(f"This CPU budget cannot show the effect: {'; '.join(missing)}"
                 + (f", while {' and '.join(shown)} as expected" if shown else "") + ". It shows the machinery "
                 f"(sweep, seeds, intervals, verdicts, export). The GPU study that measures the effect: {STUDY} (its "
                 "README has the commands).")
    return lines


def run(args: argparse.Namespace) -> int:
    from deltamup.reports.analysis import analyze  # polars: only once the command runs

    main = args.dispatch
    if args.export_width < 1:
        raise ValueError(f"--export-width must be positive, got {args.export_width}")
    if not SPEC.is_file():
        raise ValueError(f"the quick-start spec is missing: {SPEC}")
    out = writable_dir(args.out)
    paths = outputs(out)
    mode = prepare(out, args.fresh)
    if mode == "resume":
        print(f"{out} holds an earlier quick-start: resuming (finished trials and the coordinate check are kept; "
              f"--fresh starts over)")
    elif mode == "fresh":
        print(f"{out}: deleted the earlier quick-start's results, starting over")
    step("1/5 coordinate check: GDN-µP, AdamW, widths 128…1024")
    if mode == "resume" and (paths["coord-check"] / "slopes.csv").is_file():
        print(f"kept from the earlier run: {paths['coord-check']} (--fresh measures it again)")
    else:
        main(["coord-check", "--model", "gdn", "-p", "gdn-mup", "--optimizer", "adamw", "--out",
              str(paths["coord-check"])])
    step("2/5 learning-rate sweep: SP vs GDN-µP (sweeps/specs/quickstart.yaml)")
    code = main(["sweep", str(SPEC), "--out", str(paths["sweep"]), "--resume"])
    if code:
        return code
    step("3/5 report")
    code = main(["report", str(paths["sweep"]), "--coord-check", str(paths["coord-check"])])
    if code:
        return code
    step("4/5 verdict")
    analysis = analyze(paths["sweep"])
    print("\n".join(verdict_lines(analysis)))
    step(f"5/5 export GDN-µP's tuned hyperparameters for width {args.export_width}")
    found = dict(zip(analysis.transfer["parametrization"], analysis.transfer["verdict"]))
    export = ["export", str(paths["sweep"]), "-p", "gdn-mup", "--optimizer", "adamw", "--width",
              str(args.export_width), "--out", str(paths["export"]), "--allow-bound"]
    if found.get("gdn-mup") != "transfers":
        print(f"GDN-µP's verdict here is {found.get('gdn-mup', 'missing')}, so its LR is not shown to transfer: "
              "exporting with --allow-unverified to show the step; the file carries the warning.")
        export.append("--allow-unverified")
    code = main(export)
    print(f"\nquick-start done: {paths['coord-check']}/coords.png, {paths['sweep']}/report/index.html, "
          f"{paths['export']}")
    return code
