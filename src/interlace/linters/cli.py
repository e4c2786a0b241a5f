"""``interlace lint``: the command-line front end of the linter.

Findings go to stdout in the chosen format; the summary and every error (unreadable or
unparsable files, bad configuration) go to stderr. Exit codes: 0 clean, 1 findings, 2 usage,
configuration, parse or internal error (``--exit-zero`` turns only findings into 0).
``--add-noqa`` prints no findings: it suppresses them in place (``_noqa``) and exits 1 only for
findings it could not suppress. ``--fix`` fixes what can be fixed in place and reports the rest.
``-`` (or ``--stdin-filename``) lints standard input; with ``--fix`` the fixed source goes to
stdout and the findings to stderr, as in ruff.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from interlace.errors import ConfigError

if TYPE_CHECKING:
    from interlace.linters._config import LintConfig
    from interlace.linters._engine import FileError
    from interlace.linters._run import LintResult

__all__ = ("add_parser", "lint_main", "run")

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

_DESCRIPTION = (
    "Flag concurrency bug patterns in asyncio and threaded Python (rules IL101-IL303; the "
    "opt-in IL001 reports unused '# noqa' directives). "
    "Each file takes its settings from [tool.interlace.lint] in the closest pyproject.toml "
    "above it; flags win."
)


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(
            f"invalid --jobs value {value!r}: expected a whole number of processes >= 1, "
            "e.g. --jobs 4"
        )
    return jobs


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
        help="files or directories, or - for standard input (default: project root)",
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
        action="store_true",
        help="apply exclusions to files named on the command line too (for pre-commit)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="output format (default: text, ruff's full format)",
    )
    parser.add_argument(
        "--statistics", action="store_true", help="print counts per code instead of findings"
    )
    parser.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even when there are findings"
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
        "--stdin-filename",
        metavar="PATH",
        help=(
            "lint standard input as the file PATH: its name in the output, its configuration, "
            "per-file-ignores and exclusions (implies -)"
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
        "--jobs", type=_jobs, metavar="N", help="worker processes (default: all cores)"
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


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``lint`` subcommand to ``interlace``'s argparse subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "lint", help="flag concurrency bug patterns statically", description=_DESCRIPTION
    )
    _add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def _explain(code: str, out: TextIO, err: TextIO) -> int:
    from interlace.linters._output import rule_help
    from interlace.linters.rules import rules_by_code

    registry = rules_by_code()
    rule = registry.get(code.strip().upper())
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
        check_globs([glob], key="--per-file-ignores", where=where, negation=True)
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
    extend_exclude = check_globs(args.extend_exclude, key="--extend-exclude", where=where)
    target_version = (
        None
        if args.target_version is None
        else parse_target_version(args.target_version, where="from --target-version")
    )

    def overrides(config: LintConfig) -> LintConfig:
        config = layer_selection(config, command_line)
        changes: dict[str, object] = {}
        if per_file:
            changes["per_file_ignores"] = config.per_file_ignores + per_file
        if extend_exclude:
            changes["exclude"] = config.exclude + extend_exclude
        if args.sharing is not None:
            changes["sharing"] = args.sharing
        if target_version is not None:
            changes["target_version"] = target_version
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
    return None


def _add_noqa_conflict(args: argparse.Namespace) -> str | None:
    """Why a flag makes no sense with ``--add-noqa`` (``--exit-zero`` is harmless and allowed)."""
    if args.fix:
        return (
            "--add-noqa cannot be combined with --fix: --fix removes unused directives and "
            "--add-noqa adds them; run --fix first, then --add-noqa"
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
    return None


def _print_errors(errors: Sequence[FileError], err: TextIO) -> None:
    for error in errors:
        place = f"{error.filename}:{error.row}:{error.column}" if error.row else error.filename
        print(f"{place}: error: {error.message}", file=err)


def _exit_code(
    errors: Sequence[FileError], findings: int, args: argparse.Namespace, err: TextIO
) -> int:
    """2 after errors (summed up on ``err``), else 1 for findings left unless ``--exit-zero``."""
    if errors:
        noun = "error" if len(errors) == 1 else "errors"
        print(f"{len(errors)} {noun}: some files were not linted completely.", file=err)
        return EXIT_ERROR
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _add_noqa(result: LintResult, args: argparse.Namespace, err: TextIO) -> int:
    from interlace.linters._noqa import add_noqa

    _print_errors(result.errors, err)
    done = add_noqa(result.findings)
    for line in done.unsuppressed:
        place = f"{line.filename}:{line.row}" if line.row else line.filename
        codes = ", ".join(line.codes)
        print(f"{place}: warning: cannot add '# noqa: {codes}': {line.reason}", file=err)
    # ruff's wording; ruff says nothing when it added none, but a silent success reads as
    # "did it run?" in a CI log, so the count is printed always.
    print(f"Added {done.added} noqa directive{'s' * (done.added != 1)}.", file=err)
    left = sum(line.findings for line in done.unsuppressed)
    if left:
        noun = "finding is" if left == 1 else "findings are"
        print(f"{left} {noun} left unsuppressed: see the warnings above.", file=err)
    return _exit_code(result.errors, left, args, err)


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


def _summary(result: LintResult, args: argparse.Namespace, err: TextIO) -> None:
    """The line after the findings: how many (fixed and remaining, as ruff counts them), of how
    many files, and how many of those ``--fix`` would fix."""
    findings = result.findings
    files = f"{result.files} file{'s' * (result.files != 1)}"
    cached = f", {result.cached} from cache" if result.cached else ""
    if result.fixed:
        total = result.fixed + len(findings)
        noun = "finding" if total == 1 else "findings"
        print(
            f"Found {total} {noun} ({result.fixed} fixed, {len(findings)} remaining; "
            f"{files} checked{cached}).",
            file=err,
        )
    elif findings:
        noun = "finding" if len(findings) == 1 else "findings"
        print(f"Found {len(findings)} {noun} ({files} checked{cached}).", file=err)
    elif not result.errors:
        print(f"All checks passed ({files} checked{cached}).", file=err)
    fixable = sum(f.fix is not None for f in findings)
    if fixable and not args.fix:
        print(f"[*] {fixable} fixable with `--fix`.", file=err)


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``interlace lint`` with parsed arguments and return the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if args.add_noqa:
        conflict = _add_noqa_conflict(args)
        if conflict is not None:
            print(f"interlace lint: error: {conflict}", file=err)
            return EXIT_ERROR
    if args.explain is not None:
        return _explain(args.explain, out, err)
    stdin = _stdin(args)
    if stdin is not None:
        conflict = _stdin_conflict(args, stdin)
        if conflict is not None:
            print(f"interlace lint: error: {conflict}", file=err)
            return EXIT_ERROR
    from interlace import __version__
    from interlace.linters import _output
    from interlace.linters._run import lint_paths, lint_stdin
    from interlace.linters.rules import all_rules

    try:
        config, overrides = _resolve_config(args)
        if stdin is not None:
            result = lint_stdin(
                _read_stdin(),
                filename=args.stdin_filename,
                config=config,
                overrides=overrides,
                force_exclude=args.force_exclude,
                fix=args.fix,
            )
        else:
            result = lint_paths(
                args.paths,
                config=config,
                overrides=overrides,
                jobs=args.jobs,
                use_cache=not args.no_cache,
                force_exclude=args.force_exclude,
                fix=args.fix,
            )
    except ConfigError as exc:
        print(f"interlace lint: error: {exc}", file=err)
        return EXIT_ERROR
    if result.files == 0 and not result.errors and stdin is None:
        print("interlace lint: warning: No Python files found under the given path(s)", file=err)
    if args.add_noqa:
        return _add_noqa(result, args, err)
    if stdin is not None and args.fix:
        # As in ruff: stdout is the (fixed) source, for an editor to put back in its buffer,
        # so the report goes to stderr.
        assert result.source is not None
        _write_source(result.source, out)
        out = err
    rules = all_rules()
    findings = result.findings
    if args.statistics and args.format == "json":
        out.write(_output.format_statistics_json(findings, rules))
    elif args.statistics:
        out.write(_output.format_statistics(findings, rules))
    elif args.format == "json":
        out.write(_output.format_json(findings, result.errors))
    elif args.format == "sarif":
        out.write(
            _output.format_sarif(
                findings, result.errors, rules, root=result.config.root, version=__version__
            )
        )
    elif args.format == "github":
        out.write(_output.format_github(findings))
        out.write(_output.format_github_errors(result.errors))
    elif args.format == "concise":
        out.write(_output.format_concise(findings))
    else:
        out.write(_output.format_text(findings))
    _print_errors(result.errors, err)
    _summary(result, args, err)
    return _exit_code(result.errors, len(findings), args, err)


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
