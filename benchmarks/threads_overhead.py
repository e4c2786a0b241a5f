"""Overhead of controlled threads against the same threads uncontrolled, on CPU-bound code.

Run: ``python benchmarks/threads_overhead.py`` (about a minute; ``--quick`` for fewer repeats).
Run it on every CPython the project supports, e.g.
``PYENV_VERSION=3.12.1 PYTHONPATH=src python benchmarks/threads_overhead.py``: Python 3.12+
places schedule points with ``sys.monitoring``, 3.11 with ``sys.settrace``.

Workloads: N threads (2 and 8) share a dict of lists under one ``threading.Lock``; the total
work is the same for every N. Both are code under test, so every line is a schedule point,
and so is every write that follows a read in its line and every ``with lock``:

* ``dict/list``: each iteration builds a record dict, sorts a small list of tags, formats a
  key, and under the lock files the record in its bucket, trims the bucket and adds to a
  per-thread total (a line costs about 100-300 ns uncontrolled: typical of Python code that
  does its work in dicts, lists and strings).
* ``tight``: each line is one cheap operation (a few tens of ns uncontrolled): the worst case,
  where the cost of a schedule point is all there is.

Columns, each the minimum over the repeats (taken in turns, so a burst of load on the machine
hits every column alike), in one process; a ratio is the time over ``uncontrolled``'s:

* ``uncontrolled``: ``workload()``, real threads under the GIL.
* ``explore(1)``: ``interlace.explore(workload, max_schedules=1)``: the default strategy's
  first schedule (stock order), session set-up (instrumenting, patching) included.
* ``stock``: one stock-order run in a session that is already set up (internal API): what
  each further schedule of stock order costs.
* ``delay``, ``pct``, ``exhaustive``: one schedule of each exploring strategy (internal API,
  the same session). ``delay`` and ``pct`` are told the run's length first (``finished``
  with the stock run's points), as every schedule of an exploration after its first is:
  sparse delays (about two deviations a run), PCT (depth 3: two priority change points
  in the run). The exhaustive search's chooser has no schedule budget (consulted and
  recording a schedule point at every point; deviations are added one by one, so a
  schedule of this search has at most ``bound`` of them: this one is its first).
* ``random``: one random-walk schedule: a uniformly random thread at every point, so the
  baton changes hands at about half of them, each a real hand-off between OS threads.

Then ``paired``: the median, over the repeats, of each repeat's own ratio of ``stock`` to the
uncontrolled runs made just before and just after it (their mean), with the lowest and
highest such ratio. On a machine whose load comes and goes, the minimum of each column can
come from a quiet moment for one column and a loaded one for another; a ratio of runs made
a few hundred milliseconds apart compares like with like, so this is the figure to quote.
Last, the cost of one schedule point in nanoseconds (``stock`` minus ``uncontrolled``, over
the points the run counted).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable

import interlace
from interlace._core.schedule import Settings
from interlace._core.strategy import (
    Chooser,
    ExhaustiveStrategy,
    PCTStrategy,
    RandomWalkStrategy,
    SparseDelayStrategy,
    Strategy,
)
from interlace.harness._threads import ThreadsBackend, controlled_exploration

TOTAL_ITERATIONS = 16_000
MAX_STEPS = 100_000_000

Workload = Callable[[], None]


def dict_list_workload(threads: int, iterations: int) -> Workload:
    def workload() -> None:
        lock = threading.Lock()
        table: dict[str, list[dict[str, int]]] = {}
        totals: dict[int, int] = {}

        def worker(index: int) -> None:
            for i in range(iterations):
                record = {"id": i, "worker": index, "score": (i * 31 + index) % 97}
                tags = [f"tag{(i + 3) % 11}", f"tag{(i + 5) % 13}", f"tag{i % 7}"]
                tags.sort()
                key = f"{tags[0]}/{record['score'] % 8}"
                with lock:
                    bucket = table.setdefault(key, [])
                    bucket.append(record)
                    if len(bucket) > 16:
                        del bucket[:8]
                    totals[index] = totals.get(index, 0) + record["score"]

        run_threads(worker, threads)
        assert len(totals) == threads

    return workload


def tight_workload(threads: int, iterations: int) -> Workload:
    def workload() -> None:
        lock = threading.Lock()
        table: dict[int, int] = {}

        def worker(index: int) -> None:
            for i in range(iterations):
                key = i & 63
                value = key + index
                with lock:
                    table[key] = value

        run_threads(worker, threads)
        assert len(table) == 64

    return workload


def run_threads(worker: Callable[[int], None], count: int) -> None:
    threads = [threading.Thread(target=worker, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def paired_stock(workload: Workload, uncontrolled: Callable[[], float]) -> tuple[float, float, int]:
    """A stock-order run between two uncontrolled ones (``uncontrolled()`` times one).

    Returns the stock run's seconds (in a session set up by an untimed stock run first), its
    ratio to the mean of the uncontrolled runs just before and after it (the ``paired``
    figure), and the points it counted.
    """
    before = uncontrolled()
    with controlled_exploration((), workload):
        backend = ThreadsBackend(workload, Settings(backend="threads", max_steps=MAX_STEPS))
        backend.run(Chooser())
        started = time.perf_counter()
        result = backend.run(Chooser())
        stock = time.perf_counter() - started
    assert result.kind is None, result.detail
    return stock, stock / ((before + uncontrolled()) / 2), result.steps


def explore_one(workload: Workload) -> None:
    exploration = interlace.explore(workload, max_schedules=1, seed=1, max_steps=MAX_STEPS)
    assert exploration.failure is None, exploration.failure.report


def choosers(steps: int) -> dict[str, Callable[[], Chooser]]:
    """The columns' choosers; ``steps`` is the run's length, as a stock run counted it."""

    def learned(strategy: Strategy) -> Chooser:
        # What an exploration tells a strategy after each schedule (its first included).
        strategy.finished(Chooser(), steps)
        chooser = strategy.next_chooser()
        assert chooser is not None
        return chooser

    def exhaustive() -> Chooser:
        chooser = ExhaustiveStrategy(bound=2, reduce=False).next_chooser()
        assert chooser is not None
        return chooser

    return {
        "stock": Chooser,
        "delay": lambda: learned(SparseDelayStrategy(1)),
        "pct": lambda: learned(PCTStrategy(1, 3)),
        "exhaustive": exhaustive,
        "random": lambda: RandomWalkStrategy(1).next_chooser(),
    }


COLUMNS = ("explore(1)", "stock", "delay", "pct", "exhaustive", "random")


def measure(name: str, workload: Workload, repeats: int, skip: set[str]) -> None:
    settings = Settings(backend="threads", max_steps=MAX_STEPS)
    best = {column: float("inf") for column in ("uncontrolled", *COLUMNS) if column not in skip}
    points = 0
    paired: list[float] = []

    def uncontrolled() -> float:
        started = time.perf_counter()
        workload()
        seconds = time.perf_counter() - started
        best["uncontrolled"] = min(best["uncontrolled"], seconds)
        return seconds

    for _ in range(repeats):
        _, ratio, points = paired_stock(workload, uncontrolled)
        paired.append(ratio)
        started = time.perf_counter()
        explore_one(workload)
        best["explore(1)"] = min(best["explore(1)"], time.perf_counter() - started)
        with controlled_exploration((), workload):
            backend = ThreadsBackend(workload, settings)
            if not points:
                points = backend.run(Chooser()).steps
            for column, make in choosers(points).items():
                if column in skip:
                    continue
                chooser = make()
                started = time.perf_counter()
                result = backend.run(chooser)
                best[column] = min(best[column], time.perf_counter() - started)
                assert result.kind is None, result.detail
                if column == "stock":
                    assert result.steps == points, (result.steps, points)
    base = best["uncontrolled"]
    cells = [
        f"{best[c] * 1e3:7.1f} {best[c] / base:5.2f}x" if c in best else "(skipped)"
        for c in COLUMNS
    ]
    per_point = (best["stock"] - base) / points * 1e9
    print(
        f"{name:<14} {base * 1e3:9.1f} "
        + " ".join(f"{c:>15}" for c in cells)
        + f" {statistics.median(paired):5.2f}x ({min(paired):.2f}-{max(paired):.2f})"
        + f" {points:>8} {per_point:7.0f}",
        flush=True,
    )


def main(argv: list[str]) -> int:
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return 0
    repeats = 3 if "--quick" in argv else 5
    print(
        f"python {sys.version.split()[0]}, interlace {interlace.__version__}, schedule points "
        f"from {'sys.monitoring' if sys.version_info >= (3, 12) else 'sys.settrace'}; "
        f"min of {repeats} runs; ratio = time / uncontrolled; paired: median of per-run ratios"
    )
    print(
        f"{'workload':<14} {'uncontr ms':>9} "
        + " ".join(f"{c:>15}" for c in COLUMNS)
        + f" {'paired (range)':>18} {'points':>8} {'ns/pt':>7}"
    )
    for threads in (2, 8):
        iterations = TOTAL_ITERATIONS // threads
        measure(f"dict/list x{threads}", dict_list_workload(threads, iterations), repeats, set())
    for threads in (2, 8):
        iterations = TOTAL_ITERATIONS * 4 // threads
        # The random walk hands the baton over ~100,000 times here: seconds, not a ratio
        # worth the wait (the dict/list rows show it).
        measure(f"tight x{threads}", tight_workload(threads, iterations), repeats, {"random"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
