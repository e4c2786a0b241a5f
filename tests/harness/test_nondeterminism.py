"""The sources of nondeterminism a stock interpreter has that the harness explores as
decisions: loop stalls, timer jitter as a stall inside a step, and object-address order."""

from __future__ import annotations

import asyncio

import pytest

import interlace
from interlace._core.result import LABEL_ADDRESS, LABEL_STALL, LABEL_STOCK
from interlace._core.schedule import ADDRESS, STALL, TIMER, decode_token
from interlace.errors import ConfigError

SEED = 7


async def timeout_around_a_shorter_sleep() -> None:
    # On an idle loop the sleep ends 30 ms before the timeout; a stall of 30 ms or more
    # makes both due in one iteration, and the timeout's callback runs first.
    async with asyncio.timeout(0.05):
        await asyncio.sleep(0.02)


async def timeout_with_margin() -> None:
    async with asyncio.timeout(0.2):
        await asyncio.sleep(0.02)


async def wait_for_with_a_late_second_timer() -> None:
    # The loop may stall at either wake-up: 20 ms at the first (both timers due at once) or
    # 5 ms at the second (the sleep ends at 45 ms, the deadline is 50 ms).
    async with asyncio.timeout(0.05):
        await asyncio.sleep(0.03)
        await asyncio.sleep(0.015)


def _stall_of(token: str) -> int:
    return sum(d.actor for d in decode_token(token)[1] if d.kind in (STALL, TIMER))


@pytest.mark.parametrize("target", [timeout_around_a_shorter_sleep])
def test_a_timeout_that_a_stall_makes_fire_first_is_found_with_the_stall_it_needs(
    target: object,
) -> None:
    exploration = interlace.explore(target, max_schedules=200, seed=SEED)  # type: ignore[arg-type]
    failure = exploration.failure
    assert failure is not None
    assert isinstance(failure.exception, TimeoutError)
    assert failure.label == LABEL_STALL.format(ms="30 ms")
    assert failure.deviations == 1


def test_a_stall_between_steps_is_found_and_shrunk_to_the_smallest_stall() -> None:
    failure = interlace.explore(
        wait_for_with_a_late_second_timer, max_schedules=300, seed=SEED
    ).failure
    assert failure is not None
    assert isinstance(failure.exception, TimeoutError)
    assert failure.label == LABEL_STALL.format(ms="5 ms")
    # Less a microsecond: the wake-up at 45 ms came a grain of the clock late.
    assert _stall_of(failure.token) == 4_999


def test_a_stall_failure_replays_exactly_from_its_token() -> None:
    failure = interlace.explore(
        timeout_around_a_shorter_sleep, max_schedules=200, seed=SEED
    ).failure
    assert failure is not None
    again = interlace.replay(timeout_around_a_shorter_sleep, failure.token)
    assert again is not None
    assert again.token == failure.token
    assert again.label == failure.label


@pytest.mark.parametrize("seed", range(5))
def test_the_same_seed_gives_the_same_stall_schedule(seed: int) -> None:
    tokens = {
        interlace.explore(
            wait_for_with_a_late_second_timer, max_schedules=300, seed=seed
        ).failure.token  # type: ignore[union-attr]
        for _ in range(3)
    }
    assert len(tokens) == 1


def test_a_timeout_with_more_margin_than_the_stall_bound_never_fails() -> None:
    exploration = interlace.explore(timeout_with_margin, max_schedules=300, seed=SEED)
    assert exploration.failure is None


def test_max_stall_zero_explores_no_stall() -> None:
    exploration = interlace.explore(
        timeout_around_a_shorter_sleep, max_schedules=300, seed=SEED, max_stall=0
    )
    assert exploration.failure is None


def test_a_larger_max_stall_finds_what_the_default_cannot() -> None:
    async def margin_of_80_ms() -> None:
        async with asyncio.timeout(0.1):
            await asyncio.sleep(0.02)

    assert interlace.explore(margin_of_80_ms, max_schedules=300, seed=SEED).failure is None
    failure = interlace.explore(
        margin_of_80_ms, max_schedules=300, seed=SEED, max_stall=0.1
    ).failure
    assert failure is not None
    assert failure.label == LABEL_STALL.format(ms="80 ms")


def test_jitter_is_refused_with_the_knob_that_replaced_it() -> None:
    with pytest.raises(ConfigError, match=r"write max_stall=0\.01 instead"):
        interlace.explore(timeout_with_margin, jitter=0.01)


# -- address order ----------------------------------------------------------------------------


async def pop_after_wait() -> None:
    """``done.pop()`` after ``asyncio.wait``: when both tasks finish in one iteration, which
    one it returns depends on their addresses; taking the 'finished' signal first loses the
    item (the pattern of an agent's output stream)."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    finished = asyncio.Event()

    async def produce() -> None:
        await queue.put("token")
        finished.set()

    producer = asyncio.get_running_loop().create_task(produce())
    got: list[str] = []
    while True:
        get = asyncio.ensure_future(queue.get())
        end = asyncio.ensure_future(finished.wait())
        done, pending = await asyncio.wait([get, end], return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        first = done.pop()
        if first is end:
            break
        got.append(str(first.result()))
    await producer
    assert got == ["token"], got


async def drain_every_done_task() -> None:
    """The fix: read every finished task, whatever order the set gives them in."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    finished = asyncio.Event()

    async def produce() -> None:
        await queue.put("token")
        finished.set()

    producer = asyncio.get_running_loop().create_task(produce())
    got: list[str] = []
    stop = False
    while not stop:
        get = asyncio.ensure_future(queue.get())
        end = asyncio.ensure_future(finished.wait())
        done, pending = await asyncio.wait([get, end], return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if get in done:
            got.append(get.result())
        stop = end in done and queue.empty()
    await producer
    assert got == ["token"], got


async def fails_whatever_the_order() -> None:
    a = asyncio.ensure_future(asyncio.sleep(0))
    b = asyncio.ensure_future(asyncio.sleep(0))
    done, _ = await asyncio.wait({a, b})
    assert len(done) == 3


def test_a_failure_that_depends_on_address_order_is_labelled_as_some_stock_runs() -> None:
    exploration = interlace.explore(pop_after_wait, max_schedules=100, seed=SEED)
    failure = exploration.failure
    assert failure is not None
    assert isinstance(failure.exception, AssertionError)
    assert failure.label == LABEL_ADDRESS
    decisions = decode_token(failure.token)[1]
    assert [d.kind for d in decisions] == [ADDRESS]
    assert "(before step 1: tasks and futures hashed in " in failure.report
    again = interlace.replay(pop_after_wait, failure.token)
    assert again is not None
    assert again.token == failure.token


def test_the_exhaustive_search_finds_an_address_order_failure_in_its_first_level() -> None:
    exploration = interlace.explore(pop_after_wait, strategy="exhaustive", max_schedules=50)
    assert exploration.failure is not None
    assert exploration.failure.label == LABEL_ADDRESS


def test_draining_every_done_task_passes_under_every_address_order() -> None:
    exploration = interlace.explore(drain_every_done_task, max_schedules=300, seed=SEED)
    assert exploration.failure is None


def test_fails_under_stock_order_means_every_address_order_fails() -> None:
    failure = interlace.explore(fails_whatever_the_order, max_schedules=20, seed=SEED).failure
    assert failure is not None
    assert failure.label == LABEL_STOCK
    assert decode_token(failure.token)[1] == ()


def test_a_creation_order_failure_that_another_address_order_passes_is_not_stock() -> None:
    async def pops_the_first_created() -> None:
        first = asyncio.ensure_future(asyncio.sleep(0))
        second = asyncio.ensure_future(asyncio.sleep(0))
        done, _ = await asyncio.wait({first, second})
        assert done.pop() is second

    failure = interlace.explore(pops_the_first_created, max_schedules=20, seed=SEED).failure
    assert failure is not None
    assert failure.label == LABEL_ADDRESS


def test_exhausted_names_the_space_it_covered() -> None:
    async def two_tasks_in_a_set() -> None:
        tasks = {asyncio.ensure_future(asyncio.sleep(0)) for _ in range(2)}
        await asyncio.wait(tasks)

    exploration = interlace.explore(two_tasks_in_a_set, strategy="exhaustive", max_schedules=500)
    assert exploration.exhausted
    assert exploration.space.startswith("every schedule with at most 2 deviations")
    assert "loop stalls of up to 50 ms in a run" in exploration.space
    assert "two address orders, insertion order and about reverse creation order" in (
        exploration.space
    )


def test_a_search_with_address_orders_left_goes_on_with_the_random_walk() -> None:
    async def three_tasks_in_a_set() -> None:
        tasks = {asyncio.ensure_future(asyncio.sleep(0)) for _ in range(3)}
        await asyncio.wait(tasks)

    exploration = interlace.explore(three_tasks_in_a_set, max_schedules=60, seed=SEED)
    assert exploration.schedules == 60
