"""Eval files: every ``tests/linters/eval/IL*.py`` is linted and its findings must match, exactly,
the lines that carry a trailing expectation comment (flake8-async's convention)::

    self.lock = asyncio.Lock()  # error: IL201
    x = check_and_restore()  # error: IL101, IL301

A finding is expected on the line where its node *starts*. Each negative (code that must *not*
be reported) is named by a comment line starting with ``# ok:``, and every file holds at least as
many of them as expected findings. Only the rules whose code starts with
the file name's ``IL`` prefix run (``IL201.py`` and ``IL201_aliases.py`` run IL201, ``IL3.py``
runs IL301..IL399); a header line ``# select: IL101, IL301`` overrides that. Files must parse.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from interlace.linters._engine import lint_source
from interlace.linters.rules import all_rules

EVAL_DIR = Path(__file__).parent / "eval"
EVAL_FILES = sorted(EVAL_DIR.glob("IL*.py"))

_EXPECT = re.compile(r"#\s*error:\s*(IL\d{3}(?:\s*,\s*IL\d{3})*)\s*$")
_SELECT = re.compile(r"^#\s*select:\s*(.+)$", re.MULTILINE)
_PREFIX = re.compile(r"^IL\d*")


def expected_findings(text: str) -> Counter[tuple[int, str]]:
    """Return the (line, code) pairs that the file's ``# error:`` comments promise."""
    expected: Counter[tuple[int, str]] = Counter()
    for row, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            for code in re.split(r"\s*,\s*", match.group(1)):
                expected[(row, code)] += 1
    return expected


def selected_prefixes(path: Path, text: str) -> tuple[str, ...]:
    """Return the code prefixes an eval file runs: its ``# select:`` header or its name's prefix."""
    header = _SELECT.search(text)
    if header:
        return tuple(p.strip() for p in header.group(1).split(","))
    match = _PREFIX.match(path.stem)
    assert match is not None, f"eval file {path.name} must be named IL<digits>...py"
    return (match.group(0),)


def test_expected_findings_reads_single_and_multiple_codes() -> None:
    text = "a = 1  # error: IL201\nb = 2\nc = 3  # error: IL101, IL301\n"
    assert expected_findings(text) == Counter({(1, "IL201"): 1, (3, "IL101"): 1, (3, "IL301"): 1})


_NEGATIVE = re.compile(r"^\s*#\s*ok\b", re.MULTILINE)


@pytest.mark.parametrize("path", EVAL_FILES, ids=[p.name for p in EVAL_FILES])
def test_eval_file_has_at_least_as_many_named_negatives_as_findings(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    positives = sum(expected_findings(text).values())
    negatives = len(_NEGATIVE.findall(text))
    assert positives > 0
    assert negatives >= positives, (
        f"{path.name}: {negatives} `# ok:` negatives, {positives} findings"
    )


@pytest.mark.parametrize("path", EVAL_FILES, ids=[p.name for p in EVAL_FILES])
def test_eval_file_findings_match_its_error_comments(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    prefixes = selected_prefixes(path, text)
    rules = [r for r in all_rules() if r.code.startswith(prefixes)]
    assert rules, f"{path.name}: no registered rule matches {prefixes}"
    result = lint_source(text, rules, filename=str(path))
    assert result.errors == ()
    got = Counter((f.row, f.code) for f in result.findings)
    want = expected_findings(text)
    lines = text.splitlines()
    missing = sorted((want - got).elements())
    unexpected = sorted((got - want).elements())
    report = [f"missing  {r}:{c}: {lines[r - 1].strip()}" for r, c in missing] + [
        f"unexpected {r}:{c}: {lines[r - 1].strip()}" for r, c in unexpected
    ]
    assert report == []
