"""An orphaned ``queue.get()`` task after ``asyncio.wait(FIRST_COMPLETED)`` swallows a message.

Bug: the agent's inbox loop waits for either a message (a ``queue.get()`` task) or a heartbeat
tick, and when the tick wins it loops and starts a *new* ``get()`` task without cancelling the
old one. The orphaned task later takes a message that nobody reads. In stock order the message
arrives 5 ms before the first tick and the get always wins; under real timing a message that
arrives around the heartbeat (a delayed timer or a slow wakeup) loses the race, and the message
vanishes: the test's ``wait_for`` for all messages times out.

Fix: cancel the pending tasks on every path (``for task in pending: task.cancel()``). A
cancelled ``Queue.get()`` leaves its item in the queue, so the next ``get()`` receives it.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "exception"
HIDDEN = True

HEARTBEAT = 1.0


async def inbox_loop(
    inbox: asyncio.Queue[str], received: list[str], everything: asyncio.Event, *, cancel: bool
) -> None:
    while True:
        get = asyncio.ensure_future(inbox.get())
        tick = asyncio.ensure_future(asyncio.sleep(HEARTBEAT))
        try:
            done, _ = await asyncio.wait({get, tick}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if cancel:
                get.cancel()
                tick.cancel()
        if get in done:
            received.append(get.result())
            if len(received) == 2:
                everything.set()


async def _scenario(*, cancel: bool) -> None:
    inbox: asyncio.Queue[str] = asyncio.Queue()
    received: list[str] = []
    everything = asyncio.Event()
    loop_task = asyncio.ensure_future(inbox_loop(inbox, received, everything, cancel=cancel))
    await io()  # connect to the broker
    await io()  # subscribe
    await asyncio.sleep(HEARTBEAT - 0.005)
    await inbox.put("task")
    await asyncio.sleep(0.5)
    await inbox.put("cancel")
    try:
        await asyncio.wait_for(everything.wait(), timeout=5.0)
    finally:
        loop_task.cancel()
    assert received == ["task", "cancel"]


async def buggy() -> None:
    await _scenario(cancel=False)


async def fixed() -> None:
    await _scenario(cancel=True)
