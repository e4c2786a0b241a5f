"""The result cache under ``<root>/.interlace_cache/``.

One JSON index per (interlace version, rule-code fingerprint, Python and libcst versions, target
version, shared classes), holding at most 20,000 entries (least recently used dropped first),
mapping ``<sha256 of the file's bytes>:<enabled codes>`` to that file's findings and errors without
the filename, so a renamed or moved file still hits. The rule-code fingerprint (size and mtime of
the linter's own modules) keeps an editable install from serving results of older rule code; the
Python version is in the key because what parses depends on it (a file no rule needs is checked
with the running interpreter's parser), and libcst's version because its grammar decides the rest.
Internal errors are never cached. Writes are atomic (temp file + ``os.replace``); a cache that
cannot be read or written is silently bypassed: it only costs time. An entry of the wrong shape
(a damaged or hand-edited index) is a miss, so the file is linted again and the entry rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from dataclasses import astuple
from pathlib import Path
from typing import Any

from interlace.linters._engine import FileError, FileResult, Finding, RelatedLocation, Span
from interlace.linters._noqa import NoqaEdit

__all__ = ("CACHE_DIR", "ResultCache", "content_key")

CACHE_DIR = ".interlace_cache"
_MAX_ENTRIES = 20_000


def content_key(data: bytes, codes: tuple[str, ...]) -> str:
    """Return the cache key of one file's bytes linted with ``codes``."""
    return f"{hashlib.sha256(data).hexdigest()}:{','.join(codes)}"


def _code_fingerprint() -> str:
    here = Path(__file__).parent
    parts = []
    for path in sorted([*here.glob("*.py"), *(here / "rules").glob("*.py")]):
        with contextlib.suppress(OSError):
            stat = path.stat()
            parts.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _encode(result: FileResult) -> dict[str, Any]:
    return {
        "f": [
            [
                f.code,
                f.message,
                f.row,
                f.column,
                f.end_row,
                f.end_column,
                [
                    [r.row, r.column, r.end_row, r.end_column, r.message, r.cell, _list(r.raw_span)]
                    for r in f.related
                ],
                f.source_line,
                [[row, text] for row, text in f.context],
                None if f.fix is None else list(astuple(f.fix)),
                f.cell,
                _list(f.raw_span),
            ]
            for f in result.findings
        ],
        "e": [
            [e.row, e.column, e.message, e.kind, e.cell, _list(e.raw_position)]
            for e in result.errors
        ],
        "n": result.lines,
        "p": result.parsed,
    }


def _list(values: tuple[int, ...] | None) -> list[int] | None:
    return None if values is None else list(values)


def _is_cell(value: object) -> bool:
    return value is None or (_is_int(value) and value > 0)  # type: ignore[operator]


def _is_raw(value: object, size: int) -> bool:
    return value is None or (isinstance(value, list) and len(value) == size and _is_span(value))


def _is_int(value: object) -> bool:
    return type(value) is int  # not a bool, which JSON keeps apart and int() would accept


def _is_span(values: list[Any]) -> bool:
    return all(_is_int(v) and v >= 0 for v in values)


def _is_finding(row: object) -> bool:
    if not (isinstance(row, list) and len(row) == 12):
        return False
    code, message, *span, related, source_line, context, fix, cell, raw = row
    return (
        _is_cell(cell)
        and _is_raw(raw, 4)
        and isinstance(code, str)
        and isinstance(message, str)
        and _is_span(span)
        and isinstance(related, list)
        and all(
            isinstance(rel, list)
            and len(rel) == 7
            and _is_span(rel[:4])
            and isinstance(rel[4], str)
            and _is_cell(rel[5])
            and _is_raw(rel[6], 4)
            for rel in related
        )
        and isinstance(source_line, str)
        and isinstance(context, list)
        and all(
            isinstance(line, list)
            and len(line) == 2
            and _is_int(line[0])
            and line[0] > 0
            and isinstance(line[1], str)
            for line in context
        )
        and (
            fix is None
            or (
                isinstance(fix, list)
                and len(fix) == 5
                and _is_span(fix[:4])
                and isinstance(fix[4], str)
            )
        )
    )


def _is_error(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 6
        and _is_span(row[:2])
        and all(isinstance(v, str) for v in row[2:4])
        and _is_cell(row[4])
        and _is_raw(row[5], 2)
    )


def _is_entry(entry: object) -> bool:
    """Whether ``entry`` has the shape ``_encode`` writes, down to every field's type."""
    return (
        isinstance(entry, dict)
        and entry.keys() == {"f", "e", "n", "p"}
        and isinstance(entry["f"], list)
        and all(_is_finding(row) for row in entry["f"])
        and isinstance(entry["e"], list)
        and all(_is_error(row) for row in entry["e"])
        and _is_int(entry["n"])
        and entry["n"] >= 0
        and isinstance(entry["p"], bool)
    )


def _finding(row: list[Any], filename: str) -> Finding:
    code, message, line, column, end_row, end_column, related, source_line, context, fix = row[:10]
    cell, raw = row[10:]
    return Finding(
        code,
        message,
        filename,
        line,
        column,
        end_row,
        end_column,
        tuple(
            RelatedLocation(
                rel[0],
                rel[1],
                rel[2],
                rel[3],
                rel[4],
                rel[5],
                None if rel[6] is None else _span(rel[6]),
            )
            for rel in related
        ),
        source_line,
        tuple((number, text) for number, text in context),
        None if fix is None else NoqaEdit(*fix),
        cell,
        None if raw is None else _span(raw),
    )


def _decode(entry: dict[str, Any], filename: str) -> FileResult:
    findings = tuple(_finding(row, filename) for row in entry["f"])
    errors = tuple(
        FileError(
            filename,
            err[0],
            err[1],
            err[2],
            err[3],
            err[4],
            None if err[5] is None else (err[5][0], err[5][1]),
        )
        for err in entry["e"]
    )
    return FileResult(filename, findings, errors, entry["n"], entry["p"], cached=True)


def _span(values: list[int]) -> Span:
    row, column, end_row, end_column = values
    return row, column, end_row, end_column


def _runtime() -> str:
    """The interpreter and parser versions that results depend on."""
    try:
        libcst = importlib.metadata.version("libcst")
    except importlib.metadata.PackageNotFoundError:
        libcst = "?"
    major, minor = sys.version_info[:2]
    return f"{sys.implementation.name}-{major}.{minor}|libcst-{libcst}"


class ResultCache:
    """Per-run view of one cache index; ``save()`` writes it back if anything changed.

    Invariant: ``self._entries`` holds only results without internal errors.
    """

    def __init__(self, root: Path, settings: str) -> None:
        from interlace import __version__

        key = f"{settings}|{_code_fingerprint()}|{_runtime()}"
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        self.directory = root / CACHE_DIR
        self.path = self.directory / f"{__version__}-{digest}.json"
        self._entries: dict[str, dict[str, Any]] = {}
        self._touched: set[str] = set()
        self._dirty = False
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = {}
        if isinstance(loaded, dict):
            self._entries = loaded

    def get(self, key: str, filename: str) -> FileResult | None:
        """Return the cached result for ``key`` under ``filename``, or ``None``."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if not _is_entry(entry):
            # The caller lints the file and ``put`` rewrites the entry; dropping it here also
            # heals the index when the new result is not cacheable.
            del self._entries[key]
            self._dirty = True
            return None
        self._touched.add(key)
        return _decode(entry, filename)

    def put(self, key: str, result: FileResult) -> None:
        """Remember ``result`` unless it carries an internal error."""
        if any(e.kind in ("internal", "io") for e in result.errors):
            return
        self._entries[key] = _encode(result)
        self._touched.add(key)
        self._dirty = True

    def save(self) -> None:
        """Write the index back atomically; errors are ignored (the cache is an optimisation)."""
        if not self._dirty:
            return
        if len(self._entries) > _MAX_ENTRIES:
            # Least recently used first: entries this run used go last and are kept.
            order = [k for k in self._entries if k not in self._touched]
            order += [k for k in self._entries if k in self._touched]
            self._entries = {k: self._entries[k] for k in order[-_MAX_ENTRIES:]}
        try:
            self.directory.mkdir(exist_ok=True)
            gitignore = self.directory / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# created by interlace lint\n*\n", encoding="utf-8")
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self._entries, handle, separators=(",", ":"))
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        self._dirty = False
