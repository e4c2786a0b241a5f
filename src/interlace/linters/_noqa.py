"""``# noqa`` directives: how the engine reads them, and ``interlace lint --add-noqa``.

A directive is read as ruff reads it, and only from a real comment (the tokenizer's, so text in a
string literal is never a directive): the first ``#`` in the comment followed by optional
whitespace and ``noqa`` (any case) starts it. ``# noqa`` followed by the end of the comment,
whitespace or ``#`` suppresses every code; ``# noqa:`` (whitespace allowed before the colon) is
followed by codes, uppercase letters then digits, separated by commas or whitespace, and the
first item that is not a code ends the list (``# noqa: IL201 reason``). A directive that is
neither, ``# noqanything``, ``# noqa:`` or ``# noqa: IL`` without a code, ``# noqa: IL201x``,
suppresses nothing. Unlike ruff, a listed code is also a prefix (``# noqa: IL1`` covers IL101),
as docs/lint.md documents.

``--add-noqa`` puts a directive where the engine looks for it: the line a finding's row names
(the first line of the reported code), split the way the engine splits (``LINE_BREAK``). Codes
for one line are merged into one directive, sorted; a line that already has ``# noqa: CODES``
gets the new codes merged into that directive, any others it lists kept. Otherwise
``  # noqa: CODES`` is appended, as ruff does.

``--add-noqa`` never adds ``IL001`` (an unused directive): that would keep a directive that
hides nothing, so a line with an IL001 finding is reported as left unsuppressed instead, with
what to do (remove the unused codes, or add ``IL001`` by hand to keep the directive).

Invariant: a file is rewritten only if its bytes decode and re-encode to themselves, and only the
ends of the lines that get a directive change; it is replaced atomically (a temporary file in the
same directory, then ``os.replace``) with its mode kept. A line where a comment cannot go (it
ends inside a multi-line string or with a backslash continuation) or whose comment holds an
invalid directive (one appended after it would be ignored) is left alone and reported.

``--fix`` fixes IL001 findings as ruff fixes ``RUF100``: a directive keeps the codes that were
used, rewritten as ``# noqa: CODES`` with whatever followed its last code; a directive left with
none is removed with the whitespace before it, and with the rest of its comment unless another
comment (``# ...``) follows, which stays; a line that held only the directive is removed. The
engine works out each IL001 finding's edit as it reports it (``Finding.fix``, cached with the
finding), and an edit only ever removes ``IL`` codes, which are all IL001 reports.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import tempfile
import tokenize
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from interlace.linters._positions import LINE_BREAK

if TYPE_CHECKING:
    # Only for annotations: the engine imports this module for its suppressions.
    from interlace.linters._engine import Finding

__all__ = (
    "UNUSED_NOQA",
    "UNUSED_NOQA_FIX",
    "FixedSource",
    "LineFacts",
    "NoqaDirective",
    "NoqaEdit",
    "NoqaResult",
    "Suppressions",
    "UnsuppressedLine",
    "fix_unused_noqa",
    "parse_noqa",
    "replace_file",
    "unused_noqa_edit",
    "why_no_directive",
    "with_directive",
)

UNUSED_NOQA = "IL001"
"""The code of the rule that reports unused directives (``rules.noqa``), which the engine runs
after the other rules and ``--add-noqa`` never adds."""

UNUSED_NOQA_FIX = "Remove unused `noqa` directive"
"""What the fix of an IL001 finding does, in ruff's words (the JSON output's ``fix.message``)."""

_DIRECTIVE = re.compile(r"#\s*[nN][oO][qQ][aA]")
_CODE = re.compile(r"[A-Z]+(?P<digits>[0-9]*)")
_MISSING_CODES = (
    "expected a comma-separated list of codes after `# noqa:`, e.g. `# noqa: IL101, IL201`"
)
_INVALID_SUFFIX = (
    "expected `:` followed by a comma-separated list of codes, e.g. `# noqa: IL101, IL201`"
)
_INVALID_CODE = "expected each code to be uppercase letters followed by digits, e.g. `IL201`"


@dataclass(frozen=True, slots=True)
class NoqaDirective:
    """The ``# noqa`` directive of one comment, as ruff reads it.

    Attributes:
        start, end: where the directive starts (its ``#``) and ends (after ``noqa`` or the last
            code) in the comment.
        codes: the listed codes; empty for a bare ``# noqa``, which suppresses every code.
        error: why the directive is invalid (it then suppresses nothing), or ``None``.
    """

    start: int
    end: int
    codes: tuple[str, ...] = ()
    error: str | None = None

    def suppresses(self, code: str) -> bool:
        """Whether this directive suppresses ``code`` (a listed code also covers its prefix)."""
        if self.error is not None:
            return False
        return not self.codes or code.startswith(self.codes)


def parse_noqa(comment: str) -> NoqaDirective | None:
    """Read the ``# noqa`` directive of a comment (from its ``#`` to the end of its line).

    Returns:
        The first directive in the comment, valid or not (ruff reads no further), or ``None``
        if it has none.
    """
    head = _DIRECTIVE.search(comment)
    if head is None:
        return None
    start, at = head.start(), head.end()
    after = comment[at:].lstrip()
    if after.startswith(":"):
        return _parse_codes(comment, start, len(comment) - len(after) + 1)
    if at == len(comment) or comment[at].isspace() or comment[at] == "#":
        return NoqaDirective(start, at)
    return NoqaDirective(start, at, error=_INVALID_SUFFIX)


def _parse_codes(comment: str, start: int, at: int) -> NoqaDirective:
    """Read the codes after ``# noqa:`` from index ``at`` (ruff's lexer, item by item)."""
    codes: list[str] = []
    end = at
    joined = False  # the previous code ran into this one (`IL101IL201`): no more prose allowed
    while at < len(comment):
        while at < len(comment) and comment[at].isspace():
            at += 1
        if comment.startswith(",", at):
            at += 1
            continue
        code = _CODE.match(comment, at)
        if code is None:
            break  # not a code: the directive ends and a reason or another comment follows
        if not code.group("digits"):
            if joined:
                return NoqaDirective(start, code.end(), error=_INVALID_CODE)
            break
        at = end = code.end()
        codes.append(code.group())
        following = comment[at : at + 1]
        if "A" <= following <= "Z":
            joined = True
        elif following in ("", ",", "#") or following.isspace():
            joined = False
            if following == "#":
                break
        else:
            return NoqaDirective(start, at, error=_INVALID_CODE)
    if not codes:
        return NoqaDirective(start, end, error=_MISSING_CODES)
    return NoqaDirective(start, end, tuple(codes))


@dataclass(frozen=True, slots=True)
class UnsuppressedLine:
    """Findings that ``add_noqa`` could not suppress: one line (``row`` > 0) or a whole file.
    In a notebook, ``row`` counts the lines of cell ``cell``."""

    filename: str
    row: int
    codes: tuple[str, ...]
    findings: int
    reason: str
    cell: int | None = None


@dataclass
class NoqaResult:
    """What ``add_noqa`` did: directives added or extended, and what it had to leave alone."""

    added: int = 0
    unsuppressed: list[UnsuppressedLine] = field(default_factory=list)


class LineFacts(cst.CSTVisitor):
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


def _comments(module: cst.Module | None, lines: Sequence[str]) -> dict[int, tuple[int, str]]:
    """The comment that ends each row having one: its column and its text, from ``#`` to the
    end of the line.

    Python's tokenizer is the reference and costs an eighth of a libcst parse; libcst's own
    comments (positions for the whole tree, a parse's cost again) are the fallback for code
    libcst parsed that the running interpreter's tokenizer rejects (newer syntax). Without a
    ``module`` (a file the pre-filter kept from libcst) the fallback parses ``lines``.
    """
    # Rows as the engine counts them (``LINE_BREAK``), each fed with a plain "\n" ending; a
    # BOM is text to the tokenizer of a decoded string (3.12+ rejects it) and ends no comment.
    feed = [line + "\n" for line in lines]
    bom = bool(feed) and feed[0].startswith("\ufeff")
    if bom:
        feed[0] = feed[0].removeprefix("\ufeff")
    try:
        return {
            token.start[0]: (token.start[1] + int(bom and token.start[0] == 1), token.string)
            for token in tokenize.generate_tokens(iter(feed).__next__)
            if token.type == tokenize.COMMENT
        }
    except (tokenize.TokenError, SyntaxError):
        if module is None:
            module = cst.parse_module("\n".join(lines))
        facts = LineFacts()
        MetadataWrapper(module, unsafe_skip_copy=True).visit(facts)
        return {
            row: (column, lines[row - 1][column:])
            for row, column in facts.comments.items()
            if 0 < row <= len(lines)
        }


class Suppressions:
    """Which findings the ``# noqa`` comments of one module suppress.

    A finding is suppressed by the directive in the comment that ends the row it starts on (the
    first line of the reported code, as in ruff); ``# noqa`` inside a string is not a comment.

    Invariant: the module's comments are read at most once, and only when a finding's row
    contains the text ``noqa`` (most modules with findings have none) or :meth:`directives`
    is asked for (IL001).
    """

    def __init__(self, module: cst.Module | None, lines: Sequence[str]) -> None:
        """``lines`` are the module's lines as the engine splits them (``LINE_BREAK``);
        ``module`` is ``None`` for a file libcst did not parse (read with the tokenizer)."""
        self._module = module
        self._lines = lines
        self._directives: dict[int, tuple[int, NoqaDirective]] | None = None

    def directives(self) -> dict[int, tuple[int, NoqaDirective]]:
        """Every row's directive, valid or not, with the column (0-based) of its ``#``."""
        if self._directives is None:
            self._directives = {}
            for row, (column, comment) in _comments(self._module, self._lines).items():
                directive = parse_noqa(comment)
                if directive is not None:
                    self._directives[row] = (column + directive.start, directive)
        return self._directives

    def suppresses(self, code: str, row: int) -> bool:
        """Whether the directive on row ``row`` (1-based) suppresses ``code``."""
        if not 0 < row <= len(self._lines) or "noqa" not in self._lines[row - 1].lower():
            return False
        found = self.directives().get(row)
        return found is not None and found[1].suppresses(code)


def why_no_directive(row: int, line: str, facts: LineFacts) -> str | None:
    """Why a directive cannot be added to line ``row``, or ``None`` if it can."""
    if row in facts.in_string:
        return (
            "the line ends inside a multi-line string, where a comment would become part of the "
            "string; start the string on a line of its own (or bind it to a name first), then "
            "run --add-noqa again"
        )
    column = facts.comments.get(row)
    if column is None and line.endswith("\\"):
        return (
            "the line ends with a backslash continuation, after which a comment is a syntax "
            "error; wrap the expression in parentheses instead, then run --add-noqa again"
        )
    directive = parse_noqa(line[column:]) if column is not None else None
    if directive is not None and directive.error is not None:
        written = line[column:][directive.start :].rstrip()
        return (
            f"its comment has an invalid directive {written!r} ({directive.error}), which "
            "suppresses nothing, and a directive added after it would be ignored too (only the "
            "first in a comment counts, as in ruff); correct it, then run --add-noqa again"
        )
    return None


def with_directive(line: str, comment_column: int | None, codes: set[str]) -> str:
    """``line`` with a ``# noqa`` directive for ``codes``: merged into the directive of the
    comment at ``comment_column`` when it has one (a bare one already covers every code),
    else appended after two spaces."""
    if comment_column is not None:
        directive = parse_noqa(line[comment_column:])
        if directive is not None:
            if not directive.codes:  # a bare directive already suppresses every code
                return line
            merged = ", ".join(sorted({*directive.codes, *codes}))
            start, end = comment_column + directive.start, comment_column + directive.end
            return f"{line[:start]}# noqa: {merged}{line[end:]}"
    return f"{line.rstrip()}  # noqa: {', '.join(sorted(codes))}"


def replace_file(path: str, data: bytes, *, expected: bytes | None = None) -> bool:
    """Write ``data`` to ``path`` atomically, keeping the file's permission bits.

    Args:
        path: the file's real path (a symlink would be replaced by a file).
        data: the new content.
        expected: the content the new one was made from; if the file no longer holds it (it was
            edited meanwhile), nothing is written.

    Returns:
        Whether the file was written (``False`` only when it no longer holds ``expected``).

    Raises:
        OSError: the file cannot be read or written.
    """
    mode = stat.S_IMODE(os.stat(path).st_mode)
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        # Compared as late as possible: the window for an edit to be lost is this read and the
        # rename below.
        if expected is not None and Path(path).read_bytes() != expected:
            os.unlink(tmp)
            return False
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


@dataclass(frozen=True, slots=True)
class NoqaEdit:
    """One edit of a file's text, in ruff's JSON ``fix.edits`` terms: replace the text from
    ``row``:``column`` up to (not including) ``end_row``:``end_column`` with ``content``.

    Rows and columns are 1-based and count characters; an edit that ends at column 1 of the
    next row takes the line break with it.
    """

    row: int
    column: int
    end_row: int
    end_column: int
    content: str


_SPACE = " \t\f"
"""The whitespace Python allows between tokens, hence before a comment."""


def unused_noqa_edit(
    row: int, line: str, column: int, directive: NoqaDirective, unused: Collection[str]
) -> NoqaEdit | None:
    """The edit that removes the ``unused`` codes from the directive at 0-based ``column`` of
    line ``row`` (its text ``line``), which IL001 reports.

    The used codes stay, as ``# noqa: CODES``, followed by whatever followed the last code. A
    directive left with no code is removed with the whitespace before it and the rest of its
    comment, unless another comment follows (``# noqa: IL101  # why``: ``# why`` stays, where
    the directive began); a line that held nothing else is removed with its line break. This is
    what ruff's fix of ``RUF100`` does. Only ``IL`` codes are ever removed.

    Returns:
        The edit, or ``None`` when it would remove nothing (an invalid directive, or no listed
        ``IL`` code among ``unused``).
    """
    if directive.error is not None:
        return None
    kept = [code for code in directive.codes if not (code.startswith("IL") and code in unused)]
    if len(kept) == len(directive.codes):
        return None
    start, end = column, column + directive.end - directive.start
    if kept:
        return NoqaEdit(row, start + 1, row, end + 1, f"# noqa: {', '.join(kept)}")
    after = line[end:].lstrip(_SPACE)
    if after.startswith("#"):
        return NoqaEdit(row, start + 1, row, len(line) - len(after) + 1, "")
    code_end = len(line[:start].rstrip(_SPACE))
    if code_end == 0:
        return NoqaEdit(row, 1, row + 1, 1, "")
    return NoqaEdit(row, code_end + 1, row, len(line) + 1, "")


@dataclass(frozen=True, slots=True)
class FixedSource:
    """What :func:`fix_unused_noqa` made of a file's bytes.

    Attributes:
        data: the fixed bytes; the bytes given when nothing was fixed or ``error`` is set.
        fixed: how many findings the edits fixed.
        error: why the file cannot be fixed, or ``None``.
    """

    data: bytes
    fixed: int = 0
    error: str | None = None


def fix_unused_noqa_text(text: str, edits: Mapping[Finding, NoqaEdit]) -> str | FixedSource:
    """``text`` with the IL001 ``edits`` (each finding's fix) applied and its line breaks kept;
    or, when a finding's line is not in it, a :class:`FixedSource` (with no data) that says so.
    """
    parts = re.split(f"({LINE_BREAK.pattern})", text)  # line, break, line, ..., line (maybe "")
    rows = len(parts) // 2 + 1
    # From the last row up, so that removing a line leaves the rows above where they are.
    for finding, edit in sorted(edits.items(), key=lambda item: -item[1].row):
        index = 2 * (edit.row - 1)
        if not 0 < edit.row <= rows or parts[index] != finding.source_line:
            return FixedSource(
                b"", error=f"line {finding.row} is not the line that was linted any more"
            )
        line = parts[index]
        if edit.end_row == edit.row:
            parts[index] = line[: edit.column - 1] + edit.content + line[edit.end_column - 1 :]
        else:  # the whole line, with its line break
            parts[index : index + 2] = ["", ""] if index + 1 < len(parts) else [""]
    return "".join(parts)


def fix_unused_noqa(data: bytes, findings: Iterable[Finding]) -> FixedSource:
    """Apply the fixes of the IL001 findings among ``findings`` to a file's bytes.

    The bytes are decoded as Python decodes them (BOM, coding cookie, UTF-8) and encoded back
    the same way; line breaks, the BOM and a missing final newline are kept, and only the
    lines with an edit change.

    Args:
        data: the bytes the findings were reported on.
        findings: the file's findings; those that are not IL001 are skipped.

    Returns:
        The fixed bytes and the number of findings fixed, or why nothing could be fixed: the
        bytes do not survive decoding and re-encoding, a finding's line is not in them, or
        removing a line would change the coding cookie Python reads.
    """
    edits = {
        finding: finding.fix
        for finding in findings
        if finding.code == UNUSED_NOQA and finding.fix is not None
    }
    if not edits:
        return FixedSource(data)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError) as exc:
        return FixedSource(data, error=f"cannot decode it ({exc})")
    if text.encode(encoding) != data:
        return FixedSource(
            data,
            error=(
                f"its bytes do not survive decoding and re-encoding as {encoding}, so rewriting "
                "it could change more than the directives; remove the unused codes by hand"
            ),
        )
    fixed_text = fix_unused_noqa_text(text, edits)
    if isinstance(fixed_text, FixedSource):
        return FixedSource(data, error=fixed_text.error)
    fixed = fixed_text.encode(encoding)
    try:
        same = tokenize.detect_encoding(io.BytesIO(fixed).readline)[0] == encoding
    except SyntaxError:  # a cookie naming no codec, moved into the first two lines
        same = False
    if not same:
        return FixedSource(
            data,
            error=(
                "removing a line would move a coding cookie into the first two lines and change "
                "how Python decodes the file; remove the unused codes by hand"
            ),
        )
    return FixedSource(fixed, len(edits))
