"""The harness decides what an eval case is: IL101's removal-only narrowing.

``CancellableRunner`` in ``eval/IL101.py`` was a positive until the harness showed it is not a
race: one background task checks that a job is absent, awaits, and inserts it, while other
tasks only remove jobs. Here the same class runs under an exhaustive bounded exploration, and
every end state must be one that some serial order of the same calls gives. The variant in
which another task *adds* (``RestoringRunner``, still a positive) fails at once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import interlace

Call = tuple[str, str, int]
"""``(kind, job, tag)``: ``("submit", "a", 0)`` queues job ``a`` with tag 0; ``"cancel"``
removes a job; ``"restore"`` stores the tag ``-1`` for it."""


class CancellableRunner:
    """The eval negative: only ``_process_events`` adds to ``tasks``; ``cancel`` removes."""

    def __init__(self) -> None:
        self.tasks: dict[str, int] = {}
        self.events: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        self.processor = asyncio.create_task(self._process_events())

    async def _process_events(self) -> None:
        while True:
            job, tag = await self.events.get()
            if job not in self.tasks:
                await self.announce(job)
                self.tasks[job] = tag
            self.events.task_done()

    async def cancel(self, job: str) -> None:
        self.tasks.pop(job, None)

    async def announce(self, job: str) -> None:
        await asyncio.sleep(0)
        await asyncio.sleep(0)


class RestoringRunner(CancellableRunner):
    """The eval positive next to it: ``restore`` adds from another task."""

    async def restore(self, job: str) -> None:
        self.tasks[job] = -1


def _serial_end_states(submits: list[Call], others: list[Call]) -> set[frozenset[tuple[str, int]]]:
    """The end states of every serial order of the calls (submissions keep queue order)."""
    states: set[frozenset[tuple[str, int]]] = set()
    total = len(submits) + len(others)
    for order_of_others in set(itertools.permutations(others)):
        for slots in itertools.combinations(range(total), len(submits)):
            pending_submits, pending_others = iter(submits), iter(order_of_others)
            tasks: dict[str, int] = {}
            for index in range(total):
                kind, job, tag = next(pending_submits if index in slots else pending_others)
                if kind == "submit":
                    tasks.setdefault(job, tag)
                elif kind == "cancel":
                    tasks.pop(job, None)
                else:
                    tasks[job] = -1
            states.add(frozenset(tasks.items()))
    return states


_SUBMITS: list[Call] = [("submit", "a", 0), ("submit", "a", 1), ("submit", "b", 2)]


def _scenario(
    runner_class: type[CancellableRunner], others: list[Call]
) -> Callable[[], Coroutine[Any, Any, None]]:
    allowed = _serial_end_states(_SUBMITS, others)

    async def scenario() -> None:
        runner = runner_class()
        for _, job, tag in _SUBMITS:
            runner.events.put_nowait((job, tag))

        async def call(kind: str, job: str) -> None:
            await asyncio.sleep(0)
            await getattr(runner, kind)(job)

        await asyncio.gather(*(call(kind, job) for kind, job, _ in others))
        await runner.events.join()
        runner.processor.cancel()
        end = frozenset(runner.tasks.items())
        assert end in allowed, f"end state {dict(end)} is no serial order's"

    return scenario


def test_removal_only_writers_leave_a_serial_end_state_in_every_schedule() -> None:
    cancels: list[Call] = [("cancel", "a", 0), ("cancel", "b", 0), ("cancel", "a", 0)]
    exploration = interlace.explore(
        _scenario(CancellableRunner, cancels), strategy="exhaustive", bound=3
    )
    assert exploration.failure is None
    assert exploration.exhausted


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
def test_a_writer_that_adds_leaves_an_end_state_no_serial_order_gives(strategy: str) -> None:
    others: list[Call] = [("restore", "a", 0), ("cancel", "b", 0)]
    exploration = interlace.explore(
        _scenario(RestoringRunner, others), strategy=strategy, max_schedules=50, seed=1
    )
    assert exploration.failure is not None
    assert isinstance(exploration.failure.exception, AssertionError)
