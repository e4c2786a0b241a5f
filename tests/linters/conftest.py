"""Fixtures shared by the linter's command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory with a pyproject.toml, as the working directory."""
    (tmp_path / "pyproject.toml").write_text("[tool.interlace.lint]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path
