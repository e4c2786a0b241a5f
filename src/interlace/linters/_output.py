"""Output formats: text (ruff's full format), concise, JSON (ruff's field names), SARIF 2.1.0 and
GitHub workflow annotations."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from interlace.linters._engine import FileError, Finding
from interlace.linters._files import repository_root
from interlace.linters._rule import Rule

__all__ = (
    "ERROR_NAMES",
    "FORMATS",
    "escape_github_data",
    "escape_github_property",
    "format_concise",
    "format_github",
    "format_github_errors",
    "format_json",
    "format_sarif",
    "format_statistics",
    "format_statistics_json",
    "format_text",
    "rule_help",
    "rule_markdown",
)

FORMATS = ("text", "concise", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
ERROR_NAMES = {
    "syntax": "invalid-syntax",
    "io": "io-error",
    "limit": "too-deeply-nested",
    "internal": "internal-error",
}
"""The ``code`` and ``name`` of a file that could not be linted, by ``FileError.kind``, in the
JSON output (ruff's own names where it has the diagnostic)."""


def _marker_width(finding: Finding) -> int:
    if finding.end_row == finding.row:
        return max(1, finding.end_column - finding.column)
    return max(1, len(finding.source_line) - finding.column + 1)


def format_text(findings: Sequence[Finding]) -> str:
    """Render findings like ruff's full format: the message, the code line with ``^`` markers
    under the reported span, and each related location as a note."""
    out: list[str] = []
    for f in findings:
        out.append(f"{f.filename}:{f.row}:{f.column}: {f.code} {f.message}")
        gutter = " " * len(str(f.row))
        line = f.source_line.expandtabs(1)
        out.append(f"{gutter} |")
        out.append(f"{f.row} | {line}")
        out.append(f"{gutter} | {' ' * (f.column - 1)}{'^' * _marker_width(f)} {f.code}")
        out.append(f"{gutter} |")
        for rel in f.related:
            out.append(f"{gutter} = note: {f.filename}:{rel.row}:{rel.column}: {rel.message}")
        out.append("")
    return "\n".join(out)


def format_concise(findings: Sequence[Finding]) -> str:
    """One ``file:row:col: CODE message`` line per finding."""
    return "".join(f"{f.filename}:{f.row}:{f.column}: {f.code} {f.message}\n" for f in findings)


def _location(row: int, column: int) -> dict[str, int]:
    return {"row": row, "column": column}


def _rule_names() -> dict[str, str]:
    from interlace.linters.rules import all_rules

    return {rule.code: rule.name for rule in all_rules()}


def format_json(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """A JSON list with ruff's field names (``related`` is an extra field).

    Like ruff, which lists a file that does not parse as an ``invalid-syntax`` diagnostic, each
    error follows the findings as an object with the same fields: ``code`` and ``name`` from
    ``ERROR_NAMES``, ``noqa_row`` ``null`` (a directive cannot suppress it) and no ``related``.
    """
    names = _rule_names()
    items: list[dict[str, Any]] = [
        {
            "cell": None,
            "code": f.code,
            "end_location": _location(f.end_row, f.end_column),
            "filename": os.path.abspath(f.filename),
            "fix": None,
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
        name = ERROR_NAMES.get(e.kind, f"{e.kind}-error")
        # Where the error has no position (a file that cannot be read), 1:1, as ruff does.
        where = _location(max(e.row, 1), max(e.column, 1))
        items.append(
            {
                "cell": None,
                "code": name,
                "end_location": where,
                "filename": os.path.abspath(e.filename),
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
    return json.dumps(items, indent=2) + "\n"


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


def _by_count(findings: Sequence[Finding]) -> list[tuple[str, int]]:
    counts = Counter(f.code for f in findings)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def format_statistics(findings: Sequence[Finding], rules: Sequence[type[Rule]]) -> str:
    """Counts per code, most frequent first, like ruff's ``--statistics``."""
    names = {rule.code: rule.name for rule in rules}
    return "".join(
        f"{count:>5}\t{code}\t{names.get(code, '')}\n" for code, count in _by_count(findings)
    )


def format_statistics_json(findings: Sequence[Finding], rules: Sequence[type[Rule]]) -> str:
    """Counts per code, most frequent first, with the fields of ruff's ``--statistics
    --output-format json`` (no rule has a fix, so ``fixable`` is always false)."""
    names = {rule.code: rule.name for rule in rules}
    items = [
        {
            "code": code,
            "name": names.get(code),
            "count": count,
            "fixable": False,
            "fixable_count": 0,
        }
        for code, count in _by_count(findings)
    ]
    return json.dumps(items, indent=2) + "\n"
