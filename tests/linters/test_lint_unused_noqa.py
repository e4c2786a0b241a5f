"""IL001 unused-noqa: a ``# noqa`` directive's interlace codes that suppressed nothing, reported
through ``interlace lint`` as a user runs it, precisely: never a code whose use it cannot know."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import libcst as cst
import pytest
from lint_project import put

from interlace.linters import Rule, lint_paths, lint_source
from interlace.linters import _noqa as noqa_module
from interlace.linters._output import message_parts
from interlace.linters.cli import lint_main
from interlace.linters.messages import MESSAGES
from interlace.linters.rules import all_rules
from interlace.linters.rules.noqa import FlagUnusedNoqa

DEFAULT_RULES = [rule for rule in all_rules() if not rule.opt_in]

PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock(){comment}\n"

# IL101 after the await on line 4, the write.
CHECK_THEN_ACT = (
    "class Agent:\n"
    "    async def run(self):\n"
    '        if self.state == "idle":\n'
    "            await self.load()\n"
    '            self.state = "running"{comment}\n'
)


def message(*codes: str) -> str:
    verb = "suppresses" if len(codes) == 1 else "suppress"
    return MESSAGES["IL001"].format(codes=", ".join(codes), verb=verb)


def concise(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    ("comment", "column", "named"),
    [
        pytest.param("  # noqa: IL301", 24, ("IL301",), id="stale-code"),
        pytest.param("  # noqa: IL201, IL301", 24, ("IL301",), id="one-used-one-not"),
        pytest.param(
            "  # noqa: IL303, IL301, IL201", 24, ("IL301", "IL303"), id="names-sorted-unique"
        ),
        pytest.param("  # noqa: IL999", 24, ("IL999 (unknown code)",), id="unknown-code"),
        pytest.param(
            "  # noqa: IL301, IL9", 24, ("IL301", "IL9 (unknown code)"), id="unknown-prefix"
        ),
        pytest.param("  # noqa: IL3", 24, ("IL3",), id="prefix-of-rules-that-ran"),
        pytest.param("  # noqa: E501, IL301", 24, ("IL301",), id="other-tools-codes-skipped"),
        pytest.param("  # why  # NOQA:IL301", 31, ("IL301",), id="after-another-comment"),
    ],
)
def test_an_unused_directive_is_reported_at_its_hash_naming_each_unused_code(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    comment: str,
    column: int,
    named: tuple[str, ...],
) -> None:
    put(project, "a.py", PRIMITIVE.format(comment=f"{comment}"))
    code = lint_main(["--no-cache", "--format", "concise", "--extend-select", "IL001"])
    lines = concise(capsys)
    assert code == 1
    assert [line for line in lines if "IL001" in line] == [
        f"a.py:2:{column}: IL001 {message(*named)}"
    ]


@pytest.mark.parametrize(
    ("comment", "left"),
    [
        pytest.param("  # noqa: IL201", [], id="used"),
        pytest.param("  # noqa: IL2", [], id="prefix-used"),
        pytest.param("  # noqa: IL201 one loop per process", [], id="reason-after-codes"),
        pytest.param("  # noqa", [], id="bare"),
        pytest.param("  # noqa: E501, ASYNC100", ["IL201"], id="other-tools"),
        pytest.param("  # noqa: IL000", ["IL201"], id="flake8-plugin-code"),
        pytest.param("  # noqa: IL001, IL999", ["IL201"], id="lists-IL001"),
        pytest.param("  # noqa: IL0, IL301", ["IL201"], id="lists-a-prefix-of-IL001"),
        pytest.param("  # noqa: il301", ["IL201"], id="invalid-lower-case"),
        pytest.param("  # noqa: IL301x", ["IL201"], id="invalid-glued"),
        pytest.param("  # noqa:", ["IL201"], id="invalid-no-code"),
        pytest.param("  # noqanything IL301", ["IL201"], id="not-a-directive"),
        pytest.param('; S = "# noqa: IL301"', ["IL201"], id="text-in-a-string"),
    ],
)
def test_a_directive_that_is_used_or_not_ours_to_judge_is_not_reported(
    project: Path, capsys: pytest.CaptureFixture[str], comment: str, left: list[str]
) -> None:
    put(project, "a.py", PRIMITIVE.format(comment=comment))
    code = lint_main(["--no-cache", "--format", "json", "--extend-select", "IL001"])
    assert code == int(bool(left))
    assert [item["code"] for item in json.loads(capsys.readouterr().out)] == left


@pytest.mark.parametrize(
    ("config", "flags", "reported"),
    [
        pytest.param("", ["--extend-select", "IL001"], True, id="IL201-enabled"),
        pytest.param("", ["--select", "IL001"], False, id="IL201-not-selected"),
        pytest.param("", ["--extend-select", "IL001", "--ignore", "IL201"], False, id="ignored"),
        pytest.param(
            "", ["--extend-select", "IL001", "--ignore", "IL2"], False, id="prefix-ignored"
        ),
        pytest.param(
            "",
            ["--extend-select", "IL001", "--per-file-ignores", "a.py:IL201"],
            False,
            id="per-file-ignored",
        ),
        pytest.param(
            "",
            ["--extend-select", "IL001", "--per-file-ignores", "other.py:IL201"],
            True,
            id="per-file-ignored-elsewhere",
        ),
        pytest.param(
            'extend-select = ["IL001"]\nignore = ["IL201"]', [], False, id="config-ignore"
        ),
        pytest.param(
            'extend-select = ["IL001"]\nper-file-ignores = { "a.py" = ["IL201"] }',
            [],
            False,
            id="config-per-file-ignores",
        ),
        pytest.param('extend-select = ["IL001"]', [], True, id="config-extend-select"),
    ],
)
def test_a_code_whose_rule_is_not_enabled_for_the_file_is_not_reported(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    config: str,
    flags: list[str],
    reported: bool,
) -> None:
    put(project, "pyproject.toml", f"[tool.interlace.lint]\n{config}\n")
    put(project, "a.py", "import threading\nLOCK = threading.Lock()  # noqa: IL201\n")
    assert lint_main(["--no-cache", "--format", "concise", *flags]) == int(reported)
    expected = [f"a.py:2:26: IL001 {message('IL201')}"] if reported else []
    assert concise(capsys) == expected


@pytest.mark.parametrize(
    ("comment", "flags", "reported"),
    [
        pytest.param(
            "# noqa: IL102", ["--extend-select", "IL001"], False, id="opt-in-not-selected"
        ),
        pytest.param(
            "# noqa: IL102", ["--extend-select", "IL001,IL102"], True, id="opt-in-selected"
        ),
        pytest.param("# noqa: IL1", ["--extend-select", "IL001"], False, id="prefix-partly-on"),
        pytest.param("# noqa: IL10", ["--extend-select", "IL001,IL102"], False, id="IL104-off"),
        pytest.param(
            "# noqa: IL1", ["--extend-select", "IL001,IL102,IL104"], True, id="prefix-all-on"
        ),
    ],
)
def test_a_prefix_is_reported_only_when_every_rule_it_covers_ran(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    comment: str,
    flags: list[str],
    reported: bool,
) -> None:
    put(project, "a.py", f"x = 1  {comment}\n")
    assert lint_main(["--no-cache", "--format", "concise", *flags]) == int(reported)
    named = comment.removeprefix("# noqa: ")
    assert concise(capsys) == ([f"a.py:1:8: IL001 {message(named)}"] if reported else [])


def test_a_directive_is_used_by_the_finding_it_suppresses_not_by_a_finding_on_another_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The finding is reported on the first line of the statement, where a directive is read.
    put(project, "a.py", "import asyncio\nLOCK = asyncio.Lock(  # noqa: IL201\n)  # noqa: IL201\n")
    assert lint_main(["--no-cache", "--format", "concise", "--extend-select", "IL001"]) == 1
    assert concise(capsys) == [f"a.py:3:4: IL001 {message('IL201')}"]


def test_il001_is_suppressed_by_a_directive_on_its_line_like_any_code(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", "x = 1  # noqa: IL001, IL101\ny = 2  # noqa: IL101\n")
    assert lint_main(["--no-cache", "--format", "concise", "--extend-select", "IL001"]) == 1
    assert concise(capsys) == [f"a.py:2:8: IL001 {message('IL101')}"]


@pytest.mark.parametrize(("target", "reported"), [("py39", False), ("py311", True)])
def test_used_means_used_in_this_run_with_its_configuration(
    project: Path, capsys: pytest.CaptureFixture[str], target: str, reported: bool
) -> None:
    # IL201 reports a per-instance primitive without evidence only for targets before 3.10.
    source = (
        "import asyncio\nclass C:\n    def __init__(self):\n"
        "        self.lock = asyncio.Lock()  # noqa: IL201\n"
    )
    put(project, "a.py", source)
    flags = ["--target-version", target, "--extend-select", "IL001"]
    assert lint_main(["--no-cache", "--format", "concise", *flags]) == int(reported)
    assert concise(capsys) == ([f"a.py:4:37: IL001 {message('IL201')}"] if reported else [])


def test_the_documented_examples_behave_with_the_default_rules() -> None:
    rules: list[type[Rule]] = [FlagUnusedNoqa, *DEFAULT_RULES]
    bad = lint_source(FlagUnusedNoqa.bad_example, rules)
    good = lint_source(FlagUnusedNoqa.good_example, rules)
    assert [(f.row, f.code, f.message) for f in bad.findings] == [
        (6, "IL001", message("IL101")),
        (8, "IL001", message("IL310 (unknown code)")),
    ]
    assert (bad.errors, good.findings, good.errors) == ((), (), ())


def test_a_file_no_other_rule_needs_is_not_parsed_and_its_directives_are_still_reported(
    project: Path,
) -> None:
    put(project, "a.py", "x = 1  # noqa: IL201\n")
    put(project, "b.py", "x = 1  # nothing to suppress\n")
    result = lint_paths(
        [], use_cache=False, overrides=lambda c: c.with_overrides(extend_select=("IL001",))
    )
    assert [(f.filename, f.row, f.column, f.code) for f in result.findings] == [
        ("a.py", 1, 8, "IL001")
    ]
    assert (result.files, result.parsed, result.errors) == (2, 0, [])


def test_only_a_file_with_noqa_text_has_its_comments_read(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = noqa_module._comments
    calls: list[list[str]] = []

    def spy(module: cst.Module | None, lines: Sequence[str]) -> dict[int, tuple[int, str]]:
        calls.append(list(lines))
        return read(module, lines)

    monkeypatch.setattr(noqa_module, "_comments", spy)
    put(project, "a.py", PRIMITIVE.format(comment="  # a comment"))
    put(project, "b.py", "x = 1  # a comment\n")
    put(project, "c.py", "x = 1  # noqa: IL201\n")
    result = lint_paths(
        [], jobs=1, use_cache=False, overrides=lambda c: c.with_overrides(extend_select=("IL001",))
    )
    assert [(f.filename, f.code) for f in result.findings] == [("a.py", "IL201"), ("c.py", "IL001")]
    assert (calls, result.parsed, result.errors) == ([["x = 1  # noqa: IL201", ""]], 1, [])


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        pytest.param(
            "text",
            "IL001 [*] unused `noqa` directive: IL201 suppresses nothing on this line.\n"
            " --> a.py:1:8\n  |\n1 | x = 1  # noqa: IL201  # why\n  |        ^^^^^^^^^^^^^\n"
            "info: {1}\nhelp: {2}\n\n".format(*message_parts(message("IL201"))),
            id="text",
        ),
        pytest.param("concise", f"a.py:1:8: IL001 {message('IL201')}\n", id="concise"),
        pytest.param(
            "github",
            "::error file=a.py,line=1,col=8,endLine=1,endColumn=21,title=IL001::"
            f"{message('IL201')}\n",
            id="github",
        ),
    ],
)
def test_every_text_format_shows_il001_like_any_finding(
    project: Path, capsys: pytest.CaptureFixture[str], fmt: str, expected: str
) -> None:
    (project / ".git").mkdir()  # github paths are relative to the repository
    put(project, "a.py", "x = 1  # noqa: IL201  # why\n")
    assert lint_main(["--no-cache", "--format", fmt, "--extend-select", "IL001"]) == 1
    assert capsys.readouterr().out == expected


def test_json_and_sarif_name_il001_and_carry_its_documentation(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", "x = 1  # noqa: IL201\n")
    lint_main(["--no-cache", "--format", "json", "--extend-select", "IL001"])
    (item,) = json.loads(capsys.readouterr().out)
    assert (item["code"], item["name"], item["noqa_row"]) == ("IL001", "unused-noqa", 1)
    assert (item["location"], item["end_location"]) == (
        {"row": 1, "column": 8},
        {"row": 1, "column": 21},
    )
    lint_main(["--no-cache", "--format", "sarif", "--extend-select", "IL001"])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    (result,) = run["results"]
    rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert (result["ruleId"], rule["id"], rule["name"]) == ("IL001", "IL001", "unused-noqa")
    assert "When to suppress: " in rule["help"]["text"]


def test_statistics_count_il001(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "a.py", "x = 1  # noqa: IL201\ny = 2  # noqa: IL999\n")
    assert lint_main(["--no-cache", "--statistics", "--extend-select", "IL001"]) == 1
    assert capsys.readouterr().out == "    2\tIL001\t[*] unused-noqa\n"


def test_explain_il001_prints_every_documentation_section(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert lint_main(["--explain", "IL001"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("IL001 unused-noqa: ")
    headings = ("\n\nWhy: ", "\n\nBad:\n    class Agent:", "\nGood:\n", "\nWhen to suppress: ")
    assert [h for h in headings if h not in out] == []
