"""The virtual clocks of a run: what ``time.monotonic()``, ``time.time()``, ``perf_counter``,
their ``_ns`` forms and the calendar (``datetime.now()``, through ``_clock``) read in a
controlled thread or in the thread of a controlled event loop.

It owns the clock functions the thread backend puts in place of the stock ones (``virtual``,
``virtual_ns``, ``monotonic``, ``wall``, ``timeouts_monotonic``, ``CALENDAR``) and the
calendar's per-run resolution. It may call ``_runtime`` (the epochs, the real clocks, which run
the current thread belongs to), ``_instrument`` (which frames are interlace's own) and
``_clock`` (the calendar's patches); the backends install its functions, it installs nothing.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from interlace.harness import _clock, _instrument
from interlace.harness._runtime import (
    EPOCH_MONOTONIC,
    EPOCH_WALL,
    real_monotonic,
    real_time,
    thread_local,
)

__all__ = ("CALENDAR", "monotonic", "timeouts_monotonic", "virtual", "virtual_ns", "wall")

_getframe = sys._getframe

_ENGINE = _instrument.ENGINE
"""interlace's own code: it reads the real clock wherever it runs (a signal handler of its
own, run in a controlled thread or a controlled loop's thread, measures real time)."""


def virtual(
    real: Callable[[], float], epoch: list[float], *, loops: bool = True
) -> Callable[[], float]:
    """A clock that reads virtual time in controlled threads and ``real`` elsewhere.

    With ``loops``, also in the thread of a running controlled event loop (``ThreadLocal.loop``).
    """

    def now() -> float:
        t = thread_local.thread
        if t is not None:
            if not _getframe(1).f_code.co_filename.startswith(_ENGINE):
                return epoch[0] + t.ctl.now / 1e6
        elif loops:
            loop = thread_local.loop
            if (
                loop is not None
                and loop._thread_id is not None
                and not _getframe(1).f_code.co_filename.startswith(_ENGINE)
            ):
                elapsed: float = loop.elapsed()
                return epoch[0] + elapsed
        return real()

    now.__name__ = now.__qualname__ = real.__name__
    return now


def virtual_ns(real: Callable[[], int], epoch: list[float]) -> Callable[[], int]:
    def now_ns() -> int:
        if _getframe(1).f_code.co_filename.startswith(_ENGINE):
            return real()
        t = thread_local.thread
        if t is not None:
            return int(epoch[0] * 1e9) + t.ctl.now * 1000
        loop = thread_local.loop
        if loop is not None and loop._thread_id is not None:
            elapsed: float = loop.elapsed()
            return int(epoch[0] * 1e9) + round(elapsed * 1e9)
        return real()

    now_ns.__name__ = now_ns.__qualname__ = real.__name__
    return now_ns


monotonic = virtual(real_monotonic, EPOCH_MONOTONIC)
timeouts_monotonic = virtual(real_monotonic, EPOCH_MONOTONIC, loops=False)
"""The clock of ``threading``'s and ``queue``'s own timeouts: in an event loop's thread that
is not under control their waits are real, so their deadlines must be too (a deadline on the
virtual clock, which stands still while the loop's thread waits, would never pass)."""
wall = virtual(real_time, EPOCH_WALL)


_calendar_read: list[Any] = [None, 0.0]
"""The run (its controller or loop) that last read the calendar, and the time it read."""
_CALENDAR_TICK = 1e-6
"""How far the calendar moves between two reads at one virtual instant (its resolution)."""


def _wall_at(frame: types.FrameType) -> float:
    """``wall`` as code in ``frame`` reads it: the calendar's clock (``_clock``).

    Within a run, each read is at least a microsecond after the one before (``datetime``'s
    resolution): the virtual clock stands still within a step, so code that spins until
    ``datetime.now()`` passes a timestamp would spin forever, where on a stock interpreter
    the computing between two reads takes that long at least. Per run, so every run reads
    the same times."""
    if not frame.f_code.co_filename.startswith(_ENGINE):
        owner: Any = None
        t = thread_local.thread
        if t is not None:
            owner, now = t.ctl, EPOCH_WALL[0] + t.ctl.now / 1e6
        else:
            loop = thread_local.loop
            if loop is not None and loop._thread_id is not None:
                elapsed: float = loop.elapsed()
                owner, now = loop, EPOCH_WALL[0] + elapsed
        if owner is not None:
            last_owner, last = _calendar_read
            if last_owner is owner and now < last + _CALENDAR_TICK:
                now = last + _CALENDAR_TICK
            _calendar_read[:] = [owner, now]
            return now
    return real_time()


CALENDAR = _clock.patches(_wall_at)
