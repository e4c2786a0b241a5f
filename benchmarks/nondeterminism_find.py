"""Bugs that need a loop stall or an object-address order: interlace vs stress vs detangle.

Run: ``python benchmarks/nondeterminism_find.py`` (a few minutes on 2 cores; ``--quick``
runs three seeds and a shorter stress budget). Each program below has a bug that stock
CPython produces only under a timing or a memory layout the quiet stock run does not have:

* a loop stall: the event loop's thread is held up (a blocking JSON parse, a tokenizer, a
  sync SDK call, a GC pause) and its wake-up for a timer comes late, so timers due by then
  fire in one iteration;
* an address order: tasks in a set (``asyncio.wait``'s ``done``, a ``TaskGroup``'s tasks)
  iterate in the order of their addresses, which differs from process to process.

For each program, interlace's default (``explore(program, seed=s)``: strategy ``auto``,
``max_schedules=1000``, ``max_stall=0.05``) is run on every seed, and the table says: the
median schedules to the first failure (the failing one included) and wall seconds
(exploring, shrinking and recording the report), the label of the shrunk failure, the stall
it needs, whether the token replays exactly, whether the same seed gives the same token
twice, and whether the program's fixed version passes 1000 schedules. The baselines, in the
same run:

* stress: the program on the stock loop (``asyncio.run``), again and again until it fails or
  the wall budget is spent, with a noise task that blocks the loop for a random 0-50 ms
  (``time.sleep``) after a random 0-30 ms wait, as load would; runs = stock runs to the first
  failure;
* detangle (``pip install detangle``, the asyncio peer on PyPI):
  ``detangle.explore(program, runs=1000, seed=s, database=False, timer_jitter=0.05)``.

The last program is a thread race inside an installed package (a module imported from a
directory named ``site-packages``, where interlace gives code no schedule points unless it is
the explored function's own package or ``instrument`` names it); its stress baseline runs it
on stock threads with ``sys.setswitchinterval(1e-6)``, and detangle does not run threads.

A miss counts as the budget and is marked ``>``.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import interlace
from interlace._core.schedule import STALL, TIMER, decode_token

try:
    import detangle
except ImportError:  # the peer is optional: pip install -e ".[bench]"
    detangle = None  # type: ignore[assignment]

Program = Callable[[], Coroutine[Any, Any, None]]
BUDGET = 1000


# -- bugs that need a loop stall ------------------------------------------------------------------


async def _tool_call(budget: float) -> None:
    """An agent gives a tool call ``budget`` seconds; the tool answers in 20 ms."""

    async def tool() -> str:
        await asyncio.sleep(0.02)
        return "ok"

    async with asyncio.timeout(budget):
        assert await tool() == "ok"


async def tool_call_timeout() -> None:
    await _tool_call(0.05)


async def tool_call_timeout_fixed() -> None:
    await _tool_call(1.0)


async def _lease(ttl: float) -> None:
    """A lease renewed every 20 ms by a task, its expiry (``ttl``) checked every 25 ms by a
    timer callback: when the loop stalls at a renewal's wake-up, the check runs before the
    task the renewal's timer woke, and the lease looks expired."""
    loop = asyncio.get_running_loop()
    state = {"renewed": loop.time(), "expired": False}

    def check() -> None:
        if loop.time() - state["renewed"] > ttl:
            state["expired"] = True

    async def renew() -> None:
        for _ in range(5):
            await asyncio.sleep(0.02)
            state["renewed"] = loop.time()

    for k in range(1, 5):
        loop.call_later(0.025 * k, check)
    await renew()
    assert not state["expired"], "the lease expired while it was being renewed"


async def lease_watchdog() -> None:
    await _lease(0.03)


async def lease_watchdog_fixed() -> None:
    # The fix: a time to live that leaves room for the renewal interval and a stall.
    await _lease(0.1)


async def _heartbeat(patience: float) -> None:
    """A consumer waits at most ``patience`` seconds for each heartbeat; one comes every 40 ms."""
    queue: asyncio.Queue[int] = asyncio.Queue()

    async def produce() -> None:
        for beat in range(3):
            await asyncio.sleep(0.04)
            await queue.put(beat)

    producer = asyncio.get_running_loop().create_task(produce())
    for beat in range(3):
        assert await asyncio.wait_for(queue.get(), patience) == beat
    await producer


async def heartbeat_timeout() -> None:
    await _heartbeat(0.05)


async def heartbeat_timeout_fixed() -> None:
    await _heartbeat(0.5)


# -- bugs that need an address order --------------------------------------------------------------


async def _stream(drain: bool) -> None:
    """An output stream that waits for the next token or the end, then pops one finished task
    (the pattern of an agent's ``stream()``): when both finish in one iteration, which one
    ``pop()`` returns depends on the tasks' addresses, and the token can be lost."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    finished = asyncio.Event()

    async def produce() -> None:
        for token in ("a", "b"):
            await queue.put(token)
        finished.set()

    producer = asyncio.get_running_loop().create_task(produce())
    got: list[str] = []
    while True:
        get = asyncio.ensure_future(queue.get())
        end = asyncio.ensure_future(finished.wait())
        done, pending = await asyncio.wait([get, end], return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if drain:
            if get in done:
                got.append(get.result())
            if end in done and queue.empty():
                break
            continue
        first = done.pop()
        if first is end:
            break
        got.append(first.result())
    await producer
    assert got == ["a", "b"], f"the stream yielded {got}"


async def stream_pop() -> None:
    await _stream(drain=False)


async def stream_pop_fixed() -> None:
    await _stream(drain=True)


async def _cleanup(check_open: bool) -> None:
    """A task group's tasks share a connection; when one fails the group cancels the others
    in the order of its set of tasks, so which ``finally`` runs first depends on addresses."""
    connection = {"open": True}

    async def owner() -> None:
        try:
            await asyncio.sleep(1)
        finally:
            connection["open"] = False

    async def writer() -> None:
        try:
            await asyncio.sleep(1)
        finally:
            if not check_open or connection["open"]:
                assert connection["open"], "flushed through a closed connection"

    async def failing() -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("provider error")

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(owner())
            group.create_task(writer())
            group.create_task(failing())
    except* RuntimeError:
        pass


async def group_cleanup() -> None:
    await _cleanup(check_open=False)


async def group_cleanup_fixed() -> None:
    await _cleanup(check_open=True)


# -- a thread race in an installed package ---------------------------------------------------------

_INSTALLED = """
import threading


class Registry:
    def __init__(self, locked):
        self.items = {}
        self._lock = threading.Lock() if locked else None

    def _get_or_create(self, key):
        if key not in self.items:
            self.items[key] = object()
        return self.items[key]

    def get_or_create(self, key):
        if self._lock is None:
            return self._get_or_create(key)
        with self._lock:
            return self._get_or_create(key)


def _race(locked):
    registry = Registry(locked)
    seen = []
    threads = [
        threading.Thread(target=lambda: seen.append(registry.get_or_create("k")))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen[0] is seen[1], "two threads got two different objects for one key"


def registry_race():
    _race(locked=False)


def registry_race_fixed():
    _race(locked=True)
"""


def _installed_module() -> Any:
    """``interlace_bench_registry``, written into a directory named ``site-packages`` (where
    installed packages live) and imported from there, as a package from PyPI would be."""
    import importlib
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="interlace-bench-")) / "site-packages"
    package = root / "interlace_bench_registry"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_INSTALLED, encoding="utf-8")
    sys.path.insert(0, str(root))
    return importlib.import_module("interlace_bench_registry")


PROGRAMS: list[tuple[str, Program, Program]] = [
    ("tool_call_timeout", tool_call_timeout, tool_call_timeout_fixed),
    ("lease_watchdog", lease_watchdog, lease_watchdog_fixed),
    ("heartbeat_timeout", heartbeat_timeout, heartbeat_timeout_fixed),
    ("stream_pop", stream_pop, stream_pop_fixed),
    ("group_cleanup", group_cleanup, group_cleanup_fixed),
]


def thread_programs() -> list[tuple[str, Callable[[], None], Callable[[], None]]]:
    module = _installed_module()
    return [("installed_registry", module.registry_race, module.registry_race_fixed)]


# -- the baselines --------------------------------------------------------------------------------


async def _noise(rng: random.Random) -> None:
    while True:
        await asyncio.sleep(rng.uniform(0.0, 0.03))
        time.sleep(rng.uniform(0.0, 0.05))  # noqa: ASYNC251 - the load the stress test adds


def _stressed_once(program: Program, rng: random.Random) -> bool:
    async def run() -> None:
        noise = asyncio.get_running_loop().create_task(_noise(rng))
        try:
            await program()
        finally:
            noise.cancel()

    try:
        asyncio.run(run())
    except Exception:
        return True
    return False


def stress(program: Program, seed: int, budget: float) -> tuple[int, float, bool]:
    """Stock runs to the first failure, wall seconds, and whether it failed at all."""
    rng = random.Random(seed)
    started = time.perf_counter()
    runs = 0
    while time.perf_counter() - started < budget:
        runs += 1
        if _stressed_once(program, rng):
            return runs, time.perf_counter() - started, True
    return runs, time.perf_counter() - started, False


def stress_threads(program: Callable[[], None], budget: float) -> tuple[int, float, bool]:
    """Stock runs of a threaded program to the first failure, with CPython switching threads
    as often as it can (``sys.setswitchinterval(1e-6)``)."""
    started = time.perf_counter()
    runs = 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        while time.perf_counter() - started < budget:
            runs += 1
            try:
                program()
            except AssertionError:
                return runs, time.perf_counter() - started, True
    finally:
        sys.setswitchinterval(interval)
    return runs, time.perf_counter() - started, False


def run_detangle(program: Program, seed: int) -> tuple[int, float, bool, str]:
    """detangle's runs to the first failure, wall seconds, found, and why it could not run."""
    if detangle is None:
        return 0, 0.0, False, "not installed"
    started = time.perf_counter()
    try:
        detangle.explore(program, runs=BUDGET, seed=seed, database=False, timer_jitter=0.05)
    except detangle.BugFound as found:
        return found.report.runs, time.perf_counter() - started, True, ""
    except Exception as exc:  # the peer could not drive the program
        return 0, 0.0, False, f"{type(exc).__name__}: {exc}".splitlines()[0][:60]
    return BUDGET, time.perf_counter() - started, False, ""


def _stall_ms(token: str) -> float:
    return sum(d.actor for d in decode_token(token)[1] if d.kind in (STALL, TIMER)) / 1000


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def cell(value: float, misses: int, seeds: int, fmt: str = "{:.0f}") -> str:
    text = fmt.format(value)
    if misses == seeds:
        return ">" + text
    return text + ("*" if misses else "")


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    seeds = [1, 2, 3] if quick else [1, 2, 3, 4, 5]
    stress_budget = 3.0 if quick else 8.0
    print(
        f"Python {sys.version.split()[0]}; interlace default (auto, max_schedules={BUDGET}, "
        f"max_stall=0.05); detangle {getattr(detangle, '__version__', 'not installed')}; "
        f"seeds {seeds}; stress budget {stress_budget:g} s a seed"
    )
    print("* = missed on some seeds, > = missed on every seed (counted as the budget)\n")
    header = (
        f"{'program':<18} {'il sched':>8} {'il s':>6} {'stress':>7} {'stress s':>8} "
        f"{'detangle':>8} {'dt s':>6}  {'stall':>6} replay det fixed  label"
    )
    print(header)
    print("-" * len(header))
    programs: list[tuple[str, Any, Any]] = [*PROGRAMS, *thread_programs()]
    for name, buggy, fixed in programs:
        schedules, seconds, misses = [], [], 0
        labels, stalls, replays, determinism = set(), [], True, True
        for seed in seeds:
            exploration = interlace.explore(buggy, seed=seed)
            seconds.append(exploration.elapsed)
            failure = exploration.failure
            if failure is None:
                misses += 1
                schedules.append(BUDGET)
                continue
            schedules.append(exploration.schedules)
            labels.add(failure.label)
            stalls.append(_stall_ms(failure.token))
            again = interlace.replay(buggy, failure.token)
            replays = replays and again is not None and again.token == failure.token
            second = interlace.explore(buggy, seed=seed).failure
            determinism = determinism and second is not None and second.token == failure.token
        fixed_ok = all(interlace.explore(fixed, seed=seed).failure is None for seed in seeds)
        stress_runs, stress_seconds, stress_misses = [], [], 0
        threaded = not asyncio.iscoroutinefunction(buggy)
        for seed in seeds:
            if threaded:
                runs, spent, found = stress_threads(buggy, stress_budget)
            else:
                runs, spent, found = stress(buggy, seed, stress_budget)
            stress_runs.append(runs)
            stress_seconds.append(spent)
            stress_misses += not found
        dt_runs, dt_seconds, dt_misses, dt_error = [], [], 0, ""
        for seed in seeds:
            if threaded:
                dt_error = "asyncio only"
                break
            runs, spent, found, dt_error = run_detangle(buggy, seed)
            if dt_error:
                break
            dt_runs.append(runs)
            dt_seconds.append(spent)
            dt_misses += not found
        n = len(seeds)
        detangle_cells = (
            f"{cell(median(dt_runs), dt_misses, n):>8} {median(dt_seconds):>6.2f}"
            if not dt_error
            else f"{'error':>8} {'':>6}"
        )
        print(
            f"{name:<18} {cell(median(schedules), misses, n):>8} {median(seconds):>6.2f} "
            f"{cell(median(stress_runs), stress_misses, n):>7} {median(stress_seconds):>8.2f} "
            f"{detangle_cells}  {median(stalls):>4.1f}ms {'yes' if replays else 'NO':>6} "
            f"{'yes' if determinism else 'NO':>3} {'pass' if fixed_ok else 'FAIL':>5}  "
            f"{' / '.join(sorted(labels))}" + (f"  (detangle: {dt_error})" if dt_error else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
