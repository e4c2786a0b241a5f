"""Suspension points that cannot suspend (docs/rules.md, "What counts as a suspension point").

An ``await`` of ``put()`` on an unbounded ``asyncio.Queue``, or of a coroutine of this module
whose every ``await`` is such a one, runs to completion without yielding: a check before it
and a write after it are not separated by a suspension point. A bounded queue, ``sleep(0)``,
a helper with a real ``await`` and anything this module does not define still count.
"""

# select: IL101, IL301, IL303

import asyncio
from asyncio import Queue
from dataclasses import dataclass, field

events = asyncio.Queue()
bounded_events = asyncio.Queue(maxsize=8)


class Session:
    def __init__(self):
        self.state = "idle"
        self.inbox = asyncio.Queue()
        self.outbox = asyncio.Queue(maxsize=1)
        self.backlog = Queue(0)
        self.mode = "normal"
        self.subscribers = []

    async def _announce(self, item):
        await self.inbox.put(item)

    async def _announce_twice(self, item):
        await self._announce(item)
        await self.backlog.put(item)

    async def _send(self, item):
        await self.outbox.put(item)

    async def _flush(self):
        await asyncio.sleep(0)

    # ok: put() on an unbounded queue returns without yielding.
    async def start(self):
        if self.state == "idle":
            await self.inbox.put("starting")
            self.state = "running"

    # ok: the helper only puts on an unbounded queue, through another quiet helper too.
    async def start_through_helpers(self):
        if self.state == "idle":
            await self._announce_twice("starting")
            self.state = "running"

    # ok: a module-level unbounded queue.
    async def start_with_module_queue(self):
        if self.state == "idle":
            await events.put("starting")
            self.state = "running"

    # ok: a queue built without a bound in this function.
    async def start_with_local_queue(self):
        replies = asyncio.Queue(maxsize=0)
        if self.state == "idle":
            await replies.put("starting")
            self.state = "running"

    # The bounded queue's put() waits while it is full.
    async def start_bounded(self):
        if self.state == "idle":
            await self.outbox.put("starting")
            self.state = "running"  # error: IL101

    # The helper's await is a bounded put.
    async def start_through_bounded_helper(self):
        if self.state == "idle":
            await self._send("starting")
            self.state = "running"  # error: IL101

    # sleep(0) yields to the loop once, by design.
    async def start_after_yield(self):
        if self.state == "idle":
            await self._flush()
            self.state = "running"  # error: IL101

    async def start_with_bounded_module_queue(self):
        if self.state == "idle":
            await bounded_events.put("starting")
            self.state = "running"  # error: IL101

    # ok: a stale restore needs a real suspension point between the override and the restore.
    async def quietly(self):
        saved = self.mode
        self.mode = "quiet"
        await self._announce("quiet")
        self.mode = saved

    async def quietly_then_wait(self):
        saved = self.mode
        self.mode = "quiet"
        await self._send("quiet")
        self.mode = saved  # error: IL301

    # ok: the loop body never suspends.
    async def fan_out(self, item):
        for subscriber in self.subscribers:
            await self.inbox.put((subscriber, item))

    async def fan_out_slowly(self, item):
        for subscriber in self.subscribers:  # error: IL303
            await self._send((subscriber, item))

    def remove(self, subscriber):
        self.subscribers.remove(subscriber)


async def publish(item):
    await events.put(item)


async def record(item):
    return item


class Notifier:
    def __init__(self):
        self.state = "idle"

    async def _ping(self, item):
        await events.put(item)

    # A subclass in this module overrides the quiet helper with one that suspends.
    async def start(self):
        if self.state == "idle":
            await self._ping("starting")
            self.state = "running"  # error: IL101

    # ok: a module-level coroutine that only puts on an unbounded queue.
    async def start_publishing(self):
        if self.state == "idle":
            await publish("starting")
            self.state = "running"

    # ok: a coroutine without any await.
    async def start_recording(self):
        if self.state == "idle":
            await record("starting")
            self.state = "running"

    # ok: put_nowait() is not even awaited.
    async def start_nowait(self):
        if self.state == "idle":
            events.put_nowait("starting")
            self.state = "running"


class SlowNotifier(Notifier):
    async def _ping(self, item):
        await asyncio.sleep(0.1)


class Base:
    def __init__(self):
        self.state = "idle"

    async def notify(self, item):
        raise NotImplementedError

    # A stub is meant to be overridden, by code this module cannot see.
    async def start(self):
        if self.state == "idle":
            await self.notify("starting")
            self.state = "running"  # error: IL101


@dataclass
class Worker:
    state: str = "idle"
    jobs: asyncio.Queue = field(default_factory=asyncio.Queue)

    # ok: a dataclass field whose factory builds an unbounded queue.
    async def start(self):
        if self.state == "idle":
            await self.jobs.put("starting")
            self.state = "running"


class Relay:
    def __init__(self, queue):
        self.state = "idle"
        self.queue = queue

    # A queue handed in from outside may be bounded.
    async def start(self):
        if self.state == "idle":
            await self.queue.put("starting")
            self.state = "running"  # error: IL101


class Swapped:
    def __init__(self):
        self.state = "idle"
        self.queue = asyncio.Queue()

    def resize(self, n):
        self.queue = asyncio.Queue(n)

    # The attribute is rebound to a bounded queue elsewhere in the class.
    async def start(self):
        if self.state == "idle":
            await self.queue.put("starting")
            self.state = "running"  # error: IL101
