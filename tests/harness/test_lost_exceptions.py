"""An exception nothing retrieved (a forgotten task's, a callback's) fails the schedule.

A stock event loop logs these ("Task exception was never retrieved", "Exception in callback")
and goes on; the exception has escaped the program all the same, as one that escapes a thread
does. interlace reports it as an ``exception`` failure, the same in every run of a schedule.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable

import pytest

import interlace

Scenario = Callable[[], Awaitable[None]]


async def _forgotten_task_raises() -> None:
    async def index_document() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("embedding service down")

    asyncio.create_task(index_document())  # noqa: RUF006 - the forgotten task under test
    await asyncio.sleep(1)


async def _callback_raises() -> None:
    asyncio.get_running_loop().call_soon(lambda: 1 / 0)
    await asyncio.sleep(0.1)


class _Worker:
    """Keeps its own task: the task's exception keeps the worker, so they form a cycle."""

    def __init__(self) -> None:
        self.task = asyncio.create_task(self.run())

    async def run(self) -> None:
        await asyncio.sleep(0)
        raise KeyError("job-7")


async def _task_in_a_reference_cycle_raises() -> None:
    _Worker()
    await asyncio.sleep(1)
    gc.collect()  # frees the cycle mid-run: the report must not depend on when that happens


async def _raises_when_cancelled() -> None:
    async def stubborn() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            raise ValueError("cleanup failed")

    asyncio.create_task(stubborn())  # noqa: RUF006 - cancelled at the end of the run
    await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("scenario", "exception", "detail"),
    [
        (
            _forgotten_task_raises,
            RuntimeError,
            "task 'Task-2' raised RuntimeError: embedding service down and nothing retrieved "
            "its exception",
        ),
        (
            _callback_raises,
            ZeroDivisionError,
            "the callback _callback_raises.<locals>.<lambda> raised ZeroDivisionError: "
            "division by zero in the event loop",
        ),
        (
            _task_in_a_reference_cycle_raises,
            KeyError,
            "task 'Task-2' raised KeyError: 'job-7' and nothing retrieved its exception",
        ),
        (
            _raises_when_cancelled,
            ValueError,
            "task 'Task-2' raised ValueError: cleanup failed when it was cancelled at the end "
            "of the run",
        ),
    ],
    ids=["forgotten-task", "callback", "reference-cycle", "at-shutdown"],
)
def test_an_exception_nothing_retrieved_is_a_failure_under_stock_order(
    scenario: Scenario, exception: type[BaseException], detail: str
) -> None:
    failure = interlace.explore(scenario, max_schedules=5, seed=1).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert type(failure.exception) is exception
    assert failure.label == "fails under stock order"
    assert failure.detail.startswith(detail)
    assert failure.exception.__notes__[0] == "interlace: " + failure.detail
    replayed = interlace.replay(scenario, failure.token)
    assert replayed is not None
    assert type(replayed.exception) is exception
    assert replayed.steps == failure.steps


async def _retrieved_in_every_way() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("handled")

    awaited = asyncio.create_task(fails())
    checked = asyncio.create_task(fails())
    checked.add_done_callback(lambda task: task.exception())
    gathered = asyncio.gather(fails(), fails(), return_exceptions=True)
    await asyncio.sleep(1)
    with pytest.raises(RuntimeError):
        await awaited
    assert len(await gathered) == 2


def test_exceptions_the_program_retrieves_are_no_failure() -> None:
    exploration = interlace.explore(_retrieved_in_every_way, max_schedules=50, seed=1)
    assert exploration.failure is None, exploration.failure and exploration.failure.report


async def _crashes_only_if_closed_first() -> None:
    session = {"open": True}

    async def send() -> None:
        if not session["open"]:
            return
        await asyncio.sleep(0)  # the write
        if not session["open"]:
            raise ConnectionError("sent on a closed session")

    async def close() -> None:
        await asyncio.sleep(0)
        session["open"] = False

    asyncio.create_task(send())  # noqa: RUF006 - the forgotten task under test
    await asyncio.create_task(close())
    await asyncio.sleep(1)


def test_a_forgotten_task_that_fails_under_one_order_is_found_shrunk_and_replayed() -> None:
    first = interlace.explore(_crashes_only_if_closed_first, max_schedules=200, seed=3)
    again = interlace.explore(_crashes_only_if_closed_first, max_schedules=200, seed=3)
    failure = first.failure
    assert failure is not None
    assert again.failure is not None
    assert again.failure.token == failure.token
    assert type(failure.exception) is ConnectionError
    assert failure.label == "needs await latency"
    assert failure.deviations == 1
    replayed = interlace.replay(_crashes_only_if_closed_first, failure.token)
    assert replayed is not None
    assert type(replayed.exception) is ConnectionError


async def _worker_dies_and_the_consumer_waits() -> None:
    results: asyncio.Queue[int] = asyncio.Queue()

    async def worker() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("model call failed")

    asyncio.create_task(worker())  # noqa: RUF006 - the forgotten task under test
    await results.get()


def test_a_deadlock_report_names_the_task_that_died_unnoticed() -> None:
    exploration = interlace.explore(_worker_dies_and_the_consumer_waits, max_schedules=5, seed=1)
    failure = exploration.failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert (
        "\nEnded with an exception nothing retrieved:\n  task 'Task-2' raised RuntimeError: "
        "model call failed and nothing retrieved its exception"
    ) in failure.detail
