"""Exploration overhead of interlace against the stock asyncio loop, on the same workload.

Run: ``python benchmarks/harness_overhead.py`` (a minute or two; ``--quick`` for fewer repeats).

Workload: N tasks, each doing K ``await asyncio.sleep(0)``; every 5th iteration a task passes an
item through a shared ``asyncio.Queue`` and holds a shared ``asyncio.Lock`` across one more
``sleep(0)`` (so lock waiters queue up). K shrinks as N grows so every row takes ~20,000 steps.

Columns, each the minimum over the repeats (taken in turns, so a burst of load on the machine
hits every column alike), in one process; the ratio is the time over ``stock``'s:

* ``stock``: ``asyncio.run(workload())``.
* ``explore(1)``: ``interlace.explore(workload, max_schedules=1)``, the first schedule of the
  default strategy (stock order, decided by the exhaustive search's chooser).
* ``stock chooser``: one run on the controlled loop with the chooser that is never consulted
  (the floor of the loop's own cost; internal API).
* ``random``: ``interlace.explore(workload, strategy="random", max_schedules=1)``: one
  random-walk schedule (the chooser is consulted at every step and deviates at most of them).
* ``pct``: ``interlace.explore(workload, strategy="pct", max_schedules=1)``: one PCT schedule
  (consulted at every step, reads every option's actor, deviates at most steps).
* ``exhaustive``: one schedule of the exhaustive search's chooser with no schedule budget, so it
  is consulted and records a schedule point at every step (internal API): the most any
  exhaustive schedule costs (with a budget it stops recording once it holds enough schedules).
  Footprints for partial-order reduction (3.12+) are off here; ``harness_por.py`` measures
  the reduction.
* ``detangle.run``: the peer's one-schedule run in asyncio order (virtual time), if installed.

Then per-step cost against the number of runnable tasks (random-walk chooser, every step a
decision): it must stay flat, since a decision looks at no more than a fixed window of the
ready queue.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import interlace
from interlace._core.schedule import Settings
from interlace._core.strategy import Chooser, ExhaustiveStrategy, RandomWalkStrategy
from interlace.harness._asyncio_backend import AsyncioBackend

try:
    import detangle
except ImportError:  # the peer is optional: pip install -e ".[bench]"
    detangle = None  # type: ignore[assignment]

TOTAL_STEPS = 20_000
MAX_STEPS = 10_000_000

Workload = Callable[[], Coroutine[Any, Any, None]]


def make_workload(tasks: int, iterations: int) -> Workload:
    async def workload() -> None:
        queue: asyncio.Queue[int] = asyncio.Queue()
        lock = asyncio.Lock()

        async def worker(index: int) -> None:
            for i in range(iterations):
                await asyncio.sleep(0)
                if i % 5 == 0:
                    await queue.put(index)
                    await queue.get()
                    async with lock:
                        await asyncio.sleep(0)

        await asyncio.gather(*(worker(index) for index in range(tasks)))

    return workload


def best_of(repeats: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def stock_chooser_run(workload: Workload) -> None:
    AsyncioBackend(workload, Settings(max_steps=MAX_STEPS)).run(Chooser())


def explore_one(workload: Workload, strategy: str) -> None:
    exploration = interlace.explore(
        workload, strategy=strategy, max_schedules=1, seed=1, max_steps=MAX_STEPS
    )
    assert exploration.failure is None, exploration.failure.report


def exhaustive_run(workload: Workload) -> None:
    chooser = ExhaustiveStrategy(bound=2, reduce=False).next_chooser()
    assert chooser is not None
    AsyncioBackend(workload, Settings(max_steps=MAX_STEPS)).run(chooser)


COLUMNS = ("explore(1)", "stock chooser", "random", "pct", "exhaustive", "detangle.run")


def overhead_table(repeats: int) -> None:
    print(f"Overhead against asyncio.run (min of {repeats} runs; ratio = time / stock)")
    print(f"{'N':>5} {'K':>6} {'stock ms':>9} " + " ".join(f"{c:>16}" for c in COLUMNS))
    for tasks in (2, 100, 1000):
        iterations = max(10, TOTAL_STEPS // tasks)
        workload = make_workload(tasks, iterations)
        runs: dict[str, Callable[[], object]] = {
            "stock": lambda: asyncio.run(workload()),  # noqa: B023
            "explore(1)": lambda: explore_one(workload, "auto"),  # noqa: B023
            "stock chooser": lambda: stock_chooser_run(workload),  # noqa: B023
            "random": lambda: explore_one(workload, "random"),  # noqa: B023
            "pct": lambda: explore_one(workload, "pct"),  # noqa: B023
            "exhaustive": lambda: exhaustive_run(workload),  # noqa: B023
        }
        if detangle is not None:
            runs["detangle.run"] = lambda: detangle.run(workload, max_steps=MAX_STEPS)  # noqa: B023
        best = {name: float("inf") for name in runs}
        for _ in range(repeats):
            for name, run in runs.items():
                started = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - started)
        stock = best["stock"]
        cells = [
            f"{best[c] * 1e3:8.1f} {best[c] / stock:5.2f}x" if c in best else "not installed"
            for c in COLUMNS
        ]
        print(
            f"{tasks:>5} {iterations:>6} {stock * 1e3:9.1f} " + " ".join(f"{c:>16}" for c in cells)
        )


def per_step_table(repeats: int) -> None:
    print()
    print("Per-step cost against runnable tasks (random walk: a decision at every step)")
    print(f"{'runnable':>9} {'steps':>8} {'us/step':>8} {'vs 10':>6}")
    base = None
    for tasks in (10, 100, 1000, 10_000):
        iterations = max(2, 50_000 // tasks)
        workload = make_workload(tasks, iterations)
        backend = AsyncioBackend(workload, Settings(max_steps=MAX_STEPS))
        steps = 0

        def run() -> None:
            nonlocal steps
            chooser = RandomWalkStrategy(7).next_chooser()
            steps = backend.run(chooser).steps  # noqa: B023

        seconds = best_of(repeats, run)
        per_step = seconds / steps * 1e6
        base = base or per_step
        print(f"{tasks:>9} {steps:>8} {per_step:8.2f} {per_step / base:5.2f}x")


def main(argv: list[str]) -> int:
    repeats = 3 if "--quick" in argv else 7
    print(
        f"python {sys.version.split()[0]}, interlace {interlace.__version__}, "
        f"detangle {getattr(detangle, '__version__', 'not installed')}"
    )
    overhead_table(repeats)
    per_step_table(max(3, repeats // 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
