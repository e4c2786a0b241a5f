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

MSG_UNRECOGNIZED = "unrecognized arguments: {arguments}"


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser that refuses the arguments it does not know itself.

    argparse hands a subcommand's unknown arguments back to the top-level parser, which then
    prints its own usage (``interlace [-h] [--version] COMMAND ...``) for a mistake made after
    ``explore``; here the subcommand reports it, with its usage line, as ruff and git do.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(MSG_UNRECOGNIZED.format(arguments=" ".join(extras)))
        return parsed, extras


def _build_parser() -> argparse.ArgumentParser:
    from interlace import __version__

    parser = argparse.ArgumentParser(
        prog="interlace",
        description=(
            "Find, reproduce and prevent concurrency bugs in asyncio and threaded Python."
        ),
    )
    parser.add_argument("--version", action="version", version=f"interlace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    sub.required = True

    from interlace.harness import cli as harness_cli

    harness_cli.add_explore_parser(sub)
    harness_cli.add_replay_parser(sub)
    harness_cli.add_merge_parser(sub)

    from interlace.linters import cli as lint_cli

    lint_cli.add_parser(sub)

    lint_cli.add_server_parser(sub)

    from interlace.fixtures import cli as catalog_cli

    catalog_cli.add_parser(sub)

    from interlace import conformance_cli as conform_cli

    conform_cli.add_parser(sub)
    return parser


def _caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C is behind ``exc``: Python 3.11 wraps an interrupt that lands in a
    class body's ``__set_name__`` (while importing libcst, say) in a RuntimeError."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _crash_report(exc: BaseException) -> str:
    """Write the traceback of an internal error to a file and return a message pointing at it."""
    import tempfile
    import traceback

    from interlace import __version__

    text = "".join(traceback.format_exception(exc))
    header = f"interlace {__version__} on Python {sys.version.split()[0]}: {' '.join(sys.argv)}\n"
    try:
        fd, path = tempfile.mkstemp(prefix="interlace-crash-", suffix=".txt")
        with open(fd, "w", encoding="utf-8") as file:
            file.write(header + text)
    except OSError:
        where = "it could not be saved; the traceback follows:\n" + text
    else:
        where = f"the traceback is in {path}"
    summary = f"{type(exc).__name__}: {exc}".strip()
    return (
        f"interlace: internal error: {summary}\n"
        f"This is a bug in interlace, not in your code; please report it with the command line "
        f"and {where}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interlace`` command line and return its exit code.

    Ctrl-C exits 130 with one line on stderr; an unexpected exception is an internal error:
    exit 2, a short message, and the traceback saved to a file.
    """
    try:
        parser = _build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
            return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
        return int(args.run(args))
    except KeyboardInterrupt:
        print("interlace: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if _caused_by_interrupt(exc):
            print("interlace: interrupted", file=sys.stderr)
            return 130
        print(_crash_report(exc), file=sys.stderr)
        return EXIT_ERROR
