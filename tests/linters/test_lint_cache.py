"""The result cache: a damaged entry is a miss, and the index is keyed by the interpreter."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlace.linters import LintConfig, lint_paths
from interlace.linters._cache import CACHE_DIR, ResultCache

PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"


def _set(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def damage(entry: dict[str, Any]) -> None:
        entry[key] = value

    return damage


def _set_in_finding(index: int, value: object) -> Callable[[dict[str, Any]], None]:
    def damage(entry: dict[str, Any]) -> None:
        entry["f"][0][index] = value

    return damage


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    def damage(entry: dict[str, Any]) -> None:
        del entry[key]

    return damage


def _drop_context(entry: dict[str, Any]) -> None:
    """An entry written before findings carried their context lines and fix."""
    del entry["f"][0][8:]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_set("n", None), id="line-count-null"),
        pytest.param(_set("n", True), id="line-count-bool"),
        pytest.param(_set("f", {}), id="findings-an-object"),
        pytest.param(_set("f", ["IL201"]), id="finding-a-string"),
        pytest.param(_set("e", [[1, 1, "cannot parse"]]), id="error-too-short"),
        pytest.param(_set("p", 1), id="parsed-an-int"),
        pytest.param(_drop("e"), id="errors-missing"),
        pytest.param(_set_in_finding(2, "2"), id="row-a-string"),
        pytest.param(_set_in_finding(6, [[1, 2, 3]]), id="related-too-short"),
        pytest.param(_set_in_finding(7, None), id="source-line-null"),
        pytest.param(_set_in_finding(8, [[0, "x"]]), id="context-row-zero"),
        pytest.param(_set_in_finding(8, [[1]]), id="context-line-too-short"),
        pytest.param(_set_in_finding(8, "x"), id="context-a-string"),
        pytest.param(_drop_context, id="finding-without-context"),
        pytest.param(_set_in_finding(9, [1, 1, 1, 2]), id="fix-too-short"),
        pytest.param(_set_in_finding(9, [1, 1, 1, "2", ""]), id="fix-column-a-string"),
        pytest.param(_set_in_finding(9, "remove"), id="fix-a-string"),
    ],
)
def test_a_cache_entry_of_the_wrong_shape_is_a_miss_and_is_rewritten(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    damage: Callable[[dict[str, Any]], None],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(PRIMITIVE, encoding="utf-8")
    config = LintConfig(root=tmp_path)
    cold = lint_paths(["."], config=config)
    [index] = (tmp_path / CACHE_DIR).glob("*.json")
    entries = json.loads(index.read_text(encoding="utf-8"))
    for entry in entries.values():
        damage(entry)
    index.write_text(json.dumps(entries), encoding="utf-8")
    relinted = lint_paths(["."], config=config)
    warm = lint_paths(["."], config=config)
    assert (relinted.cached, relinted.findings, relinted.lines) == (0, cold.findings, 2)
    assert (warm.cached, warm.findings) == (1, cold.findings)


def test_the_cache_index_is_keyed_by_the_python_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = ResultCache(tmp_path, "settings").path
    assert ResultCache(tmp_path, "settings").path == running
    monkeypatch.setattr(sys, "version_info", (3, 99, 0, "final", 0))
    assert ResultCache(tmp_path, "settings").path != running


def test_il001_findings_are_cached_under_the_enabled_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x = 1  # noqa: IL201\n", encoding="utf-8")
    plain = LintConfig(root=tmp_path)
    audited = LintConfig(root=tmp_path, extend_select=("IL001",))
    # IL201 ignored for the file: whether its directive is used is unknown, so IL001 is silent.
    ignored = LintConfig(
        root=tmp_path, extend_select=("IL001",), per_file_ignores=(("a.py", ("IL201",)),)
    )
    runs = [lint_paths(["a.py"], config=c) for c in (plain, audited, audited, plain, ignored)]
    assert [([(f.row, f.code) for f in run.findings], run.cached) for run in runs] == [
        ([], 0),
        ([(1, "IL001")], 0),
        ([(1, "IL001")], 1),
        ([], 1),
        ([], 0),
    ]
    assert runs[2].findings == runs[1].findings
