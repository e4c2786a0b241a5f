"""``interlace lint --add-noqa``: the directives that suppress a lint run's findings, written
into their files (notebooks included).

Its own module, above the engine, the notebook reader and the ``noqa`` parser that it drives:
the engine imports ``_noqa`` for its suppressions, and the notebook module imports it for its
edits, so the one caller of all three lives here and none of them imports another back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from interlace.linters._engine import LINE_BREAK, FileError, Finding
from interlace.linters._noqa import (
    UNUSED_NOQA,
    LineFacts,
    NoqaResult,
    UnsuppressedLine,
    replace_file,
    why_no_directive,
    with_directive,
)
from interlace.linters._notebook import is_notebook, read_notebook, rewrite_module

__all__ = ("add_noqa",)


def _add_to_file(path: str, findings: Sequence[Finding]) -> NoqaResult:
    display = findings[0].filename
    all_codes = tuple(sorted({f.code for f in findings}))

    def whole_file(reason: str) -> NoqaResult:
        line = UnsuppressedLine(display, 0, all_codes, len(findings), reason)
        return NoqaResult(unsuppressed=[line])

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return whole_file(f"cannot read the file: {exc}")
    notebook = None
    first_row = {}  # a notebook's cells: the module row of each one's first line
    if is_notebook(path):
        read = read_notebook(data, display)
        if isinstance(read, FileError):
            return whole_file(f"{read.message}; run --add-noqa again")
        notebook = read
        first_row = {cell.number: cell.first_row for cell in notebook.cells}
        source: bytes | str = notebook.source
    else:
        source = data
    try:
        module = cst.parse_module(source)
        text = source if isinstance(source, str) else source.decode(module.encoding)
    except Exception as exc:  # it parsed when it was linted, so it has changed since
        summary = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return whole_file(f"cannot parse the file any more ({summary}); run --add-noqa again")
    if notebook is None and text.encode(module.encoding) != data:
        return whole_file(
            f"its bytes do not survive decoding and re-encoding as {module.encoding}, so "
            "rewriting it could change more than the directives; add them by hand"
        )
    parts = re.split(f"({LINE_BREAK.pattern})", text)  # line, break, line, ..., line (maybe "")
    wanted: dict[int, list[str]] = {}
    shown: dict[int, tuple[int | None, int]] = {}  # a module row's cell and row, for messages
    for finding in findings:
        row = finding.row
        if finding.cell is not None:
            row += first_row.get(finding.cell, 0) - 1
        if not 0 < row <= len(parts) // 2 + 1 or parts[2 * (row - 1)] != finding.source_line:
            return whole_file("the file changed since it was linted; run --add-noqa again")
        wanted.setdefault(row, []).append(finding.code)
        shown[row] = (finding.cell, finding.row)
    facts = LineFacts()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(facts)
    result = NoqaResult()
    for row, codes in sorted(wanted.items()):
        line = parts[2 * (row - 1)]
        why = why_no_directive(row, line, facts)
        if why is not None:
            unique = tuple(sorted(set(codes)))
            cell, cell_row = shown[row]
            result.unsuppressed.append(
                UnsuppressedLine(display, cell_row, unique, len(codes), why, cell)
            )
            continue
        edited = with_directive(line, facts.comments.get(row), set(codes))
        if edited != line:
            parts[2 * (row - 1)] = edited
            result.added += 1
    if result.added:
        if notebook is None:
            fixed = "".join(parts).encode(module.encoding)
        else:
            fixed = rewrite_module(notebook, parts[::2])
        try:
            replace_file(path, fixed)
        except OSError as exc:
            return whole_file(f"cannot write the file: {exc}")
    return result


_KEEP_UNUSED = (
    "the directive on this line suppresses nothing (IL001), and --add-noqa never adds IL001 "
    "to keep such a directive: remove the unused codes the finding names (the whole directive "
    "when none is left), or write IL001 into it by hand to keep it on purpose"
)


def add_noqa(findings: Iterable[Finding]) -> NoqaResult:
    """Add ``# noqa: CODE`` directives that suppress ``findings`` to their files.

    An IL001 finding (an unused directive) is never suppressed this way: adding ``IL001`` would
    keep a directive that hides nothing, so such a line is reported as left unsuppressed.

    Args:
        findings: the findings of a lint run, with filenames relative to the working directory
            (or absolute) as :func:`~interlace.linters.lint_paths` reports them.

    Returns:
        How many directives were added or extended (one per line), and the findings left
        unsuppressed, each with the reason.
    """
    by_file: dict[str, list[Finding]] = {}
    unused: dict[str, list[UnsuppressedLine]] = {}
    for finding in findings:
        # The real path: a symlink stays a symlink, and one file named twice is edited once.
        path = os.path.realpath(finding.filename)
        if finding.code == UNUSED_NOQA:
            line = UnsuppressedLine(
                finding.filename, finding.row, (finding.code,), 1, _KEEP_UNUSED, finding.cell
            )
            unused.setdefault(path, []).append(line)
            by_file.setdefault(path, [])
        else:
            by_file.setdefault(path, []).append(finding)
    result = NoqaResult()
    for path, group in by_file.items():
        done = _add_to_file(path, group) if group else NoqaResult()
        result.added += done.added
        left = [*done.unsuppressed, *unused.get(path, ())]
        result.unsuppressed.extend(sorted(left, key=lambda line: (line.cell or 0, line.row)))
    return result
