"""The agent's output stream and a loop-agnostic completion signal.

Neither class creates an asyncio object at construction: a future is created on the running loop
only when a caller has to wait, so one instance can be used under one ``asyncio.run`` and then
another (an ``asyncio.Queue`` or ``asyncio.Event`` created in ``__init__`` binds to the first loop
that waits on it and fails under the second).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Final, Generic, TypeVar

__all__ = (
    "OutputStream",
    "Signal",
    "StreamClosedError",
    "StreamEndedError",
)

T = TypeVar("T")


class StreamClosedError(RuntimeError):
    """``put()`` was called on an :class:`OutputStream` that its producer already closed."""


class StreamEndedError(Exception):
    """``get()`` found the :class:`OutputStream` closed and drained: no item will ever come."""


class _End:
    """The marker a waiting getter receives when the stream is closed under it."""


_END: Final = _End()


class OutputStream(Generic[T]):
    """A multi-consumer stream of items that delivers each item exactly once, in order.

    One producer calls :meth:`put` and finally :meth:`close`; any number of consumers call
    :meth:`get` or iterate with ``async for``. Guarantees:

    * every item put is delivered to exactly one consumer, and a single consumer sees the items
      in the order they were put;
    * consumers that wait are served first come, first served: an item goes straight to the
      longest-waiting consumer (no barging, so no consumer starves while others keep up);
    * a consumer may start before the producer; iteration ends once the stream is closed *and*
      drained;
    * a consumer cancelled while waiting loses nothing: an item already handed to it goes back to
      the front of the stream (or to the next waiting consumer). No helper task is ever created,
      so none can leak.

    All methods must be called from the thread running the event loop of the waiting consumers.
    Invariant: ``_getters`` holds pending futures only while ``_items`` is empty.
    """

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._getters: deque[asyncio.Future[T | _End]] = deque()
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether the producer has closed the stream (items may still be pending)."""
        return self._closed

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        """Append ``item``, handing it directly to the longest-waiting consumer if there is one.

        Not a schedule point: it never waits.

        Raises:
            StreamClosedError: The stream was closed.
        """
        if self._closed:
            raise StreamClosedError(
                f"cannot put {item!r}: the output stream is closed (its run has ended); "
                "items for a new run go to the agent's new output_queue"
            )
        self._hand_over(item)

    def close(self) -> None:
        """Mark the end of the stream and wake every waiting consumer; idempotent.

        Not a schedule point. Items already put are still delivered.
        """
        self._closed = True
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(_END)

    def get_nowait(self) -> T:
        """Return the next item without waiting.

        Raises:
            StreamEndedError: The stream is closed and drained.
            LookupError: No item is available yet.
        """
        if self._items:
            return self._items.popleft()
        if self._closed:
            raise StreamEndedError("the output stream is closed and drained")
        raise LookupError("no item is available yet; await get() to wait for one")

    async def get(self) -> T:
        """Return the next item, waiting for the producer if necessary.

        A schedule point only when it has to wait (like ``asyncio.Queue.get``).

        Raises:
            StreamEndedError: The stream is closed and drained.
        """
        if self._items or self._closed:
            return self.get_nowait()
        getter: asyncio.Future[T | _End] = asyncio.get_running_loop().create_future()
        self._getters.append(getter)
        try:
            result = await getter
        except asyncio.CancelledError:
            if getter.done() and not getter.cancelled():
                # The item was handed to us in the same step that cancelled us: give it back
                # so it is neither lost nor reordered for the next consumer.
                handed = getter.result()
                if not isinstance(handed, _End):
                    self._give_back(handed)
            else:
                self._discard(getter)
            raise
        if isinstance(result, _End):
            raise StreamEndedError("the output stream is closed and drained")
        return result

    def __aiter__(self) -> OutputStream[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.get()
        except StreamEndedError:
            raise StopAsyncIteration from None

    def _hand_over(self, item: T) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(item)
                return
        self._items.append(item)

    def _give_back(self, item: T) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(item)
                return
        self._items.appendleft(item)

    def _discard(self, getter: asyncio.Future[T | _End]) -> None:
        with contextlib.suppress(ValueError):
            self._getters.remove(getter)


class Signal:
    """A set/clear flag that coroutines can wait on, not bound to any event loop.

    Like ``asyncio.Event`` but safe to create outside a running loop and to reuse under a later
    loop. Call it from the thread of the loop whose coroutines wait on it.
    """

    def __init__(self, *, is_set: bool = False) -> None:
        self._is_set = is_set
        self._waiters: list[asyncio.Future[None]] = []

    def is_set(self) -> bool:
        """Return whether the flag is set."""
        return self._is_set

    def set(self) -> None:
        """Set the flag and wake every waiter. Not a schedule point."""
        self._is_set = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        """Clear the flag. Not a schedule point."""
        self._is_set = False

    async def wait(self) -> None:
        """Return once the flag is set; a schedule point only when it has to wait."""
        if self._is_set:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
