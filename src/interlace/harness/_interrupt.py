"""Ctrl-C during an exploration ends it, even where Python would swallow it.

Python's SIGINT handler raises ``KeyboardInterrupt`` in whatever Python code the main thread
runs next. If that code is a weakref callback or a ``__del__`` (``threading`` runs one each
time a ``Thread`` object dies, and an exploration frees thousands a second), the interpreter
prints "Exception ignored" and goes on: the Ctrl-C is lost and the exploration runs out its
whole budget. So while an exploration runs, SIGINT's default handler is replaced by one that
also remembers the signal, and the engine raises ``KeyboardInterrupt`` again where nothing
swallows it: before each run, and while the thread that started a run waits for it. Where an
interrupt would leave a lock taken, the engine defers it to the end of the block
(:func:`deferred`, trio's KeyboardInterrupt protection in small).

Only Python's own default handler is replaced (an application's or a test runner's handler
is left alone), only from the main thread, and it is restored when the exploration ends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ("check", "deferred", "kept")

_received = False
"""A SIGINT reached the handler during the exploration (reset when the exploration ends)."""
_deferring = 0
"""How many :func:`deferred` blocks the main thread is in."""


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = True
    if not _deferring:
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A Ctrl-C that comes inside the block is raised when it ends, not inside it.

    For code that takes a lock in a ``with`` it does not own: an interrupt raised in the
    lock's ``__enter__`` once the lock is taken leaves it taken for good (``Thread.start``'s
    handshake on ``_started``, which the new thread then waits on forever). Only in the main
    thread, where signal handlers run, and only where :func:`kept` installed the handler.
    """
    global _deferring
    main = threading.current_thread() is threading.main_thread()
    if main:
        _deferring += 1
    try:
        yield
    finally:
        if main:
            _deferring -= 1
    check()


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C came during this exploration."""
    if _received:
        raise KeyboardInterrupt


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """While an exploration runs: a Ctrl-C is remembered until it ends the exploration."""
    global _received
    installed = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if installed:
        signal.signal(signal.SIGINT, _handler)
    try:
        yield
        check()  # one that came during the last run, where it was swallowed
    finally:
        if installed:
            if signal.getsignal(signal.SIGINT) is _handler:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            _received = False
