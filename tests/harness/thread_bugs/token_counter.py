"""A read-modify-write on a usage counter loses tokens (hidden).

Bug: ``Usage.add`` does ``self.tokens += count``: one line, but a read, an add and a write.
Two threads finish their model calls and add their token counts. With no preemption each add
completes before the other starts; when the switch interval ends a thread between the read
and the write, the other thread's add is overwritten and the bill is short.

Fix: hold a lock across the read-modify-write.

Deviations: 1 (preempt the first thread between its read and its write, inside the line).
"""

from __future__ import annotations

import threading

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


class Usage:
    def __init__(self, *, locked: bool) -> None:
        self.tokens = 0
        self._lock = threading.Lock() if locked else None

    def add(self, count: int) -> None:
        if self._lock is None:
            self.tokens += count
            return
        with self._lock:
            self.tokens += count


def _scenario(*, locked: bool) -> None:
    usage = Usage(locked=locked)
    run_threads(lambda: usage.add(120), lambda: usage.add(30))
    assert usage.tokens == 150, f"usage shows {usage.tokens} tokens, expected 150"


def buggy() -> None:
    _scenario(locked=False)


def fixed() -> None:
    _scenario(locked=True)
