"""Output formats for findings in a Jupyter notebook.

A notebook finding has a cell, rows that count that cell's lines, and a ``raw_span`` in the
``.ipynb`` text. The formats a human reads name ``path:cell N:row:col`` as ruff does; JSON keeps
ruff's cell-relative rows and carries ``cell``; the formats a machine places in the file use the
raw span (``FALLBACK_SPAN`` when it is unknown) and name the cell in their message.

The findings are built directly: what the engine computes for a notebook is tested with it.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from interlace.linters import FileError, Finding, RelatedLocation
from interlace.linters._noqa import NoqaEdit
from interlace.linters._output import (
    FALLBACK_SPAN,
    FORMATS,
    error_place,
    format_azure,
    format_concise,
    format_github,
    format_github_errors,
    format_gitlab,
    format_grouped,
    format_json,
    format_json_lines,
    format_junit,
    format_pylint,
    format_rdjson,
    format_sarif,
    format_text,
    message_parts,
)
from interlace.linters.messages import MESSAGES
from interlace.linters.rules import all_rules
from interlace.linters.rules._flow import shared_by_tasks

SCHEMA = Path(__file__).parent / "sarif-schema-2.1.0.json"

NOTEBOOK = "nb/agent.ipynb"

CELL_LINES = (
    "class Agent:",
    "    async def get(self, key):",
    "        if key not in self.cache:",
    "            value = await fetch(key)",
    "            self.cache[key] = value",
    "        return self.cache[key]",
)
"""The code of cell 3 of the notebook (cell 1 is markdown, cell 2 sets up the cache)."""

IL101 = MESSAGES["IL101"].format(state="self.cache", shared=shared_by_tasks("self.cache", "Agent"))
WHAT, WHY, INSTEAD = message_parts(IL101)
CHECKED = "`self.cache` is checked here"
SUSPENDED = "the task can be suspended here"


def fields(finding: Finding, **changes: Any) -> Finding:
    """``finding`` with ``changes``."""
    return Finding(**{**{k: getattr(finding, k) for k in Finding.__dataclass_fields__}, **changes})


FINDING = Finding(
    code="IL101",
    message=IL101,
    filename=NOTEBOOK,
    row=5,
    column=13,
    end_row=5,
    end_column=28,
    related=(
        RelatedLocation(3, 23, 3, 33, CHECKED, cell=3, raw_span=(31, 28, 31, 38)),
        RelatedLocation(4, 21, 4, 37, SUSPENDED, cell=3, raw_span=(32, 26, 32, 42)),
    ),
    source_line=CELL_LINES[4],
    context=tuple(enumerate(CELL_LINES, start=1)),
    cell=3,
    raw_span=(33, 18, 33, 33),
)
"""An IL101 finding on line 5 of cell 3, which is line 33 of the ``.ipynb`` text (its JSON
string starts at column 6, so the columns are 5 more), with both related locations drawn in
the cell's snippet."""

ELSEWHERE = RelatedLocation(
    2, 1, 2, 11, "`self.cache` is first set here", cell=2, raw_span=(20, 6, 20, 16)
)
"""A related location in cell 2, which the snippet of a cell 3 finding cannot draw."""

CROSS = fields(FINDING, related=(FINDING.related[1], ELSEWHERE))
"""The finding with a related location in its cell, and one in another cell."""

UNKNOWN = fields(
    FINDING, related=(RelatedLocation(4, 21, 4, 37, SUSPENDED, cell=3),), raw_span=None
)
"""A notebook finding whose place in the ``.ipynb`` text could not be computed."""

PYTHON = Finding(
    "IL101",
    IL101,
    "pkg/mod.py",
    5,
    13,
    5,
    28,
    (RelatedLocation(3, 23, 3, 33, CHECKED),),
    CELL_LINES[4],
)
"""The same finding in a Python file."""

CELL_ERROR = FileError(
    NOTEBOOK, 2, 9, "cannot parse: invalid syntax", "syntax", cell=4, raw_position=(41, 14)
)
JSON_ERROR = FileError("nb/broken.ipynb", 7, 3, "cannot parse: invalid notebook JSON", "syntax")
"""An error in a cell's code, and one in the notebook's JSON (no cell: its row is the file's)."""


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree (only its ``.git`` directory) as the working directory."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def sarif(findings: list[Finding], root: Path, errors: list[FileError] | None = None) -> Any:
    return json.loads(format_sarif(findings, errors or [], all_rules(), root=root, version="0.1.0"))


# The formats a human reads: ruff's `path:cell N:row:col`.


def test_concise_names_the_cell_and_its_row_as_ruff_does() -> None:
    assert format_concise([FINDING, PYTHON]) == (
        f"nb/agent.ipynb:cell 3:5:13: IL101 {IL101}\npkg/mod.py:5:13: IL101 {IL101}\n"
    )


def test_text_shows_the_cell_in_the_location_and_its_rows_in_the_gutter() -> None:
    assert format_text([FINDING]) == (
        f"IL101 {WHAT}\n"
        " --> nb/agent.ipynb:cell 3:5:13\n"
        "  |\n"
        "1 | class Agent:\n"
        "2 |     async def get(self, key):\n"
        "3 |         if key not in self.cache:\n"
        f"  |                       ---------- {CHECKED}\n"
        "4 |             value = await fetch(key)\n"
        f"  |                     ---------------- {SUSPENDED}\n"
        "5 |             self.cache[key] = value\n"
        "  |             ^^^^^^^^^^^^^^^\n"
        "6 |         return self.cache[key]\n"
        "  |\n"
        f"info: {WHY}\n"
        f"help: {INSTEAD}\n"
        "\n"
    )


def test_text_names_a_related_location_in_another_cell_in_a_note() -> None:
    lines = format_text([CROSS]).splitlines()
    # Drawn, it would mark line 2 of cell 3 with a message about cell 2.
    assert lines[1:12] == [
        " --> nb/agent.ipynb:cell 3:5:13",
        "  |",
        "1 | class Agent:",
        "2 |     async def get(self, key):",
        "3 |         if key not in self.cache:",
        "4 |             value = await fetch(key)",
        f"  |                     ---------------- {SUSPENDED}",
        "5 |             self.cache[key] = value",
        "  |             ^^^^^^^^^^^^^^^",
        "6 |         return self.cache[key]",
        "  |",
    ]
    assert lines[12:14] == [f"note: cell 2:2:1: {ELSEWHERE.message}", f"info: {WHY}"]


def test_text_sections_of_a_notebook_finding_name_the_cell() -> None:
    far = fields(
        FINDING,
        row=30,
        end_row=30,
        related=(FINDING.related[0],),
        context=(*FINDING.context[:5], (30, CELL_LINES[4])),
    )
    lines = format_text([far]).splitlines()
    assert [line for line in lines if "nb/agent.ipynb" in line] == [
        "  --> nb/agent.ipynb:cell 3:30:13",
        "  ::: nb/agent.ipynb:cell 3:3:23",
    ]


def test_grouped_names_the_cell_and_aligns_the_rows_and_columns() -> None:
    other = fields(FINDING, cell=12, row=40, column=5, related=())
    assert format_grouped([FINDING, other, PYTHON], [CELL_ERROR, JSON_ERROR]) == (
        "nb/agent.ipynb:\n"
        "    cell 3:5:13 IL101 " + IL101 + "\n"
        "  cell 12:40:5  IL101 " + IL101 + "\n"
        "    cell 4:2:9  invalid-syntax: cannot parse: invalid syntax\n"
        "\n"
        "nb/broken.ipynb:\n"
        "  7:3 invalid-syntax: cannot parse: invalid notebook JSON\n"
        "\n"
        "pkg/mod.py:\n"
        "  5:13 IL101 " + IL101 + "\n"
        "\n"
    )


def test_the_error_place_on_the_command_line_names_the_cell() -> None:
    gone = FileError("gone.ipynb", 0, 0, "no such file or directory", "io")
    assert [error_place(e) for e in (CELL_ERROR, JSON_ERROR, gone)] == [
        "nb/agent.ipynb:cell 4:2:9",
        "nb/broken.ipynb:7:3",
        "gone.ipynb",
    ]


# JSON: ruff's cell-relative rows, and the cell.


def test_json_carries_the_cell_and_keeps_rows_relative_to_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    unused = fields(
        FINDING,
        code="IL001",
        row=2,
        column=33,
        end_row=2,
        end_column=47,
        related=(),
        fix=NoqaEdit(2, 31, 2, 47, ""),
    )
    items = json.loads(format_json([CROSS, unused], [CELL_ERROR, JSON_ERROR]))
    assert [(i["cell"], i["location"], i["end_location"], i["noqa_row"]) for i in items] == [
        (3, {"row": 5, "column": 13}, {"row": 5, "column": 28}, 5),
        (3, {"row": 2, "column": 33}, {"row": 2, "column": 47}, 2),
        (4, {"row": 2, "column": 9}, {"row": 2, "column": 9}, None),
        (None, {"row": 7, "column": 3}, {"row": 7, "column": 3}, None),
    ]
    assert items[0]["related"] == [
        {
            "message": SUSPENDED,
            "location": {"row": 4, "column": 21},
            "end_location": {"row": 4, "column": 37},
            "cell": 3,
        },
        {
            "message": ELSEWHERE.message,
            "location": {"row": 2, "column": 1},
            "end_location": {"row": 2, "column": 11},
            "cell": 2,
        },
    ]
    [edit] = items[1]["fix"]["edits"]
    assert (edit["location"], edit["end_location"]) == (
        {"row": 2, "column": 31},
        {"row": 2, "column": 47},
    )


def test_json_lines_carry_the_cell_as_json_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    lines = format_json_lines([FINDING], [CELL_ERROR]).splitlines()
    assert [json.loads(line) for line in lines] == json.loads(format_json([FINDING], [CELL_ERROR]))
    assert lines[0].startswith('{"cell":3,"code":"IL101","end_location":{"row":5,"column":28}')


# The formats a machine places in the file: the span in the .ipynb text.


def test_sarif_regions_are_the_spans_in_the_notebook_and_properties_name_the_cell(
    repository: Path,
) -> None:
    run = sarif([CROSS], repository, [CELL_ERROR])["runs"][0]
    [result] = run["results"]
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "nb/agent.ipynb", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 33, "startColumn": 18, "endLine": 33, "endColumn": 33},
    }
    assert result["properties"] == {"cell": 3}
    assert result["message"]["text"] == f"cell 3:5:13: {IL101}"
    assert [
        (r["physicalLocation"]["region"], r["properties"], r["message"]["text"])
        for r in result["relatedLocations"]
    ] == [
        (
            {"startLine": 32, "startColumn": 26, "endLine": 32, "endColumn": 42},
            {"cell": 3},
            f"cell 3:4:21: {SUSPENDED}",
        ),
        (
            {"startLine": 20, "startColumn": 6, "endLine": 20, "endColumn": 16},
            {"cell": 2},
            f"cell 2:2:1: {ELSEWHERE.message}",
        ),
    ]
    [notification] = run["invocations"][0]["toolExecutionNotifications"]
    assert notification["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 41,
        "startColumn": 14,
        "endLine": 41,
        "endColumn": 14,
    }
    assert notification["properties"] == {"cell": 4}


def test_sarif_of_a_notebook_validates_against_the_official_2_1_0_schema(
    repository: Path,
) -> None:
    log = sarif([CROSS, UNKNOWN, PYTHON], repository, [CELL_ERROR, JSON_ERROR])
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    errors = sorted(str(e.message) for e in jsonschema.Draft4Validator(schema).iter_errors(log))
    assert errors == []


def test_sarif_fingerprints_are_distinct_across_cells_and_survive_renumbering(
    repository: Path,
) -> None:
    # The same line in two cells: two alerts. A cell inserted above: the same alerts.
    twin = fields(FINDING, cell=5, raw_span=(60, 18, 60, 33))
    renumbered = [fields(FINDING, cell=4), fields(twin, cell=6)]

    def prints(findings: list[Finding]) -> list[str]:
        results = sarif(findings, repository)["runs"][0]["results"]
        return [r["partialFingerprints"]["interlaceFindingHash/v1"] for r in results]

    before = prints([FINDING, twin])
    assert len(set(before)) == 2
    assert prints(renumbered) == before


def test_github_annotations_are_placed_by_the_span_in_the_notebook(repository: Path) -> None:
    assert format_github([CROSS]) == (
        "::error file=nb/agent.ipynb,line=33,col=18,endLine=33,endColumn=33,title=IL101::"
        f"nb/agent.ipynb:cell 3:5:13: {IL101}"
        f"%0Anb/agent.ipynb:cell 3:4:21: {SUSPENDED}"
        f"%0Anb/agent.ipynb:cell 2:2:1: {ELSEWHERE.message}\n"
    )


def test_github_annotations_for_errors_in_a_notebook(repository: Path) -> None:
    assert format_github_errors([CELL_ERROR, JSON_ERROR]) == (
        "::error file=nb/agent.ipynb,line=41,col=14,title=interlace syntax error::"
        "nb/agent.ipynb:cell 4:2:9: cannot parse: invalid syntax\n"
        "::error file=nb/broken.ipynb,line=7,col=3,title=interlace syntax error::"
        "cannot parse: invalid notebook JSON\n"
    )


def test_gitlab_positions_are_the_spans_in_the_notebook(repository: Path) -> None:
    issues = json.loads(format_gitlab([FINDING], [CELL_ERROR]))
    assert [(i["description"], i["location"]) for i in issues] == [
        (
            f"IL101: cell 3:5:13: {IL101}",
            {
                "path": "nb/agent.ipynb",
                "positions": {
                    "begin": {"line": 33, "column": 18},
                    "end": {"line": 33, "column": 33},
                },
            },
        ),
        (
            "invalid-syntax: cell 4:2:9: cannot parse: invalid syntax",
            {
                "path": "nb/agent.ipynb",
                "positions": {
                    "begin": {"line": 41, "column": 14},
                    "end": {"line": 41, "column": 14},
                },
            },
        ),
    ]


def test_pylint_lines_are_the_notebooks_and_the_message_names_the_cell() -> None:
    assert format_pylint([FINDING, PYTHON], [CELL_ERROR, JSON_ERROR]) == (
        f"nb/agent.ipynb:33: [IL101] cell 3:5:13: {IL101}\n"
        f"pkg/mod.py:5: [IL101] {IL101}\n"
        "nb/agent.ipynb:41: [invalid-syntax] cell 4:2:9: cannot parse: invalid syntax\n"
        "nb/broken.ipynb:7: [invalid-syntax] cannot parse: invalid notebook JSON\n"
    )


def test_azure_is_placed_by_the_span_in_the_notebook(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / NOTEBOOK
    assert format_azure([CROSS]) == (
        f"##vso[task.logissue type=error;sourcepath={path};linenumber=33;columnnumber=18;"
        f"code=IL101;]{path}:cell 3:5:13: {IL101}"
        f"%0A{path}:cell 3:4:21: {SUSPENDED}%0A{path}:cell 2:2:1: {ELSEWHERE.message}\n"
    )


def test_rdjson_ranges_are_the_spans_in_the_notebook_without_suggestions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    fixable = fields(CROSS, fix=NoqaEdit(5, 36, 5, 50, ""))
    [diagnostic] = json.loads(format_rdjson([fixable]))["diagnostics"]
    path = str(tmp_path / NOTEBOOK)
    assert diagnostic == {
        "code": {"value": "IL101"},
        "location": {
            "path": path,
            "range": {"start": {"line": 33, "column": 18}, "end": {"line": 33, "column": 33}},
        },
        "message": f"cell 3:5:13: {IL101}",
        "related_locations": [
            {
                "location": {
                    "path": path,
                    "range": {
                        "start": {"line": 32, "column": 26},
                        "end": {"line": 32, "column": 42},
                    },
                },
                "message": f"cell 3:4:21: {SUSPENDED}",
            },
            {
                "location": {
                    "path": path,
                    "range": {
                        "start": {"line": 20, "column": 6},
                        "end": {"line": 20, "column": 16},
                    },
                },
                "message": f"cell 2:2:1: {ELSEWHERE.message}",
            },
        ],
    }


def test_junit_attributes_are_the_notebooks_and_the_failure_text_names_the_cell() -> None:
    root = ET.fromstring(format_junit([CROSS], [CELL_ERROR]).encode("utf-8"))
    cases = [case for suite in root for case in suite]
    assert [(case.get("line"), case.get("column")) for case in cases] == [
        ("33", "18"),
        ("41", "14"),
    ]
    texts = [failure.text for case in cases if (failure := case.find("failure")) is not None]
    assert texts == [
        f"cell 3, line 5, col 13, {IL101}\ncell 3, line 4, col 21, {SUSPENDED}\n"
        f"cell 2, line 2, col 1, {ELSEWHERE.message}",
        "cell 4, line 2, col 9, cannot parse: invalid syntax",
    ]


def test_an_unknown_span_in_the_notebook_falls_back_to_1_1(repository: Path) -> None:
    assert FALLBACK_SPAN == (1, 1, 1, 1)
    unplaced = FileError(NOTEBOOK, 2, 9, "cannot parse: invalid syntax", "syntax", cell=4)
    [result] = sarif([UNKNOWN], repository)["runs"][0]["results"]
    regions = [
        place["physicalLocation"]["region"]
        for place in (*result["locations"], *result["relatedLocations"])
    ]
    assert regions == [{"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1}] * 2
    assert format_github([UNKNOWN]).startswith(
        "::error file=nb/agent.ipynb,line=1,col=1,endLine=1,endColumn=1,title=IL101::"
        "nb/agent.ipynb:cell 3:5:13: "
    )
    assert format_github_errors([unplaced]).startswith(
        "::error file=nb/agent.ipynb,line=1,col=1,title=interlace syntax error::"
    )
    assert format_pylint([UNKNOWN], [unplaced]).startswith(
        f"nb/agent.ipynb:1: [IL101] cell 3:5:13: {IL101}\n"
        "nb/agent.ipynb:1: [invalid-syntax] cell 4:2:9: "
    )


# A Python file: as before notebooks (the other tests pin each format's layout).


@pytest.mark.parametrize("name", FORMATS)
def test_a_python_finding_says_nothing_of_cells_in_any_format(name: str, repository: Path) -> None:
    formats = {
        "text": lambda: format_text([PYTHON]),
        "full": lambda: format_text([PYTHON]),
        "concise": lambda: format_concise([PYTHON]),
        "json": lambda: format_json([PYTHON], [JSON_ERROR]),
        "json-lines": lambda: format_json_lines([PYTHON], [JSON_ERROR]),
        "sarif": lambda: format_sarif(
            [PYTHON], [JSON_ERROR], all_rules(), root=repository, version="0"
        ),
        "github": lambda: format_github([PYTHON]) + format_github_errors([JSON_ERROR]),
        "gitlab": lambda: format_gitlab([PYTHON], [JSON_ERROR]),
        "junit": lambda: format_junit([PYTHON], [JSON_ERROR]),
        "pylint": lambda: format_pylint([PYTHON], [JSON_ERROR]),
        "azure": lambda: format_azure([PYTHON], [JSON_ERROR]),
        "grouped": lambda: format_grouped([PYTHON], [JSON_ERROR]),
        "rdjson": lambda: format_rdjson([PYTHON], [JSON_ERROR]),
    }
    output = formats[name]()
    # Only ruff's `cell` field of each JSON object (the finding's and the error's), null.
    nulls = 2 if name in ("json", "json-lines") else 0
    assert len(re.findall(r'"cell": ?null', output)) == nulls
    assert re.search(r"\bcell\b", re.sub(r'"cell": ?null', "", output)) is None
