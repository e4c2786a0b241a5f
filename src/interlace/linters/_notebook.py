"""Jupyter notebooks (``*.ipynb``): lint the code cells as one module, report by cell.

As in ruff, a notebook is linted as the concatenation of its code cells, one line break
between two cells. Every location the engine reports is then mapped back: to the cell and the
row within it (what the text and JSON outputs show, ``cell 3:2:5``), and to the line and
column of the ``.ipynb`` file itself (what SARIF and GitHub annotations need, since they place
a finding in the file).

What is linted, as in ruff:

- Only notebooks whose kernel language is Python (or that name none); others are skipped.
- Only code cells. A cell that runs a cell magic (``%%bash``, ``%%time``) is not Python, and
  neither is one whose first word is a magic without its ``%`` (automagic: ``pip install x``);
  both are skipped, unless the cell compiles as Python (``time = 5`` is an assignment).
- IPython's line escapes (``%magic``, ``!shell``, ``x = !ls``, ``obj?``) are not Python
  either. A cell that does not compile has its escape lines replaced by ``pass`` at their
  indentation, so that the rest of the cell is linted and every row stays where it was. A
  cell that compiles is left as it is: a ``%`` that starts a continuation line inside
  brackets is the modulo operator.

Top-level ``await``, which IPython allows, parses as it is.

``--fix`` rewrites a notebook by replacing the ``source`` of the cells it changes and nothing
else, so the file's formatting, outputs and metadata are kept byte for byte.
"""

from __future__ import annotations

import ast
import bisect
import functools
import json
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from json.decoder import scanstring  # type: ignore[attr-defined]

from interlace.linters._engine import (
    LINE_BREAK,
    FileError,
    FileResult,
    Finding,
    RelatedLocation,
    Span,
    lint_source,
)
from interlace.linters._noqa import (
    UNUSED_NOQA,
    FixedSource,
    fix_unused_noqa,
    fix_unused_noqa_text,
)
from interlace.linters._rule import LintContext, Rule

__all__ = (
    "NOTEBOOK_SUFFIX",
    "Notebook",
    "fix_document",
    "fix_notebook",
    "is_notebook",
    "lint_document",
    "linted_code",
    "read_notebook",
    "rewrite",
    "rewrite_module",
)

NOTEBOOK_SUFFIX = ".ipynb"

_AUTOMAGIC_NAMES = """
    alias alias_magic autoawait autocall automagic bookmark cd code_wrap colors conda config
    debug dhist dirs doctest_mode edit env gui history killbgscripts load load_ext loadpy
    logoff logon logstart logstate logstop lsmagic macro magic mamba matplotlib micromamba
    notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint precision prun
    psearch psource pushd pwd pycat pylab quickref recall rehashx reload_ext rerun reset
    reset_selective run save sc set_env sx system tb time timeit unalias unload_ext who
    who_ls whos xdel xmode
"""
_AUTOMAGICS = frozenset(_AUTOMAGIC_NAMES.split())
"""The magics IPython runs without their ``%`` (automagic), as ruff lists them: a cell whose
first word is one of these is a magic, not Python."""

_ESCAPE = re.compile(
    r"""^[ \t]*(?:
        [%!?/;,]                                  # %magic, !shell, ?help, /f x, ;f x, ,f x
      | [\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*[%!]   # x = !ls, a, b = %magic
      | [^#'"]*\?\??[ \t]*$                       # obj? and obj?? (help)
    )""",
    re.VERBOSE,
)
"""A line that IPython reads as an escape (a magic, a shell command, help) rather than Python."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_BOM = b"\xef\xbb\xbf"


def is_notebook(filename: str) -> bool:
    """Whether ``filename`` names a Jupyter notebook (by its suffix, as ruff decides)."""
    return filename.lower().endswith(NOTEBOOK_SUFFIX)


@dataclass(frozen=True, slots=True)
class _Cell:
    """One linted code cell.

    Attributes:
        number: its 1-based position among all the notebook's cells.
        text: its source, as in the notebook.
        lines: ``text`` split into lines (a final line break leaves an empty last line, which
            Jupyter shows too).
        starts: the offset in ``text`` where each line starts.
        first_row: the row of its first line in the concatenated module.
        literals: where its source's JSON strings are in the file's text: each string's
            ``(start, end)`` (quotes included) and the offset in ``text`` where its value
            starts; ``()`` if they could not be found.
        value: the ``(start, end)`` of the whole ``source`` value in the file's text (a string
            or a list of strings), or ``None``.
    """

    number: int
    text: str
    lines: tuple[str, ...]
    starts: tuple[int, ...]
    first_row: int
    literals: tuple[tuple[int, int, int], ...]
    value: tuple[int, int] | None


@dataclass(frozen=True)  # not slots: the cached properties need a __dict__
class Notebook:
    """A notebook read for linting.

    Attributes:
        text: the file's JSON text.
        cells: its linted code cells, in order.
        source: the module the engine lints: the cells' code (escapes replaced), joined by
            line breaks, with a final one.
        python: ``False`` for a notebook in another language, which is not linted.
        bom: whether the file starts with a UTF-8 byte order mark (kept when it is rewritten).
    """

    text: str
    cells: tuple[_Cell, ...]
    source: str
    python: bool = True
    bom: bool = False

    @property
    def lines(self) -> int:
        """How many lines the linted code has."""
        return sum(len(cell.lines) for cell in self.cells)

    def cell_at(self, row: int) -> tuple[_Cell, int] | None:
        """The cell that holds module row ``row``, and the row within it; ``None`` past the
        end."""
        index = bisect.bisect_right(self._first_rows, row) - 1
        if index < 0:
            return None
        cell = self.cells[index]
        within = row - cell.first_row + 1
        return (cell, within) if within <= len(cell.lines) else None

    def raw_position(self, cell: _Cell, row: int, column: int) -> tuple[int, int] | None:
        """Where 1-based ``row``:``column`` of ``cell`` is in the file's text, as a 1-based
        row and column; ``None`` if the cell's strings were not found."""
        if not cell.literals or not 0 < row <= len(cell.lines):
            return None
        offset = cell.starts[row - 1] + min(max(column, 1), len(cell.lines[row - 1]) + 1) - 1
        index = bisect.bisect_right([lit[2] for lit in cell.literals], offset) - 1
        start, end, value_start = cell.literals[max(index, 0)]
        at = _raw_offset(self.text, start, end, offset - value_start)
        row_index = bisect.bisect_right(self._line_starts, at) - 1
        return row_index + 1, at - self._line_starts[row_index] + 1

    @functools.cached_property
    def _first_rows(self) -> list[int]:
        return [cell.first_row for cell in self.cells]

    @functools.cached_property
    def _line_starts(self) -> list[int]:
        """The offset in ``text`` where each of its lines starts."""
        return [0, *(match.end() for match in re.finditer("\n", self.text))]


def _raw_offset(text: str, start: int, end: int, count: int) -> int:
    """The offset in ``text`` of the character ``count`` characters into the value of the
    JSON string ``text[start:end]`` (an escape is one character of the value; a surrogate
    pair, two escapes, is one)."""
    at = start + 1
    for _ in range(count):
        if at >= end - 1:
            break
        if text[at] != "\\":
            at += 1
        elif text[at + 1] != "u":
            at += 2
        elif 0xD800 <= int(text[at + 2 : at + 6], 16) < 0xDC00 and text[at + 6 : at + 8] == "\\u":
            at += 12
        else:
            at += 6
    return at


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    return match.end() if match else at


_Spans = dict[int, tuple[tuple[int, int], list[tuple[int, int]]]]
"""For each cell (0-based), where its ``source`` value is in the file's text, and where each
of its strings is (quotes included)."""


def _object(text: str, at: int, read: Callable[[str, int], int | None]) -> int:
    """Walk the JSON object at ``text[at]``: for each member, ``read(key, offset of value)``
    returns the offset past the value if it read it, or ``None`` to skip it. Returns the
    offset past the object."""
    at = _skip(text, at + 1)
    while text[at] != "}":
        key, at = scanstring(text, at + 1)
        at = _skip(text, _skip(text, at) + 1)  # past the colon
        past = read(key, at)
        at = _skip(text, _DECODER.raw_decode(text, at)[1] if past is None else past)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return at + 1


def _strings(text: str, at: int) -> tuple[int, list[tuple[int, int]]]:
    """The spans of the JSON string, or array of strings, at ``text[at]``, and the offset past
    it."""
    if text[at] == '"':
        end: int = scanstring(text, at + 1)[1]
        return end, [(at, end)]
    spans = []
    at = _skip(text, at + 1)
    while text[at] != "]":
        end = scanstring(text, at + 1)[1]
        spans.append((at, end))
        at = _skip(text, end)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return at + 1, spans


def _source_spans(text: str) -> _Spans:
    """Where each cell's ``source`` is in the file's text. The text is valid JSON (it was
    decoded already), so this only walks the path ``cells[i].source``; every other value is
    skipped by the C decoder."""
    found: _Spans = {}

    def cell(index: int) -> Callable[[str, int], int | None]:
        def read(key: str, at: int) -> int | None:
            if key != "source" or text[at] not in '["':
                return None
            end, spans = _strings(text, at)
            found[index] = ((at, end), spans)
            return end

        return read

    def top(key: str, at: int) -> int | None:
        if key != "cells" or text[at] != "[":
            return None
        at = _skip(text, at + 1)
        index = 0
        while text[at] != "]":
            if text[at] == "{":
                at = _object(text, at, cell(index))
            else:
                at = _DECODER.raw_decode(text, at)[1]
            index += 1
            at = _skip(text, at)
            if text[at] == ",":
                at = _skip(text, at + 1)
        return at + 1

    _object(text, _skip(text, 0), top)
    return found


def _code_of(source: object) -> str | None:
    """A cell's ``source`` as text (a string, or a list of strings to join); ``None`` if it
    is neither."""
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    return None


def _is_magic_cell(lines: Sequence[str]) -> bool:
    """Whether a cell that does not compile runs a cell magic, or a line magic without its
    ``%`` (automagic, which IPython allows only on its own in a cell)."""
    words = lines[0].split(None, 1) if lines else []
    if words and words[0] in _AUTOMAGICS:
        return True
    return any(line.lstrip().startswith("%%") for line in lines)


def _compiles(code: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return False
    return True


def _without_escapes(lines: Sequence[str]) -> list[str]:
    """``lines`` with IPython's escape lines (and their ``\\`` continuations) replaced by
    ``pass`` at their indentation."""
    out = []
    continued = False
    for line in lines:
        if continued or _ESCAPE.match(line):
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            out.append(f"{indent}pass" if not continued else "")
            continued = line.endswith("\\")
        else:
            out.append(line)
    return out


def _linted_lines(code: str, lines: Sequence[str]) -> list[str] | None:
    """The lines of a cell's ``code`` as the linter reads them: as written if the cell
    compiles, else with IPython's escape lines as ``pass``; ``None`` for a cell that is not
    Python (a cell magic, an automagic)."""
    if _compiles(code):
        return list(lines)
    if _is_magic_cell(lines):
        return None
    return _without_escapes(lines)


def linted_code(code: str) -> str | None:
    """One cell's ``code`` as it is linted in a notebook (see :func:`_linted_lines`), rows
    and line breaks kept; ``None`` for a cell that is not linted."""
    lines = LINE_BREAK.split(code)
    linted = _linted_lines(code, lines)
    if linted is None:
        return None
    breaks = [match.group() for match in LINE_BREAK.finditer(code)]
    return "".join(line + brk for line, brk in zip(linted, [*breaks, ""], strict=True))


def _python(metadata: object) -> bool:
    """Whether a notebook's metadata leave it Python: its ``language_info.name`` is
    ``python`` or absent (as ruff decides)."""
    if not isinstance(metadata, dict):
        return True
    info = metadata.get("language_info")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return True
    return bool(info["name"].lower() == "python")


def _invalid(filename: str, what: str, row: int = 1, column: int = 1) -> FileError:
    return FileError(filename, row, column, f"cannot parse notebook: {what}", "syntax")


def read_notebook(data: bytes, filename: str) -> Notebook | FileError:
    """Read a notebook's bytes; return what to lint, or why it cannot be read.

    Only notebook format 4 (every Jupyter since 2015) is read; an older notebook gets the
    command that converts it.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _invalid(filename, f"it is not UTF-8 text ({exc.reason} at byte {exc.start})")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return _invalid(filename, f"it is not valid JSON: {exc.msg}", exc.lineno, exc.colno)
    except RecursionError:
        return _invalid(filename, "its JSON is nested too deeply")
    if not isinstance(document, dict):
        return _invalid(filename, "its JSON is not an object, so it is not a Jupyter notebook")
    version = document.get("nbformat")
    if version != 4:
        if isinstance(version, int) and not isinstance(version, bool):
            return _invalid(
                filename,
                f"it is in notebook format {version}, and interlace reads format 4; convert "
                f"it with: jupyter nbconvert --to notebook --nbformat 4 {filename}",
            )
        return _invalid(filename, "it has no 'nbformat' version 4, so it is not a notebook")
    cells = document.get("cells")
    if not isinstance(cells, list):
        return _invalid(filename, "it has no 'cells' list")
    if not _python(document.get("metadata")):
        return Notebook(text, (), "", python=False, bom=data.startswith(_BOM))
    try:
        spans = _source_spans(text)
    except (IndexError, ValueError, RecursionError):  # the walk only helps place findings
        spans = {}
    cells_read: list[_Cell] = []
    module: list[str] = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code = _code_of(cell.get("source", ""))
        if code is None:
            return _invalid(filename, f"cell {index + 1}'s 'source' is not text")
        lines = LINE_BREAK.split(code)
        linted = _linted_lines(code, lines)
        if linted is None:
            continue
        starts = [0]
        starts.extend(match.end() for match in LINE_BREAK.finditer(code))
        literals: tuple[tuple[int, int, int], ...] = ()
        value = None
        parts = _parts(cell.get("source", ""))
        if index in spans and len(spans[index][1]) == len(parts):
            # (A key given twice, which JSON allows, could leave the walk a stale source.)
            value, strings = spans[index]
            offsets, total = [], 0
            for (start, end), part in zip(strings, parts, strict=True):
                offsets.append((start, end, total))
                total += len(part)
            literals = tuple(offsets)
        first_row = len(module) + 1
        module.extend(linted)
        cells_read.append(
            _Cell(index + 1, code, tuple(lines), tuple(starts), first_row, literals, value)
        )
    source = "\n".join(module) + "\n" if module else ""
    return Notebook(text, tuple(cells_read), source, bom=data.startswith(_BOM))


def _parts(source: object) -> list[str]:
    """A cell's ``source`` as its JSON strings (it is text: :func:`_code_of` checked)."""
    return [source] if isinstance(source, str) else list(source)  # type: ignore[call-overload]


# --- mapping the engine's module locations back to cells ------------------------------------


def _place(notebook: Notebook, row: int, column: int) -> tuple[_Cell, int, int] | None:
    """The cell, row and column of module location ``row``:``column``."""
    found = notebook.cell_at(row)
    if found is None:
        return None
    cell, within = found
    return cell, within, column


def _span(
    notebook: Notebook, row: int, column: int, end_row: int, end_column: int
) -> tuple[_Cell, Span, Span | None] | None:
    """A module span as its cell, the span within the cell, and the span in the file. A span
    that runs past its cell's end (a block that the next cell continues) ends there."""
    start = _place(notebook, row, column)
    if start is None:
        return None
    cell, first, first_column = start
    end = _place(notebook, end_row, end_column)
    if end is None or end[0] is not cell:
        last, last_column = len(cell.lines), len(cell.lines[-1]) + 1
    else:
        last, last_column = end[1], end[2]
    begin_raw = notebook.raw_position(cell, first, first_column)
    end_raw = notebook.raw_position(cell, last, last_column)
    raw = None if begin_raw is None or end_raw is None else (*begin_raw, *end_raw)
    return cell, (first, first_column, last, last_column), raw


def _related(notebook: Notebook, related: RelatedLocation) -> RelatedLocation:
    placed = _span(notebook, related.row, related.column, related.end_row, related.end_column)
    if placed is None:
        return related
    cell, (row, column, end_row, end_column), raw = placed
    return replace(
        related,
        row=row,
        column=column,
        end_row=end_row,
        end_column=end_column,
        cell=cell.number,
        raw_span=raw,
    )


def _finding(notebook: Notebook, finding: Finding) -> Finding:
    placed = _span(notebook, finding.row, finding.column, finding.end_row, finding.end_column)
    if placed is None:
        return finding
    cell, (row, column, end_row, end_column), raw = placed
    context = []
    for module_row, _ in finding.context:
        found = notebook.cell_at(module_row)
        if found is not None and found[0] is cell:
            context.append((found[1], cell.lines[found[1] - 1]))
    fix = finding.fix
    if fix is not None:
        fix = replace(
            fix, row=fix.row - cell.first_row + 1, end_row=fix.end_row - cell.first_row + 1
        )
    return replace(
        finding,
        row=row,
        column=column,
        end_row=end_row,
        end_column=end_column,
        related=tuple(_related(notebook, rel) for rel in finding.related),
        source_line=cell.lines[row - 1],
        context=tuple(context),
        fix=fix,
        cell=cell.number,
        raw_span=raw,
    )


def _error(notebook: Notebook, error: FileError) -> FileError:
    found = _place(notebook, error.row, error.column)
    if found is None:
        return error
    cell, row, column = found
    return replace(
        error,
        row=row,
        column=column,
        cell=cell.number,
        raw_position=notebook.raw_position(cell, row, column),
    )


def lint_notebook(
    data: bytes, rules: Sequence[type[Rule]], *, filename: str, context: LintContext
) -> FileResult:
    """Lint a notebook's bytes: its code cells as one module, each location mapped back to
    its cell and to the file."""
    notebook = read_notebook(data, filename)
    if isinstance(notebook, FileError):
        return FileResult(filename, errors=(notebook,))
    if not notebook.source:
        return FileResult(filename, lines=notebook.lines)
    result = lint_source(notebook.source, rules, filename=filename, context=context)
    return replace(
        result,
        findings=tuple(_finding(notebook, f) for f in result.findings),
        errors=tuple(_error(notebook, e) for e in result.errors),
    )


def lint_document(
    data: bytes, rules: Sequence[type[Rule]], *, filename: str, context: LintContext
) -> FileResult:
    """Lint a file's bytes: a notebook (by its name) as :func:`lint_notebook`, anything else
    as Python source."""
    if is_notebook(filename):
        return lint_notebook(data, rules, filename=filename, context=context)
    return lint_source(data, rules, filename=filename, context=context)


# --- --fix ------------------------------------------------------------------------------------


def _render(text: str, cell: _Cell, lines: Sequence[str]) -> str:
    """The JSON of a cell's new ``source``, written as its old one was: one string, or a list
    with one string per line, laid out with the old list's indentation."""
    assert cell.value is not None
    start, end = cell.value
    code = "\n".join(lines)
    ascii_only = text.isascii()
    if text[start] == '"':
        return json.dumps(code, ensure_ascii=ascii_only)
    parts = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        parts.append(lines[-1])
    if not parts:
        return "[]"
    old = cell.literals
    opening = text[start + 1 : old[0][0]] if old else "\n "
    separator = text[old[0][1] : old[1][0]] if len(old) > 1 else "," + opening
    closing = text[old[-1][1] : end - 1] if old else "\n"
    body = separator.join(json.dumps(part, ensure_ascii=ascii_only) for part in parts)
    return f"[{opening}{body}{closing}]"


def rewrite(notebook: Notebook, changes: Mapping[int, Sequence[str]]) -> bytes:
    """The notebook's bytes with the cells numbered in ``changes`` given those lines as their
    source. Only those cells' ``source`` values change; the rest of the file is kept byte for
    byte.

    Raises:
        ValueError: a cell's source was not found in the file's text.
    """
    replacements = []
    cells = {cell.number: cell for cell in notebook.cells}
    for number, lines in changes.items():
        cell = cells[number]
        if cell.value is None:
            raise ValueError(f"cell {number}'s source was not found in the file")
        replacements.append((*cell.value, _render(notebook.text, cell, lines or [""])))
    text = notebook.text
    for start, end, new in sorted(replacements, reverse=True):
        text = text[:start] + new + text[end:]
    return (_BOM if notebook.bom else b"") + text.encode("utf-8")


def rewrite_module(notebook: Notebook, lines: Sequence[str]) -> bytes:
    """The notebook's bytes with its cells' source replaced by the module ``lines`` that
    differ from the linted module's (edits that keep every line where it is, such as
    ``--add-noqa``'s)."""
    old = notebook.source.split("\n")
    changes: dict[int, list[str]] = {}
    for row, line in enumerate(lines, start=1):
        if row <= len(old) and line != old[row - 1]:
            found = notebook.cell_at(row)
            if found is not None:
                cell, within = found
                changes.setdefault(cell.number, list(cell.lines))[within - 1] = line
    return rewrite(notebook, changes)


def fix_notebook(data: bytes, findings: Iterable[Finding]) -> FixedSource:
    """Apply the fixes of the IL001 findings among ``findings`` (cell-relative, as
    :func:`lint_notebook` reports them) to a notebook's bytes. Only the ``source`` values of
    the cells with an edit are rewritten; the rest of the file is kept as it was."""
    by_cell: dict[int, list[Finding]] = {}
    for finding in findings:
        if finding.code == UNUSED_NOQA and finding.fix is not None and finding.cell is not None:
            by_cell.setdefault(finding.cell, []).append(finding)
    if not by_cell:
        return FixedSource(data)
    notebook = read_notebook(data, "<notebook>")
    if isinstance(notebook, FileError) or not notebook.python:
        return FixedSource(data, error="it does not read as a Python notebook any more")
    cells = {cell.number: cell for cell in notebook.cells}
    changes: dict[int, Sequence[str]] = {}
    for number, group in by_cell.items():
        cell = cells.get(number)
        edits = {f: f.fix for f in group if f.fix is not None}
        text = None if cell is None else fix_unused_noqa_text(cell.text, edits)
        if not isinstance(text, str):
            return FixedSource(
                data, error=f"cell {number} is not the cell that was linted any more"
            )
        changes[number] = LINE_BREAK.split(text)
    try:
        fixed = rewrite(notebook, changes)
    except ValueError as exc:
        return FixedSource(data, error=str(exc))
    return FixedSource(fixed, sum(len(group) for group in by_cell.values()))


def fix_document(data: bytes, findings: Iterable[Finding], filename: str) -> FixedSource:
    """Apply the IL001 fixes among ``findings`` to a file's bytes: a notebook (by its name) as
    :func:`fix_notebook`, anything else as Python source."""
    if is_notebook(filename):
        return fix_notebook(data, findings)
    return fix_unused_noqa(data, findings)
