"""The buggy-program suite: interlace finds every bug, replays it, and passes every fix.

Each module of ``bugs`` holds a ``buggy`` and a ``fixed`` program (see ``bugs/__init__.py``).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any

import pytest
from bugs import PROGRAMS

import interlace

SEED = 20_240_601
FIND_BUDGET = 100
FIXED_BUDGET = 1000
# Hangs are reported when a run passes its step budget; a small one keeps the suite quick.
BUGGY_MAX_STEPS = 5_000
STOCK = "fails under stock order"

Program = Callable[[], Coroutine[Any, Any, None]]


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"bugs.{name}")


@functools.cache
def _explore_buggy(name: str) -> interlace.Exploration:
    return interlace.explore(
        _module(name).buggy, seed=SEED, max_schedules=FIND_BUDGET, max_steps=BUGGY_MAX_STEPS
    )


def test_the_suite_has_the_programs_it_lists() -> None:
    assert len(PROGRAMS) >= 18
    for name in PROGRAMS:
        module = _module(name)
        assert module.KIND in ("exception", "deadlock", "hang")
        assert isinstance(module.HIDDEN, bool)
        assert module.__doc__ is not None
        assert "Fix" in module.__doc__


@pytest.mark.parametrize("name", PROGRAMS)
def test_buggy_program_is_found_with_its_kind_and_replays(name: str) -> None:
    module = _module(name)
    exploration = _explore_buggy(name)
    failure = exploration.failure
    assert failure is not None, f"{name}: no failure in {exploration.schedules} schedules"
    assert failure.kind == module.KIND
    assert (failure.label == STOCK) is (not module.HIDDEN)
    assert (failure.deviations == 0) is (not module.HIDDEN)
    again = interlace.replay(module.buggy, failure.token)
    assert again is not None
    assert again.kind == failure.kind
    assert again.token == failure.token
    assert type(again.exception) is type(failure.exception)


@pytest.mark.parametrize("name", PROGRAMS)
def test_report_names_the_schedule_and_its_replay_line_replays_it(name: str) -> None:
    module = _module(name)
    failure = _explore_buggy(name).failure
    assert failure is not None
    assert failure.report.startswith("Failing schedule (")
    assert (
        f"  interlace.replay(bugs.{name}.buggy, {failure.token!r})" in failure.report.splitlines()
    )
    printed = re.search(r"interlace\.replay\(bugs\.\w+\.buggy, '([^']+)'\)", failure.report)
    assert printed is not None
    again = interlace.replay(module.buggy, printed.group(1))
    assert again is not None
    assert (again.kind, again.token) == (failure.kind, failure.token)


@pytest.mark.parametrize("name", PROGRAMS)
def test_stock_order_shows_the_bug_exactly_when_it_is_not_hidden(name: str) -> None:
    module = _module(name)
    stock = interlace.explore(module.buggy, max_schedules=1, max_steps=BUGGY_MAX_STEPS)
    assert stock.schedules == 1
    assert (stock.failure is None) is module.HIDDEN


@pytest.mark.parametrize("name", PROGRAMS)
def test_fixed_program_passes_a_thousand_schedules(name: str) -> None:
    exploration = interlace.explore(_module(name).fixed, max_schedules=FIXED_BUDGET, seed=SEED)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
    # Fewer only when the default's exhaustive part ran every schedule there is.
    assert exploration.schedules == FIXED_BUDGET or exploration.exhausted, exploration


@pytest.mark.parametrize("strategy", ["auto", "random", "pct", "delay", "exhaustive"])
def test_correct_spin_wait_is_never_reported_as_a_hang(strategy: str) -> None:
    spin_wait = _module("pulse_spin").fixed
    exploration = interlace.explore(spin_wait, strategy=strategy, max_schedules=300, seed=SEED)
    assert exploration.failure is None, exploration.failure and exploration.failure.report


@pytest.mark.parametrize("name", ["lost_update", "orphaned_get"])
def test_same_seed_gives_the_identical_token_a_hundred_times(name: str) -> None:
    tokens = set()
    for _ in range(100):
        failure = interlace.explore(_module(name).buggy, seed=SEED, strategy="random").failure
        assert failure is not None
        tokens.add(failure.token)
    assert len(tokens) == 1


def test_unseeded_explorations_pick_differing_seeds() -> None:
    explorations = [
        interlace.explore(_module("fanout_order").buggy, strategy="random") for _ in range(10)
    ]
    assert all(e.failure is not None for e in explorations)
    assert len({e.seed for e in explorations}) > 1


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_shrunk_failure_has_the_fewest_deviations_any_failing_schedule_has(name: str) -> None:
    # The exhaustive search runs schedules in order of their number of deviations, so the
    # first failure it finds has the fewest deviations any failure of that kind can have.
    module = _module(name)
    fewest = interlace.explore(
        module.buggy,
        strategy="exhaustive",
        bound=3,
        seed=SEED,
        max_schedules=2000,
        max_steps=BUGGY_MAX_STEPS,
    ).failure
    found = _explore_buggy(name).failure
    assert fewest is not None
    assert found is not None
    assert found.kind == fewest.kind
    assert found.deviations == fewest.deviations
