"""A task and an executor job take two thread locks in opposite orders (hidden; async def).

Bug: a memory store guards its index and its journal with one ``threading.Lock`` each. A
task on the event loop compacts (index, then journal) while a ``run_in_executor`` job
flushes (journal, then index). With no preemption the task's compaction runs to its end
first (the job runs while the loop waits) and both finish; when the job's thread preempts
the loop's thread between its two acquires, each holds one lock and waits for the other:
the loop's thread, and with it every task, stops for good.

This is an ``async def`` target: the report's wait-for cycle runs through the loop's
thread (``MainThread``) and the executor's worker thread.

Fix: both take the locks in the same order (index, then journal).

Deviations: 1 (the job's thread preempts the loop's thread between its two acquires).
"""

from __future__ import annotations

import asyncio
import threading

KIND = "deadlock"
HIDDEN = True
DEVIATIONS = 1


class Store:
    def __init__(self) -> None:
        self.index_lock = threading.Lock()
        self.journal_lock = threading.Lock()
        self.index: list[str] = []
        self.journal: list[str] = []

    def compact(self) -> None:
        with self.index_lock:
            self.index.sort()
            with self.journal_lock:
                self.journal.clear()

    def flush(self, *, ordered: bool) -> None:
        first, second = (
            (self.index_lock, self.journal_lock)
            if ordered
            else (self.journal_lock, self.index_lock)
        )
        with first:
            pending = list(self.journal)
            with second:
                self.index.extend(pending)


async def _scenario(*, ordered: bool) -> None:
    store = Store()
    store.journal.append("entry")
    loop = asyncio.get_running_loop()
    job = asyncio.ensure_future(loop.run_in_executor(None, lambda: store.flush(ordered=ordered)))
    await asyncio.sleep(0)  # the job is with the executor
    store.compact()
    await job


async def buggy() -> None:
    await _scenario(ordered=False)


async def fixed() -> None:
    await _scenario(ordered=True)
