"""Helpers shared by the linter's command-line tests (fixtures are in ``conftest.py``)."""

from __future__ import annotations

import io
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
