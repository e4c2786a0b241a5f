"""What the kernel tells about the threads of this process: which of them provably did nothing.

When every thread of a run of threads waits while threads outside the run are alive (an
executor's worker made at import, a test server), one of those may be about to end the wait:
the scheduler gives them a moment of real time (``Controller._woken_from_outside``). It need
not, and does not, when the kernel shows of every thread outside the run (``idle_since``):

* that it sleeps in a futex wait with no timeout: a lock's acquire, a condition's wait, an
  idle executor worker's ``SimpleQueue.get``, all with no timeout. Only another thread can
  end such a wait: not a timer (a poller's ``sleep`` or a ``threading.Timer`` ends by itself
  and may then act), nor I/O. The kernel reads a thread's system call only once the thread
  is off the CPU, so one on its way to sleep is not taken for one asleep.
* that it has not been put on a CPU since it was seen so, before the run began: a thread
  woken since is runnable (state R) until it is, and counted when it is. So it has not run
  an instruction since: it cannot have woken a thread of the run, and nothing the run did
  woke it.

Linux only (``/proc/self/task``), on the architectures whose futex system call number is
known, and only once a thread of its own has shown that the kernel counts as described
(``works``); elsewhere nothing is proved and the scheduler waits as before.

The baselines persist across runs (not run since earlier implies not run since this run
began): a run's start (``refresh``) reads only the threads new since the last one, and those
a check could not prove idle, before that run can have woken them. What is known of an
ended thread is dropped when it is seen gone, since a new thread may reuse its id.
"""

from __future__ import annotations

import _thread
import os
import platform
import time
from collections.abc import Iterable

_TASKS = "/proc/self/task"
_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}.get(
    platform.machine().lower()
)
"""The futex system call's number here (None: unknown, so nothing is proved)."""
_FUTEX_WAITS = (0, 9)
"""FUTEX_WAIT and FUTEX_WAIT_BITSET, once the private and clock flags are masked off."""
_FUTEX_FLAGS = 128 | 256
_start_new_thread = _thread.start_new_thread  # the original: runs may patch it
_get_native_id = _thread.get_native_id
_real_sleep = time.sleep

_works: bool | None = None
_seen: set[int] = set()
"""Threads read at least once (at a run's start), by kernel id."""
_idle: dict[int, int] = {}
"""Threads seen asleep in an untimed wait, by kernel id, with how many times each had been
put on a CPU then (``idle_count``)."""
_stale: set[int] = set()
"""Threads to read again at the next run's start (new, or seen to have run)."""
_own: set[int] = set()
"""interlace's own threads (the asyncio watchdog): never a thread a run waits for."""
_unwound: set[int] = set()
"""Threads of ended runs, joined but maybe not yet gone: they do nothing any more."""


def _read(native_id: int, name: str) -> bytes:
    fd = os.open(f"{_TASKS}/{native_id}/{name}", os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _in_untimed_wait(native_id: int) -> bool:
    """Whether the thread waits in a futex wait with no timeout. The kernel answers only once
    the thread is off the CPU (``running`` otherwise)."""
    call = _read(native_id, "syscall").split()
    return (
        len(call) >= 5
        and call[0] == str(_FUTEX).encode()
        and int(call[2], 16) & ~_FUTEX_FLAGS in _FUTEX_WAITS
        and int(call[4], 16) == 0
    )


def _switched_in(native_id: int) -> int:
    """How many times the thread has been put on a CPU (``schedstat``'s third field)."""
    return int(_read(native_id, "schedstat").split()[2])


def _sleeping(native_id: int) -> bool:
    """Whether the thread sleeps now (state S: not running, not runnable)."""
    stat = _read(native_id, "stat")
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"S"


def idle_count(native_id: int) -> int | None:
    """For a thread asleep in a futex wait with no timeout: how many times it has been put on a
    CPU, which stays the same for as long as it does not run. None for any other thread, or
    if the kernel does not say."""
    try:
        if not _in_untimed_wait(native_id):
            return None
        count = _switched_in(native_id)
        return count if _sleeping(native_id) else None
    except (OSError, ValueError, IndexError):
        return None


def still_idle(native_id: int, count: int) -> bool:
    """Whether the thread whose ``idle_count`` was ``count`` has not run since: it sleeps
    (woken, it would be runnable until put on a CPU) and has not been put on a CPU."""
    try:
        return _sleeping(native_id) and _switched_in(native_id) == count
    except (OSError, ValueError, IndexError):
        return False


def works() -> bool:
    """Whether the kernel tells here. Checked once per process with a thread of its own: made
    to wait on a lock with no timeout, it must read as such, and count once woken (an emulated
    ``/proc`` that shows no counts, or frozen ones, proves nothing)."""
    global _works
    if _works is None:
        _works = _FUTEX is not None and os.path.isdir(_TASKS) and _check_with_a_thread()
    return _works


def _check_with_a_thread() -> bool:
    gate, woken, leave = (_thread.allocate_lock() for _ in range(3))
    for lock in (gate, woken, leave):
        lock.acquire()
    native: list[int] = []

    def wait() -> None:
        native.append(_get_native_id())
        gate.acquire()
        woken.release()
        leave.acquire()

    _start_new_thread(wait, ())
    asleep = None
    for _ in range(200):  # about a second at most for it to go to sleep
        _real_sleep(0.005)
        if native and (asleep := idle_count(native[0])) is not None:
            break
    unchanged = asleep is not None and still_idle(native[0], asleep)
    gate.release()
    woken.acquire()
    moved = asleep is not None and not still_idle(native[0], asleep)
    leave.release()
    return unchanged and moved


def _task_ids() -> set[int]:
    try:
        return {int(name) for name in os.listdir(_TASKS)}
    except (OSError, ValueError):
        return set()


def refresh() -> None:
    """At a run's start, before anything of the run has run: read the threads not read yet
    and those whose baseline is out of date."""
    if not works():
        return
    alive = _task_ids()
    _forget_ended(alive)
    me = _get_native_id()
    for native in (alive - _seen) | (_stale & alive):
        _seen.add(native)
        count = idle_count(native) if native != me else None
        if count is None:
            _idle.pop(native, None)
        else:
            _idle[native] = count
    _stale.clear()


def _forget_ended(alive: set[int]) -> None:
    """Drop what is known of ended threads: a new thread may reuse an id."""
    for native in [native for native in _seen | _unwound if native not in alive]:
        _seen.discard(native)
        _unwound.discard(native)
        _idle.pop(native, None)


def unwound(natives: Iterable[int]) -> None:
    """The threads of a run that ended, all joined (``_threads._unwind``): a thread may stay
    listed a moment after its join returns, doing nothing for any run."""
    _unwound.update(natives)


def idle_since(ours: set[int]) -> bool:
    """Whether every thread of the process but ``ours`` (the run's, by kernel id) and
    interlace's own has slept in an untimed wait since before the run began. Each one that
    cannot be shown to is read again at the next run's start."""
    if not works():
        return False
    alive = _task_ids()
    _forget_ended(alive)
    proved = True
    for native in alive:
        if native in ours or native in _own or native in _unwound:
            continue
        if proved:
            count = _idle.get(native)
            if count is not None and still_idle(native, count):
                continue
            proved = False
        _stale.add(native)
    return proved


def own_thread_started() -> None:
    """Called in a thread of interlace's own (never one a run waits for)."""
    _own.add(_get_native_id())


def own_thread_ending() -> None:
    _own.discard(_get_native_id())
