"""The result cache under ``<root>/.interlace_cache/``.

One JSON index per (interlace version, rule-code fingerprint, target version, shared classes),
holding at most 20,000 entries (least recently used dropped first),
mapping ``<sha256 of the file's bytes>:<enabled codes>`` to that file's findings and errors without
the filename, so a renamed or moved file still hits. The rule-code fingerprint (size and mtime of
the linter's own modules) keeps an editable install from serving results of older rule code.
Internal errors are never cached. Writes are atomic (temp file + ``os.replace``); a cache that
cannot be read or written is silently bypassed: it only costs time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from interlace.linters._engine import FileError, FileResult, Finding, RelatedLocation

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
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


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
                [[r.row, r.column, r.end_row, r.end_column, r.message] for r in f.related],
                f.source_line,
            ]
            for f in result.findings
        ],
        "e": [[e.row, e.column, e.message, e.kind] for e in result.errors],
        "n": result.lines,
        "p": result.parsed,
    }


def _decode(entry: dict[str, Any], filename: str) -> FileResult:
    findings = tuple(
        Finding(
            code,
            message,
            filename,
            row,
            column,
            end_row,
            end_column,
            tuple(RelatedLocation(*rel) for rel in related),
            source_line,
        )
        for code, message, row, column, end_row, end_column, related, source_line in entry["f"]
    )
    errors = tuple(FileError(filename, *err) for err in entry["e"])
    return FileResult(filename, findings, errors, entry["n"], entry["p"], cached=True)


class ResultCache:
    """Per-run view of one cache index; ``save()`` writes it back if anything changed.

    Invariant: ``self._entries`` holds only results without internal errors.
    """

    def __init__(self, root: Path, settings: str) -> None:
        from interlace import __version__

        digest = hashlib.sha256(f"{settings}|{_code_fingerprint()}".encode()).hexdigest()[:16]
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
        self._touched.add(key)
        try:
            return _decode(entry, filename)
        except (KeyError, TypeError, ValueError):
            return None

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
