"""`python -m sweeps SPEC [options]`: the sweep command on its own, for machines that lack what the rest of the
`deltamup` CLI imports (the GPU machine has no polars)."""
from __future__ import annotations

import argparse
import sys

from .cli import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweeps")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sweep", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.run(args) or 0)
    except ValueError as e:  # bad input: one line, exit code 2 (as in scaling.cli)
        print(f"deltamup sweep: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
