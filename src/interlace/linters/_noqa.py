"""``interlace lint --add-noqa``: suppress every current finding with a ``# noqa`` directive.

The directive goes where the engine looks for it: the line a finding's row names (the first line
of the reported code), split the way the engine splits (``LINE_BREAK``). Codes for one line are
merged into one directive, sorted; a line that already has ``# noqa: CODES`` gets the new codes
merged into that directive, any others it lists kept. Otherwise ``  # noqa: CODES`` is appended,
as ruff does.

Invariant: a file is rewritten only if its bytes decode and re-encode to themselves, and only the
ends of the lines that get a directive change; it is replaced atomically (a temporary file in the
same directory, then ``os.replace``) with its mode kept. A line where a comment cannot go (it
ends inside a multi-line string or with a backslash continuation) is left alone and reported.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from interlace.linters._engine import LINE_BREAK, NOQA, Finding, noqa_codes

__all__ = ("NoqaResult", "UnsuppressedLine", "add_noqa")

_LINES_AND_BREAKS = re.compile(f"({LINE_BREAK.pattern})")


@dataclass(frozen=True, slots=True)
class UnsuppressedLine:
    """Findings that ``add_noqa`` could not suppress: one line (``row`` > 0) or a whole file."""

    filename: str
    row: int
    codes: tuple[str, ...]
    findings: int
    reason: str


@dataclass
class NoqaResult:
    """What ``add_noqa`` did: directives added or extended, and what it had to leave alone."""

    added: int = 0
    unsuppressed: list[UnsuppressedLine] = field(default_factory=list)


class _LineFacts(cst.CSTVisitor):
    """Which rows end inside a string literal, and where each row's comment starts."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.in_string: set[int] = set()
        self.comments: dict[int, int] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        # A concatenation's parts sit on their own lines; the line breaks between them are code.
        if isinstance(node, cst.BaseString) and not isinstance(node, cst.ConcatenatedString):
            where = self.get_metadata(PositionProvider, node)
            self.in_string.update(range(where.start.line, where.end.line))
        elif isinstance(node, cst.Comment):
            where = self.get_metadata(PositionProvider, node)
            self.comments.setdefault(where.start.line, where.start.column)
        return True


def _why_not(row: int, line: str, facts: _LineFacts) -> str | None:
    """Why a comment cannot end line ``row``, or ``None`` if it can."""
    if row in facts.in_string:
        return (
            "the line ends inside a multi-line string, where a comment would become part of the "
            "string; start the string on a line of its own (or bind it to a name first), then "
            "run --add-noqa again"
        )
    if row not in facts.comments and line.endswith("\\"):
        return (
            "the line ends with a backslash continuation, after which a comment is a syntax "
            "error; wrap the expression in parentheses instead, then run --add-noqa again"
        )
    return None


def _with_directive(line: str, comment_column: int | None, codes: set[str]) -> str:
    if comment_column is not None:
        match = NOQA.search(line, comment_column)
        if match is not None:
            listed = noqa_codes(match.group())
            if not listed:  # a bare directive already suppresses every code
                return line
            merged = ", ".join(sorted(listed | codes))
            return f"{line[: match.start()]}# noqa: {merged}{line[match.end() :]}"
    return f"{line.rstrip()}  # noqa: {', '.join(sorted(codes))}"


def _replace(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, keeping the file's permission bits."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _add_to_file(path: str, findings: Sequence[Finding]) -> NoqaResult:
    display = findings[0].filename
    all_codes = tuple(sorted({f.code for f in findings}))

    def whole_file(reason: str) -> NoqaResult:
        line = UnsuppressedLine(display, 0, all_codes, len(findings), reason)
        return NoqaResult(unsuppressed=[line])

    try:
        data = Path(path).read_bytes()
        module = cst.parse_module(data)
        text = data.decode(module.encoding)
    except OSError as exc:
        return whole_file(f"cannot read the file: {exc}")
    except Exception as exc:  # it parsed when it was linted, so it has changed since
        summary = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return whole_file(f"cannot parse the file any more ({summary}); run --add-noqa again")
    if text.encode(module.encoding) != data:
        return whole_file(
            f"its bytes do not survive decoding and re-encoding as {module.encoding}, so "
            "rewriting it could change more than the directives; add them by hand"
        )
    parts = _LINES_AND_BREAKS.split(text)  # line, break, line, ..., line (maybe "")
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        row = finding.row
        if not 0 < row <= len(parts) // 2 + 1 or parts[2 * (row - 1)] != finding.source_line:
            return whole_file("the file changed since it was linted; run --add-noqa again")
        wanted.setdefault(row, []).append(finding.code)
    facts = _LineFacts()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(facts)
    result = NoqaResult()
    for row, codes in sorted(wanted.items()):
        line = parts[2 * (row - 1)]
        why = _why_not(row, line, facts)
        if why is not None:
            unique = tuple(sorted(set(codes)))
            result.unsuppressed.append(UnsuppressedLine(display, row, unique, len(codes), why))
            continue
        edited = _with_directive(line, facts.comments.get(row), set(codes))
        if edited != line:
            parts[2 * (row - 1)] = edited
            result.added += 1
    if result.added:
        try:
            _replace(path, "".join(parts).encode(module.encoding))
        except OSError as exc:
            return whole_file(f"cannot write the file: {exc}")
    return result


def add_noqa(findings: Iterable[Finding]) -> NoqaResult:
    """Add ``# noqa: CODE`` directives that suppress ``findings`` to their files.

    Args:
        findings: the findings of a lint run, with filenames relative to the working directory
            (or absolute) as :func:`~interlace.linters.lint_paths` reports them.

    Returns:
        How many directives were added or extended (one per line), and the findings left
        unsuppressed, each with the reason.
    """
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        # The real path: a symlink stays a symlink, and one file named twice is edited once.
        by_file.setdefault(os.path.realpath(finding.filename), []).append(finding)
    result = NoqaResult()
    for path, group in by_file.items():
        done = _add_to_file(path, group)
        result.added += done.added
        result.unsuppressed.extend(done.unsuppressed)
    return result
