"""The `deltamup` command line (also `python -m deltamup`): the top layer, nothing imports it.

Each subcommand lives in its own module with `register(subparsers)`; a module imports what is heavy (Ray, polars,
matplotlib) inside the function that runs it, so `deltamup sweep` works where polars is absent. Bad input exits with
one line and code 2 before any work starts.
"""
from __future__ import annotations

import argparse
import os
import sys

from deltamup.cli import code, coord_check, data, describe, kernels, quickstart, report, sweep, tasks

COMMANDS = (describe, coord_check, quickstart, sweep, report, data, tasks, kernels, code)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deltamup", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command line; returns the exit code (2: bad input, 1: a failed write or read; either reported as
    one line; 141, silently, where the reader of its output closed the pipe)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.dispatch = main  # commands that chain other commands (quickstart) call back through this
    try:
        code = int(args.run(args) or 0)
        sys.stdout.flush()  # a reader that closed the pipe shows here, not in the flush at exit
        return code
    except ValueError as e:
        print(f"deltamup {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader stopped reading (`| head`): stop quietly, as a process SIGPIPE ends would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 128 + 13
    except OSError as e:  # the machine, not the input (a full disk, a folder gone): one line too, exit 1
        print(f"deltamup {args.command}: error: {e}", file=sys.stderr)
        return 1
