"""``interlace lint``: the command-line front end of the linter.

Findings go to stdout in the chosen format (or to ``--output-file``); the summary and every
error (unreadable or unparsable files, bad configuration) go to stderr. Exit codes: 0 clean, 1
findings, 2 usage, configuration, parse or internal error (``--exit-zero`` turns only findings
into 0). ``--quiet`` prints the findings and errors only; ``--silent`` prints nothing but what a
mode exists to produce (a diff, a file list, settings, the fixed source of standard input) and
errors that stop the run, as in ruff.
``--add-noqa`` prints no findings: it suppresses them in place (``_noqa``) and exits 1 only for
findings it could not suppress. ``--fix`` fixes what can be fixed in place and reports the rest;
``--fix-only`` fixes and reports nothing but errors; ``--diff`` prints what ``--fix`` would
change and exits 1 if it would change anything; ``--exit-non-zero-on-fix`` exits 1 when
something was fixed. ``--show-files`` and ``--show-settings`` lint nothing: they print the files
a run would lint, or the settings of the first of them.
``-`` (or ``--stdin-filename``) lints standard input; with ``--fix`` the fixed source goes to
stdout and the findings to stderr (or ``--output-file``), as in ruff.
``--watch`` lints again each time the files change, until Ctrl-C (exit 130).
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import re
import stat
import sys
import tokenize
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from interlace._processes import jobs_argument
from interlace.errors import ConfigError

if TYPE_CHECKING:
    from interlace.linters._config import LintConfig
    from interlace.linters._engine import FileError, Finding
    from interlace.linters._run import FileSelection, FixedFile, LintResult

__all__ = ("add_parser", "lint_main", "run")

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT): how ``--watch`` ends, and what a shell reports for ruff's, which
SIGINT kills."""

_DESCRIPTION = (
    "Flag concurrency bug patterns in asyncio and threaded Python (rules IL101-IL303; the "
    "opt-in IL001 reports unused '# noqa' directives). "
    "Each file takes its settings from [tool.interlace.lint] in the closest pyproject.toml "
    "above it; flags win."
)


def _csv(value: str) -> list[str]:
    # Empty items are kept for check_selectors to refuse: "--select IL2," is a typo, and an
    # empty selector would select nothing.
    return [part.strip() for part in value.split(",")]


def _csv_globs(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from interlace.linters._output import FORMATS
    from interlace.linters._sharing import SHARING

    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help=(
            "files or directories (walked for *.py, *.pyi and *.ipynb), or - for standard "
            "input (default: project root)"
        ),
    )
    parser.add_argument(
        "--select",
        type=_csv,
        action="extend",
        metavar="CODES",
        help=(
            "comma-separated code prefixes to enable, replacing the configured selection "
            "(repeatable; the opt-in rules, IL001, IL102 and IL104, only by their full code)"
        ),
    )
    parser.add_argument(
        "--extend-select",
        type=_csv,
        action="extend",
        metavar="CODES",
        default=[],
        help="code prefixes to enable in addition to the selected ones (e.g. IL102; repeatable)",
    )
    parser.add_argument(
        "--ignore",
        type=_csv,
        action="extend",
        metavar="CODES",
        default=[],
        help="code prefixes to disable (repeatable)",
    )
    parser.add_argument(
        "--per-file-ignores",
        action="append",
        default=[],
        metavar="GLOB:CODES",
        help="disable codes for matching files, e.g. 'tests/**:IL201' (repeatable)",
    )
    parser.add_argument(
        "--extend-exclude",
        type=_csv_globs,
        action="extend",
        metavar="GLOBS",
        default=[],
        help="gitignore-style globs to skip in addition to the configured ones",
    )
    parser.add_argument(
        "--force-exclude",
        action=argparse.BooleanOptionalAction,
        help=(
            "apply exclusions to files named on the command line too (for pre-commit); "
            "--no-force-exclude does not (default: the configured force-exclude, false)"
        ),
    )
    parser.add_argument(
        "--format",
        "--output-format",
        dest="format",
        choices=FORMATS,
        metavar="FORMAT",
        help=(
            "output format (default: text, ruff's full format, which full names too; "
            "--output-format is ruff's name): concise, one line per finding; json and "
            "json-lines, ruff's fields; sarif "
            "(GitHub code scanning); github (workflow annotations); gitlab (Code Quality); "
            "junit (JUnit XML); pylint (path:row: [CODE] message); azure (Azure Pipelines "
            "logging commands); grouped (findings under each file name); rdjson (reviewdog)"
        ),
    )
    parser.add_argument(
        "--statistics", action="store_true", help="print counts per code instead of findings"
    )
    parser.add_argument(
        "-o",
        "--output-file",
        metavar="PATH",
        help=(
            "write what would go to stdout (findings, diff, file list) to PATH, created even "
            "when empty; the summary and errors stay on stderr"
        ),
    )
    # ruff's -e is --exit-zero: a ruff user's -e must not mean the opposite here.
    parser.add_argument(
        "-e", "--exit-zero", action="store_true", help="exit 0 even when there are findings"
    )
    parser.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="exit 1 if anything was fixed, even when no finding is left",
    )
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print the findings and errors only: no summary, hint or warning",
    )
    verbosity.add_argument(
        "-s",
        "--silent",
        action="store_true",
        help=(
            "print no findings, summary or file errors, only set the exit code (a diff, file "
            "list or fixed source still prints)"
        ),
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help=(
            "remove the unused codes IL001 reports from '# noqa' directives, in place (IL001 "
            "is the only fixable rule), and report the findings left"
        ),
    )
    parser.add_argument(
        "--fix-only",
        action="store_true",
        help="fix as --fix does, but report no finding and exit 0 for those left",
    )
    parser.add_argument(
        "--diff",
        action="store_true",
        help=(
            "print a unified diff of what --fix would change, write nothing and report no "
            "finding; exit 1 if there is a diff"
        ),
    )
    parser.add_argument(
        "--show-files",
        action="store_true",
        help="print the files a run would lint, sorted absolute paths, and exit without linting",
    )
    parser.add_argument(
        "--show-settings",
        action="store_true",
        help="print the settings of the first file a run would lint, and exit without linting",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        help=(
            "lint, then lint again whenever a file the run lints (or its configuration) "
            "changes, appears or disappears, until Ctrl-C (exit 130)"
        ),
    )
    parser.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help=(
            "lint standard input as the file PATH: its name in the output, its configuration, "
            "per-file-ignores and exclusions, and with a .ipynb name, a Jupyter notebook "
            "(implies -)"
        ),
    )
    parser.add_argument(
        "--add-noqa",
        action="store_true",
        help=(
            "append '# noqa: CODE' to each line with a finding, so only new code is reported "
            "(never IL001: an unused directive is left for you to remove)"
        ),
    )
    parser.add_argument(
        "--target-version",
        metavar="py3X",
        help="oldest Python the code supports, e.g. py311 (changes IL201's hazard)",
    )
    parser.add_argument(
        "--sharing",
        choices=SHARING,
        help=(
            "'declared': report IL101/IL102/IL104/IL301/IL303 only inside the classes listed in "
            "task-shared-classes or shared-classes (default: the configured value, 'inferred')"
        ),
    )
    parser.add_argument(
        "--jobs", type=jobs_argument, metavar="N", help="worker processes (default: all cores)"
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=(
            "pyproject.toml whose settings apply to every file, instead of each file's closest "
            "(its globs are relative to the working directory)"
        ),
    )
    parser.add_argument(
        "--explain", metavar="CODE", help="explain a rule: what, why, examples, when to suppress"
    )
    parser.add_argument(
        "--emit-test",
        metavar="DIR",
        help=(
            "write, for each IL101/IL102/IL104/IL301/IL303 finding in a class, a pytest file "
            "into DIR that races the two calls under @pytest.mark.interlace (docs/lint.md)"
        ),
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``lint`` subcommand to ``interlace``'s argparse subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "lint", help="flag concurrency bug patterns statically", description=_DESCRIPTION
    )
    _add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def add_server_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``server`` subcommand (the editor's language server) to ``interlace``'s parsers."""
    # Imported on use: the server's module is large, and `interlace lint` never needs it.
    from interlace.linters import _server

    return _server.add_parser(subparsers)


def _explain(code: str, out: _Output, err: TextIO) -> int:
    from interlace.linters._output import rule_help
    from interlace.linters.rules import rules_by_code

    registry = rules_by_code()
    rule = registry.get(code)
    if rule is None and code.upper() in registry:
        # As in ruff, whose `ruff rule e501` is an error as `--select e501` is.
        print(
            f"interlace lint: error: rule code {code!r} for --explain is not upper case: rule "
            f"codes are matched exactly, as in --select and ruff; write {code.upper()!r}",
            file=err,
        )
        return EXIT_ERROR
    if rule is None:
        print(
            f"interlace lint: error: unknown rule code {code!r} for --explain; known codes: "
            f"{', '.join(sorted(registry))}",
            file=err,
        )
        return EXIT_ERROR
    out.write(rule_help(rule))
    return EXIT_CLEAN


def _per_file(values: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    from interlace.linters._config import check_globs, check_selectors

    pairs = []
    for value in values:
        glob, sep, codes = value.rpartition(":")
        if not sep or not glob or not codes.strip():
            raise ConfigError(
                f"invalid --per-file-ignores value {value!r}: expected GLOB:CODES, e.g. "
                "--per-file-ignores 'tests/**:IL201,IL101'"
            )
        where = "from the command line"
        (glob,) = check_globs(
            [glob],
            key="--per-file-ignores",
            where=where,
            negation=True,
            relative_to="the working directory",
        )
        pairs.append((glob, check_selectors(_csv(codes), key="--per-file-ignores", where=where)))
    return tuple(pairs)


def _resolve_config(
    args: argparse.Namespace,
) -> tuple[LintConfig | None, Callable[[LintConfig], LintConfig]]:
    """Return the settings of every file (``--config``; ``None``: each file's closest
    configuration, as in ruff) and the command line's overrides, to apply to each of them.

    Raises:
        ConfigError: a flag's value is invalid, or the ``--config`` file is missing or invalid.
    """
    from interlace.linters._config import (
        RuleSelection,
        check_globs,
        check_selectors,
        layer_selection,
        load_config,
        parse_target_version,
        rebase_glob,
    )

    config = None
    if args.config is not None:
        path = Path(args.config)
        if not path.is_file():
            raise ConfigError(
                f"--config {args.config!r} does not exist or is not a file; pass the path of a "
                "pyproject.toml with a [tool.interlace.lint] table"
            )
        # As in ruff, the settings of --config apply to every file, and their relative globs
        # resolve against the working directory.
        config = load_config(path, root=Path.cwd())
    where = "from the command line"
    # As in ruff, the command line is a layer over each file: a --select starts a new
    # selection, and --extend-select and --ignore adjust whatever the file selected.
    command_line = RuleSelection(
        select=(
            None
            if args.select is None
            else check_selectors(args.select, key="--select", where=where)
        ),
        extend_select=check_selectors(args.extend_select, key="--extend-select", where=where),
        ignore=check_selectors(args.ignore, key="--ignore", where=where),
    )
    per_file = _per_file(args.per_file_ignores)
    extend_exclude = check_globs(
        args.extend_exclude,
        key="--extend-exclude",
        where=where,
        relative_to="the working directory",
    )
    target_version = (
        None
        if args.target_version is None
        else parse_target_version(args.target_version, where="from --target-version")
    )

    cwd = Path.cwd()

    def overrides(config: LintConfig) -> LintConfig:
        config = layer_selection(config, command_line)
        changes: dict[str, object] = {}
        # As in ruff, the command line's globs are relative to the working directory, and each
        # configuration's to its root: rebased onto that root, or dropped where they cannot
        # match below it (a negated per-file glob then matches every file).
        if per_file:
            rebased = []
            for glob, codes in per_file:
                moved = rebase_glob(glob, start=cwd, root=config.root)
                if moved is None and glob.startswith("!"):
                    moved = "**"
                if moved is not None:
                    rebased.append((moved, codes))
            changes["per_file_ignores"] = config.per_file_ignores + tuple(rebased)
        if extend_exclude:
            moved_globs = (rebase_glob(g, start=cwd, root=config.root) for g in extend_exclude)
            changes["exclude"] = config.exclude + tuple(g for g in moved_globs if g is not None)
        if args.sharing is not None:
            changes["sharing"] = args.sharing
        if target_version is not None:
            changes["target_version"] = target_version
        if args.force_exclude is not None:
            changes["force_exclude"] = args.force_exclude
        return config.with_overrides(**changes) if changes else config

    return config, overrides


def _stdin(args: argparse.Namespace) -> str | None:
    """How the command line asks for standard input (``'-'``, ``--stdin-filename``), or
    ``None``."""
    from interlace.linters._run import STDIN

    if STDIN in args.paths:
        return f"'{STDIN}'"
    if args.stdin_filename is not None:
        return "--stdin-filename"
    return None


def _stdin_conflict(args: argparse.Namespace, how: str) -> str | None:
    """Why the command line cannot lint standard input as it asks."""
    from interlace.linters._run import STDIN

    others = [path for path in args.paths if path != STDIN]
    if others:
        named = ", ".join(repr(path) for path in others)
        # ruff lints the file named '-' (or, with --stdin-filename, ignores the paths with a
        # warning); either way a path given is silently not what gets linted.
        return (
            f"standard input ({how}) cannot be linted together with other paths ({named}); "
            "lint standard input and files in separate runs"
        )
    if args.add_noqa:
        return (
            f"--add-noqa cannot be combined with standard input ({how}): it edits files in "
            "place; run it on the file itself"
        )
    shown = _show_flag(args)
    if shown is not None:
        # As in ruff, which refuses --stdin-filename with them.
        return (
            f"{shown} cannot be combined with standard input ({how}): it shows what a run "
            "over files would use; name the files or directories instead"
        )
    return None


_UNSET_HINT = (
    'in CI an unset or empty variable, as in interlace lint "$CHANGED_FILES", is the usual cause'
)


def _empty_value(args: argparse.Namespace) -> str | None:
    """Why an empty path or ``--stdin-filename`` cannot be linted.

    ruff refuses both; before, an empty path quietly linted the working directory, so a CI job
    whose variable was unset passed while checking other files than it meant to.
    """
    if "" in args.paths:
        position = args.paths.index("") + 1
        return (
            f"path {position} on the command line is empty ('') and names no file or directory "
            f"({_UNSET_HINT}); pass the files or directories to lint, or no path at all to lint "
            "the project root"
        )
    if args.stdin_filename == "":
        return (
            f"--stdin-filename is empty ('') and names no file ({_UNSET_HINT}); pass the path "
            "the source on standard input stands for, e.g. --stdin-filename src/app.py, or "
            "'-' without --stdin-filename"
        )
    return None


def _show_flag(args: argparse.Namespace) -> str | None:
    """``--show-files`` or ``--show-settings``, whichever is given, or ``None``."""
    if args.show_files:
        return "--show-files"
    if args.show_settings:
        return "--show-settings"
    return None


def _mode_conflict(args: argparse.Namespace) -> str | None:
    """Why flags cannot be combined (those with ``--add-noqa``: :func:`_add_noqa_conflict`).

    The pairs ruff refuses, and two it accepts: ``--fix-only`` with ``--statistics`` (ruff then
    counts the findings ``--fix-only`` says it does not report) and ``--diff`` with ``--format``
    (ruff ignores the format).
    """
    if args.exit_zero and args.exit_non_zero_on_fix:
        return (
            "--exit-zero cannot be combined with --exit-non-zero-on-fix: one exits 0 and the "
            "other 1 when something is fixed; drop one"
        )
    shown = _show_flag(args)
    if args.show_files and args.show_settings:
        return "--show-files cannot be combined with --show-settings; run them separately"
    if shown is not None and args.statistics:
        return (
            f"{shown} cannot be combined with --statistics: {shown} lints nothing, so there is "
            "nothing to count; run them separately"
        )
    if shown is not None:
        return None  # as in ruff, --show-* wins over --fix, --diff, --format
    if args.diff and args.statistics:
        return (
            "--diff cannot be combined with --statistics: --diff prints what --fix would "
            "change, not findings to count; run them separately"
        )
    if args.diff and args.format is not None:
        return (
            f"--diff cannot be combined with --format {args.format}: --diff prints a unified "
            "diff, not findings; drop --format"
        )
    if args.fix_only and args.statistics:
        return (
            "--fix-only cannot be combined with --statistics: --fix-only reports no findings "
            "to count; use --fix --statistics to count the findings left after fixing"
        )
    return None


def _watch_conflict(args: argparse.Namespace) -> str | None:
    """Why a flag makes no sense with ``--watch``, which reports the findings again each time
    the files change, until Ctrl-C."""
    for flag, given in (("--fix", args.fix), ("--fix-only", args.fix_only)):
        if given:
            return (
                f"--watch cannot be combined with {flag}: {flag} rewrites the files --watch "
                f"watches, so each fix would start another run; run {flag} once, then --watch"
            )
    if args.diff:
        return (
            "--watch cannot be combined with --diff: --diff prints what --fix would change, "
            "not findings to keep up to date; run --diff on its own"
        )
    if args.add_noqa:
        return (
            "--watch cannot be combined with --add-noqa: --add-noqa edits the files in place "
            "once; run it on its own, then --watch"
        )
    shown = _show_flag(args)
    if shown is not None:
        return (
            f"--watch cannot be combined with {shown}: {shown} lints nothing, so there is "
            "nothing to watch; run it on its own"
        )
    if args.explain is not None:
        return (
            f"--watch cannot be combined with --explain {args.explain}: --explain lints "
            "nothing; run it on its own"
        )
    stdin = _stdin(args)
    if stdin is not None:
        return (
            f"--watch cannot be combined with standard input ({stdin}): it is read once and "
            "cannot change; name the files or directories to watch instead"
        )
    if args.output_file is not None:
        return (
            f"--watch cannot be combined with --output-file {args.output_file!r}: --watch "
            "prints a new report on each change for you to read; drop --output-file, or run "
            "without --watch to write a report"
        )
    return None


def _add_noqa_conflict(args: argparse.Namespace) -> str | None:
    """Why a flag makes no sense with ``--add-noqa`` (``--exit-zero`` is harmless and allowed)."""
    for flag, given in (("--fix", args.fix), ("--fix-only", args.fix_only)):
        if given:
            return (
                f"--add-noqa cannot be combined with {flag}: {flag} removes unused directives "
                f"and --add-noqa adds them; run {flag} first, then --add-noqa"
            )
    if args.diff:
        return (
            "--add-noqa cannot be combined with --diff: --diff changes nothing and --add-noqa "
            "edits files in place; run --diff on its own to see what --fix would change"
        )
    shown = _show_flag(args)
    if shown is not None:
        return (
            f"--add-noqa cannot be combined with {shown}: {shown} lints nothing; run them "
            "separately"
        )
    if args.explain is not None:
        return (
            f"--add-noqa cannot be combined with --explain {args.explain}: --explain lints "
            "nothing; run them separately"
        )
    if args.format is not None:
        return (
            f"--add-noqa cannot be combined with --format {args.format}: --add-noqa prints no "
            "findings, only how many directives it added; drop --format"
        )
    if args.statistics:
        return (
            "--add-noqa cannot be combined with --statistics: --add-noqa prints no findings to "
            "count; run --statistics before it to see what it will suppress"
        )
    if args.output_file is not None:
        return (
            f"--add-noqa cannot be combined with --output-file {args.output_file!r}: --add-noqa "
            "writes no report, only directives into the files; drop --output-file"
        )
    return None


def _print_errors(errors: Sequence[FileError], err: TextIO) -> None:
    from interlace.linters._output import error_place

    for error in errors:
        print(f"{error_place(error)}: error: {error.message}", file=err)


class _Discard(io.StringIO):
    """A stream that keeps nothing: where ``--quiet`` and ``--silent`` send what they drop."""

    def write(self, text: str, /) -> int:
        return len(text)


def _output_file_problem(value: str) -> str | None:
    """Why ``--output-file value`` cannot be written, found before anything is linted, or
    ``None``. Its missing directories are created, as ruff does (``-o reports/lint.sarif`` in
    a fresh CI checkout)."""
    if not value:
        return (
            "--output-file is empty; pass the path of the file to write the report to, e.g. "
            "-o interlace.sarif"
        )
    path = Path(value)
    directory = path.parent
    if path.is_dir():
        return (
            f"--output-file {value!r} is a directory; pass the path of a file to write the "
            f"report to, e.g. {os.path.join(value, 'interlace.sarif')!r}"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return (
            f"cannot write --output-file {value!r}: cannot create its directory "
            f"{str(directory)!r} ({exc.strerror or exc}); pass a path in a directory you can "
            "write to"
        )
    target, what = (path, "the file") if path.exists() else (directory, "its directory")
    if not os.access(target, os.W_OK):
        return (
            f"cannot write --output-file {value!r}: {what} {str(target)!r} is not writable; "
            "pass a path you can write to"
        )
    return None


def _remove_partial(path: str) -> bool:
    """Remove the regular file ``path`` (never a device such as /dev/stdout); whether it
    was removed."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        os.unlink(path)
    except OSError:
        return False
    return True


class _Output:
    """Where a run's result goes (the findings, a diff, a file list, settings): a stream, or
    ``--output-file``, written once the run has a result.

    Invariant: with a path, the file is written only if :meth:`write` was called, so a run
    stopped by an error before it had a result leaves the file as it was.
    """

    def __init__(self, stream: TextIO, path: str | None) -> None:
        self._stream = stream
        self._path = path
        self._parts: list[str] | None = None

    def write(self, text: str) -> None:
        if self._path is None:
            try:
                self._stream.write(text)
            except UnicodeEncodeError:
                # A file name that is not UTF-8 (a lone surrogate here), on a stream that
                # refuses one: its bytes as they are on disk, as ruff prints them.
                encoding = getattr(self._stream, "encoding", None) or "utf-8"
                _write_source(text.encode(encoding, errors="surrogateescape"), self._stream)
        elif self._parts is None:
            self._parts = [text]
        else:
            self._parts.append(text)

    def close(self, err: TextIO) -> bool:
        """Write the result to ``--output-file``, if any; ``False`` (reported on ``err``)
        when that failed, after removing what was written of it."""
        if self._path is None or self._parts is None:
            return True
        data = "".join(self._parts).encode("utf-8", errors="surrogateescape")
        opened = False
        try:
            with open(self._path, "wb") as handle:
                opened = True
                handle.write(data)
        except OSError as exc:
            removed = opened and _remove_partial(self._path)
            print(
                f"interlace lint: error: cannot write --output-file {self._path!r}: "
                f"{exc.strerror or exc}"
                + ("; the incomplete file was removed" if removed else "")
                + "; check the path, its permissions and the free space, then run again",
                file=err,
            )
            return False
        return True


def _exit_code(
    errors: Sequence[FileError],
    left: int,
    fixed: int,
    args: argparse.Namespace,
    log: TextIO,
    *,
    checking: bool = False,
) -> int:
    """2 after errors other than a file that does not parse (summed up on ``log``), else 1 for
    ``left`` findings (or diffs) unless ``--exit-zero``, or for ``fixed`` ones with
    ``--exit-non-zero-on-fix``; with ``checking``, a file that does not parse counts as a
    finding.

    ruff 0.17 does the same: ``ruff check`` reports a file that does not parse or decode as an
    ``invalid-syntax`` (or E902) diagnostic and exits 1 (0 with ``--exit-zero``), while
    ``--diff``, ``--fix-only`` and ``--add-noqa``, which count changes, print it and exit 0.
    """
    if errors:
        noun = "error" if len(errors) == 1 else "errors"
        print(f"{len(errors)} {noun}: some files were not linted completely.", file=log)
        if any(error.kind != "syntax" for error in errors):
            return EXIT_ERROR
        if checking:
            left += len(errors)
    if args.exit_zero:
        return EXIT_CLEAN
    if left or (fixed and args.exit_non_zero_on_fix):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _add_noqa(result: LintResult, args: argparse.Namespace, log: TextIO, problems: TextIO) -> int:
    from interlace.linters._add_noqa import add_noqa

    _print_errors(result.errors, problems)
    done = add_noqa(result.findings)
    for line in done.unsuppressed:
        cell = "" if line.cell is None else f"cell {line.cell}:"
        place = f"{line.filename}:{cell}{line.row}" if line.row else line.filename
        codes = ", ".join(line.codes)
        print(f"{place}: warning: cannot add '# noqa: {codes}': {line.reason}", file=problems)
    # ruff's wording; ruff says nothing when it added none, but a silent success reads as
    # "did it run?" in a CI log, so the count is printed always.
    print(f"Added {done.added} noqa directive{'s' * (done.added != 1)}.", file=log)
    left = sum(line.findings for line in done.unsuppressed)
    if left:
        noun = "finding is" if left == 1 else "findings are"
        print(f"{left} {noun} left unsuppressed: see the warnings above.", file=log)
    return _exit_code(result.errors, left, 0, args, log)


def _read_stdin() -> bytes:
    """The bytes of standard input, as a file's would be read.

    Raises:
        ConfigError: there is no standard input to read (the process was started without one)
            or it cannot be read.
    """
    if sys.stdin is None:
        raise ConfigError(
            "'-' and --stdin-filename read the source from standard input, but this process "
            "has none; pipe the source in, e.g. interlace lint - < app.py"
        )
    try:
        return sys.stdin.buffer.read()
    except OSError as exc:
        raise ConfigError(f"cannot read the source from standard input: {exc}") from None


def _write_source(data: bytes, out: TextIO) -> None:
    """Write source bytes to ``out`` as they are (encoding, BOM, line endings)."""
    buffer: BinaryIO | None = getattr(out, "buffer", None)
    if buffer is None:  # a text-only stream, e.g. io.StringIO in a test
        out.write(data.decode("utf-8", errors="surrogateescape"))
        return
    out.flush()
    buffer.write(data)
    buffer.flush()


def _checked(result: LintResult) -> str:
    files = f"{result.files} file{'s' * (result.files != 1)}"
    cached = f", {result.cached} from cache" if result.cached else ""
    return f"{files} checked{cached}"


def _summary(result: LintResult, args: argparse.Namespace, log: TextIO) -> None:
    """The line after the findings: how many (fixed and remaining, as ruff counts them), of how
    many files, and how many of those ``--fix`` would fix."""
    findings = result.findings
    checked = _checked(result)
    if args.fix_only:
        # ruff prints "Fixed N errors." and nothing when it fixed none; as for --add-noqa, a
        # silent success reads as "did it run?" in a CI log.
        if result.fixed:
            noun = "finding" if result.fixed == 1 else "findings"
            print(f"Fixed {result.fixed} {noun} ({checked}).", file=log)
        else:
            print(f"No findings fixed ({checked}).", file=log)
        return
    if result.fixed:
        total = result.fixed + len(findings)
        noun = "finding" if total == 1 else "findings"
        print(
            f"Found {total} {noun} ({result.fixed} fixed, {len(findings)} remaining; {checked}).",
            file=log,
        )
    elif findings:
        noun = "finding" if len(findings) == 1 else "findings"
        print(f"Found {len(findings)} {noun} ({checked}).", file=log)
    elif not result.errors:
        print(f"All checks passed ({checked}).", file=log)
    fixable = sum(f.fix is not None for f in findings)
    if fixable and not args.fix:
        print(f"[*] {fixable} fixable with `--fix`.", file=log)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
"""A line of source with its line break, as the engine splits lines (``LINE_BREAK``)."""


def _source_lines(data: bytes) -> list[str]:
    """The lines of a file's bytes, decoded as Python decodes them, with their line breaks."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        text = data.decode("utf-8", errors="surrogateescape")
    return _LINE.findall(text)


def _unified_diff(fixed: FixedFile, *, header: bool) -> str:
    """What ``--diff`` prints for a file, as ruff prints it: a unified diff with three lines
    of context (``\\ No newline at end of file`` after a last line without one), then an
    empty line; without ``header`` no ``---``/``+++`` lines, as ruff prints standard input
    that has no name."""
    name = fixed.filename
    cells = _notebook_cells(fixed)
    if cells is not None:
        return (
            "".join(
                _lines_diff(old, new, f"{name}:cell {number}", header=True)
                for number, old, new in cells
            )
            + "\n"
        )
    old, new = _source_lines(fixed.original), _source_lines(fixed.fixed)
    return _lines_diff(old, new, name, header=header) + "\n"


def _lines_diff(old: list[str], new: list[str], name: str, *, header: bool) -> str:
    parts = []
    for index, line in enumerate(difflib.unified_diff(old, new, name, name)):
        if index < 2 and not header:
            continue
        parts.append(line)
        if not line.endswith(("\n", "\r")):
            parts.append("\n\\ No newline at end of file\n")
    return "".join(parts)


def _notebook_cells(fixed: FixedFile) -> list[tuple[int, list[str], list[str]]] | None:
    """For a notebook, the code cells the fixes change: each one's number and its lines
    before and after, with their line breaks (a cell's last line too: a cell has no end of
    file to lack a line break at); ``None`` for any other file."""
    from interlace.linters._engine import FileError
    from interlace.linters._notebook import is_notebook, read_notebook

    if not is_notebook(fixed.filename):
        return None
    old, new = read_notebook(fixed.original, fixed.filename), read_notebook(fixed.fixed, "")
    if isinstance(old, FileError) or isinstance(new, FileError):
        return None
    after = {cell.number: cell.text for cell in new.cells}
    changed = []
    for cell in old.cells:
        text = after.get(cell.number, "")
        if text != cell.text:
            changed.append((cell.number, _cell_lines(cell.text), _cell_lines(text)))
    return changed


def _cell_lines(text: str) -> list[str]:
    return [line if line.endswith(("\n", "\r")) else line + "\n" for line in _LINE.findall(text)]


def _diff(
    result: LintResult,
    args: argparse.Namespace,
    output: _Output,
    log: TextIO,
    problems: TextIO,
) -> int:
    """Print what ``--fix`` would change; 1 if it would change anything."""
    from interlace.linters._run import STDIN

    # ruff prints standard input without --stdin-filename with no header.
    header = not (STDIN in args.paths and args.stdin_filename is None)
    # Sorted by path, as ruff sorts its diffs.
    for fixed in sorted(result.fixed_files, key=lambda f: Path(os.path.abspath(f.filename))):
        output.write(_unified_diff(fixed, header=header))
    _print_errors(result.errors, problems)
    if result.fixed:
        noun = "finding" if result.fixed == 1 else "findings"
        print(f"Would fix {result.fixed} {noun} ({_checked(result)}).", file=log)
    else:
        # ruff prints nothing here; see _summary on --fix-only.
        print(f"No findings would be fixed ({_checked(result)}).", file=log)
    return _exit_code(result.errors, len(result.fixed_files), result.fixed, args, log)


def _report(
    findings: Sequence[Finding], result: LintResult, args: argparse.Namespace, output: _Output
) -> None:
    """Write ``findings`` and the files that could not be linted in the chosen format."""
    from interlace import __version__
    from interlace.linters import _output
    from interlace.linters.rules import all_rules

    rules = all_rules()
    # The formats that list the findings and the files that could not be linted together.
    listings: dict[str, Callable[[Sequence[Finding], Sequence[FileError]], str]] = {
        "json": _output.format_json,
        "json-lines": _output.format_json_lines,
        "gitlab": _output.format_gitlab,
        "junit": _output.format_junit,
        "pylint": _output.format_pylint,
        "azure": _output.format_azure,
        "grouped": _output.format_grouped,
        "rdjson": _output.format_rdjson,
    }
    if args.statistics and args.format == "json":
        output.write(_output.format_statistics_json(findings, rules))
    elif args.statistics and args.format == "json-lines":
        output.write(_output.format_statistics_json_lines(findings, rules))
    elif args.statistics:
        output.write(_output.format_statistics(findings, rules))
    elif args.format in listings:
        output.write(listings[args.format](findings, result.errors))
    elif args.format == "sarif":
        output.write(
            _output.format_sarif(
                findings, result.errors, rules, root=result.config.root, version=__version__
            )
        )
    elif args.format == "github":
        output.write(_output.format_github(findings))
        output.write(_output.format_github_errors(result.errors))
    elif args.format == "concise":
        output.write(_output.format_concise(findings))
    else:
        output.write(_output.format_text(findings))


_NO_FILES = "interlace lint: warning: No Python files found under the given path(s)"


def _show_files(selection: FileSelection, output: _Output, log: TextIO, problems: TextIO) -> int:
    """Print the files a run would lint, as ruff's ``--show-files`` does: absolute, sorted."""
    output.write("".join(f"{path}\n" for path in selection.files))
    # Unlike ruff, which lists the others and exits 0, a path that names nothing is an
    # error, as it is when linting.
    _print_errors(selection.errors, problems)
    if not selection.files and not selection.errors:
        print(_NO_FILES, file=log)
    return EXIT_ERROR if selection.errors else EXIT_CLEAN


def _show_settings(
    selection: FileSelection,
    args: argparse.Namespace,
    output: _Output,
    problems: TextIO,
    err: TextIO,
) -> int:
    """Print the settings of the first file a run would lint, as ruff's ``--show-settings``
    does (its first line and the settings file's are ruff's).

    Raises:
        ConfigError: the configuration that applies to the file is invalid.
    """
    from interlace.linters.rules import rules_by_code

    _print_errors(selection.errors, problems)
    if not selection.files:
        where = (
            ", ".join(repr(path) for path in args.paths)
            if args.paths
            else f"the project root {str(selection.config.root)!r}"
        )
        print(
            f"interlace lint: error: --show-settings found no Python file to lint under "
            f"{where}, so it has no settings to show; name a Python file, e.g. "
            "interlace lint --show-settings src/app.py",
            file=err,
        )
        return EXIT_ERROR
    path = selection.files[0]
    settings = selection.settings(path)
    config = settings.config
    source = (
        f'"{os.path.abspath(config.source)}"'
        if config.source is not None
        else "defaults (no pyproject.toml with a [tool.interlace] table applies)"
    )
    registry = rules_by_code()
    enabled = "".join(f'    "{code}",  # {registry[code].name}\n' for code in settings.codes)
    # The walk reads respect-gitignore and force-exclude from the base configuration only, as
    # in ruff.
    resolved = config.with_overrides(
        respect_gitignore=selection.config.respect_gitignore,
        force_exclude=selection.config.force_exclude,
    )
    output.write(
        f'Resolved settings for: "{path}"\n'
        f"Settings path: {source}\n"
        f'Project root: "{config.root}"\n'
        "\n"
        "# Rules enabled for this file: select, extend-select and ignore, then per-file-ignores\n"
        + (f"enabled = [\n{enabled}]\n" if enabled else "enabled = []\n")
        + "\n# [tool.interlace.lint] of the settings file, with the command line's flags applied\n"
        + resolved.describe()
    )
    return EXIT_ERROR if selection.errors else EXIT_CLEAN


def run(
    args: argparse.Namespace,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    events: WatchEvents | None = None,
) -> int:
    """Run ``interlace lint`` with parsed arguments and return the exit code.

    Args:
        args: the parsed command line.
        out, err: where stdout and stderr go (default: ``sys.stdout``, ``sys.stderr``).
        events: with ``--watch``, where the batches of file-system events come from (default:
            :func:`file_events`, watchfiles); the watch ends with the exit code of the last
            run when they run out (tests), else only Ctrl-C ends it, with 130.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    conflict = _empty_value(args)
    conflict = conflict or (_watch_conflict(args) if args.watch else None)
    conflict = conflict or (_add_noqa_conflict(args) if args.add_noqa else None)
    conflict = conflict or _mode_conflict(args)
    if conflict is not None:
        print(f"interlace lint: error: {conflict}", file=err)
        return EXIT_ERROR
    if args.output_file is not None:
        problem = _output_file_problem(args.output_file)
        if problem is not None:
            print(f"interlace lint: error: {problem}", file=err)
            return EXIT_ERROR
    fixing = args.fix or args.fix_only
    if args.silent and not (args.diff or args.explain is not None or _show_flag(args) is not None):
        # As in ruff, --silent drops the findings (in every format), but not what a mode
        # exists to print: a diff, a file list, the settings, an explanation.
        stream: TextIO = _Discard()
    elif fixing and not args.diff and _stdin(args) is not None:
        # As in ruff: stdout is the (fixed) source, for an editor to put back in its buffer,
        # so the report goes to stderr.
        stream = err
    else:
        stream = out
    output = _Output(stream, args.output_file)
    # --quiet keeps the findings and the errors about files; --silent only the errors that
    # stop the run (usage, configuration), as in ruff.
    log = _Discard() if args.quiet or args.silent else err
    problems = _Discard() if args.silent else err
    if args.watch:
        return _watch(
            args,
            output,
            out=out,
            log=log,
            problems=problems,
            err=err,
            events=file_events if events is None else events,
        )
    code = _lint(args, output, out=out, log=log, problems=problems, err=err)
    if not output.close(err):
        return EXIT_ERROR
    return code


def _lint(
    args: argparse.Namespace,
    output: _Output,
    *,
    out: TextIO,
    log: TextIO,
    problems: TextIO,
    err: TextIO,
) -> int:
    """:func:`run` once the flags are known to fit together and the output is set up."""
    if args.explain is not None:
        return _explain(args.explain, output, err)
    stdin = _stdin(args)
    if stdin is not None:
        conflict = _stdin_conflict(args, stdin)
        if conflict is not None:
            print(f"interlace lint: error: {conflict}", file=err)
            return EXIT_ERROR
    from interlace.linters._run import collect_paths, lint_paths, lint_stdin

    fixing = args.fix or args.fix_only or args.diff
    try:
        config, overrides = _resolve_config(args)
        if _show_flag(args) is not None:
            selection = collect_paths(args.paths, config=config, overrides=overrides)
            if args.show_files:
                return _show_files(selection, output, log, problems)
            return _show_settings(selection, args, output, problems, err)
        if stdin is not None:
            result = lint_stdin(
                _read_stdin(),
                filename=args.stdin_filename,
                config=config,
                overrides=overrides,
                fix=fixing,
            )
        else:
            result = lint_paths(
                args.paths,
                config=config,
                overrides=overrides,
                jobs=args.jobs,
                use_cache=not args.no_cache,
                fix=args.fix or args.fix_only,
                diff=args.diff,
            )
    except ConfigError as exc:
        print(f"interlace lint: error: {exc}", file=err)
        return EXIT_ERROR
    if result.files == 0 and not result.errors and stdin is None:
        print(_NO_FILES, file=log)
    if args.add_noqa:
        return _add_noqa(result, args, log, problems)
    if args.diff:
        return _diff(result, args, output, log, problems)
    if stdin is not None and fixing:
        assert result.source is not None
        _write_source(result.source, out)
    # --fix-only reports no finding, but still the files that could not be linted.
    findings = [] if args.fix_only else result.findings
    _report(findings, result, args, output)
    if args.emit_test:
        _emit(findings, Path(args.emit_test), log)
    _print_errors(result.errors, problems)
    _summary(result, args, log)
    return _exit_code(
        result.errors, len(findings), result.fixed, args, log, checking=not args.fix_only
    )


def _emit(findings: Sequence[Finding], directory: Path, log: TextIO) -> None:
    """``--emit-test``: write the confirming tests and say how many run as written."""
    from interlace.linters._emit import emit_tests

    summary = emit_tests(list(findings), directory)
    edit = len(summary.written) - summary.runnable
    print(
        f"interlace lint: wrote {len(summary.written)} test file(s) to {directory} "
        f"({summary.runnable} run as written, {edit} need the lines marked EDIT; "
        f"{summary.skipped} finding(s) outside a class method got none)",
        file=log,
    )


CLEAR_SCREEN = "\x1b[H\x1b[2J\x1b[3J"
"""Cursor home, erase the screen, erase the scrollback: what ruff's ``--watch`` writes before
each run (through the ``clearscreen`` crate), and ``clear`` on xterm."""

WATCH_SEPARATOR = "-" * 79 + "\n"
"""What ``--watch`` writes between two reports where stdout is not a terminal to clear."""

WATCHING = "Watching for file changes; press Ctrl-C to stop."
CHANGED = "File change detected..."

WatchEvents = Callable[[Sequence[Path]], Iterable[object]]
"""Given the directories (or files) to watch, recursively, an iterable with one item per batch
of file-system events: a set of changes, or an empty one when a while passed without any."""

_WATCH_TIMEOUT_MS = 5000
"""How long the watcher waits for an event before it yields an empty batch: the first one tells
that the watcher is running (so the files are compared once, for edits made before it was)."""

_Snapshot = dict[Path, tuple[int, int, int]]
"""Each watched file, with what tells that it changed: its modification time, its size, and
its inode (an editor that saves by replacing the file gives it a new one)."""


def file_events(roots: Sequence[Path]) -> Iterator[set[tuple[Any, str]]]:
    """The batches of changes under ``roots`` as the operating system reports them (inotify,
    FSEvents, ReadDirectoryChangesW, through watchfiles' Rust ``notify`` binding), so that a
    watch costs nothing while nothing changes; an empty batch every
    :data:`_WATCH_TIMEOUT_MS` without one. Ctrl-C raises ``KeyboardInterrupt``.
    """
    import watchfiles

    # Every event counts: whether it changes what is linted is for the comparison of the
    # files (a new file may be excluded, a .gitignore may change the selection) to decide.
    yield from watchfiles.watch(
        *roots,
        watch_filter=None,
        rust_timeout=_WATCH_TIMEOUT_MS,
        yield_on_timeout=True,
        raise_interrupt=True,
    )


def _stat_all(paths: Iterable[Path]) -> _Snapshot:
    snapshot = {}
    for path in paths:
        try:
            info = path.stat()
        except OSError:  # removed since it was listed: missing from the snapshot, so changed
            continue
        snapshot[path] = (info.st_mtime_ns, info.st_size, info.st_ino)
    return snapshot


def _watched(args: argparse.Namespace) -> _Snapshot:
    """The files a run with ``args`` lints (found as ``--show-files`` finds them) and the
    configuration files that apply to them, each with its :data:`_Snapshot` state.

    Raises:
        ConfigError: a flag is invalid, or a configuration file the run needs is.
    """
    from interlace.linters._run import collect_paths

    config, overrides = _resolve_config(args)
    selection = collect_paths(args.paths, config=config, overrides=overrides)
    # The files of a directory share its configuration: one lookup per directory.
    directories = {path.parent: path for path in selection.files}
    sources = {selection.config.source}
    sources.update(selection.settings(path).config.source for path in directories.values())
    return _stat_all([*selection.files, *(source for source in sources if source is not None)])


def _watch_roots(args: argparse.Namespace, seen: _Snapshot) -> list[Path]:
    """What to watch: each path of the command line (the closest existing directory above one
    that does not exist yet, so that its creation is seen), and each configuration file outside
    them, by itself (its directory, recursively, could be a whole home directory)."""
    roots: list[Path] = []
    for name in args.paths or ["."]:
        path = Path(name).absolute()
        while not path.exists() and path.parent != path:
            path = path.parent
        roots.append(path)
    inside = [root for root in roots if root.is_dir()]
    for path in seen:
        absolute = path.absolute()
        if not any(absolute.is_relative_to(root) for root in inside):
            roots.append(absolute)
    return sorted(set(roots))


def _next_change(
    args: argparse.Namespace, seen: _Snapshot, batches: Iterator[object]
) -> _Snapshot | None:
    """Wait for events until the watched files differ from ``seen``, and return what they are
    then; ``None`` when ``batches`` runs out first. The files are compared after each batch of
    events, and once after the first empty batch (edits made while the watcher started)."""
    compared = False
    for batch in batches:
        if not batch and compared:
            continue
        compared = True
        try:
            now = _watched(args)
        except ConfigError:
            # Reported by the run that follows; the files known so far stay watched, so that
            # saving the configuration again is seen.
            now = _stat_all(seen)
        if now != seen:
            return now
    return None


def _watch(
    args: argparse.Namespace,
    output: _Output,
    *,
    out: TextIO,
    log: TextIO,
    problems: TextIO,
    err: TextIO,
    events: WatchEvents,
) -> int:
    """Lint, then wait for file-system events under the paths the run lints and lint again when
    a file it lints or their configuration changed, appeared or disappeared (the cache answers
    for the files that did not change), until Ctrl-C, which returns 130.

    Before each run the screen is cleared, as ruff does, where stdout is a terminal; else the
    reports are separated by :data:`WATCH_SEPARATOR`. A configuration error at the start ends
    the watch (exit 2), as in ruff; one made while watching is reported, and the watch goes on
    until the file is saved again. When ``events`` runs out (tests) the watch ends with the
    exit code of the last run.
    """
    try:
        try:
            seen = _watched(args)
        except ConfigError as exc:
            print(f"interlace lint: error: {exc}", file=err)
            return EXIT_ERROR
        # ``seen`` is from before the first run, and the files are compared again once the
        # watcher runs: an edit made in between is linted too.
        batches = iter(events(_watch_roots(args, seen)))
        screen = out.isatty()
        if screen:
            output.write(CLEAR_SCREEN)
        code = _lint(args, output, out=out, log=log, problems=problems, err=err)
        while True:
            out.flush()  # a report to a pipe must not wait in its buffer for the next one
            print(WATCHING, file=log)
            now = _next_change(args, seen, batches)
            if now is None:
                return code
            seen = now
            output.write(CLEAR_SCREEN if screen else WATCH_SEPARATOR)
            out.flush()  # before the line on stderr, which the clearing would wipe
            print(CHANGED, file=log)
            code = _lint(args, output, out=out, log=log, problems=problems, err=err)
    except KeyboardInterrupt:
        # The way to stop watching: no traceback and no message, as ruff (which SIGINT kills).
        return EXIT_INTERRUPTED


def lint_main(argv: Sequence[str] | None = None) -> int:
    """Run ``interlace lint`` as a standalone command line (``argv`` excludes ``lint``)."""
    parser = argparse.ArgumentParser(prog="interlace lint", description=_DESCRIPTION)
    _add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interlace lint: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover - ``python -m interlace.linters.cli``
    sys.exit(lint_main())
