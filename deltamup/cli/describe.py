"""`deltamup describe`: every parameter class's rules at a width, next to the base width."""
from __future__ import annotations

import argparse

from deltamup import parametrizations
from deltamup.cli.common import add_parametrization_args
from deltamup.console import print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("describe", help="print a parametrization's rules at a width, or --list them all")
    add_parametrization_args(p)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--base-width", type=int, default=256)
    p.add_argument("--list", action="store_true", help="every parametrization's name and summary, then exit")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        print_table([{"parametrization": name, "what it is": parametrizations.get(name).summary}
                     for name in parametrizations.names()])
        return 0
    p = parametrizations.get(args.parametrization)
    parametrizations.check_optimizer(args.optimizer)
    if args.width < 1 or args.base_width < 1:
        raise ValueError("--width and --base-width must be positive")
    print(f"{p.name} · {args.optimizer} · width {args.width} (m = {args.width / args.base_width:g}) vs base width "
          f"{args.base_width}\n{p.summary}\n")
    print_table(parametrizations.describe_rows(p, args.optimizer, args.width, args.base_width))
    print()
    print_table(parametrizations.describe_multipliers(p, args.optimizer, args.width, args.base_width))
    return 0
