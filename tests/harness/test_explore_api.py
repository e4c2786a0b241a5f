"""``explore`` never passes without having run the target: budgets and what a target may be."""

from __future__ import annotations

import asyncio
import functools
import queue
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import interlace
from interlace.errors import ConfigError, InvalidTargetError
from interlace.harness import api
from interlace.harness._instrument import uninstrumentable


async def _always_fails() -> None:
    await asyncio.sleep(0)
    raise AssertionError("fails on every schedule")


def _always_fails_in_a_thread() -> None:
    def worker() -> None:
        raise AssertionError("fails on every schedule")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()


@pytest.mark.parametrize("target", [_always_fails, _always_fails_in_a_thread])
@pytest.mark.parametrize("max_seconds", [0, 1e-9])
def test_a_wall_clock_budget_too_small_for_one_schedule_still_runs_the_first(
    target: Callable[[], Any], max_seconds: float
) -> None:
    exploration = interlace.explore(target, max_seconds=max_seconds, seed=1)
    assert exploration.schedules == 1
    assert exploration.failure is not None
    assert exploration.failure.label == "fails under stock order"


async def _overdraw(amount: int) -> None:
    balance = [100]

    async def withdraw() -> None:
        if balance[0] >= amount:
            await asyncio.sleep(0)
            balance[0] -= amount

    await asyncio.gather(withdraw(), withdraw())
    assert balance[0] >= 0, "overdraft"


class _Scenario:
    async def __call__(self) -> None:
        await _overdraw(80)


@pytest.mark.parametrize(
    "target",
    [functools.partial(_overdraw, 80), _Scenario()],
    ids=["partial", "async-call"],
)
def test_a_callable_that_makes_a_coroutine_runs_on_the_controlled_loop(
    target: Callable[[], Any],
) -> None:
    failure = interlace.explore(target, max_schedules=20, seed=1).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert str(failure.exception) == "overdraft\nassert -60 >= 0"


def test_a_plain_function_that_returns_a_coroutine_is_refused_with_what_to_write() -> None:
    target = lambda: _overdraw(80)  # noqa: E731 - the mistake under test
    with pytest.raises(InvalidTargetError) as caught:
        interlace.explore(target, max_schedules=20, seed=1)
    assert str(caught.value) == (
        f"the target {target.__qualname__} is not an async def function, but it returned a "
        "coroutine "
        "(_overdraw): interlace ran it as a plain function (its threads under control), so "
        "the coroutine never ran. Pass an async def function instead (e.g. 'async def "
        "scenario(): await ...'), so that every schedule runs it on interlace's controlled "
        "event loop"
    )


MARKED_TESTS = """
import asyncio

import pytest


async def buggy():
    closed = {"value": False}

    async def send():
        if closed["value"]:
            return
        await asyncio.sleep(0)
        assert not closed["value"], "sent on a closed session"

    async def close():
        await asyncio.sleep(0)
        closed["value"] = True

    await asyncio.gather(send(), close())


@pytest.mark.interlace(max_schedules=200, seed=1)
def test_runs_its_own_loop():
    asyncio.run(buggy())


@pytest.mark.interlace(max_seconds=0, seed=1)
async def test_fails_on_every_schedule():
    assert False, "fails on every schedule"


@pytest.mark.interlace(max_schedules=5, seed=1)
def test_returns_a_coroutine():
    return buggy()
"""


def test_a_marked_test_never_passes_on_schedules_it_did_not_explore(
    pytester: pytest.Pytester,
) -> None:
    from interlace.harness import pytest_plugin

    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_marked=MARKED_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(failed=3)
    prefix = pytest_plugin.MSG_HARNESS_ERROR.format(
        nodeid="test_marked.py::test_runs_its_own_loop", error=""
    )
    result.stdout.fnmatch_lines(
        [
            f"{prefix}the plain function test_runs_its_own_loop runs an event loop itself*",
            "E       AssertionError: fails on every schedule",
            "*test_returns_a_coroutine is not an async def function, but it returned a coroutine*",
        ]
    )
    assert "exhausted" not in result.stdout.str()


_NOT_INSTRUMENTABLE = [
    "threading",
    "_thread",
    "_weakrefset",
    "contextlib",
    "interlace",
    "interlace.harness._threads",
    threading.__file__,
]


@pytest.mark.parametrize("name", _NOT_INSTRUMENTABLE)
def test_a_module_that_cannot_be_instrumented_is_refused_with_the_reason(name: str) -> None:
    ran: list[int] = []

    def target() -> None:
        ran.append(1)

    reason = uninstrumentable(name)
    assert reason is not None
    with pytest.raises(ConfigError) as explored:
        interlace.explore(target, seed=1, instrument=["mypackage", name])
    assert str(explored.value) == (
        f"instrument={['mypackage', name]!r} (explore() argument) names {name!r}, which cannot "
        f"be instrumented: {reason}"
    )
    with pytest.raises(ConfigError) as replayed:
        interlace.replay(target, "il2.unused", instrument=(name,))
    assert str(replayed.value).startswith(f"instrument={(name,)!r} (replay() argument) names ")
    assert not ran


@pytest.mark.parametrize("value", [0, -1, 0.0, "x", True, None, float("inf"), float("nan")])
def test_a_stall_timeout_that_is_not_a_positive_number_of_seconds_is_refused(value: Any) -> None:
    ran: list[int] = []

    def target() -> None:
        ran.append(1)

    with pytest.raises(ConfigError) as explored:
        interlace.explore(target, seed=1, stall_timeout=value)
    assert str(explored.value) == (
        f"stall_timeout={value!r} (explore() argument) is invalid: expected a number of "
        "seconds > 0, e.g. stall_timeout=60"
    )
    with pytest.raises(ConfigError) as replayed:
        interlace.replay(target, "il2.unused", stall_timeout=value)
    assert str(replayed.value) == (
        f"stall_timeout={value!r} (replay() argument) is invalid: expected a number of "
        "seconds > 0, e.g. stall_timeout=60"
    )
    assert not ran


def _queue_round_trip() -> None:
    items: queue.Queue[int] = queue.Queue(maxsize=1)
    got: list[int] = []

    def consume() -> None:
        for _ in range(3):
            got.append(items.get(timeout=5.0))

    thread = threading.Thread(target=consume)
    thread.start()
    for item in range(3):
        items.put(item)
    thread.join()
    assert got == [0, 1, 2]


@pytest.mark.parametrize(
    "name", ["queue", "selectors", "concurrent.futures", "logging", "interlace.fixtures"]
)
def test_the_other_modules_interlace_patches_can_be_instrumented(name: str) -> None:
    assert uninstrumentable(name) is None
    exploration = interlace.explore(_queue_round_trip, seed=1, max_schedules=20, instrument=[name])
    assert exploration.failure is None


def _left_behind_by_earlier_schedules(asynchronous: bool) -> Callable[[], Any]:
    """A target that passes on its first run and fails on every later one: it keeps what it
    did in a list outside itself, as a module global would."""
    runs: list[int] = []

    def plain() -> None:
        runs.append(1)
        assert len(runs) == 1, "ran before"

    async def coroutine() -> None:
        runs.append(1)
        await asyncio.sleep(0)
        assert len(runs) == 1, "ran before"

    return coroutine if asynchronous else plain


@pytest.mark.parametrize("asynchronous", [True, False], ids=["async", "plain"])
def test_a_stock_order_failure_after_stock_order_passed_blames_earlier_schedules(
    asynchronous: bool,
) -> None:
    target = _left_behind_by_earlier_schedules(asynchronous)
    failure = interlace.explore(target, max_schedules=20, seed=1).failure
    assert failure is not None
    assert (failure.label, failure.deviations) == ("fails under stock order", 0)
    note = api.MSG_EARLIER_STATE.format(
        where=api.MSG_EARLIER_STATE_GLOBALS, subject=api.MSG_IN_FUNCTION
    )
    assert failure.report.endswith("\n\n" + note)
    assert failure.exception is not None
    assert failure.exception.__notes__[-1] == note


def test_an_asyncio_object_bound_by_an_earlier_schedule_says_to_create_it_inside() -> None:
    lock = asyncio.Lock()  # outside the target: the first schedule binds it to its loop

    async def target() -> None:
        async def critical() -> None:
            async with lock:
                await asyncio.sleep(0)

        await asyncio.gather(critical(), critical())

    failure = interlace.explore(target, max_schedules=20, seed=1).failure
    assert failure is not None
    assert "is bound to a different event loop" in str(failure.exception)
    note = api.MSG_OTHER_LOOP.format(made=api.MSG_OTHER_LOOP_BEFORE, subject=api.MSG_IN_FUNCTION)
    assert failure.report.endswith("\n\n" + note)
    assert failure.exception is not None
    assert failure.exception.__notes__[-1] == note
    assert failure.report.count("interlace: ") == 1


@pytest.mark.parametrize("target", [_always_fails, _always_fails_in_a_thread])
def test_a_failure_on_the_first_schedule_gets_no_note(target: Callable[[], Any]) -> None:
    failure = interlace.explore(target, max_schedules=20, seed=1).failure
    assert failure is not None
    assert "\ninterlace: " not in failure.report
    assert failure.exception is not None
    assert len(failure.exception.__notes__) == 1  # the schedule and how to replay it


def test_executor_jobs_on_threads_started_before_the_exploration_make_it_opaque() -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(int).result()  # its worker now runs outside interlace's control

        async def on_the_pool() -> None:
            await asyncio.get_running_loop().run_in_executor(pool, int)

        exploration = interlace.explore(on_the_pool, max_schedules=5, seed=1)
    assert exploration.failure is None
    assert (exploration.opaque, exploration.exhausted) == (True, False)
    assert api.explain_opaque(exploration) == api.MSG_OPAQUE.format(
        when="the exploration", subject=api.MSG_IN_FUNCTION
    )


def test_executor_jobs_on_controlled_threads_are_not_opaque() -> None:
    async def in_a_thread() -> None:
        await asyncio.to_thread(int)

    exploration = interlace.explore(in_a_thread, max_schedules=5, seed=1)
    assert exploration.failure is None
    assert exploration.opaque is False
    assert api.explain_opaque(exploration) == ""


async def _through_the_standard_library() -> None:
    state = {"n": 0}

    async def bump() -> None:
        n = state["n"]
        await asyncio.sleep(0)
        state["n"] = n + 1

    # Twelve steps of asyncio's own code (the sleeps' tasks and gather's callbacks), then
    # the program's lost update.
    await asyncio.gather(*(asyncio.sleep(0) for _ in range(6)))
    await asyncio.gather(bump(), bump())
    assert state["n"] == 2, state


def test_a_report_folds_the_steps_that_run_only_library_code() -> None:
    exploration = interlace.explore(_through_the_standard_library, max_schedules=200, seed=4)
    failure = exploration.failure
    assert failure is not None
    assert "steps that start and stop in library code (asyncio) ..." in failure.report
    # What the program's tasks did and where it failed stay.
    shown = failure.report.split("\n\n")[0]
    assert "bump" in shown
    assert "raised AssertionError" in shown
    # The schedule itself keeps every step.
    assert len(failure.schedule) > len(shown.splitlines())
    assert any(record.library == ("asyncio",) for record in failure.schedule)
    assert all(record.library is None for record in failure.schedule if "bump" in record.action)


async def _jittered_lost_update() -> None:
    # The race shows only when the first worker's jittered backoff is the shorter one.
    counter = {"n": 0}

    async def worker() -> None:
        await asyncio.sleep(random.uniform(0, 0.02))  # a retry's jitter
        seen = counter["n"]
        await asyncio.sleep(0.001)
        counter["n"] = seen + 1

    await asyncio.gather(worker(), worker())
    assert counter["n"] == 2


def _jittered_threads() -> None:
    picks: list[float] = []
    threads = [threading.Thread(target=lambda: picks.append(random.random())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(picks) < 0.5, picks


@pytest.mark.parametrize("target", [_jittered_lost_update, _jittered_threads])
def test_a_program_that_draws_from_random_replays_exactly(target: Callable[[], Any]) -> None:
    tokens = set()
    for _ in range(3):
        random.seed()  # whatever state the caller left: each run starts from the same one
        failure = interlace.explore(target, max_schedules=50, seed=3).failure
        assert failure is not None
        tokens.add(failure.token)
        for _ in range(5):
            random.seed()
            again = interlace.replay(target, failure.token)
            assert again is not None
            assert str(again.exception) == str(failure.exception)
    assert len(tokens) == 1


def test_an_exploration_puts_back_the_callers_random_state() -> None:
    random.seed(1234)
    expected = random.random()
    random.seed(1234)
    interlace.explore(_jittered_lost_update, max_schedules=5, seed=3)
    assert random.random() == expected
