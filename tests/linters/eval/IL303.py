"""IL303 eval: iterating a shared mutable container while the loop body suspends.

Every expected finding carries a trailing ``# error: IL303`` on the line of the iterable.
Negatives are named in a comment starting with ``# ok:``.
"""

import asyncio
import collections
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


class EventStream:
    """Per-run state of a stream that one consumer drives (pydantic-ai's UI event stream)."""

    # ok: the loop runs in the stream's async generator, and `_pending` is mutated only by
    # that generator and a helper it calls: nothing else runs while it is suspended.
    async def transform(self, events):
        async for event in events:
            self._track(event)
            yield event
        for call_id in self._pending:
            async for closing in self._close(call_id):
                yield closing
        self._pending.clear()

    def _track(self, event):
        self._pending[event.id] = event

    async def _close(self, call_id):
        await asyncio.sleep(0)
        yield call_id


class CancellableStream:
    async def transform(self, events):
        async for event in events:
            self._pending[event.id] = event
            yield event
        for call_id in self._pending:  # error: IL303
            async for closing in self._close(call_id):
                yield closing

    # Any task may cancel a call while the generator is suspended in the loop above.
    async def cancel(self, call_id):
        self._pending.pop(call_id, None)

    async def _close(self, call_id):
        await asyncio.sleep(0)
        yield call_id


class Runtime:
    """A runtime whose processing loop is its own background task (autogen's runtime)."""

    def __init__(self):
        self._agents = {}
        self._run_task = asyncio.create_task(self._run())

    async def _run(self):
        while True:
            await self._process()

    # ok: only the runtime's own task runs this, and it alone adds to `_agents`.
    async def _process(self):
        for agent in self._agents.values():
            await agent.on_message()
        self._agents[len(self._agents)] = object()
        for agent in self._registered.values():  # error: IL303
            await agent.on_message()

    # Any task can register an agent while the processing loop is suspended.
    async def register(self, name, agent):
        self._registered[name] = agent


class Outbox:
    """The pending list is swapped out before the flush (the detach idiom)."""

    def drop(self, item):
        self._pending.remove(item)

    # ok: `self._pending` names a new list before the loop; the loop walks the detached one.
    async def flush(self):
        pending = self._pending
        self._pending = []
        for item in pending:
            await item.send()

    # The swap happens on one path only: on the other the loop walks the live list.
    async def flush_sometimes(self, reset):
        pending = self._pending
        if reset:
            self._pending = []
        for item in pending:  # error: IL303
            await item.send()

    # Swapped before the alias is taken: the loop walks the new, live list.
    async def flush_late(self):
        self._pending = []
        pending = self._pending
        for item in pending:  # error: IL303
            await item.send()


class Topics:
    """Per-topic subscriber lists: dropping a topic leaves the lists themselves alone."""

    def drop_topic(self, topic):
        del self._subs[topic]

    def reset_topic(self, topic):
        self._subs[topic] = []

    def unsubscribe(self, cb):
        self._watchers[cb.topic].remove(cb)

    # ok: only the dict is mutated elsewhere; the loop walks one list held by it.
    async def publish(self, event):
        for cb in self._subs.get(event.topic, []):
            await cb(event)

    # Dropping a topic changes the dict's size under a loop over the dict itself.
    async def publish_all(self, event):
        for topic, subs in self._subs.items():  # error: IL303
            await subs[0](event)

    # The list walked here is the one `unsubscribe` removes from.
    async def notify(self, event):
        for cb in self._watchers[event.topic]:  # error: IL303
            await cb(event)


class SharingRuntime:
    """The runtime's own task adds to `_agents`, but the dict itself is handed out."""

    def __init__(self):
        self._agents = {}
        self._run_task = asyncio.create_task(self._run())

    async def _run(self):
        while True:
            for agent in self._agents.values():  # error: IL303
                await agent.on_message()
            self._agents[len(self._agents)] = object()

    # Whoever holds the dict may add to it while the loop above is suspended.
    def agents(self):
        return self._agents


class CountingRuntime(SharingRuntime):
    """The same loop, with the dict only read from outside the task."""

    def __init__(self):
        self._agents = {}
        self._run_task = asyncio.create_task(self._run())

    # ok: only the runtime's own task adds to `_agents`; `count` and `names` only read it.
    async def _run(self):
        while True:
            for agent in self._agents.values():
                await agent.on_message()
            self._agents[len(self._agents)] = object()

    def count(self):
        return len(self._agents)

    def names(self):
        return sorted(self._agents)


class Children:
    """A list that other tasks only grow at the end: a loop over it walks to the new end."""

    def __init__(self):
        self._children = []
        self._queued: list[str] = []
        self._watchers = collections.deque()
        self._slots = []

    async def attach(self, child):
        self._children.append(child)
        self._children.extend(child.siblings)
        self._queued += [child.name]
        self._watchers.append(child)
        self._slots.insert(0, child)

    async def rename(self, index, child):
        self._children[index] = child

    # ok: `_children` is a list only appended to, extended or item-replaced: an element added
    # during the await is visited too, and none is skipped or repeated.
    async def broadcast(self, message):
        for child in self._children:
            await child.send(message)

    # ok: the `list[...]` annotation says `_queued` is a list, which `+=` only extends.
    async def flush(self, sink):
        for name in self._queued:
            await sink.write(name)

    # A deque raises `RuntimeError` on any change during iteration, appends included.
    async def notify(self, message):
        for watcher in self._watchers:  # error: IL303
            await watcher.send(message)

    # `insert(0, ...)` shifts the elements under the loop: one is visited twice.
    async def fill(self, message):
        for slot in self._slots:  # error: IL303
            await slot.send(message)


class Router:
    """A loop that replaces the value at the key it is visiting changes no dict's size."""

    def __init__(self):
        self._categories = {}
        self._agents = {}
        self._tools = {}

    # ok: the only in-place store is at the loop's own key, which the dict already holds.
    async def embed_categories(self, embed):
        for name, category in self._categories.items():
            self._categories[name] = await embed(category)

    # ok: the same over the keys.
    async def embed_agents(self, embed):
        for name in self._agents:
            self._agents[name] = await embed(name)

    # The key is the value, not the key the loop visits: a new key grows the dict.
    async def embed_tools(self, embed):
        for name, tool in self._tools.items():  # error: IL303
            self._tools[tool.alias] = await embed(name)


class Rebinding:
    """The narrowings above need every binding of the state to be seen."""

    def __init__(self):
        self._pending = []
        self._index = {}

    async def reset(self):
        self._pending, self._done = collections.deque(), []

    async def queue(self, item):
        self._pending.append(item)

    # `reset` binds `_pending` to a deque, which raises on an append during the loop.
    async def drain(self, sink):
        for item in self._pending:  # error: IL303
            await sink.write(item)

    # After the rebinding, the stores go into a new dict that another loop may be walking.
    async def reindex(self, embed):
        for name, entry in self._index.items():  # error: IL303
            self._index = dict(self._index)
            self._index[name] = await embed(entry)


class Sessions:
    """A loop that leaves right after its only suspension never resumes its iterator."""

    def __init__(self):
        self._sessions = {}
        self._queues = {}

    def drop(self, key):
        del self._sessions[key]
        self._queues.pop(key)

    # ok: returns right after the await, so the iterator never advances after another task ran
    async def close_one(self, key):
        for name, session in self._sessions.items():
            if name == key:
                await session.close()
                return

    # ok: the one-line suite form, with the exit after the await on the same line
    async def first_ready(self):
        for session in self._sessions.values(): ready = await session.ready(); return ready

    # ok: `return await` leaves in the statement that suspends
    async def any_ready(self):
        for session in self._sessions.values():
            return await session.ready()

    # ok: `break` right after a block whose body suspends (no `continue` inside it)
    async def close_first(self):
        for name, session in self._sessions.items():
            with session.guard():
                await session.close()
            break

    # An exception handler that continues resumes the iterator after the suspension.
    async def close_retrying(self):
        for name, session in self._sessions.items():  # error: IL303
            try:
                await session.close()
            except OSError:
                continue
            return

    # A branch that falls through to more iterations.
    async def close_matching(self, key):
        for name, session in self._sessions.items():  # error: IL303
            if name.startswith(key):
                await session.close()
            print(name)

    # The suspension is in the test: a false test goes on to the next item.
    async def find_ready(self):
        for name, session in self._sessions.items():  # error: IL303
            if await session.ready():
                return name

    # `break` leaves only the inner loop.
    async def drain_each(self):
        for name, queue in self._queues.items():  # error: IL303
            for _ in range(3):
                await queue.get()
                break


class ProvidersBase:
    """Bindings in base classes and subclasses of the same module count for the attribute."""

    def __init__(self, providers):
        self.providers: list = list(providers)
        self.hooks = []


class ProvidersAgent(ProvidersBase):
    async def add_provider(self, provider):
        self.providers.append(provider)

    # ok: the base class binds a list, and this class only appends to it
    async def before_run(self):
        for provider in self.providers:
            await provider.before_run()

    async def add_hook(self, hook):
        self.hooks.append(hook)

    # A subclass rebinds the hooks to a deque, whose iterator raises on an append.
    async def run_hooks(self):
        for hook in self.hooks:  # error: IL303
            await hook()


class DequeHooksAgent(ProvidersAgent):
    def reset_hooks(self):
        self.hooks = collections.deque()



_pool_registry = {}


class ConnectionPool:
    """A lock the loop holds throughout, and every mutation holds too, keeps them apart."""

    def __init__(self):
        self.pool_lock = asyncio.Lock()
        self.stats_lock = asyncio.Lock()
        self._mutex = asyncio.Lock()
        self._sem = asyncio.Semaphore(3)
        self._io_lock = asyncio.BoundedSemaphore(4)
        self._cond = asyncio.Condition()
        self._locks = {}
        self.uploads = {}
        self._token_lock: asyncio.Lock = asyncio.Lock()
        self.tokens = {}
        self.connections = {}
        self.handlers = {}
        self.listeners = set()
        self.counters = {}
        self.jobs = {}
        self.waiters = {}
        self.streams = {}
        self.sessions = {}

    # ok: the loop and every mutation of the connections hold self.pool_lock
    async def cleanup(self):
        async with self.pool_lock:
            for conn in self.connections.values():
                await conn.close()
            self.connections.clear()

    async def open(self, key, conn):
        async with self.pool_lock:
            self.connections[key] = conn

    async def release(self, key):
        async with self.pool_lock:
            if key in self.connections:
                await self.connections[key].close()
                del self.connections[key]

    # ok: the condition's lock excludes the mutations, and the loop never waits on it
    async def dispatch(self, event):
        async with self._cond:
            for handler in self.handlers.values():
                await handler(event)

    async def remove_handler(self, key):
        async with self._cond:
            self.handlers.pop(key, None)
            self._cond.notify_all()

    # ok: the mutation holds two locks, one of which the loop holds
    async def notify_listeners(self):
        async with self._mutex:
            for listener in self.listeners:
                await listener.notify()

    async def remove_listener(self, listener):
        async with self.stats_lock, self._mutex:
            self.listeners.discard(listener)

    # ok: the lock is taken inside a branch, around the only mutation
    async def report_counters(self):
        async with self.stats_lock:
            for name in self.counters:
                await self.publish(name)

    async def reset_counter(self, name, force):
        if force:
            async with self.stats_lock:
                del self.counters[name]

    async def publish(self, name):
        await asyncio.sleep(0)

    # ok: the loop sits deeper inside the lock's block, in a try and an if
    async def close_all(self, reason):
        async with self.pool_lock:
            try:
                if reason:
                    for conn in self.connections.values():
                        await conn.close(reason)
            finally:
                self.connections.clear()

    # A semaphore admits several holders at once: it excludes nothing.
    async def run_jobs(self):
        async with self._sem:
            for job in self.jobs:  # error: IL303
                await job.run()

    async def cancel_job(self, key):
        async with self._sem:
            self.jobs.pop(key, None)

    # ok: an annotated Lock, held at the loop and at every mutation
    async def expire_tokens(self):
        async with self._token_lock:
            for token in self.tokens:
                await token.expire()

    async def revoke(self, key):
        async with self._token_lock:
            del self.tokens[key]

    # Named like a lock, bound to a semaphore: four holders at once.
    async def finish_uploads(self):
        async with self._io_lock:
            for upload in self.uploads:  # error: IL303
                await upload.finish()

    async def abort_upload(self, key):
        async with self._io_lock:
            self.uploads.pop(key, None)

    # `wait()` lets go of the condition's lock while the loop is suspended in it.
    async def notify_each(self):
        async with self._cond:
            for waiter in self.waiters:  # error: IL303
                await self._cond.wait()

    async def forget_waiter(self, key):
        async with self._cond:
            del self.waiters[key]

    # One mutation takes no lock at all.
    async def flush_streams(self):
        async with self.pool_lock:
            for stream in self.streams:  # error: IL303
                await stream.flush()

    async def close_stream(self, key):
        async with self.pool_lock:
            self.streams.pop(key, None)

    async def drop_stream(self, key):
        self.streams.pop(key, None)

    # `self._locks[key]` is one lock per key: two keys do not exclude each other.
    async def ping_sessions(self, key):
        async with self._locks[key]:
            for session in self.sessions:  # error: IL303
                await session.ping()

    async def end_session(self, key):
        async with self._locks[key]:
            self.sessions.pop(key, None)

    # Module state under a per-instance lock: two pools hold two different locks.
    async def walk_registry(self):
        async with self.pool_lock:
            for entry in _pool_registry:  # error: IL303
                await entry.refresh()

    async def unregister(self, key):
        async with self.pool_lock:
            _pool_registry.pop(key, None)


_tool_registry = {}
_tool_lock = asyncio.Lock()


# ok: a module-level lock held at the loop and at every mutation of the module's dict
async def refresh_tools():
    async with _tool_lock:
        for tool in _tool_registry.values():
            await tool.refresh()


async def remove_tool(name):
    async with _tool_lock:
        _tool_registry.pop(name, None)


_hook_registry = {}
_hook_lock = asyncio.Lock()


async def refresh_hooks():
    async with _hook_lock:
        for hook in _hook_registry.values():  # error: IL303
            await hook.refresh()


# A lock taken in the enclosing function does not cover a callback that runs later.
async def schedule_removal(name, loop):
    async with _hook_lock:

        async def later():
            _hook_registry.pop(name, None)

        loop.create_task(later())


class ReadCache:
    """A loop that leaves on every path after its suspension, with checks on the way out."""

    def __init__(self):
        self.entries = []
        self.pending = []
        self.stale = []

    async def invalidate(self, entry):
        self.entries.remove(entry)
        self.pending.remove(entry)
        self.stale.remove(entry)

    # ok: after the await every path returns; the ifs on the way only return earlier
    async def lookup(self, path, mtime=None):
        for entry in self.entries:
            if entry.path == path:
                if mtime is None:
                    try:
                        mtime = await entry.stat()
                    except OSError:
                        mtime = None
                if entry not in self.entries:
                    return None
                if mtime != entry.mtime:
                    return None
                return entry
        return None

    # ok: a nested loop with its own `continue` stands between the await and the `break`
    async def touch(self, path):
        for entry in self.entries:
            if entry.path == path:
                await entry.touch()
                for alias in entry.aliases:
                    if not alias:
                        continue
                    alias.touched = True
                break

    # One branch after the await goes back to the loop with `continue`.
    async def first_fresh(self):
        for entry in self.pending:  # error: IL303
            if entry.ready:
                fresh = await entry.check()
                if not fresh:
                    continue
                return entry
        return None

    # The try's handler swallows the error and the loop goes on to the next entry.
    async def refresh_one(self):
        for entry in self.stale:  # error: IL303
            try:
                await entry.refresh()
                return entry
            except OSError:
                pass
        return None
