"""``# noqa`` directives: read as ruff reads them, from real comments only; ``interlace lint
--add-noqa`` puts them on the lines the engine checks and keeps files intact."""

from __future__ import annotations

import os
import stat
import tokenize
from pathlib import Path

import libcst as cst
import pytest
from lint_project import put

from interlace.linters import Finding
from interlace.linters._add_noqa import _KEEP_UNUSED, add_noqa
from interlace.linters._engine import LINE_BREAK
from interlace.linters._noqa import Suppressions, UnsuppressedLine, parse_noqa
from interlace.linters.cli import lint_main

MODULE_LOCKS = (
    "import asyncio\nLOCK = asyncio.Lock()\n\n\nclass Pool:\n    ready = asyncio.Event()\n"
)

# IL101 (written after the await) and IL303 (iterating `self._subs` while awaiting) on line 11.
BUS = (
    "class Bus:\n"
    "    def __init__(self):\n"
    "        self._subs = []\n"
    '        self._state = "idle"\n'
    "\n"
    "    def drop(self, cb):\n"
    "        self._subs.remove(cb)\n"
    "\n"
    "    async def publish(self, event):\n"
    '        if self._state == "idle":\n'
    "            for cb in self._subs: self._state = await cb(event)\n"
)


def test_add_noqa_suppresses_every_finding_and_a_rerun_reports_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", MODULE_LOCKS)
    assert lint_main(["--no-cache", "--add-noqa"]) == 0
    assert capsys.readouterr() == ("", "Added 2 noqa directives.\n")
    assert path.read_text(encoding="utf-8") == (
        "import asyncio\nLOCK = asyncio.Lock()  # noqa: IL201\n\n\n"
        "class Pool:\n    ready = asyncio.Event()  # noqa: IL201\n"
    )
    assert lint_main(["--no-cache"]) == 0


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param("L = asyncio.Lock()  # noqa: E501", "L = asyncio.Lock()  # noqa: E501, IL201"),
        pytest.param(
            "L = asyncio.Lock()  # noqa:IL101 the reason",
            "L = asyncio.Lock()  # noqa: IL101, IL201 the reason",
            id="reason-after-the-codes-kept",
        ),
        pytest.param(
            "L = asyncio.Lock()  # why  # NOQA: E501",
            "L = asyncio.Lock()  # why  # noqa: E501, IL201",
            id="directive-after-another-comment",
        ),
        pytest.param(
            "L = asyncio.Lock()  # a comment", "L = asyncio.Lock()  # a comment  # noqa: IL201"
        ),
        pytest.param("L = asyncio.Lock()   \t", "L = asyncio.Lock()  # noqa: IL201", id="trailing"),
        pytest.param(
            'L = asyncio.Lock(); S = "# noqa: E501"',
            'L = asyncio.Lock(); S = "# noqa: E501"  # noqa: IL201',
            id="noqa-text-in-a-string",
        ),
    ],
)
def test_add_noqa_merges_with_what_the_line_already_has(
    project: Path, capsys: pytest.CaptureFixture[str], line: str, expected: str
) -> None:
    path = put(project, "a.py", f"import asyncio\n{line}\n")
    assert lint_main(["--no-cache", "--add-noqa"]) == 0
    assert path.read_text(encoding="utf-8") == f"import asyncio\n{expected}\n"
    assert capsys.readouterr().err == "Added 1 noqa directive.\n"
    assert lint_main(["--no-cache"]) == 0


def test_findings_on_one_line_share_one_directive_with_sorted_unique_codes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bus = put(project, "bus.py", BUS)
    locks = put(project, "locks.py", "import asyncio\nA, B = asyncio.Lock(), asyncio.Event()\n")
    assert lint_main(["--no-cache", "--add-noqa"]) == 0
    assert capsys.readouterr().err == "Added 2 noqa directives.\n"
    assert bus.read_text(encoding="utf-8").splitlines()[-1] == (
        "            for cb in self._subs: self._state = await cb(event)  # noqa: IL101, IL303"
    )
    assert locks.read_text(encoding="utf-8") == (
        "import asyncio\nA, B = asyncio.Lock(), asyncio.Event()  # noqa: IL201\n"
    )
    assert lint_main(["--no-cache"]) == 0


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(
            b"import asyncio\r\nL = asyncio.Lock()\r\nx = 1\r\n",
            b"import asyncio\r\nL = asyncio.Lock()  # noqa: IL201\r\nx = 1\r\n",
            id="crlf",
        ),
        pytest.param(
            b"import asyncio\r\nL = asyncio.Lock()",
            b"import asyncio\r\nL = asyncio.Lock()  # noqa: IL201",
            id="crlf-no-final-newline",
        ),
        pytest.param(
            b"import asyncio\rL = asyncio.Lock()\rx = 1\r",
            b"import asyncio\rL = asyncio.Lock()  # noqa: IL201\rx = 1\r",
            id="cr",
        ),
        pytest.param(
            b"\xef\xbb\xbfimport asyncio\nL = asyncio.Lock()\n",
            b"\xef\xbb\xbfimport asyncio\nL = asyncio.Lock()  # noqa: IL201\n",
            id="utf-8-bom",
        ),
        pytest.param(
            b"# -*- coding: latin-1 -*-\nimport asyncio\nL = asyncio.Lock()  # caf\xe9\n",
            b"# -*- coding: latin-1 -*-\nimport asyncio\nL = asyncio.Lock()  # caf\xe9"
            b"  # noqa: IL201\n",
            id="latin-1",
        ),
        pytest.param(
            b"import asyncio\n\x0c\nx = 1\nL = asyncio.Lock()\n",
            b"import asyncio\n\x0c\nx = 1\nL = asyncio.Lock()  # noqa: IL201\n",
            id="form-feed-is-not-a-line-break",
        ),
    ],
)
def test_add_noqa_keeps_line_endings_encoding_and_final_newline(
    project: Path, capsys: pytest.CaptureFixture[str], before: bytes, after: bytes
) -> None:
    path = project / "a.py"
    path.write_bytes(before)
    assert lint_main(["--no-cache", "--add-noqa"]) == 0
    assert path.read_bytes() == after
    assert lint_main(["--no-cache"]) == 0


def test_add_noqa_keeps_the_file_mode_and_symlinks_and_leaves_no_temporary_files(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = put(project, "real.py", "import asyncio\nL = asyncio.Lock()\n")
    real.chmod(0o640)
    (project / "link.py").symlink_to("real.py")
    assert lint_main(["--no-cache", "--add-noqa", "link.py"]) == 0
    assert (project / "link.py").is_symlink()
    assert real.read_text(encoding="utf-8") == "import asyncio\nL = asyncio.Lock()  # noqa: IL201\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(os.listdir(project)) == ["link.py", "pyproject.toml", "real.py"]


def test_a_second_add_noqa_adds_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = put(project, "a.py", MODULE_LOCKS)
    assert lint_main(["--no-cache", "--add-noqa"]) == 0
    first = path.read_bytes()
    capsys.readouterr()
    assert lint_main(["--no-cache", "--add-noqa"]) == 0
    assert capsys.readouterr() == ("", "Added 0 noqa directives.\n")
    assert path.read_bytes() == first


def test_unparsable_file_is_left_untouched_and_exits_0_as_in_ruff(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = put(project, "a.py", "import asyncio\nL = asyncio.Lock()\n")
    broken = put(project, "b.py", "import asyncio\nL = asyncio.Lock()\ndef f(:\n")
    assert lint_main(["--no-cache", "--add-noqa"]) == 0
    assert capsys.readouterr() == (
        "",
        "b.py:3:7: error: cannot parse: invalid syntax\n"
        "Added 1 noqa directive.\n"
        "1 error: some files were not linted completely.\n",
    )
    assert good.read_text(encoding="utf-8") == "import asyncio\nL = asyncio.Lock()  # noqa: IL201\n"
    assert broken.read_text(encoding="utf-8") == "import asyncio\nL = asyncio.Lock()\ndef f(:\n"


def test_add_noqa_suppresses_only_the_selected_codes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "bus.py", BUS)
    assert lint_main(["--no-cache", "--add-noqa", "--select", "IL3"]) == 0
    assert path.read_text(encoding="utf-8").splitlines()[-1].endswith("cb(event)  # noqa: IL303")
    capsys.readouterr()
    assert lint_main(["--no-cache", "--format", "concise"]) == 1
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == ["IL101"]


STALE = (
    "import asyncio\nimport threading\n"
    "LOCK = asyncio.Lock()  # noqa: IL301\n"
    "T_LOCK = threading.Lock()  # noqa: IL201\n"
    "READY = asyncio.Event()\n"
)


def test_add_noqa_never_adds_il001_and_warns_of_each_unused_directive(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(project, "a.py", STALE)
    warnings = [
        f"a.py:{row}: warning: cannot add '# noqa: IL001': {_KEEP_UNUSED}\n" for row in (3, 4)
    ]
    for added in (2, 0):  # a second run adds nothing and warns again
        assert lint_main(["--no-cache", "--add-noqa", "--extend-select", "IL001"]) == 1
        assert capsys.readouterr() == (
            "",
            "".join(warnings)
            + f"Added {added} noqa directive{'s' * (added != 1)}.\n"
            + "2 findings are left unsuppressed: see the warnings above.\n",
        )
        assert path.read_text(encoding="utf-8") == (
            "import asyncio\nimport threading\n"
            "LOCK = asyncio.Lock()  # noqa: IL201, IL301\n"
            "T_LOCK = threading.Lock()  # noqa: IL201\n"
            "READY = asyncio.Event()  # noqa: IL201\n"
        )
    assert lint_main(["--no-cache", "--format", "concise", "--extend-select", "IL001"]) == 1
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()] == [
        ["a.py:3:24:", "IL001"],
        ["a.py:4:28:", "IL001"],
    ]


def test_the_cache_does_not_answer_for_a_file_add_noqa_changed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", MODULE_LOCKS)
    assert lint_main([]) == 1
    assert lint_main(["--add-noqa"]) == 0
    capsys.readouterr()
    assert lint_main([]) == 0
    assert capsys.readouterr().err == "All checks passed (1 file checked).\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--format", "json"],
            "--add-noqa cannot be combined with --format json: --add-noqa prints no findings, "
            "only how many directives it added; drop --format",
        ),
        (
            ["--statistics"],
            "--add-noqa cannot be combined with --statistics: --add-noqa prints no findings to "
            "count; run --statistics before it to see what it will suppress",
        ),
        (
            ["--explain", "IL201"],
            "--add-noqa cannot be combined with --explain IL201: --explain lints nothing; run "
            "them separately",
        ),
    ],
)
def test_add_noqa_with_a_flag_that_makes_no_sense_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    path = put(project, "a.py", MODULE_LOCKS)
    assert lint_main(["--no-cache", "--add-noqa", *flags]) == 2
    assert capsys.readouterr() == ("", f"interlace lint: error: {message}\n")
    assert path.read_text(encoding="utf-8") == MODULE_LOCKS


def test_add_noqa_accepts_exit_zero(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "a.py", MODULE_LOCKS)
    assert lint_main(["--no-cache", "--add-noqa", "--exit-zero"]) == 0
    assert lint_main(["--no-cache"]) == 0


UNCOMMENTABLE = (
    "import asyncio\n"
    'L, DOC = asyncio.Lock(), """\n'
    'text"""\n'
    "E = asyncio.Event() if DOC else \\\n"
    "    None\n"
    "M = asyncio.Lock()\n"
)


@pytest.mark.parametrize(("flags", "code"), [([], 1), (["--exit-zero"], 0)])
def test_a_line_where_no_comment_can_go_is_reported_and_left_alone(
    project: Path, capsys: pytest.CaptureFixture[str], flags: list[str], code: int
) -> None:
    path = put(project, "a.py", UNCOMMENTABLE)
    assert lint_main(["--no-cache", "--add-noqa", *flags]) == code
    assert capsys.readouterr() == (
        "",
        "a.py:2: warning: cannot add '# noqa: IL201': the line ends inside a multi-line "
        "string, where a comment would become part of the string; start the string on a line "
        "of its own (or bind it to a name first), then run --add-noqa again\n"
        "a.py:4: warning: cannot add '# noqa: IL201': the line ends with a backslash "
        "continuation, after which a comment is a syntax error; wrap the expression in "
        "parentheses instead, then run --add-noqa again\n"
        "Added 1 noqa directive.\n"
        "2 findings are left unsuppressed: see the warnings above.\n",
    )
    assert path.read_text(encoding="utf-8") == UNCOMMENTABLE.replace(
        "M = asyncio.Lock()\n", "M = asyncio.Lock()  # noqa: IL201\n"
    )


@pytest.mark.parametrize(
    ("comment", "codes"),
    [
        ("# noqa", ()),
        ("#noqa", ()),
        ("# NoQA", ()),
        ("# noqa IL201", ()),
        ("# noqa - built per request", ()),
        ("# noqa#IL201", ()),
        ("# why # noqa", ()),
        ("# noqa: IL201", ("IL201",)),
        ("# noqa:IL101,IL201", ("IL101", "IL201")),
        ("# noqa : IL201", ("IL201",)),
        ("# noqa: IL101 IL201", ("IL101", "IL201")),
        ("# noqa: IL101,,IL201,", ("IL101", "IL201")),
        ("# noqa: IL101IL201", ("IL101", "IL201")),
        ("# noqa: IL201 built per request", ("IL201",)),
        ("# noqa: IL201, reason IL101", ("IL201",)),
        ("# noqa: IL201# another comment", ("IL201",)),
        ("# noqa: IL201 # noqa: IL101", ("IL201",)),
        ("# noqa: IL2", ("IL2",)),
    ],
)
def test_a_directive_is_read_as_ruff_reads_it(comment: str, codes: tuple[str, ...]) -> None:
    directive = parse_noqa(comment)
    assert directive is not None
    assert (directive.codes, directive.error) == (codes, None)


@pytest.mark.parametrize(
    ("comment", "error"),
    [
        ("# noqa:", "expected a comma-separated list of codes after `# noqa:`"),
        ("# noqa: IL", "expected a comma-separated list of codes after `# noqa:`"),
        ("# noqa: il201", "expected a comma-separated list of codes after `# noqa:`"),
        ("# noqa:: IL201", "expected a comma-separated list of codes after `# noqa:`"),
        ("# noqanything", "expected `:` followed by a comma-separated list of codes"),
        ("# noqa,IL201", "expected `:` followed by a comma-separated list of codes"),
        ("# noqanything # noqa: IL201", "expected `:` followed by a comma-separated list"),
        ("# noqa: IL201.", "expected each code to be uppercase letters followed by digits"),
        ("# noqa: IL201:IL101", "expected each code to be uppercase letters followed by digits"),
        ("# noqa: IL201ILX", "expected each code to be uppercase letters followed by digits"),
    ],
)
def test_an_invalid_directive_suppresses_nothing(comment: str, error: str) -> None:
    directive = parse_noqa(comment)
    assert directive is not None
    assert directive.error is not None
    assert directive.error.startswith(error)
    assert not directive.suppresses("IL201")


@pytest.mark.parametrize("comment", ["# a comment", "# type: ignore", "# noq a", ""])
def test_a_comment_without_a_directive_has_none(comment: str) -> None:
    assert parse_noqa(comment) is None


def test_a_listed_code_suppresses_itself_and_the_codes_it_prefixes() -> None:
    directive = parse_noqa("# noqa: IL1, IL201")
    assert directive is not None
    assert [directive.suppresses(c) for c in ("IL101", "IL104", "IL201", "IL301")] == [
        True,
        True,
        True,
        False,
    ]


SUPPRESSIONS = (
    "import asyncio\n"
    'A = asyncio.Lock(); s = "# noqa"\n'
    "B = asyncio.Lock()  # noqa: IL\n"
    "C = asyncio.Lock()  # noqanything\n"
    "D = asyncio.Lock()  # noqa: IL201\n"
    'E = asyncio.Lock(); s = """\n'
    'text  # noqa"""; F = asyncio.Lock()\n'
    "G = asyncio.Lock()  # noqa\n"
    'H = asyncio.Lock(); s = "# noqa: IL101"  # noqa: IL2\n'
)


def _suppressed_rows(source: str) -> list[int]:
    lines = LINE_BREAK.split(source)
    suppressions = Suppressions(cst.parse_module(source), lines)
    return [row for row in range(1, len(lines) + 1) if suppressions.suppresses("IL201", row)]


def test_only_a_real_comment_suppresses_a_finding() -> None:
    assert _suppressed_rows(SUPPRESSIONS) == [5, 8, 9]


def test_code_the_tokenizer_rejects_falls_back_to_libcsts_comments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def newer_syntax(readline: object) -> None:
        raise SyntaxError("newer than the running interpreter")

    monkeypatch.setattr(tokenize, "generate_tokens", newer_syntax)
    assert _suppressed_rows(SUPPRESSIONS) == [5, 8, 9]


def test_suppressions_count_only_python_line_breaks() -> None:
    source = "import asyncio\r\x0c\rA = asyncio.Lock()  # noqa: IL201\r\n"
    assert _suppressed_rows(source) == [3]


@pytest.mark.parametrize(
    ("source_line", "written"),
    [
        ("L = asyncio.Lock()  # noqa: IL", "# noqa: IL"),
        ("L = asyncio.Lock()  # why # noqanything", "# noqanything"),
        ("L = asyncio.Lock()  # noqa: IL201x reason", "# noqa: IL201x reason"),
    ],
)
def test_a_line_with_an_invalid_directive_is_reported_not_given_a_second_one(
    tmp_path: Path, source_line: str, written: str
) -> None:
    path = tmp_path / "a.py"
    text = f"import asyncio\n{source_line}\n".encode()
    path.write_bytes(text)
    [line] = add_noqa([_finding(path, 2, source_line)]).unsuppressed
    assert line.reason.startswith(f"its comment has an invalid directive {written!r} (expected ")
    assert line.reason.endswith(
        "which suppresses nothing, and a directive added after it would be ignored too (only "
        "the first in a comment counts, as in ruff); correct it, then run --add-noqa again"
    )
    assert path.read_bytes() == text


@pytest.mark.parametrize(
    ("source_line", "expected"),
    [
        pytest.param(
            "L = asyncio.Lock()  # noqa : E501 # why",
            "L = asyncio.Lock()  # noqa: E501, IL201 # why",
            id="space-before-the-colon-and-a-comment-after",
        ),
        pytest.param(
            "L = asyncio.Lock()  # noqa: E501 # noqa: IL101",
            "L = asyncio.Lock()  # noqa: E501, IL201 # noqa: IL101",
            id="only-the-first-directive-counts",
        ),
        pytest.param(
            'L = asyncio.Lock(); S = "# noqa: E501"  # why',
            'L = asyncio.Lock(); S = "# noqa: E501"  # why  # noqa: IL201',
            id="directive-text-in-a-string-before-a-comment",
        ),
    ],
)
def test_add_noqa_merges_into_the_directive_ruff_reads(
    tmp_path: Path, source_line: str, expected: str
) -> None:
    path = tmp_path / "a.py"
    path.write_text(f"import asyncio\n{source_line}\n", encoding="utf-8")
    assert add_noqa([_finding(path, 2, source_line)]).added == 1
    assert path.read_text(encoding="utf-8") == f"import asyncio\n{expected}\n"


def _finding(path: Path, row: int, source_line: str) -> Finding:
    return Finding("IL201", "message", str(path), row, 1, row, 2, (), source_line)


@pytest.mark.parametrize(
    ("text", "source_line", "reason"),
    [
        pytest.param(
            b"import asyncio\nL = asyncio.Lock()  # edited\n",
            "L = asyncio.Lock()",
            "the file changed since it was linted; run --add-noqa again",
            id="changed",
        ),
        pytest.param(
            b"# -*- coding: iso-2022-jp -*-\nL = asyncio.Lock()  # \x1b(B\n",
            "L = asyncio.Lock()  # ",
            "its bytes do not survive decoding and re-encoding as iso-2022-jp, so rewriting it "
            "could change more than the directives; add them by hand",
            id="redundant-escape-sequence",
        ),
    ],
)
def test_a_file_that_cannot_be_rewritten_exactly_is_left_alone(
    tmp_path: Path, text: bytes, source_line: str, reason: str
) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(text)
    result = add_noqa([_finding(path, 2, source_line)])
    assert result.added == 0
    assert result.unsuppressed == [UnsuppressedLine(str(path), 0, ("IL201",), 1, reason)]
    assert path.read_bytes() == text


def test_a_file_that_no_longer_parses_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(b"L = asyncio.Lock(\n")
    [line] = add_noqa([_finding(path, 1, "L = asyncio.Lock(")]).unsuppressed
    # libcst's one-line summary, not its multi-line excerpt of the code.
    assert line.reason.startswith("cannot parse the file any more (Syntax Error @ ")
    assert line.reason.endswith("); run --add-noqa again")
    assert "\n" not in line.reason
    assert path.read_bytes() == b"L = asyncio.Lock(\n"
