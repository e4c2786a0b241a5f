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


def register(name, factory):
    if name not in _registry:
        _registry[name] = factory()  # error: IL102


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

    def stop(self):
        if not self._stopped:
            self._stopped = True  # error: IL102

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
