"""One progress line for a long exploration, shared by ``interlace explore`` and the plugin.

The line says how many schedules ran of ``max_schedules``, the rate, the time elapsed and an
estimate of the time left (whichever budget ends first: the schedules at the current rate, or
``max_seconds``). It is drawn only on a terminal, only after ``delay`` seconds (a fast
exploration shows nothing) and at most once per ``interval`` seconds, so the exploration pays
one clock read per schedule and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ("ProgressLine", "progress_text")

MSG_PROGRESS = "{prefix}: {done}/{total} schedules, {rate} schedules/s, {elapsed} elapsed, {left}"


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes} min {seconds:02d} s"


def progress_text(
    prefix: str, done: int, total: int, elapsed: float, max_seconds: float | None = None
) -> str:
    """The progress line's text: schedules run, rate, elapsed and time left."""
    rate = done / elapsed if elapsed > 0 else 0.0
    left: float | None = (total - done) / rate if rate > 0 else None
    if max_seconds is not None:
        budget = max(0.0, max_seconds - elapsed)
        left = budget if left is None else min(left, budget)
    return MSG_PROGRESS.format(
        prefix=prefix,
        done=done,
        total=total,
        rate=f"{rate:.0f}" if rate >= 10 else f"{rate:.1f}",
        elapsed=_seconds(elapsed),
        left="time left unknown" if left is None else f"~{_seconds(left)} left",
    )


class ProgressLine:
    """Calls ``draw`` with the progress text at most once per ``interval`` seconds, after
    ``delay`` seconds, and ``erase`` once at the end if anything was drawn.

    Invariant: ``shown`` is True exactly when ``draw`` was called after the last ``erase``.
    """

    def __init__(
        self,
        prefix: str,
        draw: Callable[[str], None],
        erase: Callable[[], None],
        *,
        max_seconds: float | None = None,
        delay: float = 0.5,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefix = prefix
        self.draw = draw
        self.erase = erase
        self.max_seconds = max_seconds
        self.delay = delay
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.last = -float("inf")
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        elapsed = now - self.started
        if elapsed < self.delay or now - self.last < self.interval:
            return
        self.last = now
        self.draw(progress_text(self.prefix, done, total, elapsed, self.max_seconds))
        self.shown = True

    def finish(self) -> None:
        """Erase the line, if one is showing."""
        if self.shown:
            self.erase()
            self.shown = False
