"""Examples and seconds to the first failure of interlace.stateful on the buggy machines of
tests/stateful, and the cost of a full passing run on their locked counterparts.

Run: ``python benchmarks/stateful_first_failure.py [SEEDS]`` (default 10 Hypothesis seeds,
about a minute on 2 cores). For each machine and seed: the TestCase runs with
``settings(database=None, deadline=None, max_examples=200)`` and ``@seed(s)``; *examples*
is how many scenarios ``check_scenario`` saw up to and including the first that failed,
*first* the seconds until that failure, *total* the seconds until Hypothesis raised
(shrinking included), *calls* the calls in the shrunk scenario. A passing machine's line
gives the seconds of its full run (default settings: 50 examples of up to 50 schedules).

This is no comparison with sequential Hypothesis or stress testing (issue 35's benchmark);
it measures only interlace.stateful.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time
from typing import Any

from hypothesis import HealthCheck, seed, settings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "stateful"))

import stateful_machines as machines

from interlace.stateful import ConcurrentStateMachine, NotLinearizableError, Scenario

BUGGY = (
    machines.UnlockedCounterMachine,
    machines.UnlockedCacheMachine,
    machines.UnlockedMapMachine,
)
CORRECT = (machines.LockedCounterMachine, machines.LockedCacheMachine, machines.LockedMapMachine)


def first_failure(machine: type[ConcurrentStateMachine], s: int) -> tuple[int, float, float, int]:
    seen: list[float] = []
    failed_at: list[tuple[int, float]] = []
    start = time.perf_counter()

    @seed(s)
    class Counting(machine):  # type: ignore[valid-type, misc]
        @classmethod
        def check_scenario(cls, scenario: Scenario) -> None:
            seen.append(time.perf_counter())
            try:
                super().check_scenario(scenario)
            except NotLinearizableError:
                if not failed_at:
                    failed_at.append((len(seen), time.perf_counter() - start))
                raise

    case: Any = Counting.TestCase
    case.settings = settings(
        database=None,
        deadline=None,
        max_examples=200,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    try:
        case("runTest").runTest()
    except NotLinearizableError as error:
        total = time.perf_counter() - start
        calls = len(list(error.scenario.calls())) if error.scenario else 0
        return failed_at[0][0], failed_at[0][1], total, calls
    raise SystemExit(f"{machine.__name__} passed with seed {s}")


def main(seeds: int) -> None:
    for machine in BUGGY:
        rows = [first_failure(machine, s) for s in range(seeds)]
        examples, first, total, calls = (list(column) for column in zip(*rows, strict=True))
        print(
            f"{machine.__name__:24} examples to failure median {statistics.median(examples):g} "
            f"(max {max(examples)}), first failure median {statistics.median(first):.2f} s, "
            f"with shrinking {statistics.median(total):.2f} s, shrunk calls "
            f"{sorted(set(calls))}  [{seeds} seeds]"
        )
    for machine in CORRECT:
        start = time.perf_counter()
        case: Any = machine.TestCase
        case.settings = settings(case.settings, database=None)
        case("runTest").runTest()
        seconds = time.perf_counter() - start
        print(f"{machine.__name__:24} passed its default run in {seconds:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
