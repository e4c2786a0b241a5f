"""Schedules and time to the first failure: interlace vs stress testing vs detangle.

Run: ``python benchmarks/harness_find.py`` (about 5-10 minutes on 2 cores; ``--quick`` runs
fewer seeds and a shorter stress budget). Programs: the bugs of the suite in
``tests/harness/bugs`` that stock order hides (``HIDDEN = True``).

* interlace: ``interlace.explore(buggy, strategy=S, seed=s, max_schedules=1000,
  max_steps=5000)`` for each strategy and seed; schedules = ``Exploration.schedules`` (the
  failing one included), time = ``Exploration.elapsed`` (exploring, shrinking and recording the
  report). A miss counts as the budget and is marked ``>``. ``proposed`` is the portfolio
  recommended in RESULTS.md (random walk 3 of 4 schedules, exhaustive search the 4th), built
  from the engine's internal strategies since ``explore`` does not offer it yet.
* stress: the same program on the stock loop (``asyncio.run``), with every simulated I/O wait
  (``bugs._io.io()``, which is ``asyncio.sleep(0)`` under interlace) replaced by
  ``asyncio.sleep(random.random() * 1e-3)`` through ``bugs._io.injected_latency``; timers keep
  their real durations. Each run is bounded by ``asyncio.wait_for(..., 4 s)``: a timeout counts
  as finding a deadlock or hang. Runs repeat until the first failure or the wall budget.
* detangle: ``detangle.explore(buggy, runs=1000, seed=s, database=False, max_steps=5000,
  timer_jitter=0.01)`` (its default ``auto`` portfolio, with the same 10 ms timer window as
  interlace); runs = ``BugFound.report.runs``, time = wall time until ``BugFound`` (shrinking
  included, as for interlace).

Medians are over the seeds. Ratios are interlace's default strategy against each baseline
(below 1 means interlace needed fewer schedules or less time).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from types import ModuleType
from typing import Any

import interlace
from interlace._core.explorer import ReplayHints, explore_backend
from interlace._core.schedule import Settings
from interlace._core.strategy import ExhaustiveStrategy, PortfolioStrategy, RandomWalkStrategy
from interlace.harness._asyncio_backend import AsyncioBackend
from interlace.harness._introspect import ownership

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness")
)

from bugs import PROGRAMS  # type: ignore[import-not-found]
from bugs._io import injected_latency  # type: ignore[import-not-found]

try:
    import detangle
except ImportError:  # the peer is optional: pip install -e ".[bench]"
    detangle = None  # type: ignore[assignment]

STRATEGIES = ("auto", "random", "pct", "delay", "exhaustive", "proposed")
"""``proposed`` is the portfolio this benchmark argues for (internal API, see ``proposed``)."""
BUDGET = 1000
MAX_STEPS = 5000
STRESS_RUN_TIMEOUT = 4.0

Program = Callable[[], Coroutine[Any, Any, None]]


def hidden_programs() -> list[tuple[str, ModuleType]]:
    modules = [(name, importlib.import_module(f"bugs.{name}")) for name in PROGRAMS]
    return [(name, module) for name, module in modules if module.HIDDEN]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def proposed(program: Program, seed: int) -> interlace.Exploration:
    """Random walk on three schedules of every four, bounded exhaustive search on the fourth.

    The walk finds hidden bugs fastest; the exhaustive member keeps the "bounded space
    exhausted" answer for small programs and runs stock order as the second schedule.
    """
    walk = RandomWalkStrategy(seed)
    strategy = PortfolioStrategy([walk, ExhaustiveStrategy(2), walk, walk], name="proposed")
    backend = AsyncioBackend(program, Settings(max_steps=MAX_STEPS))
    with ownership():
        return explore_backend(
            backend, strategy, max_schedules=BUDGET, seed=seed, hints=ReplayHints(api="program")
        )


def run_interlace(
    program: Program, strategy: str, seeds: list[int]
) -> tuple[float, float, int, int]:
    """Median schedules, median seconds, misses, fewest deviations found."""
    schedules, seconds, misses, deviations = [], [], 0, []
    for seed in seeds:
        if strategy == "proposed":
            exploration = proposed(program, seed)
        else:
            exploration = interlace.explore(
                program, strategy=strategy, seed=seed, max_schedules=BUDGET, max_steps=MAX_STEPS
            )
        schedules.append(exploration.schedules)
        seconds.append(exploration.elapsed)
        if exploration.failure is None:
            misses += 1
        else:
            deviations.append(exploration.failure.deviations)
    return median(schedules), median(seconds), misses, min(deviations, default=-1)


def run_stress(program: Program, seed: int, wall_budget: float) -> tuple[int, float, bool]:
    """Runs until the first failure, seconds, found."""
    rng = random.Random(seed)
    runs = 0
    started = time.perf_counter()
    with injected_latency(lambda: rng.random() * 1e-3):
        while time.perf_counter() - started < wall_budget:
            runs += 1
            try:
                asyncio.run(asyncio.wait_for(program(), STRESS_RUN_TIMEOUT))
            except BaseException as exc:  # any failure (a timeout is a deadlock or a hang)
                if isinstance(exc, KeyboardInterrupt):
                    raise
                return runs, time.perf_counter() - started, True
    return runs, time.perf_counter() - started, False


def run_detangle(program: Program, seeds: list[int]) -> tuple[float, float, int, str]:
    """Median runs, median seconds, misses, and why detangle could not run it (or "")."""
    assert detangle is not None
    runs, seconds, misses = [], [], 0
    for seed in seeds:
        started = time.perf_counter()
        try:
            detangle.explore(
                program,
                runs=BUDGET,
                seed=seed,
                database=False,
                max_steps=MAX_STEPS,
                timer_jitter=0.01,
            )
        except detangle.BugFound as found:
            runs.append(found.report.runs)
        except Exception as exc:  # the peer could not drive the program
            return 0.0, 0.0, 0, f"{type(exc).__name__}: {exc}".splitlines()[0][:60]
        else:
            runs.append(BUDGET)
            misses += 1
        seconds.append(time.perf_counter() - started)
    return median(runs), median(seconds), misses, ""


def cell(value: float, misses: int, seeds: int, fmt: str = "{:.0f}") -> str:
    text = fmt.format(value)
    if misses == seeds:
        return ">" + text
    return text + ("*" if misses else "")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "-"


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    seeds = [1, 2, 3] if quick else [1, 2, 3, 4, 5]
    stress_budget = 3.0 if quick else 8.0
    programs = hidden_programs()
    print(
        f"python {sys.version.split()[0]}, interlace {interlace.__version__}, "
        f"detangle {getattr(detangle, '__version__', 'not installed')}; seeds {seeds}; "
        f"budget {BUDGET} schedules, max_steps {MAX_STEPS}"
    )
    print()
    print("interlace: median schedules to first failure (median ms incl. shrinking) per strategy")
    print(
        "  '*' some seeds missed, '>' every seed missed within the budget; dev = fewest "
        "deviations of a shrunk failure"
    )
    print(f"{'program':<22}" + "".join(f"{s:>17}" for s in STRATEGIES) + f"{'dev':>5}")
    results: dict[str, dict[str, tuple[float, float, int, int]]] = {}
    for name, module in programs:
        row = {s: run_interlace(module.buggy, s, seeds) for s in STRATEGIES}
        results[name] = row
        fewest = min((r[3] for r in row.values() if r[3] >= 0), default=-1)
        text = "".join(
            f"{cell(r[0], r[2], len(seeds)) + f' ({r[1] * 1e3:.0f})':>17}" for r in row.values()
        )
        print(f"{name:<22}{text}{fewest:>5}", flush=True)
    totals = {s: median([results[n][s][0] for n, _ in programs]) for s in STRATEGIES}
    missed = {s: sum(results[n][s][2] for n, _ in programs) for s in STRATEGIES}
    slow = {s: median([results[n][s][1] for n, _ in programs]) for s in STRATEGIES}
    print(
        f"{'median over programs':<22}"
        + "".join(f"{f'{totals[s]:.0f} ({slow[s] * 1e3:.0f})':>17}" for s in STRATEGIES)
    )
    print(
        f"{'missed (of ' + str(len(programs) * len(seeds)) + ')':<22}"
        + "".join(f"{missed[s]:>17}" for s in STRATEGIES)
    )

    print()
    print(
        "interlace (auto) against stress testing and detangle: schedules or runs to the first "
        "failure (median), wall ms (median)"
    )
    print(
        f"{'program':<22}{'interlace':>16}{'stress':>18}{'detangle':>16}"
        f"{'runs vs stress':>15}{'runs vs dt':>11}{'ms vs dt':>9}"
    )
    ratios_stress, ratios_dt, ratios_dt_time = [], [], []
    for name, module in programs:
        sched, secs, miss, _ = results[name]["auto"]
        stress_runs, stress_secs, found = run_stress(module.buggy, 1, stress_budget)
        stress_text = f"{stress_runs}{'' if found else '+'} ({stress_secs * 1e3:.0f})"
        if detangle is None:
            dt_text, why = "not installed", "detangle is not installed"
            dt_runs = dt_secs = 0.0
            dt_miss = 0
        else:
            dt_runs, dt_secs, dt_miss, why = run_detangle(module.buggy, seeds)
            dt_text = (
                f"{cell(dt_runs, dt_miss, len(seeds))} ({dt_secs * 1e3:.0f})"
                if not why
                else "cannot run"
            )
        vs_stress = ratio(sched, stress_runs) if found else f"<{ratio(sched, stress_runs)}"
        vs_dt = ratio(sched, dt_runs) if not why else "-"
        vs_dt_time = ratio(secs, dt_secs) if not why else "-"
        ratios_stress.append(sched / stress_runs)
        if not why and dt_runs:
            ratios_dt.append(sched / dt_runs)
            ratios_dt_time.append(secs / dt_secs)
        print(
            f"{name:<22}{cell(sched, miss, len(seeds)) + f' ({secs * 1e3:.0f})':>16}"
            f"{stress_text:>18}{dt_text:>16}{vs_stress:>15}{vs_dt:>11}{vs_dt_time:>9}",
            flush=True,
        )
        if why:
            print(f"    detangle could not drive {name}: {why}")
    print(
        f"{'median ratio':<22}{'':>50}"
        f"{ratio(median(ratios_stress), 1) if ratios_stress else '-':>15}"
        f"{ratio(median(ratios_dt), 1) if ratios_dt else '-':>11}"
        f"{ratio(median(ratios_dt_time), 1) if ratios_dt_time else '-':>9}"
    )
    print(
        "  stress: '+' = not found within the wall budget of "
        f"{stress_budget:g} s (ratio is then an upper bound '<', and so may be the median)"
    )

    print()
    print("Correct spin-wait (bugs.pulse_spin.fixed): reported failures in 300 schedules")
    spin = importlib.import_module("bugs.pulse_spin").fixed
    for strategy in STRATEGIES[:-1]:
        exploration = interlace.explore(spin, strategy=strategy, max_schedules=300, seed=1)
        reported = exploration.failure.kind if exploration.failure else "none"
        print(f"  interlace {strategy:<11} {reported}")
    if detangle is not None:
        try:
            detangle.explore(spin, runs=300, seed=1, database=False)
            print("  detangle  auto        none")
        except detangle.BugFound as bug:
            cause = bug.report.failure.exception
            print(f"  detangle  auto        {type(cause).__name__ if cause else 'a failure'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
