"""The thread bug suite: interlace finds every bug, shrinks and replays it, and passes every fix.

Each module of ``thread_bugs`` holds a ``buggy`` and a ``fixed`` plain function (see
``thread_bugs/__init__.py``); their threads run under control.
"""

from __future__ import annotations

import functools
import importlib
import re
import threading
from types import ModuleType

import pytest
from thread_bugs import PROGRAMS

import interlace

SEED = 20_240_601
FIND_BUDGET = 1000
FIXED_BUDGET = 1000
# Hangs are reported when a run passes its step budget; a small one keeps the suite quick.
BUGGY_MAX_STEPS = 5_000
STOCK = "fails under stock order"
PREEMPTION = "needs thread preemption"


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"thread_bugs.{name}")


def _explore(name: str) -> interlace.Exploration:
    return interlace.explore(
        _module(name).buggy, seed=SEED, max_schedules=FIND_BUDGET, max_steps=BUGGY_MAX_STEPS
    )


@functools.cache
def _explore_buggy(name: str) -> interlace.Exploration:
    return _explore(name)


def test_the_suite_has_the_programs_it_lists() -> None:
    assert len(PROGRAMS) >= 12
    for name in PROGRAMS:
        module = _module(name)
        assert module.KIND in ("exception", "deadlock", "hang")
        assert isinstance(module.HIDDEN, bool)
        assert (module.DEVIATIONS == 0) is (not module.HIDDEN)
        assert module.__doc__ is not None
        assert "Fix" in module.__doc__
        assert f"Deviations: {module.DEVIATIONS}" in module.__doc__


@pytest.mark.parametrize("name", PROGRAMS)
def test_buggy_program_is_found_with_its_kind_and_label_and_replays(name: str) -> None:
    module = _module(name)
    exploration = _explore_buggy(name)
    failure = exploration.failure
    assert failure is not None, f"{name}: no failure in {exploration.schedules} schedules"
    assert failure.kind == module.KIND
    assert failure.label == (PREEMPTION if module.HIDDEN else STOCK)
    again = interlace.replay(module.buggy, failure.token)
    assert again is not None
    assert again.kind == failure.kind
    assert again.token == failure.token
    assert type(again.exception) is type(failure.exception)


@pytest.mark.parametrize("name", PROGRAMS)
def test_buggy_program_is_shrunk_to_the_fewest_deviations_it_needs(name: str) -> None:
    # DEVIATIONS is argued in each module's docstring; that no schedule with fewer fails is
    # checked by the stock-order test below (every hidden program passes with none).
    failure = _explore_buggy(name).failure
    assert failure is not None
    assert failure.deviations == _module(name).DEVIATIONS


@pytest.mark.parametrize("name", PROGRAMS)
def test_stock_order_shows_the_bug_exactly_when_it_is_not_hidden(name: str) -> None:
    module = _module(name)
    stock = interlace.explore(module.buggy, max_schedules=1, max_steps=BUGGY_MAX_STEPS)
    assert stock.schedules == 1
    assert (stock.failure is None) is module.HIDDEN


@pytest.mark.parametrize("name", PROGRAMS)
def test_report_names_the_schedule_and_its_replay_line_replays_it(name: str) -> None:
    module = _module(name)
    failure = _explore_buggy(name).failure
    assert failure is not None
    assert failure.report.startswith("Failing schedule (")
    line = f"  interlace.replay(thread_bugs.{name}.buggy, {failure.token!r})"
    assert line in failure.report.splitlines()
    printed = re.search(r"interlace\.replay\(thread_bugs\.\w+\.buggy, '([^']+)'\)", failure.report)
    assert printed is not None
    again = interlace.replay(module.buggy, printed.group(1))
    assert again is not None
    assert (again.kind, again.token) == (failure.kind, failure.token)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("transfer_deadlock", "Wait-for cycle: "),
        ("lost_notify", "waits for a notify on Condition"),
        ("queue_check_then_get", "waits for a notify on Condition"),
        ("two_loops", "waits for a wake-up of its event loop"),
        ("progress_spin", "MainThread: running"),
    ],
)
def test_deadlock_and_hang_reports_say_what_each_thread_waits_for(name: str, expected: str) -> None:
    failure = _explore_buggy(name).failure
    assert failure is not None
    assert expected in failure.detail


@pytest.mark.parametrize("name", PROGRAMS)
def test_fixed_program_passes_a_thousand_schedules(name: str) -> None:
    exploration = interlace.explore(_module(name).fixed, max_schedules=FIXED_BUDGET, seed=SEED)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
    # Fewer only when the default's exhaustive part ran every schedule there is.
    assert exploration.schedules == FIXED_BUDGET or exploration.exhausted, exploration


@pytest.mark.parametrize("strategy", ["auto", "random", "pct", "delay", "exhaustive"])
def test_the_correct_progress_poll_is_never_reported_as_a_hang(strategy: str) -> None:
    exploration = interlace.explore(
        _module("progress_spin").fixed, strategy=strategy, max_schedules=300, seed=SEED
    )
    assert exploration.failure is None, exploration.failure and exploration.failure.report


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_same_seed_gives_the_identical_token(name: str) -> None:
    first = _explore_buggy(name).failure
    again = _explore(name).failure
    assert first is not None
    assert again is not None
    assert again.token == first.token


@pytest.mark.parametrize("name", ["error_history", "two_loops"])
def test_the_same_seed_gives_the_identical_token_twenty_times(name: str) -> None:
    tokens = {
        failure.token
        for failure in (
            interlace.explore(_module(name).buggy, seed=SEED, strategy="random").failure
            for _ in range(20)
        )
        if failure is not None
    }
    assert len(tokens) == 1


def test_no_thread_outlives_the_explorations_of_deadlocks_and_hangs() -> None:
    before = threading.active_count()
    for name in ("transfer_deadlock", "two_loops", "queue_check_then_get", "progress_spin"):
        assert _explore(name).failure is not None
    assert threading.active_count() == before
