"""Workers: schedules per second, time to the first failure, and the cost for small runs.

Run: ``python benchmarks/scale_workers.py`` (about 3-6 minutes on 2 idle cores;
``--quick`` runs one repetition of each). Programs are in ``tests/harness/scale_programs.py``.

* throughput: ``explore(busy_pipeline, strategy="random", seed=1, max_schedules=2000,
  workers=N)`` for N = 1, 2, 4, a correct program of a few milliseconds per schedule;
  schedules/second = 2000 / wall time (the first 50 schedules run in-process, then the
  workers start: their start-up is included). The ratio is to 1 worker in the same run;
  the CPU seconds spent in this process and in the workers tell the cost of the split
  from what the machine's load took away.
* time to first failure: ``explore(reversed_five, strategy="random", seed=s, workers=N)``
  for seeds 0-3 (the random walk finds the bug after 56 to 361 schedules), wall time
  including shrinking and the report; the median over the seeds, ratio to 1 worker.
* small explorations: ``explore(target, strategy="exhaustive", workers=4)`` against
  ``workers=1`` for explorations that end within the 50 in-process schedules (no worker
  starts): the medians of 30 alternated repetitions each, wall and CPU time, as ratios
  (1.00 = no cost).

The load average before and after is printed: the machine may be shared, and the ratios
then say how much the workers got of it, not what they can do on idle cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "harness"))

import scale_programs as programs

import interlace

WORKERS = (1, 2, 4)


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process and of its reaped children (the workers: ``spawn`` makes
    them children of this process, and they are joined when they end)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _timed(target: Callable[[], Any], **kwargs: Any) -> tuple[float, interlace.Exploration]:
    started = time.perf_counter()
    exploration = interlace.explore(target, **kwargs)
    return time.perf_counter() - started, exploration


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def throughput(repeats: int) -> None:
    print("## Throughput: busy_pipeline, random walk, 2000 schedules")
    base = 0.0
    for workers in WORKERS:
        runs = []
        for _ in range(repeats):
            before = _cpu()
            seconds = _timed(
                programs.busy_pipeline,
                strategy="random",
                seed=1,
                max_schedules=2000,
                workers=workers,
            )[0]
            after = _cpu()
            runs.append((seconds, after[0] - before[0], after[1] - before[1]))
        seconds, own, children = sorted(runs)[len(runs) // 2]
        base = base or seconds
        print(
            f"workers={workers}: {seconds:.2f} s, {2000 / seconds:.0f} schedules/s, "
            f"{base / seconds:.2f}x of 1 worker; CPU {own:.2f} s here, {children:.2f} s in "
            "workers"
        )


def first_failure(repeats: int) -> None:
    print("## Time to first failure: reversed_five, random walk, seeds 0-3")
    base = 0.0
    for workers in WORKERS:
        times = []
        indexes = []
        for seed in range(4):
            for _ in range(repeats):
                seconds, exploration = _timed(
                    programs.reversed_five, strategy="random", seed=seed, workers=workers
                )
                times.append(seconds)
            indexes.append(exploration.failure_index)
        median = statistics.median(times)
        base = base or median
        print(
            f"workers={workers}: median {median:.2f} s, failing indexes {indexes}, "
            f"{base / median:.2f}x of 1 worker"
        )


def small(repeats: int) -> None:
    print("## Explorations that end within 50 schedules: workers=4 against workers=1")
    for target in (programs.locked_update, programs.reversed_order):
        walls: dict[int, list[float]] = {1: [], 4: []}
        cpus: dict[int, list[float]] = {1: [], 4: []}
        _timed(target, strategy="exhaustive", max_stall=0, seed=0)  # warm caches first
        # Alternated, so that a change of load weighs on both alike; CPU time as well, which
        # the load of a shared machine changes less than wall time.
        for _ in range(repeats):
            for workers in (1, 4):
                cpu = time.process_time()
                wall = _timed(target, strategy="exhaustive", max_stall=0, seed=0, workers=workers)
                cpus[workers].append(time.process_time() - cpu)
                walls[workers].append(wall[0])
        wall_1, wall_4 = statistics.median(walls[1]), statistics.median(walls[4])
        cpu_1, cpu_4 = statistics.median(cpus[1]), statistics.median(cpus[4])
        schedules = interlace.explore(target, strategy="exhaustive", max_stall=0).schedules
        print(
            f"{target.__name__} ({schedules} schedules): wall {wall_1 * 1000:.1f} ms vs "
            f"{wall_4 * 1000:.1f} ms (ratio {wall_4 / wall_1:.2f}), CPU {cpu_1 * 1000:.1f} ms "
            f"vs {cpu_4 * 1000:.1f} ms (ratio {cpu_4 / cpu_1:.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"Before: {_load()}")
    throughput(1 if args.quick else 3)
    first_failure(1)
    small(10 if args.quick else 30)
    print(f"After: {_load()}")


if __name__ == "__main__":
    main()
