"""The reference message bus: thread-safe subscriptions, bounded history, waking shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections import deque
from collections.abc import Awaitable, Callable

from interlace.reference_impl._messages import Event

__all__ = (
    "BusClosedError",
    "EventCallback",
    "MessageBus",
    "Subscription",
    "SubscriptionClosedError",
)

EventCallback = Callable[[Event], Awaitable[None]]
"""An async function a :class:`Subscription` calls with each event."""


class BusClosedError(RuntimeError):
    """``publish()`` or ``subscribe()`` was called on a closed :class:`MessageBus`."""


class SubscriptionClosedError(Exception):
    """``receive()`` found the subscription ended (unsubscribed or bus closed) and drained."""


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _wake(waiter: asyncio.Future[None]) -> None:
    """Resolve ``waiter`` from any thread."""
    loop = waiter.get_loop()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        _resolve(waiter)
        return
    # RuntimeError: the waiter's loop is closed, so nobody can be waiting on it any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_resolve, waiter)


class Subscription:
    """One subscriber of a :class:`MessageBus`: either a callback, or a receiver to pull from.

    A receiver subscription (no callback) buffers the events delivered to it, without bound,
    until :meth:`receive` (or ``async for``) takes them; each event is received exactly once and
    in publish order. After :meth:`unsubscribe` or ``bus.close()`` the receiver still drains its
    buffer, then ``receive()`` raises :class:`SubscriptionClosedError` (iteration stops), and every
    waiting receiver is woken to see that, whichever thread ends the subscription.

    Invariant: ``_waiters`` holds pending futures only while ``_buffer`` is empty or a wake-up
    is in flight to one of them.
    """

    def __init__(
        self, bus: MessageBus, subscription_id: int, event_type: str, callback: EventCallback | None
    ) -> None:
        self._bus = bus
        self.id = subscription_id
        self.event_type = event_type
        self.callback = callback
        self._lock = threading.Lock()
        self._active = True
        self._buffer: deque[Event] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def active(self) -> bool:
        """Whether the subscription still receives new events."""
        return self._active

    @property
    def pending(self) -> int:
        """Events delivered to this receiver and not yet received."""
        with self._lock:
            return len(self._buffer)

    def unsubscribe(self) -> bool:
        """End the subscription; return whether it was active. Thread-safe, never blocks long."""
        return self._bus.unsubscribe(self)

    async def receive(self) -> Event:
        """Return the next event delivered to this receiver, waiting if necessary.

        A schedule point only when it has to wait.

        Raises:
            TypeError: This subscription has a callback (events go to the callback instead).
            SubscriptionClosedError: The subscription ended and its buffer is drained.
        """
        if self.callback is not None:
            raise TypeError(
                f"subscription {self.id} to {self.event_type!r} delivers to its callback; "
                "subscribe without a callback to receive() events"
            )
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._buffer:
                    return self._buffer.popleft()
                if not self._active:
                    raise SubscriptionClosedError(
                        f"subscription {self.id} to {self.event_type!r} has ended "
                        "(unsubscribed or bus closed) and has no more events"
                    )
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                    else:
                        # A wake-up was sent to us (perhaps still in flight from another
                        # thread) for an event we will not take: pass it on.
                        self._wake_one_locked()
                raise

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self.receive()
        except SubscriptionClosedError:
            raise StopAsyncIteration from None

    def _deliver(self, event: Event) -> bool:
        with self._lock:
            if not self._active:
                return False
            self._buffer.append(event)
            self._wake_one_locked()
            return True

    def _end(self) -> bool:
        with self._lock:
            was_active, self._active = self._active, False
            waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            _wake(waiter)
        return was_active

    def _wake_one_locked(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()  # callers hold self._lock
            if not waiter.done():
                _wake(waiter)
                return


class MessageBus:
    """A publish/subscribe bus, safe to subscribe to and unsubscribe from in any thread.

    Delivery semantics under concurrent (un)subscription (``publish`` runs on an event loop;
    ``subscribe``/``unsubscribe``/``close`` may run in any thread):

    * ``publish`` appends the event to the history and takes a snapshot of the event type's
      subscribers in one critical section (a threading lock); deliveries then go to that snapshot,
      in subscription order, without holding the lock.
    * A subscriber added after the snapshot does not get the event. A subscriber removed before
      the snapshot gets nothing. A subscriber removed after the snapshot gets the event only if
      its delivery had already started: each delivery first checks that the subscription is still
      active, and in the event loop's thread nothing can run between that check and the start of
      the callback (a removal from *another* thread can race with it, so such a callback may still
      start once).
    * Receiver subscriptions buffer the event without awaiting; callbacks are awaited one after
      another. A callback that raises does not stop delivery to the others; after all
      deliveries ``publish`` raises an ``ExceptionGroup`` of the callbacks' exceptions.
    * The history keeps the last ``max_history`` events in publish order (a ``deque`` with
      ``maxlen``).
    * ``close()`` ends every subscription and wakes every waiting receiver (in any thread or
      loop); receivers drain their buffers and stop. Later ``publish``/``subscribe`` raise
      :class:`BusClosedError`; a publish already delivering skips subscriptions ended meanwhile.

    Args:
        max_history: Events kept in the history, at least 0.

    Raises:
        ValueError: ``max_history`` is negative.
    """

    def __init__(self, *, max_history: int = 1000) -> None:
        if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 0:
            raise ValueError(f"max_history must be an int >= 0, got {max_history!r}")
        self.max_history = max_history
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._subscribers: dict[str, dict[int, Subscription]] = {}
        self._history: deque[Event] = deque(maxlen=max_history)
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def subscribe(self, event_type: str, callback: EventCallback | None = None) -> Subscription:
        """Subscribe to events of ``event_type``. Thread-safe; not a schedule point.

        Args:
            event_type: The event type to receive.
            callback: An async function awaited with each event; ``None`` for a receiver
                subscription read with ``receive()`` / ``async for``.

        Returns:
            The subscription.

        Raises:
            BusClosedError: The bus is closed.
            TypeError: ``callback`` is not callable.
        """
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be an async function or None, got {callback!r}")
        with self._lock:
            if self._closed:
                raise BusClosedError(
                    f"cannot subscribe to {event_type!r}: the message bus is closed"
                )
            subscription = Subscription(self, next(self._ids), event_type, callback)
            self._subscribers.setdefault(event_type, {})[subscription.id] = subscription
        return subscription

    def unsubscribe(self, subscription: Subscription) -> bool:
        """End ``subscription``; return whether it was active. Thread-safe; idempotent.

        Raises:
            ValueError: ``subscription`` belongs to another bus.
        """
        if subscription._bus is not self:
            raise ValueError(f"subscription {subscription.id} belongs to another MessageBus")
        with self._lock:
            table = self._subscribers.get(subscription.event_type)
            if table is not None:
                table.pop(subscription.id, None)
                if not table:
                    del self._subscribers[subscription.event_type]
        return subscription._end()

    def subscriber_count(self, event_type: str) -> int:
        """The number of active subscriptions to ``event_type``."""
        with self._lock:
            return len(self._subscribers.get(event_type, ()))

    async def publish(self, event: Event) -> int:
        """Deliver ``event`` to the subscribers of its type (see the class docstring).

        A schedule point when a callback awaits.

        Returns:
            How many subscriptions the event was delivered to.

        Raises:
            TypeError: ``event`` is not an :class:`Event`.
            BusClosedError: The bus is closed.
            ExceptionGroup: One or more callbacks raised (all others were still delivered to).
        """
        if not isinstance(event, Event):
            raise TypeError(
                f"publish expects an Event, got {event!r}; wrap it: Event(event_type, payload)"
            )
        with self._lock:
            if self._closed:
                raise BusClosedError(
                    f"cannot publish {event.event_type!r}: the message bus is closed"
                )
            self._history.append(event)
            targets = list(self._subscribers.get(event.event_type, {}).values())
        delivered = 0
        errors: list[Exception] = []
        for subscription in targets:
            if subscription.callback is None:
                delivered += subscription._deliver(event)
            elif subscription.active:
                try:
                    await subscription.callback(event)
                except Exception as exc:
                    errors.append(exc)
                else:
                    delivered += 1
        if errors:
            raise ExceptionGroup(
                f"{len(errors)} subscriber callback(s) failed for event {event.event_type!r}",
                errors,
            )
        return delivered

    def history(self, event_type: str | None = None) -> list[Event]:
        """A snapshot of the retained events (all, or of one type), oldest first."""
        with self._lock:
            events = list(self._history)
        if event_type is None:
            return events
        return [event for event in events if event.event_type == event_type]

    def close(self) -> None:
        """Close the bus, end every subscription and wake every waiting receiver; idempotent.

        Thread-safe; not a schedule point.
        """
        with self._lock:
            self._closed = True
            subscriptions = [sub for table in self._subscribers.values() for sub in table.values()]
            self._subscribers.clear()
        for subscription in subscriptions:
            subscription._end()
