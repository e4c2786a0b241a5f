"""File discovery, the process pool and the result cache of a lint run."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from interlace.linters import LintConfig, lint_paths
from interlace.linters import _run as _run_module
from interlace.linters._cache import CACHE_DIR
from interlace.linters._engine import FileResult
from interlace.linters._files import collect_files
from interlace.linters._rule import LintContext

PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"


def tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def names(root: Path, paths: list[Path]) -> list[str]:
    return [p.resolve().relative_to(root.resolve()).as_posix() for p in paths]


def test_walk_respects_gitignore_exclude_and_default_excludes(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".gitignore": "ignored/\n*_gen.py\n",
            "pkg/.gitignore": "local.py\n",
            "pkg/a.py": "",
            "pkg/local.py": "",
            "pkg/b_gen.py": "",
            "pkg/notes.txt": "",
            "ignored/c.py": "",
            "gen/d.py": "",
            ".venv/e.py": "",
            "pkg/__pycache__/f.py": "",
            "keep/g.py": "",
        },
    )
    fileset = collect_files([tmp_path], root=tmp_path, exclude=[".venv", "__pycache__", "gen/**"])
    assert names(tmp_path, fileset.files) == ["keep/g.py", "pkg/a.py"]


def test_gitignore_can_be_turned_off(tmp_path: Path) -> None:
    tree(tmp_path, {".gitignore": "*.py\n", "a.py": ""})
    fileset = collect_files([tmp_path], root=tmp_path, respect_gitignore=False)
    assert names(tmp_path, fileset.files) == ["a.py"]


@pytest.mark.parametrize(("force", "expected"), [(False, ["gen/d.py"]), (True, [])])
def test_explicit_files_are_linted_unless_force_exclude(
    tmp_path: Path, force: bool, expected: list[str]
) -> None:
    tree(tmp_path, {"gen/d.py": ""})
    fileset = collect_files(
        [tmp_path / "gen" / "d.py"], root=tmp_path, exclude=["gen/**"], force_exclude=force
    )
    assert names(tmp_path, fileset.files) == expected


def test_missing_paths_are_reported_and_duplicates_collapse(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": ""})
    fileset = collect_files([tmp_path / "a.py", tmp_path, "nope.py"], root=tmp_path)
    assert names(tmp_path, fileset.files) == ["a.py"]
    assert fileset.missing == ["nope.py"]


def config_for(root: Path, **changes: object) -> LintConfig:
    return LintConfig(root=root).with_overrides(**changes)


def test_parallel_run_equals_serial_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {f"m{i:02}.py": PRIMITIVE * (i % 3 + 1) for i in range(40)})
    tree(tmp_path, {"broken.py": "import asyncio\ndef f(:\n"})
    serial = lint_paths(["."], config=config_for(tmp_path), jobs=1, use_cache=False)
    parallel = lint_paths(["."], config=config_for(tmp_path), jobs=2, use_cache=False)
    assert parallel.findings == serial.findings
    assert parallel.errors == serial.errors
    assert (serial.files, len(serial.findings), len(serial.errors)) == (41, 79, 1)


def test_warm_run_is_answered_from_the_cache_and_edits_miss_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {"a.py": PRIMITIVE, "b.py": "x = 1\n"})
    cold = lint_paths(["."], config=config_for(tmp_path))
    warm = lint_paths(["."], config=config_for(tmp_path))
    assert (cold.cached, warm.cached, warm.parsed) == (0, 2, 0)
    assert warm.findings == cold.findings
    assert (tmp_path / CACHE_DIR / ".gitignore").read_text(encoding="utf-8").endswith("*\n")
    (tmp_path / "a.py").write_text(PRIMITIVE + "EV = asyncio.Event()\n", encoding="utf-8")
    edited = lint_paths(["."], config=config_for(tmp_path))
    assert (edited.cached, len(edited.findings)) == (1, 2)


def test_cache_is_keyed_by_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {"a.py": PRIMITIVE})
    lint_paths(["."], config=config_for(tmp_path))
    old = lint_paths(["."], config=config_for(tmp_path, target_version=(3, 9)))
    ignored = lint_paths(["."], config=config_for(tmp_path, ignore=("IL201",)))
    assert (old.cached, ignored.cached, ignored.findings) == (0, 0, [])
    assert "Before Python 3.10" in old.findings[0].message


def test_cache_is_keyed_by_instance_primitives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree(
        tmp_path,
        {
            "a.py": "import asyncio\nclass C:\n    def __init__(self):\n"
            "        self.lock = asyncio.Lock()\n"
        },
    )
    default = lint_paths(["."], config=config_for(tmp_path))
    everything = lint_paths(["."], config=config_for(tmp_path, instance_primitives="all"))
    assert (default.findings, everything.cached, len(everything.findings)) == ([], 0, 1)


def test_no_cache_neither_reads_nor_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {"a.py": PRIMITIVE})
    lint_paths(["."], config=config_for(tmp_path), use_cache=False)
    assert not (tmp_path / CACHE_DIR).exists()


def test_per_file_ignores_apply_to_matching_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {"src/a.py": PRIMITIVE, "tests/test_a.py": PRIMITIVE})
    config = config_for(tmp_path, per_file_ignores=(("tests/**", ("IL2",)),))
    result = lint_paths(["."], config=config, use_cache=False)
    assert [f.filename for f in result.findings] == ["src/a.py"]


def test_cache_keeps_the_most_recently_used_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interlace.linters import _cache
    from interlace.linters._engine import FileResult

    monkeypatch.setattr(_cache, "_MAX_ENTRIES", 2)
    cache = _cache.ResultCache(tmp_path, "settings")
    for key in ("a", "b"):
        cache.put(key, FileResult("x.py"))
    cache.save()
    cache = _cache.ResultCache(tmp_path, "settings")
    assert cache.get("a", "x.py") is not None
    cache.put("c", FileResult("x.py"))
    cache.save()
    cache = _cache.ResultCache(tmp_path, "settings")
    assert [k for k in ("a", "b", "c") if cache.get(k, "x.py") is not None] == ["a", "c"]


def dies_on_poison(
    items: list[tuple[str, bytes, tuple[str, ...]]], base: LintContext
) -> list[FileResult]:
    """A worker body that dies like a segfault in native code on the file named poison.py."""
    if any(name.endswith("poison.py") for name, _, _ in items):
        os._exit(1)
    return _run_module._lint_chunk_original(items, base)  # type: ignore[attr-defined, no-any-return]


def test_a_worker_that_dies_costs_only_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_run_module, "_lint_chunk_original", _run_module._lint_chunk, raising=False)
    monkeypatch.setattr(_run_module, "_lint_chunk", dies_on_poison)
    monkeypatch.setattr(_run_module, "_pool_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {f"m{i:02}.py": PRIMITIVE for i in range(20)})
    tree(tmp_path, {"poison.py": PRIMITIVE})
    result = lint_paths(["."], config=config_for(tmp_path), jobs=2, use_cache=False)
    assert len(result.findings) == 20
    assert [(e.filename, e.kind) for e in result.errors] == [("poison.py", "internal")]
