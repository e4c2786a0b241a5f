# Eval file for IL201 asyncio-primitive-in-init (see tests/linters/test_eval_files.py).
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


@dataclass
class Settings:
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # error: IL201
    queue: asyncio.Queue[int] = field(default_factory=lambda: asyncio.Queue(maxsize=10))  # error: IL201
    sem: asyncio.Semaphore = field(default_factory=functools.partial(aio.Semaphore, 4))  # error: IL201

    def __post_init__(self) -> None:
        self.lock = asyncio.Lock()  # error: IL201


@attr.s
class AttrsSettings:
    lock = attr.ib(factory=asyncio.Lock)  # error: IL201
    event = attr.ib(default=attr.Factory(asyncio.Event))  # error: IL201


def default_lock(lock=asyncio.Lock()):  # error: IL201
    return lock


# --- negatives ---------------------------------------------------------------------------------


class Lazy:
    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._queue: "asyncio.Queue[int] | None" = None
        self._sem: Semaphore | None = None

    async def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._sem = asyncio.Semaphore(2)


class Threads:
    lock = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._cond = threading.Condition()
        self._sem = threading.BoundedSemaphore(2)


def factory() -> asyncio.Lock:
    return asyncio.Lock()


class Builder:
    def __init__(self) -> None:
        def later() -> asyncio.Event:
            return asyncio.Event()

        async def also_later() -> None:
            self.ev = asyncio.Event()

        self.make = later
        self.make_lock = lambda: asyncio.Lock()
        self.waiter = asyncio.create_task
        self.loop_exc = asyncio.CancelledError()
        self.timeout = asyncio.Timeout(None)


async def main() -> None:
    lock = asyncio.Lock()
    queue: asyncio.Queue[int] = asyncio.Queue()

    class Local:
        def method(self) -> None:
            self.ev = asyncio.Event()

    async with lock:
        await queue.put(1)


@dataclass
class Annotated:
    lock: asyncio.Lock | None = None
    event: "asyncio.Event | None" = field(default=None)
    names: list[str] = field(default_factory=list)


def not_init_method() -> None:
    class Inner:
        def __init__(self) -> None:
            self.plain = dict()


from threading import Lock  # noqa: E402

REBOUND = Lock()
SUPPRESSED = asyncio.Lock()  # noqa: IL201
ALSO_SUPPRESSED = asyncio.Event()  # noqa


class Singleton:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()  # error: IL201


INSTANCE = Singleton()


if __name__ == "__main__":
    # target py311: one asyncio.run() owns it; binding is lazy since 3.10
    QUEUE = asyncio.Queue()
    asyncio.run(main())


class Cached:
    def __init__(self) -> None:
        self.ready = asyncio.Event()  # error: IL201


@functools.cache
def get_cached() -> Cached:
    return Cached()
