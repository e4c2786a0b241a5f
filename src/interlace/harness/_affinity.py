"""One CPU for a run's threads, so that the baton passes between them in place.

Controlled threads run one at a time: each switch wakes one thread and parks another. On a
multi-core Linux machine the kernel often wakes the next thread on another core, and when that
core is busy (a second test process, a pytest-xdist worker) the woken thread waits for it.
Measured on 2 cores (``benchmarks/threads_pinning.py``): a file of thread explorations took
38 s alone and 76 s beside one busy core; with each run's threads on the CPU the run started
on, 20 s and 25 s.

So a run pins the thread that runs it to the CPU it is on (threads it starts inherit the
mask), and gives the mask back when it ends. The code under test sees the affinity it had:
``os.sched_getaffinity`` reports the mask from before the pin, and so does
``os.process_cpu_count`` (3.13, which ``ThreadPoolExecutor`` sizes itself by) since it reads
that function. A thread the run leaves behind (a C library's worker pool) gets the mask back
too, and so does a process the run starts (``subprocess``, ``multiprocessing``, ``os.fork``,
``os.system``, ``os.posix_spawn``), which would otherwise inherit the pin for life. Where
the platform has no affinity (Windows, macOS) or refuses it, nothing changes.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any

real_getaffinity: Callable[[int], set[int]] | None = getattr(os, "sched_getaffinity", None)
_real_setaffinity: Callable[[int, Any], None] | None = getattr(os, "sched_setaffinity", None)
_TASKS = "/proc/self/task"

_usable = real_getaffinity is not None and _real_setaffinity is not None
"""False once the platform refused a pin: the process never tries again."""

_getcpu: Callable[[], int] | None = None


class Pin:
    """A run's pin: the CPU, the mask from before, and the threads there were."""

    __slots__ = ("cpu", "mask", "tids")

    def __init__(self, cpu: int, mask: set[int], tids: frozenset[str]) -> None:
        self.cpu = cpu
        self.mask = mask
        self.tids = tids


_pin: Pin | None = None
"""The pin of the run in progress, if any (read by the patched ``sched_getaffinity``)."""


def _cpu_from_proc() -> int:
    with open("/proc/thread-self/stat", "rb") as stat:
        fields = stat.read()
    # Field 39, counted after the command name (which may hold spaces and parentheses).
    return int(fields[fields.rindex(b")") + 2 :].split()[36])


def _current_cpu() -> int:
    global _getcpu
    if _getcpu is None:
        try:
            import ctypes

            libc_getcpu = ctypes.CDLL(None, use_errno=True).sched_getcpu
            libc_getcpu.restype = ctypes.c_int
            libc_getcpu.argtypes = ()
            _getcpu = libc_getcpu
        except (OSError, AttributeError, ImportError):
            _getcpu = _cpu_from_proc
    cpu = _getcpu()
    if cpu < 0:
        raise OSError("sched_getcpu failed")
    return cpu


def _tids() -> frozenset[str]:
    try:
        return frozenset(os.listdir(_TASKS))
    except OSError:
        return frozenset()


def pin() -> Pin | None:
    """Pin the calling thread, and the threads it starts from now on, to the CPU it is on.

    Returns the pin to pass to :func:`unpin`, or None where nothing was pinned (no affinity
    on this platform, a mask of one CPU already, or a refusal).
    """
    global _pin, _usable
    if not _usable or _pin is not None:
        return None
    assert real_getaffinity is not None
    assert _real_setaffinity is not None
    try:
        mask = real_getaffinity(0)
        if len(mask) < 2:
            return None
        cpu = _current_cpu()
        if cpu not in mask:
            return None
        tids = _tids()
        _real_setaffinity(0, (cpu,))
    except (OSError, ValueError, IndexError):  # no CPU number where expected
        _usable = False
        return None
    _pin = Pin(cpu, mask, tids)
    return _pin


def unpin(pinned: Pin | None) -> None:
    """Give the calling thread its mask back, and every thread the run started that is left."""
    global _pin
    if pinned is None:
        return
    _pin = None
    assert real_getaffinity is not None
    assert _real_setaffinity is not None
    alone = {pinned.cpu}
    with contextlib.suppress(OSError):
        _real_setaffinity(0, pinned.mask)
    for tid in _tids() - pinned.tids:
        try:
            if real_getaffinity(int(tid)) == alone:
                _real_setaffinity(int(tid), pinned.mask)
        except (OSError, ValueError):
            pass  # it ended meanwhile


def sched_getaffinity(pid: int, /) -> set[int]:
    """``os.sched_getaffinity`` during an exploration: the mask as it was before the pin."""
    assert real_getaffinity is not None
    mask = real_getaffinity(pid)
    pinned = _pin
    if (
        pinned is not None
        and mask == {pinned.cpu}
        and (pid == 0 or pid == os.getpid() or os.path.exists(f"{_TASKS}/{pid}"))
    ):
        return set(pinned.mask)
    return mask


def _with_the_mask(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` (which starts a process) run with the calling thread's mask from before the
    pin: a child process inherits the mask of the thread that starts it, and a child pinned
    to one CPU would keep that for life (and tell ``nproc`` it has one CPU)."""

    @functools.wraps(call)
    def starts_a_process(*args: Any, **kwargs: Any) -> Any:
        pinned = _pin
        if pinned is None:
            return call(*args, **kwargs)
        assert real_getaffinity is not None  # a pin was made with them
        assert _real_setaffinity is not None
        try:
            ours = real_getaffinity(0) == {pinned.cpu}
            if ours:
                _real_setaffinity(0, pinned.mask)
        except OSError:
            ours = False
        try:
            return call(*args, **kwargs)
        finally:
            if ours:
                with contextlib.suppress(OSError):
                    _real_setaffinity(0, (pinned.cpu,))

    return starts_a_process


def forget_in_child() -> None:
    """In a process forked during a run (``os.fork``, ``multiprocessing``'s fork): the
    forking thread's mask from before the pin, and no pin."""
    global _pin
    pinned, _pin = _pin, None
    if pinned is not None and _real_setaffinity is not None:
        with contextlib.suppress(OSError):
            _real_setaffinity(0, pinned.mask)


def _process_starts() -> list[tuple[Any, str, Any]]:
    """Where the standard library starts a process other than through ``os.fork``."""
    starts: list[tuple[Any, str]] = [
        (os, "system"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
    ]
    try:
        import _posixsubprocess  # multiprocessing's spawn and forkserver start methods
    except ImportError:
        pass
    else:
        starts.append((_posixsubprocess, "fork_exec"))
    import subprocess

    starts.append((subprocess, "_fork_exec"))  # imported from _posixsubprocess
    return [
        (owner, name, _with_the_mask(getattr(owner, name)))
        for owner, name in starts
        if callable(getattr(owner, name, None))
    ]


PATCHES: list[tuple[Any, str, Any]] = (
    [(os, "sched_getaffinity", sched_getaffinity), *_process_starts()]
    if real_getaffinity is not None and _real_setaffinity is not None
    else []
)
"""What ``controlled_exploration`` installs: the code under test never sees the pin, and a
process it starts has the mask it would have had."""
