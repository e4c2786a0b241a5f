"""``explore`` never passes without having run the target: budgets and what a target may be."""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any

import pytest

import interlace
from interlace.errors import ConfigError, InvalidTargetError
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
        interlace.replay(target, "il1.unused", instrument=(name,))
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
        interlace.replay(target, "il1.unused", stall_timeout=value)
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
