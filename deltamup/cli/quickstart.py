"""`deltamup quickstart`: the whole workflow on the embedded sample, CPU-sized (a few minutes on 2 cores).

coordinate check (GDN-µP, AdamW) → learning-rate sweep (sweeps/specs/quickstart.yaml: SP vs GDN-µP) → report →
export of the tuned hyperparameters for a model 8× wider than the widest swept.
"""
from __future__ import annotations

import argparse

from deltamup.console import writable_dir
from deltamup.sweeps.spec import SPECS_DIR

SPEC = SPECS_DIR / "quickstart.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quickstart", help="coord check → sweep → report → export on the embedded sample (CPU)")
    p.add_argument("--out", default="runs/quickstart", help="directory for everything (default runs/quickstart)")
    p.add_argument("--export-width", type=int, default=1024, help="width to export tuned hyperparameters for")
    p.set_defaults(run=run)


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run(args: argparse.Namespace) -> int:
    main = args.dispatch
    out = writable_dir(args.out)
    if not SPEC.is_file():
        raise ValueError(f"the quick-start spec is missing: {SPEC}")
    step("1/4 coordinate check: GDN-µP, AdamW, widths 128…1024")
    main(["coord-check", "--model", "gdn", "-p", "gdn-mup", "--optimizer", "adamw", "--out", str(out / "coord-check")])
    step("2/4 learning-rate sweep: SP vs GDN-µP (sweeps/specs/quickstart.yaml)")
    code = main(["sweep", str(SPEC), "--out", str(out / "sweep")])
    if code:
        return code
    step("3/4 report")
    code = main(["report", str(out / "sweep"), "--coord-check", str(out / "coord-check")])
    if code:
        return code
    step(f"4/4 export GDN-µP's tuned hyperparameters for width {args.export_width}")
    code = main(["export", str(out / "sweep"), "-p", "gdn-mup", "--optimizer", "adamw", "--width",
                 str(args.export_width), "--out", str(out / "train.yaml"), "--allow-bound"])
    print(f"\nquick-start done: {out}/coord-check/coords.png, {out}/sweep/report/index.html, {out}/train.yaml")
    return code
