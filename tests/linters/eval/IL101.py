"""IL101 eval: check-then-act across a suspension point in async code.

Every expected finding carries a trailing ``# error: IL101`` on the line of the write, or
``# error: IL104`` where the finding is lazy initialisation of one attribute (the opt-in
IL104 takes those from IL101; the lock, re-check and driver logic is the same for both).
Negatives are named in a comment starting with ``# ok:``.
"""

# select: IL101, IL104

import asyncio
import threading
import time
from enum import Enum

import anyio


class AgentState(Enum):
    IDLE = "idle"
    RUNNING = "running"


IDLE = "idle"
_clients = {}


async def connect(url):
    await asyncio.sleep(0)
    return object()


class BaseAgent:
    def __init__(self):
        self.state = AgentState.IDLE
        self.memory = []
        self._lock = asyncio.Lock()
        self._client = None
        self._cache = {}
        self._inflight = 0
        self.max_inflight = 4

    # ok: seed 000 run() as reported: no suspension point between the check and the set.
    async def run(self, request=None):
        if self.state != AgentState.IDLE:
            raise RuntimeError(f"Agent is not in the IDLE state (currently: {self.state})")
        self.state = AgentState.RUNNING
        try:
            return await self.step(request)
        finally:
            self.state = AgentState.IDLE

    # The real hazard: a suspension point between the idle check and the set.
    async def run_after_setup(self, request=None):
        if self.state != AgentState.IDLE:
            raise RuntimeError("busy")
        await self.load_tools()
        self.state = AgentState.RUNNING  # error: IL101
        return await self.step(request)

    async def client(self):
        if self._client is None:
            self._client = await connect("https://api")  # error: IL104
        return self._client

    # ok: the lock is held across the check and the write.
    async def client_locked(self):
        async with self._lock:
            if self._client is None:
                self._client = await connect("https://api")
        return self._client

    # ok: double-checked with the re-check under the lock.
    async def client_double_checked(self):
        if self._client is None:
            async with self._lock:
                if self._client is None:
                    self._client = await connect("https://api")
        return self._client

    # The double check without the re-check: `async with` itself suspends.
    async def client_no_recheck(self):
        if self._client is None:
            async with self._lock:
                self._client = await connect("https://api")  # error: IL104
        return self._client

    async def cached(self, key):
        if key in self._cache:
            return self._cache[key]
        value = await self.fetch(key)
        self._cache[key] = value  # error: IL101
        return value

    # ok: the cached value is re-checked after the await.
    async def cached_rechecked(self, key):
        if key in self._cache:
            return self._cache[key]
        value = await self.fetch(key)
        if key in self._cache:
            return self._cache[key]
        self._cache[key] = value
        return value

    # ok: dict.setdefault is an atomic get-or-insert.
    async def cached_setdefault(self, key):
        value = await self.fetch(key)
        return self._cache.setdefault(key, value)

    async def cached_via_get(self, key):
        entry = self._cache.get(key)
        if entry is None:
            entry = await self.fetch(key)
            self._cache[key] = entry  # error: IL101
        return entry

    async def admit(self, job):
        if self._inflight >= self.max_inflight:
            return False
        await self.reserve(job)
        self._inflight += 1  # error: IL101
        return True

    # ok: the counter is incremented before the await.
    async def admit_first(self, job):
        if self._inflight >= self.max_inflight:
            return False
        self._inflight += 1
        await self.reserve(job)
        return True

    # ok: the write (self.sent) does not depend on the check (self.closed).
    async def send(self, message):
        if self.closed:
            return
        await self.transport.write(message)
        self.sent += 1

    async def flush(self):
        if self.memory:
            await self.store.save(list(self.memory))
            self.memory.clear()  # error: IL101

    # ok: locals are not shared state.
    async def build(self):
        parts = []
        if not parts:
            parts.append(await self.fetch("head"))
        return parts

    # ok: acquire/release in try/finally covers both.
    async def client_manual_lock(self):
        await self._lock.acquire()
        try:
            if self._client is None:
                self._client = await connect("https://api")
        finally:
            self._lock.release()
        return self._client

    # ok: the `finally` releases the lock, so the `try` runs with it held, whatever helper
    # took it (releasing an unheld lock raises).
    async def client_lock_helper(self):
        if not await self._acquire_within(self._lock, 5):
            return None
        try:
            if self._client is None:
                self._client = await connect("https://api")
        finally:
            self._lock.release()
        return self._client

    async def client_checked_before_the_lock(self):
        if self._client is None:
            if not await self._acquire_within(self._lock, 5):
                return None
            try:
                self._client = await connect("https://api")  # error: IL104
            finally:
                self._lock.release()
        return self._client

    async def _acquire_within(self, lock, timeout):
        try:
            await asyncio.wait_for(lock.acquire(), timeout)
        except TimeoutError:
            return False
        return True

    async def step(self, request):
        await asyncio.sleep(0)

    async def load_tools(self):
        await asyncio.sleep(0)

    async def fetch(self, key):
        await asyncio.sleep(0)
        return key

    async def reserve(self, job):
        await asyncio.sleep(0)


class WorkflowExecutor:
    def __init__(self, max_concurrent):
        self.max_concurrent = max_concurrent
        self._semaphore = None

    # ok: seed 002's lazy _ensure_semaphore: no suspension point inside.
    async def _ensure_semaphore(self):
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrent)
        return self._semaphore


async def shared_client(url):
    if url not in _clients:
        _clients[url] = await connect(url)  # error: IL101
    return _clients[url]


# ok: the check sits in the loop that waits, so it is re-evaluated after every await.
async def wait_until_idle(agent):
    while agent.state != IDLE:
        await asyncio.sleep(0.1)
    agent.state = "claimed"


class Drainer:
    async def drain(self):
        while self.pending:
            item = self.pending[0]
            await self.handle(item)
            self.pending.pop(0)  # error: IL101


# ok: a parameter object is owned by the caller for the call (per-run state).
async def persist_input(run_state, session):
    if run_state.input_persisted:
        return
    await session.save(run_state.items)
    run_state.input_persisted = True


class Connection:
    # ok: resetting to None after an awaited teardown is idempotent.
    async def close(self):
        if self._ws is None:
            return
        await self._ws.close()
        self._ws = None

    # ok: the claim flag is set before the first await, guarding the other state in the test.
    async def connect(self):
        if self._connecting or self._ws is not None:
            raise RuntimeError("already connected")
        self._connecting = True
        try:
            self._ws = await self.open()
        finally:
            self._connecting = False

    # ok: the write re-validates a generation counter right before acting.
    async def refresh(self):
        if self._tools is None:
            generation = self._generation
            tools = await self.fetch_tools()
            if generation == self._generation:
                self._tools = tools
        return self._tools

    async def ensure(self):
        if self._ws is None:
            ws = await self.open()
            self._ws = ws  # error: IL104
        return self._ws


# ok: nothing suspends in this synchronous helper.
def reset(agent):
    if agent.state != IDLE:
        agent.state = IDLE


# ok: the check happens in a nested function that does not await.
async def outer(agent):
    def inner():
        if agent.task is None:
            agent.task = object()

    await asyncio.sleep(0)
    inner()


class EventSink:
    """Helpers that run with the lock their callers hold (openai-agents' workspace sink)."""

    def __init__(self):
        self._lock = asyncio.Lock()
        self._buf = bytearray()
        self._session = None
        self._token = None
        self._turns = 0

    async def handle(self, event):
        async with self._lock:
            self._buf.extend(event)
            await self._flush_buffer()

    async def close_soon(self):
        async with self._lock:
            await self._flush_buffer()

    # ok: every caller holds `self._lock` around the call.
    async def _flush_buffer(self):
        if not self._buf:
            return
        await self.write(bytes(self._buf))
        self._buf = bytearray()

    # ok: by its name, the caller holds the lock.
    async def _refresh_locked(self):
        if self._token is None:
            self._token = await self.fetch_token()

    async def _refresh_checked(self):
        # ok: it asserts that the lock is held.
        assert self._lock.locked()
        if self._token is None:
            self._token = await self.fetch_token()

    async def refresh(self):
        async with self._lock:
            await self._refresh_token()

    async def refresh_now(self):
        await self._refresh_token()

    async def _refresh_token(self):
        if self._token is None:
            self._token = await self.fetch_token()  # error: IL104

    async def ensure_session(self):
        async with self._lock:
            await self.connect_session()

    # A public method: callers in other modules need not hold the lock.
    async def connect_session(self):
        if self._session is None:
            self._session = await self.open()  # error: IL104

    # ok: a reset to zero is idempotent, like a reset to None.
    async def next_turn(self, limit):
        if self._turns >= limit:
            await self.signal_stop()
            self._turns = 0


class WebsocketModel:
    """The request lock is taken by hand, with a timeout on one path (openai-agents)."""

    def _get_request_lock(self):
        if self._request_lock is None:
            self._request_lock = asyncio.Lock()
        return self._request_lock

    async def stream(self, timeout):
        lock = self._get_request_lock()
        if timeout == 0:
            await lock.acquire()
        else:
            await asyncio.wait_for(lock.acquire(), timeout)
        try:
            return await self._ensure_connection()
        finally:
            lock.release()

    # ok: its only caller holds the request lock (acquired on both branches above).
    async def _ensure_connection(self):
        if self._ws is None:
            self._ws = await self.open()
        return self._ws

    async def stream_direct(self):
        return await self._ensure_other()

    async def _ensure_other(self):
        if self._other is None:
            self._other = await self.open()  # error: IL104
        return self._other


class JobRunner:
    """A runner that drives admission from its own background task (crewai's flow jobs)."""

    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    # ok: `_process_events` runs only as the runner's one background task, and no other
    # method writes `self.tasks`: nothing can change it while that task is suspended.
    async def _process_events(self):
        while True:
            job = await self._events.get()
            if job in self.tasks:
                continue
            await self.announce(job)
            self.tasks[job] = asyncio.create_task(self.work(job))

    async def announce(self, job):
        await asyncio.sleep(0)

    async def work(self, job):
        await asyncio.sleep(0)


class CancellableRunner:
    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    # ok: only this background task adds to `self.tasks`; `cancel` (any task, while the loop
    # is suspended) only removes, which cannot put `job` back, so the check that found it
    # absent still holds at the write. Explored with the harness
    # (tests/linters/test_eval_harness.py): every end state is one a serial order gives.
    async def _process_events(self):
        while True:
            job = await self._events.get()
            if job in self.tasks:
                continue
            await self.announce(job)
            self.tasks[job] = object()

    async def cancel(self, job):
        self.tasks.pop(job, None)

    async def announce(self, job):
        await asyncio.sleep(0)


class TwoLoopRunner:
    def __init__(self):
        self.tasks = {}
        self._a = asyncio.create_task(self._loop_a())
        self._b = asyncio.create_task(self._loop_b())

    # Two background tasks: each is driven by one task, but not the same one, so either can
    # insert while the other is suspended between its check and its write.
    async def _loop_a(self):
        while True:
            job = await self._qa.get()
            if job not in self.tasks:
                await asyncio.sleep(0)
                self.tasks[job] = "a"  # error: IL101

    async def _loop_b(self):
        while True:
            job = await self._qb.get()
            if job not in self.tasks:
                await asyncio.sleep(0)
                self.tasks[job] = "b"  # error: IL101


class LoopWithHelper:
    def __init__(self):
        self.tasks = {}
        self._task = asyncio.create_task(self._loop())

    # ok: the helper is only awaited from the one background loop: one task writes `tasks`.
    async def _loop(self):
        while True:
            job = await self._q.get()
            if job not in self.tasks:
                await asyncio.sleep(0)
                self.tasks[job] = "loop"
            await self._settle(job)

    async def _settle(self, job):
        if job in self.tasks:
            await asyncio.sleep(0)
            self.tasks[job] = "settled"


class SelfConsumer:
    def __init__(self):
        self._seen = {}

    def __aiter__(self):
        return self

    async def __anext__(self):
        item = await self._source.get()
        self._seen[item] = True
        return item

    # ok: this coroutine is the consumer that drives `__anext__`: both run in one task.
    async def run(self):
        async for item in self:
            if item not in self._seen:
                await asyncio.sleep(0)
                self._seen[item] = False


class RestoringRunner:
    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    async def _process_events(self):
        while True:
            job = await self._events.get()
            if job in self.tasks:
                continue
            await self.announce(job)
            self.tasks[job] = object()  # error: IL101

    # Any task can call this while the loop above is suspended, and it *adds*: the restored
    # entry is overwritten (the harness finds it under stock order).
    async def restore(self, job, task):
        self.tasks[job] = task

    async def announce(self, job):
        await asyncio.sleep(0)


class AliasingRunner:
    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    async def _process_events(self):
        while True:
            job = await self._events.get()
            if job in self.tasks:
                continue
            await asyncio.sleep(0)
            self.tasks[job] = object()  # error: IL101

    # `adopt` adds through a local alias: the container leaves the class's sight, and the
    # writers of `tasks` may add.
    async def adopt(self, job, task):
        tasks = self.tasks
        tasks[job] = task


class HandingOutRunner:
    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    async def _process_events(self):
        while True:
            job = await self._events.get()
            if job in self.tasks:
                continue
            await asyncio.sleep(0)
            self.tasks[job] = object()  # error: IL101

    # `running()` hands the dict itself to callers, who may add to it.
    def running(self):
        return self.tasks


class ReadingRunner:
    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    # ok: the other methods only read `tasks` (a copy, a view, a length, a loop) or remove
    # from it; none of that can add, so the absent job stays absent.
    async def _process_events(self):
        while True:
            job = await self._events.get()
            if job in self.tasks:
                continue
            await asyncio.sleep(0)
            self.tasks[job] = asyncio.create_task(asyncio.sleep(1))

    def running(self):
        return sorted(self.tasks) if self.tasks else []

    def count(self):
        return len(self.tasks)

    async def drain(self):
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        for job in list(self.tasks):
            self.tasks.pop(job, None)


class CappedClaimer:
    def __init__(self):
        self._in_flight = {}
        self._poller = asyncio.create_task(self._poll())

    async def _poll(self):
        while True:
            await self._claim_burst()
            await asyncio.sleep(1)

    # ok: only the poller adds; done callbacks and `stop` only remove, and removing cannot
    # take `len(self._in_flight)` back up to the cap.
    async def _claim_burst(self):
        while True:
            if len(self._in_flight) >= 4:
                break
            job = await claim()
            task = asyncio.create_task(run(job))
            self._in_flight[job] = task
            task.add_done_callback(lambda _t, j=job: self._in_flight.pop(j, None))

    async def stop(self):
        self._in_flight.clear()


class CappedClaimerWithSubmit(CappedClaimer):
    # `submit` adds from any task while the burst is suspended: the cap overfills.
    async def _claim_burst(self):
        while True:
            if len(self._in_flight) >= 4:
                break
            job = await claim()
            self._in_flight[job] = asyncio.create_task(run(job))  # error: IL101

    async def submit(self, job):
        self._in_flight[job] = asyncio.create_task(run(job))


class ExactCountClaimer:
    def __init__(self):
        self._in_flight = {}
        self._poller = asyncio.create_task(self._claim())

    # A removal can change `len(...) == 3` either way: nothing is known to hold.
    async def _claim(self):
        while True:
            if len(self._in_flight) == 3:
                return
            job = await claim()
            self._in_flight[job] = job  # error: IL101

    async def finish(self, job):
        self._in_flight.pop(job, None)


class PresenceRunner:
    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    # The check found `job` present; a concurrent `cancel` removes it, and the write puts
    # back an entry the cancel had taken out.
    async def _process_events(self):
        while True:
            job = await self._events.get()
            if job not in self.tasks:
                continue
            await self.announce(job)
            self.tasks[job] = "announced"  # error: IL101

    async def cancel(self, job):
        self.tasks.pop(job, None)

    async def announce(self, job):
        await asyncio.sleep(0)


class EitherWayRunner:
    def __init__(self):
        self.tasks = {}
        self._events = asyncio.Queue()
        self._event_task = asyncio.create_task(self._process_events())

    # One path found `job` absent, the other present: where they meet, neither holds.
    async def _process_events(self):
        while True:
            job, fresh = await self._events.get()
            if fresh:
                if job in self.tasks:
                    continue
            else:
                if job not in self.tasks:
                    continue
            await self.announce(job)
            self.tasks[job] = "announced"  # error: IL101

    async def cancel(self, job):
        self.tasks.pop(job, None)

    async def announce(self, job):
        await asyncio.sleep(0)


async def claim():
    await asyncio.sleep(0)
    return object()


async def run(job):
    await asyncio.sleep(0)


class ReentrantLock:
    def __init__(self):
        self._lock = asyncio.Lock()
        self._owner = None
        self._depth = 0

    # ok: the check asks whether this task already owns the lock. Every writer stores `None`
    # or its own `current_task()`, so no other task can make the owner this one while it
    # waits for the lock.
    async def __aenter__(self):
        task = asyncio.current_task()
        if self._owner is task:
            self._depth += 1
            return self
        await self._lock.acquire()
        self._owner = task
        self._depth = 1
        return self

    async def __aexit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()


class NestedCallGuard:
    def __init__(self):
        self._lock = anyio.Lock()
        self._holder = None

    # ok: anyio's TaskInfo compares equal only for the same task, and every writer stores
    # `None` or its own, so no other task can make the holder this one while it waits
    async def call(self, name):
        current = anyio.get_current_task()
        if self._holder == current:
            raise RuntimeError("nested call")
        async with self._lock:
            self._holder = current
            try:
                return await run(name)
            finally:
                self._holder = None


class SharedHolderGuard:
    def __init__(self):
        self._lock = anyio.Lock()
        self._holder = None

    # `adopt` stores a task info it was handed, which may be this task's.
    async def call(self, name):
        current = anyio.get_current_task()
        if self._holder == current:
            raise RuntimeError("nested call")
        async with self._lock:
            self._holder = current  # error: IL101
            await run(name)
            self._holder = None

    def adopt(self, info):
        self._holder = info


class ThreadOwnedAsyncLock:
    def __init__(self):
        self._lock = asyncio.Lock()
        self._owner = None

    # Every task on the loop has the same thread id: another task's acquire stores this id.
    async def acquire(self):
        me = threading.get_ident()
        if self._owner == me:
            return
        await self._lock.acquire()
        self._owner = me  # error: IL101

    def release(self):
        self._owner = None
        self._lock.release()


class HandoffLock:
    def __init__(self):
        self._owner = None
        self._waiters = []

    # `release` hands ownership to a waiting task, which may be this one.
    async def acquire(self):
        task = asyncio.current_task()
        if self._owner is task:
            return
        await asyncio.sleep(0)
        self._owner = task  # error: IL101

    def release(self):
        self._owner = self._waiters.pop(0) if self._waiters else None


class OwnerCheckedPresent:
    def __init__(self):
        self._owner = None

    # The check found the owner to be this task; another task's `steal` can undo that.
    async def renew(self):
        task = asyncio.current_task()
        if self._owner is not task:
            return
        await asyncio.sleep(0)
        self._owner = task  # error: IL101

    def steal(self):
        self._owner = None


class Batcher:
    def __init__(self):
        self._buf = []
        self._d = {}

    # The test only asked whether a local copy is `None`, and no other task can rebind the
    # local; but the append lands in the list `flush()` swapped out meanwhile, and the item is
    # lost (the harness finds it in two schedules). So a write through a copy is not exempt.
    async def add(self, item):
        buf = self._buf
        if buf is None:
            return
        await asyncio.sleep(0)
        buf.append(item)  # error: IL101

    async def flush(self):
        buf, self._buf = self._buf, []
        await asyncio.sleep(0)
        return buf

    # The local is read again, in a tuple, after the wait: it still holds `self._buf`.
    async def add_reread(self, item):
        buf = self._buf
        if buf is None:
            return
        await asyncio.sleep(0)
        buf, _ = self._buf, None
        buf.append(item)  # error: IL101

    # ok: the tuple assignment binds `found` to a new list, which holds no shared state (a
    # tuple target used to keep the local's stale alias).
    async def collect(self, key):
        found = self._d.get(key)
        if found is None:
            return
        await asyncio.sleep(0)
        found, count = [], 0
        found.append(count)


class WorkerPool:
    def __init__(self):
        self._workers = []
        for _ in range(4):
            self._workers.append(asyncio.create_task(self._work()))

    # Four workers run this at once: a collection of tasks is not one driver.
    async def _work(self):
        while True:
            if self._current is None:
                self._current = await connect("https://api")  # error: IL104

    def start(self):
        asyncio.create_task(self._sweep())

    # The task's handle is kept nowhere, so `start()` may start any number of them.
    async def _sweep(self):
        if self._swept is None:
            self._swept = await connect("https://sweep")  # error: IL104


class LiveStream:
    """Continuations sent from the receive loop only (pydantic-ai's realtime session)."""

    async def frames(self):
        async for frame in self._ws:
            self._queue_due(frame)
            yield frame
            await self._send_due()

    def _queue_due(self, frame):
        self._due.append(frame)

    # ok: called only from the stream's async generator, which one consumer drives, and
    # `_due` is written only by code that generator runs.
    async def _send_due(self):
        while self._due:
            await self.send(self._due[0])
            self._due.pop(0)

    async def flush_now(self):
        await self._send_other()

    async def _send_other(self):
        while self._other:
            await self.send(self._other[0])
            self._other.pop(0)  # error: IL101

    async def frames_other(self):
        async for frame in self._ws:
            yield frame
            await self._send_other()

    async def send(self, item):
        await asyncio.sleep(0)


class StreamedResult:
    """A result whose output is read by the stream's one consumer (pydantic-ai's AgentStream)."""

    def __aiter__(self):
        return self._events()

    async def _events(self):
        for event in self._raw:
            yield event

    # ok: it consumes the stream itself (`async for _ in self`), and only the stream's
    # consumer writes `_output`.
    async def get_output(self):
        if self._output is not None:
            return self._output
        async for _ in self:
            pass
        self._output = await self.validate()
        return self._output

    async def validate(self):
        await asyncio.sleep(0)
        return object()


class RevalidatedResult:
    def __aiter__(self):
        return self._events()

    async def _events(self):
        for event in self._raw:
            yield event

    async def get_output(self):
        if self._output is not None:
            return self._output
        async for _ in self:
            pass
        self._output = await self.validate()  # error: IL104
        return self._output

    # Not a consumer: any task can call it while `get_output` is suspended.
    async def revalidate(self):
        self._output = await self.validate()

    async def validate(self):
        await asyncio.sleep(0)
        return object()


class SkillCatalog:
    """Memoized plain data (openai-agents' skills capability)."""

    # ok: a memo of plain data: two tasks that both miss it build an equal sorted list, and
    # nothing mutates `_names` in place, so the second store drops a copy, not a resource.
    async def names(self, key):
        if self._names is not None and self._names_key == key:
            return self._names
        tools = await self.fetch_tools()
        self._names = sorted(tool.name for tool in tools)
        self._names_key = key
        return self._names

    # ok: a dict of plain data built by a comprehension from the awaited rows.
    async def index(self):
        if self._index is not None:
            return self._index
        rows = await self.fetch_tools()
        self._index = {row.name: row.size for row in rows}
        return self._index

    # Built in a comprehension, but each element is awaited: the elements may be resources.
    async def clients(self, urls):
        if self._clients is None:
            self._clients = [await connect(url) for url in urls]  # error: IL104
        return self._clients

    async def history(self):
        if self._history is None:
            rows = await self.fetch_tools()
            self._history = list(rows)  # error: IL101
        return self._history

    # Appends to `_history` made between the two stores above are lost with the first list.
    def record(self, row):
        self._history.append(row)

    async def workers(self):
        if self._workers is None:
            await self.spawn()
            self._workers = []  # error: IL104
        return self._workers

    async def fetch_tools(self):
        await asyncio.sleep(0)
        return []

    async def spawn(self):
        await asyncio.sleep(0)


_PRICES = None


# ok: a module-level memo of plain data built from the awaited rows: a duplicate only
# repeats the fetch.
async def prices():
    global _PRICES
    if _PRICES is None:
        rows = await fetch_rows()
        _PRICES = {row["id"]: row["price"] for row in rows}
    return _PRICES


async def fetch_rows():
    await asyncio.sleep(0)
    return []


class ChatDirectory:
    """Keyed caches (agentscope's Feishu channel): what a duplicate store replaces."""

    def __init__(self):
        self._names = {}
        self._kinds = {}
        self._members = {}
        self._sessions = {}
        self._raw = None
        self._seen = {}
        self._peers = {}
        self._opened = None

    # ok: a keyed memo of data derived from the response (a `.get` chain, `str()`): a second
    # task that also missed it stores an equal name under the same key, and nothing mutates
    # the cached names in place.
    async def chat_name(self, chat_id):
        cached = self._names.get(chat_id)
        if cached:
            return cached
        data = await self.api(chat_id)
        name = str((data or {}).get("data", {}).get("name", "") or "")
        if name:
            self._names[chat_id] = name
        return name

    # ok: evicting an entry removes it from the cache; it does not change a cached name.
    def forget(self, chat_id):
        self._names.pop(chat_id, None)

    # ok: a projection of a response stored whole (`result.tools`): no object is created.
    async def raw_tools(self):
        if self._raw is not None:
            return self._raw
        result = await self.api("tools")
        self._raw = result.tools
        return self._raw

    # ok: a TTL cache entry: the clock read and the peers filtered from the response are
    # data; a second task stores an equal list with a later time.
    async def peers(self, channel):
        now = time.monotonic()
        cached = self._peers.get(channel)
        if cached and now - cached[0] < 30:
            return cached[1]
        names = await self.api(channel)
        peers = [n for n in names if n.startswith(channel)]
        self._peers[channel] = (now, peers)
        return peers

    # A timestamp stored alone marks that something was done (a start), not a memo.
    async def open(self, chat_id):
        if self._opened is None:
            await self.api(chat_id)
            self._opened = time.monotonic()  # error: IL104

    # The cached lists are appended to below: the first task's list, and what was appended
    # to it during the await, is replaced.
    async def members(self, chat_id):
        if chat_id not in self._members:
            data = await self.api(chat_id)
            self._members[chat_id] = [m.get("id") for m in data]  # error: IL101
        return self._members[chat_id]

    def joined(self, chat_id, member):
        entry = self._members[chat_id]
        entry.append(member)

    # The value is the awaited object itself: a session a duplicate would leak.
    async def session(self, chat_id):
        if chat_id not in self._sessions:
            session = await self.api(chat_id)
            self._sessions[chat_id] = session  # error: IL101
        return self._sessions[chat_id]

    # ok: a bounded keyed memo: the size is measured to evict, after the await, not in the
    # check; the entry stored is data read out of the response.
    async def union_id(self, user_id):
        cached = self._kinds.get(user_id)
        if cached:
            return cached
        detail = await self.api(user_id)
        union = str((detail or {}).get("union_id") or "")
        if len(self._kinds) >= 100:
            self._kinds.pop(next(iter(self._kinds)))
        self._kinds[user_id] = union
        return union

    # A capacity check, not a memo: two tasks storing under different keys both pass it.
    async def remember(self, chat_id):
        if len(self._names) < 100:
            data = await self.api(chat_id)
            name = str(data.get("name", ""))
            self._names[chat_id] = name  # error: IL101

    # A constant is a mark that something was done, not a memo: the act runs twice.
    async def greet(self, chat_id):
        if chat_id not in self._seen:
            await self.api(chat_id)
            self._seen[chat_id] = True  # error: IL101

    # The value derives from a parameter: two callers with different kinds race, and the
    # first one's is lost.
    async def set_kind(self, chat_id, kind):
        if chat_id not in self._kinds:
            await self.api(chat_id)
            self._kinds[chat_id] = kind  # error: IL101

    async def api(self, what):
        await asyncio.sleep(0)
        return {}

    async def spawn_unused(self):
        await asyncio.sleep(0)
