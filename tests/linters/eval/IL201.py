# Eval file for IL201 asyncio-primitive-in-init (see tests/linters/test_eval_files.py).
# Target py311 (the default): a per-instance primitive is reported only when this file shows
# the object outliving one event loop; module-level and class-body primitives always.
import asyncio
import asyncio as aio
import asyncio.locks
import functools
import threading
from asyncio import Event as AEvent
from asyncio import Queue, locks, queues
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import attr
import pytest

if TYPE_CHECKING:
    from asyncio import Semaphore

# --- positives ---------------------------------------------------------------------------------

MODULE_LOCK = asyncio.Lock()  # error: IL201
MODULE_QUEUE: "asyncio.Queue[int]" = Queue()  # error: IL201
LOCKS = [asyncio.Lock() for _ in range(3)]  # error: IL201
if True:
    GUARD = aio.Semaphore(3)  # error: IL201


class Service:
    shared_event = AEvent()  # error: IL201

    def __init__(self, limit: int) -> None:
        self._lock = asyncio.Lock()  # error: IL201
        self._sem = aio.BoundedSemaphore(limit)  # error: IL201
        self._cond = asyncio.Condition(  # error: IL201
            self._lock
        )
        self._pq = asyncio.PriorityQueue()  # error: IL201
        self._lq = queues.LifoQueue()  # error: IL201
        self._barrier = asyncio.Barrier(2)  # error: IL201
        self._other = locks.Event()  # error: IL201
        self._dotted = asyncio.locks.Lock()  # error: IL201
        if limit > 1:
            self._extra = asyncio.Queue(maxsize=limit)  # error: IL201


SERVICE = Service(4)  # evidence: instantiated at module level


@dataclass
class Settings:
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # error: IL201
    queue: asyncio.Queue[int] = field(default_factory=lambda: asyncio.Queue(maxsize=10))  # error: IL201
    sem: asyncio.Semaphore = field(default_factory=functools.partial(aio.Semaphore, 4))  # error: IL201

    def __post_init__(self) -> None:
        self.lock = asyncio.Lock()  # error: IL201


@functools.lru_cache(maxsize=None)
def settings() -> Settings:  # evidence: a cached factory
    return Settings()


@attr.s
class AttrsSettings:
    lock = attr.ib(factory=asyncio.Lock)  # error: IL201
    event = attr.ib(default=attr.Factory(asyncio.Event))  # error: IL201


_ATTRS_SETTINGS: dict[str, AttrsSettings] = {}


def attrs_settings(key: str) -> AttrsSettings:  # evidence: a module-level cache
    if key not in _ATTRS_SETTINGS:
        _ATTRS_SETTINGS[key] = AttrsSettings()
    return _ATTRS_SETTINGS[key]


def default_lock(lock=asyncio.Lock()):  # error: IL201
    return lock


# --- negatives ---------------------------------------------------------------------------------


class Lazy:
    def __init__(self) -> None:
        # ok: only annotations name the primitives
        self._lock: asyncio.Lock | None = None
        # ok: a string annotation
        self._queue: "asyncio.Queue[int] | None" = None
        # ok: a name imported only under TYPE_CHECKING
        self._sem: Semaphore | None = None

    async def lock(self) -> asyncio.Lock:
        if self._lock is None:
            # ok: created lazily, inside the running loop
            self._lock = asyncio.Lock()
        return self._lock

    async def start(self) -> None:
        # ok: created in an async method
        self._queue = asyncio.Queue()
        # ok: the same
        self._sem = asyncio.Semaphore(2)


LAZY = Lazy()


class Threads:
    # ok: threading primitives are not bound to an event loop
    lock = threading.Lock()

    def __init__(self) -> None:
        # ok: threading.Lock
        self._lock = threading.Lock()
        # ok: threading.Event
        self._event = threading.Event()
        # ok: threading.Condition
        self._cond = threading.Condition()
        # ok: threading.BoundedSemaphore
        self._sem = threading.BoundedSemaphore(2)


THREADS = Threads()


# ok: a plain function runs wherever it is called, usually inside the loop
def factory() -> asyncio.Lock:
    return asyncio.Lock()


class Builder:
    def __init__(self) -> None:
        # ok: a nested function runs later, not in `__init__`
        def later() -> asyncio.Event:
            return asyncio.Event()

        # ok: a nested coroutine
        async def also_later() -> None:
            self.ev = asyncio.Event()

        self.make = later
        # ok: a lambda runs later
        self.make_lock = lambda: asyncio.Lock()
        # ok: not a primitive
        self.waiter = asyncio.create_task
        # ok: an exception, not a primitive
        self.loop_exc = asyncio.CancelledError()
        # ok: asyncio.Timeout is not a synchronization primitive
        self.timeout = asyncio.Timeout(None)


async def main() -> None:
    # ok: created inside the running loop
    lock = asyncio.Lock()
    # ok: the same, annotated
    queue: asyncio.Queue[int] = asyncio.Queue()

    class Local:
        def method(self) -> None:
            # ok: a method of a class defined in a coroutine, not `__init__`
            self.ev = asyncio.Event()

    async with lock:
        await queue.put(1)


@dataclass
class Annotated:
    # ok: an annotation with a None default
    lock: asyncio.Lock | None = None
    # ok: field(default=None)
    event: "asyncio.Event | None" = field(default=None)
    # ok: default_factory of a plain list
    names: list[str] = field(default_factory=list)


ANNOTATED = Annotated()


def not_init_method() -> None:
    class Inner:
        def __init__(self) -> None:
            # ok: not a primitive at all
            self.plain = dict()


from threading import Lock  # noqa: E402

# ok: `Lock` now names threading.Lock
REBOUND = Lock()
# ok: suppressed with the code
SUPPRESSED = asyncio.Lock()  # noqa: IL201
# ok: suppressed with a bare noqa
ALSO_SUPPRESSED = asyncio.Event()  # noqa


class Singleton:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()  # error: IL201


INSTANCE = Singleton()


if __name__ == "__main__":
    # ok: target py311: one asyncio.run() owns it; binding is lazy since 3.10
    QUEUE = asyncio.Queue()
    asyncio.run(main())


class Cached:
    def __init__(self) -> None:
        self.ready = asyncio.Event()  # error: IL201


@functools.cache
def get_cached() -> Cached:
    return Cached()


# --- per-instance primitives on Python 3.10+ without evidence that the object outlives a loop ---


class PerRun:
    def __init__(self) -> None:
        # ok: built only inside a coroutine below
        self.done = asyncio.Event()
        # ok: the same object, a queue
        self.items: asyncio.Queue[int] = asyncio.Queue()


async def run_once() -> None:
    per_run = PerRun()
    await per_run.items.put(1)


@dataclass
class StreamResult:
    # ok: a per-run result; nothing keeps it beyond its loop
    finished: asyncio.Event = field(default_factory=asyncio.Event)


class Owner:
    def attach(self) -> None:
        # ok: stored on another instance, not at module level
        self.result = StreamResult()


def local_cache() -> None:
    cache: dict[str, PerRun] = {}
    # ok: a local dict, not a module-level cache
    cache["k"] = PerRun()


@functools.cache
def cached_name() -> str:
    # ok: the cached factory returns something else
    return "PerRun"


class Session:
    def __init__(self) -> None:
        # ok: a function-scoped fixture builds a new one per test (and per loop)
        self.lock = asyncio.Lock()


@pytest.fixture
def session() -> Session:
    return Session()


class Registry:
    _instance = None

    def __init__(self) -> None:
        self.lock = asyncio.Lock()  # error: IL201

    @classmethod
    def get(cls) -> "Registry":  # evidence: a class-level singleton
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


_default_pool = None


class Pool:
    def __init__(self) -> None:
        self.slots = asyncio.Semaphore(4)  # error: IL201


def default_pool() -> Pool:  # evidence: kept in a module-level global
    global _default_pool
    if _default_pool is None:
        _default_pool = Pool()
    return _default_pool
