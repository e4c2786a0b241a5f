"""A lock created at import time guards the read of a counter but not its write (hidden).

Bug: run ids come from a module-level counter guarded by ``_ID_LOCK``, a lock created when the
module is imported (before any test or exploration starts). ``next_run_id`` reads the counter
under the lock but increments it after the ``with`` block has released it. Two threads start
runs at once. With no preemption each thread reads and writes before the other reads; when
a thread is preempted just after the lock is released, the other reads the same value, and two
runs share one id (their traces and results overwrite each other).

Fix: keep the read and the write inside one ``with _ID_LOCK:`` block.

Deviations: 1 (preempt the first thread between leaving the lock and its write).
"""

from __future__ import annotations

import threading

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1

_ID_LOCK = threading.Lock()


class _Counter:
    value = 0


_counter = _Counter()


def next_run_id() -> int:
    with _ID_LOCK:
        current = _counter.value
    _counter.value = current + 1
    return current


def next_run_id_locked() -> int:
    with _ID_LOCK:
        current = _counter.value
        _counter.value = current + 1
        return current


def _scenario(*, locked: bool) -> None:
    _counter.value = 0
    allocate = next_run_id_locked if locked else next_run_id
    ids: list[int] = []
    run_threads(lambda: ids.append(allocate()), lambda: ids.append(allocate()))
    assert sorted(ids) == [0, 1], f"two runs got the ids {ids}"


def buggy() -> None:
    _scenario(locked=False)


def fixed() -> None:
    _scenario(locked=True)
