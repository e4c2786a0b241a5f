"""``interlace lint -`` and ``--stdin-filename``: source read from standard input is linted like
a file of that name, with that file's configuration, and never cached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lint_project import feed_stdin, put

from interlace.linters.cli import lint_main

PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"
IL201 = "IL201 `asyncio.Lock` is created at module level"
UNUSED = "import asyncio\nLOCK = asyncio.Lock()  # noqa: IL101, IL201\nx = 1  # noqa: IL301\n"
UNUSED_FIXED = "import asyncio\nLOCK = asyncio.Lock()  # noqa: IL201\nx = 1\n"


def lines(text: str) -> list[str]:
    return [line.split(" `")[0] for line in text.splitlines()]


def test_dash_lints_standard_input_as_a_file_named_dash(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--format", "concise", "-"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(f"-:2:8: {IL201}")
    assert err == "Found 1 finding (1 file checked).\n"


def test_stdin_filename_alone_implies_dash_and_names_the_findings(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "app/a.py", "x = 1\n")  # what is on disk does not matter
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--format", "concise", "--stdin-filename", "app/a.py"]) == 1
    assert capsys.readouterr().out.startswith(f"app/a.py:2:8: {IL201}")


def test_an_empty_stdin_filename_is_a_usage_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--stdin-filename", ""]) == 2
    assert capsys.readouterr() == (
        "",
        "interlace lint: error: --stdin-filename is empty ('') and names no file (in CI an "
        'unset or empty variable, as in interlace lint "$CHANGED_FILES", is the usual cause); '
        "pass the path the source on standard input stands for, e.g. --stdin-filename "
        "src/app.py, or '-' without --stdin-filename\n",
    )


def test_an_absolute_stdin_filename_is_shown_relative_to_the_working_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    name = str(project / "new" / "b.py")
    assert lint_main(["--format", "concise", "--stdin-filename", name, "-"]) == 1
    assert capsys.readouterr().out.startswith(f"new/b.py:2:8: {IL201}")


@pytest.mark.parametrize(
    ("name", "code"),
    [
        pytest.param("pkg/a.py", 0, id="closest-pyproject-selects-IL3"),
        pytest.param("pkg/deep/er/a.py", 0, id="missing-directories-below-it"),
        pytest.param("other/a.py", 1, id="root-pyproject"),
    ],
)
def test_stdin_filename_takes_the_configuration_closest_above_it(
    project: Path, monkeypatch: pytest.MonkeyPatch, name: str, code: int
) -> None:
    put(project, "pkg/pyproject.toml", '[tool.interlace.lint]\nselect = ["IL3"]\n')
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--stdin-filename", name]) == code


@pytest.mark.parametrize(("name", "code"), [("tests/t.py", 0), ("src/t.py", 1)])
def test_stdin_filename_is_matched_against_per_file_ignores(
    project: Path, monkeypatch: pytest.MonkeyPatch, name: str, code: int
) -> None:
    put(
        project,
        "pyproject.toml",
        '[tool.interlace.lint]\nper-file-ignores = {"tests/**" = ["IL201"]}\n',
    )
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--stdin-filename", name]) == code


def test_without_a_name_per_file_ignores_match_nothing_and_the_working_directory_config_applies(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nper-file-ignores = {"*" = ["IL201"]}\n')
    put(project, "sub/pyproject.toml", '[tool.interlace.lint]\nselect = ["IL3"]\n')
    monkeypatch.chdir(project / "sub")
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["-"]) == 0  # sub's selection, not the root's ignores
    monkeypatch.chdir(project)
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["-"]) == 1  # "*" does not match the unnamed "-"


def test_force_exclude_skips_an_excluded_stdin_filename(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nextend-exclude = ["gen"]\n')
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--stdin-filename", "gen/a.py", "--force-exclude"]) == 0
    assert capsys.readouterr() == ("", "All checks passed (0 files checked).\n")
    # As for a file named on the command line, exclusion applies only with --force-exclude.
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--stdin-filename", "gen/a.py"]) == 1


def test_force_exclude_honours_gitignore_for_a_stdin_filename(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".git").mkdir()
    put(project, ".gitignore", "ignored/\n")
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--stdin-filename", "ignored/a.py", "--force-exclude"]) == 0
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--stdin-filename", "kept/a.py", "--force-exclude"]) == 1


@pytest.mark.parametrize(
    ("data", "where"),
    [
        pytest.param(b"\xef\xbb\xbf" + PRIMITIVE.encode(), "-:2:8", id="bom"),
        pytest.param(
            b'# -*- coding: latin-1 -*-\nimport asyncio\nS = "\xe9"\nLOCK = asyncio.Lock()\n',
            "-:4:8",
            id="coding-cookie",
        ),
    ],
)
def test_standard_input_is_decoded_as_a_file_is(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    where: str,
) -> None:
    feed_stdin(monkeypatch, data)
    assert lint_main(["--format", "concise", "-"]) == 1
    assert capsys.readouterr().out.startswith(f"{where}: {IL201}")


@pytest.mark.parametrize(
    ("argv", "name"), [(["-"], "-"), (["--stdin-filename", "app/x.py"], "app/x.py")]
)
def test_unparsable_standard_input_exits_1_with_the_parse_error(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    name: str,
) -> None:
    feed_stdin(monkeypatch, b"import asyncio\ndef f(:\n")
    assert lint_main(argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{name}:2:7: error: cannot parse: invalid syntax",
        "1 error: some files were not linted completely.",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["-", "a.py"],
            "standard input ('-') cannot be linted together with other paths ('a.py'); lint "
            "standard input and files in separate runs",
        ),
        (
            ["a.py", "-", "src"],
            "standard input ('-') cannot be linted together with other paths ('a.py', 'src'); "
            "lint standard input and files in separate runs",
        ),
        (
            ["--stdin-filename", "b.py", "a.py"],
            "standard input (--stdin-filename) cannot be linted together with other paths "
            "('a.py'); lint standard input and files in separate runs",
        ),
        (
            ["--add-noqa", "-"],
            "--add-noqa cannot be combined with standard input ('-'): it edits files in place; "
            "run it on the file itself",
        ),
        (
            ["--add-noqa", "--stdin-filename", "a.py"],
            "--add-noqa cannot be combined with standard input (--stdin-filename): it edits "
            "files in place; run it on the file itself",
        ),
    ],
)
def test_standard_input_with_paths_or_add_noqa_is_a_usage_error(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    path = put(project, "a.py", PRIMITIVE)
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(argv) == 2
    assert capsys.readouterr() == ("", f"interlace lint: error: {message}\n")
    assert path.read_text(encoding="utf-8") == PRIMITIVE


def test_standard_input_is_never_cached(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        feed_stdin(monkeypatch, PRIMITIVE.encode())
        assert lint_main(["--stdin-filename", "a.py"]) == 1
        assert capsys.readouterr().err == "Found 1 finding (1 file checked).\n"
    assert not (project / ".interlace_cache").exists()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--format", "github"],
            "::error file=-,line=2,col=8,endLine=2,endColumn=22,title=IL201::",
        ),
        (["--format", "github", "--stdin-filename", "a.py"], "::error file=a.py,line=2,col=8,"),
        (["--statistics"], "    1\tIL201\tasyncio-primitive-in-init\n"),
        (["--format", "text"], "-:2:8"),
    ],
)
def test_every_text_format_reports_standard_input(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    expected: str,
) -> None:
    (project / ".git").mkdir()
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main([*argv, "-"] if "--stdin-filename" not in argv else argv) == 1
    assert expected in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "filename"), [(["-"], "-"), (["--stdin-filename", "a.py"], "a.py")]
)
def test_json_names_unnamed_standard_input_dash_as_ruff_does(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    filename: str,
) -> None:
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--format", "json", *argv]) == 1
    [item] = json.loads(capsys.readouterr().out)
    assert item["filename"] == (filename if filename == "-" else str(project / filename))
    assert (item["code"], item["location"]) == ("IL201", {"row": 2, "column": 8})


def test_sarif_reports_standard_input_under_its_name(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--format", "sarif", "--stdin-filename", "src/a.py"]) == 1
    [result] = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert (result["ruleId"], location["artifactLocation"]["uri"]) == ("IL201", "src/a.py")
    assert location["region"]["startLine"] == 2


def test_fix_prints_the_fixed_source_to_stdout_and_the_report_to_stderr(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    # The BOM and the CRLF line endings come back as they were sent.
    source = b"\xef\xbb\xbf" + (UNUSED + "import threading\n").replace("\n", "\r\n").encode()
    feed_stdin(monkeypatch, source + PRIMITIVE.encode())
    argv = ["--fix", "--extend-select", "IL001", "--format", "concise", "-"]
    assert lint_main(argv) == 1
    out, err = capsysbinary.readouterr()
    expected = (
        b"\xef\xbb\xbf" + (UNUSED_FIXED + "import threading\n").replace("\n", "\r\n").encode()
    )
    assert out == expected + PRIMITIVE.encode()
    assert lines(err.decode()) == [
        "-:6:8: IL201",
        "Found 3 findings (2 fixed, 1 remaining; 1 file checked).",
    ]


@pytest.mark.parametrize(
    ("argv", "data", "code"),
    [
        pytest.param(["-"], b"x = 1\r\n", 0, id="nothing-to-fix"),
        pytest.param(["-"], b"def f(:\n  # noqa: IL301\n", 1, id="unparsable"),
        pytest.param(
            ["--stdin-filename", "gen/a.py", "--force-exclude"], UNUSED.encode(), 0, id="excluded"
        ),
        pytest.param(["-"], PRIMITIVE.encode(), 1, id="findings-without-a-fix"),
    ],
)
def test_fix_echoes_standard_input_it_does_not_change(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
    argv: list[str],
    data: bytes,
    code: int,
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nextend-exclude = ["gen"]\n')
    feed_stdin(monkeypatch, data)
    assert lint_main(["--fix", "--extend-select", "IL001", *argv]) == code
    assert capsysbinary.readouterr().out == data


@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "concise", "text"])
def test_fix_sends_every_format_to_stderr(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
    fmt: str,
) -> None:
    feed_stdin(monkeypatch, PRIMITIVE.encode())
    assert lint_main(["--fix", "--format", fmt, "-"]) == 1
    out, err = capsysbinary.readouterr()
    assert out == PRIMITIVE.encode()
    assert b"IL201" in err


def test_fix_statistics_of_standard_input_count_what_is_left(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    feed_stdin(monkeypatch, UNUSED.encode() + b"import threading\n" + PRIMITIVE.encode())
    argv = ["--fix", "--extend-select", "IL001", "--statistics", "--format", "json", "-"]
    assert lint_main(argv) == 1
    out, err = capsysbinary.readouterr()
    assert out == UNUSED_FIXED.encode() + b"import threading\n" + PRIMITIVE.encode()
    report, summary = err.decode().rsplit("]\n", 1)
    assert [(s["code"], s["count"], s["fixable"]) for s in json.loads(report + "]")] == [
        ("IL201", 1, False)
    ]
    assert summary == "Found 3 findings (2 fixed, 1 remaining; 1 file checked).\n"


def test_an_editor_pipes_source_through_the_command(project: Path) -> None:
    # A real pipe, as an editor integration runs it: bytes in, the fixed bytes out.
    source = b"\xef\xbb\xbf" + UNUSED.replace("\n", "\r\n").encode()
    command = ["lint", "--fix", "--extend-select", "IL001", "--stdin-filename", "src/agent.py"]
    process = subprocess.run(
        [sys.executable, "-m", "interlace", *command],
        input=source,
        capture_output=True,
        cwd=project,
        check=False,
    )
    assert (process.returncode, process.stderr) == (
        0,
        b"Found 2 findings (2 fixed, 0 remaining; 1 file checked).\n",
    )
    assert process.stdout == b"\xef\xbb\xbf" + UNUSED_FIXED.replace("\n", "\r\n").encode()
    assert not (project / "src").exists()
