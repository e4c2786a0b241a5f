"""Every registered rule is documented, its VALID/INVALID examples behave, and docs/rules.md is
the page the rule classes render."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from interlace.linters import Rule, lint_source
from interlace.linters._docs import render_rules_markdown
from interlace.linters.messages import MESSAGES
from interlace.linters.rules import all_rules

RULES_MD = Path(__file__).parents[2] / "docs" / "rules.md"
DESIGN_CODES = ("IL101", "IL102", "IL201", "IL301", "IL302", "IL303")
ADDED_CODES = ("IL001", "IL104")
"""Codes added since the design's table ("stable; more may be added")."""
OPT_IN_CODES = ("IL001", "IL102", "IL104")
"""IL001: an unused directive is lint hygiene, like ruff's RUF100, not a concurrency hazard;
IL102: 2 real of 55 on unseen code (docs/lint.md); IL104: harmless duplicates mostly."""
DOC_FIELDS = ("summary", "message", "why", "bad_example", "good_example", "suppress")

EXAMPLES = [
    pytest.param(rule, kind, sample, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules()
    for kind, samples in (("VALID", rule.VALID), ("INVALID", rule.INVALID))
    for i, sample in enumerate(samples)
]


def test_every_code_of_the_design_is_registered() -> None:
    assert tuple(r.code for r in all_rules()) == tuple(sorted(DESIGN_CODES + ADDED_CODES))


def test_only_the_listed_codes_are_opt_in() -> None:
    assert tuple(r.code for r in all_rules() if r.opt_in) == OPT_IN_CODES


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_is_documented(rule: type[Rule]) -> None:
    assert re.fullmatch(r"IL[0-9]{3}", rule.code)
    assert re.fullmatch(r"[a-z]+(-[a-z]+)+", rule.name)
    empty = [name for name in DOC_FIELDS if not str(getattr(rule, name, "")).strip()]
    assert empty == []
    assert len(rule.VALID) >= 1
    assert len(rule.INVALID) >= 1
    assert MESSAGES[rule.code] == rule.message


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_docs_examples_behave(rule: type[Rule]) -> None:
    bad = lint_source(rule.bad_example, [rule])
    good = lint_source(rule.good_example, [rule])
    assert (bad.errors, good.errors) == ((), ())
    assert [f.code for f in bad.findings][:1] == [rule.code]
    assert good.findings == ()


@pytest.mark.parametrize(("rule", "kind", "sample"), EXAMPLES)
def test_valid_and_invalid_examples_behave(rule: type[Rule], kind: str, sample: str) -> None:
    result = lint_source(sample, [rule])
    assert result.errors == ()
    codes = [f.code for f in result.findings if f.code == rule.code]
    if kind == "VALID":
        assert codes == []
    else:
        assert codes != []


def test_rules_md_is_up_to_date() -> None:
    # Regenerate with: python -m interlace.linters._docs
    assert RULES_MD.read_text(encoding="utf-8") == render_rules_markdown()
