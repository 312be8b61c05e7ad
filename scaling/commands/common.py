"""Helpers shared by subcommands: model options, checked parsers, and plain-text output (tables, durations)."""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import parametrizations
from models import KINDS, ModelConfig


def int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def add_model_args(p: argparse.ArgumentParser, depth: int = 8) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", default="gdn", choices=KINDS, help="deltanet | gdn | deltaproduct (default gdn)")
    g.add_argument("--householder", type=int, default=2, help="n_h for --model deltaproduct (default 2)")
    g.add_argument("--gated", action=argparse.BooleanOptionalAction, default=None,
                   help="decay gate (default: on for gdn/deltaproduct, off for deltanet)")
    g.add_argument("--neg-eigval", action="store_true", help="β ∈ [0, 2] (negative eigenvalues)")
    g.add_argument("--depth", type=int, default=depth)
    g.add_argument("--heads", type=int, default=6)
    g.add_argument("--base-width", type=int, default=256)
    g.add_argument("--vocab-size", type=int, default=256)
    g.add_argument("--untied", action="store_true", help="untied readout (default: tied embeddings)")


def add_parametrization_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--parametrization", "-p", default="gdn-mup", help=f"one of {', '.join(parametrizations.names())}")
    p.add_argument("--optimizer", default="adamw", help="adamw | sgd")


def check_parametrization_args(args: argparse.Namespace) -> None:
    parametrizations.get(args.parametrization)
    parametrizations.check_optimizer(args.optimizer)


def model_config(args: argparse.Namespace, width: int) -> ModelConfig:
    return ModelConfig(kind=args.model, width=width, depth=args.depth, heads=args.heads,
                       householder=args.householder if args.model == "deltaproduct" else 1, gated=args.gated,
                       allow_neg_eigval=args.neg_eigval, vocab_size=args.vocab_size, base_width=args.base_width,
                       tie_embeddings=not args.untied,
                       kernel_backend=getattr(args, "kernel_backend", "auto"))


def writable_dir(path: str) -> Path:
    """The directory, created if needed; ValueError if it cannot be written."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create output directory {out}: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise ValueError(f"output directory {out} is not writable")
    return out


def print_table(rows: list[dict], columns: list[str] | None = None) -> None:
    """A plain aligned text table."""
    if not rows:
        return
    columns = columns or list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def duration(seconds: float) -> str:
    """'12s', '3m05s' or '1h02m'; '?' for a time that is not finite."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
