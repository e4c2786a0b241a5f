"""Jupyter notebooks: ``interlace lint`` lints a notebook's code cells as one module (as ruff
does), reports each location by cell and in the ``.ipynb`` file itself, and ``--fix`` and
``--add-noqa`` rewrite only the ``source`` of the cells they change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlace.linters import lint_paths
from interlace.linters._engine import FileError
from interlace.linters._notebook import lint_document, read_notebook
from interlace.linters._rule import LintContext
from interlace.linters.cli import lint_main
from interlace.linters.rules import rules_by_code

RACY = [
    "import asyncio\n",
    "\n",
    "class Agent:\n",
    "    async def get(self, key):\n",
    "        if key not in self.cache:\n",
    "            self.cache[key] = await fetch(key)\n",
    "        return self.cache[key]",
]


def code(source: list[str] | str, **extra: Any) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {}, "outputs": [], "source": source, **extra}


def markdown(source: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": [source]}


def notebook(*cells: dict[str, Any], language: str | None = "python") -> str:
    metadata: dict[str, Any] = {"kernelspec": {"name": "python3", "display_name": "Python 3"}}
    if language is not None:
        metadata["language_info"] = {"name": language}
    document = {"cells": list(cells), "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def lint(text: str | bytes, name: str = "nb.ipynb") -> Any:
    data = text.encode() if isinstance(text, str) else text
    rules = list(rules_by_code().values())
    return lint_document(data, rules, filename=name, context=LintContext(path=name))


def raw_text(text: str, span: tuple[int, ...]) -> str:
    """The text a one-line raw span covers in the notebook's JSON."""
    row, column, end_row, end_column = span
    assert row == end_row
    return text.splitlines()[row - 1][column - 1 : end_column - 1]


def test_a_finding_is_reported_in_its_cell_and_in_the_file() -> None:
    text = notebook(markdown("# Title"), code(["x = 1"]), code(RACY), code(["y = 2\n", "z = 3"]))
    (finding,) = lint(text).findings
    assert (finding.code, finding.cell, finding.row, finding.column) == ("IL101", 3, 6, 13)
    assert finding.source_line == "            self.cache[key] = await fetch(key)"
    # Rows count the cell's lines, and the context is that cell's only.
    assert [row for row, _ in finding.context] == [3, 4, 5, 6, 7]
    assert finding.context[-1] == (7, "        return self.cache[key]")
    assert raw_text(text, finding.raw_span) == "self.cache[key]"
    check, suspension = finding.related
    assert (check.cell, check.row) == (3, 5)
    assert raw_text(text, check.raw_span) == "self.cache"
    assert raw_text(text, suspension.raw_span) == "await fetch(key)"


def test_a_cell_as_one_string_with_escapes_maps_columns_through_them() -> None:
    # One JSON string for the whole cell, with escapes before the finding on its line: the
    # raw column counts the file's characters, the cell column the code's.
    source = "".join(RACY).replace("fetch(key)", 'fetch("\\t\u00e9", key)')
    text = notebook(code(source))
    assert "\\u00e9" not in text  # ensure_ascii=False: é is written as itself
    (finding,) = lint(text).findings
    assert (finding.cell, finding.row) == (1, 6)
    row, column, end_row, end_column = finding.raw_span
    line = text.splitlines()[row - 1]
    assert row == end_row
    # Past the finding's start the raw line holds the escaped text of the whole cell.
    assert line[column - 1 : end_column - 1] == "self.cache[key]"
    _, suspension = finding.related
    assert raw_text(text, suspension.raw_span) == 'await fetch(\\"\\\\t\u00e9\\", key)'


def test_ascii_escaped_notebooks_map_unicode_escapes_and_surrogate_pairs() -> None:
    lines = [*RACY[:5], '            s = "\U0001f600\u00e9"; self.cache[key] = await fetch(key)\n']
    text = json.dumps(
        {"cells": [code(lines)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1
    )
    assert "\\ud83d\\ude00" in text
    (finding,) = lint(text).findings
    assert finding.column == 23  # the emoji is one character of the code
    assert raw_text(text, finding.raw_span) == "self.cache[key]"


def test_magics_shell_escapes_and_help_do_not_hide_the_rest_of_a_cell() -> None:
    cell = [
        "%load_ext autoreload\n",
        "!pip install httpx\n",
        "files = !ls\n",
        "asyncio.sleep?\n",
        *RACY,
    ]
    result = lint(notebook(code(cell)))
    assert not result.errors
    (finding,) = result.findings
    assert (finding.cell, finding.row) == (1, 10)
    # The escape lines are shown as they are written.
    assert lint(notebook(code(cell))).findings[0].context[0][1] != "pass"


def test_a_percent_that_continues_a_line_is_python_and_stays() -> None:
    # A cell that compiles is linted as it is: this `%` is the modulo operator.
    cell = ["total = (10\n", "    % 3)\n", "assert total == 1\n"]
    read = read_notebook(notebook(code(cell)).encode(), "nb.ipynb")
    assert not isinstance(read, FileError)
    assert read.source == "total = (10\n    % 3)\nassert total == 1\n\n"


def test_cell_magic_and_automagic_cells_are_skipped_but_python_named_like_a_magic_is_not() -> None:
    text = notebook(
        code(["%%bash\n", "echo 'if key not in cache:'\n"]),
        code(["pip install httpx"]),
        code(["time = 5\n", "run = time + 1"]),
        code(RACY),
    )
    read = read_notebook(text.encode(), "nb.ipynb")
    assert not isinstance(read, FileError)
    assert [cell.number for cell in read.cells] == [3, 4]
    (finding,) = lint(text).findings
    assert finding.cell == 4


def test_top_level_await_parses() -> None:
    result = lint(notebook(code(["import asyncio\n", "await asyncio.sleep(0)"]), code(RACY)))
    assert not result.errors
    assert [f.code for f in result.findings] == ["IL101"]


def test_a_syntax_error_is_reported_in_its_cell() -> None:
    text = notebook(code(["x = 1"]), markdown("text"), code(["y = 2\n", "def f(:\n"]))
    (error,) = lint(text).errors
    assert (error.kind, error.cell, error.row) == ("syntax", 3, 2)
    assert error.raw_position is not None
    assert text.splitlines()[error.raw_position[0] - 1].strip().startswith('"def f(:')


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b'{"cells": [', "it is not valid JSON: Expecting value", id="bad-json"),
        pytest.param(b"\xff\xfe{}", "it is not UTF-8 text", id="not-utf8"),
        pytest.param(b"[]", "its JSON is not an object", id="not-an-object"),
        pytest.param(
            b'{"nbformat": 3, "worksheets": []}',
            "it is in notebook format 3, and interlace reads format 4; convert it with: "
            "jupyter nbconvert --to notebook --nbformat 4 nb.ipynb",
            id="format-3",
        ),
        pytest.param(b'{"nbformat": 4}', "it has no 'cells' list", id="no-cells"),
        pytest.param(
            b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}',
            "cell 1's 'source' is not text",
            id="bad-source",
        ),
    ],
)
def test_a_file_that_is_not_a_notebook_is_an_error_that_says_why(data: bytes, message: str) -> None:
    result = lint(data)
    (error,) = result.errors
    assert error.kind == "syntax"
    assert error.cell is None
    assert error.message.startswith(f"cannot parse notebook: {message}")


def test_a_notebook_in_another_language_is_skipped() -> None:
    result = lint(notebook(code(RACY), language="R"))
    assert (result.findings, result.errors) == ((), ())


def test_the_cli_walks_notebooks_and_prints_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nb.ipynb").write_text(notebook(markdown("# x"), code(RACY)), encoding="utf-8")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "nb-checkpoint.ipynb").write_text(
        notebook(code(RACY)), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert lint_main(["--no-cache", "--output-format", "concise", "."]) == 1
    out = capsys.readouterr().out
    assert out.startswith("nb.ipynb:cell 2:6:13: IL101 ")
    assert "checkpoint" not in out
    assert lint_main(["--no-cache", "--output-format", "json", "nb.ipynb"]) == 1
    (item,) = json.loads(capsys.readouterr().out)
    assert (item["cell"], item["location"], item["noqa_row"]) == (
        2,
        {"row": 6, "column": 13},
        6,
    )


def test_the_cache_keeps_cells_and_file_locations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nb.ipynb").write_text(notebook(markdown("# x"), code(RACY)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cold = lint_paths(["nb.ipynb"])
    warm = lint_paths(["nb.ipynb"])
    assert warm.cached == 1
    assert warm.findings == cold.findings
    assert warm.findings[0].cell == 2
    assert warm.findings[0].raw_span is not None


def test_fix_rewrites_only_the_cells_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = notebook(
        markdown("# x"),
        code(["import asyncio\n", "LOCK = asyncio.Lock()  # noqa: IL201, IL101"]),
        code("x = 1  # noqa: IL303\ny = 2", execution_count=3),
        code(RACY),
    )
    path = tmp_path / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["--no-cache", "--fix", "--extend-select", "IL001", "--output-format", "concise"]
    assert lint_main([*args, "nb.ipynb"]) == 1  # IL101 in cell 4 is left
    fixed = path.read_text(encoding="utf-8")
    expected = text.replace(
        '"LOCK = asyncio.Lock()  # noqa: IL201, IL101"', '"LOCK = asyncio.Lock()  # noqa: IL201"'
    ).replace('"x = 1  # noqa: IL303\\ny = 2"', '"x = 1\\ny = 2"')
    assert expected != text
    assert fixed == expected


def test_fix_that_removes_a_whole_line_keeps_the_list_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = notebook(code(["x = 1\n", "# noqa: IL101\n", "y = 2\n", "z = 3"]))
    path = tmp_path / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    lint_main(["--no-cache", "--fix", "--extend-select", "IL001", "nb.ipynb"])
    assert path.read_text(encoding="utf-8") == notebook(code(["x = 1\n", "y = 2\n", "z = 3"]))


def test_diff_shows_each_changed_cell_as_ruff_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = notebook(
        markdown("# x"),
        code(["import asyncio\n", "x = 1  # noqa: IL101\n", "y = 2"]),
        code("unchanged = 1"),
        code("z = 3  # noqa: IL201"),
    )
    path = tmp_path / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert lint_main(["--no-cache", "--diff", "--extend-select", "IL001", "nb.ipynb"]) == 1
    out, err = capsys.readouterr()
    # A header per changed cell, named as findings name it; no end-of-file marker in a cell.
    assert out == (
        "--- nb.ipynb:cell 2\n"
        "+++ nb.ipynb:cell 2\n"
        "@@ -1,3 +1,3 @@\n"
        " import asyncio\n"
        "-x = 1  # noqa: IL101\n"
        "+x = 1\n"
        " y = 2\n"
        "--- nb.ipynb:cell 4\n"
        "+++ nb.ipynb:cell 4\n"
        "@@ -1 +1 @@\n"
        "-z = 3  # noqa: IL201\n"
        "+z = 3\n"
        "\n"
    )
    assert "Would fix 2 findings" in err
    assert path.read_text(encoding="utf-8") == text


def test_add_noqa_suppresses_in_the_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(markdown("# x"), code(RACY)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert lint_main(["--no-cache", "--add-noqa", "nb.ipynb"]) == 0
    assert "Added 1 noqa directive." in capsys.readouterr().err
    racy = list(RACY)
    racy[5] = racy[5].replace("(key)\n", "(key)  # noqa: IL101\n")
    assert path.read_text(encoding="utf-8") == notebook(markdown("# x"), code(racy))
    assert lint_main(["--no-cache", "nb.ipynb"]) == 0


def test_a_notebook_read_from_stdin_by_its_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import io
    import sys

    data = notebook(code(RACY)).encode()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code_ = lint_main(["--output-format", "concise", "--stdin-filename", "nb.ipynb", "-"])
    assert code_ == 1
    assert capsys.readouterr().out.startswith("nb.ipynb:cell 1:6:13: IL101 ")


_LINE = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12
)


@st.composite
def _notebooks(draw: st.DrawFn) -> str:
    cells = []
    for lines in draw(st.lists(st.lists(_LINE, min_size=1, max_size=4), min_size=1, max_size=4)):
        joined = [line + "\n" for line in lines[:-1]] + [lines[-1]]
        cells.append(code(joined if draw(st.booleans()) else "".join(joined)))
        if draw(st.booleans()):
            cells.append(markdown(draw(_LINE)))
    document = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    indent = draw(st.sampled_from([None, 1, 2]))
    return json.dumps(document, indent=indent, ensure_ascii=draw(st.booleans()))


def _escape_length(raw: str) -> int:
    """The length of the JSON escape that starts ``raw``: a surrogate pair is two."""
    if raw[1] != "u":
        return 2
    return 12 if 0xD800 <= int(raw[2:6], 16) < 0xDC00 else 6


@given(_notebooks())
@settings(max_examples=200, deadline=None)
def test_every_character_of_every_cell_maps_to_itself_in_the_file(text: str) -> None:
    read = read_notebook(text.encode(), "nb.ipynb")
    assert not isinstance(read, FileError)
    raw_lines = text.split("\n")
    for cell in read.cells:
        for row, line in enumerate(cell.lines, start=1):
            for column, char in enumerate(line, start=1):
                position = read.raw_position(cell, row, column)
                assert position is not None
                raw = raw_lines[position[0] - 1][position[1] - 1 :]
                if raw.startswith("\\"):
                    assert json.loads(f'"{raw[: _escape_length(raw)]}"') == char
                else:
                    assert raw[0] == char


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
@settings(max_examples=300, deadline=None)
def test_any_bytes_named_ipynb_lint_without_raising(data: bytes) -> None:
    result = lint(data)
    assert all(error.kind == "syntax" for error in result.errors)


def test_a_key_given_twice_takes_the_last_value_as_json_does() -> None:
    # JSON allows a key twice and Python's decoder keeps the last value: the walk that places
    # findings must not take the first `cells` for the last.
    first = json.dumps([code(["a\n", "b"]), code(["c\n", "d"])])
    last = json.dumps([markdown(""), {"cell_type": "code"}])
    text = f'{{"nbformat": 4, "cells": {first}, "cells": {last}}}'
    read = read_notebook(text.encode(), "nb.ipynb")
    assert not isinstance(read, FileError)
    assert [(cell.number, cell.text) for cell in read.cells] == [(2, "")]
    assert lint(text).errors == ()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_CELL = st.fixed_dictionaries(
    {},
    optional={
        "cell_type": st.sampled_from(["code", "markdown", "raw"]) | _JSON,
        "source": st.lists(_LINE.map(lambda line: line + "\n"), max_size=3) | _LINE | _JSON,
        "metadata": _JSON,
    },
)


@given(
    st.fixed_dictionaries(
        {"nbformat": st.just(4) | _JSON},
        optional={"cells": st.lists(_CELL | _JSON, max_size=4), "metadata": _JSON},
    ),
    st.sampled_from([None, 1]),
)
@settings(max_examples=300, deadline=None)
def test_any_json_named_ipynb_lints_without_raising(document: Any, indent: int | None) -> None:
    result = lint(json.dumps(document, indent=indent))
    assert all(error.kind == "syntax" for error in result.errors)
    for finding in result.findings:
        assert finding.cell is not None
