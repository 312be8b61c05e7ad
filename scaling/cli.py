"""The `deltamup` command line (also `python -m scaling`).

Each subcommand lives in its own module with `register(subparsers)`; bad input exits with one line and code 2
before any work starts.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = ("scaling.commands.describe", "scaling.commands.coord_check", "scaling.commands.quickstart")
OPTIONAL_COMMAND_MODULES = ("sweeps.cli", "reports.cli", "scaling.data.cli", "scaling.tasks.cli")


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deltamup", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for name in OPTIONAL_COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and name.startswith(e.name):
                continue  # that part of deltamup is not installed in this checkout
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (UsageError, ValueError) as e:
        print(f"deltamup {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
