"""`deltamup coord-check`: train each width a few steps, fit size-vs-width slopes, compare with the theory.

The model is deltamup's (--model gdn, …) or yours: --model-factory pkg.module:make_model names a function of the
width that returns the model (tokens -> logits), parametrized by deltamup.parametrize against make_model(--base-width).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from deltamup.cli.common import (
    add_model_args,
    add_parametrization_args,
    check_parametrization_args,
    int_list,
    model_config,
)
from deltamup.console import writable_dir
from deltamup.scaling import coord_check


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("coord-check", help="coordinate check: probe sizes against width")
    add_model_args(p, depth=2)
    add_parametrization_args(p)
    p.add_argument("--model-factory", metavar="MODULE:FUNCTION",
                   help="check your own model: a function of the width returning it (tokens [B, T] -> logits); "
                        "--base-width is its base width, --model names its architecture for the documented "
                        "deviations")
    p.add_argument("--roles", default=None, metavar="MAP",
                   help="with --model-factory: a built-in role map (fla | qwen3-next) or MODULE:NAME of a RoleMap "
                        "(default: roles from shapes and structure)")
    p.add_argument("--widths", type=int_list, default=(128, 256, 512, 1024))
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=None,
                   help=f"base learning rate (default {coord_check.DEFAULT_LR})")
    p.add_argument("--batch-size", type=int, default=coord_check.CoordCheck.batch_size)
    p.add_argument("--seq-len", type=int, default=coord_check.CoordCheck.seq_len)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", metavar="DIR", default=None,
                   help="a prepared corpus (`deltamup data prepare --out DIR`) to draw the batches from (default: "
                        "the embedded 343 KB text sample, which a long check at a large batch reads many times over)")
    g = p.add_argument_group("schedule (default: the short check's constant LR, no clipping; a sweep's for a long one)")
    g.add_argument("--schedule", default="constant", help="constant | cosine (warm-up, then cosine decay)")
    g.add_argument("--warmup-steps", type=int, default=0)
    g.add_argument("--min-lr-ratio", type=float, default=0.0, help="cosine decays to this fraction of the LR")
    g.add_argument("--grad-clip", type=float, default=None, help="clip the global gradient norm (default: none)")
    g.add_argument("--weight-decay", type=float, default=0.0, help="base weight decay")
    g.add_argument("--adam-eps", type=float, default=1e-8, help="AdamW's base ε (the parametrization scales it)")
    g.add_argument("--every", type=int, default=1,
                   help="record the probes every N steps (and at t = 0 and the last step)")
    p.add_argument("--device", default="auto", help="auto (cuda when available) | cpu | cuda | cuda:N")
    p.add_argument("--fp32", action="store_true", help="no bf16 autocast on CUDA")
    p.add_argument("--kernel-backend", default="auto", help="auto | triton | torch | recurrent")
    p.add_argument("--matrix-probes", action="store_true",
                   help="also record, for every weight matrix, the RMS of (W_t − W_0) x_t (dWx.<module>: the part "
                        "of its output's change its own updates make), of W_t − W_0 (dW.), of x_t (in.) and their "
                        "alignment (align.: 1 aligned, ~fan_in^-1/2 unrelated) and the stable rank of W_t − W_0 "
                        "(srank.); in slopes.csv, not judged")
    p.add_argument("--out", required=True, help="directory for coords.parquet, slopes.csv, check.json, coords.png")
    p.add_argument("--raw", action="store_true",
                   help="only measure and write coords.parquet (pyarrow; for machines without polars)")
    p.add_argument("--from-coords", metavar="PARQUET",
                   help="analyse an existing coords.parquet (e.g. measured on a GPU) instead of training")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a probe's slope is off its band and no documented deviation covers it")
    p.set_defaults(run=run)


def load_object(spec: str, what: str):
    """`pkg.module:name` -> the object; ValueError in one line otherwise."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"{what} {spec!r}: expected MODULE:NAME, e.g. mypkg.models:make_model")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise ValueError(f"{what} {spec!r}: cannot import {module} ({e})") from None
    except AttributeError:
        raise ValueError(f"{what} {spec!r}: {module} has no {name}") from None


def make_check(args: argparse.Namespace) -> coord_check.CoordCheck:
    common = dict(parametrization=args.parametrization, optimizer=args.optimizer, widths=args.widths,
                  steps=args.steps, lr=args.lr, batch_size=args.batch_size, seq_len=args.seq_len, seed=args.seed,
                  device=args.device, bf16=not args.fp32, schedule=args.schedule, warmup_steps=args.warmup_steps,
                  min_lr_ratio=args.min_lr_ratio, grad_clip=args.grad_clip, weight_decay=args.weight_decay,
                  eps=args.adam_eps, every=args.every, data=args.data, matrix_probes=args.matrix_probes)
    if not args.model_factory:
        if args.roles:
            raise ValueError("--roles goes with --model-factory")
        return coord_check.CoordCheck(model=model_config(args, args.widths[0]), **common)
    factory = load_object(args.model_factory, "--model-factory")
    if not callable(factory):
        raise ValueError(f"--model-factory {args.model_factory}: not a function of the width")
    roles = args.roles
    if roles and ":" in roles:
        roles = load_object(roles, "--roles")
    return coord_check.CoordCheck(model=None, model_factory=factory, base_width=args.base_width, roles=roles,
                                  kind=args.model, name=args.model_factory, **common)


def run(args: argparse.Namespace) -> int:
    check_parametrization_args(args)
    check = make_check(args)
    _ = check.torch_device  # validates --device before any work
    out = writable_dir(args.out)
    if args.from_coords and not Path(args.from_coords).is_file():
        raise ValueError(f"--from-coords: no such file {args.from_coords}")
    progress = lambda msg: print(f"  {msg}", file=sys.stderr, flush=True)  # noqa: E731
    if not args.from_coords and check.sample_repeats() > 1:
        print(f"note: {check.steps} steps of {check.batch_size} × {check.seq_len} tokens read the embedded sample "
              f"{check.sample_repeats():.1f} times over: late steps fit a memorised text; --data DIR draws from a "
              "prepared corpus", file=sys.stderr, flush=True)
    provenance = coord_check.provenance_of(Path(args.from_coords)) if args.from_coords else check.provenance()
    keep = lambda rows: coord_check.write_rows(rows, out / "coords.parquet", provenance)  # noqa: E731  (each width)
    if args.raw:
        coord_check.collect(check, progress, keep)
        print(f"wrote {out}/coords.parquet; analyse it with --from-coords")
        return 0
    import polars as pl

    from deltamup.reports import coord  # matplotlib and seaborn: only where the figure is drawn

    if args.from_coords:
        try:
            coords = pl.read_parquet(args.from_coords)
        except Exception as e:  # polars raises several kinds for a file that is not parquet
            problem = f"--from-coords: {args.from_coords} is not a coords.parquet ({type(e).__name__})"
            raise ValueError(problem) from None
    else:
        coords = coord_check.run(check, progress, keep)
    slopes = coord_check.fit_slopes(coords, args.parametrization, args.optimizer, check.model_kind)
    coord_check.write(check, coords, slopes, out,
                      measured_on=(f"measured elsewhere ({Path(args.from_coords).parent.name})"
                                   if args.from_coords else None), provenance=provenance)
    result = coord.load(out)
    coord.figure(result, out, "coords")
    matrix = slopes["probe"].str.contains(coord_check.MATRIX_PROBE_PATTERN)
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        print(slopes.filter(~matrix).pivot(on="step", index="probe", values="slope").sort("probe"))
    if matrix.any():
        print(f"(and the slopes of {slopes.filter(matrix)['probe'].n_unique()} per-matrix probes, not judged: "
              f"{out}/slopes.csv)")
    new, documented = result.new, result.documented
    print(f"{'PASS' if new.is_empty() else 'FAIL'}: {result.agree}/{result.judged} predicted slopes within their "
          f"bands, {len(documented)} documented deviations, {len(new)} new (slope of the size at t=0, of the change "
          f"x_t − x_0 after); wrote {out}/coords.parquet, slopes.csv, check.json, coords.png")
    for row in documented.iter_rows(named=True):
        print(f"  documented: {row['probe']} t={row['step']} slope {row['slope']:+.3f}, expected {row['expected']}: "
              f"{row['note']}")
    for row in new.iter_rows(named=True):
        print(f"  NEW: {row['probe']} t={row['step']} slope {row['slope']:+.3f}, expected {row['expected']}")
    return 1 if (args.check and not new.is_empty()) else 0
