"""Argument helpers shared by subcommands: model options and checked parsers."""
from __future__ import annotations

import argparse

from deltamup import parametrizations
from deltamup.models import KINDS, ModelConfig


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
