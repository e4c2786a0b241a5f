"""An ``asyncio.to_thread`` job and a task both get-or-create one entry (hidden; async def).

Bug: an agent's tool registry creates a client on first use. A task on the event loop and a
blocking tool call sent to a worker thread with ``asyncio.to_thread`` both call
``registry.get("k")``. With no preemption the task's call runs to its end first (the worker
runs while the loop waits), so one client is created; when the worker thread preempts the
loop's thread between the task's check and its insert (the GIL's switch interval can land
there), both create one and the first is lost.

This is an ``async def`` target: the event loop runs on the controlled loop, and the
executor's worker thread and the loop's own thread run under one scheduler.

Fix: the registry's lock covers the check and the insert (a ``threading.Lock``: the two
callers are threads, so an ``asyncio.Lock`` would not do).

Deviations: 1 (the worker preempts the loop's thread inside the task's check-then-insert).
"""

from __future__ import annotations

import asyncio
import threading

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


class Registry:
    def __init__(self, *, locked: bool) -> None:
        self.clients: dict[str, object] = {}
        self.created = 0
        self._lock = threading.Lock() if locked else None

    def get(self, key: str) -> object:
        if self._lock is None:
            return self._get(key)
        with self._lock:
            return self._get(key)

    def _get(self, key: str) -> object:
        if key not in self.clients:
            self.created += 1
            self.clients[key] = object()  # noqa: IL102 - the race under test
        return self.clients[key]


async def _scenario(*, locked: bool) -> None:
    registry = Registry(locked=locked)
    job = asyncio.ensure_future(asyncio.to_thread(registry.get, "k"))
    await asyncio.sleep(0)  # the job's task hands the call to the executor
    registry.get("k")
    await job
    assert registry.created == 1, f"created {registry.created} clients for one key"


async def buggy() -> None:
    await _scenario(locked=False)


async def fixed() -> None:
    await _scenario(locked=True)
