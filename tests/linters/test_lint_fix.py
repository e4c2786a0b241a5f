"""``interlace lint --fix``: IL001's unused ``# noqa`` codes are removed as ruff's fix of RUF100
removes them, files keep their bytes otherwise, and the findings left are reported."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from lint_project import put

import interlace.linters._run as run_module
from interlace.linters._noqa import FixedSource, fix_unused_noqa
from interlace.linters.cli import lint_main

FIX = ["--no-cache", "--fix", "--extend-select", "IL001", "--format", "concise"]
PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"


def summary(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "fixed"),
    [
        pytest.param(
            "L = asyncio.Lock()  # noqa: IL101, IL201",
            "L = asyncio.Lock()  # noqa: IL201",
            id="unused-code-removed",
        ),
        pytest.param(
            "L = asyncio.Lock()  # noqa:IL303,IL201  # why",
            "L = asyncio.Lock()  # noqa: IL201  # why",
            id="directive-rewritten-other-comment-kept",
        ),
        pytest.param(
            "L = asyncio.Lock()  # noqa: IL301 IL201 one loop per process",
            "L = asyncio.Lock()  # noqa: IL201 one loop per process",
            id="reason-kept-while-a-code-is-left",
        ),
        pytest.param("x = 1  # noqa: IL301", "x = 1", id="whole-directive-removed"),
        pytest.param("x = 1\t# noqa: IL301  ", "x = 1", id="whitespace-around-it-removed"),
        pytest.param("x = 1  # noqa: IL301  # keep me", "x = 1  # keep me", id="comment-after"),
        pytest.param("x = 1  #noqa:IL301#keep", "x = 1  #keep", id="comment-right-after"),
        pytest.param("x = 1  # why  # noqa: IL301", "x = 1  # why", id="comment-before"),
        pytest.param("x = 1  # noqa: IL301 built per request", "x = 1", id="reason-removed-too"),
        pytest.param("x = 1  # noqa: IL301,", "x = 1", id="trailing-comma"),
        pytest.param(
            "x = 1  # noqa: E501, IL301, ASYNC100",
            "x = 1  # noqa: E501, ASYNC100",
            id="other-tools-codes-kept",
        ),
        pytest.param(
            "x = 1  # noqa: IL301, IL000", "x = 1  # noqa: IL000", id="flake8-plugin-code-kept"
        ),
        pytest.param("x = 1  # noqa: IL999, IL3", "x = 1", id="unknown-code-and-prefix"),
        pytest.param("x = 1  # NOQA: IL301", "x = 1", id="upper-case-noqa"),
        pytest.param("x = (1,  # noqa: IL301\n     2)", "x = (1,\n     2)", id="in-brackets"),
    ],
)
def test_fix_removes_unused_codes_as_ruff_does(
    project: Path, capsys: pytest.CaptureFixture[str], line: str, fixed: str
) -> None:
    path = put(project, "a.py", f"import asyncio\n{line}\ny = 2\n")
    assert lint_main(FIX) == 0
    assert path.read_text(encoding="utf-8") == f"import asyncio\n{fixed}\ny = 2\n"
    assert summary(capsys) == "Found 1 finding (1 fixed, 0 remaining; 1 file checked).\n"


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        pytest.param("x = 1\n    # noqa: IL301\ny = 2\n", "x = 1\ny = 2\n", id="line-of-its-own"),
        pytest.param("# noqa: IL301 old reason\nx = 1\n", "x = 1\n", id="first-line"),
        pytest.param("x = 1\n# noqa: IL301", "x = 1\n", id="last-line-no-newline"),
        pytest.param("x = 1\n  # noqa: IL301  # keep\n", "x = 1\n  # keep\n", id="comment-kept"),
    ],
)
def test_fix_removes_a_line_that_held_only_the_directive(
    project: Path, capsys: pytest.CaptureFixture[str], text: str, fixed: str
) -> None:
    path = put(project, "a.py", text)
    assert lint_main(FIX) == 0
    assert path.read_text(encoding="utf-8") == fixed


def test_fix_reports_the_findings_left_and_how_many_it_fixed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", "x = 1  # noqa: IL301\n" + PRIMITIVE + "y = 2  # noqa: IL101\n")
    put(project, "b.py", "z = 3  # noqa: IL303\n")
    put(project, "c.py", "w = 4\n")
    assert lint_main(FIX) == 1
    out, err = capsys.readouterr()
    assert [line.split(" `")[0] for line in out.splitlines()] == ["a.py:3:8: IL201"]
    assert err == "Found 4 findings (3 fixed, 1 remaining; 3 files checked).\n"
    assert path.read_text(encoding="utf-8") == "x = 1\n" + PRIMITIVE + "y = 2\n"
    assert lint_main(["--no-cache", "--extend-select", "IL001"]) == 1
    assert summary(capsys) == "Found 1 finding (3 files checked).\n"


def test_without_fix_the_summary_says_how_many_fix_would_fix(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", "x = 1  # noqa: IL301\n" + PRIMITIVE)
    assert lint_main(["--no-cache", "--extend-select", "IL001"]) == 1
    assert summary(capsys) == "Found 2 findings (1 file checked).\n[*] 1 fixable with `--fix`.\n"
    assert path.read_text(encoding="utf-8") == "x = 1  # noqa: IL301\n" + PRIMITIVE


def test_fix_changes_nothing_when_il001_is_not_selected(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "x = 1  # noqa: IL301\n" + PRIMITIVE
    path = put(project, "a.py", text)
    assert lint_main(["--no-cache", "--fix"]) == 1
    assert summary(capsys) == "Found 1 finding (1 file checked).\n"
    assert path.read_text(encoding="utf-8") == text


def test_fix_keeps_crlf_line_endings_the_bom_and_no_final_newline(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "a.py"
    path.write_bytes(
        b"\xef\xbb\xbfimport asyncio  # noqa: IL301\r\nL = asyncio.Lock()  # noqa: IL201, IL101"
        b"\r\nx = 1\ry = 2\n  # noqa: IL303\r\nz = 3"
    )
    assert lint_main(FIX) == 0
    assert path.read_bytes() == (
        b"\xef\xbb\xbfimport asyncio\r\nL = asyncio.Lock()  # noqa: IL201\r\nx = 1\ry = 2\nz = 3"
    )


def test_fix_keeps_the_encoding_of_a_coding_cookie(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "a.py"
    path.write_bytes(b'# -*- coding: latin-1 -*-\nS = "\xe9t\xe9"  # noqa: IL301 caf\xe9\n')
    assert lint_main(FIX) == 0
    assert path.read_bytes() == b'# -*- coding: latin-1 -*-\nS = "\xe9t\xe9"\n'


def test_fix_keeps_the_mode_and_a_symlink(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = put(project, "real/a.py", "x = 1  # noqa: IL301\n")
    real.chmod(0o640)
    (project / "link.py").symlink_to(real)
    assert lint_main([*FIX, "link.py"]) == 0
    assert real.read_text(encoding="utf-8") == "x = 1\n"
    assert (project / "link.py").is_symlink()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(os.listdir(project / "real")) == ["a.py"]  # no temporary file left


def test_fix_will_not_move_a_coding_cookie_into_effect(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cookie on line 3 is a plain comment; removing line 1 would make Python read it.
    text = "# noqa: IL301\n#!/usr/bin/env python\n# coding: latin-1\nx = 1\n"
    path = put(project, "a.py", text)
    assert lint_main(FIX) == 2
    assert summary(capsys).splitlines() == [
        "a.py: error: cannot fix: removing a line would move a coding cookie into the first two "
        "lines and change how Python decodes the file; remove the unused codes by hand",
        "Found 1 finding (1 file checked).",
        "1 error: some files were not linted completely.",
    ]
    assert path.read_text(encoding="utf-8") == text


def test_fix_leaves_a_file_that_changed_since_it_was_linted(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = put(project, "a.py", "x = 1  # noqa: IL301\n")
    edited = "x = 2  # noqa: IL301\n"
    lint_groups = run_module._lint_groups

    def lint_then_edit(*args: object, **kwargs: object) -> object:
        results = lint_groups(*args, **kwargs)  # type: ignore[arg-type]
        path.write_text(edited, encoding="utf-8")  # the user saves in the meantime
        return results

    monkeypatch.setattr(run_module, "_lint_groups", lint_then_edit)
    assert lint_main(FIX) == 2
    assert summary(capsys).splitlines() == [
        "a.py: error: cannot fix: the file changed since it was linted, so it was left as it "
        "is; run interlace lint --fix again",
        "Found 1 finding (1 file checked).",
        "1 error: some files were not linted completely.",
    ]
    assert path.read_text(encoding="utf-8") == edited


def test_fix_leaves_a_file_that_changed_while_it_was_being_fixed(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = put(project, "a.py", "x = 1  # noqa: IL301\n")
    edited = "x = 2  # noqa: IL301\n"

    def fix_then_edit(data: bytes, findings: object, filename: str) -> FixedSource:
        fixed = fix_unused_noqa(data, findings)  # type: ignore[arg-type]
        path.write_text(edited, encoding="utf-8")  # after the check, before the write
        return fixed

    monkeypatch.setattr(run_module, "fix_document", fix_then_edit)
    assert lint_main(FIX) == 2
    assert summary(capsys).splitlines()[0] == (
        "a.py: error: cannot fix: the file changed while it was being fixed, so it was left as "
        "it is; run interlace lint --fix again"
    )
    assert path.read_text(encoding="utf-8") == edited
    assert sorted(os.listdir(project)) == ["a.py", "pyproject.toml"]


def test_fix_applies_to_findings_from_the_cache_and_caches_the_fixed_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", PRIMITIVE + "L = asyncio.Lock()  # noqa: IL101, IL201\n")
    selection = ["--extend-select", "IL001", "--format", "concise"]
    assert lint_main(selection) == 1
    capsys.readouterr()
    assert lint_main(["--fix", *selection]) == 1
    assert summary(capsys) == "Found 2 findings (1 fixed, 1 remaining; 1 file checked).\n"
    assert path.read_text(encoding="utf-8") == PRIMITIVE + "L = asyncio.Lock()  # noqa: IL201\n"
    assert lint_main(selection) == 1
    assert summary(capsys) == "Found 1 finding (1 file checked, 1 from cache).\n"


def test_fix_relints_many_files_in_worker_processes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [put(project, f"m{i}.py", "x = 1  # noqa: IL301\n" + PRIMITIVE) for i in range(20)]
    assert lint_main([*FIX, "--jobs", "2"]) == 1
    assert summary(capsys) == "Found 40 findings (20 fixed, 20 remaining; 20 files checked).\n"
    assert {path.read_text(encoding="utf-8") for path in paths} == {"x = 1\n" + PRIMITIVE}


def test_fix_with_add_noqa_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", "x = 1  # noqa: IL301\n")
    assert lint_main(["--fix", "--add-noqa", "--extend-select", "IL001"]) == 2
    assert capsys.readouterr() == (
        "",
        "interlace lint: error: --add-noqa cannot be combined with --fix: --fix removes unused "
        "directives and --add-noqa adds them; run --fix first, then --add-noqa\n",
    )
    assert path.read_text(encoding="utf-8") == "x = 1  # noqa: IL301\n"


def test_help_describes_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert lint_main(["--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--fix remove the unused codes IL001 reports from '# noqa' directives" in help_text
    assert "--stdin-filename PATH lint standard input as the file PATH" in help_text


def test_json_gives_ruffs_fix_of_each_il001_finding(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        project,
        "a.py",
        "import asyncio  # noqa: IL301  # keep me\n"
        "L = asyncio.Lock()  # noqa:IL101,IL201\n"
        "    # noqa: IL303\n"
        "y = 1  # noqa: IL301\n"
        "LOCK = asyncio.Lock()\n",
    )
    assert lint_main(["--no-cache", "--extend-select", "IL001", "--format", "json"]) == 1
    fixes = {item["location"]["row"]: item["fix"] for item in json.loads(capsys.readouterr().out)}

    def fix(row: int, column: int, end_row: int, end_column: int, content: str) -> object:
        edit = {
            "content": content,
            "end_location": {"row": end_row, "column": end_column},
            "location": {"row": row, "column": column},
        }
        return {
            "applicability": "safe",
            "edits": [edit],
            "message": "Remove unused `noqa` directive",
        }

    # The edits ruff 0.17 gives for the same lines with RUF100.
    assert fixes == {
        1: fix(1, 17, 1, 32, ""),
        2: fix(2, 21, 2, 39, "# noqa: IL201"),
        3: fix(3, 1, 4, 1, ""),
        4: fix(4, 6, 4, 21, ""),
        5: None,  # IL201 has no fix
    }


def test_statistics_json_counts_il001_as_fixable(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", "x = 1  # noqa: IL301\ny = 2  # noqa: IL999\n" + PRIMITIVE)
    argv = ["--no-cache", "--extend-select", "IL001", "--statistics", "--format", "json"]
    assert lint_main(argv) == 1
    assert json.loads(capsys.readouterr().out) == [
        {
            "code": "IL001",
            "name": "unused-noqa",
            "count": 2,
            "fixable": True,
            "fixable_count": 2,
        },
        {
            "code": "IL201",
            "name": "asyncio-primitive-in-init",
            "count": 1,
            "fixable": False,
            "fixable_count": 0,
        },
    ]
