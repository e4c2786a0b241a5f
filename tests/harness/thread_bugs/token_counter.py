"""A read-modify-write on a usage counter loses tokens (hidden).

Bug: ``Usage.add`` does ``self.tokens += count_tokens(reply)``: one line, but a read of
``self.tokens``, a call, an add and a write. Two threads finish their model calls and add their
token counts. With no preemption each add completes before the other starts; when a thread's
switch interval ends during the call (between the read and the write), the other thread's add
is overwritten and the bill is short.

Fix: hold a lock across the read-modify-write.

Deviations: 1 (preempt the first thread between its read and its write, inside the line).
A switch there is possible with the GIL too, since the call checks for a pending switch.
"""

from __future__ import annotations

import threading

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


def count_tokens(text: str) -> int:
    return len(text.split())


class Usage:
    def __init__(self, *, locked: bool) -> None:
        self.tokens = 0
        self._lock = threading.Lock() if locked else None

    def add(self, reply: str) -> None:
        if self._lock is None:
            self.tokens += count_tokens(reply)
            return
        with self._lock:
            self.tokens += count_tokens(reply)


def _scenario(*, locked: bool) -> None:
    usage = Usage(locked=locked)
    run_threads(lambda: usage.add("three more tokens"), lambda: usage.add("two tokens"))
    assert usage.tokens == 5, f"usage shows {usage.tokens} tokens, expected 5"


def buggy() -> None:
    _scenario(locked=False)


def fixed() -> None:
    _scenario(locked=True)
