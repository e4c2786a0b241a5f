"""The per-file lint engine: one parse and one batched traversal for all selected rules.

Cost model (measured in ``benchmarks/lint_throughput.py``): parsing dominates, so a file that no
selected rule can match (its text contains none of the rules' ``TRIGGERS``) is not parsed at all;
a file that is parsed is traversed once with every rule batched (``_walk.walk_batched``, a
read-only equivalent of ``libcst.visit_batched`` that does not rebuild nodes); line
and column positions are computed only for files that produced a report, and only for the
statements that hold reported nodes (``_positions``; ``PositionProvider`` over the whole module
regenerates all of its code, about twice the cost of the parse).

IL001 (unused ``# noqa`` directives) is no visitor: it needs every rule's findings before
suppression, so it runs after them, over the file's directives (``_unused_noqa``). It looks only
at a file whose text contains ``noqa``, so a file without costs what it cost without IL001, and
a file with directives that no other rule needs is read with the tokenizer, not parsed.

Invariant: :func:`lint_source` never raises for any input; a file that cannot be parsed and a rule
that raises both become :class:`FileError` entries of the result.
"""

from __future__ import annotations

import ast
import io
import itertools
import tokenize
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from interlace.linters._noqa import UNUSED_NOQA, NoqaEdit, Suppressions, unused_noqa_edit
from interlace.linters._positions import LINE_BREAK, node_positions
from interlace.linters._rule import LintContext, Report, Rule
from interlace.linters._sharing import keep_declared, triggers
from interlace.linters._walk import walk_batched

__all__ = (
    "LINE_BREAK",
    "FileError",
    "FileResult",
    "Finding",
    "RelatedLocation",
    "Span",
    "active_rules",
    "lint_source",
    "span_rows",
)

CONTEXT_LINES = 2
"""Lines shown before and after each location in the text output, as in ruff."""

SPAN_LINES = 8
"""The most lines of a reported span the text output shows; a longer one shows its first and
last lines around a fold."""

Span = tuple[int, int, int, int]
"""``(row, column, end_row, end_column)``, 1-based."""


@dataclass(frozen=True, slots=True)
class RelatedLocation:
    """A secondary location of a finding (the check, the suspension point, the act).

    Rows are 1-based; columns are 1-based, as in ruff's JSON and SARIF. In a notebook, rows
    count the lines of cell ``cell``, and ``raw_span`` is where the location is in the
    notebook file itself (see :class:`Finding`).
    """

    row: int
    column: int
    end_row: int
    end_column: int
    message: str
    cell: int | None = None
    raw_span: Span | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One reported problem, with 1-based rows and columns.

    Attributes:
        code: the rule code, e.g. ``"IL201"``.
        message: the full message (``<what>. <why>. <instead>.``).
        filename: the path as displayed (relative to the working directory when below it).
        row, column, end_row, end_column: the reported node's span.
        related: secondary locations, each with its own message.
        source_line: the text of line ``row`` (without its newline).
        context: the ``(row, text)`` lines the text output shows: those of the reported and
            the related locations, each with ``CONTEXT_LINES`` lines around it.
        fix: the edit that fixes the finding (``--fix``), or ``None``; only IL001's have one.
        cell: in a Jupyter notebook, the cell the finding is in (1-based, counting every
            cell, as Jupyter and ruff number them); its rows then count that cell's lines,
            and ``context`` holds lines of that cell only. ``None`` in a Python file.
        raw_span: in a notebook, the span in the ``.ipynb`` file itself (its JSON text), for
            the formats that place a finding in the file (SARIF, GitHub annotations); columns
            count the characters of that text, escapes included. ``None`` in a Python file.
    """

    code: str
    message: str
    filename: str
    row: int
    column: int
    end_row: int
    end_column: int
    related: tuple[RelatedLocation, ...] = ()
    source_line: str = ""
    context: tuple[tuple[int, str], ...] = ()
    fix: NoqaEdit | None = None
    cell: int | None = None
    raw_span: Span | None = None


@dataclass(frozen=True, slots=True)
class FileError:
    """A file that could not be linted completely.

    ``kind`` is ``"syntax"`` (the file does not parse or decode), ``"io"`` (it cannot be read),
    ``"limit"`` (valid code nested too deeply for the linter) or ``"internal"`` (a rule raised:
    a bug in interlace; the other rules' findings still count).

    In a notebook, ``row`` counts the lines of cell ``cell`` when the error is in a cell's
    code, and ``raw_position`` is the ``(row, column)`` in the ``.ipynb`` file itself (as
    :attr:`Finding.raw_span`); an error in the notebook's JSON has no cell, and its row and
    column are already the file's.
    """

    filename: str
    row: int
    column: int
    message: str
    kind: str
    cell: int | None = None
    raw_position: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class FileResult:
    """Everything the engine learned about one file."""

    filename: str
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    lines: int = 0
    parsed: bool = False
    cached: bool = field(default=False, compare=False)


def active_rules(
    source: bytes, rules: Sequence[type[Rule]], extra_triggers: Iterable[str] = ()
) -> list[type[Rule]]:
    """Return the rules whose pre-filter ``TRIGGERS`` occur in ``source`` (case-insensitively)."""
    lowered = source.lower()
    extra = [t.lower().encode() for t in extra_triggers]
    picked = []
    for rule in rules:
        triggers = rule.TRIGGERS
        hit = not triggers or any(t.encode() in lowered for t in triggers)
        if hit or (extra and any(t in lowered for t in extra)):
            picked.append(rule)
    return picked


def _quick_syntax_check(data: bytes, filename: str) -> FileError | None:
    """Report a syntax error in a file that no rule needs to parse, at CPython's C-parser speed
    (~3x libcst's), so a broken file is never passed silently because the pre-filter skipped it.
    The grammar is the running interpreter's, as in ``python -m py_compile``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning (invalid escapes) is not our business
        try:
            compile(data, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            return FileError(
                filename,
                max(exc.lineno or 1, 1),
                _character_column(data, filename, exc),
                f"cannot parse: {exc.msg}",
                "syntax",
            )
        except (MemoryError, RecursionError):  # CPython's parser gives up on deep nesting
            return FileError(filename, 1, 1, "cannot parse: nested too deeply", "syntax")
        except ValueError as exc:  # e.g. NUL bytes before 3.12
            return FileError(filename, 1, 1, f"cannot parse: {exc}", "syntax")
    return None


def _character_column(data: bytes, filename: str, exc: SyntaxError) -> int:
    """The 1-based column, in characters, of ``exc`` from compiling ``data``.

    Compiling bytes, CPython counts the UTF-8 bytes of the line in a file without a coding
    cookie, and characters in one with a cookie; compiling text, always characters. So the
    text is compiled again for the column, with the byte count as the fallback.
    """
    offset = exc.offset or 1
    if offset < 1:
        return 1  # an unknown coding cookie: line 0, offset -1
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        compile(data.decode(encoding), filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as again:
        if again.lineno == exc.lineno and again.msg == exc.msg and again.offset:
            return max(again.offset, 1)
    except (ValueError, LookupError, MemoryError, RecursionError):
        pass
    if exc.text is None:
        return offset
    encoded = exc.text.encode("utf-8", "surrogatepass")
    return len(encoded[: offset - 1].decode("utf-8", "replace")) + 1


def _libcst_accepts(data: bytes) -> bool:
    """Whether libcst's parser, whose grammar may be newer than the running interpreter's,
    accepts ``data`` (only asked after CPython refused it, so rarely)."""
    if _suspiciously_deep(data):
        return False
    try:
        cst.parse_module(data)
    except Exception:
        return False
    return True


_DEPTH = [0] * 256
for _open, _close in (b"()", b"[]", b"{}"):
    _DEPTH[_open], _DEPTH[_close] = 1, -1
_NOT_BRACKETS = bytes(c for c in range(256) if not _DEPTH[c])
_MAX_DEPTH = 150
_MAX_LAMBDAS = 500


def _suspiciously_deep(data: bytes) -> bool:
    """Whether ``data`` may nest deeper than CPython allows (brackets counted even inside
    strings, so this over-approximates; the caller then asks CPython)."""
    if data.count(b"lambda") > _MAX_LAMBDAS:
        return True
    brackets = data.translate(None, _NOT_BRACKETS)
    if len(brackets) <= _MAX_DEPTH:
        return False
    return max(itertools.accumulate(map(_DEPTH.__getitem__, brackets))) > _MAX_DEPTH


MSG_PARSER_LIMIT = (
    "cannot lint: the file is valid Python (the interpreter compiles it) but libcst {version}, "
    "the linter's parser, cannot parse it (it stops near {row}:{column}); the file is skipped, "
    "the other files are linted"
)


def _libcst_limit(filename: str, exc: cst.ParserSyntaxError) -> FileError:
    """A file CPython compiles and libcst refuses (``(name): int`` as a statement, in
    CPython's own ``test_grammar.py``): a limit of the linter, not a mistake in the file."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        libcst_version = version("libcst")
    except PackageNotFoundError:  # a vendored or unusually installed libcst
        libcst_version = "(unknown version)"
    message = MSG_PARSER_LIMIT.format(
        version=libcst_version, row=exc.raw_line, column=exc.raw_column + 1
    )
    return FileError(filename, 1, 1, message, "limit")


def _too_deep(filename: str) -> FileError:
    return FileError(
        filename,
        1,
        1,
        "cannot lint: the code is nested too deeply for the linter's traversal; the other files "
        "are linted",
        "limit",
    )


def _internal(filename: str, what: str, exc: BaseException) -> FileError:
    return FileError(
        filename,
        1,
        1,
        f"internal error in {what}: {type(exc).__name__}: {exc}. This is a bug in interlace: "
        "please report it with this file; the other rules' findings for the file still stand",
        "internal",
    )


def _visit(module: cst.Module, rules: list[Rule], wrapper: MetadataWrapper | None) -> None:
    if wrapper is not None:
        wrapper.visit_batched(rules)
    else:
        walk_batched(module, rules)


def _run_rules(
    module: cst.Module,
    rule_types: Sequence[type[Rule]],
    context: LintContext,
    filename: str,
) -> tuple[list[Report], list[FileError], set[str], MetadataWrapper | None]:
    """Run the rules over ``module``: their reports, the errors, the codes of the rules that
    raised (their findings for the file are unknown) and the metadata wrapper, if any."""
    needs_metadata = any(r.METADATA_DEPENDENCIES for r in rule_types)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True) if needs_metadata else None
    rules = [r(context) for r in rule_types]
    try:
        _visit(module, rules, wrapper)
    except RecursionError:
        # Valid code nested deeper than a recursive traversal can follow (thousands of levels);
        # a limit of the linter, not a rule's bug, and every rule would hit it again.
        return [], [_too_deep(filename)], {r.code for r in rule_types}, wrapper
    except Exception:  # isolate the faulty rule below: never crash
        pass
    else:
        return [rep for rule in rules for rep in rule.reports], [], set(), wrapper
    # Slow path, only after a rule raised: run each rule alone so one faulty rule costs only
    # its own findings for this file.
    reports: list[Report] = []
    errors: list[FileError] = []
    failed: set[str] = set()
    for rule_type in rule_types:
        rule = rule_type(context)
        try:
            _visit(module, [rule], wrapper)
        except Exception as exc:  # reported as that rule's internal error
            errors.append(_internal(filename, f"rule {rule_type.code}", exc))
            failed.add(rule_type.code)
        else:
            reports.extend(rule.reports)
    return reports, errors, failed, wrapper


def _span(
    positions: Mapping[cst.CSTNode, CodeRange], node: cst.CSTNode
) -> tuple[int, int, int, int]:
    code_range = positions[node]
    return (
        code_range.start.line,
        code_range.start.column + 1,
        code_range.end.line,
        code_range.end.column + 1,
    )


_FLAKE8_INTERNAL = "IL000"
"""The flake8 plugin's code for a rule that raised (``flake8_plugin``): no rule of ours, and
whether a directive for it is used only a flake8 run knows."""


def _unused_noqa(
    rule: type[Rule],
    suppressions: Suppressions,
    lines: Sequence[str],
    reported: Mapping[int, Collection[str]],
    ran: Collection[str],
    failed: Collection[str],
    filename: str,
) -> list[Finding]:
    """IL001: the directives whose ``IL`` codes suppressed nothing on their line.

    Args:
        rule: the IL001 class (its message template).
        suppressions: the file's directives.
        lines: the file's lines as the engine splits them (``LINE_BREAK``).
        reported: each row's codes of findings before suppression.
        ran: the codes of the rules enabled for the file; the use of any other rule's code is
            unknown (it may be used in another configuration), so it is never reported.
        failed: the codes of the rules that raised on the file, whose findings are unknown.
        filename: the name used in the findings.

    A directive that lists IL001 (or ``IL0``, ``IL00``) is never reported: the finding is on
    the directive's own line, so that directive suppresses it as it suppresses any code, which
    is how a directive that lists IL001 is kept on purpose. So IL001 never reports itself.
    """
    from interlace.linters.rules import all_rules

    known = {r.code for r in all_rules()} | set(ran)
    enabled = set(ran) - set(failed)
    findings = []
    for row, (column, directive) in sorted(suppressions.directives().items()):
        if directive.error is not None or not directive.codes:
            continue  # an invalid directive suppresses nothing already; a bare one is anyone's
        if directive.suppresses(UNUSED_NOQA):
            continue
        used = reported.get(row, ())
        unused = set()
        removed = set()  # the codes the fix removes
        for code in directive.codes:
            if not code.startswith("IL") or code == _FLAKE8_INTERNAL:
                continue  # another tool's code: only that tool knows whether it is used
            if any(c.startswith(code) for c in used):
                continue
            covered = [k for k in known if k.startswith(code)]
            if not covered:
                unused.add(f"{code} (unknown code)")
                removed.add(code)
            elif all(k in enabled for k in covered):
                unused.add(code)
                removed.add(code)
        if not unused:
            continue
        message = rule.message.format(
            codes=", ".join(sorted(unused)), verb="suppresses" if len(unused) == 1 else "suppress"
        )
        width = directive.end - directive.start
        line = lines[row - 1] if 0 < row <= len(lines) else ""
        fix = unused_noqa_edit(row, line, column, directive, removed)
        findings.append(
            Finding(
                UNUSED_NOQA,
                message,
                filename,
                row,
                column + 1,
                row,
                column + width + 1,
                (),
                line,
                fix=fix,
            )
        )
    return findings


def _audit_rule(rules: Sequence[type[Rule]]) -> type[Rule] | None:
    """The IL001 class among ``rules``: it runs after the others, never as a visitor."""
    return next((rule for rule in rules if rule.code == UNUSED_NOQA), None)


def _findings(
    reports: Sequence[Report],
    positions: Mapping[cst.CSTNode, CodeRange],
    lines: Sequence[str],
    suppressions: Suppressions,
    filename: str,
) -> tuple[list[Finding], dict[int, list[str]]]:
    """The reports as findings, those a directive suppresses left out, and each row's codes
    before suppression (what IL001 needs to know a directive was used)."""
    findings: list[Finding] = []
    reported: dict[int, list[str]] = {}
    for rep in reports:
        row, col, end_row, end_col = _span(positions, rep.node)
        reported.setdefault(row, []).append(rep.code)
        if suppressions.suppresses(rep.code, row):
            continue
        line = lines[row - 1] if 0 < row <= len(lines) else ""
        related = tuple(
            RelatedLocation(*_span(positions, rel.node), rel.message) for rel in rep.related
        )
        findings.append(
            Finding(rep.code, rep.message, filename, row, col, end_row, end_col, related, line)
        )
    return findings, reported


def span_rows(row: int, end_row: int) -> list[int]:
    """The rows of a reported span the text output shows: all of them, or for a span of more
    than ``SPAN_LINES`` lines its first three and last two."""
    if end_row - row < SPAN_LINES:
        return list(range(row, end_row + 1))
    return [row, row + 1, row + 2, end_row - 1, end_row]


def _in_context(findings: Iterable[Finding], lines: Sequence[str]) -> list[Finding]:
    """``findings`` with the lines the text output shows around each of their locations (a
    related location is shown on its first line only)."""
    out = []
    for f in findings:
        rows: set[int] = set()
        for first, last in ((f.row, f.end_row), *((rel.row, rel.row) for rel in f.related)):
            shown = span_rows(first, max(first, last))
            rows.update(shown)
            rows.update(range(max(1, first - CONTEXT_LINES), first))
            rows.update(range(shown[-1] + 1, shown[-1] + CONTEXT_LINES + 1))
        context = tuple((row, lines[row - 1]) for row in sorted(rows) if row <= len(lines))
        out.append(replace(f, context=context))
    return out


def _unparsed_audit(
    data: bytes, rule: type[Rule], rules: Sequence[type[Rule]], filename: str, lines: int
) -> FileResult:
    """IL001 over a file no other rule needs, which the pre-filter keeps from libcst: its
    directives come from the tokenizer (an eighth of a parse), and none suppressed anything."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text_lines = LINE_BREAK.split(data.decode(encoding, errors="replace"))
        suppressions = Suppressions(None, text_lines)
        ran = {r.code for r in rules}
        findings = _unused_noqa(rule, suppressions, text_lines, {}, ran, (), filename)
        findings = _in_context(findings, text_lines)
    except RecursionError:
        return FileResult(filename, errors=(_too_deep(filename),), lines=lines)
    except Exception as exc:  # e.g. the libcst fallback on code the tokenizer rejects
        return FileResult(filename, errors=(_internal(filename, "the engine", exc),), lines=lines)
    return FileResult(filename, tuple(findings), lines=lines)


def lint_source(
    source: str | bytes,
    rules: Sequence[type[Rule]],
    *,
    filename: str = "<string>",
    context: LintContext | None = None,
) -> FileResult:
    """Lint one module's source with the given rule classes.

    Args:
        source: the module text (bytes are decoded as Python does: BOM, coding cookie, UTF-8).
        rules: the rule classes to run; the pre-filter may skip some or all of them.
        filename: the name used in findings and errors.
        context: what rules may know about the run (target version, shared classes).

    Returns:
        The findings after ``# noqa`` suppression, sorted by position, and any errors.
    """
    if context is None:
        context = LintContext(path=filename)
    data = source.encode("utf-8") if isinstance(source, str) else source
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    audit = _audit_rule(rules)
    visiting = [rule for rule in rules if rule is not audit]
    picked = active_rules(data, visiting, triggers(context.shared_classes))
    # IL001 runs after the others, and only on a file that mentions `noqa`: a file without the
    # text has no directive, and costs what it cost without IL001.
    audited = audit is not None and bool(active_rules(data, [audit]))
    if not picked:
        error = _quick_syntax_check(data, filename)
        if error is not None and error.kind == "syntax" and _libcst_accepts(data):
            # Newer syntax than the running interpreter's (``type X = ...`` on 3.11): a file
            # that rules do parse is judged by libcst's grammar, so this one is too.
            error = None
        if error is None and audit is not None and audited:
            return _unparsed_audit(data, audit, rules, filename, lines)
        return FileResult(filename, errors=(error,) if error else (), lines=lines)
    if _suspiciously_deep(data):
        # libcst's native parser overflows its stack (a segfault, not an exception) on nesting
        # far beyond what CPython accepts (~1,000 brackets, ~4,000 lambdas); CPython rejects
        # those cleanly, and whatever it accepts libcst parses.
        error = _quick_syntax_check(data, filename)
        if error is not None:
            return FileResult(filename, errors=(error,), lines=lines)
    try:
        module = cst.parse_module(data)
    except (UnicodeDecodeError, LookupError, SyntaxError) as exc:  # bad bytes or coding cookie
        error = _quick_syntax_check(data, filename) or FileError(
            filename, 1, 1, f"cannot decode: {exc}", "syntax"
        )
        return FileResult(filename, errors=(error,), lines=lines)
    except cst.ParserSyntaxError as exc:
        # libcst's native parser often points at the wrong token; CPython's message and
        # position are better when CPython agrees that the file is invalid.
        error = _quick_syntax_check(data, filename) or _libcst_limit(filename, exc)
        return FileResult(filename, errors=(error,), lines=lines)
    except Exception as exc:  # e.g. RecursionError on absurdly nested code
        return FileResult(filename, errors=(_internal(filename, "the parser", exc),), lines=lines)
    try:
        reports, errors, failed, wrapper = _run_rules(module, picked, context, filename)
        if context.sharing == "declared" and reports:
            reports = keep_declared(
                module,
                reports,
                {rule.code: rule.shares for rule in picked},
                tasks=context.task_shared_classes,
                threads=context.shared_classes,
            )
        if not reports and (not audited or any(e.kind == "limit" for e in errors)):
            return FileResult(filename, errors=tuple(errors), lines=lines, parsed=True)
        positions: Mapping[cst.CSTNode, CodeRange] = {}
        if reports and wrapper is not None:
            positions = wrapper.resolve(PositionProvider)
        elif reports:
            wanted = [n for rep in reports for n in (rep.node, *(r.node for r in rep.related))]
            positions = node_positions(module, data, wanted)
        text_lines = LINE_BREAK.split(data.decode(module.encoding, errors="replace"))
        suppressions = Suppressions(module, text_lines)
        findings, reported = _findings(reports, positions, text_lines, suppressions, filename)
        if audit is not None and audited:
            ran = {rule.code for rule in rules}
            findings.extend(
                _unused_noqa(audit, suppressions, text_lines, reported, ran, failed, filename)
            )
        findings = _in_context(findings, text_lines)
    except RecursionError:
        return FileResult(filename, errors=(_too_deep(filename),), lines=lines, parsed=True)
    except Exception as exc:  # positions or noqa on a pathological tree
        return FileResult(
            filename, errors=(_internal(filename, "the engine", exc),), lines=lines, parsed=True
        )
    findings.sort(key=lambda f: (f.row, f.column, f.code, f.message))
    return FileResult(filename, tuple(findings), tuple(errors), lines, parsed=True)
