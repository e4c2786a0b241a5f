"""Helpers shared by the linter's command-line tests (fixtures are in ``conftest.py``)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest


def put(root: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``root / name`` byte for byte (UTF-8), making its directories."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def feed_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """Make ``data`` what ``interlace lint -`` reads from standard input, byte for byte."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


SARIF_SCHEMA = Path(__file__).parent / "sarif-schema-2.1.0.json"
"""The official OASIS SARIF 2.1.0 schema (see test_lint_output.py for its provenance)."""


def sarif_schema_errors(log: object) -> list[str]:
    """What makes ``log`` (a parsed SARIF log) invalid against the SARIF 2.1.0 schema, sorted;
    empty when it is valid."""
    import jsonschema

    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft4Validator(schema)
    return sorted(str(error.message) for error in validator.iter_errors(log))
