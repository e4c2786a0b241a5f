"""Lost wakeup on an ``asyncio.Event`` cleared after the work it signalled (hidden).

Bug: the consumer waits for ``ready``, takes the pending messages, handles them (awaiting), and
only then clears ``ready``. A message that arrives while it is handling the batch sets an event
that is already set, and the late ``clear()`` erases that signal: the consumer then waits forever
with a message in its inbox. In stock order the producer needs two round-trips per message and
the consumer clears in time; when handling a message is slower than producing the next one (a
slow tool call), the wakeup is lost.

Fix: clear the event right after ``wait()`` returns and before taking the batch, with no await
between the clear and the take: any message appended after the take sets the event again.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "deadlock"
HIDDEN = True

MESSAGES = ("plan", "act")


class Inbox:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.ready = asyncio.Event()


async def producer(inbox: Inbox) -> None:
    for message in MESSAGES:
        await io()  # receive the message
        await io()  # decode it
        inbox.items.append(message)
        inbox.ready.set()


async def consumer(inbox: Inbox, handled: list[str], *, clear_first: bool) -> None:
    while len(handled) < len(MESSAGES):
        await inbox.ready.wait()
        if clear_first:
            inbox.ready.clear()
        batch = inbox.items[:]
        inbox.items.clear()
        for _ in batch:
            await io()  # handle the message
        handled.extend(batch)
        if not clear_first:
            inbox.ready.clear()


async def _scenario(*, clear_first: bool) -> None:
    inbox = Inbox()
    handled: list[str] = []
    await asyncio.gather(producer(inbox), consumer(inbox, handled, clear_first=clear_first))
    assert handled == list(MESSAGES)


async def buggy() -> None:
    await _scenario(clear_first=False)


async def fixed() -> None:
    await _scenario(clear_first=True)
