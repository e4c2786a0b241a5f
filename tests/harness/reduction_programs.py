"""Small programs whose tasks share state in every way the footprints must see.

Each ``make_*`` returns ``(buggy, fixed)``: zero-argument ``async def`` functions. The buggy
one fails under some schedule within two deviations (most under none in stock order); the
fixed one never fails. They are the differential suite of the partial-order reduction: the
reduced search must find exactly the failure the plain search finds, and every schedule it
predicts instead of running must run as predicted.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import sys
from collections.abc import Callable, Coroutine
from typing import Any

Program = Callable[[], Coroutine[Any, Any, None]]

COUNTER = 0


async def _io() -> None:
    await asyncio.sleep(0)


# Every program races two tasks on shared state; the second starts one await later, so
# stock order runs them one after the other and the bug needs a deviation. A third task does
# unrelated work, so that many schedules differ only in the order of independent steps.
# ``fixed`` closes the window (no await inside the read-modify-write).


async def _late(first: bool) -> None:
    await _io()
    if not first:
        await _io()


async def _noise() -> None:
    private = {"n": 0}
    for _ in range(4):
        private["n"] += 1
        await _io()


def make_dict_lost_update() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        counts = {"n": 0}

        async def bump(first: bool) -> None:
            await _late(first)
            value = counts["n"]
            if not fixed:
                await _io()
            counts["n"] = value + 1

        await asyncio.gather(bump(True), bump(False), _noise())
        assert counts["n"] == 2, counts

    return _pair(run)


def make_list_check_then_append() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        items: list[int] = []

        async def add(first: bool) -> None:
            await _late(first)
            if not items:
                if not fixed:
                    await _io()
                items.append(1)

        await asyncio.gather(add(True), add(False), _noise())
        assert len(items) == 1, items

    return _pair(run)


def make_attribute_balance() -> tuple[Program, Program]:
    class Account:
        def __init__(self) -> None:
            self.balance = 100

    async def run(fixed: bool) -> None:
        account = Account()

        async def withdraw(first: bool, amount: int) -> None:
            await _late(first)
            if account.balance >= amount:
                if not fixed:
                    await _io()
                account.balance -= amount

        await asyncio.gather(withdraw(True, 70), withdraw(False, 60), _noise())
        assert account.balance >= 0, account.balance

    return _pair(run)


def make_global_counter() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        global COUNTER
        COUNTER = 0

        async def bump(first: bool) -> None:
            global COUNTER
            await _late(first)
            seen = COUNTER
            if not fixed:
                await _io()
            COUNTER = seen + 1

        await asyncio.gather(bump(True), bump(False), _noise())
        assert COUNTER == 2, COUNTER

    return _pair(run)


def make_closure_counter() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        total = 0

        async def bump(first: bool) -> None:
            nonlocal total
            await _late(first)
            seen = total
            if not fixed:
                await _io()
            total = seen + 1

        await asyncio.gather(bump(True), bump(False), _noise())
        assert total == 2, total

    return _pair(run)


def make_dict_pop_twice() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        cache = {"session": object()}

        async def evict(first: bool) -> None:
            await _late(first)
            if "session" in cache:
                if not fixed:
                    await _io()
                cache.pop("session")

        await asyncio.gather(evict(True), evict(False), _noise())
        assert not cache

    return _pair(run)


def make_delete_subscript() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        sessions = {"a": 1, "b": 2}

        async def close(first: bool) -> None:
            await _late(first)
            if "a" in sessions:
                if not fixed:
                    await _io()
                del sessions["a"]

        await asyncio.gather(close(True), close(False), _noise())
        assert sessions == {"b": 2}

    return _pair(run)


def make_bound_method_append() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        log: list[str] = []
        record = log.append

        async def step(first: bool) -> None:
            await _late(first)
            record("start")
            if not fixed:
                await _io()
            record("end")

        await asyncio.gather(step(True), step(False), _noise())
        assert log == ["start", "end", "start", "end"], log

    return _pair(run)


def make_inplace_list_attribute() -> tuple[Program, Program]:
    class Buffer:
        def __init__(self) -> None:
            self.items: list[int] = []

    async def run(fixed: bool) -> None:
        buffer = Buffer()

        async def push(first: bool, value: int) -> None:
            await _late(first)
            buffer.items += [value]
            if not fixed:
                await _io()
            assert buffer.items[-1] == value, buffer.items

        await asyncio.gather(push(True, 1), push(False, 2), _noise())

    return _pair(run)


def make_nested_subscript() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        state: dict[str, dict[str, int]] = {"a": {"b": 0}}

        async def bump(first: bool) -> None:
            await _late(first)
            inner = state["a"]
            seen = inner["b"]
            if not fixed:
                await _io()
            state["a"]["b"] = seen + 1

        await asyncio.gather(bump(True), bump(False), _noise())
        assert state["a"]["b"] == 2, state

    return _pair(run)


def make_slice_assignment() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        window = [0, 0]

        async def shift(first: bool, value: int) -> None:
            await _late(first)
            old = window[1:]
            if not fixed:
                await _io()
            window[:] = [*old, value]

        await asyncio.gather(shift(True, 1), shift(False, 2), _noise())
        assert sorted(window) == [1, 2], window

    return _pair(run)


def make_heap_and_deque() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        heap: list[int] = []
        popped: collections.deque[tuple[int, int]] = collections.deque()

        async def produce(first: bool, value: int) -> None:
            await _late(first)
            heapq.heappush(heap, value)
            if not fixed:
                await _io()
            popped.append((value, heapq.heappop(heap)))

        await asyncio.gather(produce(True, 2), produce(False, 1), _noise())
        assert all(mine == got for mine, got in popped), popped

    return _pair(run)


def make_set_membership() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        claimed: set[str] = set()
        owners: list[bool] = []

        async def claim(first: bool) -> None:
            await _late(first)
            if "job" not in claimed:
                if not fixed:
                    await _io()
                claimed.add("job")
                owners.append(first)

        await asyncio.gather(claim(True), claim(False), _noise())
        assert len(owners) == 1, owners

    return _pair(run)


def make_list_comparison() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        seen: list[int] = []
        verdicts: list[bool] = []

        async def writer(first: bool) -> None:
            await _late(first)
            seen.append(1)
            if not fixed:
                await _io()
            seen.append(2)

        async def reader() -> None:
            await _io()
            await _io()
            verdicts.append(seen == [1])

        await asyncio.gather(writer(True), reader(), _noise())
        assert verdicts == [False], (seen, verdicts)

    return _pair(run)


def make_dynamic_attribute() -> tuple[Program, Program]:
    class Stats:
        def __init__(self) -> None:
            self.hits = 0

    async def run(fixed: bool) -> None:
        stats = Stats()

        async def hit(first: bool, name: str) -> None:
            await _late(first)
            value = getattr(stats, name)
            if not fixed:
                await _io()
            setattr(stats, name, value + 1)

        await asyncio.gather(hit(True, "hits"), hit(False, "hits"), _noise())
        assert stats.hits == 2, stats.hits

    return _pair(run)


def make_class_attribute() -> tuple[Program, Program]:
    class Quota:
        left = 1  # a class attribute, read through instances

        def take(self) -> bool:
            if self.left > 0:
                type(self).left = self.left - 1
                return True
            return False

    async def run(fixed: bool) -> None:
        Quota.left = 1
        taken: list[bool] = []

        async def use(first: bool) -> None:
            await _late(first)
            quota = Quota()
            if fixed:
                taken.append(quota.take())
                return
            if quota.left > 0:
                await _io()
                Quota.left -= 1
                taken.append(True)

        await asyncio.gather(use(True), use(False), _noise())
        assert taken.count(True) == 1, taken

    return _pair(run)


def make_module_attribute() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        global COUNTER
        COUNTER = 0
        module: Any = sys.modules[__name__]

        async def writer(first: bool) -> None:
            global COUNTER
            await _late(first)
            seen = COUNTER
            if not fixed:
                await _io()
            COUNTER = seen + 1

        async def attribute_writer(first: bool) -> None:
            await _late(first)
            seen = module.COUNTER
            if not fixed:
                await _io()
            module.COUNTER = seen + 1

        await asyncio.gather(writer(True), attribute_writer(False), _noise())
        assert module.COUNTER == 2, module.COUNTER

    return _pair(run)


def make_event_lost_wakeup() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        ready = asyncio.Event()

        async def waiter() -> None:
            await _io()
            if not fixed:
                ready.clear()  # "reset before waiting": loses a set() that came first
            await ready.wait()

        async def setter() -> None:
            await _io()
            await _io()
            ready.set()

        await asyncio.wait_for(asyncio.gather(waiter(), setter(), _noise()), 1.0)

    return _pair(run)


def make_queue_handoff() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        queue: asyncio.Queue[int] = asyncio.Queue()
        got: list[int] = []

        async def consumer() -> None:
            got.append(await queue.get())
            if not fixed:
                got.append(queue.get_nowait() if not queue.empty() else -1)

        async def producer() -> None:
            await queue.put(1)
            await _io()
            await queue.put(2)

        await asyncio.gather(consumer(), producer(), _noise())
        assert -1 not in got, got

    return _pair(run)


def make_lock_order() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        first, second = asyncio.Lock(), asyncio.Lock()

        async def one() -> None:
            async with first:
                await _io()
                async with second:
                    await _io()

        async def two() -> None:
            await _io()
            async with second if not fixed else first:
                await _io()
                async with first if not fixed else second:
                    await _io()

        await asyncio.wait_for(asyncio.gather(one(), two(), _noise()), 1.0)

    return _pair(run)


def make_timer_race() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        result: list[str] = []

        async def slow() -> None:
            await asyncio.sleep(0.002)
            result.append("slow")

        async def fast() -> None:
            await asyncio.sleep(0.001)
            result.append("fast")

        await asyncio.gather(slow(), fast(), _noise())
        assert fixed or result == ["fast", "slow"], result

    return _pair(run)


def make_cancel_between_check_and_act() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        resources = {"open": 0}

        async def worker() -> None:
            resources["open"] += 1
            try:
                await _io()
                await _io()
            finally:
                if fixed:
                    resources["open"] -= 1
                else:
                    await _io()
                    resources["open"] -= 1

        task = asyncio.create_task(worker())
        noise = asyncio.create_task(_noise())
        await _io()
        task.cancel()
        await asyncio.gather(task, noise, return_exceptions=True)
        assert resources["open"] == 0, resources

    return _pair(run)


def make_task_group_counter() -> tuple[Program, Program]:
    async def run(fixed: bool) -> None:
        box = {"n": 0}

        async def bump(first: bool) -> None:
            await _late(first)
            seen = box["n"]
            if not fixed:
                await _io()
            box["n"] = seen + 1

        async with asyncio.TaskGroup() as group:
            group.create_task(bump(True))
            group.create_task(bump(False))
            group.create_task(_noise())
        assert box["n"] == 2, box

    return _pair(run)


def make_independent_workers(tasks: int = 3, steps: int = 3) -> Program:
    """Tasks that touch only their own state: one behaviour, however they interleave."""

    class Box:
        def __init__(self) -> None:
            self.value = 0

    async def main() -> None:
        boxes = [Box() for _ in range(tasks)]

        async def worker(box: Box) -> None:
            for _ in range(steps):
                box.value += 1
                await asyncio.sleep(0)

        running = [asyncio.create_task(worker(box)) for box in boxes]
        for task in running:
            await task
        assert all(box.value == steps for box in boxes)

    return main


def _pair(run: Callable[[bool], Coroutine[Any, Any, None]]) -> tuple[Program, Program]:
    async def buggy() -> None:
        await run(False)

    async def fixed() -> None:
        await run(True)

    return buggy, fixed


PROGRAMS: dict[str, Callable[[], tuple[Program, Program]]] = {
    name.removeprefix("make_"): factory
    for name, factory in globals().items()
    if name.startswith("make_") and name != "make_independent_workers"
}
