"""Controlled threads: correct programs that stock CPython runs fine pass, and unwinding ends.

Each program here did something a stock interpreter allows (a lock timeout, a daemon thread
with a periodic wait, ``sys.exit`` in a worker, an own ``threading.excepthook``) that the
harness once reported as a failure, or made it hang.
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import concurrent.futures.thread
import contextlib
import importlib
import inspect
import logging
import os
import queue
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import interlace
from interlace._core.schedule import Settings, encode_token
from interlace.harness import _kernel, _runtime, _threads

SEED = 7


def _start_and_join(target: object) -> None:
    thread = threading.Thread(target=target)  # type: ignore[arg-type]
    thread.start()
    thread.join()


# -- a lock a thread holds when the harness unwinds it -------------------------------------------

_HALVES: dict[str, Any] = {"lock": threading.Lock(), "rlock": threading.RLock()}
_half = {"n": 0}


def _update_in_two_halves(lock: Any) -> None:
    lock.acquire()  # no try/finally: a thread unwound in between leaves the lock taken
    _half["n"] += 1
    _half["n"] += 1
    lock.release()


def _see_a_half_update() -> None:
    if _half["n"] % 2:
        raise RuntimeError("saw a half update")


@pytest.mark.parametrize("kind", sorted(_HALVES))
def test_a_lock_a_thread_held_when_it_was_unwound_is_released(kind: str) -> None:
    lock = _HALVES[kind]

    def scenario() -> None:
        _half["n"] = 0
        threads = [
            threading.Thread(target=_update_in_two_halves, args=(lock,)),
            threading.Thread(target=_see_a_half_update),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    for _ in range(2):  # the next exploration finds the lock as free as the first did
        failure = interlace.explore(scenario, seed=SEED, max_schedules=200).failure
        assert failure is not None
        assert str(failure.exception) == "saw a half update"
        assert failure.deviations == 1  # shrinking ran on free locks too
        assert lock.acquire(blocking=False)  # free (an RLock has no locked() before 3.14)
        lock.release()
    # The step that raised is the raising thread's, not the one unwound last.
    assert failure is not None
    raised = [line for line in failure.report.splitlines() if " raised RuntimeError" in line]
    assert len(raised) == 1
    assert "Thread-2 (_see_a_half_update): ran tests/harness/test_threads_audit.py:" in raised[0]


# -- the permits of a semaphore a thread holds when the harness unwinds it ----------------------

_SEMAPHORES: dict[str, Callable[[], threading.Semaphore]] = {
    "Semaphore": lambda: threading.Semaphore(2),
    "BoundedSemaphore": lambda: threading.BoundedSemaphore(2),
}


def _value(sem: threading.Semaphore) -> int:
    return sem._value


@pytest.mark.parametrize("kind", sorted(_SEMAPHORES))
def test_permits_a_thread_held_when_it_was_unwound_are_given_back(kind: str) -> None:
    sem = _SEMAPHORES[kind]()  # one that outlives the runs, as a module-level one does

    def holder() -> None:
        sem.acquire()  # no try/finally, and it never gets to release
        with sem:  # balanced: given back by the with statement itself
            threading.Event().wait()

    def scenario() -> None:
        # On a stock interpreter the program starts with both permits free.
        assert sem.acquire(timeout=5), "a permit is missing at the start"
        sem.release()
        threading.Thread(target=holder, daemon=True).start()
        time.sleep(1)

    exploration = interlace.explore(scenario, seed=SEED, max_schedules=20)
    assert exploration.failure is None
    assert _value(sem) == 2


def test_a_permit_released_by_another_thread_is_not_given_back_again() -> None:
    sem = threading.Semaphore(2)

    def scenario() -> None:
        taken = threading.Event()

        def taker() -> None:
            sem.acquire()
            taken.set()
            threading.Event().wait()  # unwound at the end of the run

        threading.Thread(target=taker, daemon=True).start()
        taken.wait()
        sem.release()  # gives back the taker's permit for it
        sem.acquire()  # and takes one the program keeps

    assert interlace.explore(scenario, seed=SEED, max_schedules=1).failure is None
    assert _value(sem) == 1  # as the program leaves it: only the kept permit is gone


def test_a_semaphore_used_as_a_signal_keeps_its_count() -> None:
    # A consumer takes the producer's releases as signals and keeps them: unwinding it
    # gives nothing back, or the next run would start with signals no producer sent.
    signal = threading.Semaphore(0)
    done = {"n": 0}

    def consumer() -> None:
        while True:
            signal.acquire()
            done["n"] += 1

    def scenario() -> None:
        done["n"] = 0
        threading.Thread(target=consumer, daemon=True).start()
        for _ in range(3):
            signal.release()
        time.sleep(1)
        assert done["n"] == 3

    assert interlace.explore(scenario, seed=SEED, max_schedules=20).failure is None
    assert _value(signal) == 0


# -- a lock acquire whose timeout passes --------------------------------------------------------


@pytest.mark.parametrize("make_lock", [threading.Lock, threading.RLock])
def test_an_acquire_timeout_on_a_held_lock_returns_false(make_lock: object) -> None:
    results: list[bool] = []

    def scenario() -> None:
        lock = make_lock()  # type: ignore[operator]
        with lock:
            _start_and_join(lambda: results.append(lock.acquire(timeout=0.01)))
        assert results[-1] is False

    assert interlace.explore(scenario, seed=SEED, max_schedules=5).failure is None
    assert results
    assert not any(results)


def _acquire_through_a_bound_method(lock: Any) -> bool:
    acquire = lock.acquire  # what pytest's rewriting makes of `assert lock.acquire(timeout=1)`
    return bool(acquire(timeout=1))


def _acquire_through_pytests_assert(lock: Any) -> bool:
    assert lock.acquire(timeout=1)  # this file is rewritten by pytest: the same, for real
    return True


@pytest.mark.parametrize("make_lock", [threading.Lock, threading.RLock])
@pytest.mark.parametrize(
    "acquire", [_acquire_through_a_bound_method, _acquire_through_pytests_assert]
)
def test_an_acquire_through_a_bound_method_waits_for_the_holder(
    make_lock: Callable[[], Any], acquire: Callable[[Any], bool]
) -> None:
    # The holder releases after 0.1 s: a stock acquire(timeout=1) always gets the lock.
    # Read as a call of a local, it blocked for real while the holder could not run.
    def scenario() -> None:
        lock = make_lock()
        held = threading.Event()

        def holder() -> None:
            with lock:
                held.set()
                time.sleep(0.1)

        thread = threading.Thread(target=holder)
        thread.start()
        held.wait()
        assert acquire(lock)
        lock.release()
        thread.join()

    exploration = interlace.explore(scenario, seed=SEED, max_schedules=10)
    assert exploration.failure is None, exploration.failure and exploration.failure.report


def test_a_local_that_holds_no_lock_method_is_called_as_it_is() -> None:
    def scenario() -> None:
        lock = threading.Lock()
        acquire: Callable[..., Any] = lock.acquire
        assert acquire(timeout=1)
        acquire = len  # the same local, now no lock method: called, not taken for one
        assert acquire([1]) == 1
        lock.release()

    exploration = interlace.explore(scenario, seed=SEED, max_schedules=3)
    assert exploration.failure is None, exploration.failure and exploration.failure.report


def test_a_long_acquire_timeout_that_passes_is_refused_with_what_to_do() -> None:
    def scenario() -> None:
        lock = threading.Lock()
        with lock:
            _start_and_join(lambda: lock.acquire(timeout=30))

    with pytest.raises(interlace.errors.UnsupportedOperationError, match="cut short"):
        interlace.explore(scenario, seed=SEED, max_schedules=5)


# -- the C SimpleQueue, bound before the exploration -------------------------------------------

CSimpleQueue = queue.SimpleQueue  # as aiosqlite's `from queue import SimpleQueue`, at import


def _c_simple_queue_worker() -> None:
    jobs: queue.SimpleQueue[int | None] = CSimpleQueue()
    results: queue.SimpleQueue[int] = CSimpleQueue()

    def worker() -> None:
        while (item := jobs.get()) is not None:
            results.put(item * 2)

    thread = threading.Thread(target=worker)
    thread.start()
    for item in (1, 2, 3):
        jobs.put(item)
    assert [results.get(timeout=1) for _ in range(3)] == [2, 4, 6]
    with pytest.raises(queue.Empty):
        results.get(timeout=0.5)
    jobs.put(None)
    thread.join()


def test_a_c_simple_queue_made_from_a_name_bound_at_import_is_waited_on_under_control() -> None:
    assert CSimpleQueue is not queue._PySimpleQueue  # type: ignore[attr-defined]
    _c_simple_queue_worker()  # and on a stock interpreter
    exploration = interlace.explore(_c_simple_queue_worker, seed=SEED, max_schedules=30)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
    assert exploration.schedules == 30


def test_a_wait_on_an_empty_c_simple_queue_nobody_fills_is_a_deadlock() -> None:
    def scenario() -> None:
        items: queue.SimpleQueue[int] = CSimpleQueue()

        def consume() -> None:
            items.get()

        thread = threading.Thread(target=consume)
        thread.start()
        thread.join()

    failure = interlace.explore(scenario, seed=SEED, max_schedules=5).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert "an item in SimpleQueue items" in failure.report


# -- daemon threads once the target returned ----------------------------------------------------


def daemon_heartbeat() -> None:
    stop = threading.Event()
    beats: list[int] = []

    def heartbeat() -> None:
        while not stop.wait(5.0):
            beats.append(1)

    threading.Thread(target=heartbeat, daemon=True).start()


def daemon_sleeps_forever() -> None:
    def spin() -> None:
        while True:
            time.sleep(0.1)

    threading.Thread(target=spin, daemon=True).start()


@pytest.mark.parametrize("target", [daemon_heartbeat, daemon_sleeps_forever])
def test_a_daemon_with_a_periodic_timed_wait_is_dropped_when_the_target_returns(
    target: object,
) -> None:
    exploration = interlace.explore(target, seed=SEED, max_schedules=5)  # type: ignore[arg-type]
    assert exploration.failure is None


def non_daemon_sleeps_forever() -> None:
    def spin() -> None:
        while True:
            time.sleep(100.0)

    threading.Thread(target=spin).start()


def test_a_non_daemon_with_a_periodic_timed_wait_still_hangs() -> None:
    failure = interlace.explore(non_daemon_sleeps_forever, seed=SEED, max_schedules=2).failure
    assert failure is not None
    assert failure.kind == "hang"


# -- sys.exit and threading.excepthook in a thread ----------------------------------------------


def worker_exits() -> None:
    done: list[str] = []

    def worker() -> None:
        done.append("working")
        sys.exit(3)

    _start_and_join(worker)
    done.append("main continues")
    assert done == ["working", "main continues"]


def test_sys_exit_in_a_thread_ends_only_that_thread() -> None:
    assert interlace.explore(worker_exits, seed=SEED, max_schedules=5).failure is None


def handled_by_excepthook() -> None:
    seen: list[type[BaseException] | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.exc_type)
    try:
        _start_and_join(lambda: 1 / 0)
        _start_and_join(lambda: sys.exit(1))
    finally:
        threading.excepthook = previous
    assert seen == [ZeroDivisionError, SystemExit]


def test_an_excepthook_the_target_installs_handles_a_threads_exception() -> None:
    assert interlace.explore(handled_by_excepthook, seed=SEED, max_schedules=5).failure is None


def failing_excepthook(args: threading.ExceptHookArgs) -> None:
    raise RuntimeError("the hook broke")


def excepthook_raises() -> None:
    previous = threading.excepthook
    threading.excepthook = failing_excepthook
    try:
        _start_and_join(lambda: 1 / 0)
    finally:
        threading.excepthook = previous


def test_an_exception_the_excepthook_raises_is_a_failure() -> None:
    failure = interlace.explore(excepthook_raises, seed=SEED, max_schedules=5).failure
    assert failure is not None
    assert failure.kind == "exception"
    assert isinstance(failure.exception, RuntimeError)
    assert str(failure.exception) == "the hook broke"


def test_without_an_own_excepthook_a_threads_exception_is_a_failure() -> None:
    def scenario() -> None:
        _start_and_join(lambda: 1 / 0)

    failure = interlace.explore(scenario, seed=SEED, max_schedules=5).failure
    assert failure is not None
    assert isinstance(failure.exception, ZeroDivisionError)


# -- real I/O: a child process's pipes -------------------------------------------------------------


def two_threads_run_children() -> None:
    out: list[str] = []

    def work(text: str) -> None:
        child = [sys.executable, "-c", "import sys; print(sys.stdin.read())"]
        out.append(subprocess.run(child, input=text, capture_output=True, text=True).stdout)

    threads = [threading.Thread(target=work, args=(text,)) for text in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(out) == ["a\n", "b\n"]


def test_a_child_process_whose_pipes_a_thread_reads_is_waited_for_not_a_deadlock() -> None:
    # ``communicate`` waits on its pipes in a selector with no data on the keys: real I/O
    # that arrives with no thread running, not an event loop's wake-up pipe.
    exploration = interlace.explore(two_threads_run_children, seed=SEED, max_schedules=3)
    assert exploration.failure is None
    assert exploration.schedules == 3


# -- library waits whose timeout passes ----------------------------------------------------------


def _job(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def as_completed_times_out() -> None:
    # ``as_completed`` waits again for what is left of its timeout until that is below 0: at
    # the instant its wait timed out, a clock that had not moved left exactly 0 (and
    # ``wait(0)`` again, and again).
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        futures = [executor.submit(_job, seconds) for seconds in (0.1, 5.0)]
        got: list[float] = []
        try:
            for future in concurrent.futures.as_completed(futures, timeout=1.0):
                got.append(future.result())
        except concurrent.futures.TimeoutError:
            got.append(-1.0)
        assert got == [0.1, -1.0]


def as_completed_times_out_with_a_remainder_below_a_microsecond() -> None:
    # Started off the clock's round numbers, what is left of the timeout comes out as
    # 1e-13 s where the wait timed out: a wait too short for the clock to move.
    time.sleep(0.000123)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        futures = [executor.submit(_job, seconds) for seconds in (0.1, 5.0)]
        try:
            for future in concurrent.futures.as_completed(futures, timeout=1.7):
                future.result()
        except concurrent.futures.TimeoutError:
            return
        raise AssertionError("as_completed did not time out")


def wait_first_completed_times_out() -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        futures = [executor.submit(_job, seconds) for seconds in (3.0, 5.0)]
        start = time.monotonic()
        done, not_done = concurrent.futures.wait(
            futures, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED
        )
        assert (len(done), len(not_done)) == (0, 2)
        assert time.monotonic() - start >= 1.0


def result_times_out() -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        future = executor.submit(_job, 5.0)
        start = time.monotonic()
        try:
            future.result(timeout=1.0)
        except concurrent.futures.TimeoutError:
            assert time.monotonic() - start >= 1.0
            return
        raise AssertionError("result() did not time out")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "scenario",
    [
        as_completed_times_out,
        as_completed_times_out_with_a_remainder_below_a_microsecond,
        wait_first_completed_times_out,
        result_times_out,
    ],
)
def test_an_executor_wait_whose_timeout_passes_raises_timeout_error(
    scenario: Callable[[], None],
) -> None:
    exploration = interlace.explore(scenario, seed=SEED, max_schedules=20)
    assert exploration.failure is None
    assert exploration.schedules == 20


def test_a_wait_that_times_out_takes_a_microsecond_past_its_deadline() -> None:
    # As a real wait does some time: a loop that polls until a deadline ends. A timeout of 0
    # takes a microsecond; 1e-9 s is rounded up to one, and the wait ends a microsecond later.
    seen: list[float] = []

    def scenario() -> None:
        event = threading.Event()
        start = time.monotonic()
        assert not event.wait(0)
        assert not event.wait(1e-9)
        seen.append(time.monotonic() - start)

    assert interlace.explore(scenario, seed=SEED, max_schedules=1).failure is None
    assert seen == [pytest.approx(3e-6)]


def _measured(wait: Callable[[], object], timeout: float) -> None:
    start = time.monotonic()
    wait()
    elapsed = time.monotonic() - start
    assert elapsed >= timeout, f"{elapsed!r} < {timeout!r}"


def _queue_get_times_out() -> None:
    with contextlib.suppress(queue.Empty):
        queue.Queue().get(timeout=0.3)


def _joins_a_waiting_thread() -> None:
    event = threading.Event()
    waiter = threading.Thread(target=event.wait)
    waiter.start()
    _measured(lambda: waiter.join(0.3), 0.3)
    event.set()
    waiter.join()


@pytest.mark.parametrize(
    "scenario",
    [
        lambda: _measured(lambda: time.sleep(0.3), 0.3),
        lambda: _measured(lambda: threading.Event().wait(0.3), 0.3),
        lambda: _measured(lambda: threading.Semaphore(0).acquire(timeout=0.3), 0.3),
        lambda: _measured(_queue_get_times_out, 0.3),  # waits for what is left: 0.2999...
        _joins_a_waiting_thread,
        lambda: _measured(lambda: time.sleep(1.1), 1.1),
    ],
    ids=["sleep", "event", "semaphore", "queue", "join", "sleep-1.1"],
)
def test_a_timed_wait_lasts_at_least_its_timeout_as_the_thread_measures_it(
    scenario: Callable[[], None],
) -> None:
    # 1000.3 - 1000.0 == 0.29999999999995453: a wait that ended exactly at its deadline on
    # the virtual clock measured less than its timeout, which no stock wait does.
    def in_a_thread() -> None:
        worker = threading.Thread(target=scenario)
        worker.start()
        worker.join()
        scenario()

    exploration = interlace.explore(in_a_thread, seed=SEED, max_schedules=5)
    assert exploration.failure is None, exploration.failure and exploration.failure.report


# -- the same seed, the same schedule, in every process -----------------------------------------


def test_threads_and_executor_futures_hash_in_the_runs_creation_order() -> None:
    # A set of threads or futures iterates in hash order (``ThreadPoolExecutor.shutdown``
    # joins its workers out of one): a hash from the object's address would change with the
    # process's allocations, and so would the schedule a seed gives. The objects of earlier
    # runs are kept alive, so the second exploration's objects have new addresses.
    kept: list[object] = []
    hashes: list[list[int]] = []

    def scenario() -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
            futures = [executor.submit(time.sleep, 0) for _ in range(3)]
        threads = [threading.Thread(target=time.sleep, args=(0,)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        hashes.append([hash(item) for item in [*futures, *threads]])
        kept.extend([*futures, *threads, executor])

    for _ in range(2):
        assert interlace.explore(scenario, seed=SEED, max_schedules=4).failure is None
    assert len(hashes) == 8
    assert hashes[:4] == hashes[4:]
    assert all(len(set(run)) == 5 for run in hashes)


# -- locks taken outside the code under test ---------------------------------------------------


class Counter:
    lock = threading.Lock()
    count = 0

    def by_class(self) -> None:
        with self.__class__.lock:
            value = Counter.count
            Counter.count = value + 1

    def by_type(self) -> None:
        with type(self).lock:
            value = Counter.count
            Counter.count = value + 1

    def by_acquire(self) -> None:
        type(self).lock.acquire()
        try:
            value = Counter.count
            Counter.count = value + 1
        finally:
            type(self).lock.release()


@pytest.mark.parametrize("method", ["by_class", "by_type", "by_acquire"])
def test_a_class_lock_reached_through_the_instances_type_is_controlled(method: str) -> None:
    # Unseen, a thread switched inside the ``with`` would leave the other blocked in C.
    def scenario() -> None:
        Counter.count = 0
        counter = Counter()
        threads = [threading.Thread(target=getattr(counter, method)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert Counter.count == 2

    exploration = interlace.explore(scenario, seed=SEED, max_schedules=100)
    assert exploration.failure is None
    assert exploration.schedules == 100


class RecordsHandler(logging.Handler):
    """A handler of the program's own: ``emit`` runs under ``logging``'s handler lock."""

    def __init__(self, before_emit: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.before_emit = before_emit
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.before_emit()
        message = self.format(record)
        self.records.append(message)


def _logger(handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"interlace-test-{id(handler)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.handlers[:] = [handler]
    return logger


def two_threads_log() -> None:
    handler = RecordsHandler()
    logger = _logger(handler)
    threads = [threading.Thread(target=logger.info, args=(f"w{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(handler.records) == ["w0", "w1"]


def main_thread_logs_while_a_thread_emits() -> None:
    # The thread waits inside ``emit`` (holding the handler's lock) until the main thread
    # lets it go, then the main thread logs: it is the one left waiting for the lock.
    emitting, go = threading.Event(), threading.Event()

    def wait_in_emit() -> None:
        if threading.current_thread() is not threading.main_thread():
            emitting.set()
            go.wait()

    handler = RecordsHandler(wait_in_emit)
    logger = _logger(handler)
    thread = threading.Thread(target=logger.info, args=("thread",))
    thread.start()
    emitting.wait()
    go.set()
    logger.info("main")
    thread.join()


@pytest.mark.parametrize("scenario", [two_threads_log, main_thread_logs_while_a_thread_emits])
def test_a_lock_library_code_holds_across_a_switch_is_named_with_the_module_to_instrument(
    scenario: Callable[[], None],
) -> None:
    before = threading.active_count()
    with pytest.raises(interlace.errors.UnsupportedOperationError) as raised:
        interlace.explore(scenario, seed=SEED, max_schedules=50)
    message = str(raised.value)
    assert "(in logging, outside the code under test) for a threading.RLock" in message
    assert "instrument=['logging']" in message
    assert threading.active_count() == before  # every thread of the run was unwound


@pytest.mark.parametrize("scenario", [two_threads_log, main_thread_logs_while_a_thread_emits])
def test_instrumenting_the_library_that_holds_the_lock_controls_it(
    scenario: Callable[[], None],
) -> None:
    exploration = interlace.explore(scenario, seed=SEED, max_schedules=50, instrument=["logging"])
    assert exploration.failure is None


LOCKING_LIBRARY = """
import threading


class Cache:
    \"\"\"Calls the loader it was given while it holds a plain Lock.\"\"\"

    def __init__(self, load):
        self._lock = threading.Lock()
        self._load = load
        self.items = {}

    def get(self, key):
        with self._lock:
            if key not in self.items:
                self.items[key] = self._load(key)
            return self.items[key]


class Flag:
    \"\"\"Waits for its flag by spinning: a Condition's lock is held for an instant each time.\"\"\"

    def __init__(self):
        self._cond = threading.Condition()
        self.up = False

    def wait(self):
        while not self.up:
            with self._cond:
                pass
"""


@pytest.fixture
def locking_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    library = tmp_path / "site-packages"  # not code under test unless instrumented
    library.mkdir()
    (library / "locking_library.py").write_text(LOCKING_LIBRARY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(library))
    monkeypatch.delitem(sys.modules, "locking_library", raising=False)
    return importlib.import_module("locking_library")


def _double(key: str) -> str:
    doubled = key * 2
    return doubled


def _two_threads_get(cache: Any) -> None:
    threads = [threading.Thread(target=cache.get, args=("k",)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.items == {"k": "kk"}


# A wait for a lock is checked after about 2 s whatever the stall timeout (it never ends by
# itself); a shorter timeout comes first, and the wait is still named as such.
@pytest.mark.parametrize("stall_timeout", [_runtime.STALL_SECONDS, 0.5])
def test_a_stall_names_the_thread_and_the_module_that_took_the_lock(
    locking_library: types.ModuleType, stall_timeout: float
) -> None:
    def scenario() -> None:
        _two_threads_get(locking_library.Cache(_double))

    with pytest.raises(interlace.errors.UnsupportedOperationError) as raised:
        interlace.explore(scenario, seed=SEED, max_schedules=50, stall_timeout=stall_timeout)
    message = str(raised.value)
    assert re.search(
        r"\(in locking_library, outside the code under test\) for a threading\.Lock that "
        r"thread 'Thread-\d+ \(get\)' holds \(taken in locking_library, at "
        r"\S*locking_library\.py:\d+\): ",
        message,
    )
    assert "instrument=['locking_library']" in message
    exploration = interlace.explore(
        scenario, seed=SEED, max_schedules=50, instrument=["locking_library"]
    )
    assert exploration.failure is None


def test_a_thread_that_loops_in_library_code_is_not_reported_waiting_for_a_lock(
    locking_library: types.ModuleType,
) -> None:
    # It passes through acquires of a lock that is held, by itself, a moment before: it waits
    # for no other thread, and instrumenting threading (named before) cannot be the answer.
    def scenario() -> None:
        flag = locking_library.Flag()
        thread = threading.Thread(target=setattr, args=(flag, "up", True))
        thread.start()
        flag.wait()  # the thread that raises the flag never runs: there is no schedule point
        thread.join()

    with pytest.raises(interlace.errors.UnsupportedOperationError) as raised:
        interlace.explore(scenario, seed=SEED, max_schedules=5, stall_timeout=4.0)
    message = str(raised.value)
    assert message.startswith("thread 'MainThread' ran for 4 s at ")
    assert "instrument" not in message.split(". Where it is:")[0]


def _frame_that_calls(call: Callable[[Callable[[], None]], None]) -> types.FrameType:
    """The frame of library code that calls back into this file (through ``call``)."""
    frames: list[types.FrameType] = []
    call(lambda: frames.append(sys._getframe(1)))
    return frames[0]


def _through_a_thread_run(callback: Callable[[], None]) -> None:
    threading.Thread(target=callback).run()


def _through_an_executor_item(callback: Callable[[], None]) -> None:
    run = threading.Thread(target=callback).run
    work = concurrent.futures.thread._WorkItem(concurrent.futures.Future(), run, (), {})
    work.run()


@pytest.mark.parametrize(
    ("call", "module"),
    [(_through_a_thread_run, None), (_through_an_executor_item, "concurrent.futures.thread")],
)
def test_a_stall_never_recommends_a_module_that_cannot_be_instrumented(
    call: Callable[[Callable[[], None]], None], module: str | None
) -> None:
    # A wait inside threading names the nearest library that called it, or none at all.
    frame = _frame_that_calls(call)
    assert frame.f_globals["__name__"] == "threading"
    assert _threads._module_to_instrument(frame) == module


# -- the main thread blocked for real on another thread of the target ---------------------------


def server_in_the_main_thread() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def client() -> None:
        socket.create_connection(("127.0.0.1", port)).close()

    thread = threading.Thread(target=client)
    thread.start()
    try:
        server.accept()[0].close()  # the client cannot run while the main thread waits here
    finally:
        server.close()
    thread.join()


def test_a_main_thread_stuck_in_real_io_is_interrupted_and_reported() -> None:
    before = threading.active_count()
    with pytest.raises(interlace.errors.UnsupportedOperationError) as raised:
        interlace.explore(server_in_the_main_thread, seed=SEED, max_schedules=5, stall_timeout=1)
    message = str(raised.value)
    assert re.search(r"thread 'MainThread' ran for 1 s at \S*test_threads_audit\.py:\d+ ", message)
    assert "a server's accept for a client thread" in message
    assert threading.active_count() == before


# -- a thread busy in library code for longer than the stall timeout ---------------------------

SPINNING_LIBRARY = """
import time

_clock = time.perf_counter  # taken at import: during an exploration it reads virtual time


def spin(seconds):
    end = _clock() + seconds
    while _clock() < end:
        pass
"""


@pytest.fixture
def spinning_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    library = tmp_path / "site-packages"  # no schedule points: one step of real work
    library.mkdir()
    (library / "spinning_library.py").write_text(SPINNING_LIBRARY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(library))
    monkeypatch.delitem(sys.modules, "spinning_library", raising=False)
    return importlib.import_module("spinning_library")


def _in_a_thread(library: types.ModuleType) -> Callable[[], Any]:
    def scenario() -> None:
        _start_and_join(lambda: library.spin(1.5))

    return scenario


def _in_an_executor_job(library: types.ModuleType) -> Callable[[], Any]:
    async def scenario() -> None:
        await asyncio.to_thread(library.spin, 1.5)

    return scenario


_SCENARIOS = [_in_a_thread, _in_an_executor_job]


def _explore(target: Callable[[], Any], stall_timeout: float) -> object:
    exploration = interlace.explore(target, seed=SEED, max_schedules=1, stall_timeout=stall_timeout)
    return exploration.failure


def _replay(target: Callable[[], Any], stall_timeout: float) -> object:
    backend = "asyncio" if inspect.iscoroutinefunction(target) else "threads"
    token = encode_token(Settings(backend=backend), ())  # stock order
    return interlace.replay(target, token, stall_timeout=stall_timeout)


@pytest.mark.parametrize("scenario", _SCENARIOS)
@pytest.mark.parametrize("run", [_explore, _replay])
def test_a_thread_busy_longer_than_the_stall_timeout_ends_the_run_naming_the_timeout(
    spinning_library: types.ModuleType,
    scenario: Callable[[types.ModuleType], Callable[[], Any]],
    run: Callable[[Callable[[], Any], float], object],
) -> None:
    target = scenario(spinning_library)
    started = time.monotonic()
    with pytest.raises(interlace.errors.UnsupportedOperationError) as raised:
        run(target, 0.5)
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert re.match(r"thread '[^']+' ran for 0\.5 s at ", message), message
    advice = _runtime.MSG_STALL_TIMEOUT.format(timeout=0.5, more=2)
    assert f". {advice}. Where it is:\n" in message


@pytest.mark.parametrize("scenario", _SCENARIOS)
def test_a_thread_busy_within_the_stall_timeout_runs_to_its_end(
    spinning_library: types.ModuleType,
    scenario: Callable[[types.ModuleType], Callable[[], Any]],
) -> None:
    assert _explore(scenario(spinning_library), 5) is None


# -- executors and pools made outside the exploration -------------------------------------------


def _slow_square(value: int) -> int:
    time.sleep(0.01)  # outside the run, a real sleep
    return value * value


@pytest.fixture
def warm_executor() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    executor.submit(int).result()  # its one worker starts now, outside any exploration
    yield executor
    executor.shutdown()


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_a_wait_that_a_thread_outside_the_run_ends_is_no_deadlock(
    warm_executor: concurrent.futures.ThreadPoolExecutor, timeout: float | None
) -> None:
    # The future is set by the executor's worker, which runs freely: its result comes in
    # real time, not when the virtual clock would pass the timeout.
    def scenario() -> None:
        assert warm_executor.submit(_slow_square, 3).result(timeout=timeout) == 9

    exploration = interlace.explore(scenario, seed=SEED, max_schedules=5)
    assert exploration.failure is None


def test_a_deadlock_report_names_the_threads_outside_the_run(
    warm_executor: concurrent.futures.ThreadPoolExecutor,
) -> None:
    def scenario() -> None:
        first, second = threading.Lock(), threading.Lock()

        def take(one: threading.Lock, two: threading.Lock) -> None:
            with one, two:
                pass

        threads = [
            threading.Thread(target=take, args=(first, second)),
            threading.Thread(target=take, args=(second, first)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    failure = interlace.explore(scenario, seed=SEED, max_schedules=50).failure
    assert failure is not None
    assert failure.kind == "deadlock"
    assert "Threads outside the exploration were alive (ThreadPoolExecutor-" in failure.report


_NOT_SETTLED = (
    "a thread of the test process never settled into a wait with no timeout within 10 s: "
    "something left a thread that keeps waking (a poller, a timer) alive"
)


def _every_other_thread_proved_idle(
    but: threading.Thread | None = None, *, quiet_for: float = 0.0
) -> bool:
    """Wait (up to 10 s) until the kernel shows every thread but this one (and ``but``)
    asleep in an untimed wait (an executor's worker back from its first job), or one whose
    deadline is more than ``quiet_for`` off, as a run's start would see them."""
    ours = {threading.get_native_id()}
    if but is not None and but.native_id is not None:
        ours.add(but.native_id)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _kernel.refresh()
        if _kernel.idle_since(ours, quiet_for=quiet_for):
            return True
        time.sleep(0.01)
    return False


def _count_polls(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The scheduler's polls for threads outside the run, as they happen."""
    polls: list[float] = []
    real_sleep = _threads._real_sleep

    def sleep(seconds: float) -> None:
        if seconds == _threads._OUTSIDE_POLL:
            polls.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(_threads, "_real_sleep", sleep)
    return polls


def _barrier_after_a_sleep() -> None:
    """Every thread of the run waits (a barrier, a sleep) until the clock moves."""
    barrier = threading.Barrier(2)

    def slow() -> None:
        time.sleep(2.0)
        barrier.wait()

    worker = threading.Thread(target=slow)
    worker.start()
    barrier.wait(timeout=10.0)
    worker.join()


@pytest.mark.skipif(not _kernel.works(), reason="the kernel does not show thread states here")
def test_an_idle_thread_outside_the_run_is_proved_idle_without_waiting_for_it(
    warm_executor: concurrent.futures.ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The executor's one worker sleeps in the kernel through every run: when every thread of
    # a run waits (the barrier, until the clock ends the sleep), no time is spent waiting to
    # see whether that worker ends the wait.
    # The suite leaves no thread that wakes by itself (a test must not leave one behind).
    assert _every_other_thread_proved_idle(), _NOT_SETTLED
    polls = _count_polls(monkeypatch)
    exploration = interlace.explore(_barrier_after_a_sleep, seed=SEED, max_schedules=20)
    assert exploration.failure is None
    assert exploration.schedules == 20
    assert polls == []

    # Handed a job, the worker is no longer proved idle: its result is waited for.
    def hands_a_job() -> None:
        assert warm_executor.submit(_slow_square, 3).result(timeout=5.0) == 9

    assert interlace.explore(hands_a_job, seed=SEED, max_schedules=2).failure is None
    assert polls != []


@pytest.mark.skipif(not _kernel.works(), reason="the kernel does not show thread states here")
def test_pytest_timeouts_timer_thread_is_never_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # --timeout-method thread: a timer that, when it fires, ends the process. It waits with
    # a timeout, so the kernel cannot prove it idle, but it never ends a wait of a run.
    import pytest_timeout  # type: ignore[import-untyped]

    timer = threading.Timer(600, pytest_timeout.timeout_timer, (None, None))
    timer.start()
    try:
        assert _every_other_thread_proved_idle(but=timer), _NOT_SETTLED
        polls = _count_polls(monkeypatch)
        exploration = interlace.explore(_barrier_after_a_sleep, seed=SEED, max_schedules=10)
        assert exploration.failure is None
        assert polls == []
    finally:
        timer.cancel()
        timer.join()


_DEADLINES = pytest.mark.skipif(
    not _kernel.reads_deadlines(), reason="the kernel does not show wait deadlines here"
)


@pytest.mark.parametrize(
    ("period", "sleeps"),
    [
        (0.005, True),
        pytest.param(0.08, True, marks=_DEADLINES),
        pytest.param(0.3, False, marks=_DEADLINES),
    ],
    ids=["5ms-sleep", "80ms-sleep", "300ms-timed-wait"],
)
def test_a_thread_outside_the_run_that_polls_is_waited_for(period: float, sleeps: bool) -> None:
    # The poller sleeps between looks (a timed wait, which ends by itself): it is not proved
    # idle, and the event it sets ends the wait, as on a stock interpreter. One that looks
    # less often than the scheduler waits for threads to move is waited for until its
    # deadline (the kernel shows it), within the half second it waits at most.
    box: list[threading.Event] = []
    stop = threading.Event()

    def poller() -> None:
        while not stop.is_set():
            if sleeps:
                time.sleep(period)
            else:
                stop.wait(period)
            while box:
                box.pop().set()

    thread = threading.Thread(target=poller)
    thread.start()
    try:

        def scenario() -> None:
            event = threading.Event()
            box.append(event)  # no wake-up: the poller finds it
            assert event.wait()

        assert interlace.explore(scenario, seed=SEED, max_schedules=5).failure is None
    finally:
        stop.set()
        thread.join()


@_DEADLINES
def test_a_heartbeat_outside_the_run_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # A thread that wakes every 30 s (a heartbeat, a batch exporter's flush): the kernel
    # shows its deadline further off than the scheduler would wait, so it is not waited for.
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(30):
            pass

    thread = threading.Thread(target=heartbeat)
    thread.start()
    try:
        quiet_for = _threads._OUTSIDE_QUIET_SECONDS
        assert _every_other_thread_proved_idle(quiet_for=quiet_for), _NOT_SETTLED
        polls = _count_polls(monkeypatch)
        exploration = interlace.explore(_barrier_after_a_sleep, seed=SEED, max_schedules=10)
        assert exploration.failure is None
        assert polls == []
    finally:
        stop.set()
        thread.join()


def test_a_thread_unknown_to_threading_handed_a_job_is_waited_for(
    warm_executor: concurrent.futures.ThreadPoolExecutor,
) -> None:
    # A thread started with _thread (threading does not list it) beside an idle executor
    # worker: the run's release wakes it, so nothing is proved idle, and its event ends the
    # wait.
    job, ended = _thread.allocate_lock(), _thread.allocate_lock()
    job.acquire()
    ended.acquire()
    box: list[threading.Event | None] = []

    def raw_worker() -> None:
        while True:
            job.acquire()
            item = box.pop()
            if item is None:
                ended.release()
                return
            time.sleep(0.002)
            item.set()

    _thread.start_new_thread(raw_worker, ())
    try:

        def scenario() -> None:
            event = threading.Event()
            box.append(event)
            job.release()
            assert event.wait()

        assert interlace.explore(scenario, seed=SEED, max_schedules=5).failure is None
    finally:
        box.append(None)
        job.release()
        ended.acquire()


def submits_to(executor: concurrent.futures.ThreadPoolExecutor) -> None:
    assert executor.submit(_slow_square, 2).result() == 4


def test_an_executor_made_before_the_exploration_is_refused_when_it_starts_a_worker() -> None:
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)  # no worker yet
    try:
        with pytest.raises(interlace.errors.UnsupportedOperationError) as raised:
            interlace.explore(lambda: submits_to(executor), seed=SEED, max_schedules=5)
    finally:
        executor.shutdown()
    message = str(raised.value)
    assert "is a worker of a ThreadPoolExecutor created before the exploration" in message
    assert "'with ThreadPoolExecutor() as pool:'" in message


def test_a_multiprocessing_pool_made_in_the_target_is_refused() -> None:
    # A ThreadPool: its worker handler waits on the change notifier's pipe, as a process
    # Pool's does (which also starts processes, whose start-up the refusal cuts short).
    import multiprocessing.pool

    def scenario() -> None:
        with multiprocessing.pool.ThreadPool(1) as pool:
            pool.map(abs, [1])

    with pytest.raises(interlace.errors.UnsupportedOperationError) as raised:
        interlace.explore(scenario, seed=SEED, max_schedules=5)
    assert "is a thread of a multiprocessing pool" in str(raised.value)


# -- a process forked during a run ---------------------------------------------------------------


def _sum_in_child(results: Any) -> None:
    total = 0
    for value in range(2000):  # more points than a time slice has, in the child
        total += value
    results.put(total)


def a_thread_forks_a_child_that_runs_code_under_test() -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    results = context.Queue()
    got: list[int] = []

    def work() -> None:
        child = context.Process(target=_sum_in_child, args=(results,))
        child.start()
        got.append(results.get(timeout=5))
        child.join()

    _start_and_join(work)
    assert got == [1999000]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # 3.12+: fork with threads
@pytest.mark.parametrize("seed", [1, 2])  # seeds whose schedules switch in the child
def test_a_child_forked_during_a_run_runs_uncontrolled(seed: int) -> None:
    # The child has the forking thread alone and no scheduler: a switch at one of its
    # schedule points would wait for a baton that no thread passes, and the parent for
    # its result.
    exploration = interlace.explore(
        a_thread_forks_a_child_that_runs_code_under_test, seed=seed, max_schedules=3
    )
    assert exploration.failure is None


# -- Ctrl-C while a parked thread holds a Condition's lock --------------------------------------

INTERRUPTED_IN_CONDITION_WAIT = textwrap.dedent(
    """
    import _thread, select, threading
    import interlace

    def scenario():
        cond = threading.Condition()
        other = threading.Event()

        def worker():
            with cond:
                _thread.interrupt_main()
                select.select([], [], [], 1.0)  # real time: the main thread sees the Ctrl-C
                other.wait()  # parks holding the Condition's lock

        with cond:
            thread = threading.Thread(target=worker)
            thread.start()
            cond.wait()

    try:
        interlace.explore(scenario, seed=7, max_schedules=5)
    except KeyboardInterrupt:
        print("interrupted")
    """
)


def test_ctrl_c_in_a_condition_wait_unwinds_while_a_parked_thread_holds_its_lock() -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_CONDITION_WAIT],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "interrupted", done.stderr
