"""What pinning a run's threads to one CPU saves, alone and beside busy cores.

Run: ``python benchmarks/threads_pinning.py`` (about two minutes; ``--quick`` for fewer repeats).
Linux only (elsewhere there is no CPU affinity, and nothing is pinned).

A controlled run passes the baton between OS threads: each switch wakes one thread and parks
another. Unpinned, the kernel often wakes the next thread on another core, and when that core
is busy (a second test process, a pytest-xdist worker) the woken thread waits for it. Each
run pins the thread that runs it to the CPU it is on (``interlace.harness._affinity``).

Three explorations, each through ``interlace.explore``:

* ``random walk``: 2 threads doing dict and list work under one lock (``threads_overhead.py``'s
  ``dict/list``, 2,000 iterations each), 10 schedules of the random walk: a uniformly random
  thread at every point, so the baton changes hands at about half of them.
* ``small tests``: what a test suite explores most: a short program (3 threads hand items
  through a ``queue.Queue`` and count them under a lock, waiting on an ``Event``), 200
  schedules of the default strategy.
* ``tiny tests``: 2 threads each add to a counter under a lock, 1,000 schedules of the
  default strategy (as ``tests/harness/thread_bugs``' fixed programs are explored).

Columns, each the median over the repeats (taken in turns), in one process. The median, not
the minimum: on a busy machine where the kernel wakes a thread is luck, and the minimum would
report only the lucky repeats:

* ``uncontrolled``: the program once (times the schedules), real threads under the GIL
  (the baseline).
* ``pinned``: the exploration as interlace runs it.
* ``unpinned``: the same exploration with pinning turned off (the behaviour before it).

Each under two loads: ``idle`` (nothing else running), and ``busy`` (one process spinning on
each core but one, which is what a second test suite or an xdist worker does to this one).
The ratio ``unpinned / pinned`` is what pinning saves.
"""

from __future__ import annotations

import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import interlace
from interlace.harness import _affinity

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads_overhead import MAX_STEPS, dict_list_workload


def small_program() -> None:
    items: queue.Queue[int | None] = queue.Queue()
    lock = threading.Lock()
    done = threading.Event()
    counted = [0]

    def consumer() -> None:
        while (item := items.get()) is not None:
            with lock:
                counted[0] += item
        done.set()

    def producer() -> None:
        for item in range(1, 6):
            items.put(item)

    threads = [threading.Thread(target=consumer), threading.Thread(target=producer)]
    for thread in threads:
        thread.start()
    threads[1].join()
    items.put(None)
    done.wait()
    threads[0].join()
    assert counted[0] == 15


class Usage:
    def __init__(self) -> None:
        self.tokens = 0
        self.lock = threading.Lock()

    def add(self, reply: str) -> None:
        with self.lock:
            self.tokens += len(reply.split())


def tiny_program() -> None:
    usage = Usage()
    threads = [
        threading.Thread(target=usage.add, args=("three more tokens",)),
        threading.Thread(target=usage.add, args=("two tokens",)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert usage.tokens == 5


Case = tuple[str, Callable[[], None], str, int]
CASES: list[Case] = [
    ("random walk", dict_list_workload(2, 2000), "random", 10),
    ("small tests", small_program, "auto", 200),
    ("tiny tests", tiny_program, "auto", 1000),
]


@contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """``count`` processes that spin until the block ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(0.3)  # let them start spinning
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def explore_seconds(case: Case, pinned: bool) -> float:
    _, program, strategy, schedules = case
    saved = _affinity._usable
    _affinity._usable = pinned and saved
    try:
        started = time.perf_counter()
        exploration = interlace.explore(
            program, strategy=strategy, max_schedules=schedules, seed=1, max_steps=MAX_STEPS
        )
        seconds = time.perf_counter() - started
    finally:
        _affinity._usable = saved
    assert exploration.failure is None, exploration.failure.report
    assert exploration.schedules == schedules, exploration.schedules
    return seconds


def uncontrolled_seconds(case: Case) -> float:
    _, program, _, schedules = case
    started = time.perf_counter()
    for _ in range(schedules):
        program()
    return time.perf_counter() - started


def measure(load: str, repeats: int) -> None:
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):
        for case in CASES:
            name = case[0]
            for column, seconds in (
                ("uncontrolled", uncontrolled_seconds),
                ("pinned", lambda c: explore_seconds(c, True)),
                ("unpinned", lambda c: explore_seconds(c, False)),
            ):
                took = seconds(case)
                times.setdefault((name, column), []).append(took)
    for case in CASES:
        name = case[0]
        base, pinned, unpinned = (
            statistics.median(times[name, c]) for c in ("uncontrolled", "pinned", "unpinned")
        )
        print(
            f"{load:<6}{name:<13}{base * 1e3:>10.1f}"
            f"{pinned * 1e3:>10.1f} {pinned / base:>6.1f}x"
            f"{unpinned * 1e3:>10.1f} {unpinned / base:>6.1f}x{unpinned / pinned:>8.2f}x",
            flush=True,
        )


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    repeats = 3 if quick else 7
    mask = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(mask) < 2 or not _affinity._usable:
        print("needs Linux and at least two usable CPUs: nothing is pinned here")
        return
    print(
        f"python {sys.version.split()[0]}, {len(mask)} usable CPUs; median of {repeats} runs; "
        "ratio = time / uncontrolled; saved = unpinned / pinned"
    )
    header = f"{'load':<6}{'exploration':<13}{'uncontr ms':>10}"
    print(f"{header}{'pinned ms':>18}{'unpinned ms':>18}{'saved':>9}")
    measure("idle", repeats)
    with busy_cores(len(mask) - 1):
        measure("busy", repeats)


if __name__ == "__main__":
    main()
