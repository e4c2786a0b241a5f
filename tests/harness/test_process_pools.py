"""Process pools in an exploration: each job of a ProcessPoolExecutor is one opaque step.

A pool created inside a run (an ``async def`` target's, a plain function's, one of its
threads') or outside it (at module level) runs its jobs to their end inside ``submit``, the
run is marked opaque, and every pool a run created is shut down with the run, its worker
processes joined. Under pytest (in a subprocess, with and without ``-n 2``) that means
pytest exits at once and leaves no process behind.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pytest

import interlace
from interlace.errors import UnsupportedOperationError
from interlace.harness import _loop, _pools, _runtime, _threads
from interlace.harness import pytest_plugin as plugin

# -- jobs (module level, so that a worker process finds them) ---------------------------------


def _square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _raise(x: int) -> None:
    raise ValueError(x)


def _stock_in_the_worker() -> tuple[float, float, int, int]:
    """What a job sees of the primitives interlace patches: a thread, a lock, a condition,
    the clock and a sleep, all of them the stock ones in the worker."""
    done = threading.Condition()
    seen: list[int] = []

    def note() -> None:
        with done:
            seen.append(1)
            done.notify()

    started = time.monotonic()
    thread = threading.Thread(target=note)
    thread.start()
    with done:
        done.wait_for(lambda: seen, timeout=5)
    thread.join()
    time.sleep(0.02)
    return started, time.monotonic() - started, len(seen), os.getpid()


def _sleep(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _write_pid_and_wait(path: str) -> None:
    pathlib.Path(path).write_text(str(os.getpid()))
    time.sleep(600)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie has ended)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone before the open (ENOENT) or between open and read (ESRCH)
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ended(pids: set[int], within: float = 5.0) -> bool:
    """Whether every process of ``pids`` ends within ``within`` seconds."""
    deadline = time.monotonic() + within
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# -- pools created inside a run --------------------------------------------------------------------


def test_a_pool_created_in_an_async_exploration_runs_each_job_as_one_opaque_step() -> None:
    workers: set[int] = set()

    async def target() -> None:
        loop = asyncio.get_running_loop()
        with ProcessPoolExecutor(max_workers=1) as pool:
            (nine, first), (sixteen, second) = await asyncio.gather(
                loop.run_in_executor(pool, _square, 3), loop.run_in_executor(pool, _square, 4)
            )
        assert (nine, sixteen) == (9, 16)
        assert os.getpid() not in (first, second)
        workers.update((first, second))

    exploration = interlace.explore(target, max_schedules=10, seed=1)
    assert exploration.failure is None
    assert (exploration.opaque, exploration.exhausted) == (True, False)
    assert workers
    assert _ended(workers)


def test_a_pool_created_in_a_thread_of_a_threads_exploration_runs_jobs_to_their_end() -> None:
    workers: set[int] = set()

    def target() -> None:
        results: list[int] = []

        def work(x: int) -> None:
            with ProcessPoolExecutor(max_workers=1) as pool:
                value, pid = pool.submit(_square, x).result()
                assert [value for value, _ in pool.map(_square, [x])] == [value]
            results.append(value)
            workers.add(pid)

        threads = [threading.Thread(target=work, args=(x,)) for x in (2, 3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [4, 9]

    exploration = interlace.explore(target, max_schedules=6, seed=1)
    assert exploration.failure is None
    assert (exploration.opaque, exploration.exhausted) == (True, False)
    assert _ended(workers)


@pytest.mark.parametrize("kind", ["async", "threads"])
def test_a_pool_the_program_leaves_running_is_shut_down_with_its_run(kind: str) -> None:
    pools: list[ProcessPoolExecutor] = []
    workers: set[int] = set()

    def use() -> None:
        pool = ProcessPoolExecutor(max_workers=1)
        pools.append(pool)
        workers.add(pool.submit(_square, 2).result()[1])

    async def in_a_task() -> None:
        use()

    target: Callable[[], Any] = in_a_task if kind == "async" else use
    exploration = interlace.explore(target, max_schedules=3, seed=1)
    assert exploration.failure is None
    assert exploration.schedules == len(pools)
    assert all(pool._shutdown_thread for pool in pools)
    assert _ended(workers)


def test_a_pool_kept_from_an_earlier_schedule_is_refused_with_what_to_do() -> None:
    kept: list[ProcessPoolExecutor] = []

    def target() -> None:
        if not kept:
            kept.append(ProcessPoolExecutor(max_workers=1))
        kept[0].submit(_square, 2).result()

    with pytest.raises(UnsupportedOperationError) as raised:
        interlace.explore(target, max_schedules=3, seed=1)
    assert str(raised.value) == _pools.MSG_POOL_ENDED.format(pool=kept[0], job="'_square'")


def test_a_jobs_exception_is_a_failure_that_replays() -> None:
    async def target() -> None:
        with ProcessPoolExecutor(max_workers=1) as pool:
            await asyncio.get_running_loop().run_in_executor(pool, _raise, 7)

    failure = interlace.explore(target, max_schedules=3, seed=1).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert isinstance(failure.exception, ValueError)
    assert failure.exception.args == (7,)
    replayed = interlace.replay(target, failure.token)
    assert replayed is not None
    assert isinstance(replayed.exception, ValueError)


def test_a_job_in_a_worker_runs_on_the_stock_primitives_and_the_real_clock() -> None:
    seen: list[tuple[float, float, int, int]] = []

    def target() -> None:
        with ProcessPoolExecutor(max_workers=1) as pool:
            seen.append(pool.submit(_stock_in_the_worker).result(timeout=10))

    before = time.monotonic()
    exploration = interlace.explore(target, max_schedules=2, seed=1)
    after = time.monotonic()
    assert exploration.failure is None
    started, slept, threads_ran, pid = seen[0]
    assert before <= started <= after  # the real clock (a run's starts at 1,000 s)
    assert slept >= 0.02
    assert threads_ran == 1
    assert _ended({pid})


# -- a pool created outside the exploration ------------------------------------------------------


@pytest.fixture
def module_pool() -> Iterator[ProcessPoolExecutor]:
    pool = ProcessPoolExecutor(max_workers=1)
    yield pool
    # Ended first, so that a job left running (by a failing test) cannot keep the shutdown
    # waiting: the test checks what interlace did, not this.
    for process in list((pool._processes or {}).values()):
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def test_a_pool_created_before_the_exploration_serves_every_run_and_stays_the_programs(
    module_pool: ProcessPoolExecutor,
) -> None:
    async def in_a_task() -> None:
        loop = asyncio.get_running_loop()
        assert (await loop.run_in_executor(module_pool, _square, 5))[0] == 25

    def in_threads() -> None:
        results: list[int] = []

        def work() -> None:
            results.append(module_pool.submit(_square, 6).result()[0])

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        assert results == [36]

    for target in (in_a_task, in_threads):
        exploration = interlace.explore(target, max_schedules=5, seed=1)
        assert exploration.failure is None
        assert exploration.opaque
    # Its manager thread and its worker outlived the runs: the program shuts the pool down.
    assert module_pool.submit(_square, 7).result(timeout=10)[0] == 49


def test_a_pools_idle_threads_outside_the_run_cost_no_wait_when_every_thread_waits(
    module_pool: ProcessPoolExecutor,
) -> None:
    module_pool.submit(_square, 1).result()  # its manager thread now waits, idle

    def target() -> None:
        event = threading.Event()
        waiter = threading.Thread(target=event.wait, args=(0.5,))
        waiter.start()
        module_pool.submit(_square, 2).result()
        waiter.join()

    started = time.monotonic()
    exploration = interlace.explore(target, max_schedules=4, seed=1)
    elapsed = time.monotonic() - started
    assert exploration.failure is None
    # Every schedule has every thread waiting (for the event's virtual timeout) while the
    # pool's threads live: had they counted as threads that might wake one, each schedule
    # would have waited for them for real (``_OUTSIDE_SECONDS``).
    assert elapsed < exploration.schedules * _threads._OUTSIDE_SECONDS


# -- a job that does not end -------------------------------------------------------------------


@pytest.fixture
def short_jobs(monkeypatch: pytest.MonkeyPatch) -> float:
    """Jobs are given the stall timeout (0.5 s), not the 30 s at least of a real run."""
    monkeypatch.setattr(_loop, "JOB_SECONDS", 0.0)
    return 0.5


@pytest.mark.parametrize("kind", ["async", "threads"])
def test_a_job_that_outlasts_its_time_limit_is_refused_and_its_worker_ended(
    kind: str, short_jobs: float, tmp_path: pathlib.Path
) -> None:
    pid_file = tmp_path / "pid"

    def use() -> None:
        with ProcessPoolExecutor(max_workers=1) as pool:
            pool.submit(_write_pid_and_wait, str(pid_file)).result()

    async def in_a_task() -> None:
        use()

    target: Callable[[], Any] = in_a_task if kind == "async" else use
    with pytest.raises(UnsupportedOperationError) as raised:
        interlace.explore(target, max_schedules=3, seed=1, stall_timeout=short_jobs)
    expected = _pools.MSG_JOB_TIMEOUT.format(job="'_write_pid_and_wait'", timeout=short_jobs)
    assert str(raised.value) == expected + _runtime.stall_timeout_advice(
        short_jobs, _loop.MSG_JOB_TIMEOUT
    )
    assert _ended({int(pid_file.read_text())})


def test_a_pool_made_before_the_exploration_is_broken_not_left_waiting_by_a_refused_job(
    module_pool: ProcessPoolExecutor, short_jobs: float, tmp_path: pathlib.Path
) -> None:
    pid_file = tmp_path / "pid"

    def target() -> None:
        module_pool.submit(_write_pid_and_wait, str(pid_file)).result()

    with pytest.raises(UnsupportedOperationError):
        interlace.explore(target, max_schedules=3, seed=1, stall_timeout=short_jobs)
    assert _ended({int(pid_file.read_text())})
    with pytest.raises(BrokenProcessPool):
        module_pool.submit(_square, 1).result(timeout=10)


@pytest.mark.parametrize("kind", ["async", "threads"])
def test_a_job_longer_than_the_stall_timeout_but_within_its_limit_is_no_stall(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_loop, "JOB_SECONDS", 3.0)
    workers: set[int] = set()

    def use() -> None:
        with ProcessPoolExecutor(max_workers=1) as pool:
            workers.add(pool.submit(_sleep, 0.6).result())

    async def in_a_task() -> None:
        use()

    def in_a_thread() -> None:
        # The main thread, waiting, watches the thread that holds the baton for stalls.
        thread = threading.Thread(target=use)
        thread.start()
        thread.join()

    target: Callable[[], Any] = in_a_task if kind == "async" else in_a_thread
    exploration = interlace.explore(target, max_schedules=1, seed=1, stall_timeout=0.2)
    assert exploration.failure is None
    assert _ended(workers)


# -- under pytest, in a subprocess -------------------------------------------------------------

_QUIET: tuple[str, ...] = ("-p", "no:benchmark", "-p", "no:detangle")
_QUIET += ("-p", "no:hypothesispytest")
_QUIET += ("-p", "no:cacheprovider")

INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

POOL_TESTS = """
import asyncio
import os
import threading
from concurrent.futures import ProcessPoolExecutor

import pytest


def square(x):
    with open("pids", "a") as pids:
        pids.write(f"{os.getpid()}\\n")
    return x * x


POOL = ProcessPoolExecutor(max_workers=1)


@pytest.mark.interlace(max_schedules=3)
async def test_a_pool_in_an_async_test():
    pool = ProcessPoolExecutor(max_workers=1)
    assert await asyncio.get_running_loop().run_in_executor(pool, square, 3) == 9


@pytest.mark.interlace(max_schedules=3)
def test_a_pool_in_a_thread():
    results = []

    def work():
        with ProcessPoolExecutor(max_workers=1) as pool:
            results.append(pool.submit(square, 4).result())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert results == [16]


@pytest.mark.interlace(max_schedules=3)
async def test_the_module_pool_in_an_async_test():
    assert await asyncio.get_running_loop().run_in_executor(POOL, square, 5) == 25


@pytest.mark.interlace(max_schedules=3)
def test_the_module_pool_in_a_thread():
    results = []
    thread = threading.Thread(target=lambda: results.append(POOL.submit(square, 6).result()))
    thread.start()
    thread.join()
    assert results == [36]
"""


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "-n 2"])
def test_pytest_exits_at_once_and_leaves_no_worker_process(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_pools=POOL_TESTS)
    result = pytester.runpytest_subprocess(*_QUIET, *workers, "-rA", timeout=60)
    result.assert_outcomes(passed=4)
    opaque = plugin.MSG_EXPLORED_OPAQUE.format(line="*", opaque="*")
    result.stdout.fnmatch_lines([f"*test_a_pool_in_an_async_test: {opaque}"])
    pids = {int(line) for line in (pytester.path / "pids").read_text().split()}
    assert pids
    assert _ended(pids)
