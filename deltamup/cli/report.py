"""`deltamup report` (optima, figures, one HTML page), `deltamup overview` (several studies side by side) and
`deltamup export` (tuned hyperparameters for a width)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deltamup import parametrizations
from deltamup.console import print_table, writable_dir
from deltamup.parametrizations.export import FORMATS, fla_note, write_export
from deltamup.parametrizations.hparams import label as hparams_label


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="optimum LR per width, transfer metrics, figures and an HTML page")
    p.add_argument("sweep_dir", metavar="SWEEP_DIR")
    p.add_argument("--out", help="output directory (default SWEEP_DIR/report)")
    p.add_argument("--coord-check", action="append", default=[], metavar="DIR",
                   help="a coord-check output directory to include (repeatable; ones inside SWEEP_DIR are found)")
    p.add_argument("--widths", type=width_list, default=None, metavar="W,W,…",
                   help="analyse only these of the sweep's widths (e.g. the ones every seed has run)")
    p.set_defaults(run=run_report)

    o = sub.add_parser("overview", help="several studies' LR spreads and costs side by side, from their reports")
    o.add_argument("report_dirs", nargs="+", metavar="REPORT_DIR", help="folders written by deltamup report")
    o.add_argument("--out", help="also write the Markdown here")
    o.set_defaults(run=run_overview)

    e = sub.add_parser("export", help="write a sweep's tuned hyperparameters for a target width")
    e.add_argument("sweep_dir", metavar="SWEEP_DIR")
    e.add_argument("--parametrization", "-p", required=True)
    e.add_argument("--optimizer", required=True, help="adamw | sgd")
    e.add_argument("--width", type=int, required=True, help="the target width")
    e.add_argument("--out", required=True, help="file to write")
    e.add_argument("--format", choices=FORMATS, default=None,
                   help="yaml | json | fla (fla: a config.json for fla's GatedDeltaNet/GatedDeltaProduct); "
                        "default: json for a .json file, else yaml")
    e.add_argument("--base-width", type=int, default=None,
                   help="the sweep width whose optimum LR is transferred (default: the smallest with an optimum)")
    e.add_argument("--allow-bound", action="store_true", help="export an optimum on the LR grid's edge anyway")
    e.add_argument("--allow-unverified", action="store_true",
                   help="export even when the sweep's verdict for this parametrization is not 'transfers' (the file "
                        "and the console then say so)")
    e.add_argument("--from-search", action="store_true",
                   help="the LR and hparams (optuna.hparams) of the Optuna search's best trial at the base width, "
                        "instead of the grid's fitted optimum")
    e.set_defaults(run=run_export)


def width_list(text: str) -> list[int]:
    """"256,1024" → [256, 1024]: distinct positive integers (argparse turns a ValueError into one line, exit 2)."""
    try:
        widths = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected widths like 256,1024, got {text!r}") from None
    if not widths or any(w < 1 for w in widths) or len(set(widths)) != len(widths):
        raise argparse.ArgumentTypeError(f"expected distinct positive widths like 256,1024, got {text!r}")
    return widths


def _progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def print_verdicts(a) -> None:
    """The optima with their intervals, the verdict per parametrization and the generated paragraph (an Analysis)."""
    from deltamup.reports.interpretation import interpretation, interval, lr_interval

    rows = [{"parametrization": r["parametrization"], "optimizer": r["optimizer"], "width": r["width"],
             "best_lr": _fmt(r["best_lr"]), "90% interval": lr_interval(r["best_lr_lo"], r["best_lr_hi"], 4) or "–",
             "from": r["interval_method"] or "–", "best_lr_grid": _fmt(r["best_lr_grid"]),
             "best_loss": _fmt(r["best_loss"]), "bound": _fmt(r["bound"]), "loss_lost": _fmt(r["loss_lost"])}
            for r in a.optima.iter_rows(named=True)]
    if not rows:
        print("no finished trials yet")
        return
    print(f"optimum per width on {a.metric} (best_lr: fitted vertex; best_lr_grid: grid argmin)")
    print_table(rows)
    print()
    print(f"transfer on {a.metric} (slope: octaves of optimum per octave of width; 90% intervals)")
    print_table([{"parametrization": t["parametrization"], "optimizer": t["optimizer"], "verdict": t["verdict"],
                  "slope": interval(t["slope"], t["slope_lo"], t["slope_hi"]),
                  "spread": interval(t["spread_octaves"], t["spread_lo"], t["spread_hi"], signed=False),
                  "seeds": f"{t['n_seeds']} ({t['interval_method']})", "widths": t["widths"],
                  "wider_better_at_base_lr": _fmt(t["wider_better_at_base_lr"])}
                 for t in a.transfer.iter_rows(named=True)])
    print()
    print(interpretation(a))
    print()


def run_report(args: argparse.Namespace) -> int:
    import polars as pl

    from deltamup.reports.analysis import load_sweep, mixes, restrict
    from deltamup.reports.report import build_report

    sweep = load_sweep(args.sweep_dir)  # bad input: one line before any work
    if args.widths:
        restrict(sweep, args.widths)
    out = writable_dir(args.out or str(Path(args.sweep_dir) / "report"))
    report = build_report(args.sweep_dir, out, args.coord_check, progress=_progress, widths=args.widths)
    a = report.analysis
    print_verdicts(a)
    if not a.missing.is_empty():
        print(f"incomplete: {len(a.missing)} of {a.grid_size} grid trials have no result yet "
              f"(listed in {report.out}/missing.csv)")
    if a.sweep.skipped:
        print(f"skipped {len(a.sweep.skipped)} damaged result file(s) (in {args.sweep_dir}/results/quarantine/; "
              f"`deltamup sweep {args.sweep_dir} --resume` reruns their trials)")
    for line in mixes(a.sweep.trials):
        print(line)
    bounds = a.optima.filter(pl.col("bound"))
    if not bounds.is_empty():
        print(f"{len(bounds)} optima lie on the LR grid's edge (bounds, not values): extend the grid")
    print(f"report: {report.page}")
    return 0


def run_overview(args: argparse.Namespace) -> int:
    from deltamup.reports.overview import load, overview_markdown

    for d in args.report_dirs:
        load(d)  # bad input: one line before any work
    text = overview_markdown(args.report_dirs)
    if args.out:
        Path(args.out).write_text(text)
    print(text, end="")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from deltamup.reports.analysis import analyze, load_sweep
    from deltamup.reports.tuned import export_from_sweep

    fmt = args.format or ("json" if args.out.endswith(".json") else "yaml")
    parametrizations.get(args.parametrization.partition("[")[0])  # "gdn-mup[output_mult=4]": a sweep's variant
    parametrizations.check_optimizer(args.optimizer)
    for flag, value in (("--width", args.width), ("--base-width", args.base_width)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be positive, got {value}")
    load_sweep(args.sweep_dir)
    out = Path(args.out)
    writable_dir(str(out.parent) if str(out.parent) else ".")
    analysis = analyze(args.sweep_dir)
    export = export_from_sweep(analysis, args.parametrization, args.optimizer, args.width, args.base_width,
                               args.allow_bound, args.allow_unverified, args.from_search)
    write_export(export, out, fmt)
    warning = export.provenance.get("warning")
    if warning:
        rule = "!" * 100
        print(f"{rule}\nWARNING (--allow-unverified): {warning}.\nThe file's provenance carries this warning.\n{rule}",
              file=sys.stderr, flush=True)
    hidden = export.groups["hidden"]
    print(f"{export.parametrization} · {export.optimizer}: LR {export.lr:.4g} tuned at width {export.tuned_width} "
          f"→ width {export.width} (m = {export.width_mult:g}); hidden LR {hidden.lr:.4g}, init std "
          f"{_fmt(hidden.init_std)}" + (f"; tuned {hparams_label(export.hparams)}" if export.hparams else ""))
    print(f"export ({fmt}): {out}")
    if fmt == "fla":
        print(f"note: {fla_note(export)}")
    return 0
