"""``interlace explore`` and ``interlace replay``: the harness on the command line.

``interlace explore MODULE:FUNCTION`` runs a zero-argument function under many schedules: an
``async def`` one on the controlled event loop, a plain one with every thread it starts under
control (``--instrument`` widens where its schedule points go); ``interlace replay
MODULE:FUNCTION TOKEN`` re-runs one schedule exactly. The report goes to stdout, the one-line
summary, progress and errors to stderr. Exit codes: 0 no failure,
1 a failing schedule (for ``replay``: the schedule still fails), 2 a usage, configuration or
import error, or a replay that diverged.

``MODULE:FUNCTION`` is resolved the way pytest and uvicorn do it: the module is imported with
the current directory first on ``sys.path``; ``path/to/file.py:FUNCTION`` imports that file as
a top-level module with its directory first on ``sys.path``. ``FUNCTION`` may be dotted
(``Class.method`` for a static or class method).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from interlace._core.result import Exploration, Failure

__all__ = ("add_explore_parser", "add_replay_parser", "main", "run_explore", "run_replay")

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

# User-facing messages, kept together so the tests match against them.
MSG_BAD_SPEC = (
    "{spec!r} is not MODULE:FUNCTION: write the module, a colon and the function, e.g. "
    "'tests.test_bank:test_transfer' or 'tests/test_bank.py:test_transfer'"
)
MSG_NO_MODULE = (
    "cannot import {module!r}: no module named {missing!r} (searched the current directory "
    "{cwd} and sys.path); check the spelling, run from the project root, or give a file path "
    "such as 'path/to/file.py:FUNCTION'"
)
MSG_NO_FILE = "cannot import {path!r}: no such file; check the path (relative to {cwd})"
MSG_IMPORT_RAISED = "importing {module!r} raised {error}:"
MSG_NO_PATH = (
    "--path {path!r} is not a directory (relative to {cwd}); give the directory to import from"
)
MSG_TRY_PATH = (
    "{missing!r} is in {directory!r}, which is not on sys.path: pass --path {directory} (as "
    "pytest's pythonpath setting does in a src-layout project)"
)
MSG_NO_FUNCTION = "module {module!r} has no attribute {name!r}; {available}"
MSG_AVAILABLE = "its functions are: {names}"
MSG_NONE_AVAILABLE = "it defines no functions"
MSG_EXPLORE_FAILED = "found {article} {kind} after {schedules} ({seed_part}, {elapsed:.2f} s)"
MSG_EXPLORE_PASSED = "no failure in {schedules} ({seed_part}{exhausted}, {elapsed:.2f} s)"
MSG_EXHAUSTED = "; explored completely: {space}"
MSG_EXPLORE_OPAQUE = "{summary}; {opaque}"
MSG_REPLAY_FAILED = "the schedule still fails: {kind} ({steps})"
MSG_REPLAY_PASSED = "the schedule no longer fails: {spec} ran to completion under it"
MSG_PROGRESS = "\r{text}\x1b[K"
MSG_HTML_WRITTEN = "HTML report written to {path}"
MSG_HTML_NOT_WRITTEN = "no failure, so no HTML report was written to {path}"
MSG_HTML_NO_DIR = (
    "--html {path!r}: the directory {directory!r} does not exist; create it or give a path "
    "in an existing directory"
)
MSG_HTML_WRITE_FAILED = (
    "cannot write the HTML report to {path!r}: {error}; give --html a path you can write"
)
# Where a value came from, named as the pytest plugin names it (SOURCE_COMMAND_LINE there).
SOURCE_COMMAND_LINE = "the command line"

_TEXT_HELP_EXPLORE = (
    "Run a zero-argument function under many deterministic schedules and report the first "
    "failing schedule, shrunk, with the command that replays it. An async def function runs "
    "on a controlled event loop with a virtual clock; a plain function runs with every thread "
    "it starts under control: one thread at a time, switched at schedule points in your code "
    "(not the standard library or site-packages, unless --instrument says so or they hold "
    "the function's own package) and at every "
    "lock, wait, join and sleep, with sleeps and timeouts on a virtual clock. The report goes "
    "to stdout, a one-line summary to stderr. Exit status: 0 no failure, 1 a failure was "
    "found, 2 a usage or import error."
)
_TEXT_HELP_REPLAY = (
    "Re-run exactly the schedule in TOKEN (printed by 'interlace explore', by the pytest "
    "plugin or by interlace.explore()). Exit status: 0 the schedule no longer fails, 1 it "
    "still fails, 2 a usage or import error, a malformed token, or a replay that diverged "
    "(the code changed, or it depends on the wall clock, real I/O or unseeded randomness)."
)
_TARGET_HELP = (
    "the function to run, async def or plain (threads): MODULE:FUNCTION (imported with the "
    "current directory on sys.path, e.g. tests.test_bank:test_transfer) or "
    "path/to/file.py:FUNCTION"
)
_PATH_HELP = (
    "a directory to put first on sys.path before importing MODULE:FUNCTION, as PYTHONPATH "
    "does (repeat it for several), e.g. src in a src-layout project whose pytest has "
    'pythonpath = ["src"]; the report\'s replay line repeats it'
)
_INSTRUMENT_HELP = (
    "for a plain (threaded) function: modules or paths, comma-separated, whose code also "
    "gets schedule points, e.g. httpx,src/vendored/ (default: code outside the standard "
    "library and site-packages, and the function's own top-level package wherever it is "
    "installed; the summary names installed modules that ran without points). May be "
    "repeated"
)
_STALL_TIMEOUT_HELP = (
    "real seconds one step may run without reaching a schedule point (a task that never "
    "awaits, a thread blocked or busy in a library or C call) before the run is stopped as "
    "stuck, exit status 2 (default {default:g}); raise it for code with a long CPU-bound step"
)
_UNFOLD_HELP = (
    "show every recorded step of the failing schedule on a line of its own (by default four "
    "or more steps in a row that start and stop in library code the program did not call, "
    "and four or more identical steps, read as one line each)"
)
_HTML_HELP = (
    "also write the failure as a self-contained HTML swimlane report to PATH (a lane per "
    "task or thread, the deviations marked, source on click; docs/report.md); nothing is "
    "written when no schedule fails"
)
_FORMAT_HELP = (
    "text (default): the report on stdout; json: one JSON object on stdout with the keys "
    "target, error, failure, schedules, exhausted, space, opaque, uninstrumented, strategy, "
    "seed, elapsed (only "
    "target and error, with exit status 2, when the function cannot be imported or run)"
)


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= {minimum}")
        return value

    parse.__name__ = f"whole number >= {minimum}"
    return parse


def _instrument(values: list[str] | None) -> tuple[str, ...]:
    """The names of every ``--instrument``, checked as the pytest plugin checks its own
    sources (one shared check and message), so both accept and refuse the same values.

    Raises:
        UsageError: a value is not a list of module names or paths, or names one that
            cannot be instrumented.
    """
    from interlace.harness import _instrument as instrument

    names: list[str] = []
    for value in values or ():
        parsed = instrument.split_instrument(value)
        problem = instrument.check_instrument(
            "--instrument",
            value,
            SOURCE_COMMAND_LINE,
            parsed if parsed else None,
            example=instrument.TEXT_MODULES_EXAMPLE,
        )
        if problem is not None:
            raise UsageError(problem)
        names.extend(parsed)
    return tuple(names)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0.0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


_timeout.__name__ = "number of seconds > 0"


def _strategies() -> tuple[str, ...]:
    from interlace._core.strategy import STRATEGIES

    return tuple(STRATEGIES)


MSG_JITTER_FLAG = (
    "--jitter was replaced by --max-stall (the timer-jitter window is now part of the "
    "loop-stall model): write --max-stall {value}"
)


def _shard(text: str) -> tuple[int, int]:
    from interlace.errors import ConfigError
    from interlace.harness.api import check_shard

    try:
        return check_shard(text, "(from --shard)")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _jitter_renamed(value: str) -> float:
    raise argparse.ArgumentTypeError(MSG_JITTER_FLAG.format(value=shlex.quote(value)))


def _add_path_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path", action="append", default=None, metavar="DIR", dest="path", help=_PATH_HELP
    )


def add_explore_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``explore`` subcommand to ``interlace``'s argparse subparsers."""
    from interlace.harness.api import (
        DEFAULT_MAX_SCHEDULES,
        DEFAULT_MAX_STALL,
        DEFAULT_STALL_TIMEOUT,
        DEFAULT_STRATEGY,
    )

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "explore",
        help="run a function (async def, or plain with its threads) under many schedules and "
        "report a failing one",
        description=_TEXT_HELP_EXPLORE,
    )
    parser.add_argument("target", metavar="MODULE:FUNCTION", help=_TARGET_HELP)
    parser.add_argument(
        "--strategy",
        choices=_strategies(),
        default=DEFAULT_STRATEGY,
        help=(
            "how schedules are chosen: auto (default; stock order and the bounded exhaustive "
            "search on one schedule in four, a seeded random walk on the others), random "
            "(seeded random walk), pct (priority-based, "
            "for bugs of small depth), delay (delay-bounded), exhaustive (every schedule "
            "within the deviation bound, reporting when the space is exhausted)"
        ),
    )
    parser.add_argument(
        "--max-schedules",
        type=_whole(1),
        default=DEFAULT_MAX_SCHEDULES,
        metavar="N",
        help=f"the most schedules to run (default {DEFAULT_MAX_SCHEDULES}); shrinking runs "
        "are not counted",
    )
    parser.add_argument(
        "--seed",
        type=_whole(0),
        default=None,
        metavar="N",
        help="makes the exploration repeatable (default: a fresh seed, printed in the "
        "summary so the run can be repeated)",
    )
    parser.add_argument(
        "--max-steps",
        type=_whole(1),
        default=None,
        metavar="N",
        help="steps one schedule may take before it is reported as a hang (default 200000)",
    )
    parser.add_argument(
        "--max-time",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="virtual seconds one schedule may take before it is reported as a hang (default 3600)",
    )
    parser.add_argument(
        "--max-seconds",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="a wall-clock budget for the whole exploration: no schedule starts after it "
        "is spent, but the first (stock order) always runs, and shrinking a failure spends "
        "what is left (default: none, only --max-schedules)",
    )
    parser.add_argument(
        "--stall-timeout",
        type=_timeout,
        default=None,
        metavar="SECONDS",
        help=_STALL_TIMEOUT_HELP.format(default=DEFAULT_STALL_TIMEOUT),
    )
    parser.add_argument(
        "--max-stall",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="seconds the event loop may stall in one schedule, all stalls together (a "
        "blocking call on the loop, a GC pause): the timers due by then fire in one "
        "iteration, and timers due within it of each other may fire out of order "
        f"(default {DEFAULT_MAX_STALL:g}; 0 explores neither)",
    )
    parser.add_argument("--jitter", type=_jitter_renamed, help=argparse.SUPPRESS)
    parser.add_argument(
        "--bound",
        type=_whole(0),
        default=None,
        metavar="N",
        help="deviations from stock order per schedule for the exhaustive search (the "
        "exhaustive strategy, and auto's exhaustive share; default 2)",
    )
    parser.add_argument(
        "--depth",
        type=_whole(1),
        default=None,
        metavar="N",
        help="the bug depth the pct strategy targets (default 3)",
    )
    parser.add_argument(
        "--instrument",
        action="append",
        default=None,
        metavar="NAMES",
        help=_INSTRUMENT_HELP,
    )
    parser.add_argument("--unfold", action="store_true", help=_UNFOLD_HELP)
    _add_path_option(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text", help=_FORMAT_HELP)
    parser.add_argument("--html", metavar="PATH", default=None, help=_HTML_HELP)
    # Scale out (docs/scaling.md).
    parser.add_argument(
        "--workers",
        type=_whole(1),
        default=1,
        metavar="N",
        help="processes that run schedules (default 1); the failure reported is the same "
        "for every N. The function must be importable by MODULE:FUNCTION",
    )
    parser.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="K/N",
        help="run only the K-th of N disjoint parts of the schedule space (one CI job of "
        "N; without --seed every shard uses seed 0); combine them with interlace merge",
    )
    parser.add_argument(
        "--report-dir",
        default=None,
        metavar="DIR",
        help="write the result as JSON in DIR, for interlace merge",
    )
    parser.set_defaults(run=run_explore)
    return parser


def add_merge_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``interlace merge``, which combines the results of an exploration's shards
    (docs/scaling.md)."""
    from interlace.harness import _shards

    return _shards.add_merge_parser(subparsers)


def add_replay_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``replay`` subcommand to ``interlace``'s argparse subparsers."""
    from interlace.harness.api import DEFAULT_STALL_TIMEOUT

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="re-run exactly one schedule from its replay token",
        description=_TEXT_HELP_REPLAY,
    )
    parser.add_argument("target", metavar="MODULE:FUNCTION", help=_TARGET_HELP)
    parser.add_argument(
        "token",
        metavar="TOKEN",
        help="the replay token (il2.…) from a report; the schedule's settings travel in it",
    )
    parser.add_argument(
        "--instrument",
        action="append",
        default=None,
        metavar="NAMES",
        help="the same --instrument the exploration had (the report's replay line repeats "
        "it): it decides where a plain function's schedule points are",
    )
    parser.add_argument(
        "--stall-timeout",
        type=_timeout,
        default=None,
        metavar="SECONDS",
        help=_STALL_TIMEOUT_HELP.format(default=DEFAULT_STALL_TIMEOUT)
        + " (the token does not carry it)",
    )
    parser.add_argument("--unfold", action="store_true", help=_UNFOLD_HELP)
    _add_path_option(parser)
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default): the report on stdout; json: one JSON object on stdout with "
        "the keys target, token, error, failure (error is null unless the exit status is 2)",
    )
    parser.add_argument("--html", metavar="PATH", default=None, help=_HTML_HELP)
    parser.set_defaults(run=run_replay)
    return parser


class UsageError(Exception):
    """A command-line mistake: printed as ``interlace <command>: error: <message>``, exit 2."""


@dataclass(frozen=True)
class Target:
    """A resolved ``MODULE:FUNCTION``.

    Attributes:
        spec: what the user wrote, for messages and the replay line.
        function: the object found.
        api: the target as a Python expression for the report's API replay line.
    """

    spec: str
    function: Callable[[], Any]
    api: str


def _async_names(module: object) -> str:
    names = sorted(
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and not inspect.isgeneratorfunction(value)
        and not inspect.isasyncgenfunction(value)
        and getattr(value, "__module__", None) == getattr(module, "__name__", None)
    )
    return MSG_AVAILABLE.format(names=", ".join(names)) if names else MSG_NONE_AVAILABLE


def _user_traceback(exc: BaseException) -> str:
    """The exception's traceback without importlib's and interlace's own frames."""
    stdlib = os.path.dirname(os.__file__) + os.sep
    hidden = (
        "<frozen importlib",
        str(Path(__file__).resolve().parent.parent) + os.sep,
        stdlib + "importlib" + os.sep,
        stdlib + "asyncio" + os.sep,
    )
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(hidden)
    ]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    if isinstance(exc, SyntaxError):
        # The file, line, source and caret, as Python shows them; a SyntaxError raised by the
        # import itself has only importlib's frames, and Python shows no empty traceback.
        if not frames:
            lines.clear()
        lines.extend(traceback.format_exception_only(exc))
    else:
        # Not format_exception_only: a failure's exception carries the replay note, which
        # the report above it already shows.
        lines.append(_exception_text(exc) + "\n")
    return "".join(lines)


def _exception_text(exc: BaseException) -> str:
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ != "builtins":
        name = f"{cls.__module__}.{name}"
    message = str(exc)
    return f"{name}: {message}" if message else name


def _import_file(path: str) -> tuple[object, str]:
    file = Path(path)
    if not file.is_file():
        raise UsageError(MSG_NO_FILE.format(path=path, cwd=os.getcwd()))
    directory = str(file.resolve().parent)
    name = file.stem
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:  # only for paths without a Python suffix
        raise UsageError(MSG_NO_FILE.format(path=path, cwd=os.getcwd()))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise UsageError(
            MSG_IMPORT_RAISED.format(module=path, error=type(exc).__name__)
            + "\n"
            + _user_traceback(exc).rstrip()
            + _path_hint(exc)
        ) from None
    return module, name


def _path_hint(exc: BaseException) -> str:
    """A ``--path`` to suggest when the import missed a top-level module that sits in a
    ``src`` directory (a src-layout project) under the current directory."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return ""
    top = exc.name.partition(".")[0]
    for directory in ("src", "lib"):
        base = Path(directory, top)
        found = base.is_dir() or base.with_suffix(".py").is_file()
        if found and os.path.abspath(directory) not in sys.path:
            return "\n" + MSG_TRY_PATH.format(missing=top, directory=directory)
    return ""


def _import_module(name: str) -> object:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        if name == missing or name.startswith(missing + "."):
            raise UsageError(
                MSG_NO_MODULE.format(module=name, missing=missing, cwd=cwd) + _path_hint(exc)
            ) from None
        raise UsageError(
            MSG_IMPORT_RAISED.format(module=name, error=type(exc).__name__)
            + "\n"
            + _user_traceback(exc).rstrip()
            + _path_hint(exc)
        ) from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        raise UsageError(
            MSG_IMPORT_RAISED.format(module=name, error=type(exc).__name__)
            + "\n"
            + _user_traceback(exc).rstrip()
        ) from None


def _put_on_path(directories: Sequence[str]) -> None:
    """Put ``--path`` directories first on ``sys.path``, in the order given."""
    for directory in reversed(directories):
        absolute = os.path.abspath(directory)
        if not os.path.isdir(absolute):
            raise UsageError(MSG_NO_PATH.format(path=directory, cwd=os.getcwd()))
        if absolute in sys.path:
            sys.path.remove(absolute)
        sys.path.insert(0, absolute)


def resolve_target(spec: str, path: Sequence[str] = ()) -> Target:
    """Import ``MODULE:FUNCTION`` (or ``path/to/file.py:FUNCTION``) and return the function.

    Args:
        spec: what the user wrote.
        path: directories to put first on ``sys.path`` before importing (``--path``).

    Raises:
        UsageError: the spec is malformed, a ``path`` entry is no directory, or the module
            or function cannot be found.
    """
    _put_on_path(path)
    module_part, colon, attr = spec.rpartition(":")
    if (
        not colon
        or not module_part
        or not attr
        or not all(part.isidentifier() for part in attr.split("."))
    ):
        raise UsageError(MSG_BAD_SPEC.format(spec=spec))
    if module_part.endswith(".py") or "/" in module_part or os.sep in module_part:
        module, module_name = _import_file(module_part)
    else:
        module = _import_module(module_part)
        module_name = module_part
    value: object = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            available = _async_names(module)
            raise UsageError(
                MSG_NO_FUNCTION.format(module=module_part, name=attr, available=available)
            ) from None
    return Target(spec=spec, function=value, api=f"{module_name}.{attr}")  # type: ignore[arg-type]


class Progress:
    """The exploration's progress line on stderr (``_progress.ProgressLine``), for
    explorations that take a while.

    Silent unless the stream is a terminal; starts after ``delay`` seconds and redraws in
    place (``\\r``) at most once per ``interval`` seconds, so a fast exploration prints nothing
    and a slow one costs almost nothing.
    """

    def __init__(
        self,
        stream: TextIO,
        prefix: str,
        *,
        max_seconds: float | None = None,
        delay: float = 0.5,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from interlace.harness._progress import ProgressLine

        self.stream = stream
        self.enabled = stream.isatty()
        self.line = ProgressLine(
            prefix,
            self._draw,
            self._erase,
            max_seconds=max_seconds,
            delay=delay,
            interval=interval,
            clock=clock,
        )

    def _draw(self, text: str) -> None:
        self.stream.write(MSG_PROGRESS.format(text=text))
        self.stream.flush()

    def _erase(self) -> None:
        self.stream.write("\r\x1b[K")
        self.stream.flush()

    def __call__(self, done: int, total: int) -> None:
        if self.enabled:
            self.line(done, total)

    def finish(self) -> None:
        """Erase the progress line, if one is showing."""
        self.line.finish()


def _failure_json(failure: Failure | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {
        "kind": failure.kind,
        "label": failure.label,
        "token": failure.token,
        "steps": failure.steps,
        "shrunk_from": failure.shrunk_from,
        "deviations": failure.deviations,
        "report": failure.report,
        "exception": _exception_text(failure.exception) if failure.exception is not None else None,
    }


def _write_json(payload: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(payload, indent=2) + "\n")


def _write_report(failure: Failure, out: TextIO) -> None:
    out.write(failure.report.rstrip("\n") + "\n")
    if failure.exception is not None:
        out.write("\n" + _user_traceback(failure.exception))


def _check_html_path(path: str | None) -> None:
    """Refuse an ``--html`` path in a directory that does not exist, before exploring."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(MSG_HTML_NO_DIR.format(path=path, directory=directory))


def _write_html(
    path: str | None, failure: Failure | None, title: str, prefix: str, err: TextIO
) -> bool:
    """Write ``--html``'s report (a line on stderr says where); False if it cannot be."""
    if path is None:
        return True
    if failure is None:
        print(f"{prefix}: " + MSG_HTML_NOT_WRITTEN.format(path=path), file=err)
        return True
    try:
        Path(path).write_text(failure.to_html(title=title), encoding="utf-8")
    except OSError as exc:
        print(f"{prefix}: error: " + MSG_HTML_WRITE_FAILED.format(path=path, error=exc), file=err)
        return False
    print(f"{prefix}: " + MSG_HTML_WRITTEN.format(path=path), file=err)
    return True


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _seed_part(exploration: Exploration) -> str:
    return f"seed {exploration.seed}, strategy {exploration.strategy}"


def _hints(target: Target, instrument: tuple[str, ...], path: Sequence[str] | None) -> Any:
    from interlace._core.explorer import ReplayHints

    return ReplayHints(
        api=target.api, cli=target.spec, instrument=instrument, path=tuple(path or ())
    )


def run_explore(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``interlace explore`` with parsed arguments and return the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    prefix = "interlace explore"
    from interlace.errors import InterlaceError
    from interlace.harness.api import explain_opaque, explain_uninstrumented, explore

    options: dict[str, Any] = {}
    if args.max_steps is not None:
        options["max_steps"] = args.max_steps
    for name in ("max_time", "max_seconds", "stall_timeout", "max_stall", "bound", "depth"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    progress = Progress(err, prefix, max_seconds=args.max_seconds)
    try:
        _check_html_path(getattr(args, "html", None))
        instrument = _instrument(args.instrument)
        target = resolve_target(args.target, args.path or ())
        exploration = explore(
            target.function,
            strategy=args.strategy,
            max_schedules=args.max_schedules,
            seed=args.seed,
            progress=progress,
            hints=_hints(target, instrument, args.path),
            instrument=instrument,
            unfold=args.unfold,
            keep_unshrunk=getattr(args, "html", None) is not None,
            workers=args.workers,
            shard=args.shard,
            **options,
        )
        if args.report_dir is not None:
            from interlace.harness import _shards

            payload = _shards.report_payload(target.spec, exploration, args.max_schedules)
            _shards.write_report(Path(args.report_dir), payload)
    except (UsageError, InterlaceError, OSError) as exc:
        progress.finish()
        if args.format == "json":
            # A CI step parsing stdout gets an object whatever happened.
            _write_json({"target": args.target, "error": str(exc)}, out)
        print(f"{prefix}: error: {exc}", file=err)
        return EXIT_ERROR
    progress.finish()
    failure = exploration.failure
    if args.format == "json":
        payload = {
            "target": target.spec,
            "error": None,
            "failure": _failure_json(failure),
            "schedules": exploration.schedules,
            "exhausted": exploration.exhausted,
            "space": exploration.space,
            "opaque": exploration.opaque,
            "uninstrumented": list(exploration.uninstrumented),
            "strategy": exploration.strategy,
            "seed": exploration.seed,
            "elapsed": exploration.elapsed,
            "failure_index": exploration.failure_index,
            "shard": list(exploration.shard) if exploration.shard else None,
            "workers": exploration.workers,
        }
        _write_json(payload, out)
    elif failure is not None:
        _write_report(failure, out)
    schedules = _plural(exploration.schedules, "schedule")
    if failure is not None:
        article = "an" if failure.kind[0] in "aeiou" else "a"
        summary = MSG_EXPLORE_FAILED.format(
            article=article,
            kind=failure.kind,
            schedules=schedules,
            seed_part=_seed_part(exploration),
            elapsed=exploration.elapsed,
        )
    else:
        summary = MSG_EXPLORE_PASSED.format(
            schedules=schedules,
            seed_part=_seed_part(exploration),
            exhausted=MSG_EXHAUSTED.format(space=exploration.space)
            if exploration.exhausted
            else "",
            elapsed=exploration.elapsed,
        )
        for note in (explain_opaque(exploration), explain_uninstrumented(exploration)):
            if note:
                summary = MSG_EXPLORE_OPAQUE.format(summary=summary, opaque=note)
    print(f"{prefix}: {summary}", file=err)
    if not _write_html(getattr(args, "html", None), failure, target.spec, prefix, err):
        return EXIT_ERROR
    return EXIT_FINDINGS if failure is not None else EXIT_CLEAN


def run_replay(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``interlace replay`` with parsed arguments and return the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    prefix = "interlace replay"
    from interlace.errors import InterlaceError
    from interlace.harness.api import explain_replay_pass, replay

    options: dict[str, Any] = {}
    if args.stall_timeout is not None:
        options["stall_timeout"] = args.stall_timeout
    try:
        _check_html_path(getattr(args, "html", None))
        instrument = _instrument(args.instrument)
        target = resolve_target(args.target, args.path or ())
        failure = replay(
            target.function,
            args.token,
            hints=_hints(target, instrument, args.path),
            instrument=instrument,
            unfold=args.unfold,
            **options,
        )
    except (UsageError, InterlaceError) as exc:
        if args.format == "json":
            _write_json({"target": args.target, "token": args.token, "error": str(exc)}, out)
        print(f"{prefix}: error: {exc}", file=err)
        return EXIT_ERROR
    if args.format == "json":
        payload = {
            "target": target.spec,
            "token": args.token,
            "error": None,
            "failure": _failure_json(failure),
        }
        _write_json(payload, out)
    elif failure is not None:
        _write_report(failure, out)
    if failure is not None:
        print(
            f"{prefix}: "
            + MSG_REPLAY_FAILED.format(
                kind=failure.kind,
                steps="1 step" if failure.steps == 1 else f"{failure.steps} steps",
            ),
            file=err,
        )
        if not _write_html(getattr(args, "html", None), failure, target.spec, prefix, err):
            return EXIT_ERROR
        return EXIT_FINDINGS
    _write_html(getattr(args, "html", None), None, target.spec, prefix, err)
    passed = MSG_REPLAY_PASSED.format(spec=target.spec)
    cause = explain_replay_pass(args.token)
    print(f"{prefix}: {passed}" + (f". {cause}" if cause else ""), file=err)
    return EXIT_CLEAN


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``explore``/``replay`` alone (the full command is :func:`interlace.cli.main`)."""
    parser = argparse.ArgumentParser(prog="interlace")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_explore_parser(sub)
    add_replay_parser(sub)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    return int(args.run(args))
