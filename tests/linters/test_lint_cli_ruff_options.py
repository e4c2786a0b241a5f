"""``interlace lint``'s ruff options: ``-o/--output-file``, ``-q/--quiet``, ``-s/--silent``,
``--show-files``, ``--show-settings``, ``--diff``, ``--fix-only`` and
``--exit-non-zero-on-fix``, checked end to end through the command line, as ruff behaves."""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path
from typing import Any

import pytest
from lint_project import feed_stdin, put, sarif_schema_errors

import interlace.linters.cli as cli_module
from interlace.linters._config import DEFAULT_EXCLUDE
from interlace.linters.cli import lint_main

PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"
CONCISE = "a.py:2:8: IL201"
# Two IL001 findings that --fix fixes (IL101 and IL301 are unused; IL201 is used).
UNUSED = "import asyncio\nLOCK = asyncio.Lock()  # noqa: IL101, IL201\nx = 1  # noqa: IL301\n"
UNUSED_FIXED = "import asyncio\nLOCK = asyncio.Lock()  # noqa: IL201\nx = 1\n"
# The same, and an IL201 finding that --fix leaves.
LEFT = "M = asyncio.Lock()\n"
LEFT_IL201 = "a.py:4:5: IL201 `asyncio.Lock` is created at module level"
# ruff's --diff of UNUSED, byte for byte (checked against `ruff check --diff` with RUF100).
UNUSED_DIFF = (
    "--- a.py\n"
    "+++ a.py\n"
    "@@ -1,3 +1,3 @@\n"
    " import asyncio\n"
    "-LOCK = asyncio.Lock()  # noqa: IL101, IL201\n"
    "-x = 1  # noqa: IL301\n"
    "+LOCK = asyncio.Lock()  # noqa: IL201\n"
    "+x = 1\n"
    "\n"
)
IL001 = ["--no-cache", "--extend-select", "IL001"]
UNPARSABLE = "b.py:2:7: error: cannot parse: invalid syntax\n"


def output(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    captured = capsys.readouterr()
    return captured.out, captured.err


# --- -o/--output-file ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "concise", "json", "sarif", "github", "gitlab"])
def test_output_file_holds_what_stdout_would_and_the_summary_stays_on_stderr(
    project: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", "--format", fmt]) == 1
    printed = capsys.readouterr().out
    assert lint_main(["--no-cache", "--format", fmt, "-o", "report.out"]) == 1
    assert output(capsys) == ("", "Found 1 finding (1 file checked).\n")
    assert (project / "report.out").read_text(encoding="utf-8") == printed
    assert "IL201" in printed


def test_output_file_in_json_and_sarif_is_valid_with_findings_and_errors(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    put(project, "b.py", "import asyncio\ndef f(:\n")
    assert lint_main(["--no-cache", "--format", "json", "--output-file", "out.json"]) == 1
    items = json.loads((project / "out.json").read_text(encoding="utf-8"))
    assert [item["code"] for item in items] == ["IL201", "invalid-syntax"]
    assert lint_main(["--no-cache", "--format", "sarif", "--output-file", "out.sarif"]) == 1
    log = json.loads((project / "out.sarif").read_text(encoding="utf-8"))
    assert sarif_schema_errors(log) == []
    assert [result["ruleId"] for result in log["runs"][0]["results"]] == ["IL201"]
    # Files that could not be linted are errors on stderr, as without --output-file.
    assert output(capsys)[1].count(UNPARSABLE) == 2


def test_output_file_is_written_when_there_are_no_findings(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", "x = 1\n")
    assert lint_main(["--no-cache", "--format", "json", "-o", "out.json"]) == 0
    assert (project / "out.json").read_text(encoding="utf-8") == "[]\n"
    assert lint_main(["--no-cache", "--format", "sarif", "-o", "out.sarif"]) == 0
    log = json.loads((project / "out.sarif").read_text(encoding="utf-8"))
    assert sarif_schema_errors(log) == []
    assert log["runs"][0]["results"] == []
    assert lint_main(["--no-cache", "-o", "out.txt"]) == 0
    assert (project / "out.txt").read_bytes() == b""
    assert output(capsys) == ("", "All checks passed (1 file checked).\n" * 3)


def test_output_file_in_a_missing_directory_creates_it_as_ruff_does(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", "--format", "json", "-o", "reports/ci/lint.json"]) == 1
    assert [f["code"] for f in json.loads((project / "reports/ci/lint.json").read_text())] == [
        "IL201"
    ]


def test_output_file_under_a_file_exits_2_before_linting(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--format", "sarif", "-o", "a.py/interlace.sarif"]) == 2
    out, err = output(capsys)
    assert out == ""
    assert err.startswith(
        "interlace lint: error: cannot write --output-file 'a.py/interlace.sarif': cannot "
        "create its directory 'a.py' ("
    )
    assert err.endswith("); pass a path in a directory you can write to\n")
    # Nothing was linted: a run would have written its cache.
    assert sorted(p.name for p in project.iterdir()) == ["a.py", "pyproject.toml"]


def test_output_file_that_is_a_directory_exits_2_before_linting(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    (project / "reports").mkdir()
    assert lint_main(["--no-cache", "-o", "reports"]) == 2
    assert output(capsys) == (
        "",
        "interlace lint: error: --output-file 'reports' is a directory; pass the path of a "
        f"file to write the report to, e.g. {os.path.join('reports', 'interlace.sarif')!r}\n",
    )


def test_output_file_is_left_as_it_was_when_the_run_stops_on_a_configuration_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    put(project, "out.json", "previous\n")
    assert lint_main(["--no-cache", "--select", "E501", "-o", "out.json"]) == 2
    assert (project / "out.json").read_text(encoding="utf-8") == "previous\n"
    assert output(capsys)[1].startswith("interlace lint: error: unknown rule selector 'E501'")


class _FailingHandle:
    """A file handle that writes half of what it is given, then runs out of space."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def __enter__(self) -> _FailingHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def write(self, data: bytes) -> int:
        self._handle.write(data[: len(data) // 2])
        self._handle.flush()
        raise OSError(28, "No space left on device")


def test_an_output_file_that_cannot_be_written_completely_is_removed_and_exits_2(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    put(project, "a.py", PRIMITIVE)

    def failing_open(path: str, mode: str) -> _FailingHandle:
        return _FailingHandle(builtins.open(path, mode))

    monkeypatch.setattr(cli_module, "open", failing_open, raising=False)
    assert lint_main(["--no-cache", "--format", "json", "-o", "out.json"]) == 2
    assert not (project / "out.json").exists()
    assert output(capsys) == (
        "",
        "Found 1 finding (1 file checked).\n"
        "interlace lint: error: cannot write --output-file 'out.json': No space left on "
        "device; the incomplete file was removed; check the path, its permissions and the "
        "free space, then run again\n",
    )


def test_output_file_with_stdin_fix_gets_the_report_while_stdout_is_the_source(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, (UNUSED + LEFT).encode())
    argv = [*IL001, "--fix", "--format", "json", "-o", "out.json", "--stdin-filename", "a.py"]
    assert lint_main(argv) == 1
    assert output(capsys) == (
        UNUSED_FIXED + LEFT,
        "Found 3 findings (2 fixed, 1 remaining; 1 file checked).\n",
    )
    items = json.loads((project / "out.json").read_text(encoding="utf-8"))
    assert [(item["code"], item["location"]["row"]) for item in items] == [("IL201", 4)]


# --- -q/--quiet and -s/--silent -----------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "files", "code", "out", "err"),
    [
        pytest.param("-q", {"a.py": PRIMITIVE}, 1, [CONCISE], "", id="quiet-findings"),
        pytest.param("-s", {"a.py": PRIMITIVE}, 1, [], "", id="silent-findings"),
        pytest.param("-q", {"a.py": "x = 1\n"}, 0, [], "", id="quiet-clean"),
        pytest.param("-s", {"a.py": "x = 1\n"}, 0, [], "", id="silent-clean"),
        pytest.param(
            "--quiet",
            {"a.py": PRIMITIVE, "b.py": "import asyncio\ndef f(:\n"},
            1,
            [CONCISE],
            UNPARSABLE,
            id="quiet-unparsable-error-still-printed",
        ),
        pytest.param(
            "--silent",
            {"a.py": PRIMITIVE, "b.py": "import asyncio\ndef f(:\n"},
            1,
            [],
            "",
            id="silent-unparsable-exit-code-only",
        ),
    ],
)
def test_quiet_prints_findings_and_errors_only_and_silent_nothing(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    files: dict[str, str],
    code: int,
    out: list[str],
    err: str,
) -> None:
    for name, text in files.items():
        put(project, name, text)
    assert lint_main(["--no-cache", "--format", "concise", flag]) == code
    printed, errors = output(capsys)
    assert [line.split(" `")[0] for line in printed.splitlines()] == out
    assert errors == err


def test_quiet_drops_the_fixable_hint_and_the_no_files_warning(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", "x = 1  # noqa: IL301\n")
    (project / "empty").mkdir()
    assert lint_main([*IL001, "--format", "concise", "a.py"]) == 1
    assert output(capsys)[1] == ("Found 1 finding (1 file checked).\n[*] 1 fixable with `--fix`.\n")
    assert lint_main([*IL001, "--format", "concise", "-q", "a.py"]) == 1
    assert output(capsys)[1] == ""
    assert lint_main(["--no-cache", "empty"]) == 0
    assert output(capsys)[1].startswith("interlace lint: warning: No Python files found")
    assert lint_main(["--no-cache", "-q", "empty"]) == 0
    assert output(capsys) == ("", "")


def test_quiet_and_silent_cannot_be_combined_as_in_ruff(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["-q", "-s"]) == 2
    assert output(capsys)[1].endswith(
        "interlace lint: error: argument -s/--silent: not allowed with argument -q/--quiet\n"
    )


def test_silent_still_prints_errors_that_stop_the_run_as_ruff_does(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["-s", "--select", "E501"]) == 2
    assert output(capsys)[1].startswith("interlace lint: error: unknown rule selector 'E501'")


def test_silent_still_writes_the_output_file_and_stdin_fixed_source(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, (UNUSED + LEFT).encode())
    argv = [*IL001, "-s", "--fix", "--format", "concise", "-o", "out.txt", "--stdin-filename"]
    assert lint_main([*argv, "a.py"]) == 1
    assert output(capsys) == (UNUSED_FIXED + LEFT, "")
    assert (project / "out.txt").read_text(encoding="utf-8").startswith(LEFT_IL201)


# --- --show-files ---------------------------------------------------------------------------


@pytest.fixture
def tree(project: Path) -> Path:
    """A project whose files each have one IL201 finding, some excluded or git-ignored."""
    put(project, "pyproject.toml", '[tool.interlace.lint]\nextend-exclude = ["gen"]\n')
    put(project, ".gitignore", "ignored/\n")
    for name in [
        "z.py",
        "B.py",
        "pkg/a.py",
        "pkg/stub.pyi",
        "pkg-x/a.py",
        "gen/made.py",
        "ignored/i.py",
        "build/b.py",
    ]:
        put(project, name, PRIMITIVE)
    put(project, "notes.txt", PRIMITIVE)
    return project


def test_show_files_lists_sorted_absolute_paths_as_ruff_and_exits_0(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["--show-files"]) == 0
    # As ruff sorts them: by path component, byte-wise ("B.py" before "pkg", "pkg" before
    # "pkg-x").
    names = ["B.py", "pkg/a.py", "pkg/stub.pyi", "pkg-x/a.py", "z.py"]
    assert output(capsys) == ("".join(f"{tree / name}\n" for name in names), "")
    assert not (tree / ".interlace_cache").exists()  # nothing was linted


def test_show_files_lists_exactly_the_files_a_run_lints(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ignored/i.py", "gen", "z.py", "build/b.py", "pkg"]
    assert lint_main(["--show-files", *argv]) == 0
    shown = output(capsys)[0].splitlines()
    assert lint_main(["--no-cache", "--format", "json", *argv]) == 1
    linted = sorted({item["filename"] for item in json.loads(output(capsys)[0])}, key=Path)
    assert shown == linted
    # Named paths are listed even where exclude or .gitignore would skip them, as in ruff.
    names = ["build/b.py", "gen/made.py", "ignored/i.py", "pkg/a.py", "pkg/stub.pyi", "z.py"]
    assert shown == [str(tree / name) for name in names]


def test_show_files_applies_force_exclude_to_named_files(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--show-files", "--force-exclude", "ignored/i.py", "gen/made.py", "build", "z.py"]
    assert lint_main(argv) == 0
    assert output(capsys) == (f"{tree / 'z.py'}\n", "")


def test_show_files_to_an_output_file(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint_main(["--show-files", "-o", "files.txt", "pkg"]) == 0
    assert output(capsys) == ("", "")
    expected = f"{tree / 'pkg' / 'a.py'}\n{tree / 'pkg' / 'stub.pyi'}\n"
    assert (tree / "files.txt").read_text(encoding="utf-8") == expected


def test_show_files_reports_a_missing_path_as_linting_does(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["--show-files", "nope.py", "z.py"]) == 2
    assert output(capsys) == (f"{tree / 'z.py'}\n", "nope.py: error: no such file or directory\n")


def test_show_files_warns_when_there_is_no_file_unless_quiet(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["--show-files", "gen", "--force-exclude"]) == 0
    assert output(capsys) == (
        "",
        "interlace lint: warning: No Python files found under the given path(s)\n",
    )
    assert lint_main(["--show-files", "gen", "--force-exclude", "-q"]) == 0
    assert output(capsys) == ("", "")


# --- --show-settings ------------------------------------------------------------------------


def _exclude_block(extra: tuple[str, ...] = ()) -> str:
    return "".join(f'    "{glob}",\n' for glob in (*DEFAULT_EXCLUDE, *extra))


def test_show_settings_shows_the_closest_configuration_of_the_first_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nselect = ["IL2"]\n')
    put(
        project,
        "pkg/pyproject.toml",
        "[tool.interlace.lint]\n"
        'select = ["IL3", "IL1"]\n'
        'per-file-ignores = { "a.py" = ["IL303"] }\n'
        'extend-exclude = ["gen"]\n'
        'target-version = "py39"\n'
        'sharing = "declared"\n'
        'task-shared-classes = ["Zed", "Agent"]\n',
    )
    put(project, "top.py", "x = 1\n")
    put(project, "pkg/a.py", "x = 1\n")
    # The first file in ruff's sorted order, not the first named.
    assert lint_main(["--show-settings", "--ignore", "IL302", "top.py", "pkg"]) == 0
    out, err = output(capsys)
    assert err == ""
    assert out == (
        f'Resolved settings for: "{project / "pkg" / "a.py"}"\n'
        f'Settings path: "{project / "pkg" / "pyproject.toml"}"\n'
        f'Project root: "{project / "pkg"}"\n'
        "\n"
        "# Rules enabled for this file: select, extend-select and ignore, then "
        "per-file-ignores\n"
        "enabled = [\n"
        '    "IL101",  # check-then-act-across-await\n'
        '    "IL301",  # stale-restore-across-await\n'
        "]\n"
        "\n"
        "# [tool.interlace.lint] of the settings file, with the command line's flags applied\n"
        'select = [\n    "IL101",\n    "IL301",\n    "IL303",\n]\n'
        "extend-select = []\n"
        "ignore = []\n"
        'per-file-ignores = { "a.py" = ["IL303"] }\n'
        f"exclude = [\n{_exclude_block(('gen',))}]\n"
        'target-version = "py39"\n'
        "shared-classes = []\n"
        'task-shared-classes = [\n    "Agent",\n    "Zed",\n]\n'
        'sharing = "declared"\n'
        'instance-primitives = "evidence"\n'
        "respect-gitignore = true\n"
        "force-exclude = false\n"
    )


def test_show_settings_prints_under_the_table_only_keys_the_table_accepts(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        project,
        "pyproject.toml",
        "[tool.interlace.lint]\n"
        'per-file-ignores = { "a.py" = ["IL303"] }\n'
        'task-shared-classes = ["Agent"]\n'
        "force-exclude = true\n",
    )
    put(project, "a.py", "x = 1\n")
    assert lint_main(["--show-settings"]) == 0
    printed = output(capsys)[0]
    table = printed.split("flags applied\n", 1)[1]
    put(project, "pyproject.toml", "[tool.interlace.lint]\n" + table)
    assert lint_main(["--show-settings"]) == 0
    assert output(capsys) == (printed, "")


def test_show_settings_without_a_configuration_says_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    put(tmp_path, "a.py", "x = 1\n")
    assert lint_main(["--show-settings", "--force-exclude"]) == 0
    lines = output(capsys)[0].splitlines()
    assert lines[:2] == [
        f'Resolved settings for: "{tmp_path / "a.py"}"',
        "Settings path: defaults (no pyproject.toml with a [tool.interlace] table applies)",
    ]
    assert lines[-1] == "force-exclude = true"


def test_show_settings_with_no_file_to_lint_exits_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "empty").mkdir()
    assert lint_main(["--show-settings", "empty"]) == 2
    assert output(capsys) == (
        "",
        "interlace lint: error: --show-settings found no Python file to lint under 'empty', "
        "so it has no settings to show; name a Python file, e.g. interlace lint "
        "--show-settings src/app.py\n",
    )


# --- --diff ---------------------------------------------------------------------------------


def test_diff_prints_ruffs_unified_diff_exits_1_and_leaves_the_file_untouched(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", UNUSED)
    assert lint_main([*IL001, "--diff"]) == 1
    assert output(capsys) == (UNUSED_DIFF, "Would fix 2 findings (1 file checked).\n")
    assert path.read_text(encoding="utf-8") == UNUSED


def test_diff_exits_0_when_nothing_would_change_even_with_findings_left(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main([*IL001, "--diff"]) == 0
    assert output(capsys) == ("", "No findings would be fixed (1 file checked).\n")


def test_diff_with_exit_zero_exits_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "a.py", UNUSED)
    assert lint_main([*IL001, "--diff", "--exit-zero"]) == 0
    assert output(capsys)[0] == UNUSED_DIFF


def test_diff_marks_lines_without_a_final_newline_and_sorts_files_as_ruff(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "b.py", "x = 1\ny = 2  # noqa: IL301")
    put(project, "a.py", UNUSED)
    assert lint_main([*IL001, "--diff", "b.py", "a.py"]) == 1
    assert output(capsys)[0] == UNUSED_DIFF + (
        "--- b.py\n"
        "+++ b.py\n"
        "@@ -1,2 +1,2 @@\n"
        " x = 1\n"
        "-y = 2  # noqa: IL301\n"
        "\\ No newline at end of file\n"
        "+y = 2\n"
        "\\ No newline at end of file\n"
        "\n"
    )


def test_diff_to_an_output_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "a.py", UNUSED)
    assert lint_main([*IL001, "--diff", "-o", "fix.diff"]) == 1
    assert output(capsys) == ("", "Would fix 2 findings (1 file checked).\n")
    assert (project / "fix.diff").read_text(encoding="utf-8") == UNUSED_DIFF


@pytest.mark.parametrize(
    ("argv", "diff"),
    [
        # As in ruff: standard input without a name has no ---/+++ lines.
        pytest.param(["-"], UNUSED_DIFF.split("\n", 2)[2], id="dash"),
        pytest.param(["--stdin-filename", "a.py"], UNUSED_DIFF, id="stdin-filename"),
    ],
)
def test_diff_of_standard_input_prints_the_diff_not_the_source(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    diff: str,
) -> None:
    feed_stdin(monkeypatch, UNUSED.encode())
    assert lint_main([*IL001, "--diff", *argv]) == 1
    assert output(capsys) == (diff, "Would fix 2 findings (1 file checked).\n")


def test_diff_still_reports_files_that_could_not_be_linted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", UNUSED)
    put(project, "b.py", "import asyncio\ndef f(:\n")
    # 1 for a.py's diff: as in ruff, the file that does not parse does not count in --diff.
    assert lint_main([*IL001, "--diff"]) == 1
    assert output(capsys) == (
        UNUSED_DIFF,
        UNPARSABLE + "Would fix 2 findings (2 files checked).\n1 error: some files were not linted "
        "completely.\n",
    )


# --- --fix-only -----------------------------------------------------------------------------


def test_fix_only_fixes_reports_no_finding_left_and_exits_0(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", UNUSED + LEFT)
    assert lint_main([*IL001, "--fix-only"]) == 0
    assert output(capsys) == ("", "Fixed 2 findings (1 file checked).\n")
    assert path.read_text(encoding="utf-8") == UNUSED_FIXED + LEFT
    assert lint_main([*IL001, "--fix-only"]) == 0
    assert output(capsys) == ("", "No findings fixed (1 file checked).\n")
    assert lint_main([*IL001, "--format", "concise"]) == 1
    assert output(capsys)[0].startswith(LEFT_IL201)


def test_fix_only_in_json_lists_only_files_that_could_not_be_linted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", UNUSED)
    put(project, "b.py", "import asyncio\ndef f(:\n")
    # ruff --fix-only exits 0 too: it counts fixes, not files that do not parse.
    assert lint_main([*IL001, "--fix-only", "--format", "json"]) == 0
    out, err = output(capsys)
    assert [item["code"] for item in json.loads(out)] == ["invalid-syntax"]
    assert err == (
        UNPARSABLE
        + "Fixed 2 findings (2 files checked).\n1 error: some files were not linted completely.\n"
    )


def test_fix_only_on_standard_input_prints_the_fixed_source_only(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, UNUSED.encode())
    assert lint_main([*IL001, "--fix-only", "-"]) == 0
    assert output(capsys) == (UNUSED_FIXED, "Fixed 2 findings (1 file checked).\n")


# --- --exit-non-zero-on-fix -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "argv", "code"),
    [
        pytest.param("x = 1  # noqa: IL301\n", ["--fix"], 0, id="fix-nothing-left"),
        pytest.param(
            "x = 1  # noqa: IL301\n", ["--fix", "--exit-non-zero-on-fix"], 1, id="fix-fixed"
        ),
        pytest.param("x = 1\n", ["--fix", "--exit-non-zero-on-fix"], 0, id="fix-nothing"),
        pytest.param(UNUSED + LEFT, ["--fix-only"], 0, id="fix-only-findings-left"),
        pytest.param(UNUSED, ["--fix-only", "--exit-non-zero-on-fix"], 1, id="fix-only-fixed"),
        pytest.param(PRIMITIVE, ["--fix-only", "--exit-non-zero-on-fix"], 0, id="none-fixed"),
    ],
)
def test_exit_non_zero_on_fix_exits_1_when_anything_was_fixed(
    project: Path, capsys: pytest.CaptureFixture[str], source: str, argv: list[str], code: int
) -> None:
    put(project, "a.py", source)
    assert lint_main([*IL001, *argv]) == code


def test_short_e_is_exit_zero_as_in_ruff(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", "-e"]) == 0


# --- flags that cannot be combined ----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--exit-zero", "--exit-non-zero-on-fix"],
            "--exit-zero cannot be combined with --exit-non-zero-on-fix: one exits 0 and the "
            "other 1 when something is fixed; drop one",
        ),
        (
            ["--show-files", "--show-settings"],
            "--show-files cannot be combined with --show-settings; run them separately",
        ),
        (
            ["--show-settings", "--statistics"],
            "--show-settings cannot be combined with --statistics: --show-settings lints "
            "nothing, so there is nothing to count; run them separately",
        ),
        (
            ["--diff", "--statistics"],
            "--diff cannot be combined with --statistics: --diff prints what --fix would "
            "change, not findings to count; run them separately",
        ),
        (
            ["--diff", "--format", "json"],
            "--diff cannot be combined with --format json: --diff prints a unified diff, not "
            "findings; drop --format",
        ),
        (
            ["--fix-only", "--statistics"],
            "--fix-only cannot be combined with --statistics: --fix-only reports no findings "
            "to count; use --fix --statistics to count the findings left after fixing",
        ),
        (
            ["--add-noqa", "--diff"],
            "--add-noqa cannot be combined with --diff: --diff changes nothing and --add-noqa "
            "edits files in place; run --diff on its own to see what --fix would change",
        ),
        (
            ["--add-noqa", "-o", "out.txt"],
            "--add-noqa cannot be combined with --output-file 'out.txt': --add-noqa writes no "
            "report, only directives into the files; drop --output-file",
        ),
        (
            ["--show-files", "--stdin-filename", "a.py"],
            "--show-files cannot be combined with standard input (--stdin-filename): it shows "
            "what a run over files would use; name the files or directories instead",
        ),
    ],
)
def test_flags_that_cannot_be_combined_exit_2_with_a_message(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(argv) == 2
    assert output(capsys) == ("", f"interlace lint: error: {message}\n")
