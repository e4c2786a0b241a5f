"""Output formats: text (ruff's full format), concise, JSON and JSON Lines (ruff's field names),
SARIF 2.1.0, GitHub workflow annotations, GitLab's Code Quality report, and ruff's JUnit XML,
pylint, Azure Pipelines, grouped and reviewdog (rdjson) formats.

A finding in a Jupyter notebook has a cell and rows that count that cell's lines (see
:class:`Finding`), and each format shows it where its reader looks:

- the formats a human reads (text, concise, grouped) say ``path:cell N:row:col``, as ruff does;
- JSON and JSON Lines keep ruff's cell-relative locations and carry the cell in ``cell``;
- the formats a machine places in the file (SARIF, GitHub, GitLab, Azure, rdjson, JUnit,
  pylint) place it by its span in the ``.ipynb`` text (``raw_span``), where the cell's rows
  mean nothing, and name the cell location in the message that a human reads there.

A Python file's output is the same as before notebooks were linted.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, unquote

from interlace.linters._engine import FileError, Finding, RelatedLocation, Span, span_rows
from interlace.linters._files import repository_root
from interlace.linters._rule import Rule

if TYPE_CHECKING:
    from interlace.linters._noqa import NoqaEdit

__all__ = (
    "ERROR_NAMES",
    "FALLBACK_SPAN",
    "FORMATS",
    "error_place",
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
    "full",
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

FALLBACK_SPAN: Span = (1, 1, 1, 1)
"""Where the formats that place a finding in the file put a notebook location whose place in
the ``.ipynb`` text is unknown: the file's start, clearly not the finding's own place (ruff puts
every notebook finding there in those formats)."""


class _Located(Protocol):
    """A finding, a related location or an :class:`_Entry`: a span, and in a notebook its cell
    and its span in the ``.ipynb`` text."""

    @property
    def row(self) -> int: ...
    @property
    def column(self) -> int: ...
    @property
    def end_row(self) -> int: ...
    @property
    def end_column(self) -> int: ...
    @property
    def cell(self) -> int | None: ...
    @property
    def raw_span(self) -> Span | None: ...


def _place(row: int, column: int, cell: int | None) -> str:
    """A location as a human reads it: ``row:col``, or in a notebook ruff's ``cell N:row:col``
    (the rows count the cell's lines, as Jupyter shows them)."""
    return f"{row}:{column}" if cell is None else f"cell {cell}:{row}:{column}"


def _label(loc: _Located) -> str:
    """The start of ``loc`` as a human reads it (:func:`_place`)."""
    return _place(loc.row, loc.column, loc.cell)


def _file_span(loc: _Located) -> Span:
    """Where ``loc`` is in the file that was read, for the formats a machine places in it: its
    own span in a Python file; in a notebook its span in the ``.ipynb`` text, where the cell's
    rows would point at the wrong lines, or ``FALLBACK_SPAN`` when that is unknown."""
    if loc.raw_span is not None:
        return loc.raw_span
    if loc.cell is None:
        return loc.row, loc.column, loc.end_row, loc.end_column
    return FALLBACK_SPAN


def _in_cell(loc: _Located, message: str, path: str = "") -> str:
    """``message`` for a format that places ``loc`` by :func:`_file_span`: in a notebook it
    starts with ``cell N:row:col:`` (after ``path:`` if given), since the line it is shown at
    is a line of the notebook's JSON, not what the reader sees in Jupyter. Unchanged in a
    Python file."""
    return message if loc.cell is None else f"{path}{_label(loc)}: {message}"


def _related_lines(path: str, related: Iterable[RelatedLocation]) -> str:
    """The related locations as the lines that follow a message in the logging commands of
    GitHub and Azure: ``path:row:col: message`` each (``path:cell N:row:col:`` in a notebook)."""
    return "".join(f"\n{path}:{_label(r)}: {r.message}" for r in related)


def error_place(error: FileError) -> str:
    """Where a file that could not be linted is said to be on the command line: ``path:row:col``
    (``path:cell N:row:col`` for an error in a notebook's cell), or the path alone for an
    error without a position (a file that cannot be read)."""
    if not error.row:
        return error.filename
    return f"{error.filename}:{_place(error.row, error.column, error.cell)}"


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
    the reported one first. A related location in another cell of a notebook is not drawn
    (the lines are the finding's cell's): :func:`_notes` names it."""
    lines = dict(f.context) or {f.row: f.source_line}
    spanned = span_rows(f.row, f.end_row) if f.end_row > f.row else []
    marks: dict[int, list[tuple[int, str]]] = {}  # row -> (column, marker line) by column
    located: dict[int, int] = {}  # row -> the column of the first location marked on it
    drawn = (rel for rel in f.related if rel.cell == f.cell)
    for rel in sorted(drawn, key=lambda r: (r.row, r.column)):
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
        place = _place(first, located[first], f.cell)
        out.append(f"{gutter}{'-->' if index == 0 else ':::'} {f.filename}:{place}")
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


def _notes(f: Finding) -> list[str]:
    """A ``note: cell M:row:col: message`` line for each related location of ``f`` in another
    cell of its notebook than ``f``'s, which its snippet cannot show (rare: a suspension point
    in a function defined in another cell)."""
    return [f"note: {_label(rel)}: {rel.message}" for rel in f.related if rel.cell != f.cell]


def format_text(findings: Sequence[Finding]) -> str:
    """Render findings in ruff's full format: ``CODE <what>``, the location, the code with
    ``^`` under the reported span and ``-`` under each related location (the check, the
    suspension point, the act) with its message, then ``info: <why>`` and
    ``help: <instead>``; a blank line after each, as ruff does. A fixable finding's code is
    followed by ``[*]``, as in ruff.

    In a notebook, locations read ``path:cell N:row:col`` and the gutter numbers the cell's
    lines, as ruff shows them; a related location in another cell follows the snippet as a
    ``note:`` line."""
    out: list[str] = []
    for f in findings:
        what, why, instead = message_parts(f.message)
        out.append(f"{f.code} {'[*] ' if f.fix is not None else ''}{what}")
        out.extend(_snippet(f))
        out.extend(_notes(f))
        if why:
            out.append(f"info: {why}")
        if instead:
            out.append(f"help: {instead}")
        out.append("")
    return "".join(f"{line}\n" for line in out)


def format_concise(findings: Sequence[Finding]) -> str:
    """One ``file:row:col: CODE message`` line per finding (``file:cell N:row:col:`` in a
    notebook, as ruff's)."""
    return "".join(f"{f.filename}:{_label(f)}: {f.code} {f.message}\n" for f in findings)


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


def _json_related(r: RelatedLocation) -> dict[str, Any]:
    """A related location in ``--format json``; in a notebook with its ``cell``, which may not
    be the finding's (a Python file's has no such field, as before notebooks)."""
    item: dict[str, Any] = {
        "message": r.message,
        "location": _location(r.row, r.column),
        "end_location": _location(r.end_row, r.end_column),
    }
    if r.cell is not None:
        item["cell"] = r.cell
    return item


def _json_items(findings: Sequence[Finding], errors: Sequence[FileError]) -> list[dict[str, Any]]:
    """The objects of ``--format json`` (see :func:`format_json`)."""
    names = _rule_names()
    items: list[dict[str, Any]] = [
        {
            "cell": f.cell,
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
            "related": [_json_related(r) for r in f.related],
        }
        for f in findings
    ]
    for e in errors:
        name = _error_name(e)
        where = _location(*_error_start(e))
        items.append(
            {
                "cell": e.cell,
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

    In a notebook, as in ruff's, ``cell`` is the cell's number and every row (``location``,
    ``end_location``, ``noqa_row``, the fix's edits) counts that cell's lines; a related
    location has its own ``cell``. A file error in a cell has its ``cell`` too.
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
    # The path's bytes: a file name that is not UTF-8 is percent-encoded as it is on disk.
    return quote(os.fsencode(relative.as_posix()))


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
    # plus an occurrence counter for identical lines in the same file. In a notebook the line
    # is the cell's and the cell number is left out, so inserting a cell above moves no alert;
    # the counter keeps two findings on identical lines in two cells apart.
    seen: Counter[str] = Counter()
    prints = []
    for f, uri in zip(findings, uris, strict=True):
        # The decoded path, so that percent-encoding it did not move existing alerts.
        digest = hashlib.sha256(
            "\0".join((f.code, unquote(uri), " ".join(f.source_line.split()))).encode(
                "utf-8",
                "surrogateescape",  # a file name that is not UTF-8
            )
        ).hexdigest()[:32]
        seen[digest] += 1
        prints.append(f"{digest}:{seen[digest]}")
    return prints


def _sarif_cell(loc: _Located) -> dict[str, Any]:
    """The ``properties`` bag that names the notebook cell of ``loc``; nothing in a Python
    file."""
    return {} if loc.cell is None else {"properties": {"cell": loc.cell}}


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

    In a notebook, regions are the spans in the ``.ipynb`` text (GitHub shows that file), each
    message starts with the ``cell N:row:col`` a reader finds in Jupyter, and the result, each
    related location and each notification of an error in a cell carry ``cell`` in their
    ``properties``.
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
            "message": {"text": _in_cell(f, f.message)},
            "locations": [_physical(uri, *_file_span(f))],
            "partialFingerprints": {"interlaceFindingHash/v1": fingerprint},
            **_sarif_cell(f),
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        if f.related:
            result["relatedLocations"] = [
                {
                    "id": i,
                    **_physical(uri, *_file_span(r)),
                    "message": {"text": _in_cell(r, r.message)},
                    **_sarif_cell(r),
                }
                for i, r in enumerate(f.related, start=1)
            ]
        results.append(result)
    notifications = []
    for e in errors:
        entry = _error_entry(e)
        notifications.append(
            {
                "level": "error",
                "message": {"text": _in_cell(entry, e.message)},
                "locations": [_physical(_relative_uri(e.filename, base), *_file_span(entry))],
                "descriptor": {"id": f"interlace/{e.kind}"},
                **_sarif_cell(entry),
            }
        )
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
    """GitHub Actions ``::error`` workflow commands, one per finding, with repository paths.

    In a notebook, the annotation is placed at the finding's span in the ``.ipynb`` text
    (GitHub shows that file's lines), and the message starts with ``path:cell N:row:col:``."""
    paths = _github_paths(f.filename for f in findings)
    out = []
    for f in findings:
        path = paths[f.filename]
        row, column, end_row, end_column = _file_span(f)
        props = ",".join(
            f"{key}={escape_github_property(str(value))}"
            for key, value in (
                ("file", path),
                ("line", row),
                ("col", column),
                ("endLine", end_row),
                ("endColumn", end_column),
                ("title", f.code),
            )
        )
        message = _in_cell(f, f.message, f"{path}:") + _related_lines(path, f.related)
        out.append(f"::error {props}::{escape_github_data(message)}\n")
    return "".join(out)


def format_github_errors(errors: Sequence[FileError]) -> str:
    """GitHub ``::error`` commands for files that could not be linted (parse, I/O, internal);
    an error in a notebook's cell is placed and named as :func:`format_github` does a finding.
    """
    paths = _github_paths(e.filename for e in errors)
    out = []
    for e in errors:
        path = paths[e.filename]
        entry = _error_entry(e)
        props = [("file", path), ("title", f"interlace {e.kind} error")]
        if e.row:
            row, column, _, _ = _file_span(entry)
            props[1:1] = [("line", str(row)), ("col", str(column))]
        rendered = ",".join(f"{k}={escape_github_property(v)}" for k, v in props)
        message = _in_cell(entry, e.message, f"{path}:")
        out.append(f"::error {rendered}::{escape_github_data(message)}\n")
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

    In a notebook, positions are the spans in the ``.ipynb`` text and the description names
    the ``cell N:row:col``, as SARIF's message.
    """
    base = Path(os.environ.get("CI_PROJECT_DIR") or os.getcwd()).resolve()
    paths = [_gitlab_path(f.filename, base) for f in findings]
    issues = []
    for f, path, fingerprint in zip(findings, paths, _fingerprints(findings, paths), strict=True):
        description = f"{f.code}: {_in_cell(f, f.message)}"
        issue = _gitlab_issue(f.code, description, "major", path, _file_span(f))
        issue["fingerprint"] = fingerprint
        issues.append(issue)
    for e in errors:
        path = _gitlab_path(e.filename, base)
        name = ERROR_NAMES.get(e.kind, ERROR_NAMES["internal"])
        entry = _error_entry(e)
        description = f"{name}: {_in_cell(entry, e.message)}"
        issue = _gitlab_issue(name, description, "critical", path, _file_span(entry))
        digest = hashlib.sha256(
            "\0".join((name, path, e.message)).encode("utf-8", "surrogateescape")
        ).hexdigest()[:32]
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
        cell, raw_span: in a notebook, the cell (whose lines the rows count) and the span in
            the ``.ipynb`` text, as in :class:`Finding`; a file error's ``raw_position``, empty.
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
    cell: int | None = None
    raw_span: Span | None = None


def _error_entry(e: FileError) -> _Entry:
    """A file that could not be linted as an entry: at its position (:func:`_error_start`)."""
    row, column = _error_start(e)
    raw = None if e.raw_position is None else (*e.raw_position, *e.raw_position)
    return _Entry(
        e.filename,
        row,
        column,
        row,
        column,
        _error_name(e),
        e.message,
        error=True,
        cell=e.cell,
        raw_span=raw,
    )


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
            cell=f.cell,
            raw_span=f.raw_span,
        )
        for f in findings
    ]
    entries.extend(_error_entry(e) for e in errors)
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
    as ruff's ``pylint`` format (pylint's ``parseable`` layout, without the column).

    The tools that read this layout place each line in the file, so in a notebook ``row`` is
    the line of the ``.ipynb`` text, and the message starts with the ``cell N:row:col`` a
    reader finds in Jupyter."""
    return "".join(
        f"{e.filename}:{_file_span(e)[0]}: [{e.code}] {_in_cell(e, e.message)}\n"
        for e in _entries(findings, errors)
    )


def format_grouped(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """Ruff's ``grouped`` format: each file's name, then one indented ``row:col CODE message``
    line per finding (``[*]`` after a fixable one's code; ``name: message`` for a file that
    could not be linted), rows and columns aligned within the file, and a blank line after
    each file. In a notebook the row reads ``cell N:row``, as in ruff's."""
    out: list[str] = []
    for filename, entries in _by_file(_entries(findings, errors)):
        places = [_label(e).rpartition(":")[::2] for e in entries]  # ("cell N:row", "col")
        rows = max(len(row) for row, _ in places)
        columns = max(len(column) for _, column in places)
        out.append(f"{filename}:\n")
        for e, (row, column) in zip(entries, places, strict=True):
            if e.error:
                body = f"{e.code}: {e.message}"
            else:
                body = f"{e.code} {'[*] ' if e.fix is not None else ''}{e.message}"
            out.append(f"  {row:>{rows}}:{column:<{columns}} {body}\n")
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
    :func:`format_github`, which this follows for a notebook too.
    """
    out = []
    for e in _entries(findings, errors):
        path = _json_filename(e.filename)
        row, column, _, _ = _file_span(e)
        props = "".join(
            f"{key}={escape_azure(str(value))};"
            for key, value in (
                ("type", "error"),
                ("sourcepath", path),
                ("linenumber", row),
                ("columnnumber", column),
                ("code", e.code),
            )
        )
        message = _in_cell(e, e.message, f"{path}:") + _related_lines(path, e.related)
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


def _junit_place(loc: _Located) -> str:
    """``line R, col C`` as a JUnit failure's text says where (``cell N, line R, col C`` in a
    notebook: the rows count the cell's lines)."""
    place = f"line {loc.row}, col {loc.column}"
    return place if loc.cell is None else f"cell {loc.cell}, {place}"


def _junit_case(entry: _Entry, classname: str) -> list[str]:
    body = f"{_junit_place(entry)}, {entry.message}" + "".join(
        f"\n{_junit_place(r)}, {r.message}" for r in entry.related
    )
    row, column, _, _ = _file_span(entry)
    return [
        f'        <testcase name="org.interlace.{_xml(entry.code, attribute=True)}" '
        f'classname="{_xml(classname, attribute=True)}" line="{row}" '
        f'column="{column}">',
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

    In a notebook, the ``line`` and ``column`` attributes, which tools use to open the file,
    are those of the ``.ipynb`` text, and the failure's text reads ``cell N, line R, col C``.
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

    In a notebook, ranges are the spans in the ``.ipynb`` text, where reviewdog comments, and
    messages start with the ``cell N:row:col`` a reader finds in Jupyter. A notebook finding
    has no ``suggestions``: its edit is in the cell's code, and reviewdog would apply it to
    the notebook's JSON.
    """
    diagnostics = []
    for e in _entries(findings, errors):
        path = _json_filename(e.filename)
        diagnostic: dict[str, Any] = {
            "code": {"value": e.code},
            "location": {"path": path, "range": _rd_range(*_file_span(e))},
            "message": _in_cell(e, e.message),
        }
        if e.related:
            diagnostic["related_locations"] = [
                {
                    "location": {"path": path, "range": _rd_range(*_file_span(r))},
                    "message": _in_cell(r, r.message),
                }
                for r in e.related
            ]
        if e.fix is not None and e.cell is None:
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
