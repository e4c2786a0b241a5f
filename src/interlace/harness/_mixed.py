"""Tasks and threads under one scheduler: an ``async def`` run whose tasks start threads.

The controlled event loop runs in the thread that explores. As long as the run starts no
thread, nothing here is involved. The first thread it starts (an executor's worker for
``asyncio.to_thread``/``run_in_executor``, or a ``threading.Thread``) puts the loop's thread
under a thread scheduler (:class:`LoopController`) as actor 0, and every thread started from
then on runs under it too, exactly as in a plain-function exploration (``_threads``):

* One step counter and one clock: the scheduler's ``step`` and ``now`` *are* the loop's
  ``_step`` and ``_now`` (``now`` in microseconds since the run started, ``_now`` in seconds
  from the loop's ``EPOCH``), so a loop step, a schedule point in a thread and a schedule
  point in a task's code under test each take the next step number, and a replay meets them
  in order.
* The loop's thread has schedule points in the code under test its tasks run (a thread may
  preempt a task in the middle of a step, as the GIL allows), and waits in the scheduler when
  it has nothing ready (``ControlledEventLoop._wait_in_scheduler``): until a thread calls back
  or, once every thread waits, the clock reaches the loop's next timer.
* Stock order is the GIL's: the running thread goes on until it blocks or its time slice ends,
  so a job runs while the loop waits, as it does when the loop sits in ``select``. A thread
  choice is a ``THREAD`` decision (label "needs thread preemption", or "needs a free-threaded
  build" where a GIL build would not switch: ``Controller.gil_point``); the loop's own
  choices keep their kinds.
* When the main task is done the run ends as ``asyncio.run`` does, under control: leftover
  tasks are cancelled, the default executor is shut down (its jobs finish), and threads the
  run started are waited for; then every thread is unwound and joined.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from interlace._core.schedule import THREAD, Settings
from interlace._core.strategy import Chooser
from interlace.harness import _affinity, _runtime, _threads
from interlace.harness._loop import EPOCH, ControlledEventLoop

__all__ = ("LoopController", "MixedRun")


class LoopController(_threads.Controller):
    """A thread scheduler whose step counter and clock are its event loop's."""

    kind = THREAD

    def __init__(
        self,
        loop: ControlledEventLoop,
        chooser: Chooser,
        settings: Settings,
        record: bool,
        *,
        stall_timeout: float = _runtime.STALL_SECONDS,
    ) -> None:
        self.loop = loop
        step, now = loop._step, loop._now
        super().__init__(chooser, settings, record, stall_timeout=stall_timeout)
        loop._step, loop._now = step, now  # the base class starts both at 0
        self.slice_end = step + settings.time_slice
        self._refresh()

    @property
    def step(self) -> int:
        return self.loop._step

    @step.setter
    def step(self, value: int) -> None:
        self.loop._step = value

    @property
    def now(self) -> int:
        """Virtual microseconds since the run started (the loop keeps seconds from ``EPOCH``)."""
        return round((self.loop._now - EPOCH) * 1e6)

    @now.setter
    def now(self, value: int) -> None:
        self.loop._now = EPOCH + value / 1e6

    def clock_moved(self) -> None:
        """The loop moved the clock: waits whose timeout passed may run."""
        now = self.now
        for u in self.threads:
            if u.status == _runtime.BLOCKED and u.deadline is not None and u.deadline <= now:
                u.timed_out = True

    def overtime(self) -> bool:
        """The steps ran out at a point in a thread: the loop may go on in overtime."""
        return self.loop.enter_overtime()

    def _hang_detail(self, reason: str) -> str:
        text = super()._hang_detail(reason)
        if self.loop.overtime is not None and self.record:
            text += (
                f"\n{self.loop.overtime} Continued past the budget with the clock moving on to "
                "each pending timer, the run was still going a budget of steps later."
            )
        return text

    def location(self, t: _threads.ControlledThread) -> str:
        if t.actor == 0 and t.waiting is not None and t.waiting[0] == "loop":
            return "its event loop"  # not the frame that called explore()
        return super().location(t)

    def close_segment(self, t: _threads.ControlledThread, suspended: str) -> None:
        if t.actor != 0:  # the loop's own steps are recorded step by step by the backend
            super().close_segment(t, suspended)


class MixedRun:
    """One run's switch-over to controlled threads, and its end (see the module docstring)."""

    def __init__(
        self,
        loop: ControlledEventLoop,
        chooser: Chooser,
        settings: Settings,
        record: bool,
        target: Callable[[], Any],
        *,
        stall_timeout: float = _runtime.STALL_SECONDS,
    ) -> None:
        self.loop = loop
        self.chooser = chooser
        self.settings = settings
        self.record = record
        self.target = target
        self.stall_timeout = stall_timeout
        self.ctl: LoopController | None = None
        self._previous_trace: Any = None
        self._end_names: Callable[[], None] | None = None
        self._end_hashes: Callable[[], None] | None = None
        self._profile: Any = None
        """The loop's thread's profile function before a recorded run probed it."""
        self._pinned: _affinity.Pin | None = None
        """The run's threads share one CPU from the first thread on (``_affinity``)."""
        self.on_activate: Callable[[], None] | None = None
        """Called as the threads come under control: the backend stops recording footprints
        there (a run with threads has no model), so the rest of the run, interlace's own
        instrumentation pass among it, is not traced line by line for nothing."""

    def arm(self) -> None:
        """Before the run: the first thread the loop's thread starts calls :meth:`activate`."""
        self.loop.mixed_capable = True
        _runtime.thread_local.activate = self.activate
        _runtime.thread_local.loop = self.loop  # the clocks of the time module read its clock
        self._end_names = _runtime.run_thread_names()
        self._end_hashes = _runtime.run_ordered_hashes()

    def activate(self) -> None:
        """Put the loop's thread under a thread scheduler, from its next schedule point."""
        _runtime.thread_local.activate = None
        if self.on_activate is not None:
            self.on_activate()
        loop = self.loop
        ctl = LoopController(
            loop, self.chooser, self.settings, self.record, stall_timeout=self.stall_timeout
        )
        main = ctl.add(threading.current_thread().name, None, False)
        main.ident = threading.get_ident()
        _threads.line_hooks(ctl, foreign=len(sys._current_frames()) > 1)
        ctl.current = main
        main.started = 0  # it has held the baton since the run began (``where``)
        self.ctl = ctl
        loop._mixed = ctl
        self._previous_trace = sys.gettrace()
        _threads.activate_instrumentation(self.target)
        _runtime.thread_local.thread = main
        _threads.tracing_on(ctl)
        self._profile = _threads.probe_on(main)
        self._pinned = _affinity.pin()
        _threads.trace_running_frames(sys._getframe(1))

    def use_stock_chooser(self, chooser: Chooser) -> None:
        """The run's end takes stock order (as the loop's clean-up does)."""
        if self.ctl is not None:
            self.ctl.chooser = chooser
            self.ctl._refresh()

    def end(self) -> None:
        """The main task is done: finish as ``asyncio.run`` does, under control.

        Called after the leftover tasks were cancelled: shut the default executor down
        (joins wait in the scheduler while its jobs finish), then let the loop's thread end
        and wait for the threads the run started (a failure there is the run's failure).
        """
        ctl = self.ctl
        if ctl is None or ctl.aborting:
            return
        main = ctl.threads[0]
        try:
            executor = self.loop._default_executor
            if executor is not None:
                self.loop._default_executor = None
                executor.shutdown(wait=True)
            ctl.thread_ended(main, None)
        except _runtime.Abort:
            pass
        main.status = _runtime.DONE
        _runtime.thread_local.thread = None
        _threads.wait_for_end(ctl)

    def close(self) -> None:
        """After the run, whatever happened: unwind and join every thread, restore tracing."""
        _runtime.thread_local.activate = None
        _runtime.thread_local.loop = None
        if self._end_names is not None:
            self._end_names()
            self._end_names = None
        if self._end_hashes is not None:
            self._end_hashes()
            self._end_hashes = None
        ctl = self.ctl
        if ctl is None:
            return
        _runtime.thread_local.thread = None
        self.loop._mixed = None
        try:
            _threads.unwind(ctl)
        finally:
            _threads.baton = None  # the report still reads ctl.current
            _threads.line_hooks(None, foreign=False)
            _threads.tracing_off()
            _threads.probe_off(ctl.threads[0], self._profile)
            sys.settrace(self._previous_trace)
            _affinity.unpin(self._pinned)
            self._pinned = None
