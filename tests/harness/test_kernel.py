"""What the kernel tells about threads (``interlace.harness._kernel``), on Linux."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from interlace.harness import _kernel

pytestmark = pytest.mark.skipif(
    not _kernel.works(), reason="the kernel does not show thread states here"
)


def _settled(native_id: int, probe: Callable[[int], int | None]) -> int | None:
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
