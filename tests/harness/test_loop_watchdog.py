"""A run whose event loop is stuck in one step (a blocking call in a task) ends the exploration.

A stock loop stuck so hangs for good; an exploration says where and what to do instead, as
``UnsupportedOperationError`` (the code cannot be explored as written, it is no failing
schedule). The tests pass a ``stall_timeout`` far below its default of 20 s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import interlace
from interlace._core.schedule import Settings, encode_token
from interlace.errors import UnsupportedOperationError
from interlace.harness import _runtime

pytestmark = pytest.mark.skipif(
    not hasattr(__import__("signal"), "pthread_kill"), reason="interrupts the main thread"
)


async def blocking_recv() -> None:
    a, b = socket.socketpair()
    try:
        await asyncio.sleep(0)
        b.recv(1)  # nothing will ever write: the loop is blocked for real
    finally:
        a.close()
        b.close()


async def busy_without_awaiting() -> None:
    await asyncio.sleep(0)
    count = 0
    while count >= 0:  # never returns to the loop
        count += 1


async def swallows_the_interrupt() -> None:
    a, b = socket.socketpair()
    try:
        for _ in range(3):
            try:
                b.recv(1)
            except Exception:  # what careless code does
                continue
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("target", "line"),
    [
        (blocking_recv, "b.recv(1)  # nothing will ever write"),
        (busy_without_awaiting, "count"),  # either line of the loop
        (swallows_the_interrupt, "b.recv(1)"),
    ],
)
def test_a_task_stuck_in_one_step_ends_the_exploration_saying_where(
    target: object, line: str
) -> None:
    started = time.monotonic()
    with pytest.raises(UnsupportedOperationError) as raised:
        interlace.explore(target, seed=1, max_schedules=5, stall_timeout=1)  # type: ignore[arg-type]
    assert time.monotonic() - started < 30
    message = str(raised.value)
    where = re.match(
        r"task 'main' ran for [\d.]+ s at (\S*test_loop_watchdog\.py):(\d+) without returning to "
        r"the event loop: ",
        message,
    )
    assert where is not None, message
    with open(__file__, encoding="utf-8") as source:
        assert line in source.read().splitlines()[int(where.group(2)) - 1]
    assert "'await asyncio.to_thread(...)'" in message


def test_the_watching_thread_ends_with_the_exploration() -> None:
    before = set(sys._current_frames())

    async def quick() -> None:
        await asyncio.sleep(0)

    assert interlace.explore(quick, seed=1, max_schedules=3).failure is None
    assert set(sys._current_frames()) == before


def test_no_watching_thread_runs_beside_the_threads_of_a_run() -> None:
    # The thread scheduler watches its threads itself; a thread it does not control would
    # make every schedule point of theirs slower.
    before = len(sys._current_frames())
    seen: list[int] = []

    async def with_a_thread() -> None:
        thread = threading.Thread(target=lambda: seen.append(len(sys._current_frames())))
        thread.start()
        await asyncio.to_thread(thread.join)

    assert interlace.explore(with_a_thread, seed=1, max_schedules=3).failure is None
    assert seen
    assert set(seen) <= {before + 1, before + 2}  # the thread, and to_thread's worker


# -- a long step of correct code: the stall timeout is the user's to set ------------------------

_real_perf_counter = time.perf_counter
"""Taken at import: during an exploration ``time.perf_counter`` reads the virtual clock."""


async def computes_for_a_second_and_a_half() -> None:
    await asyncio.sleep(0)
    end = _real_perf_counter() + 1.5
    while _real_perf_counter() < end:  # one step of real work, which ends on its own
        pass


def _explore(stall_timeout: float) -> object:
    exploration = interlace.explore(
        computes_for_a_second_and_a_half, seed=1, max_schedules=1, stall_timeout=stall_timeout
    )
    return exploration.failure


def _replay(stall_timeout: float) -> object:
    token = encode_token(Settings(backend="asyncio"), ())  # stock order
    return interlace.replay(computes_for_a_second_and_a_half, token, stall_timeout=stall_timeout)


@pytest.mark.parametrize("run", [_explore, _replay])
def test_a_step_longer_than_the_stall_timeout_ends_the_run_naming_the_timeout(
    run: Callable[[float], object],
) -> None:
    started = time.monotonic()
    with pytest.raises(UnsupportedOperationError) as raised:
        run(0.5)
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert message.startswith("task 'main' ran for 0.")
    assert message.endswith(_runtime.MSG_STALL_TIMEOUT.format(timeout=0.5, more=2))


@pytest.mark.parametrize("run", [_explore, _replay])
def test_a_step_within_the_stall_timeout_runs_to_its_end(run: Callable[[float], object]) -> None:
    assert run(5) is None


# An executor job interlace cannot control (its pool's worker started before the
# exploration) runs as one opaque step; it may take the stall timeout, at least the loop's
# own limit (`_loop.JOB_SECONDS`, 30 s, lowered here).
_real_clock = time.perf_counter  # taken at import: during an exploration it reads virtual time


def _work_for_a_second() -> str:
    end = _real_clock() + 1.0
    while _real_clock() < end:
        pass
    return "done"


@pytest.fixture
def outside_job(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], Any]]:
    """A target that awaits a 1 s job of a pool whose worker runs before the exploration.
    The pool is shut down after the test: a thread left running outside every exploration
    would slow each later threads exploration down (it waits for outside threads)."""
    from interlace.harness import _loop

    monkeypatch.setattr(_loop, "JOB_SECONDS", 0.3)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    pool.submit(int).result()  # its worker now runs, outside any exploration

    async def awaits_a_long_outside_job() -> None:
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(pool, _work_for_a_second) == "done"

    try:
        yield awaits_a_long_outside_job
    finally:
        pool.shutdown(wait=True)


@pytest.mark.timeout(60)
def test_an_outside_job_longer_than_its_limit_ends_the_run_naming_the_limit(
    outside_job: Callable[[], Any],
) -> None:
    with pytest.raises(UnsupportedOperationError) as caught:
        interlace.explore(outside_job, max_schedules=1, stall_timeout=0.5)
    message = str(caught.value)
    assert "did not finish in 0.5 s: its executor is one interlace cannot control" in message
    assert message.endswith(
        "such a job may take the stall timeout, or 30 s if that is longer; "
        + _runtime.MSG_STALL_WHERE.format(more=2)
    )


@pytest.mark.timeout(60)
def test_an_outside_job_within_the_stall_timeout_runs_to_its_end(
    outside_job: Callable[[], Any],
) -> None:
    exploration = interlace.explore(outside_job, max_schedules=1, stall_timeout=3)
    assert exploration.failure is None


async def busy_then_swallows() -> None:
    await asyncio.sleep(0)
    for _ in range(2):
        try:
            count = 0
            while count >= 0:
                count += 1
        except BaseException:  # what careless code does
            continue


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target", [busy_without_awaiting, busy_then_swallows])
def test_an_exploration_in_another_thread_ends_a_step_that_computes_forever(
    target: Callable[[], Any],
) -> None:
    # No signal reaches a thread other than the main one: before, such an exploration hung.
    outcome: list[BaseException | None] = []

    def explore() -> None:
        try:
            interlace.explore(target, max_schedules=2, seed=1, stall_timeout=0.5)
        except BaseException as exc:  # what the test checks
            outcome.append(exc)
        else:
            outcome.append(None)

    explorer = threading.Thread(target=explore, daemon=True)
    explorer.start()
    explorer.join(30)
    assert outcome, "the exploration did not end"
    assert isinstance(outcome[0], UnsupportedOperationError), outcome
    assert "without returning to the event loop" in str(outcome[0])
