"""What the kernel tells about threads (``interlace.harness._kernel``), on Linux."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from interlace.harness import _kernel

_T = TypeVar("_T")

pytestmark = pytest.mark.skipif(
    not _kernel.works(), reason="the kernel does not show thread states here"
)


def _settled(native_id: int, probe: Callable[[int], _T | None]) -> _T | None:
    """``probe`` once the thread has had time to reach its wait (up to 2 s)."""
    deadline = time.monotonic() + 2
    while (value := probe(native_id)) is None and time.monotonic() < deadline:
        time.sleep(0.005)
    return value


@pytest.fixture
def waiting() -> Iterator[Callable[[Callable[[], object]], int]]:
    """Starts threads that run a wait (each test ends its waits); joins them at the end."""
    threads: list[threading.Thread] = []

    def start(wait: Callable[[], object]) -> int:
        thread = threading.Thread(target=wait)
        threads.append(thread)
        thread.start()
        assert thread.native_id is not None
        return thread.native_id

    yield start
    for thread in threads:
        thread.join(5)


def test_a_thread_in_an_untimed_wait_has_a_count_that_stays_until_it_runs(
    waiting: Callable[[Callable[[], object]], int],
) -> None:
    lock = threading.Lock()
    lock.acquire()
    native = waiting(lock.acquire)
    count = _settled(native, _kernel.idle_count)
    assert count is not None
    assert _kernel.still_idle(native, count)
    lock.release()  # it takes the lock and ends
    deadline = time.monotonic() + 2
    while _kernel.still_idle(native, count) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert not _kernel.still_idle(native, count)


@pytest.mark.parametrize(
    "make_wait",
    [
        lambda event: lambda: event.wait(30),  # a timeout: it ends by itself
        lambda event: lambda: time.sleep(0.3),  # a sleep, never a thread's to end
    ],
    ids=["timed-wait", "sleep"],
)
def test_a_thread_that_a_timer_wakes_is_never_idle(
    waiting: Callable[[Callable[[], object]], int],
    make_wait: Callable[[threading.Event], Callable[[], object]],
) -> None:
    event = threading.Event()
    native = waiting(make_wait(event))
    time.sleep(0.05)
    assert _kernel.idle_count(native) is None
    event.set()


def test_idle_since_names_every_other_thread_it_cannot_prove(
    waiting: Callable[[Callable[[], object]], int],
) -> None:
    event = threading.Event()
    timed = waiting(lambda: event.wait(30))
    me = threading.get_native_id()
    _kernel.refresh()
    assert not _kernel.idle_since({me})
    assert timed in _kernel._stale  # read again at the next run's start
    event.set()


def test_ended_threads_leave_no_baseline(waiting: Callable[[Callable[[], object]], int]) -> None:
    lock = threading.Lock()
    lock.acquire()
    native = waiting(lock.acquire)
    assert _settled(native, _kernel.idle_count) is not None
    _kernel._stale.add(native)
    _kernel.refresh()
    assert native in _kernel._idle
    lock.release()
    deadline = time.monotonic() + 2
    while native in _kernel._task_ids() and time.monotonic() < deadline:
        time.sleep(0.005)
    _kernel.idle_since({threading.get_native_id()})
    assert native not in _kernel._idle  # its id may come back as another thread's


_DEADLINES = pytest.mark.skipif(
    not _kernel.reads_deadlines(), reason="the kernel does not show wait deadlines here"
)


def _now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


@_DEADLINES
@pytest.mark.parametrize(
    "make_wait",
    [
        lambda event: lambda: event.wait(30),  # a futex wait with an absolute deadline
        lambda event: lambda: time.sleep(0.5),  # clock_nanosleep, absolute
    ],
    ids=["timed-wait", "sleep"],
)
def test_a_timed_waits_deadline_is_read(
    waiting: Callable[[Callable[[], object]], int],
    make_wait: Callable[[threading.Event], Callable[[], object]],
) -> None:
    event = threading.Event()
    before = _now()
    native = waiting(make_wait(event))
    found = _settled(native, _kernel.quiet)
    assert found is not None
    count, ends = found
    length = 30 if ends - before > 1 else 0.5
    assert before + length <= ends <= _now() + length
    assert _kernel.still_idle(native, count)
    assert _kernel.quiet(native, timed=False) is None  # not a wait only a thread ends
    event.set()


@_DEADLINES
def test_idle_since_takes_a_far_deadline_only_when_asked_and_wakes_finds_a_near_one(
    waiting: Callable[[Callable[[], object]], int],
) -> None:
    event = threading.Event()
    native = waiting(lambda: event.wait(30))
    assert _settled(native, _kernel.quiet) is not None
    me = {threading.get_native_id()}
    settled = time.monotonic() + 10  # the suite's other threads (idle workers) settle too
    while not _kernel.idle_since(me, quiet_for=10) and time.monotonic() < settled:
        time.sleep(0.01)
        _kernel.refresh()
    assert _kernel.idle_since(me, quiet_for=10), "another thread of the process keeps waking"
    assert not _kernel.idle_since(me)  # a timer ends its wait
    _kernel.refresh()
    assert not _kernel.idle_since(me, quiet_for=40)  # but not within 40 s
    assert native not in _kernel.wakes(me, _now() + 10)
    due = _kernel.wakes(me, _now() + 40).get(native)
    assert due is not None
    assert _now() + 25 < due <= _now() + 30
    event.set()
