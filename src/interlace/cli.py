"""The ``interlace`` command: a thin layer over the public API.

``main(argv) -> int``; findings and results go to stdout, progress, summaries and errors to
stderr. Exit codes: 0 clean, 1 findings (a failing schedule, lint findings), 2 usage,
configuration or internal error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ("main",)

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


def _build_parser() -> argparse.ArgumentParser:
    from interlace import __version__

    parser = argparse.ArgumentParser(
        prog="interlace",
        description=(
            "Find, reproduce and prevent concurrency bugs in asyncio and threaded Python."
        ),
    )
    parser.add_argument("--version", action="version", version=f"interlace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    from interlace.harness import cli as harness_cli

    harness_cli.add_explore_parser(sub)
    harness_cli.add_replay_parser(sub)

    from interlace.linters import cli as lint_cli

    lint_cli.add_parser(sub)

    from interlace.fixtures import cli as catalog_cli

    catalog_cli.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interlace`` command line and return its exit code."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    run = args.run
    try:
        return int(run(args))
    except KeyboardInterrupt:
        print("interlace: interrupted", file=sys.stderr)
        return 130
