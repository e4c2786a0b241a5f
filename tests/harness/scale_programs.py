"""Programs the scale-out tests explore: defined at module level, so that worker processes
import them by name."""

from __future__ import annotations

import asyncio
import threading


class _Account:
    def __init__(self) -> None:
        self.balance = 0


async def lost_update() -> None:
    """Two tasks add to a balance with an await between read and write: one update can be
    lost (a known race, found within one deviation)."""
    account = _Account()

    async def deposit() -> None:
        seen = account.balance
        await asyncio.sleep(0)
        account.balance = seen + 1

    await asyncio.gather(deposit(), deposit(), deposit())
    assert account.balance == 3, account.balance


async def locked_update() -> None:
    """The same deposits under a lock: correct, and its bounded space is small."""
    account = _Account()
    lock = asyncio.Lock()

    async def deposit() -> None:
        async with lock:
            seen = account.balance
            await asyncio.sleep(0)
            account.balance = seen + 1

    await asyncio.gather(deposit(), deposit(), deposit())
    assert account.balance == 3, account.balance


async def many_steps() -> None:
    """Correct, with enough tasks and steps that a random walk never runs out of new
    schedules: for budgets of thousands of schedules."""
    counter = _Account()
    lock = asyncio.Lock()

    async def worker() -> None:
        for _ in range(4):
            async with lock:
                counter.balance += 1
            await asyncio.sleep(0)

    await asyncio.gather(*(worker() for _ in range(4)))
    assert counter.balance == 16


async def rare_race() -> None:
    """Fails only when the last of eight tasks runs its write before the first's check:
    a random walk needs some hundreds of schedules to find it."""
    state = {"owner": ""}

    async def claim(name: str, rounds: int) -> None:
        for _ in range(rounds):
            await asyncio.sleep(0)
        if not state["owner"]:
            await asyncio.sleep(0)
            assert not state["owner"], f"{name} and {state['owner']} both claimed"
            state["owner"] = name

    await asyncio.gather(*(claim(f"t{i}", i) for i in range(8)))


def threads_lost_update() -> None:
    """A thread version of ``lost_update``."""
    account = _Account()

    def deposit() -> None:
        seen = account.balance
        account.balance = seen + 1

    threads = [threading.Thread(target=deposit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert account.balance == 2, account.balance


async def busy_pipeline() -> None:
    """Correct, and slow enough per schedule (a few milliseconds) that workers pay off:
    the benchmark's long exploration."""
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=2)
    total = _Account()

    async def producer(base: int) -> None:
        for item in range(12):
            await queue.put(base + item)

    async def consumer() -> None:
        for _ in range(24):
            item = await queue.get()
            total.balance += item
            queue.task_done()

    await asyncio.gather(producer(0), producer(100), consumer())
    assert total.balance == sum(range(12)) + sum(range(100, 112))


async def reversed_order() -> None:
    """Fails only when three tasks finish in reverse order, which takes two deviations from
    stock order: deep in a bounded search's space, and past its first level."""
    done: list[int] = []

    async def task(number: int) -> None:
        await asyncio.sleep(0)
        done.append(number)
        await asyncio.sleep(0)

    await asyncio.gather(task(0), task(1), task(2))
    assert done != [2, 1, 0], done


async def ordered_finish() -> None:
    """The same three tasks, checked for something that holds on every schedule: correct,
    with a bounded space a search exhausts in a few dozen schedules."""
    done: list[int] = []

    async def task(number: int) -> None:
        await asyncio.sleep(0)
        done.append(number)
        await asyncio.sleep(0)

    await asyncio.gather(task(0), task(1), task(2))
    assert sorted(done) == [0, 1, 2], done


async def reversed_five() -> None:
    """Fails only when five tasks, each yielding a few times, finish in reverse order: a
    random walk needs hundreds of schedules (the benchmark's time to first failure)."""
    done: list[int] = []

    async def task(number: int) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        done.append(number)

    await asyncio.gather(*(task(n) for n in range(5)))
    assert done != [4, 3, 2, 1, 0], done
