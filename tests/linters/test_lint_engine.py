"""The per-file engine: parsing, the pre-filter, positions, noqa and fault isolation."""

from __future__ import annotations

import re
from importlib.metadata import version
from typing import ClassVar

import libcst as cst
import pytest

from interlace.linters import FileError, LintContext, Related, Rule, lint_source
from interlace.linters._engine import MSG_PARSER_LIMIT, active_rules
from interlace.linters.messages import MESSAGES
from interlace.linters.rules.noqa import FlagUnusedNoqa
from interlace.linters.rules.primitives import AvoidAsyncioPrimitiveInInit

MODULE_LOCK = "import asyncio\nLOCK = asyncio.Lock(){comment}\n"


class FlagEveryAwait(Rule):
    """A test rule: flags each ``await`` with the enclosing call as related location."""

    code = "IL901"
    name = "flag-every-await"
    summary = message = why = bad_example = good_example = suppress = "test"
    TRIGGERS: ClassVar[tuple[str, ...]] = ("await",)

    def visit_Await(self, node: cst.Await) -> None:
        self.report(node, "await here", related=[Related(node.expression, "awaited call")])


class RaiseOnName(Rule):
    """A test rule that crashes on the first name it sees."""

    code = "IL902"
    name = "raise-on-name"
    summary = message = why = bad_example = good_example = suppress = "test"
    TRIGGERS: ClassVar[tuple[str, ...]] = ()

    def visit_Name(self, node: cst.Name) -> None:
        raise ZeroDivisionError("boom")


def test_finding_positions_are_one_based_with_related_locations() -> None:
    source = "async def f():\n    x = await g()\n"
    result = lint_source(source, [FlagEveryAwait])
    assert [(f.row, f.column, f.end_row, f.end_column) for f in result.findings] == [(2, 9, 2, 18)]
    related = result.findings[0].related[0]
    assert (related.row, related.column, related.end_row, related.end_column) == (2, 15, 2, 18)
    assert related.message == "awaited call"
    assert result.findings[0].source_line == "    x = await g()"


@pytest.mark.parametrize(
    ("comment", "reported"),
    [
        ("", True),
        ("  # noqa", False),
        ("  # noqa: IL201", False),
        ("  # NOQA:IL201", False),
        ("  # noqa: IL2", False),
        ("  # noqa: IL101, IL201", False),
        ("  # noqa: IL101", True),
        ("  # noqa: E501", True),
        ('; S = "# noqa: E501"  # noqa: IL201', False),
        pytest.param('; S = "# noqa"', True, id="directive-text-in-a-string"),
        pytest.param('; S = """# noqa"""', True, id="directive-text-in-a-triple-quoted-string"),
        pytest.param("  # noqa: IL", True, id="no-code-after-the-colon"),
        pytest.param("  # noqa:", True, id="nothing-after-the-colon"),
        pytest.param("  # noqanything", True, id="noqa-as-part-of-a-word"),
        pytest.param("  # noqa: il201", True, id="lowercase-code"),
        pytest.param("  # noqa: IL101 # noqa: IL201", True, id="only-the-first-directive"),
        pytest.param("  # noqa : IL201 built per request", False, id="space-before-the-colon"),
        pytest.param("  # why  # noqa", False, id="directive-after-another-comment"),
    ],
)
def test_noqa_comment_on_the_reported_line_suppresses_matching_codes(
    comment: str, reported: bool
) -> None:
    result = lint_source(MODULE_LOCK.format(comment=comment), [AvoidAsyncioPrimitiveInInit])
    assert [f.code for f in result.findings] == (["IL201"] if reported else [])


def test_file_without_trigger_text_is_not_parsed() -> None:
    result = lint_source("x = 1\n", [AvoidAsyncioPrimitiveInInit])
    assert (result.parsed, result.findings, result.errors) == (False, (), ())


def test_shared_class_names_are_extra_triggers() -> None:
    rules = active_rules(b"class Pool: pass\n", [FlagEveryAwait], ["Pool"])
    assert rules == [FlagEveryAwait]
    assert active_rules(b"class Pool: pass\n", [FlagEveryAwait]) == []


@pytest.mark.parametrize(
    ("source", "row", "column"),
    [
        ("import asyncio\ndef f(:\n    pass\n", 2, 7),
        ("x = (\n", 1, 5),
        # Columns count characters, also after non-ASCII ones (CPython counts UTF-8 bytes
        # when it compiles the bytes of a file without a coding cookie).
        ("x = '\U0001f600' +* 2\n", 1, 10),
        ("import asyncio\nx = 'é' +* 2\n", 2, 10),
        ("# -*- coding: latin-1 -*-\nx = 'é' +* 2\n".encode("latin-1"), 2, 10),
        ("\ufeffx = 'あ' +* 2\n".encode(), 1, 10),
    ],
)
def test_syntax_error_is_reported_with_its_line(source: str | bytes, row: int, column: int) -> None:
    result = lint_source(source, [AvoidAsyncioPrimitiveInInit], filename="bad.py")
    assert result.findings == ()
    assert [(e.filename, e.row, e.column, e.kind) for e in result.errors] == [
        ("bad.py", row, column, "syntax")
    ]
    assert result.errors[0].message.startswith("cannot parse: ")


def test_syntax_error_in_a_file_no_rule_parses_is_still_reported() -> None:
    result = lint_source("def f(:\n", [AvoidAsyncioPrimitiveInInit], filename="bad.py")
    assert result.errors == (FileError("bad.py", 1, 7, "cannot parse: invalid syntax", "syntax"),)


def test_valid_code_libcst_cannot_parse_is_skipped_as_a_limit_not_called_invalid() -> None:
    # From CPython's Lib/test/test_grammar.py: a parenthesized annotated name, valid Python
    # that libcst's grammar does not have.
    source = "import asyncio\nL = asyncio.Lock()\n\ndef f():\n    (name): int\n"
    compile(source, "valid.py", "exec")
    result = lint_source(source, [AvoidAsyncioPrimitiveInInit], filename="valid.py")
    assert result.findings == ()
    [error] = result.errors
    assert (error.filename, error.row, error.column, error.kind) == ("valid.py", 1, 1, "limit")
    row, column = (int(n) for n in re.findall(r"near (\d+):(\d+)\)", error.message)[0])
    assert error.message == MSG_PARSER_LIMIT.format(
        version=version("libcst"), row=row, column=column
    )


def test_a_crashing_rule_becomes_an_internal_error_and_other_rules_still_report() -> None:
    source = "async def f():\n    await g()\n"
    result = lint_source(source, [FlagEveryAwait, RaiseOnName], filename="x.py")
    assert [f.code for f in result.findings] == ["IL901"]
    assert [(e.kind, e.filename) for e in result.errors] == [("internal", "x.py")]
    assert result.errors[0].message.startswith(
        "internal error in rule IL902: ZeroDivisionError: boom."
    )


def test_il001_leaves_alone_the_codes_of_a_rule_that_crashed_on_the_file() -> None:
    source = "async def f():\n    await g()  # noqa: IL901, IL902\n    x = 1  # noqa: IL901\n"
    result = lint_source(source, [FlagUnusedNoqa, FlagEveryAwait, RaiseOnName], filename="x.py")
    assert [(f.row, f.code, f.message) for f in result.findings] == [
        (3, "IL001", MESSAGES["IL001"].format(codes="IL901", verb="suppresses"))
    ]
    assert [e.kind for e in result.errors] == ["internal"]


def test_bytes_source_with_coding_cookie_is_decoded() -> None:
    source = "# -*- coding: latin-1 -*-\nimport asyncio\nL = asyncio.Lock()  # é\n"
    result = lint_source(source.encode("latin-1"), [AvoidAsyncioPrimitiveInInit])
    assert [f.source_line for f in result.findings] == ["L = asyncio.Lock()  # é"]


@pytest.mark.parametrize(
    "between",
    [pytest.param("\x0c\n", id="form-feed"), pytest.param('S = "\u2028"\n', id="line-separator")],
)
def test_rows_and_noqa_lines_count_only_python_line_breaks(between: str) -> None:
    source = f"import asyncio\n{between}x = 1  # noqa: IL201\nLOCK = asyncio.Lock()\n"
    result = lint_source(source, [AvoidAsyncioPrimitiveInInit])
    assert [(f.row, f.source_line) for f in result.findings] == [(4, "LOCK = asyncio.Lock()")]


def test_context_target_version_reaches_the_rule() -> None:
    context = LintContext(target_version=(3, 9))
    result = lint_source(
        MODULE_LOCK.format(comment=""), [AvoidAsyncioPrimitiveInInit], context=context
    )
    assert "Before Python 3.10" in result.findings[0].message


@pytest.mark.parametrize(
    ("source", "kind", "message"),
    [
        (b"import asyncio\nx = '\xff'\n", "syntax", "cannot parse: (unicode error) 'utf-8' codec"),
        (b"# coding: bogus\nimport asyncio\n", "syntax", "cannot parse: unknown encoding: bogus"),
        (b"import asyncio\nx = " + b"[" * 3000 + b"]" * 3000, "syntax", "cannot parse: too many"),
        (b"import asyncio\nx = " + b"lambda: " * 5000 + b"1\n", "syntax", "cannot parse: nested"),
        (b"import asyncio\nx = " + b"lambda: " * 2500 + b"1\n", "limit", "cannot lint: the code"),
    ],
    ids=["undecodable", "unknown-coding", "deep-brackets", "deep-lambdas", "deep-but-valid"],
)
def test_pathological_input_is_an_error_for_the_file_never_a_crash(
    source: bytes, kind: str, message: str
) -> None:
    # The deep cases would overflow libcst's native parser (a segfault) without the guard.
    result = lint_source(source, [AvoidAsyncioPrimitiveInInit], filename="bad.py")
    assert [(e.kind, e.message.startswith(message)) for e in result.errors] == [(kind, True)]
    assert all(e.row >= 1 and e.column >= 1 for e in result.errors)


@pytest.mark.parametrize("rules", [[], [AvoidAsyncioPrimitiveInInit]], ids=["filtered", "parsed"])
def test_an_unknown_coding_cookie_is_reported_on_its_line(rules: list[type[Rule]]) -> None:
    # compile() says line 0, offset -1 for it; libcst says nothing of the place.
    result = lint_source(b"# coding: nope\nx = 1\n", rules, filename="bad.py")
    assert [(e.row, e.column, e.message) for e in result.errors] == [
        (1, 1, "cannot parse: unknown encoding: nope")
    ]
