"""The controlled event loop runs asyncio and anyio code unmodified, under every strategy."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gc
import re
import sys
import time
import traceback
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import anyio.lowlevel
import pytest

import interlace
from interlace._core.schedule import Settings
from interlace._core.strategy import Chooser
from interlace.errors import UnsupportedOperationError
from interlace.harness._loop import ControlledEventLoop

Scenario = Callable[[], Awaitable[None]]


async def tasks_gather_and_task_groups() -> None:
    results: list[int] = []

    async def worker(i: int) -> int:
        await asyncio.sleep(0)
        results.append(i)
        return i * 10

    assert await asyncio.gather(*(worker(i) for i in range(4))) == [0, 10, 20, 30]
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(worker(i)) for i in range(3)]
    assert [t.result() for t in tasks] == [0, 10, 20]
    assert sorted(results) == [0, 0, 1, 1, 2, 2, 3]


async def wait_wait_for_timeout_and_shield() -> None:
    slow = asyncio.create_task(asyncio.sleep(10, "slow"))
    fast = asyncio.create_task(asyncio.sleep(1, "fast"))
    done, pending = await asyncio.wait({slow, fast}, return_when=asyncio.FIRST_COMPLETED)
    assert done == {fast}
    assert pending == {slow}
    slow.cancel()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.sleep(5), timeout=1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await asyncio.sleep(3)
    assert await asyncio.shield(asyncio.sleep(0, "shielded")) == "shielded"


async def cancellation_runs_finally_blocks() -> None:
    cleaned: list[str] = []

    async def victim() -> None:
        try:
            await asyncio.sleep(100)
        finally:
            cleaned.append("victim")

    task = asyncio.create_task(victim())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["victim"]


async def queues_locks_events_conditions_semaphores_barriers() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=2)
    lock = asyncio.Lock()
    event = asyncio.Event()
    condition = asyncio.Condition()
    semaphore = asyncio.BoundedSemaphore(2)
    barrier = asyncio.Barrier(3)
    counter = {"n": 0, "ready": 0}

    async def producer() -> None:
        for i in range(5):
            await queue.put(i)
        await queue.put(-1)

    async def consumer() -> list[int]:
        got = []
        while (item := await queue.get()) != -1:
            got.append(item)
        return got

    async def guarded() -> None:
        async with semaphore, lock:
            value = counter["n"]
            await asyncio.sleep(0)
            counter["n"] = value + 1
        await barrier.wait()

    async def notifier() -> None:
        async with condition:
            counter["ready"] = 1
            condition.notify_all()
        event.set()

    async def waiter() -> None:
        async with condition:
            await condition.wait_for(lambda: counter["ready"] == 1)
        await event.wait()

    results = await asyncio.gather(
        producer(), consumer(), guarded(), guarded(), guarded(), waiter(), notifier()
    )
    assert results[1] == [0, 1, 2, 3, 4]
    assert counter["n"] == 3


async def async_generators_are_finalized() -> None:
    closed: list[bool] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            for i in range(10):
                await asyncio.sleep(0)
                yield i
        finally:
            closed.append(True)

    async for number in numbers():
        if number == 2:
            break
    await asyncio.sleep(0)
    assert [n async for n in numbers()] == list(range(10))


async def callbacks_and_timers() -> None:
    loop = asyncio.get_running_loop()
    order: list[str] = []
    loop.call_later(2, order.append, "later")
    loop.call_at(loop.time() + 1, order.append, "at")
    loop.call_soon(order.append, "soon")
    await asyncio.sleep(3)
    assert order == ["soon", "at", "later"]


async def executor_jobs_run_as_steps() -> None:
    loop = asyncio.get_running_loop()
    assert await asyncio.to_thread(sum, [1, 2, 3]) == 6
    assert await loop.run_in_executor(None, max, 4, 9) == 9


async def anyio_task_groups_streams_and_primitives() -> None:
    send, receive = anyio.create_memory_object_stream[int](2)
    lock = anyio.Lock()
    event = anyio.Event()
    got: list[int] = []

    async def produce() -> None:
        async with send:
            for i in range(4):
                await send.send(i)

    async def consume() -> None:
        async with receive:
            async for item in receive:
                async with lock:
                    got.append(item)
        event.set()

    async with anyio.create_task_group() as group:
        group.start_soon(produce)
        group.start_soon(consume)
    await event.wait()
    assert got == [0, 1, 2, 3]
    with anyio.fail_after(1):
        await anyio.sleep(0.5)
    with anyio.move_on_after(1) as scope:
        await anyio.sleep(5)
    assert scope.cancelled_caught


async def correct_spin_wait() -> None:
    flag = {"set": False}

    async def setter() -> None:
        await asyncio.sleep(0)
        await asyncio.sleep(0.002)  # near: busy work gets there in 2,000 steps
        flag["set"] = True

    task = asyncio.create_task(setter())
    while not flag["set"]:  # noqa: ASYNC110 - the spin-wait is what this scenario tests
        await asyncio.sleep(0)
    await task


async def task_factories_are_honoured() -> None:
    loop = asyncio.get_running_loop()
    made: list[asyncio.Task[Any]] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        made.append(task)
        return task

    loop.set_task_factory(factory)
    try:
        assert list(await asyncio.gather(asyncio.sleep(0, "a"), asyncio.sleep(0.1, "b"))) == [
            "a",
            "b",
        ]
        assert len(made) == 2
    finally:
        loop.set_task_factory(None)
    if sys.version_info < (3, 12):
        return
    order: list[str] = []

    async def quick(label: str) -> str:
        order.append(label)
        await asyncio.sleep(0)
        order.append(f"{label} resumed")
        return label

    eager_factories = [
        asyncio.eager_task_factory,
        asyncio.create_eager_task_factory(asyncio.Task),
    ]
    for eager in eager_factories:
        order.clear()
        loop.set_task_factory(eager)
        try:
            async with asyncio.TaskGroup() as group:
                first = group.create_task(quick("first"))
                assert order == ["first"]  # its first step ran inside create_task
                second = group.create_task(quick("second"))
                assert order == ["first", "second"]
            assert (first.result(), second.result()) == ("first", "second")
            done = asyncio.create_task(asyncio.sleep(0, "done"))
            assert not done.done()  # it suspended in its first step
            assert await done == "done"
        finally:
            loop.set_task_factory(None)


SCENARIOS = [
    tasks_gather_and_task_groups,
    wait_wait_for_timeout_and_shield,
    cancellation_runs_finally_blocks,
    queues_locks_events_conditions_semaphores_barriers,
    async_generators_are_finalized,
    callbacks_and_timers,
    executor_jobs_run_as_steps,
    anyio_task_groups_streams_and_primitives,
    correct_spin_wait,
    task_factories_are_honoured,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("strategy", ["auto", "random", "pct", "delay", "exhaustive"])
def test_correct_asyncio_code_passes_every_schedule(scenario: Scenario, strategy: str) -> None:
    exploration = interlace.explore(scenario, strategy=strategy, max_schedules=150, seed=7)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
    assert exploration.schedules >= 1


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_scenarios_also_pass_on_the_stock_loop(scenario: Scenario) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


async def _sleep_an_hour() -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.sleep(3600)
    assert 3600 < loop.time() - start < 3600 + 2e-6  # the wake-up takes a microsecond


def test_virtual_time_makes_long_sleeps_instant() -> None:
    exploration = interlace.explore(_sleep_an_hour, max_schedules=1, seed=0, max_time=7200)
    assert exploration.failure is None
    assert exploration.elapsed < 5


async def _open_a_socket() -> None:
    await asyncio.open_connection("127.0.0.1", 9)


def test_real_network_io_stops_the_exploration_with_what_to_do() -> None:
    # A refusal is a limit of the harness, not a bug of the program: no failing schedule,
    # no replay token, no "fails under stock order".
    with pytest.raises(UnsupportedOperationError) as caught:
        interlace.explore(_open_a_socket, max_schedules=1, seed=0)
    line = _open_a_socket.__code__.co_firstlineno + 1
    assert str(caught.value).startswith(
        "loop.create_connection() was called to open a network connection (by task 'main', "
        f"at tests/harness/test_controlled_loop.py:{line}): real I/O cannot be scheduled "
        "deterministically"
    )
    assert "in-memory fake" in str(caught.value)


_NETWORK_CLIENT = """\
import asyncio


async def fetch():
    await asyncio.open_connection("127.0.0.1", 9)
"""


def test_real_io_in_a_library_names_the_library_and_the_code_under_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = tmp_path / "site-packages"
    installed.mkdir()
    (installed / "netclient.py").write_text(_NETWORK_CLIENT)
    monkeypatch.syspath_prepend(str(installed))
    import netclient  # type: ignore[import-not-found]

    async def scenario() -> None:
        await netclient.fetch()

    with pytest.raises(UnsupportedOperationError) as caught:
        interlace.explore(scenario, max_schedules=1, seed=0)
    line = scenario.__code__.co_firstlineno + 1
    assert (
        "was called to open a network connection (by task 'main', at netclient.py:5, from the "
        f"code under test at tests/harness/test_controlled_loop.py:{line}): "
    ) in str(caught.value)


async def _subprocess() -> None:
    await asyncio.create_subprocess_exec("true")


async def _subprocess_in_a_task_group() -> None:
    async with asyncio.TaskGroup() as group:
        group.create_task(asyncio.sleep(1))
        group.create_task(_subprocess())


async def _subprocess_behind_another_error() -> None:
    try:
        await _subprocess()
    except UnsupportedOperationError as exc:
        raise ConnectionError("the tool server did not start") from exc


async def _subprocess_in_a_forgotten_task() -> None:
    done = asyncio.Event()

    async def start() -> None:
        await _subprocess()
        done.set()

    asyncio.create_task(start())  # noqa: RUF006
    await done.wait()


@pytest.mark.parametrize(
    "scenario",
    [
        _subprocess,
        _subprocess_in_a_task_group,
        _subprocess_behind_another_error,
        _subprocess_in_a_forgotten_task,
    ],
)
def test_a_subprocess_stops_the_exploration_however_the_refusal_surfaces(
    scenario: Scenario,
) -> None:
    with pytest.raises(UnsupportedOperationError, match=r"loop\.subprocess_exec\(\) was called"):
        interlace.explore(scenario, max_schedules=5, seed=0)


async def _subprocess_refused_and_handled() -> None:
    # The program copes with a tool that cannot start: a path a real run can take.
    with contextlib.suppress(UnsupportedOperationError):
        await _subprocess()


def test_a_refusal_the_program_handles_is_no_error() -> None:
    exploration = interlace.explore(_subprocess_refused_and_handled, max_schedules=5, seed=0)
    assert exploration.failure is None


async def _lock_order_deadlock(threads: bool = False) -> None:
    first, second = asyncio.Lock(), asyncio.Lock()

    async def forward() -> None:
        async with first:
            await asyncio.sleep(0)
            async with second:
                pass

    async def backward() -> None:
        async with second:
            await asyncio.sleep(0)
            async with first:
                pass

    if threads:
        await asyncio.to_thread(lambda: None)  # the run's threads are under control from here
    await asyncio.gather(forward(), backward())


def test_a_deadlock_names_every_task_what_it_waits_on_and_who_holds_it() -> None:
    exploration = interlace.explore(_lock_order_deadlock, max_schedules=10, seed=0)
    failure = exploration.failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert failure.label == "fails under stock order"
    assert "waits on Lock second held by task 'Task-3'" in failure.report
    assert "waits on Lock first held by task 'Task-2'" in failure.report
    assert "waits for gather() of 'Task-2', 'Task-3'" in failure.report


async def _never_set_event() -> None:
    await asyncio.Event().wait()


def test_waiting_on_an_event_nobody_sets_is_a_deadlock() -> None:
    failure = interlace.explore(_never_set_event, max_schedules=1, seed=0).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert "waits on an unnamed Event (no task will set it)" in failure.report


async def _put_on_a_full_queue() -> None:
    inbox: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
    await inbox.put(1)
    await inbox.put(2)


async def _get_from_an_empty_queue() -> None:
    inbox: asyncio.Queue[int] = asyncio.Queue()
    await inbox.get()


async def _wait_for_a_condition() -> None:
    changed = asyncio.Condition()
    async with changed:
        await changed.wait()


async def _acquire_a_taken_semaphore() -> None:
    slots = asyncio.Semaphore(1)
    await slots.acquire()
    async with slots:
        pass


async def _wait_for_an_event() -> None:
    ready = asyncio.Event()
    await ready.wait()


async def _wait_for_a_future_nobody_sets() -> None:
    reply = asyncio.get_running_loop().create_future()
    await asyncio.wait([reply, asyncio.create_task(asyncio.sleep(0))])


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (_put_on_a_full_queue, "waits on Queue inbox (full: no task will get an item)"),
        (_get_from_an_empty_queue, "waits on Queue inbox (empty: no task will put an item)"),
        (_wait_for_a_condition, "waits on Condition changed (no task will notify it)"),
        (_acquire_a_taken_semaphore, "waits on Semaphore slots held by task 'main' (itself)"),
        (_wait_for_an_event, "waits on Event ready (no task will set it)"),
        (_wait_for_a_future_nobody_sets, "waits in asyncio.wait() for future reply"),
    ],
    ids=lambda value: getattr(value, "__name__", "")[1:],
)
def test_a_deadlock_names_the_local_each_task_waits_on_and_what_would_free_it(
    scenario: Scenario, expected: str
) -> None:
    failure = interlace.explore(scenario, max_schedules=1, seed=0).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    blocked = failure.report.split("Blocked:\n", 1)[1].splitlines()[0]
    assert blocked.endswith(f") {expected}"), blocked


async def _livelock() -> None:
    while True:  # noqa: ASYNC110 - a livelock on purpose
        await asyncio.sleep(0)


def test_a_task_that_never_stops_is_a_hang_with_the_tasks_that_kept_running() -> None:
    failure = interlace.explore(_livelock, max_schedules=1, seed=0, max_steps=5000).failure
    assert failure is not None
    assert failure.kind == "hang"
    assert "Still running: the run took more than 5000 steps" in failure.report
    assert "'main': " in failure.report


def _counter_race() -> Scenario:
    async def scenario() -> None:
        state = {"n": 0}

        async def increment(io_steps: int) -> None:
            for _ in range(io_steps):
                await asyncio.sleep(0)
            value = state["n"]
            await asyncio.sleep(0)
            state["n"] = value + 1

        await asyncio.gather(increment(0), increment(1), increment(3))
        assert state["n"] == 3, state

    return scenario


def test_the_same_seed_gives_the_same_token_every_time() -> None:
    scenario = _counter_race()
    tokens = set()
    for _ in range(100):
        failure = interlace.explore(scenario, max_schedules=200, seed=42).failure
        assert failure is not None
        tokens.add(failure.token)
    assert len(tokens) == 1


def test_the_replay_line_in_the_report_replays_the_same_failure() -> None:
    scenario = _counter_race()
    failure = interlace.explore(scenario, max_schedules=200, seed=3).failure
    assert failure is not None
    line = next(line for line in failure.report.splitlines() if "interlace.replay(" in line)
    token = line.split("'")[1]
    again = interlace.replay(scenario, token)
    assert again is not None
    assert again.kind == failure.kind
    assert type(again.exception) is type(failure.exception)
    assert again.token == failure.token
    # A replay shrinks nothing: it says how many steps, not what it was shrunk from.
    assert again.report.startswith(f"Failing schedule ({failure.steps} steps):\n")


def test_a_hang_of_identical_steps_reports_the_last_one_and_a_count() -> None:
    async def spins_forever() -> None:
        while True:  # noqa: ASYNC110 - a hang on purpose
            await asyncio.sleep(0)

    failure = interlace.explore(spins_forever, max_schedules=1, seed=1, max_steps=2000).failure
    assert failure is not None
    assert failure.kind == "hang"
    schedule = failure.report.split("\n\n")[0].splitlines()
    assert schedule[1] == "  ... 1600 earlier steps not shown ..."
    assert re.fullmatch(
        r"  1601\. main: resumed at .*test_controlled_loop\.py:\d+ -> "
        r".*test_controlled_loop\.py:\d+ await asyncio\.sleep\(0\)",
        schedule[2],
    )
    assert schedule[3:] == ["        ... the same step 399 more times, to step 2000 ..."]
    # Failure.schedule keeps every recorded step.
    assert len(failure.schedule) == 400


def test_a_schedule_of_one_step_is_reported_as_one_step() -> None:
    async def waits_forever() -> None:
        await asyncio.Event().wait()

    failure = interlace.explore(waits_forever, max_schedules=5, seed=1).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert failure.steps == 1
    assert failure.report.startswith("Failing schedule (1 step):\n")


def test_a_replay_of_a_fixed_program_returns_none() -> None:
    failure = interlace.explore(_counter_race(), max_schedules=200, seed=3).failure
    assert failure is not None

    async def fixed() -> None:
        state = {"n": 0}
        lock = asyncio.Lock()

        async def increment(io_steps: int) -> None:
            for _ in range(io_steps):
                await asyncio.sleep(0)
            async with lock:
                value = state["n"]
                await asyncio.sleep(0)
                state["n"] = value + 1

        await asyncio.gather(increment(0), increment(1), increment(3))

    # The fix adds steps, so the schedule's decisions may no longer fit: either the replay
    # passes or it says precisely where it diverged.
    outcome: object
    try:
        outcome = interlace.replay(fixed, failure.token)
    except interlace.errors.ReplayDivergedError as exc:
        outcome = str(exc)
    assert outcome is None or (isinstance(outcome, str) and outcome.startswith("replay diverged"))


async def _returns_immediately() -> None:
    return None


def test_a_replay_that_diverges_names_the_step_and_the_likely_causes() -> None:
    failure = interlace.explore(_counter_race(), max_schedules=200, seed=3).failure
    assert failure is not None
    with pytest.raises(interlace.errors.ReplayDivergedError) as info:
        interlace.replay(_returns_immediately, failure.token)
    message = str(info.value)
    assert message.startswith("replay diverged: ")
    assert "step" in message
    assert "wall clock" in message
    assert "PYTHONHASHSEED" in message


def test_unseeded_explorations_pick_different_seeds() -> None:
    seeds = {interlace.explore(_returns_immediately, max_schedules=1).seed for _ in range(5)}
    assert len(seeds) > 1


def test_a_failing_exception_carries_a_note_with_the_replay_line() -> None:
    failure = interlace.explore(_counter_race(), max_schedules=200, seed=3).failure
    assert failure is not None
    assert failure.exception is not None
    notes = getattr(failure.exception, "__notes__", [])
    assert any("interlace.replay(" in note and failure.token in note for note in notes)


@contextlib.asynccontextmanager
async def _state(holder: dict[str, str], value: str) -> AsyncIterator[None]:
    saved = holder["state"]
    holder["state"] = value
    try:
        yield
    finally:
        holder["state"] = saved


async def _stale_restore() -> None:
    holder = {"state": "idle"}

    async def run(value: str, io_steps: int) -> None:
        for _ in range(io_steps):
            await asyncio.sleep(0)
        async with _state(holder, value):
            await asyncio.sleep(0)

    await asyncio.gather(run("a", 0), run("b", 1))
    assert holder["state"] == "idle", holder


def test_a_stale_restore_is_found_and_shrunk_to_the_fewest_deviations() -> None:
    failure = interlace.explore(_stale_restore, max_schedules=500, seed=1).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert isinstance(failure.exception, AssertionError)
    # Stock order passes: "a" restores "idle" before "b" saves. Postponing "a"'s resumption
    # once lets "b" save "a" as its old state, and "b" restores that stale value last.
    assert failure.deviations == 1
    assert failure.label == "needs await latency"


async def _three_inversions() -> None:
    # Twelve gathered tasks finish in any order the loop allows; the assertion fails when
    # three pairs finish the other way round. No schedule with two deviations does that.
    order: list[int] = []

    async def worker(index: int) -> None:
        await asyncio.sleep(0)
        order.append(index)

    await asyncio.gather(*(worker(index) for index in range(12)))
    before = order.index
    assert not (before(11) < before(3) and before(7) < before(1) and before(9) < before(5))


def test_shrinking_a_wide_failure_reaches_the_fewest_deviations_on_most_seeds() -> None:
    two = interlace.explore(_three_inversions, strategy="exhaustive", bound=2, max_schedules=5000)
    assert two.failure is None
    assert two.exhausted
    shrunk = []
    for seed in range(10):
        failure = interlace.explore(_three_inversions, seed=seed, max_schedules=5000).failure
        assert failure is not None
        shrunk.append(failure.deviations)
    # Dropping a deviation used to let the entries it kept back run at its step, and replay
    # later ones by index, not by task: 4, 6, 8, 3, 4, 3, 4, 6, 7, 5 deviations.
    assert sorted(shrunk)[8] == 3, shrunk  # at least 9 seeds of 10 at the minimum
    assert max(shrunk) <= 4, shrunk


@pytest.mark.parametrize("seed", [19, 21, 37])
def test_an_entry_pulled_forward_lets_the_later_deviations_come_a_step_sooner(seed: int) -> None:
    # These seeds stopped at 4 deviations while a pulled-forward entry left the later
    # deviations at their steps: one step too late, behind an entry the failure needs later.
    failure = interlace.explore(_three_inversions, seed=seed, max_schedules=5000).failure
    assert failure is not None
    assert failure.deviations == 3


async def _raises_in_a_child_task() -> None:
    async def inner() -> None:
        raise ValueError("boom")

    await asyncio.gather(inner())


def test_the_users_exception_keeps_only_the_users_frames() -> None:
    failure = interlace.explore(_raises_in_a_child_task, max_schedules=1, seed=0).failure
    assert failure is not None
    assert isinstance(failure.exception, ValueError)
    frames = traceback.extract_tb(failure.exception.__traceback__)
    assert [frame.name for frame in frames] == ["_raises_in_a_child_task", "inner"]


def test_a_target_that_cannot_be_imported_gets_no_command_line_replay() -> None:
    async def local_scenario() -> None:
        raise ValueError("boom")

    failure = interlace.explore(local_scenario, max_schedules=1, seed=0).failure
    assert failure is not None
    assert "interlace replay " not in failure.report
    assert "interlace.replay(" in failure.report


async def _two_jobs_racing() -> None:
    box = {"n": 0}

    def read_modify_write() -> None:
        value = box["n"]
        box["n"] = value + 1

    await asyncio.gather(asyncio.to_thread(read_modify_write), asyncio.to_thread(read_modify_write))


def test_exhaustion_is_claimed_over_executor_jobs_that_ran_as_controlled_threads() -> None:
    exploration = interlace.explore(_two_jobs_racing, strategy="exhaustive", max_schedules=1000)
    assert exploration.failure is None
    assert exploration.exhausted is True


_outside_pool: list[concurrent.futures.ThreadPoolExecutor] = []
"""An executor whose worker thread starts before the exploration: it runs uncontrolled."""


async def _jobs_in_an_uncontrolled_pool() -> None:
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(_outside_pool[0], sum, [1, 2]) == 3


def test_exhaustion_is_not_claimed_when_executor_jobs_ran_as_opaque_steps() -> None:
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    _outside_pool[:] = [pool]
    try:
        pool.submit(int).result()  # its worker thread is running, outside any schedule
        exploration = interlace.explore(
            _jobs_in_an_uncontrolled_pool, strategy="exhaustive", max_schedules=100
        )
    finally:
        # Its worker would outlive the test as a thread no exploration controls.
        pool.shutdown(wait=True)
        _outside_pool.clear()
    assert exploration.failure is None
    assert exploration.exhausted is False


async def _callbacks_then_deadlock() -> None:
    loop = asyncio.get_running_loop()
    loop.call_soon(functools.partial(print, end=""))
    await asyncio.sleep(0)
    await asyncio.Lock().acquire()
    await asyncio.Event().wait()


def test_reports_contain_no_memory_addresses() -> None:
    failure = interlace.explore(_callbacks_then_deadlock, max_schedules=1, seed=0).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert "callback partial(print)" in failure.report
    assert " at 0x" not in failure.report


async def _raises_a_message_of_three_lines() -> None:
    async def worker() -> None:
        await asyncio.sleep(0)
        raise ValueError("balance -60\nassert -60 >= 0\n +  where -60 = account.balance")

    await asyncio.gather(worker(), asyncio.sleep(0))


def test_a_step_that_raised_is_one_line_of_the_schedule() -> None:
    # pytest's rewritten assertions have messages of several lines; only the first goes in the
    # step, and the whole message stays in the report's "Exception:" section.
    failure = interlace.explore(_raises_a_message_of_three_lines, max_schedules=1, seed=0).failure
    assert failure is not None
    steps = failure.report.split("\n\nException:")[0].splitlines()[1:]
    assert all(re.match(r"  +\d+\. ", step) for step in steps), steps
    assert any(step.endswith("-> raised ValueError: balance -60 ...") for step in steps)
    assert "+  where -60 = account.balance" in failure.report


async def _anyio_lock_order_deadlock() -> None:
    first, second = anyio.Lock(), anyio.Lock()

    async def forward() -> None:
        async with first:
            await anyio.lowlevel.checkpoint()
            async with second:
                pass

    async def backward() -> None:
        async with second:
            await anyio.lowlevel.checkpoint()
            async with first:
                pass

    async with anyio.create_task_group() as group:
        group.start_soon(forward, name="forward")
        group.start_soon(backward, name="backward")


def test_an_anyio_deadlock_names_the_locks_their_holders_and_the_task_group() -> None:
    failure = interlace.explore(_anyio_lock_order_deadlock, max_schedules=10, seed=0).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert "waits for its task group to finish ('forward', 'backward')" in failure.detail
    assert "task 'forward'" in failure.detail
    assert "waits on Lock second held by task 'backward'" in failure.detail
    assert "waits on Lock first held by task 'forward'" in failure.detail


async def _skips() -> None:
    pytest.skip("not on this platform")


async def _xfails() -> None:
    pytest.xfail("known")


async def _fails() -> None:
    pytest.fail("a real failure")


@pytest.mark.parametrize("scenario", [_skips, _xfails])
def test_pytest_skip_and_xfail_end_the_exploration_instead_of_failing(scenario: Scenario) -> None:
    with pytest.raises((pytest.skip.Exception, pytest.xfail.Exception)):
        interlace.explore(scenario, max_schedules=10, seed=0)


def test_pytest_fail_is_a_failure() -> None:
    failure = interlace.explore(_fails, max_schedules=10, seed=0).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert isinstance(failure.exception, pytest.fail.Exception)


class _InterruptedSettings:
    """Settings whose ``stall_us`` is never read: Ctrl-C lands while the loop is built."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def __getattr__(self, name: str) -> object:
        if name == "stall_us":
            raise KeyboardInterrupt
        return getattr(self._settings, name)


@pytest.mark.parametrize("where", ["BaseEventLoop.__init__", "ControlledEventLoop.__init__"])
def test_a_loop_whose_construction_is_interrupted_is_dropped_quietly(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda hook: unraisable.append(repr(hook)))
    settings: Any = Settings()
    if where == "BaseEventLoop.__init__":
        # Before BaseEventLoop.__init__ sets _debug, which the stock __del__'s repr reads.
        monkeypatch.setattr(time, "get_clock_info", mock.Mock(side_effect=KeyboardInterrupt))
    else:
        # After it: before this loop sets _job_executor, which close() reads.
        settings = _InterruptedSettings(settings)
    with pytest.raises(KeyboardInterrupt):
        ControlledEventLoop(Chooser(), settings)
    monkeypatch.undo()
    gc.collect()
    assert unraisable == []


def test_an_unclosed_loop_is_closed_without_a_resource_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run interrupted between building its loop and closing it; the loop holds no OS
    # resource, so there is nothing to warn about.
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda hook: unraisable.append(repr(hook)))
    loop = ControlledEventLoop(Chooser(), Settings())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del loop
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert unraisable == []


@pytest.mark.parametrize("threads", [False, True], ids=["tasks", "tasks-and-threads"])
def test_a_deadlock_report_puts_the_tasks_wait_for_cycle_first(threads: bool) -> None:
    failure = interlace.explore(
        functools.partial(_lock_order_deadlock, threads), max_schedules=5, seed=1
    ).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    lines = failure.detail.splitlines()
    tasks = [line.strip() for line in lines if line.strip().startswith("task ")]
    # One line a task, the two of the cycle first, then the one that waits for them.
    forward, backward = (line.split()[1] for line in tasks[:2])
    assert [line.split()[1] for line in tasks[2:]] == ["'main'"], lines
    assert f"waits on Lock second held by task {backward}" in tasks[0]
    assert f"waits on Lock first held by task {forward}" in tasks[1]
    cycle = f"Wait-for cycle: task {forward} -> task {backward} -> task {forward}"
    assert cycle in [line.strip() for line in lines], lines
    if threads:  # under the line of the loop's thread, indented below it
        loop_line = next(i for i, line in enumerate(lines) if "at its event loop" in line)
        assert lines[loop_line].endswith("; its tasks:"), lines
        assert lines[loop_line + 1].startswith(f"      task {forward}"), lines
        # The executor's idle worker has no frame of the code under test to show.
        assert any(
            line.endswith("(in library code) waits for a notify on Condition Semaphore._cond")
            for line in lines
        ), lines
