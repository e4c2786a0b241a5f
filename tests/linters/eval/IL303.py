"""IL303 eval: iterating a shared mutable container while the loop body suspends.

Every expected finding carries a trailing ``# error: IL303`` on the line of the iterable.
Negatives are named in a comment starting with ``# ok:``.
"""

import asyncio
import copy
from collections import defaultdict

_handlers = []


def add_handler(handler):
    _handlers.append(handler)


def remove_handler(handler):
    _handlers.remove(handler)


class MessageBus:
    def __init__(self, max_history=100):
        self._subscribers = defaultdict(list)
        self._topics = {}
        self._history = []
        self._static = []
        self._static.extend(["audit"])
        self.max_history = max_history

    def subscribe(self, event_type, sid, callback):
        self._subscribers[event_type].append((sid, callback))

    def unsubscribe(self, event_type, sid, callback):
        self._subscribers[event_type].remove((sid, callback))

    def drop_topic(self, name):
        del self._topics[name]

    # Seed 002's message bus before the fix.
    async def publish(self, event):
        for sid, callback in self._subscribers[event.event_type]:  # error: IL303
            await callback(event)

    # ok: seed 002's fix: a `.copy()` snapshot before the loop.
    async def publish_fixed(self, event):
        type_subscribers = self._subscribers.get(event.event_type, []).copy()
        for sid, callback in type_subscribers:
            await callback(event)

    async def publish_via_alias(self, event):
        subscribers = self._subscribers.get(event.event_type, [])
        for sid, callback in subscribers:  # error: IL303
            await callback(event)

    async def broadcast(self, event):
        for name, topic in self._topics.items():  # error: IL303
            await topic.send(event)

    # ok: list(...) snapshot.
    async def broadcast_list(self, event):
        for name, topic in list(self._topics.items()):
            await topic.send(event)

    # ok: tuple(...), sorted(...), slices and copy.copy are snapshots too.
    async def snapshots(self, event):
        for topic in tuple(self._topics.values()):
            await topic.send(event)
        for name in sorted(self._topics):
            await self._topics[name].send(event)
        for sid, callback in self._subscribers[event.event_type][:]:
            await callback(event)
        for topic in copy.copy(self._topics).values():
            await topic.send(event)

    # ok: no suspension point in the loop body.
    async def count(self, event_type):
        total = 0
        for _ in self._subscribers[event_type]:
            total += 1
        await asyncio.sleep(0)
        return total

    # ok: only __init__ mutates _static in place; it is effectively read-only afterwards.
    async def audit(self, event):
        for name in self._static:
            await self.log(name, event)

    # ok: the awaits run after the loop, over results gathered synchronously.
    async def gather_all(self, event):
        calls = [callback(event) for _, callback in self._subscribers[event.event_type]]
        await asyncio.gather(*calls)

    async def replay(self, sink):
        for event in reversed(self._history):  # error: IL303
            await sink(event)

    def record(self, event):
        self._history.append(event)
        if len(self._history) > self.max_history:
            self._history.pop(0)

    async def log(self, name, event):
        await asyncio.sleep(0)


class Plugins:
    def __init__(self):
        self._plugins = []
        self._seen = {}

    def register(self, plugin):
        self._plugins.append(plugin)

    # ok: the list only grows, from synchronous setup code (registration).
    async def start_all(self):
        for plugin in self._plugins:
            await plugin.start()

    async def on_event(self, event):
        self._seen[event.id] = event

    async def replay_seen(self, sink):
        for event in self._seen.values():  # error: IL303
            await sink(event)

    # ok: the only suspension point is a `yield` to the consumer.
    async def iter_seen(self):
        for event in self._seen.values():
            yield event


async def notify_all(event):
    for handler in _handlers:  # error: IL303
        await handler(event)


# ok: a local list is not shared.
async def notify_local(event, handlers):
    pending = list(handlers)
    for handler in pending:
        await handler(event)
