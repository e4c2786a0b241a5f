"""What a thread outside the exploration costs: the same exploration with no such thread,
beside an idle ``ThreadPoolExecutor`` worker, and beside one with the kernel's evidence
switched off (the 50 ms wait that proved such a thread idle before); then beside a heartbeat
(a thread that wakes every 30 s, as a batch exporter or a keep-alive does), with and without
the deadline of its wait read from the kernel.

Run: ``python benchmarks/threads_outside.py`` (about 30 s; ``--quick`` for fewer schedules),
on every CPython the project supports, e.g.
``PYENV_VERSION=3.13.0 PYTHONPATH=src python benchmarks/threads_outside.py``.

The workload is ``tests/harness/thread_bugs/barrier_timeout.py``'s fixed program: a thread
sleeps 2 s of virtual time while the other waits at a barrier, so every schedule reaches a
state where every thread of the run waits and only the clock (or a thread outside the run)
can end the wait. A long-lived thread outside the run is common in a test process: an
executor made at import, a test server, pytest-timeout's timer, a notebook kernel's threads.
Each column is the minimum over the repeats; ratios are to the run with no outside thread.
"""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import interlace
from interlace.harness import _kernel

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/../tests/harness")
from thread_bugs import barrier_timeout

REPEATS = 3


@contextmanager
def nothing() -> Iterator[None]:
    yield


@contextmanager
def idle_worker() -> Iterator[None]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(int).result()
        time.sleep(0.05)  # back from its first job, it waits for the next
        yield


@contextmanager
def idle_worker_unproved() -> Iterator[None]:
    saved = _kernel._works
    _kernel._works = False
    try:
        with idle_worker():
            yield
    finally:
        _kernel._works = saved


@contextmanager
def heartbeat() -> Iterator[None]:
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(30):
            pass

    thread = threading.Thread(target=beat)
    thread.start()
    time.sleep(0.05)  # in its wait
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def heartbeat_unread() -> Iterator[None]:
    saved = _kernel._deadlines
    _kernel._deadlines = False
    try:
        with heartbeat():
            yield
    finally:
        _kernel._deadlines = saved


def timed(setting: Callable[[], AbstractContextManager[None]], schedules: int) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        with setting():
            started = time.perf_counter()
            exploration = interlace.explore(
                barrier_timeout.fixed, strategy="random", seed=1, max_schedules=schedules
            )
            best = min(best, time.perf_counter() - started)
        assert exploration.failure is None
        assert exploration.schedules == schedules
    return best


def main() -> None:
    schedules = 40 if "--quick" in sys.argv else 200
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"CPython {version}, {schedules} schedules of barrier_timeout.fixed")
    if not _kernel.works():
        print("(no /proc here: the kernel's evidence is not available, both columns wait)")
    base = timed(nothing, schedules)
    print(f"{'no outside thread':<34} {base:7.2f} s   1.0x")
    for name, setting in [
        ("idle worker, proved idle (now)", idle_worker),
        ("idle worker, 50 ms wait (before)", idle_worker_unproved),
        ("heartbeat, deadline read (now)", heartbeat),
        ("heartbeat, 50 ms wait (before)", heartbeat_unread),
    ]:
        seconds = timed(setting, schedules)
        print(f"{name:<34} {seconds:7.2f} s {seconds / base:6.1f}x")


if __name__ == "__main__":
    main()
