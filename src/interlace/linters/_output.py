"""Output formats: text (ruff's full format), concise, JSON and JSON Lines (ruff's field names),
SARIF 2.1.0, GitHub workflow annotations, GitLab's Code Quality report, and ruff's JUnit XML,
pylint, Azure Pipelines, grouped and reviewdog (rdjson) formats."""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from interlace.linters._engine import FileError, Finding, RelatedLocation, span_rows
from interlace.linters._files import repository_root
from interlace.linters._rule import Rule

if TYPE_CHECKING:
    from interlace.linters._noqa import NoqaEdit

__all__ = (
    "ERROR_NAMES",
    "FORMATS",
    "escape_azure",
    "escape_github_data",
    "escape_github_property",
    "format_azure",
    "format_concise",
    "format_github",
    "format_github_errors",
    "format_gitlab",
    "format_grouped",
    "format_json",
    "format_json_lines",
    "format_junit",
    "format_pylint",
    "format_rdjson",
    "format_sarif",
    "format_statistics",
    "format_statistics_json",
    "format_statistics_json_lines",
    "format_text",
    "rule_help",
    "rule_markdown",
)

FORMATS = (
    "text",
    "concise",
    "json",
    "json-lines",
    "sarif",
    "github",
    "gitlab",
    "junit",
    "pylint",
    "azure",
    "grouped",
    "rdjson",
)
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
ERROR_NAMES = {
    "syntax": "invalid-syntax",
    "io": "io-error",
    "limit": "too-deeply-nested",
    "internal": "internal-error",
}
"""The ``code`` and ``name`` of a file that could not be linted, by ``FileError.kind``, in the
JSON output (ruff's own names where it has the diagnostic)."""


TAB = "    "
"""What a tab shows as in the text output, as in ruff."""


def message_parts(message: str) -> tuple[str, str, str]:
    """Split a message that reads ``<what>. <why>. <instead>.`` into those three parts.

    A part ends at a period followed by a space outside backticks and brackets, so
    ``(`var.set(new)` ... `var.reset(token)`)`` stays whole. ``what`` and ``why`` keep their
    final period, and ``f"{what} {why} {instead}" == message``. A message with fewer than three
    sentences is all ``what``.
    """
    cuts = []
    depth = 0
    quoted = False
    for i, ch in enumerate(message):
        if ch == "`":
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "." and depth == 0 and message[i + 1 : i + 2] == " ":
            cuts.append(i + 1)
    if len(cuts) < 2:
        return message, "", ""
    return message[: cuts[0]], message[cuts[0] + 1 : cuts[-1]], message[cuts[-1] + 1 :]


def _char_width(ch: str) -> int:
    if ch == "\t":
        return len(TAB)
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def _display(text: str) -> str:
    return text.replace("\t", TAB)


def _offset(text: str, column: int) -> int:
    """The display width of ``text`` before the 1-based ``column`` (past its end, or where the
    line's text is not known, a column is one character)."""
    return sum(_char_width(ch) for ch in text[: column - 1]) + max(0, column - 1 - len(text))


def _marker(text: str, column: int, end_column: int | None, char: str, label: str) -> str:
    """``char`` under ``text`` from ``column`` to ``end_column`` (exclusive; ``None``: the end
    of the line), then ``label``."""
    start = _offset(text, column)
    end = _offset(text, len(text.rstrip()) + 1 if end_column is None else end_column)
    return f"{' ' * start}{char * max(1, end - start)} {label}".rstrip()


def _sections(
    rows: Iterable[int], lines: Mapping[int, str], keep: Collection[int], spanned: Collection[int]
) -> list[list[int]]:
    """``rows`` cut into stretches of consecutive lines (a fold inside the reported span does not
    cut), each trimmed of the blank lines at its ends that are not in ``keep``."""
    sections: list[list[int]] = []
    for row in sorted(rows):
        if sections and (row == sections[-1][-1] + 1 or {row, sections[-1][-1]} <= set(spanned)):
            sections[-1].append(row)
        else:
            sections.append([row])
    for section in sections:  # blank context lines at either end say nothing
        while section[-1] not in keep and not lines[section[-1]].strip():
            section.pop()
        while section[0] not in keep and not lines[section[0]].strip():
            section.pop(0)
    return sections


def _snippet(f: Finding) -> list[str]:
    """The source lines of ``f`` in ruff's layout: ``^`` under the reported span (drawn down
    the margin when it spans lines), ``-`` under the first line of each related location with
    its message, a few lines of context, and one section per stretch of consecutive lines,
    the reported one first."""
    lines = dict(f.context) or {f.row: f.source_line}
    spanned = span_rows(f.row, f.end_row) if f.end_row > f.row else []
    marks: dict[int, list[tuple[int, str]]] = {}  # row -> (column, marker line) by column
    located: dict[int, int] = {}  # row -> the column of the first location marked on it
    for rel in sorted(f.related, key=lambda r: (r.row, r.column)):
        text = lines.setdefault(rel.row, "")
        end_column = rel.end_column if rel.end_row == rel.row else None
        marks.setdefault(rel.row, []).append(
            (rel.column, _marker(text, rel.column, end_column, "-", rel.message))
        )
        located.setdefault(rel.row, rel.column)
    for row in spanned:
        lines.setdefault(row, "")
    if not spanned:
        text = lines.setdefault(f.row, "")
        marks.setdefault(f.row, []).append(
            (f.column, _marker(text, f.column, f.end_column, "^", ""))
        )
    located[f.row] = f.column
    sections = _sections(lines, lines, {*located, *spanned}, spanned)
    sections.sort(key=lambda section: f.row not in section)
    width = len(str(max(row for section in sections for row in section)))
    gutter = " " * width
    out: list[str] = []
    for index, section in enumerate(sections):
        first = f.row if index == 0 else min(r for r in section if r in located)
        if index and out[-1] != f"{gutter} |":
            out.append(f"{gutter} |")
        out.append(
            f"{gutter}{'-->' if index == 0 else ':::'} {f.filename}:{first}:{located[first]}"
        )
        out.append(f"{gutter} |")
        margin = bool(spanned) and f.row in section
        for row in section:
            text = lines[row]
            prefix = ""
            if margin:
                start = _offset(text, f.column)
                if row == f.row:
                    prefix = "/ " if start == 0 else "  "
                else:
                    prefix = "| " if f.row < row <= f.end_row else "  "
                if row in spanned and row - 1 not in section and row != f.row:
                    out.append("...")
            out.append(f"{row:>{width}} | {prefix}{_display(text)}".rstrip())
            if margin and row == f.row and start > 0:
                out.append(f"{gutter} |  {'_' * (start + 1)}^")
            elif margin and row == f.end_row:
                out.append(f"{gutter} | |{'_' * max(1, _offset(text, f.end_column))}^")
            pad = "| " if margin and f.row <= row < f.end_row else "  " if margin else ""
            out.extend(f"{gutter} | {pad}{mark}".rstrip() for _, mark in sorted(marks.get(row, ())))
        if section[-1] not in marks and not (margin and section[-1] == f.end_row):
            out.append(f"{gutter} |")
    return out


def format_text(findings: Sequence[Finding]) -> str:
    """Render findings in ruff's full format: ``CODE <what>``, the location, the code with
    ``^`` under the reported span and ``-`` under each related location (the check, the
    suspension point, the act) with its message, then ``info: <why>`` and
    ``help: <instead>``; a blank line after each, as ruff does. A fixable finding's code is
    followed by ``[*]``, as in ruff."""
    out: list[str] = []
    for f in findings:
        what, why, instead = message_parts(f.message)
        out.append(f"{f.code} {'[*] ' if f.fix is not None else ''}{what}")
        out.extend(_snippet(f))
        if why:
            out.append(f"info: {why}")
        if instead:
            out.append(f"help: {instead}")
        out.append("")
    return "".join(f"{line}\n" for line in out)


def format_concise(findings: Sequence[Finding]) -> str:
    """One ``file:row:col: CODE message`` line per finding."""
    return "".join(f"{f.filename}:{f.row}:{f.column}: {f.code} {f.message}\n" for f in findings)


def _location(row: int, column: int) -> dict[str, int]:
    return {"row": row, "column": column}


def _rule_names() -> dict[str, str]:
    from interlace.linters.rules import all_rules

    return {rule.code: rule.name for rule in all_rules()}


def _fix(finding: Finding) -> dict[str, Any] | None:
    """A finding's fix as ruff's JSON gives it (edits sorted by field name), or ``None``."""
    from interlace.linters._noqa import UNUSED_NOQA_FIX

    edit = finding.fix
    if edit is None:
        return None
    return {
        "applicability": "safe",
        "edits": [
            {
                "content": edit.content,
                "end_location": _location(edit.end_row, edit.end_column),
                "location": _location(edit.row, edit.column),
            }
        ],
        "message": UNUSED_NOQA_FIX,
    }


def _json_filename(filename: str) -> str:
    # Standard input without --stdin-filename is "-" as in ruff, not a file of that name.
    return filename if filename == "-" else os.path.abspath(filename)


def _error_name(error: FileError) -> str:
    """The ``code`` (and ``name``) of a file that could not be linted: ``ERROR_NAMES``."""
    return ERROR_NAMES.get(error.kind, f"{error.kind}-error")


def _error_start(error: FileError) -> tuple[int, int]:
    """Where a file that could not be linted is reported: its error's position, or 1:1 where
    the error has none (a file that cannot be read), as ruff does."""
    return max(error.row, 1), max(error.column, 1)


def _json_items(findings: Sequence[Finding], errors: Sequence[FileError]) -> list[dict[str, Any]]:
    """The objects of ``--format json`` (see :func:`format_json`)."""
    names = _rule_names()
    items: list[dict[str, Any]] = [
        {
            "cell": None,
            "code": f.code,
            "end_location": _location(f.end_row, f.end_column),
            "filename": _json_filename(f.filename),
            "fix": _fix(f),
            "location": _location(f.row, f.column),
            "message": f.message,
            "name": names.get(f.code),
            "noqa_row": f.row,
            "severity": "error",
            "url": None,
            "related": [
                {
                    "message": r.message,
                    "location": _location(r.row, r.column),
                    "end_location": _location(r.end_row, r.end_column),
                }
                for r in f.related
            ],
        }
        for f in findings
    ]
    for e in errors:
        name = _error_name(e)
        where = _location(*_error_start(e))
        items.append(
            {
                "cell": None,
                "code": name,
                "end_location": where,
                "filename": _json_filename(e.filename),
                "fix": None,
                "location": where,
                "message": e.message,
                "name": name,
                "noqa_row": None,
                "severity": "error",
                "url": None,
                "related": [],
            }
        )
    return items


def format_json(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """A JSON list with ruff's field names (``related`` is an extra field).

    Like ruff, which lists a file that does not parse as an ``invalid-syntax`` diagnostic, each
    error follows the findings as an object with the same fields: ``code`` and ``name`` from
    ``ERROR_NAMES``, ``noqa_row`` ``null`` (a directive cannot suppress it) and no ``related``.
    ``fix`` is ruff's ``{applicability, edits, message}`` for a fixable finding (IL001), else
    ``null``.
    """
    return json.dumps(_json_items(findings, errors), indent=2) + "\n"


def format_json_lines(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """The objects of :func:`format_json`, one per line, compact as ruff's ``json-lines``
    writes them; nothing at all for a clean run."""
    return "".join(
        json.dumps(item, separators=(",", ":")) + "\n" for item in _json_items(findings, errors)
    )


def rule_help(rule: type[Rule]) -> str:
    """The plain-text help of a rule: summary, why, bad and good examples, when to suppress."""
    return (
        f"{rule.code} {rule.name}: {rule.summary}\n\n"
        f"Why: {rule.why}\n\n"
        f"Bad:\n{_indent(rule.bad_example)}\n"
        f"Good:\n{_indent(rule.good_example)}\n"
        f"When to suppress: {rule.suppress}\n"
    )


def rule_markdown(rule: type[Rule]) -> str:
    """The Markdown help of a rule (SARIF ``help.markdown`` and docs/rules.md)."""
    return (
        f"{_sentence(rule.summary)}\n\n"
        f"**Why it matters.** {rule.why}\n\n"
        f"**Flagged:**\n\n```python\n{rule.bad_example.rstrip()}\n```\n\n"
        f"**Instead:**\n\n```python\n{rule.good_example.rstrip()}\n```\n\n"
        f"**When to suppress.** {rule.suppress}\n"
    )


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


def _indent(code: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in code.rstrip().splitlines())


def _resolved(filename: str) -> Path:
    """The absolute path of ``filename`` with its directory's symlinks resolved, so that it
    compares with resolved roots; a symlinked file itself is kept, as it was linted."""
    path = Path(os.path.abspath(filename))
    return path.parent.resolve() / path.name


def _relative_uri(filename: str, base: Path) -> str:
    """A percent-encoded URI reference relative to ``base`` (resolved), or an absolute ``file:``
    URI for a file outside it."""
    path = _resolved(filename)
    try:
        relative = path.relative_to(base)
    except ValueError:
        return path.as_uri()
    # Encoded segment by segment: a raw " ", "%" or "#" is not a URI ("#1.py" a fragment).
    return quote(relative.as_posix())


def _physical(uri: str, row: int, column: int, end_row: int, end_column: int) -> dict[str, Any]:
    artifact: dict[str, Any] = {"uri": uri}
    if not uri.startswith("file:"):
        artifact["uriBaseId"] = "%SRCROOT%"
    return {
        "physicalLocation": {
            "artifactLocation": artifact,
            "region": {
                "startLine": max(row, 1),
                "startColumn": max(column, 1),
                "endLine": max(end_row, 1),
                "endColumn": max(end_column, 1),
            },
        }
    }


def _fingerprints(findings: Sequence[Finding], uris: Sequence[str]) -> list[str]:
    # Stable under line moves: the code, the file and the stripped text of the reported line,
    # plus an occurrence counter for identical lines in the same file.
    seen: Counter[str] = Counter()
    prints = []
    for f, uri in zip(findings, uris, strict=True):
        # The decoded path, so that percent-encoding it did not move existing alerts.
        digest = hashlib.sha256(
            "\0".join((f.code, unquote(uri), " ".join(f.source_line.split()))).encode()
        ).hexdigest()[:32]
        seen[digest] += 1
        prints.append(f"{digest}:{seen[digest]}")
    return prints


def format_sarif(
    findings: Sequence[Finding],
    errors: Sequence[FileError],
    rules: Sequence[type[Rule]],
    *,
    root: Path,
    version: str,
) -> str:
    """A SARIF 2.1.0 log that GitHub code scanning accepts.

    ``%SRCROOT%`` is the git work tree holding ``root`` (the project root), else ``root``
    itself: GitHub resolves a relative URI against the repository, wherever the configuration
    is. URIs are relative to it and percent-encoded; every rule carries its help; related
    locations are kept; ``partialFingerprints`` survive line moves.
    """
    resolved = root.resolve()
    base = repository_root(resolved) or resolved
    index = {rule.code: i for i, rule in enumerate(rules)}
    uris = [_relative_uri(f.filename, base) for f in findings]
    results = []
    for f, uri, fingerprint in zip(findings, uris, _fingerprints(findings, uris), strict=True):
        result: dict[str, Any] = {
            "ruleId": f.code,
            "level": "error",
            "message": {"text": f.message},
            "locations": [_physical(uri, f.row, f.column, f.end_row, f.end_column)],
            "partialFingerprints": {"interlaceFindingHash/v1": fingerprint},
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        if f.related:
            result["relatedLocations"] = [
                {
                    "id": i,
                    **_physical(uri, r.row, r.column, r.end_row, r.end_column),
                    "message": {"text": r.message},
                }
                for i, r in enumerate(f.related, start=1)
            ]
        results.append(result)
    notifications = [
        {
            "level": "error",
            "message": {"text": e.message},
            "locations": [
                _physical(_relative_uri(e.filename, base), e.row, e.column, e.row, e.column)
            ],
            "descriptor": {"id": f"interlace/{e.kind}"},
        }
        for e in errors
    ]
    driver_rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.why},
            "help": {"text": rule_help(rule), "markdown": rule_markdown(rule)},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["concurrency", "correctness"]},
        }
        for rule in rules
    ]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "interlace",
                        "version": version,
                        "semanticVersion": version,
                        "rules": driver_rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base.as_uri() + "/"}},
                "invocations": [
                    {
                        "executionSuccessful": not errors,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def escape_github_data(text: str) -> str:
    """Escape a workflow command's message (``%``, ``\\r``, ``\\n``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_github_property(text: str) -> str:
    """Escape a workflow command's property value (also ``:`` and ``,``)."""
    return escape_github_data(text).replace(":", "%3A").replace(",", "%2C")


def _github_paths(filenames: Iterable[str]) -> dict[str, str]:
    """Each file's path as GitHub names it: relative to the git work tree holding it (the
    repository, ``GITHUB_WORKSPACE`` in Actions), whatever the working directory, else absolute.
    """
    roots: dict[Path, Path | None] = {}
    paths: dict[str, str] = {}
    for filename in filenames:
        if filename in paths:
            continue
        path = _resolved(filename)
        if path.parent not in roots:
            roots[path.parent] = repository_root(path.parent)
        root = roots[path.parent]
        paths[filename] = path.relative_to(root).as_posix() if root is not None else str(path)
    return paths


def format_github(findings: Sequence[Finding]) -> str:
    """GitHub Actions ``::error`` workflow commands, one per finding, with repository paths."""
    paths = _github_paths(f.filename for f in findings)
    out = []
    for f in findings:
        path = paths[f.filename]
        props = ",".join(
            f"{key}={escape_github_property(str(value))}"
            for key, value in (
                ("file", path),
                ("line", f.row),
                ("col", f.column),
                ("endLine", f.end_row),
                ("endColumn", f.end_column),
                ("title", f.code),
            )
        )
        message = f.message + "".join(
            f"\n{path}:{r.row}:{r.column}: {r.message}" for r in f.related
        )
        out.append(f"::error {props}::{escape_github_data(message)}\n")
    return "".join(out)


def format_github_errors(errors: Sequence[FileError]) -> str:
    """GitHub ``::error`` commands for files that could not be linted (parse, I/O, internal)."""
    paths = _github_paths(e.filename for e in errors)
    out = []
    for e in errors:
        props = [("file", paths[e.filename]), ("title", f"interlace {e.kind} error")]
        if e.row:
            props[1:1] = [("line", str(e.row)), ("col", str(e.column))]
        rendered = ",".join(f"{k}={escape_github_property(v)}" for k, v in props)
        out.append(f"::error {rendered}::{escape_github_data(e.message)}\n")
    return "".join(out)


def _gitlab_path(filename: str, base: Path) -> str:
    """``filename`` relative to ``base`` with ``/`` separators, or absolute outside it."""
    path = _resolved(filename)
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _gitlab_issue(
    name: str, description: str, severity: str, path: str, span: tuple[int, int, int, int]
) -> dict[str, Any]:
    row, column, end_row, end_column = (max(value, 1) for value in span)
    return {
        "check_name": name,
        "description": description,
        "severity": severity,
        "fingerprint": "",
        "location": {
            "path": path,
            "positions": {
                "begin": {"line": row, "column": column},
                "end": {"line": end_row, "column": end_column},
            },
        },
    }


def format_gitlab(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """GitLab's Code Quality report (``artifacts: reports: codequality``), as ruff writes it:
    a JSON list of issues with ``check_name`` (the code), ``description`` (``CODE: message``),
    ``severity``, a stable ``fingerprint`` and the ``location``, its ``path`` relative to
    ``$CI_PROJECT_DIR`` (else the working directory).

    Findings are ``major``, as in ruff; a file that could not be linted is ``critical``, with
    the ``code`` of ``ERROR_NAMES``. The fingerprints are SARIF's (code, path and the text of
    the line, so they survive the line moving), which GitLab needs to tell new issues from old.
    """
    base = Path(os.environ.get("CI_PROJECT_DIR") or os.getcwd()).resolve()
    paths = [_gitlab_path(f.filename, base) for f in findings]
    issues = []
    for f, path, fingerprint in zip(findings, paths, _fingerprints(findings, paths), strict=True):
        span = (f.row, f.column, f.end_row, f.end_column)
        issue = _gitlab_issue(f.code, f"{f.code}: {f.message}", "major", path, span)
        issue["fingerprint"] = fingerprint
        issues.append(issue)
    for e in errors:
        path = _gitlab_path(e.filename, base)
        name = ERROR_NAMES.get(e.kind, ERROR_NAMES["internal"])
        issue = _gitlab_issue(name, f"{name}: {e.message}", "critical", path, (e.row, e.column) * 2)
        digest = hashlib.sha256("\0".join((name, path, e.message)).encode()).hexdigest()[:32]
        issue["fingerprint"] = digest
        issues.append(issue)
    return json.dumps(issues, indent=2) + "\n"


@dataclass(frozen=True, slots=True)
class _Entry:
    """A finding, or a file that could not be linted, as the formats that list both show it.

    Attributes:
        filename: as displayed (relative to the working directory when below it).
        row, column, end_row, end_column: the span; a file error's is its position (1:1
            where it has none), empty.
        code: the rule code, or for a file error its name in ``ERROR_NAMES``.
        message: the finding's full message, or the error printed on stderr.
        related: the finding's related locations.
        fix: the finding's edit (IL001), or ``None``.
        error: whether this is a file that could not be linted (ruff's diagnostics without a
            rule code, such as ``invalid-syntax``).
    """

    filename: str
    row: int
    column: int
    end_row: int
    end_column: int
    code: str
    message: str
    related: tuple[RelatedLocation, ...] = ()
    fix: NoqaEdit | None = None
    error: bool = False


def _entries(findings: Sequence[Finding], errors: Sequence[FileError]) -> list[_Entry]:
    """The findings, then the file errors, in the order of ``--format json``."""
    entries = [
        _Entry(
            f.filename,
            f.row,
            f.column,
            f.end_row,
            f.end_column,
            f.code,
            f.message,
            related=f.related,
            fix=f.fix,
        )
        for f in findings
    ]
    for e in errors:
        row, column = _error_start(e)
        entries.append(
            _Entry(e.filename, row, column, row, column, _error_name(e), e.message, error=True)
        )
    return entries


def _by_file(entries: Iterable[_Entry]) -> list[tuple[str, list[_Entry]]]:
    """``entries`` grouped by file, the files sorted by absolute path as ruff sorts them
    (component by component), each file's entries in their order."""
    groups: dict[str, list[_Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.filename, []).append(entry)
    return sorted(groups.items(), key=lambda group: Path(_json_filename(group[0])))


def format_pylint(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """One ``path:row: [CODE] message`` line per finding and per file that could not be linted,
    as ruff's ``pylint`` format (pylint's ``parseable`` layout, without the column)."""
    return "".join(
        f"{e.filename}:{e.row}: [{e.code}] {e.message}\n" for e in _entries(findings, errors)
    )


def format_grouped(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """Ruff's ``grouped`` format: each file's name, then one indented ``row:col CODE message``
    line per finding (``[*]`` after a fixable one's code; ``name: message`` for a file that
    could not be linted), rows and columns aligned within the file, and a blank line after
    each file."""
    out: list[str] = []
    for filename, entries in _by_file(_entries(findings, errors)):
        rows = max(len(str(e.row)) for e in entries)
        columns = max(len(str(e.column)) for e in entries)
        out.append(f"{filename}:\n")
        for e in entries:
            if e.error:
                body = f"{e.code}: {e.message}"
            else:
                body = f"{e.code} {'[*] ' if e.fix is not None else ''}{e.message}"
            out.append(f"  {e.row:>{rows}}:{e.column:<{columns}} {body}\n")
        out.append("\n")
    return "".join(out)


def escape_azure(text: str) -> str:
    """Escape an Azure Pipelines logging command's property value or message, as the agent
    unescapes them: ``%`` first (``%AZP25``), then ``;``, ``\\r``, ``\\n`` and ``]``."""
    return (
        text.replace("%", "%AZP25")
        .replace(";", "%3B")
        .replace("\r", "%0D")
        .replace("\n", "%0A")
        .replace("]", "%5D")
    )


def format_azure(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """Azure Pipelines ``##vso[task.logissue]`` logging commands, one per finding and per file
    that could not be linted, with ruff's properties (the absolute path as ``sourcepath``).

    Unlike ruff, which writes them as they are, paths, codes and messages are escaped
    (:func:`escape_azure`), so a ``;`` or ``]`` in a path cannot cut the command short; a
    finding's related locations follow its message on lines of their own, as in
    :func:`format_github`.
    """
    out = []
    for e in _entries(findings, errors):
        path = _json_filename(e.filename)
        props = "".join(
            f"{key}={escape_azure(str(value))};"
            for key, value in (
                ("type", "error"),
                ("sourcepath", path),
                ("linenumber", e.row),
                ("columnnumber", e.column),
                ("code", e.code),
            )
        )
        message = e.message + "".join(
            f"\n{path}:{r.row}:{r.column}: {r.message}" for r in e.related
        )
        out.append(f"##vso[task.logissue {props}]{escape_azure(message)}\n")
    return "".join(out)


def _xml_char(ch: str) -> str:
    """``ch``, or where XML 1.0 cannot hold it at all (most C0 controls, a surrogate from an
    undecodable file name) its Python escape, so that the document stays well-formed."""
    code = ord(ch)
    # XML 1.0's Char production.
    if code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD:
        return ch
    return ch if code >= 0x10000 else ch.encode("unicode_escape").decode("ascii")


_XML_TEXT = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;", "\r": "&#13;"}
_XML_ATTRIBUTE = {**_XML_TEXT, "\n": "&#10;", "\t": "&#9;"}
"""The references for text and attribute values: the five entities, as ruff writes them, and
the whitespace a parser would otherwise normalise away (a line break in an attribute)."""


def _xml(text: str, *, attribute: bool = False) -> str:
    table = _XML_ATTRIBUTE if attribute else _XML_TEXT
    return "".join(table.get(ch) or _xml_char(ch) for ch in text)


def _junit_case(entry: _Entry, classname: str) -> list[str]:
    body = f"line {entry.row}, col {entry.column}, {entry.message}" + "".join(
        f"\nline {r.row}, col {r.column}, {r.message}" for r in entry.related
    )
    return [
        f'        <testcase name="org.interlace.{_xml(entry.code, attribute=True)}" '
        f'classname="{_xml(classname, attribute=True)}" line="{entry.row}" '
        f'column="{entry.column}">',
        "            <properties>",
        '                <property name="severity" value="error"/>',
        "            </properties>",
        f'            <failure message="{_xml(entry.message, attribute=True)}">'
        f"{_xml(body)}</failure>",
        "        </testcase>",
    ]


def format_junit(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """JUnit XML as ruff writes it: a ``testsuite`` per file (its absolute path), a
    ``testcase`` per finding and per file that could not be linted (``org.interlace.CODE``, the
    path without its extension as ``classname``, ``line`` and ``column``) with a ``failure``
    whose text is ``line R, col C, message``; a clean run is one passing ``testcase``.

    A finding's related locations follow in the failure's text, one ``line R, col C, message``
    line each. Every value is escaped, and characters XML cannot hold are spelt as Python
    escapes, so the document is well-formed whatever the paths and messages.
    """
    groups = _by_file(_entries(findings, errors))
    total = sum(len(entries) for _, entries in groups)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="interlace" tests="{max(total, 1)}" skipped="0" '
        f'failures="{total}" errors="0">',
    ]
    for filename, entries in groups:
        path = _json_filename(filename)
        out.append(
            f'    <testsuite name="{_xml(path, attribute=True)}" tests="{len(entries)}" '
            f'skipped="0" errors="0" failures="{len(entries)}" package="org.interlace">'
        )
        classname = os.path.splitext(path)[0]
        for entry in entries:
            out.extend(_junit_case(entry, classname))
        out.append("    </testsuite>")
    if not groups:
        out.extend(
            [
                '    <testsuite name="interlace" tests="1" skipped="0" errors="0" failures="0" '
                'package="org.interlace">',
                '        <testcase name="No errors found" classname="interlace"/>',
                "    </testsuite>",
            ]
        )
    out.append("</testsuites>")
    return "".join(f"{line}\n" for line in out)


def _rd_range(row: int, column: int, end_row: int, end_column: int) -> dict[str, Any]:
    return {
        "start": {"line": row, "column": column},
        "end": {"line": end_row, "column": end_column},
    }


def format_rdjson(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """Reviewdog's Diagnostic Format (``DiagnosticResult``) as ruff writes it: source
    ``interlace``, severity ``WARNING``, each diagnostic's ``code``, ``message`` and
    ``location`` (the absolute path, 1-based columns counted in characters as ruff does), and
    a fixable finding's edit as its ``suggestions``. Keys are sorted, as in ruff.

    The rules have no documentation URL, so ``code`` has no ``url``. A finding's related
    locations are reviewdog's ``related_locations``, which ruff has no use for.
    """
    diagnostics = []
    for e in _entries(findings, errors):
        path = _json_filename(e.filename)
        diagnostic: dict[str, Any] = {
            "code": {"value": e.code},
            "location": {
                "path": path,
                "range": _rd_range(e.row, e.column, e.end_row, e.end_column),
            },
            "message": e.message,
        }
        if e.related:
            diagnostic["related_locations"] = [
                {
                    "location": {
                        "path": path,
                        "range": _rd_range(r.row, r.column, r.end_row, r.end_column),
                    },
                    "message": r.message,
                }
                for r in e.related
            ]
        if e.fix is not None:
            edit = e.fix
            diagnostic["suggestions"] = [
                {
                    "range": _rd_range(edit.row, edit.column, edit.end_row, edit.end_column),
                    "text": edit.content,
                }
            ]
        diagnostics.append(diagnostic)
    result = {"diagnostics": diagnostics, "severity": "WARNING", "source": {"name": "interlace"}}
    return json.dumps(result, indent=2, sort_keys=True) + "\n"


def _by_count(findings: Sequence[Finding]) -> list[tuple[str, int]]:
    counts = Counter(f.code for f in findings)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _fixable_counts(findings: Sequence[Finding]) -> Counter[str]:
    """How many findings of each code have a fix."""
    return Counter(f.code for f in findings if _fix(f) is not None)


def format_statistics(findings: Sequence[Finding], rules: Sequence[type[Rule]]) -> str:
    """Counts per code, most frequent first, like ruff's ``--statistics``: when any finding
    is fixable, each name is marked ``[*]`` (fixable) or ``[ ]``."""
    names = {rule.code: rule.name for rule in rules}
    fixable = _fixable_counts(findings)
    return "".join(
        f"{count:>5}\t{code}\t{('[*] ' if code in fixable else '[ ] ') if fixable else ''}"
        f"{names.get(code, '')}\n"
        for code, count in _by_count(findings)
    )


def _statistics_items(
    findings: Sequence[Finding], rules: Sequence[type[Rule]]
) -> list[dict[str, Any]]:
    names = {rule.code: rule.name for rule in rules}
    fixable = _fixable_counts(findings)
    return [
        {
            "code": code,
            "name": names.get(code),
            "count": count,
            "fixable": code in fixable,
            "fixable_count": fixable[code],
        }
        for code, count in _by_count(findings)
    ]


def format_statistics_json(findings: Sequence[Finding], rules: Sequence[type[Rule]]) -> str:
    """Counts per code, most frequent first, with the fields of ruff's ``--statistics
    --output-format json`` (only IL001's findings have a fix)."""
    return json.dumps(_statistics_items(findings, rules), indent=2) + "\n"


def format_statistics_json_lines(findings: Sequence[Finding], rules: Sequence[type[Rule]]) -> str:
    """The objects of :func:`format_statistics_json`, one per line (ruff refuses
    ``--statistics`` in its ``json-lines`` format; a JSON Lines reader gets JSON Lines)."""
    return "".join(
        json.dumps(item, separators=(",", ":")) + "\n"
        for item in _statistics_items(findings, rules)
    )
