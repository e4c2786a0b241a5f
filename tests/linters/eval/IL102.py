"""IL102 eval: unlocked check-then-act in code shared between threads.

Every expected finding carries a trailing ``# error: IL102`` on the line of the write.
Negatives are named in a comment starting with ``# ok:``.
"""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

_container = None
_container_lock = threading.Lock()
_settings = None
_registry = {}


class Container:
    pass


def get_container_unsafe():
    global _container
    if _container is None:
        _container = Container()  # error: IL102
    return _container


# ok: seed 002's double-checked locking, with the re-check inside the lock.
def get_container():
    global _container
    if _container is None:
        with _container_lock:
            if _container is None:
                _container = Container()
    return _container


def get_container_no_recheck():
    global _container
    if _container is None:
        with _container_lock:
            _container = Container()  # error: IL102
    return _container


# ok: check and write both inside one `with` of the lock.
def get_settings():
    global _settings
    with _container_lock:
        if _settings is None:
            _settings = {"debug": False}
        return _settings


_registry_lock = threading.Lock()


def register(name, factory):
    if name not in _registry:
        _registry[name] = factory()  # error: IL102


def unregister(name):
    with _registry_lock:
        _registry.pop(name, None)


# ok: dict.setdefault is the atomic get-or-insert.
def register_atomic(name, factory):
    return _registry.setdefault(name, factory())


@dataclass
class ErrorHistory:
    plan_id: str
    records: list = field(default_factory=list)

    def add(self, record):
        self.records.append(record)


class ErrorRecoveryService:
    """Seed 003: a DI singleton whose error counters are guarded by a threading lock."""

    def __init__(self):
        self._histories = {}
        self._stats_lock = threading.Lock()
        self._errors_seen = 0
        self._executor = ThreadPoolExecutor(max_workers=4)

    def record_error(self, plan_id, error):
        history = self._get_or_create_history(plan_id)
        history.add(error)
        with self._stats_lock:
            self._errors_seen += 1

    def _get_or_create_history(self, plan_id):
        """Get or create an error history for a plan."""
        if plan_id not in self._histories:
            self._histories[plan_id] = ErrorHistory(plan_id=plan_id)  # error: IL102
        return self._histories[plan_id]

    # ok: the suggested fix from the report.
    def _get_or_create_history_setdefault(self, plan_id):
        return self._histories.setdefault(plan_id, ErrorHistory(plan_id=plan_id))

    # ok: the lock is held across the membership test and the insert.
    def _get_or_create_history_locked(self, plan_id):
        with self._stats_lock:
            if plan_id not in self._histories:
                self._histories[plan_id] = ErrorHistory(plan_id=plan_id)
            return self._histories[plan_id]

    def _get_history_via_get(self, plan_id):
        history = self._histories.get(plan_id)
        if history is None:
            history = ErrorHistory(plan_id=plan_id)
            self._histories[plan_id] = history  # error: IL102
        return history

    # ok: locals are never shared.
    def summarize(self, plan_ids):
        counts = {}
        for plan_id in plan_ids:
            if plan_id not in counts:
                counts[plan_id] = 0
            counts[plan_id] += 1
        return counts

    # ok: the write does not depend on a check.
    def reset(self):
        self._histories = {}


class Worker:
    def __init__(self):
        self._thread = None
        self._stopped = False

    def start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop)  # error: IL102
            self._thread.start()

    # ok: a benign race: both threads store True and do nothing else (this was a positive
    # before IL102 learned that idempotent stores are benign)
    def stop(self):
        if not self._stopped:
            self._stopped = True

    def restart(self):
        if not self._stopped:
            self._stopped = True  # error: IL102
            self._thread = threading.Thread(target=self._loop)
            self._thread.start()

    def _loop(self):
        pass


# ok: no evidence of threads in this class (no lock, thread or executor).
class PlainCache:
    def __init__(self):
        self._items = {}

    def get(self, key, make):
        if key not in self._items:
            self._items[key] = make()
        return self._items[key]


# ok: async methods are IL101's business, not IL102's.
class AsyncPart:
    def __init__(self):
        self._lock = threading.Lock()
        self._conn = None

    async def connect(self):
        if self._conn is None:
            self._conn = object()
        return self._conn


# ok: handing an unrelated function to a thread says nothing about this class's own state.
class Loader:
    def __init__(self):
        self._parsed = None

    async def load(self, path):
        return await asyncio.to_thread(read_file, path)

    def parsed(self, text):
        if self._parsed is None:
            self._parsed = text.split()
        return self._parsed


def read_file(path):
    with open(path) as f:
        return f.read()


# --- RacerD-style evidence: what the locks guard, and who holds them ---------------------------


class TraceBatches:
    """The lock guards the current batch; the counters are touched only by the owner thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._drained = threading.Condition()
        self._batch = None
        self._pending = 0
        self._timer = None
        self._export_at = 0.0
        self._warned = False
        self._buffer = []
        self._seen = set()

    def begin(self, batch):
        with self._lock:
            if self._batch is None:
                self._batch = batch

    def finalize(self):
        if self._batch is not None:
            self._send(self._batch)
            self._batch = None  # error: IL102

    def _send(self, batch):
        pass

    def begin_event(self):
        with self._drained:
            self._pending += 1

    def end_event_unlocked(self):
        # ok: `with self._drained:` elsewhere shows a Condition guards `_pending`, but this
        # helper is named for a caller that holds it
        if self._pending > 0:
            self._pending -= 1

    def wait_idle(self):
        if self._pending == 0:
            self._pending = -1  # error: IL102
            self._send(None)

    # ok: `_export_at` is never touched under a lock: confined to the owner thread (RacerD)
    def tick(self, now):
        if now >= self._export_at:
            self._export_at = now + 5.0
            self._send(None)

    def _schedule(self):
        self._timer = threading.Timer(60.0, self._send, args=(None,))

    def start(self):
        with self._lock:
            self._schedule()

    def stop(self):
        if self._timer:
            self._timer.cancel()
            self._timer = None  # error: IL102

    def flush(self):
        with self._lock:
            return self._flush_if_needed()

    # ok: every caller holds the lock (`flush` above)
    def _flush_if_needed(self):
        if self._batch is not None:
            self._send(self._batch)
            self._batch = None
        return self._drop_if_needed()

    # ok: called only from `_flush_if_needed`, whose caller holds the lock
    def _drop_if_needed(self):
        if self._batch is None:
            self._batch = object()

    # ok: by its name, the caller holds the lock
    def _reset_locked(self):
        if self._batch is not None:
            self._batch = object()

    def _reset_asserted(self):
        # ok: it checks that the lock is held
        assert self._lock.locked()
        if self._batch is not None:
            self._batch = object()

    def warn_once(self):
        with self._lock:
            warned = self._warned
        # ok: a benign race: both threads store True; logging twice is harmless
        if not warned and not self._warned:
            self._warned = True
            logger.warning("batch is slow")

    def clear_buffer(self):
        with self._lock:
            self._buffer.append(None)
        # ok: clearing twice leaves the same empty buffer
        if self._buffer:
            self._buffer.clear()

    def send_buffer(self):
        if self._buffer:
            self._send(list(self._buffer))
            self._buffer.clear()  # error: IL102

    def remember(self, key):
        with self._lock:
            self._seen.discard(None)
        # ok: the check only finds the set present; adding does not rely on anything else
        if self._seen is not None:
            self._seen.add(key)

    def remember_first(self, key):
        if not self._seen:
            self._seen.add(key)  # error: IL102

    def peek_batch(self):
        return self._get_batch()

    def locked_batch(self):
        with self._lock:
            return self._get_batch()

    def _get_batch(self):
        if self._batch is None:
            self._batch = object()  # error: IL102
        return self._batch


class RateLimiter:
    """crewai's RPM controller: the lock is taken around a closure that touches `_timer`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._timer = None
        self._count = 0

    def reset(self):
        def _reset():
            self._count = 0
            self._timer = threading.Timer(60.0, self.reset)
            self._timer.start()

        with self._lock:
            _reset()

    def stop(self):
        if self._timer:
            self._timer.cancel()
            self._timer = None  # error: IL102


class Inbox:
    """A fast-path emptiness check outside the lock, the work under it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items = []

    def put(self, item):
        with self._lock:
            self._items.append(item)

    # ok: the drain reads `_items` again under the lock before clearing it
    def drain(self, into):
        if self._items:
            with self._lock:
                into.extend(self._items)
                self._items.clear()

    def take_first(self):
        if self._items:
            with self._lock:
                return self._items.pop(0)  # error: IL102


logger = None


class Dispatcher:
    """Locks taken through a helper that gives up at a deadline, released in `finally`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._worker = None
        self._closed = False

    @staticmethod
    def _acquire_before(lock, deadline):
        return lock.acquire(timeout=deadline)

    def post(self, item):
        with self._lock:
            if self._closed:
                return False
            item.send()
            return True

    # ok: the `finally` releases `_close_lock`, so the `try` runs with it held, however the
    # helper acquired it (releasing an unheld lock raises).
    def close(self, deadline):
        if not self._acquire_before(self._close_lock, deadline):
            return
        try:
            if self._closed:
                return
            self._worker = None
            self._closed = True
        finally:
            self._close_lock.release()

    # ok: the same through `lock.acquire()` inside the `if`, released in `finally`.
    def start(self, deadline):
        if self._lock.acquire(timeout=deadline):
            try:
                if self._worker is None:
                    self._worker = threading.Thread(target=print)
            finally:
                self._lock.release()

    def close_checked_outside(self, deadline):
        if self._closed:
            return
        if not self._acquire_before(self._close_lock, deadline):
            return
        try:
            self._closed = True  # error: IL102
        finally:
            self._close_lock.release()

    def start_maybe_released(self, deadline):
        took = self._acquire_before(self._lock, deadline)
        try:
            if self._worker is None:
                self._worker = threading.Thread(target=print)  # error: IL102
        finally:
            if took:
                self._lock.release()


class ReentrantThreadLock:
    def __init__(self):
        self._block = threading.Lock()
        self._owner = None
        self._count = 0

    # ok: the check asks whether this thread already owns the lock. Every writer stores
    # `None` or its own `get_ident()`, so no other thread can make the owner this one.
    def acquire(self):
        me = threading.get_ident()
        if self._owner == me:
            self._count += 1
            return
        self._block.acquire()
        self._owner = me
        self._count = 1

    def release(self):
        self._count -= 1
        if self._count == 0:
            self._owner = None
            self._block.release()


class HandoffThreadLock:
    def __init__(self):
        self._block = threading.Lock()
        self._owner = None
        self._next = None

    # `handoff` stores another thread's id, which may be this thread's.
    def acquire(self):
        me = threading.get_ident()
        if self._owner == me:
            return
        self._block.acquire()
        self._owner = me  # error: IL102

    def handoff(self):
        with self._block:
            self._owner = self._next


class PriceBook:
    """A class that takes its lock for reads as well as writes (as code that locks
    everything does): only state written under the lock is what the lock guards."""

    def __init__(self):
        self._lock = threading.Lock()
        self._rates = {}
        self._mode = None
        self._loaded = None

    # ok: a keyed memo of data derived from the source (`float(row.get(...))`): two threads
    # that both miss it store an equal rate, and nothing mutates a cached rate in place.
    def rate(self, code):
        if code not in self._rates:
            row = self.source(code)
            rate = float(row.get("rate", 0))
            self._rates[code] = rate
        return self._rates[code]

    def reset(self):
        with self._lock:
            self._rates.clear()

    def describe(self):
        with self._lock:
            return f"{self._mode}: {len(self._rates)} rates"

    # ok: `_mode` is read under the lock but never written under it: the lock is not what
    # keeps it consistent, and nothing shows another thread sets it.
    def set_mode(self, mode):
        if self._mode is None:
            self._mode = mode

    def load(self):
        if self._loaded is None:
            self._loaded = self.source("all")  # error: IL102

    def reload(self):
        with self._lock:
            self._loaded = self.source("all")

    def source(self, code):
        return {"rate": 1.0, "code": code}
