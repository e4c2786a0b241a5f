"""interlace.stateful against plain Hypothesis stateful testing and stress testing, on buggy
and correct concurrent objects.

Run: ``python benchmarks/stateful_vs_baselines.py [--budget SECONDS] [--max-examples N]``
(defaults 10 s and 50; a few minutes on 2 cores). For each object three methods look for a
failure; each stops at its first:

* **interlace**: the object's ``ConcurrentStateMachine``, ``settings(max_examples=N,
  database=None)``, ``@seed(0)``. *examples* counts the scenarios ``check_scenario`` saw up to
  the first failing one; *calls* is the size of the scenario Hypothesis shrank it to.
* **sequential**: plain Hypothesis ``RuleBasedStateMachine`` built from the same rules and
  strategies (``max_examples=N``, ``@seed(0)``, ``stateful_step_count=7``, the most calls a
  kit scenario has): each step runs one rule on the object and on the oracle (the machine's
  ``model``, else a second instance of the object) and compares the results as the
  linearizability check does. *examples* counts Hypothesis examples; *calls* the shrunk steps.
* **stress**: random scenarios drawn from the same strategy (no search, no shrinking), each run
  20 times with real threads or real asyncio tasks (no interlace), each run's results checked
  by the same linearizability check, until ``--budget`` seconds pass. *examples* counts runs;
  *calls* is the failing scenario's size. The interpreter's switch interval is the default
  (5 ms) unless ``--switch-interval`` says otherwise.

The buggy objects: an unlocked async counter, a get-or-create cache without its lock
(threads), an LRU with eviction callbacks that checks its size outside a lock (threads), a
bounded queue whose ``offer`` checks for room before an await (asyncio), and the replicas'
agent memory (threads) and output stream (asyncio) through the conformance kit
(``interlace.fixtures.conformance.REPORTED``, the reference as model). The correct ones: the
same objects with their locks, and the reference memory and stream.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import pathlib
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import NonInteractiveExampleWarning
from hypothesis.stateful import RuleBasedStateMachine, precondition

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "stateful"))

import stateful_machines as machines

from interlace import conformance
from interlace import stateful as stateful_module
from interlace.fixtures import conformance as replicas
from interlace.stateful import ConcurrentStateMachine, NotLinearizableError, Scenario, rule

# --- the objects that are not in tests/stateful ---------------------------------------------


class LRU:
    """An LRU map of ``capacity`` entries that calls ``on_evict(key)`` for each eviction."""

    def __init__(self, capacity: int, on_evict: Callable[[str], None], *, locked: bool) -> None:
        self.capacity = capacity
        self.on_evict = on_evict
        self.data: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if locked else contextlib.nullcontext()
        )

    def put(self, key: str, value: int) -> None:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                self.data[key] = value
                return
            if len(self.data) >= self.capacity:
                oldest, _ = self.data.popitem(last=False)
                self.on_evict(oldest)
            self.data[key] = value

    def get(self, key: str) -> int | None:
        with self.lock:
            if key not in self.data:
                return None
            self.data.move_to_end(key)
            return self.data[key]


class UnlockedLRUMachine(ConcurrentStateMachine):
    locked = False

    def __init__(self) -> None:
        self.evicted: list[str] = []
        self.lru = LRU(2, self.evicted.append, locked=self.locked)

    @rule(key=st.sampled_from(["a", "b", "c"]), value=st.integers(0, 1))
    def put(self, key: str, value: int) -> None:
        self.lru.put(key, value)

    @rule(key=st.sampled_from(["a", "b", "c"]))
    def get(self, key: str) -> int | None:
        return self.lru.get(key)

    @rule()
    def evictions(self) -> list[str]:
        return list(self.evicted)


class LockedLRUMachine(UnlockedLRUMachine):
    locked = True


class BoundedQueue:
    """A queue of at most ``capacity`` items; ``offer`` persists the item (an await) first."""

    def __init__(self, capacity: int, *, locked: bool) -> None:
        self.capacity = capacity
        self.items: collections.deque[int] = collections.deque()
        self.lock = asyncio.Lock() if locked else None

    async def _offer(self, item: int) -> bool:
        if len(self.items) >= self.capacity:
            return False
        await asyncio.sleep(0)  # write-ahead to the journal
        self.items.append(item)
        return True

    async def offer(self, item: int) -> bool:
        if self.lock is None:
            return await self._offer(item)
        async with self.lock:
            return await self._offer(item)

    async def poll(self) -> int | None:
        return self.items.popleft() if self.items else None


class UnlockedQueueMachine(ConcurrentStateMachine):
    locked = False

    def __init__(self) -> None:
        self.queue = BoundedQueue(1, locked=self.locked)

    @rule(item=st.integers(0, 2))
    async def offer(self, item: int) -> bool:
        return await self.queue.offer(item)

    @rule()
    async def poll(self) -> int | None:
        return await self.queue.poll()


class LockedQueueMachine(UnlockedQueueMachine):
    locked = True


OBJECTS: list[tuple[str, type[ConcurrentStateMachine], bool]] = [
    ("counter (asyncio)", machines.UnlockedCounterMachine, True),
    ("get-or-create cache (threads)", machines.UnlockedCacheMachine, True),
    ("LRU + eviction callbacks (threads)", UnlockedLRUMachine, True),
    ("bounded queue (asyncio)", UnlockedQueueMachine, True),
    ("replica memory (threads)", conformance.machine(replicas.REPORTED, "memory"), True),
    ("replica stream (asyncio)", conformance.machine(replicas.REPORTED, "stream"), True),
    ("locked counter", machines.LockedCounterMachine, False),
    ("locked cache", machines.LockedCacheMachine, False),
    ("locked LRU", LockedLRUMachine, False),
    ("locked bounded queue", LockedQueueMachine, False),
    ("reference memory", conformance.machine(conformance.REFERENCE, "memory"), False),
    ("reference stream", conformance.machine(conformance.REFERENCE, "stream"), False),
]

# --- the three methods ----------------------------------------------------------------------


class Outcome:
    """What one method found on one object."""

    def __init__(self, found: bool, examples: int, first: float, total: float, calls: int):
        self.found, self.examples, self.first, self.total, self.calls = (
            found,
            examples,
            first,
            total,
            calls,
        )


def run_interlace(machine: type[ConcurrentStateMachine], max_examples: int) -> Outcome:
    seen: list[int] = []
    failed_at: list[tuple[int, float]] = []
    start = time.perf_counter()

    @seed(0)
    class Counting(machine):  # type: ignore[valid-type, misc]
        @classmethod
        def check_scenario(cls, scenario: Scenario) -> None:
            seen.append(1)
            try:
                super().check_scenario(scenario)
            except NotLinearizableError:
                if not failed_at:
                    failed_at.append((len(seen), time.perf_counter() - start))
                raise

    Counting.__name__ = Counting.__qualname__ = machine.__name__
    case: Any = Counting.TestCase
    case.settings = settings(
        database=None,
        deadline=None,
        max_examples=max_examples,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    try:
        case("runTest").runTest()
    except NotLinearizableError as error:
        total = time.perf_counter() - start
        calls = len(list(error.scenario.calls())) if error.scenario else 0
        return Outcome(True, failed_at[0][0], failed_at[0][1], total, calls)
    return Outcome(False, len(seen), 0.0, time.perf_counter() - start, 0)


def _call(
    instance: Any,
    function: Callable[..., Any],
    loop: asyncio.AbstractEventLoop | None,
    arguments: dict[str, Any],
) -> Any:
    try:
        value = function(instance, **arguments)
        if loop is not None:
            value = loop.run_until_complete(value)
    except Exception as exception:  # compared by type, as the linearizability check does
        return ("raised", type(exception))
    return value


class Tally:
    """Hypothesis examples begun, steps of the current one, and the first failure's
    (examples, seconds)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.examples = 0
        self.steps = 0
        self.first: tuple[int, float] | None = None


def sequential_machine(
    machine: type[ConcurrentStateMachine], tally: Tally
) -> type[RuleBasedStateMachine]:
    """A plain Hypothesis machine running ``machine``'s rules one at a time on the object and
    on its oracle (the model, or a second instance), comparing every result."""
    definition = stateful_module._definition(machine)
    asynchronous = definition.asynchronous

    class Sequential(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            tally.examples += 1
            tally.steps = 0
            self.loop = asyncio.new_event_loop() if asynchronous else None
            if self.loop is not None:
                asyncio.set_event_loop(self.loop)
            self.subject = machine()
            self.oracle = machine.model() if machine.model is not None else machine()
            self.forward: dict[int, int] = {}
            self.backward: dict[int, int] = {}
            for initializer in definition.initializers:
                _call(self.subject, initializer.function, self.loop, {})
                _call(self.oracle, initializer.function, self.loop, {})

        def teardown(self) -> None:
            if self.loop is not None:
                self.loop.close()
                asyncio.set_event_loop(None)

    def make(rule_: Any) -> Callable[..., None]:
        def step(self: Any, **arguments: Any) -> None:
            observed = _call(self.subject, rule_.function, self.loop, arguments)
            if machine.model is not None:
                method = getattr(self.oracle, rule_.name)
                function: Callable[..., Any] = lambda oracle, **kw: method(  # noqa: E731
                    *[kw[p] for p in rule_.parameters]
                )
                expected = _call(self.oracle, function, self.loop, arguments)
            else:
                expected = _call(self.oracle, rule_.function, self.loop, arguments)
            tally.steps += 1
            same = stateful_module._same_value(observed, expected, self.forward, self.backward)
            if not same and tally.first is None:
                tally.first = (tally.examples, time.perf_counter() - tally.start)
            assert same, f"{rule_.name}({arguments}) returned {observed!r}, expected {expected!r}"

        step.__name__ = rule_.name
        decorated: Callable[..., None] = rule(**rule_.arguments)(step)
        for condition in rule_.preconditions:

            def holds(self: Any, condition: Callable[[Any], bool] = condition) -> bool:
                return condition(self.subject)

            decorated = precondition(holds)(decorated)
        return decorated

    for rule_ in definition.rules:
        setattr(Sequential, rule_.name, make(rule_))
    Sequential.__name__ = f"Sequential{machine.__name__}"
    return Sequential


def run_sequential(machine: type[ConcurrentStateMachine], max_examples: int) -> Outcome:
    tally = Tally()
    case: Any = seed(0)(sequential_machine(machine, tally)).TestCase
    case.settings = settings(
        database=None,
        deadline=None,
        max_examples=max_examples,
        stateful_step_count=7,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    try:
        case("runTest").runTest()
    except AssertionError:
        # Hypothesis runs the shrunk example last: its steps are the shrunk scenario.
        assert tally.first is not None
        return Outcome(
            True, tally.first[0], tally.first[1], time.perf_counter() - tally.start, tally.steps
        )
    return Outcome(False, tally.examples, 0.0, time.perf_counter() - tally.start, 0)


RUNS_PER_SCENARIO = 20


def run_stress(machine: type[ConcurrentStateMachine], budget: float) -> Outcome:
    definition = stateful_module._definition(machine)
    strategy = machine.scenarios()
    runs = 0
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        while time.perf_counter() - start < budget:
            scenario = strategy.example()
            checker = machine._checker(definition, scenario)
            target = stateful_module._target(machine, definition, scenario, checker)
            for _ in range(RUNS_PER_SCENARIO):
                runs += 1
                try:
                    if definition.asynchronous:
                        asyncio.run(target())
                    else:
                        target()
                except NotLinearizableError:
                    first = time.perf_counter() - start
                    return Outcome(True, runs, first, first, len(list(scenario.calls())))
    return Outcome(False, runs, 0.0, time.perf_counter() - start, 0)


def cell(outcome: Outcome) -> str:
    if not outcome.found:
        return f"- ({outcome.examples} ex, {outcome.total:.1f} s)"
    return f"{outcome.examples} ex, {outcome.first:.2f} s, {outcome.calls} calls"


def ratio(a: Outcome, b: Outcome) -> str:
    if a.found and b.found and a.first > 0:
        return f"{b.first / a.first:.1f}x"
    if a.found and not b.found:
        return "only interlace"
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--switch-interval", type=float, default=None)
    parser.add_argument("--only", default=None, help="objects whose name contains this")
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    print(
        f"| object | buggy | interlace | sequential Hypothesis | stress ({args.budget:g} s) | "
        "stress / interlace (s to first failure) |"
    )
    print("|---|---|---|---|---|---|")
    for name, machine, buggy in OBJECTS:
        if args.only and args.only not in name:
            continue
        a = run_interlace(machine, args.max_examples)
        b = run_sequential(machine, args.max_examples)
        c = run_stress(machine, args.budget)
        print(
            f"| {name} | {'yes' if buggy else 'no'} | {cell(a)} | {cell(b)} | {cell(c)} | "
            f"{ratio(a, c)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
