"""Ctrl-C during an exploration ends it, even where Python would swallow it.

Python's SIGINT handler raises ``KeyboardInterrupt`` in whatever Python code the main thread
runs next. If that code is a weakref callback or a ``__del__`` (``threading`` runs one each
time a ``Thread`` object dies, and an exploration frees thousands a second), the interpreter
prints "Exception ignored" and goes on: the Ctrl-C is lost and the exploration runs out its
whole budget. So while an exploration runs, SIGINT's default handler is replaced by one that
also remembers the signal, and the engine raises ``KeyboardInterrupt`` again where nothing
swallows it: before each run, and while the thread that started a run waits for it.

Only Python's own default handler is replaced (an application's or a test runner's handler
is left alone), only from the main thread, and it is restored when the exploration ends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ("check", "kept")

_received = False
"""A SIGINT reached the handler during the exploration (reset when the exploration ends)."""


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = True
    signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt


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
