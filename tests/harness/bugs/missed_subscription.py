"""A listener subscribes after an await and never gets the message it waits for (a hang).

Bug: the listener connects to the bus (an await) and only then subscribes; the announcer
publishes the shutdown message after two round-trips. In stock order the listener subscribes
first; when its connect is slower than the announcer's two round-trips, the message is
published to nobody and the listener polls its queue (``wait_for`` with a 5 s timeout, retried)
forever: still running, never done.

Fix: subscribe before the first await (register the queue synchronously, then connect), so
every message published after ``listen`` was called reaches it.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "hang"
HIDDEN = True


class Bus:
    def __init__(self) -> None:
        self.subscribers: list[asyncio.Queue[str]] = []

    async def publish(self, message: str) -> None:
        await io()  # fan the message out through the broker
        for queue in self.subscribers:
            queue.put_nowait(message)


async def listen(bus: Bus, *, subscribe_first: bool) -> str:
    queue: asyncio.Queue[str] = asyncio.Queue()
    if subscribe_first:
        bus.subscribers.append(queue)
    await io()  # connect to the broker
    if not subscribe_first:
        bus.subscribers.append(queue)
    while True:
        try:
            return await asyncio.wait_for(queue.get(), timeout=5.0)
        except TimeoutError:
            continue


async def announce(bus: Bus) -> None:
    await io()  # decide to shut down
    await bus.publish("shutdown")


async def _scenario(*, subscribe_first: bool) -> None:
    bus = Bus()
    message, _ = await asyncio.gather(listen(bus, subscribe_first=subscribe_first), announce(bus))
    assert message == "shutdown"


async def buggy() -> None:
    await _scenario(subscribe_first=False)


async def fixed() -> None:
    await _scenario(subscribe_first=True)
