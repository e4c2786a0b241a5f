"""File discovery, the process pool and the result cache of a lint run."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from interlace.linters import LintConfig, lint_paths
from interlace.linters import _run as _run_module
from interlace.linters._cache import CACHE_DIR
from interlace.linters._engine import FileResult
from interlace.linters._files import collect_files, per_file_matcher
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


GIT = shutil.which("git")


@pytest.mark.skipif(GIT is None, reason="git is the oracle")
@pytest.mark.parametrize(
    "files",
    [
        pytest.param(
            {
                "d/.gitignore": "*\n!*/\n!*.py\n",
                "d/v.py": "",
                "d/e/w.py": "",
                "d/e/f/x.py": "",
                "d/e/x.txt": "",
            },
            id="whitelist-in-a-subdirectory",
        ),
        pytest.param(
            {".gitignore": "*\n!*/\n!*.py\n", "v.py": "", "e/w.py": "", "e/f/x.py": ""},
            id="whitelist-at-the-root",
        ),
        pytest.param(
            {"d/.gitignore": "**\n!**/\n!*.py\n", "d/v.py": "", "d/e/w.py": ""},
            id="double-star-whitelist",
        ),
        pytest.param(
            {
                ".gitignore": "*.py\n",
                "pkg/.gitignore": "!keep.py\n",
                "pkg/keep.py": "",
                "pkg/drop.py": "",
                "a.py": "",
            },
            id="a-deeper-negation-re-includes",
        ),
        pytest.param(
            {".gitignore": "build/\n", "build/.gitignore": "!*.py\n", "build/a.py": "", "b.py": ""},
            id="nothing-below-an-ignored-directory-is-re-included",
        ),
        pytest.param(
            {".gitignore": "gen/*\n!gen/keep/\n", "gen/a.py": "", "gen/keep/b.py": ""},
            id="a-re-included-directory-under-an-ignored-glob",
        ),
        pytest.param(
            {
                ".gitignore": "/top.py\n**/gen.py\nsrc/**/m.py\nbuild\n[ab].py\n",
                "top.py": "",
                "sub/top.py": "",
                "x/gen.py": "",
                "src/p/q/m.py": "",
                "src/m2.py": "",
                "lib/build/z.py": "",
                "a.py": "",
                "c.py": "",
            },
            id="anchored-double-star-and-class-patterns",
        ),
    ],
)
def test_the_walk_takes_the_python_files_git_does_not_ignore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> None:
    assert GIT is not None
    tree(tmp_path, files)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    subprocess.run([GIT, "init", "-q", str(tmp_path)], check=True)
    listed = subprocess.run(
        [GIT, "-C", str(tmp_path), "ls-files", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    fileset = collect_files([tmp_path], root=tmp_path)
    assert sorted(names(tmp_path, fileset.files)) == sorted(p for p in listed if p.endswith(".py"))


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


def test_gitignore_lines_pathspec_rejects_are_skipped_as_git_skips_them(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {".gitignore": "!\nfoo\\\n[z-a].py\ngen.py\n", "gen.py": "", "foo.py": "", "a.py": ""},
    )
    fileset = collect_files([tmp_path], root=tmp_path)
    assert names(tmp_path, fileset.files) == ["a.py", "foo.py"]


def test_an_invalid_exclude_glob_is_a_config_error(tmp_path: Path) -> None:
    from interlace.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^invalid glob 'build\\\\' in exclude: it ends with"):
        collect_files([tmp_path], root=tmp_path, exclude=["build\\"])


def test_a_directory_that_cannot_be_read_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree(tmp_path, {"ok.py": "", "locked/a.py": ""})
    locked = tmp_path / "locked"
    scandir = os.scandir

    def refusing(path: str) -> object:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    fileset = collect_files([tmp_path], root=tmp_path)
    assert names(tmp_path, fileset.files) == ["ok.py"]
    assert fileset.unreadable == [(str(locked), "cannot read directory: Permission denied")]
    assert fileset.missing == []


def git_work_tree(root: Path, files: dict[str, str]) -> None:
    tree(root, {".git/HEAD": "ref: refs/heads/main\n", **files})


def test_gitignore_files_apply_from_the_work_tree_root_whatever_the_project_root(
    tmp_path: Path,
) -> None:
    git_work_tree(
        tmp_path,
        {
            ".gitignore": "local.py\n",
            ".git/info/exclude": "generated/\n",
            "backend/app/real.py": "",
            "backend/app/local.py": "",
            "backend/app/generated/g.py": "",
        },
    )
    for root in (tmp_path, tmp_path / "backend"):
        fileset = collect_files([tmp_path / "backend"], root=root)
        assert names(tmp_path, fileset.files) == ["backend/app/real.py"]


def test_info_exclude_of_a_linked_worktree_is_read_from_the_common_git_dir(
    tmp_path: Path,
) -> None:
    git_work_tree(
        tmp_path / "main",
        {".git/info/exclude": "scratch.py\n", ".git/worktrees/wt/commondir": "../..\n"},
    )
    tree(
        tmp_path / "wt",
        {".git": f"gitdir: {tmp_path / 'main/.git/worktrees/wt'}\n", "a.py": "", "scratch.py": ""},
    )
    fileset = collect_files([], root=tmp_path / "wt")
    assert names(tmp_path / "wt", fileset.files) == ["a.py"]


@pytest.mark.parametrize(
    ("files", "exclude"),
    [
        pytest.param({}, ["build"], id="exclude"),
        pytest.param({".gitignore": "build/\n"}, [], id="gitignore"),
    ],
)
def test_a_named_directory_is_walked_though_excluded_and_patterns_apply_below_it(
    tmp_path: Path, files: dict[str, str], exclude: list[str]
) -> None:
    tree(
        tmp_path,
        {
            **files,
            "build/b.py": "",
            "build/sub/c.py": "",
            "build/sub/build/d.py": "",
            "build/__pycache__/e.py": "",
        },
    )
    exclude = [*exclude, "__pycache__"]
    fileset = collect_files([tmp_path / "build"], root=tmp_path, exclude=exclude)
    assert names(tmp_path, fileset.files) == ["build/b.py", "build/sub/c.py"]
    forced = collect_files([tmp_path / "build"], root=tmp_path, exclude=exclude, force_exclude=True)
    assert forced.files == []
    assert collect_files([tmp_path], root=tmp_path, exclude=exclude).files == []


def test_a_file_reached_twice_is_linted_once_under_its_first_spelling(tmp_path: Path) -> None:
    tree(tmp_path, {"src/a.py": ""})
    (tmp_path / "link.py").symlink_to(tmp_path / "src" / "a.py")
    again = os.path.join(tmp_path, "src", "..", "src", "a.py")
    fileset = collect_files([again, tmp_path / "src" / "a.py", tmp_path], root=tmp_path)
    assert [os.fspath(p) for p in fileset.files] == [again]


def test_the_walk_collects_stub_files(tmp_path: Path) -> None:
    tree(tmp_path, {"pkg/a.py": "", "pkg/a.pyi": "", "pkg/notes.txt": ""})
    fileset = collect_files([tmp_path], root=tmp_path)
    assert names(tmp_path, fileset.files) == ["pkg/a.py", "pkg/a.pyi"]


@pytest.mark.parametrize(
    ("glob", "expected"),
    [("tests/**", ["tests/test_a.py"]), ("!tests/**", ["src/a.py", "setup.py"])],
)
def test_a_negated_per_file_glob_matches_the_files_the_rest_does_not(
    glob: str, expected: list[str]
) -> None:
    match = per_file_matcher(glob)
    assert [p for p in ("src/a.py", "setup.py", "tests/test_a.py") if match(p)] == expected


def test_negated_per_file_ignores_apply_to_the_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {"src/a.py": PRIMITIVE, "tests/test_a.py": PRIMITIVE})
    config = config_for(tmp_path, per_file_ignores=(("!tests/**", ("IL2",)),))
    result = lint_paths(["."], config=config, use_cache=False)
    assert [f.filename for f in result.findings] == ["tests/test_a.py"]


def test_an_unreadable_directory_is_an_io_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, {"ok.py": "", "locked/a.py": ""})
    scandir = os.scandir

    def refusing(path: str) -> object:
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    result = lint_paths(["."], config=config_for(tmp_path), use_cache=False)
    assert [(e.filename, e.message, e.kind) for e in result.errors] == [
        ("locked", "cannot read directory: Permission denied", "io")
    ]


def _symlink_loop_and_friends(root: Path) -> None:
    tree(root, {"ok.py": PRIMITIVE})
    (root / "l1.py").symlink_to("l2.py")
    (root / "l2.py").symlink_to("l1.py")
    (root / "dangling.py").symlink_to("gone.py")
    os.mkfifo(root / "pipe.py")  # reading it would wait for a writer, for good


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_links_that_lead_nowhere_are_io_errors_and_a_pipe_is_passed_over_in_a_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _symlink_loop_and_friends(tmp_path)
    result = lint_paths(["."], config=config_for(tmp_path), use_cache=False)
    assert [f.filename for f in result.findings] == ["ok.py"]
    assert [(e.filename, e.kind) for e in result.errors] == [
        ("dangling.py", "io"),
        ("l1.py", "io"),
        ("l2.py", "io"),
    ]
    dangling, loop, _ = (e.message for e in result.errors)
    assert dangling == (
        "a broken symbolic link: its target 'gone.py' does not exist; fix the link, or remove it"
    )
    assert loop == (
        "a loop of symbolic links (it links to 'l2.py', which leads back to it): point it at "
        "a file, or remove it"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_a_named_pipe_or_link_loop_is_an_io_error_and_the_rest_is_linted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _symlink_loop_and_friends(tmp_path)
    result = lint_paths(["pipe.py", "l1.py", "ok.py"], config=config_for(tmp_path), use_cache=False)
    assert [f.filename for f in result.findings] == ["ok.py"]
    assert [(e.filename, e.message.split(" (")[0]) for e in result.errors] == [
        ("pipe.py", "not a regular file"),
        ("l1.py", "a loop of symbolic links"),
    ]
