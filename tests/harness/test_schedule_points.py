"""What a schedule point offers: causes, fairness, cancelled entries, and the actors chosen from."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import pytest

from interlace._core.schedule import Settings
from interlace._core.strategy import Chooser, PCTStrategy, RandomWalkStrategy
from interlace.harness import _loop
from interlace.harness._asyncio_backend import AsyncioBackend

Target = Callable[[], Coroutine[Any, Any, None]]


class Recording(Chooser):
    """Consulted at every step; records what each schedule point offered; picks by ``pick``."""

    def __init__(self, pick: Callable[[int], int], *, reads_actors: bool = False) -> None:
        self.consult_at = 0
        self.pick = pick
        self.reads_actors = reads_actors
        self.offers: list[tuple[int, tuple[int, ...], bool]] = []

    def choose(self, step: int, actors: Sequence[int], can_advance: bool) -> int:
        self.consult_at = step + 1
        self.offers.append((step, tuple(actors[i] for i in range(len(actors))), can_advance))
        return self.pick(len(actors))


def run(target: Target, chooser: Chooser) -> None:
    result = AsyncioBackend(target, Settings()).run(chooser)
    assert result.kind is None, result.exception


async def yielders() -> None:
    async def worker() -> None:
        for _ in range(30):
            await asyncio.sleep(0)

    await asyncio.gather(*(worker() for _ in range(5)))


def test_an_entry_that_keeps_being_postponed_runs_after_at_most_fairness_postponements() -> None:
    fairness = Settings().fairness
    chooser = Recording(lambda options: options - 1)
    run(yielders, chooser)
    # Always taking the last option postpones the head entry at every step until it may be
    # postponed no more; it is the same entry while it stays at the head at consecutive steps.
    longest = streak = 0
    previous: tuple[int, int] | None = None
    for step, actors, _ in chooser.offers:
        head = (step - 1, actors[0])
        streak = streak + 1 if previous == head and len(actors) > 1 else 1
        if len(actors) > 1:
            longest = max(longest, streak)
        previous = (step, actors[0])
    assert longest == fairness


async def a_cancelled_callback_among_the_options() -> None:
    loop = asyncio.get_running_loop()
    ran: list[str] = []

    async def worker() -> None:
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    tasks = [asyncio.create_task(worker()) for _ in range(3)]
    await asyncio.sleep(0)  # the workers have started and yielded: three postponable entries
    doomed = loop.call_soon(ran.append, "doomed")
    kept = loop.create_future()
    loop.call_soon(kept.set_result, None)
    doomed.cancel()
    await asyncio.gather(*tasks)
    await kept
    assert ran == []


def test_a_cancelled_entry_is_never_an_option_and_the_window_skips_it() -> None:
    lazily = Recording(lambda options: options - 1)
    run(a_cancelled_callback_among_the_options, lazily)
    eagerly = Recording(lambda options: options - 1, reads_actors=True)
    run(a_cancelled_callback_among_the_options, eagerly)
    assert lazily.offers == eagerly.offers
    # No schedule point offers two plain callbacks (actor 0): the cancelled one is skipped.
    assert all(actors.count(0) <= 1 for _, actors, _ in lazily.offers)


@pytest.mark.parametrize("pick", [lambda n: 0, lambda n: n - 1, lambda n: n // 2])
def test_actors_read_one_by_one_equal_the_list_given_to_choosers_that_read_them_all(
    pick: Callable[[int], int],
) -> None:
    lazily = Recording(pick)
    eagerly = Recording(pick, reads_actors=True)
    run(yielders, lazily)
    run(yielders, eagerly)
    assert lazily.offers == eagerly.offers
    assert len(lazily.offers) > 50


async def many_yielders() -> None:
    async def worker() -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    await asyncio.gather(*(worker() for _ in range(20)))


def test_a_window_never_offers_more_than_window_entries() -> None:
    chooser = Recording(lambda options: options // 2)
    run(many_yielders, chooser)
    assert max(len(actors) for _, actors, _ in chooser.offers) == Settings().window


@pytest.mark.parametrize("strategy", [RandomWalkStrategy, PCTStrategy])
def test_one_seed_gives_the_same_schedule_every_run(strategy: type[RandomWalkStrategy]) -> None:
    backend = AsyncioBackend(yielders, Settings())
    runs = {backend.run(strategy(5).next_chooser()).decisions for _ in range(5)}
    assert len(runs) == 1
    assert len(next(iter(runs))) > 10


async def sleepers() -> None:
    lock = asyncio.Lock()

    async def worker(index: int) -> None:
        for i in range(6):
            await asyncio.sleep(0 if i % 2 else 0.001 * (index % 3))
            async with lock:
                await asyncio.sleep(0)

    await asyncio.gather(*(worker(index) for index in range(12)))


async def cancelled_among_sleepers() -> None:
    loop = asyncio.get_running_loop()
    ran: list[int] = []

    async def worker(index: int) -> None:
        for i in range(8):
            await asyncio.sleep(0)
            doomed = loop.call_soon(ran.append, index)
            if i % 2:
                doomed.cancel()  # a cancelled entry among the options, skipped by the scan
            await asyncio.sleep(0.001 if i == 3 else 0)

    await asyncio.gather(*(worker(index) for index in range(6)))


@pytest.mark.parametrize("program", [sleepers, cancelled_among_sleepers])
@pytest.mark.parametrize("strategy", [RandomWalkStrategy, PCTStrategy])
def test_a_choice_the_loop_takes_itself_is_the_one_the_chooser_would_make(
    strategy: type[RandomWalkStrategy], program: Target
) -> None:
    # The loop draws the random walk's option and takes PCT's top-ranked one without calling
    # choose(); a chooser that hides how (no ``uniform``, no ``rank``) is asked every time.
    backend = AsyncioBackend(program, Settings())
    taken, asked = strategy(3), strategy(3)
    for _ in range(20):
        hidden = asked.next_chooser()
        hidden.uniform = hidden.rank = None
        by_loop = backend.run(taken.next_chooser()).decisions
        assert len(by_loop) > 5
        assert by_loop == backend.run(hidden).decisions


async def a_callback_that_raises() -> None:
    loop = asyncio.get_running_loop()
    ran: list[str] = []

    def boom() -> None:
        raise ValueError("from a callback")

    loop.call_soon(boom)
    loop.call_soon(ran.append, "after")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert ran == ["after"]


def test_a_callback_that_raises_goes_to_the_exception_handler_and_the_run_goes_on() -> None:
    seen: list[dict[str, Any]] = []
    original = _loop.ControlledEventLoop._collect_exception

    def collect(self: Any, loop: Any, context: dict[str, Any]) -> None:
        seen.append(context)
        original(self, loop, context)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_loop.ControlledEventLoop, "_collect_exception", collect)
        result = AsyncioBackend(a_callback_that_raises, Settings()).run(Chooser())
    # The main task ran to its end (its own assertion held), then the callback's exception,
    # which nothing retrieved, failed the run (tests/harness/test_lost_exceptions.py).
    assert result.kind == "exception"
    assert isinstance(result.exception, ValueError)
    assert len(seen) == 1
    assert isinstance(seen[0]["exception"], ValueError)
    assert seen[0]["message"].startswith("Exception in callback ")
    assert "boom" in seen[0]["message"]
