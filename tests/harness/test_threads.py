"""Controlled threads: plain-function targets run their threads one at a time, under the engine.

Every program here is small and written for one behaviour of the model: a bug it must find
(with the right kind, shrunk and replayed), or correct code it must pass on every schedule.
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import itertools
import queue
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import interlace
from interlace.errors import InvalidTargetError, UnsupportedOperationError

PREEMPTION = "needs thread preemption"
SEED = 7


def _run_threads(*targets: Callable[[], object]) -> None:
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# -- bugs it finds ------------------------------------------------------------------------------


class Registry:
    def __init__(self) -> None:
        self.items: dict[str, object] = {}
        self.created = 0
        self.lock = threading.Lock()

    def get(self, key: str) -> object:
        if key not in self.items:
            self.created += 1
            self.items[key] = object()  # noqa: IL102 - the race under test
        return self.items[key]

    def get_locked(self, key: str) -> object:
        with self.lock:
            return self.get(key)


def check_then_insert() -> None:
    registry = Registry()
    _run_threads(lambda: registry.get("k"), lambda: registry.get("k"))
    assert registry.created == 1, f"created {registry.created} times"


def check_then_insert_locked() -> None:
    registry = Registry()
    _run_threads(lambda: registry.get_locked("k"), lambda: registry.get_locked("k"))
    assert registry.created == 1, f"created {registry.created} times"


def test_check_then_insert_is_found_shrunk_and_replayed() -> None:
    exploration = interlace.explore(check_then_insert, seed=SEED, max_schedules=300)
    failure = exploration.failure
    assert failure is not None, f"not found in {exploration.schedules} schedules"
    assert failure.kind == "exception"
    assert isinstance(failure.exception, AssertionError)
    assert failure.label == PREEMPTION
    assert failure.deviations == 1
    assert "preempts" in failure.report
    again = interlace.replay(check_then_insert, failure.token)
    assert again is not None
    assert again.kind == "exception"
    assert again.token == failure.token


def three_in_flight() -> None:
    """Fails only when all three calls are in flight at once: two threads preempted, each
    between its append and its remove."""
    in_flight: list[str] = []

    def call(name: str) -> None:
        in_flight.append(name)
        assert len(in_flight) <= 2, f"{len(in_flight)} calls in flight"
        in_flight.remove(name)

    threads = [threading.Thread(target=call, args=(name,)) for name in "abc"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.mark.parametrize("strategy", ["auto", "random", "pct"])
def test_a_failure_that_needs_two_preemptions_is_shrunk_to_two(strategy: str) -> None:
    # Dropping one deviation of a schedule of threads moves the steps of the later ones:
    # shrinking also replays deviations anchored in each thread's own progress, and tries
    # the threads one after another to where the failure found them (3-5 before, on these
    # seeds).
    for seed in range(5):
        exploration = interlace.explore(
            three_in_flight, strategy=strategy, seed=seed, max_schedules=3000
        )
        failure = exploration.failure
        assert failure is not None
        assert failure.deviations == 2, (seed, failure.report)
        again = interlace.replay(three_in_flight, failure.token)
        assert again is not None
        assert again.deviations == 2


class _OverReleasedSlots:
    """Two slots, but the error path gives its slot back twice (as in
    ``thread_bugs/semaphore_over_release``): after one failed call, three fit."""

    def __init__(self) -> None:
        self.slots = threading.Semaphore(2)
        self.in_flight: list[str] = []

    def call(self, prompt: str) -> None:
        self.slots.acquire()
        try:
            if not prompt:
                raise ValueError("empty prompt")
            self.in_flight.append(prompt)
            assert len(self.in_flight) <= 2, f"{len(self.in_flight)} calls in flight"
            self.in_flight.remove(prompt)
        except ValueError:
            self.slots.release()
        finally:
            self.slots.release()


async def three_jobs_through_over_released_slots() -> None:
    client = _OverReleasedSlots()
    client.call("")
    await asyncio.gather(
        *(asyncio.to_thread(client.call, prompt) for prompt in ("plan", "search", "summarise"))
    )


@pytest.mark.parametrize("strategy", ["auto", "random", "pct"])
def test_executor_jobs_that_need_two_preemptions_are_shrunk_to_two(strategy: str) -> None:
    # Tasks and threads under one scheduler: the loop's choices are anchored in its own
    # progress as the threads' are, and the failure is cut where the job raised, not where
    # the task re-raised it (3-5 deviations before, on these seeds).
    for seed in range(3):
        exploration = interlace.explore(
            three_jobs_through_over_released_slots,
            strategy=strategy,
            seed=seed,
            max_schedules=3000,
        )
        failure = exploration.failure
        assert failure is not None
        assert failure.label == PREEMPTION
        assert failure.deviations == 2, (seed, failure.report)
        again = interlace.replay(three_jobs_through_over_released_slots, failure.token)
        assert again is not None
        assert again.deviations == 2


def test_the_locked_version_passes_every_schedule() -> None:
    exploration = interlace.explore(check_then_insert_locked, seed=SEED, max_schedules=300)
    assert exploration.failure is None
    assert exploration.schedules == 300 or exploration.exhausted


class Counter:
    def __init__(self) -> None:
        self.value = 0

    def bump(self) -> None:
        self.value += 1  # one line: read, add, write


def lost_increment() -> None:
    counter = Counter()
    _run_threads(counter.bump, counter.bump)
    assert counter.value == 2, counter.value


def test_threads_that_share_a_name_are_told_apart_in_the_report() -> None:
    # anyio names every worker thread 'AnyIO worker thread'.
    def scenario() -> None:
        counter = Counter()
        workers = [threading.Thread(target=counter.bump, name="worker") for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert counter.value == 2, counter.value

    failure = interlace.explore(scenario, seed=SEED).failure
    assert failure is not None
    preempting = next(step for step in failure.schedule if "preempts" in step.deviation)
    preempted = preempting.deviation.split("preempts ")[1].split(" (")[0]
    assert {preempting.actor, preempted} == {
        "worker",
        "worker #2",
    }


def test_a_read_modify_write_inside_one_line_is_split() -> None:
    failure = interlace.explore(lost_increment, seed=SEED, max_schedules=300).failure
    assert failure is not None
    # Between the read and the write only an addition of ints: a GIL build never switches
    # threads there (tests/harness/test_gil_realizable.py).
    assert failure.label == "needs a free-threaded build"
    assert failure.deviations == 1


LOCK_A = threading.Lock()  # created at import time, before any exploration
LOCK_B = threading.Lock()


def _a_then_b() -> None:
    with LOCK_A, LOCK_B:
        pass


def _b_then_a() -> None:
    LOCK_B.acquire()
    try:
        with LOCK_A:
            pass
    finally:
        LOCK_B.release()


def lock_order() -> None:
    _run_threads(_a_then_b, _b_then_a)


def test_lock_order_deadlock_on_import_time_locks_reports_the_wait_for_graph() -> None:
    failure = interlace.explore(lock_order, seed=SEED, max_schedules=300).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert failure.label == PREEMPTION
    assert "LOCK_A" in failure.detail
    assert "LOCK_B" in failure.detail
    assert "held by Thread-1 (_a_then_b)" in failure.detail
    assert "held by Thread-2 (_b_then_a)" in failure.detail
    assert "Wait-for cycle:" in failure.detail
    # The locks are free again: the run unwound both threads.
    assert not LOCK_A.locked()
    assert not LOCK_B.locked()


def lost_notify() -> None:
    condition = threading.Condition()
    ready: list[bool] = []

    def consumer() -> None:
        with condition:
            condition.wait()  # the fix: while not ready: condition.wait()

    def producer() -> None:
        with condition:
            ready.append(True)
            condition.notify()

    _run_threads(consumer, producer)


def test_a_lost_notify_on_a_condition_is_a_deadlock() -> None:
    failure = interlace.explore(lost_notify, seed=SEED, max_schedules=300).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert "a notify on" in failure.detail


def child_raises() -> None:
    def worker() -> None:
        raise KeyError("missing")

    _run_threads(worker)


def test_an_exception_in_a_thread_is_a_failure_naming_the_thread() -> None:
    failure = interlace.explore(child_raises, seed=SEED, max_schedules=5).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert isinstance(failure.exception, KeyError)
    assert failure.label == "fails under stock order"
    assert "Thread-1 (worker)" in failure.detail


def hopeless_spin() -> None:
    flag: list[bool] = []

    def waiter() -> None:
        while not flag:
            pass

    _run_threads(waiter)


def test_a_spin_wait_that_never_sees_progress_is_a_hang() -> None:
    failure = interlace.explore(hopeless_spin, seed=SEED, max_schedules=3, max_steps=5_000).failure
    assert failure is not None
    assert failure.kind == "hang"
    assert "Thread-1 (waiter): running" in failure.detail


def _spins_while_a_worker_sleeps(worker_sleeps: float, *, forever: bool = False) -> None:
    done = threading.Event()

    def worker() -> None:
        time.sleep(worker_sleeps)  # past what 5,000 points of busy work reach (50 us)
        if not forever:
            done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    while not done.is_set():
        time.sleep(0)
    thread.join()


def test_a_spin_wait_on_a_thread_that_sleeps_past_the_budget_passes_in_overtime() -> None:
    exploration = interlace.explore(
        lambda: _spins_while_a_worker_sleeps(0.5), seed=SEED, max_schedules=3, max_steps=5_000
    )
    assert exploration.failure is None, exploration.failure and exploration.failure.report


def test_a_spin_wait_that_still_spins_in_overtime_is_a_hang_that_says_why_it_may_be_none() -> None:
    failure = interlace.explore(
        lambda: _spins_while_a_worker_sleeps(0.5, forever=True),
        seed=SEED,
        max_schedules=1,
        max_steps=5_000,
    ).failure
    assert failure is not None
    assert failure.kind == "hang"
    assert (
        "Not necessarily a hang: thread 'Thread-1 (worker)' waits with a timeout, until "
        "virtual time 0.500001 s (time.sleep(0.5))." in failure.detail
    )
    assert "Continued past the budget with the clock moving on to each pending deadline, the " in (
        failure.detail
    )


def _counts(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


async def _computes_in_a_job_inside_a_timeout() -> None:
    # 50,000 rounds take about 5 ms on a stock interpreter; at a microsecond a point they
    # took 0.1 s of virtual time and the 50 ms timeout fired.
    async with asyncio.timeout(0.05):
        assert await asyncio.to_thread(_counts, 50_000) == sum(range(50_000))


def test_a_job_that_computes_takes_no_longer_than_on_the_fastest_machine() -> None:
    asyncio.run(_computes_in_a_job_inside_a_timeout())
    exploration = interlace.explore(
        _computes_in_a_job_inside_a_timeout, seed=SEED, max_schedules=2, max_steps=400_000
    )
    assert exploration.failure is None, exploration.failure and exploration.failure.report


# -- correct code it passes -----------------------------------------------------------------------


def spin_wait() -> None:
    flag: list[bool] = []

    def setter() -> None:
        flag.append(True)

    def waiter() -> None:
        while not flag:
            pass

    _run_threads(waiter, setter)


@pytest.mark.parametrize("strategy", ["auto", "random", "pct", "delay", "exhaustive"])
def test_a_correct_spin_wait_is_never_a_hang(strategy: str) -> None:
    exploration = interlace.explore(spin_wait, seed=SEED, strategy=strategy, max_schedules=150)
    assert exploration.failure is None


def primitives() -> None:
    """Event, Semaphore, BoundedSemaphore, Barrier, RLock, Queue and join, used correctly."""
    event = threading.Event()
    semaphore = threading.BoundedSemaphore(1)
    barrier = threading.Barrier(2)
    rlock = threading.RLock()
    jobs: queue.Queue[int | None] = queue.Queue(maxsize=1)
    results: list[int] = []
    inside = [0]

    def worker() -> None:
        event.wait()
        barrier.wait()
        while (job := jobs.get()) is not None:
            with semaphore:
                inside[0] += 1
                assert inside[0] == 1
                inside[0] -= 1
            with rlock, rlock:
                results.append(job)
            jobs.task_done()
        jobs.task_done()

    def other() -> None:
        barrier.wait()
        with semaphore:
            inside[0] += 1
            assert inside[0] == 1
            inside[0] -= 1

    threads = [threading.Thread(target=worker), threading.Thread(target=other)]
    for thread in threads:
        thread.start()
    event.set()
    for job in range(3):
        jobs.put(job)
    jobs.put(None)
    jobs.join()
    for thread in threads:
        thread.join()
    assert results == [0, 1, 2]


def test_the_threading_and_queue_primitives_pass_every_schedule() -> None:
    for strategy in ("auto", "random", "pct", "delay"):
        exploration = interlace.explore(primitives, seed=SEED, strategy=strategy, max_schedules=100)
        assert exploration.failure is None, exploration.failure and exploration.failure.report


def sleepy() -> None:
    started = time.monotonic()
    done = threading.Event()

    def slow() -> None:
        time.sleep(50)
        done.set()

    threading.Thread(target=slow).start()
    assert not done.wait(timeout=10)  # times out in virtual time
    assert done.wait(timeout=100)
    elapsed = time.monotonic() - started
    assert 49.9 < elapsed < 50.1, elapsed


def test_sleep_and_timeouts_run_on_a_virtual_clock() -> None:
    wall = time.perf_counter()
    exploration = interlace.explore(sleepy, seed=SEED, max_schedules=20)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
    assert time.perf_counter() - wall < 30  # 20 schedules of 50 virtual seconds each


def daemon_waits_forever() -> None:
    never = threading.Event()
    threading.Thread(target=never.wait, daemon=True).start()


def worker_waits_forever() -> None:
    never = threading.Event()
    threading.Thread(target=lambda: never.wait()).start()


def test_a_daemon_left_waiting_is_fine_a_non_daemon_is_a_hang_at_exit() -> None:
    assert interlace.explore(daemon_waits_forever, seed=SEED, max_schedules=5).failure is None
    failure = interlace.explore(worker_waits_forever, seed=SEED, max_schedules=5).failure
    assert failure is not None
    assert failure.kind == "deadlock"


def loop_in_a_thread() -> None:
    box: list[int] = []

    async def main() -> int:
        return await asyncio.to_thread(lambda: 40) + 2

    def runner() -> None:
        box.append(asyncio.run(main()))

    _run_threads(runner, runner)
    assert box == [42, 42]


def test_a_thread_may_run_its_own_event_loop() -> None:
    exploration = interlace.explore(loop_in_a_thread, seed=SEED, max_schedules=30)
    assert exploration.failure is None, exploration.failure and exploration.failure.report


def test_no_thread_outlives_an_exploration() -> None:
    before = threading.active_count()
    interlace.explore(lock_order, seed=SEED, max_schedules=50)
    interlace.explore(worker_waits_forever, seed=SEED, max_schedules=5)
    interlace.explore(loop_in_a_thread, seed=SEED, max_schedules=5)
    assert threading.active_count() == before


# -- the contracts the asyncio explorer has too ---------------------------------------------------


def test_the_same_seed_gives_the_same_token() -> None:
    tokens = set()
    for _ in range(10):
        failure = interlace.explore(check_then_insert, seed=11, max_schedules=300).failure
        assert failure is not None
        tokens.add(failure.token)
    assert len(tokens) == 1


def _spin_until(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        count += 1
        count %= 1000


@pytest.mark.parametrize("start", ["before", "during"])
def test_a_thread_the_exploration_does_not_control_never_moves_the_schedule(start: str) -> None:
    # The other thread runs code under test (this file) all the while, its lines
    # interleaved with the runs' wherever the GIL switches: never counted as points.
    expected = interlace.explore(check_then_insert, seed=11, max_schedules=300).failure
    assert expected is not None
    stop = threading.Event()
    started: list[int] = []

    def target() -> None:
        if not started:
            started.append(_thread.start_new_thread(_spin_until, (stop,)))
        check_then_insert()

    other = threading.Thread(target=_spin_until, args=(stop,))
    if start == "before":
        other.start()
    try:
        for _ in range(3):
            explored = target if start == "during" else check_then_insert
            failure = interlace.explore(explored, seed=11, max_schedules=300).failure
            assert failure is not None
            assert failure.token == expected.token or start == "during"
            assert interlace.replay(explored, failure.token) is not None
    finally:
        stop.set()
        if other.is_alive():
            other.join()


async def _async_target() -> None:
    pass


def test_a_token_replays_only_with_the_kind_of_target_it_was_made_with() -> None:
    failure = interlace.explore(check_then_insert, seed=SEED, max_schedules=300).failure
    assert failure is not None
    with pytest.raises(InvalidTargetError, match="plain"):
        interlace.replay(_async_target, failure.token)


def test_a_nested_threads_exploration_is_refused() -> None:
    errors: list[BaseException] = []

    def outer() -> None:
        try:
            interlace.explore(check_then_insert, max_schedules=1)
        except UnsupportedOperationError as exc:
            errors.append(exc)

    interlace.explore(outer, seed=SEED, max_schedules=1)
    assert errors
    assert "already running" in str(errors[0])


def test_generator_functions_are_not_targets() -> None:
    def generator() -> object:
        yield 1

    with pytest.raises(InvalidTargetError, match="generator function"):
        interlace.explore(generator)


# -- interrupts -----------------------------------------------------------------------------------


def exits_in_a_thread() -> None:
    def worker() -> None:
        pytest.exit("stop the session", returncode=3)

    _run_threads(worker)


def test_pytest_exit_in_a_thread_ends_the_exploration() -> None:
    before = threading.active_count()
    with pytest.raises(pytest.exit.Exception, match="stop the session"):
        interlace.explore(exits_in_a_thread, seed=SEED, max_schedules=10)
    assert threading.active_count() == before


def interrupted() -> None:
    import _thread

    def worker() -> None:
        _thread.interrupt_main()  # Ctrl-C arrives while the main thread waits for the baton
        for _ in range(100):
            pass

    _run_threads(worker)


def test_ctrl_c_ends_the_exploration_and_leaks_no_thread() -> None:
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        interlace.explore(interrupted, seed=SEED, max_schedules=10)
    assert threading.active_count() == before


class _Box:
    pass


_swallowed_once: list[bool] = []


def _ctrl_c_python_swallows() -> None:
    """Ctrl-C arrives while a weakref callback runs (threading runs one each time a Thread
    object dies, thousands of times a second in an exploration): Python prints "Exception
    ignored" and goes on without the KeyboardInterrupt. Once per exploration."""
    if not _swallowed_once:
        _swallowed_once.append(True)
        box = _Box()
        ref = weakref.ref(box, lambda _: signal.raise_signal(signal.SIGINT))
        del box
        assert ref() is None


def swallowed_then_threads() -> None:
    _ctrl_c_python_swallows()
    _run_threads(lambda: None, lambda: None)


async def swallowed_then_tasks() -> None:
    _ctrl_c_python_swallows()
    await asyncio.gather(asyncio.sleep(0), asyncio.sleep(0))


@pytest.mark.skipif(sys.platform == "win32", reason="raises SIGINT")
@pytest.mark.parametrize("target", [swallowed_then_threads, swallowed_then_tasks])
def test_a_ctrl_c_python_swallows_still_ends_the_exploration(
    monkeypatch: pytest.MonkeyPatch, target: Callable[[], object]
) -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    swallowed: list[BaseException | None] = []
    monkeypatch.setattr(
        sys, "unraisablehook", lambda unraisable: swallowed.append(unraisable.exc_value)
    )
    _swallowed_once.clear()
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        interlace.explore(target, seed=SEED, max_schedules=50)
    assert [type(exc) for exc in swallowed] == [KeyboardInterrupt]  # it was swallowed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert threading.active_count() == before


def test_an_exploration_leaves_an_own_sigint_handler_in_place() -> None:
    def handler(signum: int, frame: object) -> None:
        received.append(signum)

    received: list[int] = []
    previous = signal.signal(signal.SIGINT, handler)
    try:
        _swallowed_once.clear()
        exploration = interlace.explore(swallowed_then_threads, seed=SEED, max_schedules=5)
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert received == [signal.SIGINT]
    assert exploration.schedules == 5


# -- executor jobs and event loops in threads ---------------------------------------------------


async def _job_races_task() -> None:
    """A to_thread job and a task on the loop both get-or-create."""
    registry = Registry()
    job = asyncio.create_task(asyncio.to_thread(registry.get, "k"))
    await asyncio.sleep(0)
    registry.get("k")
    await job
    assert registry.created == 1, f"created {registry.created} times"


def job_races_task() -> None:
    """The same, as a plain function that runs the event loop itself."""
    asyncio.run(_job_races_task())


def test_a_plain_target_that_runs_tasks_on_its_own_event_loop_is_refused() -> None:
    # Its tasks would run in stock order only: a race between them could never be found,
    # and a pass would claim what was not explored.
    with pytest.raises(InvalidTargetError) as caught:
        interlace.explore(job_races_task, seed=SEED, max_schedules=300)
    assert str(caught.value).startswith(
        "the plain function job_races_task runs an event loop itself (asyncio.run, "
        "asyncio.Runner or loop.run_until_complete, at tests/harness/test_threads.py:"
    )
    assert "two of its tasks were ready to run at once" in str(caught.value)
    assert "Make job_races_task an async def function that awaits the coroutine" in str(
        caught.value
    )


def test_an_executor_job_racing_a_task_is_found_when_the_target_is_async() -> None:
    failure = interlace.explore(_job_races_task, seed=SEED, max_schedules=300).failure
    assert failure is not None
    assert failure.label == PREEMPTION
    assert failure.deviations == 1
    assert "asyncio_0" in failure.report  # the executor's worker thread is in the schedule


def one_task_on_its_own_loop() -> None:
    """A sync wrapper around one coroutine (a client's blocking API): no task order to explore."""
    registry = Registry()

    async def fetch() -> object:
        await asyncio.sleep(0)
        return registry.get("k")

    _run_threads(lambda: registry.get("k"), lambda: asyncio.run(fetch()))
    assert asyncio.run(fetch()) is registry.get("k")
    assert registry.created == 1, f"created {registry.created} times"


def test_a_plain_target_may_run_one_task_at_a_time_on_its_own_loop() -> None:
    failure = interlace.explore(one_task_on_its_own_loop, seed=SEED, max_schedules=300).failure
    assert failure is not None  # the thread race is still found
    assert failure.label == PREEMPTION


def _loop_in_a_thread_with(*coroutines: Callable[[], Any]) -> Callable[[], None]:
    def scenario() -> None:
        async def main() -> None:
            await asyncio.gather(*(coroutine() for coroutine in coroutines))

        _run_threads(lambda: asyncio.run(main()))

    return scenario


@pytest.mark.parametrize(("tasks", "exhausted"), [(1, True), (2, False)])
def test_tasks_on_a_loop_in_a_started_thread_never_count_as_exhausting_the_space(
    tasks: int, exhausted: bool
) -> None:
    # gather() of one coroutine runs it in a task of its own, while the main task waits.
    coroutines = [lambda: asyncio.sleep(0)] * tasks
    exploration = interlace.explore(
        _loop_in_a_thread_with(*coroutines), strategy="exhaustive", seed=SEED, max_schedules=300
    )
    assert exploration.failure is None
    assert exploration.exhausted is exhausted  # two tasks ready at once: an unexplored order


# -- threads inside an async def exploration ---------------------------------------------------


async def job_waits_for_the_loop() -> None:
    loop = asyncio.get_running_loop()

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    def job() -> int:
        return asyncio.run_coroutine_threadsafe(answer(), loop).result()

    assert await asyncio.to_thread(job) == 42


def test_a_job_that_waits_for_the_loop_runs_under_control_in_every_schedule() -> None:
    exploration = interlace.explore(job_waits_for_the_loop, seed=SEED, max_schedules=200)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
    # Fewer only when the default's exhaustive part ran every schedule there is.
    assert exploration.schedules == 200 or exploration.exhausted, exploration


def _loop_in_a_thread_from_a_task(*, locked: bool) -> Callable[[], object]:
    async def scenario() -> None:
        counter = {"n": 0}
        lock = threading.Lock()

        async def bump() -> None:
            await asyncio.sleep(0)
            if locked:
                with lock:
                    counter["n"] = counter["n"] + 1
            else:
                counter["n"] = counter["n"] + 1

        thread = threading.Thread(target=asyncio.run, args=(bump(),))
        thread.start()
        await bump()
        await asyncio.to_thread(thread.join)
        assert counter["n"] == 2, counter

    return scenario


def test_a_task_may_start_a_thread_that_runs_its_own_event_loop() -> None:
    fixed = _loop_in_a_thread_from_a_task(locked=True)
    exploration = interlace.explore(fixed, seed=SEED, max_schedules=300)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
    failure = interlace.explore(_loop_in_a_thread_from_a_task(locked=False), seed=SEED).failure
    assert failure is not None
    # The update is lost only between the subscript's read and its write, with no call
    # between: a GIL build never switches threads there.
    assert failure.label == "needs a free-threaded build"
    assert failure.deviations == 1


_shared_lock = threading.Lock()


async def lock_held_across_a_job() -> None:
    def job() -> None:
        with _shared_lock:
            pass

    with _shared_lock:
        await asyncio.to_thread(job)


def test_a_deadlock_between_a_task_and_a_job_names_the_loop_and_its_tasks() -> None:
    failure = interlace.explore(lock_held_across_a_job, seed=SEED, max_schedules=10).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert failure.label == "fails under stock order"
    lines = failure.detail.splitlines()
    loop_thread = "  MainThread at its event loop waits for a thread to finish a job or call back"
    assert any(
        line.startswith(loop_thread)
        and line.endswith("; its tasks:")
        and following.startswith("      task 'main' at ")
        for line, following in itertools.pairwise(lines)
    ), failure.detail
    # The lock was taken before the run started a thread, so its holder is not known.
    assert any(
        line.startswith("  asyncio_0 at ") and "waits for Lock test_threads._shared_lock" in line
        for line in lines
    ), failure.detail


async def job_sleeps_under_a_timeout() -> None:
    await asyncio.wait_for(asyncio.to_thread(time.sleep, 0.5), timeout=1.0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.to_thread(time.sleep, 0.5), timeout=0.1)
    assert asyncio.get_running_loop().time() >= 0.6


def test_a_jobs_sleep_and_the_loops_timers_share_one_virtual_clock() -> None:
    exploration = interlace.explore(job_sleeps_under_a_timeout, seed=SEED, max_schedules=50)
    assert exploration.failure is None, exploration.failure and exploration.failure.report


async def thread_raises_from_a_task() -> None:
    def child() -> None:
        raise ValueError("from the child")

    thread = threading.Thread(target=child, name="worker")
    thread.start()
    await asyncio.to_thread(thread.join)


def test_an_exception_in_a_thread_a_task_started_is_a_failure_naming_the_thread() -> None:
    failure = interlace.explore(thread_raises_from_a_task, seed=SEED, max_schedules=5).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert isinstance(failure.exception, ValueError)
    assert "'worker'" in failure.detail


_reused_pool: list[concurrent.futures.ThreadPoolExecutor] = []


async def pool_kept_across_schedules() -> None:
    if not _reused_pool:
        _reused_pool.append(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    await asyncio.get_running_loop().run_in_executor(_reused_pool[0], int)


class _SlowToSayStarted(threading.Event):
    """A thread's ``_started``: the parent's wait is interrupted (Ctrl-C in ``Thread.start``'s
    handshake), and the new thread says it started only a moment later."""

    interrupted = False

    def wait(self, timeout: float | None = None) -> bool:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return super().wait(timeout)

    def set(self) -> None:
        _thread.allocate_lock().acquire(True, 0.2)  # a real wait, outside the scheduler
        super().set()


def interrupted_while_starting() -> None:
    thread = threading.Thread(target=lambda: None)
    thread._started = _SlowToSayStarted()  # type: ignore[attr-defined]
    thread.start()


def test_ctrl_c_inside_thread_start_ends_the_exploration_with_the_interrupt() -> None:
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        interlace.explore(interrupted_while_starting, seed=SEED, max_schedules=10)
    assert threading.active_count() == before


# ``_started``'s condition, where Ctrl-C lands just as the parent has taken the lock (inside
# ``__enter__``, so no ``__exit__`` would ever release it). Compiled from a string, so it runs
# without schedule points, as threading's own code does.
_START_LOCK_HELPERS: dict[str, Any] = {}
exec(
    compile(
        "import signal, threading\n"
        "class CtrlCOnceLocked(threading.Condition):\n"
        "    armed = True\n"
        "    def __enter__(self):\n"
        "        entered = self._lock.__enter__()\n"
        "        if self.armed:\n"
        "            self.armed = False\n"
        "            signal.raise_signal(signal.SIGINT)\n"
        "        return entered\n",
        "<threading-like>",
        "exec",
    ),
    _START_LOCK_HELPERS,
)


def interrupted_holding_the_start_lock() -> None:
    thread = threading.Thread(target=lambda: None)
    condition = _START_LOCK_HELPERS["CtrlCOnceLocked"](threading.Lock())
    thread._started._cond = condition  # type: ignore[attr-defined]
    thread.start()
    thread.join()


@pytest.mark.skipif(sys.platform == "win32", reason="raises SIGINT")
@pytest.mark.timeout(60)
def test_ctrl_c_as_thread_start_takes_its_lock_ends_the_exploration_without_a_deadlock() -> None:
    # Raised inside that __enter__, the interrupt left the lock taken: the child blocked
    # setting _started and the unwinding blocked waiting for it (seen once in 60 Ctrl-Cs).
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        interlace.explore(interrupted_holding_the_start_lock, seed=SEED, max_schedules=10)
    assert threading.active_count() == before


def test_an_executor_kept_from_an_earlier_schedule_is_a_clear_error() -> None:
    _reused_pool.clear()
    with pytest.raises(UnsupportedOperationError, match="used by an earlier schedule"):
        interlace.explore(pool_kept_across_schedules, seed=SEED, max_schedules=5)


async def interrupted_in_a_job() -> None:
    def job() -> None:
        raise KeyboardInterrupt

    await asyncio.to_thread(job)


def test_ctrl_c_in_a_job_ends_the_async_exploration_and_leaks_no_thread() -> None:
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        interlace.explore(interrupted_in_a_job, seed=SEED, max_schedules=10)
    assert threading.active_count() == before


def test_a_thread_the_exploration_does_not_control_leaves_lock_sites_controlled() -> None:
    # With such a thread alive the hooks take their careful path (3.12+), which once read
    # the lock of a `with self._lock:` from its own frame instead of the program's, so the
    # real acquire blocked.
    from thread_bugs import double_checked

    stop = threading.Event()
    outsider = threading.Thread(target=stop.wait, daemon=True)
    outsider.start()
    try:
        failure = interlace.explore(double_checked.buggy, seed=SEED, max_schedules=300).failure
        fixed = interlace.explore(double_checked.fixed, seed=SEED, max_schedules=100)
    finally:
        stop.set()
        outsider.join()
    assert failure is not None
    assert failure.label == PREEMPTION
    assert fixed.failure is None


_tally = {"n": 0}


def _bump_twice() -> None:
    for _ in range(2):
        n = _tally["n"]
        _tally["n"] = n + 1


def _two_bumpers() -> None:
    _tally["n"] = 0
    workers = [threading.Thread(target=_bump_twice) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert _tally["n"] == 4, _tally


def test_a_threads_step_says_where_it_ran_in_the_code_under_test() -> None:
    # A thread's first step showed only where it stopped ("ran -> (finished)"), though it
    # ran the lines that lost the update.
    failure = interlace.explore(_two_bumpers, max_schedules=200, seed=1).failure
    assert failure is not None
    first, last = _bump_twice.__code__.co_firstlineno + 1, _bump_twice.__code__.co_firstlineno + 3
    ran = [record.action for record in failure.schedule if record.actor.endswith("(_bump_twice)")]
    assert f"ran tests/harness/test_threads.py:{first}-{last}" in ran, failure.report


def test_executor_workers_are_named_the_same_in_every_run_and_exploration() -> None:
    # Their names come from a process-wide counter of executors: a report made in a second
    # exploration named them "ThreadPoolExecutor-1215_0".
    seen: list[list[str]] = []

    def target() -> None:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(abs, range(3)))
            seen.append(
                sorted(t.name for t in threading.enumerate() if t.name.startswith("ThreadPool"))
            )

    before = str(ThreadPoolExecutor(1)._thread_name_prefix)
    for _ in range(2):
        exploration = interlace.explore(target, max_schedules=3, seed=SEED)
        assert exploration.failure is None, exploration.failure.report
    assert seen == [["ThreadPoolExecutor-0_0", "ThreadPoolExecutor-0_1"]] * 6
    # The process's own counter goes on where it was.
    after = str(ThreadPoolExecutor(1)._thread_name_prefix)
    assert int(after.rpartition("-")[2]) == int(before.rpartition("-")[2]) + 1
