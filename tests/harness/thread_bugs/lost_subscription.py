"""A subscription is lost between a subscribe and an unsubscribe on two threads (hidden).

Bug: the message bus keeps each topic's handlers in an immutable tuple and updates it
copy-on-write without a lock (``handlers = self._handlers.get(topic, ())`` then
``self._handlers[topic] = (*handlers, handler)``), so publishing needs no lock. A tool thread
subscribes its audit handler while the shutdown of an old session unsubscribes another handler
on its own thread. With no preemption the updates do not overlap; when one thread is
preempted between its read and its write, the other's update is overwritten: the audit
handler is lost (or the removed handler comes back), and events go missing without an error.

Fix: keep copy-on-write for publishing, but make each read-copy-write atomic with a lock
(writers only; publishers still read the tuple without it).

Deviations: 1 (preempt one thread between its read of the handlers and its write).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1

Handler = Callable[[str], None]


class MessageBus:
    def __init__(self, *, locked: bool) -> None:
        self._handlers: dict[str, tuple[Handler, ...]] = {}
        self._lock = threading.Lock() if locked else None

    def _update(
        self, topic: str, change: Callable[[tuple[Handler, ...]], tuple[Handler, ...]]
    ) -> None:
        if self._lock is None:
            handlers = self._handlers.get(topic, ())
            self._handlers[topic] = change(handlers)
            return
        with self._lock:
            handlers = self._handlers.get(topic, ())
            self._handlers[topic] = change(handlers)

    def subscribe(self, topic: str, handler: Handler) -> None:
        self._update(topic, lambda handlers: (*handlers, handler))

    def unsubscribe(self, topic: str, handler: Handler) -> None:
        self._update(topic, lambda handlers: tuple(h for h in handlers if h != handler))

    def publish(self, topic: str, event: str) -> None:
        for handler in self._handlers.get(topic, ()):
            handler(event)


def _scenario(*, locked: bool) -> None:
    bus = MessageBus(locked=locked)
    audit: list[str] = []
    stale: list[str] = []
    bus.subscribe("tool.called", stale.append)
    run_threads(
        lambda: bus.subscribe("tool.called", audit.append),
        lambda: bus.unsubscribe("tool.called", stale.append),
    )
    bus.publish("tool.called", "search")
    # One check for both updates: a lost update shows either way, as one failure (shrinking
    # keeps a failure's line, so two checks would make the symptom found the one shrunk).
    assert (audit, stale) == (["search"], []), (
        "an update of the handlers was lost: the audit handler does not receive events, or "
        "the unsubscribed one still does"
    )


def buggy() -> None:
    _scenario(locked=False)


def fixed() -> None:
    _scenario(locked=True)
