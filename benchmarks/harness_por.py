"""Partial-order reduction: schedules (and time) to exhaust the bounded space, with and without.

Run: ``python benchmarks/harness_por.py`` on Python 3.12+ (footprints need ``sys.monitoring``;
on 3.11 the reduced search is the plain one, and this says so). About a minute.

Each program is explored by the exhaustive search (bound 2, ``max_steps`` 5000) twice in the
same process: without reduction (every schedule runs) and with it (a schedule whose run
would only reorder independent steps of a recorded run is predicted instead of run).
Columns: schedules run until the bounded space was exhausted, how many the reduced search
predicted instead, the ratio of runs (reduced / plain), and the wall time of each search.
Programs: tasks on private state (``k`` workers, ``n`` awaits each, awaited in turn), and the
fixed versions of the bug suite (``tests/harness/bugs``) and of the reduction's differential
suite (``tests/harness/reduction_programs.py``) whose bounded space is small enough to exhaust.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import interlace
from interlace._core.explorer import ReplayHints, explore_backend
from interlace._core.schedule import Settings
from interlace._core.strategy import ExhaustiveStrategy
from interlace.harness._asyncio_backend import AsyncioBackend
from interlace.harness._footprint import AVAILABLE
from interlace.harness._introspect import ownership

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness")
)

import reduction_programs  # type: ignore[import-not-found]

Program = Callable[[], Coroutine[Any, Any, None]]

BOUND = 2
BUDGET = 20_000
MAX_STEPS = 5000
BUG_SUITE = (
    "cancel_check_act",
    "progress_spin",
    "anyio_counter",
    "anyio_stream_clone",
    "fanout_order",
)


def exhaust(program: Program, *, reduce: bool) -> tuple[int, int, bool, float]:
    """Schedules run, schedules predicted, whether exhausted, seconds."""
    strategy = ExhaustiveStrategy(BOUND, BUDGET, reduce=reduce)
    backend = AsyncioBackend(program, Settings(max_steps=MAX_STEPS))
    started = time.perf_counter()
    with ownership():
        exploration = explore_backend(
            backend, strategy, max_schedules=BUDGET, seed=0, hints=ReplayHints(api="program")
        )
    assert exploration.failure is None, exploration.failure.report
    seconds = time.perf_counter() - started
    return exploration.schedules, strategy.predicted, exploration.exhausted, seconds


def programs() -> list[tuple[str, Program]]:
    found: list[tuple[str, Program]] = []
    for tasks, steps in ((3, 3), (4, 3), (4, 4)):
        found.append(
            (
                f"independent {tasks}x{steps}",
                reduction_programs.make_independent_workers(tasks, steps),
            )
        )
    for name in BUG_SUITE:
        found.append((f"bugs.{name}.fixed", importlib.import_module(f"bugs.{name}").fixed))
    for name in ("attribute_balance", "closure_counter", "lock_order", "event_lost_wakeup"):
        found.append((f"reduction.{name}.fixed", reduction_programs.PROGRAMS[name]()[1]))
    return found


def main(argv: list[str]) -> int:
    print(
        f"python {sys.version.split()[0]}, interlace {interlace.__version__}; exhaustive "
        f"search, bound {BOUND}, max_steps {MAX_STEPS}, budget {BUDGET} schedules"
    )
    if not AVAILABLE:
        print("no sys.monitoring on this Python: the reduced search is the plain one")
    print(
        f"{'program':<34}{'plain runs':>11}{'reduced runs':>13}{'predicted':>10}"
        f"{'runs ratio':>11}{'plain s':>9}{'reduced s':>10}{'time ratio':>11}"
    )
    ratios = []
    for name, program in programs():
        plain, _, plain_done, plain_s = exhaust(program, reduce=False)
        reduced, predicted, reduced_done, reduced_s = exhaust(program, reduce=True)
        mark = "" if plain_done and reduced_done else "  (budget hit: not exhausted)"
        ratios.append(reduced / plain)
        print(
            f"{name:<34}{plain:>11}{reduced:>13}{predicted:>10}{reduced / plain:>11.2f}"
            f"{plain_s:>9.2f}{reduced_s:>10.2f}{reduced_s / plain_s:>11.2f}{mark}",
            flush=True,
        )
    ratios.sort()
    print(f"median runs ratio {ratios[len(ratios) // 2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
