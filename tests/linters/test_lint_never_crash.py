"""The linter never crashes: real code from site-packages and Hypothesis-generated programs
produce findings or syntax errors, never an internal error.

The full run over every file in site-packages is ``benchmarks/lint_site_packages.py``; here a fixed
sample keeps the test fast.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import hypothesmith
import libcst as cst
from hypothesis import HealthCheck, given, settings

from interlace.linters import Rule, lint_source
from interlace.linters.rules import all_rules

SAMPLE_SIZE = 100
MAX_BYTES = 60_000


def always_on(rule: type[Rule]) -> type[Rule]:
    """The rule without its pre-filter, so generated programs reach its visitor."""
    return type(f"AlwaysOn{rule.__name__}", (rule,), {"TRIGGERS": ()})


ALWAYS_ON = [always_on(rule) for rule in all_rules()]

# hypothesmith's grammar strategies often draw programs too slowly, reject many drafts, or
# overrun Hypothesis's data budget on a draft (data_too_large, seen failing a CI run): all
# three judge the generator, not the linter, so none may fail these tests.
GENERATION_HEALTH_CHECKS = [
    HealthCheck.too_slow,
    HealthCheck.filter_too_much,
    HealthCheck.data_too_large,
]


def site_packages_sample() -> list[Path]:
    """Every n-th concurrency-flavoured file of site-packages, sorted, so the sample is fixed
    for a given environment and spread over all installed distributions."""
    root = Path(sysconfig.get_paths()["purelib"])
    every = sorted(root.rglob("*.py"))
    candidates = []
    for path in every[:: max(1, len(every) // (SAMPLE_SIZE * 4))]:
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if b"async" in data or b"thread" in data or b"lock" in data.lower():
            candidates.append(path)
    return candidates[:SAMPLE_SIZE]


def test_a_sample_of_site_packages_produces_no_internal_error() -> None:
    sample = site_packages_sample()
    assert len(sample) >= 30
    internal = []
    for path in sample:
        result = lint_source(path.read_bytes(), ALWAYS_ON, filename=str(path))
        internal += [e for e in result.errors if e.kind != "syntax"]
    assert internal == []


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=GENERATION_HEALTH_CHECKS,
)
@given(hypothesmith.from_grammar())
def test_generated_programs_from_the_grammar_never_crash_a_rule(source: str) -> None:
    result = lint_source(source, ALWAYS_ON)
    assert [e for e in result.errors if e.kind != "syntax"] == []


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=GENERATION_HEALTH_CHECKS,
)
@given(hypothesmith.from_node(cst.Module))
def test_generated_libcst_modules_never_crash_a_rule(source: str) -> None:
    result = lint_source(source, ALWAYS_ON)
    assert [e for e in result.errors if e.kind != "syntax"] == []
