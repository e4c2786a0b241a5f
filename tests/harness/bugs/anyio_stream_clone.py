"""anyio memory object stream: a worker clones the send side after the owner closed it (hidden).

Bug: the orchestrator starts two workers in a task group, announces the fan-out (two
round-trips), then closes its send stream so the collector's ``async for`` ends when the workers
finish. Each worker connects first and only then calls ``send.clone()``. In stock order both
workers clone before the orchestrator closes; when a worker's connect is slower than the
announcement, ``clone()`` raises ``ClosedResourceError`` (and the task group raises an
``ExceptionGroup``).

Fix: clone the send stream in the orchestrator, before starting each worker, and close the
original with ``async with send:``: the workers own their clones from the start.
"""

from __future__ import annotations

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._io import io

KIND = "exception"
HIDDEN = True


async def worker_late_clone(send: MemoryObjectSendStream[str], name: str) -> None:
    await io()  # connect to the model
    async with send.clone() as mine:
        await mine.send(f"{name}: done")


async def worker_owning(send: MemoryObjectSendStream[str], name: str) -> None:
    async with send:
        await io()  # connect to the model
        await send.send(f"{name}: done")


async def collect(receive: MemoryObjectReceiveStream[str], results: list[str]) -> None:
    async with receive:
        async for item in receive:
            results.append(item)


async def buggy() -> None:
    send, receive = anyio.create_memory_object_stream[str](10)
    results: list[str] = []
    async with anyio.create_task_group() as group:
        group.start_soon(worker_late_clone, send, "a")
        group.start_soon(worker_late_clone, send, "b")
        group.start_soon(collect, receive, results)
        await io()  # log the fan-out
        await io()  # publish the plan
        send.close()
    assert sorted(results) == ["a: done", "b: done"]


async def fixed() -> None:
    send, receive = anyio.create_memory_object_stream[str](10)
    results: list[str] = []
    async with anyio.create_task_group() as group:
        async with send:
            group.start_soon(worker_owning, send.clone(), "a")
            group.start_soon(worker_owning, send.clone(), "b")
        group.start_soon(collect, receive, results)
        await io()  # log the fan-out
        await io()  # publish the plan
    assert sorted(results) == ["a: done", "b: done"]
