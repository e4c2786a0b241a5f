"""Controlled threads: correct programs that stock CPython runs fine pass, and unwinding ends.

Each program here did something a stock interpreter allows (a lock timeout, a daemon thread
with a periodic wait, ``sys.exit`` in a worker, an own ``threading.excepthook``) that the
harness once reported as a failure, or made it hang.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

import interlace

SEED = 7


def _start_and_join(target: object) -> None:
    thread = threading.Thread(target=target)  # type: ignore[arg-type]
    thread.start()
    thread.join()


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


def test_a_long_acquire_timeout_that_passes_is_refused_with_what_to_do() -> None:
    def scenario() -> None:
        lock = threading.Lock()
        with lock:
            _start_and_join(lambda: lock.acquire(timeout=30))

    with pytest.raises(interlace.errors.UnsupportedOperationError, match="cut short"):
        interlace.explore(scenario, seed=SEED, max_schedules=5)


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
