"""A lazily created model client is created twice (hidden).

Bug: ``get_client`` creates the process-wide client on first use with
``if _client is None: _client = ModelClient()``. Two request threads ask for it at start-up.
With no preemption the first thread's client is stored before the second checks; when the
first is preempted while the client is being constructed (opening its connection pool takes a
while), the second thread sees ``None`` too and builds a second client: two connection pools,
and the two threads hold different clients (rate limits and caches are per client).

Fix: a module-level lock, with the check inside it, so exactly one thread creates the client
and the other waits for it.

Deviations: 1 (preempt the first thread after its check, before its assignment).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


class ModelClient:
    def __init__(self) -> None:
        self.pool: list[str] = []
        self.pool.append("connection-1")


_client: ModelClient | None = None
_client_lock = threading.Lock()


def get_client() -> ModelClient:
    global _client
    if _client is None:
        _client = ModelClient()  # noqa: IL102 - the race under test
    return _client


def get_client_locked() -> ModelClient:
    global _client
    with _client_lock:
        if _client is None:
            _client = ModelClient()
        return _client


def _scenario(get: Callable[[], ModelClient]) -> None:
    global _client
    _client = None
    seen: list[ModelClient] = []
    run_threads(lambda: seen.append(get()), lambda: seen.append(get()))
    assert seen[0] is seen[1], "two threads got two different clients"


def buggy() -> None:
    _scenario(get_client)


def fixed() -> None:
    _scenario(get_client_locked)
