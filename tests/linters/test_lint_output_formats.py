"""ruff's other output formats, end to end through the command line and as pure functions:
``json-lines``, ``junit``, ``pylint``, ``azure``, ``grouped`` and ``rdjson``, and the
``--output-format`` alias of ``--format``.

The expected layouts are those ``ruff check --output-format X`` 0.17 prints for the same kind
of input (a finding, a fixable finding, a file that does not parse, a path with characters
each format must escape), with interlace's codes and messages.
"""

from __future__ import annotations

import json
import os
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from lint_project import put

from interlace.linters import FileError, Finding, RelatedLocation, lint_source
from interlace.linters._output import (
    FORMATS,
    escape_azure,
    format_azure,
    format_grouped,
    format_json,
    format_json_lines,
    format_junit,
    format_pylint,
    format_rdjson,
)
from interlace.linters.cli import lint_main
from interlace.linters.messages import MESSAGES
from interlace.linters.rules import rules_by_code
from interlace.linters.rules._flow import shared_by_tasks

NEW_FORMATS = ["json-lines", "junit", "pylint", "azure", "grouped", "rdjson"]

AGENT = textwrap.dedent(
    """\
    import asyncio


    class Agent:
        def __init__(self):
            self.cache = {}

        async def get(self, key):
            if key not in self.cache:
                value = await fetch(key)
                self.cache[key] = value
            return self.cache[key]


    x = 1  # noqa: IL101
    """
)
PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"
SPECIAL = "d&<\"'é;]%"
"""A directory name with what XML, Azure's logging commands and JSON must each escape."""

IL101 = MESSAGES["IL101"].format(state="self.cache", shared=shared_by_tasks("self.cache", "Agent"))
IL001 = MESSAGES["IL001"].format(codes="IL101", verb="suppresses")
IL201 = lint_source(PRIMITIVE, [rules_by_code()["IL201"]], filename="c.py").findings[0].message
CHECKED = "`self.cache` is checked here"
SUSPENDED = "the task can be suspended here"
UNPARSABLE = "cannot parse: invalid syntax"
ARGV = ["--no-cache", "--extend-select", "IL001"]
SUMMARY = (
    f"b.py:1:7: error: {UNPARSABLE}\n"
    "Found 3 findings (3 files checked).\n"
    "[*] 1 fixable with `--fix`.\n"
    "1 error: some files were not linted completely.\n"
)


@pytest.fixture
def fixture(project: Path) -> Path:
    """``a.py`` with an IL101 finding (two related locations) and a fixable IL001 one, ``b.py``
    that does not parse, and an IL201 finding under a directory named :data:`SPECIAL`."""
    put(project, "a.py", AGENT)
    put(project, "b.py", "def f(:\n")
    put(project, f"{SPECIAL}/c.py", PRIMITIVE)
    return project


def lint(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 1) -> str:
    """The stdout of ``interlace lint`` over the fixture, after checking its exit code and
    that stderr has the summary and the error as in every format."""
    assert lint_main([*ARGV, *argv]) == code
    captured = capsys.readouterr()
    assert captured.err == SUMMARY
    return captured.out


def xml_text(text: str) -> str:
    """``text`` as XML escapes it in text and attributes (an implementation of our own)."""
    return escape(text, {'"': "&quot;", "'": "&apos;"})


# --- the alias ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["concise", "json", "pylint", "grouped"])
def test_output_format_is_an_alias_of_format(
    fixture: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    assert lint(capsys, "--output-format", fmt) == lint(capsys, "--format", fmt)


def test_an_unknown_output_format_is_a_usage_error_that_lists_the_formats(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["--output-format", "full-ish"]) == 2
    assert capsys.readouterr().err.endswith(
        "interlace lint: error: argument --format/--output-format: invalid choice: 'full-ish' "
        "(choose from 'text', 'full', 'concise', 'json', 'json-lines', 'sarif', 'github', "
        "'gitlab', 'junit', 'pylint', 'azure', 'grouped', 'rdjson')\n"
    )


def test_output_format_is_refused_with_diff_as_format_is(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["--diff", "--output-format", "junit"]) == 2
    assert capsys.readouterr().err == (
        "interlace lint: error: --diff cannot be combined with --format junit: --diff prints "
        "a unified diff, not findings; drop --format\n"
    )


# --- each format, end to end ---------------------------------------------------------------


def test_pylint_format(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint(capsys, "--format", "pylint") == (
        f"a.py:11: [IL101] {IL101}\n"
        f"a.py:15: [IL001] {IL001}\n"
        f"{SPECIAL}/c.py:2: [IL201] {IL201}\n"
        f"b.py:1: [invalid-syntax] {UNPARSABLE}\n"
    )


def test_grouped_format(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint(capsys, "--format", "grouped") == (
        "a.py:\n"
        f"  11:13 IL101 {IL101}\n"
        f"  15:8  IL001 [*] {IL001}\n"
        "\n"
        "b.py:\n"
        f"  1:7 invalid-syntax: {UNPARSABLE}\n"
        "\n"
        f"{SPECIAL}/c.py:\n"
        f"  2:8 IL201 {IL201}\n"
        "\n"
    )


def test_azure_format(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cwd = os.getcwd()
    head = "##vso[task.logissue type=error;sourcepath="
    assert lint(capsys, "--format", "azure") == (
        f"{head}{cwd}/a.py;linenumber=11;columnnumber=13;code=IL101;]{IL101}"
        f"%0A{cwd}/a.py:9:23: {CHECKED}%0A{cwd}/a.py:10:21: {SUSPENDED}\n"
        f"{head}{cwd}/a.py;linenumber=15;columnnumber=8;code=IL001;]{IL001}\n"
        f"{head}{cwd}/d&<\"'é%3B%5D%AZP25/c.py;linenumber=2;columnnumber=8;code=IL201;]"
        f"{IL201.replace(';', '%3B')}\n"
        f"{head}{cwd}/b.py;linenumber=1;columnnumber=7;code=invalid-syntax;]{UNPARSABLE}\n"
    )


def test_junit_format(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cwd = os.getcwd()
    special = f"{cwd}/d&amp;&lt;&quot;&apos;é;]%"

    def case(code: str, classname: str, row: int, column: int, message: str, body: str) -> str:
        return (
            f'        <testcase name="org.interlace.{code}" classname="{classname}" '
            f'line="{row}" column="{column}">\n'
            "            <properties>\n"
            '                <property name="severity" value="error"/>\n'
            "            </properties>\n"
            f'            <failure message="{xml_text(message)}">'
            f"line {row}, col {column}, {xml_text(body)}</failure>\n"
            "        </testcase>\n"
        )

    suite = (
        '    <testsuite name="{}" tests="{}" skipped="0" errors="0" failures="{}" '
        'package="org.interlace">\n'
    )
    assert lint(capsys, "--format", "junit") == (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<testsuites name="interlace" tests="4" skipped="0" failures="4" errors="0">\n'
        + suite.format(f"{cwd}/a.py", 2, 2)
        + case(
            "IL101",
            f"{cwd}/a",
            11,
            13,
            IL101,
            f"{IL101}\nline 9, col 23, {CHECKED}\nline 10, col 21, {SUSPENDED}",
        )
        + case("IL001", f"{cwd}/a", 15, 8, IL001, IL001)
        + "    </testsuite>\n"
        + suite.format(f"{cwd}/b.py", 1, 1)
        + case("invalid-syntax", f"{cwd}/b", 1, 7, UNPARSABLE, UNPARSABLE)
        + "    </testsuite>\n"
        + suite.format(f"{special}/c.py", 1, 1)
        + case("IL201", f"{special}/c", 2, 8, IL201, IL201)
        + "    </testsuite>\n"
        "</testsuites>\n"
    )


def test_junit_format_parses_back_to_the_paths_and_messages(
    fixture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = ET.fromstring(lint(capsys, "--format", "junit").encode("utf-8"))
    suites = root.findall("testsuite")
    cwd = os.getcwd()
    assert [suite.get("name") for suite in suites] == [
        f"{cwd}/a.py",
        f"{cwd}/b.py",
        f"{cwd}/{SPECIAL}/c.py",
    ]
    [case] = suites[2].findall("testcase")
    assert case.get("classname") == f"{cwd}/{SPECIAL}/c"
    failure = case.find("failure")
    assert failure is not None
    assert (failure.get("message"), failure.text) == (IL201, f"line 2, col 8, {IL201}")


def test_rdjson_format(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cwd = os.getcwd()

    def span(row: int, column: int, end_row: int, end_column: int) -> dict[str, object]:
        return {
            "start": {"line": row, "column": column},
            "end": {"line": end_row, "column": end_column},
        }

    expected = {
        "diagnostics": [
            {
                "code": {"value": "IL101"},
                "location": {"path": f"{cwd}/a.py", "range": span(11, 13, 11, 28)},
                "message": IL101,
                "related_locations": [
                    {
                        "location": {"path": f"{cwd}/a.py", "range": span(9, 23, 9, 33)},
                        "message": CHECKED,
                    },
                    {
                        "location": {"path": f"{cwd}/a.py", "range": span(10, 21, 10, 37)},
                        "message": SUSPENDED,
                    },
                ],
            },
            {
                "code": {"value": "IL001"},
                "location": {"path": f"{cwd}/a.py", "range": span(15, 8, 15, 21)},
                "message": IL001,
                "suggestions": [{"range": span(15, 6, 15, 21), "text": ""}],
            },
            {
                "code": {"value": "IL201"},
                "location": {"path": f"{cwd}/{SPECIAL}/c.py", "range": span(2, 8, 2, 22)},
                "message": IL201,
            },
            {
                "code": {"value": "invalid-syntax"},
                "location": {"path": f"{cwd}/b.py", "range": span(1, 7, 1, 7)},
                "message": UNPARSABLE,
            },
        ],
        "severity": "WARNING",
        "source": {"name": "interlace"},
    }
    # Keys sorted and indented by two, as ruff writes them.
    assert lint(capsys, "--format", "rdjson") == json.dumps(expected, indent=2, sort_keys=True) + (
        "\n"
    )


def test_json_lines_format_is_the_json_objects_one_compact_line_each(
    fixture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = json.loads(lint(capsys, "--format", "json"))
    assert [item["code"] for item in items] == ["IL101", "IL001", "IL201", "invalid-syntax"]
    assert lint(capsys, "--format", "json-lines") == "".join(
        json.dumps(item, separators=(",", ":")) + "\n" for item in items
    )


def test_full_is_ruffs_name_for_the_text_format(
    fixture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = lint(capsys, "--format", "text")
    assert "-->" in text
    assert lint(capsys, "--output-format", "full") == text


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_output_file_holds_what_stdout_would(
    fixture: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    printed = lint(capsys, "--format", fmt)
    assert lint(capsys, "--format", fmt, "-o", "reports/out") == ""
    assert (fixture / "reports" / "out").read_text(encoding="utf-8") == printed


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("json-lines", ""),
        ("pylint", ""),
        ("azure", ""),
        ("grouped", ""),
        (
            "junit",
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<testsuites name="interlace" tests="1" skipped="0" failures="0" errors="0">\n'
            '    <testsuite name="interlace" tests="1" skipped="0" errors="0" failures="0" '
            'package="org.interlace">\n'
            '        <testcase name="No errors found" classname="interlace"/>\n'
            "    </testsuite>\n"
            "</testsuites>\n",
        ),
        (
            "rdjson",
            '{\n  "diagnostics": [],\n  "severity": "WARNING",\n'
            '  "source": {\n    "name": "interlace"\n  }\n}\n',
        ),
    ],
)
def test_a_clean_run_in_each_format_and_its_output_file(
    project: Path, capsys: pytest.CaptureFixture[str], fmt: str, expected: str
) -> None:
    put(project, "ok.py", "x = 1\n")
    assert lint_main(["--no-cache", "--format", fmt]) == 0
    assert capsys.readouterr().out == expected
    assert lint_main(["--no-cache", "--format", fmt, "-o", "out"]) == 0
    assert (project / "out").read_text(encoding="utf-8") == expected
    if fmt == "junit":
        ET.fromstring(expected.encode("utf-8"))


@pytest.mark.parametrize(
    ("fmt", "line"),
    [
        ("pylint", "nope.py:1: [io-error] no such file or directory\n"),
        ("grouped", "nope.py:\n  1:1 io-error: no such file or directory\n\n"),
        (
            "azure",
            "##vso[task.logissue type=error;sourcepath={cwd}/nope.py;linenumber=1;"
            "columnnumber=1;code=io-error;]no such file or directory\n",
        ),
    ],
)
def test_a_path_that_does_not_exist_is_listed_at_1_1_as_in_json(
    project: Path, capsys: pytest.CaptureFixture[str], fmt: str, line: str
) -> None:
    assert lint_main(["--no-cache", "--format", fmt, "nope.py"]) == 2
    assert capsys.readouterr().out == line.format(cwd=os.getcwd())


def test_statistics_in_json_lines_are_the_json_statistics_one_per_line(
    fixture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main([*ARGV, "--statistics", "--format", "json"]) == 1
    items = json.loads(capsys.readouterr().out)
    assert [item["code"] for item in items] == ["IL001", "IL101", "IL201"]
    assert lint_main([*ARGV, "--statistics", "--format", "json-lines"]) == 1
    assert capsys.readouterr().out == "".join(
        json.dumps(item, separators=(",", ":")) + "\n" for item in items
    )


@pytest.mark.parametrize("fmt", ["junit", "pylint", "azure", "grouped", "rdjson"])
def test_statistics_in_the_other_formats_are_the_table_as_for_gitlab(
    fixture: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    assert lint_main([*ARGV, "--statistics"]) == 1
    table = capsys.readouterr().out
    assert table.splitlines()[0] == "    1\tIL001\t[*] unused-noqa"
    assert lint_main([*ARGV, "--statistics", "--format", fmt]) == 1
    assert capsys.readouterr().out == table


# --- the formatters on their own -------------------------------------------------------------

NASTY = "a <b> & \"c\" 'd' é \x01\x1b line\nbreak\r\ttab ]]> 😀"
"""A message with what XML escapes, what XML 1.0 cannot hold, and line breaks."""


def finding(filename: str, row: int, column: int, *, message: str = "m") -> Finding:
    return Finding("IL101", message, filename, row, column, row, column + 3)


def test_junit_is_well_formed_for_any_path_and_message() -> None:
    related = RelatedLocation(1, 2, 1, 3, "r <&> \x02")
    odd = Finding("IL101", NASTY, "/p/x\udcffy<&>\n.py", 3, 4, 3, 9, (related,))
    error = FileError("/p/z'.py", 0, 0, "cannot read\x00 it", "io")
    root = ET.fromstring(format_junit([odd], [error]).encode("utf-8"))
    cases = [(suite.get("name"), suite.find("testcase")) for suite in root]
    failures = [
        (name, case.get("classname"), failure.get("message"), failure.text)
        for name, case in cases
        if case is not None and (failure := case.find("failure")) is not None
    ]
    # What XML cannot hold is spelt as Python escapes it; the rest comes back as it was,
    # line breaks and tabs in attributes included.
    shown = NASTY.replace("\x01", "\\x01").replace("\x1b", "\\x1b")
    assert failures == [
        (
            "/p/x\\udcffy<&>\n.py",
            "/p/x\\udcffy<&>\n",
            shown,
            f"line 3, col 4, {shown}\nline 1, col 2, r <&> \\x02",
        ),
        ("/p/z'.py", "/p/z'", "cannot read\\x00 it", "line 1, col 1, cannot read\\x00 it"),
    ]
    assert root.attrib == {
        "name": "interlace",
        "tests": "2",
        "skipped": "0",
        "failures": "2",
        "errors": "0",
    }


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("plain", "plain"),
        ("100%", "100%AZP25"),
        ("a;b", "a%3Bb"),
        ("a]b", "a%5Db"),
        ("a\r\nb", "a%0D%0Ab"),
        ("%3B;", "%AZP253B%3B"),  # a % first, so that an escape in the text stays text
    ],
)
def test_azure_escaping(raw: str, escaped: str) -> None:
    assert escape_azure(raw) == escaped


def test_azure_escapes_the_path_code_and_message_of_every_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    odd = Finding("IL101", "50% done; [x]\nnext", "a;]%.py", 2, 3, 2, 4)
    error = FileError("b.py", 0, 0, "bad]", "internal")
    assert format_azure([odd], [error]) == (
        f"##vso[task.logissue type=error;sourcepath={tmp_path}/a%3B%5D%AZP25.py;linenumber=2;"
        "columnnumber=3;code=IL101;]50%AZP25 done%3B [x%5D%0Anext\n"
        f"##vso[task.logissue type=error;sourcepath={tmp_path}/b.py;linenumber=1;"
        "columnnumber=1;code=internal-error;]bad%5D\n"
    )


def test_grouped_aligns_rows_and_columns_within_each_file() -> None:
    findings = [
        finding("a.py", 9, 5),
        finding("a.py", 10, 12),
        finding("a.py", 100, 1),
        finding("b.py", 3, 4),
    ]
    assert format_grouped(findings) == (
        "a.py:\n    9:5  IL101 m\n   10:12 IL101 m\n  100:1  IL101 m\n\nb.py:\n  3:4 IL101 m\n\n"
    )


def test_grouped_sorts_files_by_path_and_puts_errors_with_their_file() -> None:
    findings = [finding("pkg/z.py", 1, 1), finding("b.py", 2, 2)]
    errors = [
        FileError("a.py", 0, 0, "no such file or directory", "io"),
        FileError("b.py", 5, 1, "cannot fix: x", "io"),
    ]
    assert format_grouped(findings, errors) == (
        "a.py:\n"
        "  1:1 io-error: no such file or directory\n"
        "\n"
        "b.py:\n"
        "  2:2 IL101 m\n"
        "  5:1 io-error: cannot fix: x\n"
        "\n"
        "pkg/z.py:\n"
        "  1:1 IL101 m\n"
        "\n"
    )


def test_pylint_lists_findings_then_errors_with_one_based_rows() -> None:
    errors = [FileError("gone.py", 0, 0, "no such file or directory", "io")]
    assert format_pylint([finding("a.py", 7, 3)], errors) == (
        "a.py:7: [IL101] m\ngone.py:1: [io-error] no such file or directory\n"
    )


def test_json_lines_has_the_objects_of_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    findings = [finding("a.py", 1, 2, message="é")]
    errors = [FileError("b.py", 3, 4, "cannot parse: x", "syntax")]
    lines = format_json_lines(findings, errors).splitlines()
    assert [json.loads(line) for line in lines] == json.loads(format_json(findings, errors))
    assert lines[0].startswith('{"cell":null,"code":"IL101","end_location":{"row":1,"column":5}')
    assert format_json_lines([]) == ""


def test_rdjson_of_a_file_that_cannot_be_read_is_at_1_1_with_no_suggestion(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    error = FileError("gone.py", 0, 0, "no such file or directory", "io")
    assert json.loads(format_rdjson([], [error]))["diagnostics"] == [
        {
            "code": {"value": "io-error"},
            "location": {
                "path": str(tmp_path / "gone.py"),
                "range": {"end": {"column": 1, "line": 1}, "start": {"column": 1, "line": 1}},
            },
            "message": "no such file or directory",
        }
    ]


@pytest.mark.skipif(
    os.fsencode("\udcff") != b"\xff", reason="needs a file system encoding that escapes bytes"
)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_name_that_is_not_utf8_is_written_in_every_format(
    project: Path, capsysbinary: pytest.CaptureFixture[bytes], fmt: str
) -> None:
    name = os.fsdecode(b"agent\xff.py")  # a byte no UTF-8 name has: a lone surrogate here
    (project / name).write_text(PRIMITIVE, encoding="utf-8")
    assert lint_main(["--no-cache", "--format", fmt]) == 1  # captured by a strict stream
    out = capsysbinary.readouterr().out
    if fmt == "sarif":
        (result,) = json.loads(out)["runs"][0]["results"]
        location = result["locations"][0]["physicalLocation"]["artifactLocation"]
        assert location["uri"] == "agent%FF.py"  # the bytes on disk, percent-encoded
    elif fmt in ("text", "full", "concise", "pylint", "grouped", "github"):
        assert b"agent\xff.py" in out  # as the name is on disk
    assert lint_main(["--no-cache", "--format", fmt, "-o", "out"]) == 1
    assert (project / "out").read_bytes() == out
