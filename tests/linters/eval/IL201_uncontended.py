# Eval file for IL201: Locks and Semaphores that nothing can make wait (target py311).
# A free Lock makes a task wait only while another task holds it across a suspension point. A
# private Lock whose every use is `async with` over a body that never suspends is never
# contended, never waits and never binds to an event loop, so it is not reported. This module
# shows no sign of threads (a thread could hold the lock while another thread's loop waits).
import asyncio
import asyncio as aio

_SEEN: set[str] = set()

# --- negatives ---------------------------------------------------------------------------------

# ok: every critical section is free of suspension points
_SEEN_LOCK = asyncio.Lock()
# ok: a Semaphore that starts free, used the same way
_SLOTS = aio.Semaphore(2)
# ok: `value=` spelled out
_GATE = asyncio.BoundedSemaphore(value=1)
# ok: never used at all
_UNUSED = asyncio.Lock()
# ok: a Semaphore with the default value 1
_ONE = asyncio.Semaphore()
# ok: bound to a name by `as`, still released before anything suspends
_AS = asyncio.Lock()
# ok: a nested coroutine defined under the lock does not run under it
_NESTED = asyncio.Lock()
# ok: raising out of the critical section releases it at once
_RAISING = asyncio.Lock()


async def first_time(key: str) -> bool:
    async with _SEEN_LOCK:
        if key in _SEEN:
            return False
        _SEEN.add(key)
        return True


async def count() -> int:
    async with _SLOTS, _GATE:
        return len(_SEEN)


def busy() -> bool:
    return _SEEN_LOCK.locked()


async def one_and_as() -> int:
    async with _ONE, _AS as held:
        return int(held)


async def nested() -> None:
    async with _NESTED:

        async def later() -> None:
            await asyncio.sleep(0)

        _SEEN.add(later.__name__)


async def raising(key: str) -> None:
    async with _RAISING:
        if key in _SEEN:
            raise KeyError(key)


class Registry:
    # ok: class attribute used only without suspending
    _class_lock = asyncio.Lock()

    def __init__(self) -> None:
        # ok: the instance is kept at module level, but no critical section suspends
        self._lock = asyncio.Lock()
        self._items: dict[str, int] = {}

    async def put(self, key: str, value: int) -> None:
        async with self._lock, self._class_lock:
            self._items[key] = value

    async def size(self) -> int:
        # ok: the class attribute named through the class
        async with Registry._class_lock:
            return len(self._items)

    def reset(self) -> None:
        # ok: storing a new Lock is not a use
        self._lock = asyncio.Lock()


REGISTRY = Registry()

# --- positives ---------------------------------------------------------------------------------

_HELD = asyncio.Lock()  # error: IL201
_PASSED = asyncio.Lock()  # error: IL201
_ACQUIRED = asyncio.Lock()  # error: IL201
_IN_GENERATOR = asyncio.Lock()  # error: IL201
PUBLIC = asyncio.Lock()  # error: IL201
_CLOSED = asyncio.Semaphore(0)  # error: IL201
_SIZED = asyncio.Semaphore(_SEEN.__len__())  # error: IL201
_EVENT = asyncio.Event()  # error: IL201


async def held() -> None:
    async with _HELD:
        await asyncio.sleep(0)


async def passed() -> asyncio.Condition:
    return asyncio.Condition(_PASSED)


async def acquired() -> None:
    await _ACQUIRED.acquire()
    _ACQUIRED.release()


async def in_generator():
    async with _IN_GENERATOR:
        yield 1


async def public() -> None:
    async with PUBLIC:
        _SEEN.clear()


async def closed() -> None:
    async with _CLOSED, _SIZED:
        _SEEN.clear()


class Slow:
    _shared = asyncio.Lock()  # error: IL201

    def __init__(self) -> None:
        self._send_lock = asyncio.Lock()  # error: IL201

    async def send(self) -> None:
        async with self._send_lock:
            await asyncio.sleep(0)

    async def other(self) -> None:
        async with Slow._shared:
            async for _ in in_generator():
                pass


SLOW = Slow()
