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
* or, asked for a while (``idle_since``'s ``quiet_for``), that it sleeps in a wait whose
  timeout is absolute and further off than that: a lock's acquire or a condition's wait
  with a timeout (a heartbeat, a batch exporter's flush interval) or a ``time.sleep``,
  which CPython makes with a deadline on the monotonic clock. The deadline is read from the
  waiting thread's memory (``/proc/self/mem``) at the address its system call names.
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
import math
import os
import platform
import struct
import time
from collections.abc import Iterable

_TASKS = "/proc/self/task"
_ARCH = platform.machine().lower()
_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}.get(_ARCH)
"""The futex system call's number here (None: unknown, so nothing is proved)."""
_CLOCK_NANOSLEEP = {"x86_64": 230, "amd64": 230, "aarch64": 115, "arm64": 115, "riscv64": 115}.get(
    _ARCH
)
"""The clock_nanosleep system call's number here (``time.sleep``)."""
_FUTEX_WAIT = 0
_FUTEX_WAIT_BITSET = 9
"""Its timeout is absolute: on the monotonic clock, or the real-time one with the flag."""
_FUTEX_WAITS = (_FUTEX_WAIT, _FUTEX_WAIT_BITSET)
"""FUTEX_WAIT and FUTEX_WAIT_BITSET, once the private and clock flags are masked off."""
_FUTEX_CLOCK_REALTIME = 256
_FUTEX_FLAGS = 128 | _FUTEX_CLOCK_REALTIME
_TIMER_ABSTIME = 1
_CLOCKS = {0: time.CLOCK_REALTIME, 1: time.CLOCK_MONOTONIC}
"""clock_nanosleep's clocks whose deadlines this reads, by the kernel's clock id."""
_TIMESPEC = struct.Struct("qq")
"""``struct timespec`` on the 64-bit architectures above: seconds, nanoseconds."""
_start_new_thread = _thread.start_new_thread  # the original: runs may patch it
_get_native_id = _thread.get_native_id
_real_sleep = time.sleep
_clock_gettime = time.clock_gettime

_works: bool | None = None
_deadlines: bool | None = None
"""Whether deadlines read right here (``reads_deadlines``); None until first needed."""
_memory: int | None = None
"""A descriptor of ``/proc/self/mem``, once opened."""
_seen: set[int] = set()
"""Threads read at least once (at a run's start), by kernel id."""
_idle: dict[int, tuple[int, float]] = {}
"""Threads seen asleep in a wait only another thread or a known deadline ends, by kernel id:
how many times each had been put on a CPU then, and when on the monotonic clock the wait
ends by itself (infinity for none: ``quiet``)."""
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


def _wait_ends(native_id: int, *, timed: bool) -> float | None:
    """When the thread's wait ends by itself, on the monotonic clock: infinity for a futex
    wait with no timeout (only another thread ends it); with ``timed``, the deadline of a
    futex wait or ``clock_nanosleep`` whose timeout is absolute; None for anything else
    (a relative timeout, I/O, a thread not in a system call). The kernel answers only once
    the thread is off the CPU (``running`` otherwise)."""
    call = _read(native_id, "syscall").split()
    if len(call) < 5 or not call[0].isdigit():
        return None
    number = int(call[0])
    if number == _FUTEX:
        op = int(call[2], 16)
        address = int(call[4], 16)
        if op & ~_FUTEX_FLAGS not in _FUTEX_WAITS:
            return None
        if address == 0:
            return math.inf
        if op & ~_FUTEX_FLAGS != _FUTEX_WAIT_BITSET:
            return None  # relative to when the wait began, which is not known
        clock = time.CLOCK_REALTIME if op & _FUTEX_CLOCK_REALTIME else time.CLOCK_MONOTONIC
    elif number == _CLOCK_NANOSLEEP:
        clock_id, flags, address = (int(arg, 16) for arg in call[1:4])
        if not flags & _TIMER_ABSTIME or clock_id not in _CLOCKS:
            return None
        clock = _CLOCKS[clock_id]
    else:
        return None
    return _deadline(address, clock) if timed else None


def _deadline(address: int, clock: int) -> float | None:
    """The ``struct timespec`` at ``address`` in this process, a deadline on ``clock``, as a
    time on the monotonic clock (None if it cannot be read or is not a time)."""
    global _memory
    try:
        if _memory is None:
            _memory = os.open("/proc/self/mem", os.O_RDONLY)
        seconds: int
        nanoseconds: int
        seconds, nanoseconds = _TIMESPEC.unpack(os.pread(_memory, _TIMESPEC.size, address))
    except (OSError, OverflowError, struct.error):
        return None
    if not 0 <= nanoseconds < 1_000_000_000 or seconds < 0:
        return None
    left = seconds + nanoseconds / 1e9 - _clock_gettime(clock)
    return _clock_gettime(time.CLOCK_MONOTONIC) + left


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
    found = quiet(native_id, timed=False)
    return found[0] if found is not None else None


def quiet(native_id: int, *, timed: bool = True) -> tuple[int, float] | None:
    """For a thread asleep in a wait that only another thread ends, or (``timed``) one with
    an absolute deadline: how many times it has been put on a CPU, which stays the same for
    as long as it does not run, and when its wait ends by itself (infinity: never). None for
    any other thread, or if the kernel does not say."""
    try:
        ends = _wait_ends(native_id, timed=timed and reads_deadlines())
        if ends is None:
            return None
        count = _switched_in(native_id)
        # Still the same wait (its deadline was read while it was not running).
        return (count, ends) if _sleeping(native_id) and _switched_in(native_id) == count else None
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


def reads_deadlines() -> bool:
    """Whether a timed wait's deadline reads right here. Checked once per process with a
    thread of its own, made to wait on a lock for a minute."""
    global _deadlines
    if _deadlines is None:
        _deadlines = works() and _check_deadline_with_a_thread()
    return _deadlines


def _check_deadline_with_a_thread() -> bool:
    gate, done = _thread.allocate_lock(), _thread.allocate_lock()
    gate.acquire()
    done.acquire()
    native: list[int] = []

    def wait() -> None:
        native.append(_get_native_id())
        gate.acquire(timeout=60)
        done.release()

    _start_new_thread(wait, ())
    ends = None
    for _ in range(200):  # about a second at most for it to go to sleep
        _real_sleep(0.005)
        if native:
            try:
                ends = _wait_ends(native[0], timed=True)
            except (OSError, ValueError, IndexError):
                ends = None
            if ends is not None:
                break
    gate.release()
    done.acquire()
    left = None if ends is None else ends - _clock_gettime(time.CLOCK_MONOTONIC)
    return left is not None and 50 < left <= 60


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
        found = quiet(native) if native != me else None
        if found is None:
            _idle.pop(native, None)
        else:
            _idle[native] = found
    _stale.clear()


def _forget_ended(alive: set[int]) -> None:
    """Drop what is known of ended threads: a new thread may reuse an id."""
    for native in [native for native in _seen | _unwound if native not in alive]:
        _seen.discard(native)
        _unwound.discard(native)
        _idle.pop(native, None)


def unwound(natives: Iterable[int]) -> None:
    """The threads of a run that ended, all joined (``_threads.unwind``): a thread may stay
    listed a moment after its join returns, doing nothing for any run."""
    _unwound.update(natives)


def idle_since(ours: set[int], *, quiet_for: float = 0.0) -> bool:
    """Whether every thread of the process but ``ours`` (the run's, by kernel id) and
    interlace's own has slept since before the run began in a wait that only another thread
    ends, or (``quiet_for`` > 0) one whose deadline is more than ``quiet_for`` seconds off.
    Each one that cannot be shown to is read again at the next run's start."""
    if not works():
        return False
    alive = _task_ids()
    _forget_ended(alive)
    horizon = _clock_gettime(time.CLOCK_MONOTONIC) + quiet_for if quiet_for > 0 else math.inf
    proved = True
    for native in alive:
        if native in ours or native in _own or native in _unwound:
            continue
        if proved:
            found = _idle.get(native)
            if found is not None and found[1] >= horizon and still_idle(native, found[0]):
                continue
            proved = False
        _stale.add(native)
    return proved


def wakes(ours: set[int], before: float) -> dict[int, float]:
    """The threads of the process but ``ours`` and interlace's own that sleep now in a wait
    that their timeout ends before ``before`` (monotonic clock), by kernel id, with that
    deadline: pollers between looks."""
    if not works() or not reads_deadlines():
        return {}
    found = {}
    for native in _task_ids():
        if native in ours or native in _own or native in _unwound:
            continue
        wait = quiet(native)
        if wait is not None and wait[1] < before:
            found[native] = wait[1]
    return found


def own_thread_started() -> None:
    """Called in a thread of interlace's own (never one a run waits for)."""
    _own.add(_get_native_id())


def own_thread_ending() -> None:
    _own.discard(_get_native_id())
