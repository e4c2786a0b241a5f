"""Controlled threads: every thread the target starts runs one at a time, under the engine.

The model (docs/harness.md has the long form):

* Threads are real OS threads that pass a baton: only the thread holding it runs code under
  test; the others wait on a private lock. Which thread holds it is decided at *schedule
  points*: before every line of the code under test and before writes that follow a read in
  the same line (``_instrument``), and at every blocking operation.
* Stock order is what a GIL interpreter does with no preemption: the running thread goes on
  until it blocks or ends, then the thread that has waited longest runs. A time slice
  (``Settings.time_slice`` points) forces a switch to the longest-waiting thread, as the GIL's
  switch interval does, so a correct spin-wait always sees progress. Any other switch is a
  deviation (``needs thread preemption``; ``needs a free-threaded build`` where, with the
  GIL, CPython would not switch: ``Controller.gil_point``).
* Blocking operations never block for real: ``threading`` and ``queue`` primitives (also
  ones created before exploration) and the C locks of ``_thread`` are checked before they
  would block, and the thread parks in the scheduler instead. ``time.sleep`` and timeouts run
  on a virtual clock that jumps when every thread waits.
* Nothing can run and no timeout is pending: a deadlock, reported as a wait-for graph.
"""

# Why one module of about 3,100 lines (issue 34 splits it further): the schedule-point hooks
# read the baton holder as this module's global ``baton`` (a module attribute or a
# ``threading.local`` costs more than the rest of a point), the ``Controller`` assigns it, and
# ``_called_from_user_code`` skips the frames of this file (``_PRIMITIVE_FILES``), so the
# hooks, the controller and the patched primitives move out only together with those two
# facts. What every backend shares is in ``_runtime``, the virtual clocks in
# ``_virtual_clock``. This module may call ``_runtime``, ``_virtual_clock``, ``_instrument``,
# ``_introspect``, ``_pools`` and the other modules below it in docs/architecture.md, never
# the loop or the asyncio backend.

from __future__ import annotations

import _thread
import bisect
import collections
import concurrent.futures
import contextlib
import dis
import inspect
import logging
import math
import os
import queue
import re
import selectors
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

from interlace._core.result import RunResult, StepRecord
from interlace._core.schedule import READY, Decision, Settings
from interlace._core.strategy import Chooser
from interlace.errors import UnsupportedOperationError
from interlace.harness import (
    _affinity,
    _clock,
    _fault,
    _instrument,
    _interrupt,
    _kernel,
    _runtime,
    _virtual_clock,
)
from interlace.harness._runtime import (
    BLOCKED,
    DONE,
    EPOCH_MONOTONIC,
    EPOCH_WALL,
    RUNNABLE,
    STALL_SECONDS,
    Abort,
    is_passthrough,
    real_monotonic,
    real_time,
    refusal,
    seed_run_random,
    stall_timeout_advice,
    thread_local,
)

# One module object for everything from _instrument (a second import style could bind a
# second copy when the harness modules are imported again, as pytester makes happen).
Unknown = _instrument.Unknown
evaluate = _instrument.evaluate
plan_for = _instrument.plan_for

__all__ = ("ThreadsBackend", "controlled_exploration")

_allocate_lock = _thread.allocate_lock
_get_ident = _thread.get_ident
_LOCK = _thread.LockType
_RLOCK: type = _thread.RLock
LOCK_TYPES = (_LOCK, _RLOCK)

_getframe = sys._getframe
_real_sleep = time.sleep

_POLL_SECONDS = 0.25
_OUTSIDE_SECONDS = 0.5
"""How long every thread of a run may wait for a thread outside it (``_woken_from_outside``)."""
_OUTSIDE_POLL = 0.001
_OUTSIDE_IDLE_SECONDS = 0.05
"""How long threads outside the run may stay where they stood before they count as idle."""
_OUTSIDE_QUIET_SECONDS = _OUTSIDE_SECONDS + _OUTSIDE_IDLE_SECONDS
"""A thread outside the run asleep until a deadline further off than this would not move
before the wait for threads outside the run gives up: it counts as idle at once
(``_natives``)."""
_OUTSIDE_ENDS = frozenset({"lock", "condition", "io", "flock", "loop"})
"""The kinds of wait a thread outside the run can end (a release, a notify, a write)."""
_LOCK_STALL_SECONDS = 2.0
"""How long a thread may wait for a lock taken outside the code under test before that
counts as stuck: only a thread outside the run could still release it. Not raised with the
stall timeout (such a wait never ends by itself), but never later than it
(``Controller.check_after``)."""
_TRACE_LIMIT = 400
_UNWIND_SECONDS = 5.0
_REAL_TIMEOUT_SECONDS = 1.0
"""The longest timeout a C lock's acquire that timed out in virtual time waits for real."""


class ControlledThread:
    """One controlled thread: its place in the schedule and what it waits for."""

    __slots__ = (
        "aborted",
        "actor",
        "blocks",
        "busy",
        "checked",
        "ctl",
        "daemon",
        "deadline",
        "ident",
        "last_point",
        "name",
        "note",
        "park",
        "pending",
        "pending_at",
        "predicate",
        "probe",
        "ran",
        "resumed",
        "segment",
        "since",
        "span",
        "started",
        "status",
        "switchable",
        "thread",
        "timed_out",
        "uncertain",
        "waiting",
    )

    def __init__(
        self,
        ctl: Controller,
        actor: int,
        name: str,
        thread: threading.Thread | None,
        daemon: bool,
    ) -> None:
        self.ctl = ctl
        self.actor = actor
        self.name = name
        self.thread = thread
        self.daemon = daemon
        self.park = _allocate_lock()
        self.park.acquire()
        self.pending: types.FrameType | None = None
        self.pending_at = 0
        self.status = RUNNABLE
        self.predicate: Callable[[], bool] | None = None
        self.waiting: tuple[str, Any] | None = None
        self.deadline: int | None = None
        self.timed_out = False
        self.uncertain = False
        self.aborted = False
        self.ident: int | None = None
        self.since = 0
        self.ran = 0
        """The steps it ran before it last got the baton (``Controller.where``)."""
        self.started = 0
        """The step at which it last got the baton."""
        self.blocks = 0
        """The steps it blocked or ended at (``Controller._schedule``): how many depends on
        the other threads, so ``Controller.where`` does not count them as its points."""
        self.resumed = ""
        self.segment = 1
        self.note = ""
        self.span: list[list[Any]] = []
        """Recorded runs only: where in the code under test the current segment took points
        (``Controller.attend``), for the report: ``[file, lowest line, highest line]`` for
        each run of points in one file."""
        self.busy = False
        # Recorded runs only (``Controller.gil_point``): whether, with the GIL, CPython could
        # hand the GIL to another thread at this thread's current point.
        self.checked = True
        """The thread called something or entered a function since its last point."""
        self.last_point: tuple[types.FrameType, int] | None = None
        self.switchable = True
        self.probe: Callable[[types.FrameType, str, Any], None] | None = None
        """The profile function that sets ``checked``, while it is this thread's."""


baton: ControlledThread | None = None
"""The controlled thread that holds the baton in the run under way (``Controller.current``).

The schedule-point hooks find their thread here rather than in ``thread_local`` (an attribute of a
``threading.local`` costs more than the rest of a point). Only the baton holder runs code
under test, unless threads the exploration does not control do: see ``line_hooks``.
"""


POINTS_PER_MICROSECOND = 100
"""Busy work in a thread: a point (about a line) takes 10 ns of virtual time, as a line of
simple Python does on the fastest machine (a desktop runs one in 15-75 ns), never more. At a
microsecond a point, a job that counted to 200,000 in a thread timed out inside a 0.2 s
``asyncio.timeout`` it ends well within on a stock interpreter (in 0.03 s)."""


def _slice_microseconds(settings: Settings) -> int:
    """What a time slice of points moves the clock by, in whole microseconds (at least 1)."""
    return max(1, settings.time_slice // POINTS_PER_MICROSECOND)


class Controller:
    """The scheduler of one run: who holds the baton, the virtual clock, the decisions."""

    kind = READY
    """The kind its decisions are recorded with (``THREAD`` where tasks share the run)."""
    target: str | None = None
    """The plain function a threads exploration runs in ``threads[0]`` (None in a mixed run)."""
    stock_loop_tasks = False
    """A stock event loop in a controlled thread ran two tasks or more at once: the orders of
    their steps were not explored (a stock loop runs them in its own FIFO order)."""
    opaque = False
    """A thread of the run ran a step outside the schedule (a process pool's job, ``_pools``)."""

    def __init__(
        self,
        chooser: Chooser,
        settings: Settings,
        record: bool,
        *,
        stall_timeout: float = STALL_SECONDS,
    ) -> None:
        self.chooser = chooser
        self.settings = settings
        self.stall_timeout = stall_timeout
        """Real seconds a thread may run without a schedule point before it is reported stuck."""
        self.check_after = min(
            _LOCK_STALL_SECONDS, max(stall_timeout - _POLL_SECONDS, _POLL_SECONDS)
        )
        """Real seconds without a step after which the waiting threads check the running one
        (``_check_stalled``) at each poll: the lock check's delay, or a poll before the stall
        timeout if that comes first, so that a wait for a lock is still seen twice (and named
        as such) by the time the timeout is reached."""
        self.step = 0
        self.slice_end = settings.time_slice
        self.attention = 0
        self.quiet_until = 0
        """A step before which the chooser would take the running thread at every point it
        were asked at (``_consult``); 0 when that is not known."""
        self.ranked: set[int] = set()
        """The actors the chooser's ``rank`` has ranked (so ranking them draws nothing)."""
        self.step_cap = settings.max_steps + 1
        self.overtime_note: str | None = None
        """Once the step budget ran out with a timed wait pending: why that may be no hang
        (``overtime``); a failure after it is reported as that hang."""
        self.overtime_from = 0
        """The virtual time (microseconds) when the step budget ran out."""
        self.threads: list[ControlledThread] = []
        self._current: ControlledThread | None = None
        self.now = 0
        self.decisions: list[Decision] = []
        self.anchors: list[tuple[int, int]] = []
        """For each of ``decisions``: ``where`` it was made."""
        self.cut: tuple[tuple[int, int], ...] = ()
        """Where the failure found the threads (``_cut``), once one is seen."""
        self.raised: list[tuple[BaseException, tuple[tuple[int, int], ...]]] = []
        """Each exception an executor job of the run raised, with where it found the threads
        (``_cut``): a failure that re-raises it elsewhere (``future.result()``, an ``await``
        of ``to_thread``) is cut where it was raised (``cut_for``)."""
        self.blocking = False
        """Set while ``_schedule`` chooses: the thread holding the baton blocks or ends."""
        self.failure: tuple[str, BaseException | None, str] | None = None
        self.failed_in: ControlledThread | None = None
        """The thread that held the baton when the failure was seen (unwinding the others
        moves ``current`` on)."""
        self.passthrough: BaseException | None = None
        self.aborting = False
        self.done = _allocate_lock()
        self.done.acquire()
        self._stall_lock = _allocate_lock()
        self.outside_at = _positions()
        """Where every thread that exists as the run starts stands (none of them is the run's):
        one that has not moved since has done nothing the run waits for."""
        _kernel.refresh()  # before anything of the run runs (``_woken_from_outside``)
        self.native = _thread.get_native_id()
        """The kernel id of the run's first thread, which makes the controller."""
        self.stuck: ControlledThread | None = None
        """The thread reported stuck outside the schedule (it is unwound last)."""
        self.lock_sample: tuple[types.FrameType, int, float | None] | None = None
        """Where the last stall check saw the running thread take a held lock outside the code
        under test: its frame, instruction and CPU time (``_check_stalled``)."""
        self.record = record
        self.free_threaded: list[int] = []
        """In a recorded run: the steps of preemptions where, with the GIL, CPython would not
        switch threads (``gil_point``); only a free-threaded build does."""
        self.gil_points: list[int] = []
        """In a recorded run: the steps of the points where a GIL build can switch threads."""
        self.uninstrumented: set[str] = set()
        """The installed modules (``_instrument.uninstrumented_module``) whose code a thread
        of the run ran without schedule points while the run had two threads or more. Each
        code object is noted by the first run of the session that runs it so: later runs
        do not note it again (it is the exploration's answer that counts)."""
        self.records: collections.deque[StepRecord] = collections.deque(maxlen=_TRACE_LIMIT)
        self.owners: dict[int, ControlledThread] = {}
        self.held: dict[int, Any] = {}
        """The locks of ``owners``, by id: a thread unwound holding one releases it at the
        run's end (``release_unwound``)."""
        self.permits: dict[int, dict[ControlledThread, int]] = {}
        """Per semaphore (by id): the permits each thread took in code under test and has not
        given back. A thread unwound with some gives them back at the run's end."""
        self.semaphores: dict[int, tuple[threading.Semaphore, int]] = {}
        """The semaphores the run's threads used, by id, with their value before the first
        use: the permits given back never raise a semaphore above it."""
        self.error: BaseException | None = None
        self.excepthook = threading.excepthook
        """The ``threading.excepthook`` in place when the run began (the default, or pytest's):
        an exception a thread raises while it is still in place is a failure."""
        self._refresh()

    # -- bookkeeping -------------------------------------------------------------------------

    @property
    def current(self) -> ControlledThread | None:
        """The thread that holds the baton (runs code under test now)."""
        return self._current

    @current.setter
    def current(self, t: ControlledThread | None) -> None:
        global baton
        old = self._current
        if old is not None:
            old.ran += self.step - old.started
        if t is not None:
            t.started = self.step
        self._current = baton = t
        if self.quiet_until:
            self.quiet_until = 0  # it was known for the thread that held the baton
            self._refresh()

    def add(self, name: str, thread: threading.Thread | None, daemon: bool) -> ControlledThread:
        # Threads that share a name (anyio names every worker 'AnyIO worker thread') are
        # told apart in reports by their order: 'worker', 'worker #2', ...
        same = sum(1 for u in self.threads if u.name == name or u.name.startswith(name + " #"))
        if same:
            name = f"{name} #{same + 1}"
        t = ControlledThread(self, len(self.threads), name, thread, daemon)
        t.since = self.step
        self.threads.append(t)
        if self.quiet_until:
            self.quiet_until = 0  # a thread the chooser has not ranked
            self._refresh()
        return t

    def _refresh(self) -> None:
        if self.aborting or self.record:
            self.attention = 0  # a recorded run looks at every point (``gil_point``)
            return
        consult = max(self.chooser.consult_at, self.quiet_until)
        self.attention = min(consult, self.slice_end, self.step_cap)

    def _can_run(self, t: ControlledThread) -> bool:
        if t.status == RUNNABLE:
            return True
        if t.status != BLOCKED:
            return False
        if t.timed_out:
            return True
        predicate = t.predicate
        return predicate is not None and predicate()

    def _order(self, t: ControlledThread) -> list[ControlledThread]:
        """Every other thread, round-robin after ``t`` (the order options are offered in)."""
        threads = self.threads
        index = t.actor
        return threads[index + 1 :] + threads[:index]

    def _earliest_deadline(self) -> int | None:
        deadlines = [
            u.deadline
            for u in self.threads
            if u.status == BLOCKED and u.deadline is not None and not u.timed_out
        ]
        return min(deadlines) if deadlines else None

    def _tick(self, microseconds: int) -> None:
        """Let ``microseconds`` of virtual time pass; waits whose timeout passed may run."""
        self.now += microseconds
        if self.now > self.settings.max_time_us:
            raise _OverBudget(f"the virtual-time budget ({self.settings.max_time_us / 1e6:g} s)")
        for u in self.threads:
            if u.status == BLOCKED and u.deadline is not None and u.deadline <= self.now:
                u.timed_out = True

    def _advance_clock(self) -> bool:
        """Jump to the earliest timeout and wake whoever it belongs to; False if none."""
        deadline = self._earliest_deadline()
        if deadline is None:
            return False
        if deadline > self.settings.max_time_us:
            self.now = self.settings.max_time_us
            raise _OverBudget(f"the virtual-time budget ({self.settings.max_time_us / 1e6:g} s)")
        self.now = max(self.now, deadline)
        for u in self.threads:
            if u.status == BLOCKED and u.deadline is not None and u.deadline <= self.now:
                u.timed_out = True
        return True

    # -- where a thread is, for reports -----------------------------------------------------

    def location(self, t: ControlledThread) -> str:
        if t.ident is None:
            return ""
        return _where(sys._current_frames().get(t.ident))

    def _note_switch(self, t: ControlledThread, u: ControlledThread, why: str) -> None:
        """Record the segment ``t`` ran (it stops here) for the report; ``u`` starts one."""
        if not self.record:
            return
        if not why and t.waiting is not None:
            why = f"(waits: {_describe_wait(t.waiting)})"  # slow (gc): only when recording
        self.close_segment(t, f"{_here()} {why}".strip())
        decisions = self.decisions
        u.note = ""
        if self.free_threaded and self.free_threaded[-1] == self.step:
            u.note = (
                f"preempts {t.name} (thread preemption, free-threaded builds only: with the "
                f"GIL, {t.name} made no call, started no function and took no loop back-edge "
                "since its previous point, and CPython switches threads only there)"
            )
        elif decisions and decisions[-1].step == self.step and t.status == RUNNABLE:
            u.note = f"preempts {t.name} (thread preemption)"
        elif decisions and decisions[-1].step == self.step:
            u.note = "runs before the other threads that could (thread scheduling)"
        u.segment = self.step + 1
        u.resumed = self.location(u) if u.ident is not None else ""

    def close_segment(self, t: ControlledThread, suspended: str) -> None:
        action = "resumed" if t.resumed else "ran"
        if not t.resumed and t.span:
            # Where it ran: a thread that started, or resumed outside the code under test
            # (a pool's worker taking a job), and may stop outside it too.
            action += " " + _span(t.span)
        t.span = []
        self.records.append(StepRecord(t.segment, t.name, action, t.resumed, suspended, t.note))

    # -- the hot path --------------------------------------------------------------------------

    def on_line(self, code: types.CodeType, line: int) -> Any:
        """The LINE hook of 3.12+ (the most frequent schedule point) in a run where only the
        baton holder runs code under test (``line_hooks``): it only counts."""
        self.step += 1
        if self.step >= self.attention:
            t = self._current
            if t is not None:
                self.attend(t)

    def attend(self, t: ControlledThread) -> None:
        """A schedule point in the running thread ``t`` needs a look (consult, slice, budget)."""
        if t.busy:
            return  # a point inside the scheduler itself (user code it called): not a point
        if t.ident != _get_ident():
            return  # another thread ran code under test (see line_hooks): never act as t
        if self.record:
            self.gil_point(t)
            frame = _instrument.user_frame(_getframe(1))
            if frame is not None:
                _extend_span(t.span, frame.f_code.co_filename, frame.f_lineno)
        step = self.step
        consult = self.chooser.consult_at <= step < self.slice_end and step < self.step_cap
        if consult and not self.aborting:
            self._consult(t, step)
            return
        t.busy = True
        try:
            self._attend(t)
        finally:
            t.busy = False

    def gil_point(self, t: ControlledThread) -> None:
        """A point of the running thread ``t`` in a recorded run: note whether a GIL build
        could switch threads here (``t.switchable``).

        CPython with the GIL hands it over only where the running thread checks for a
        request: at a call, a function's start (or a generator's resumption), a loop's
        back-edge. So it can switch here only if ``t`` passed such a check since its previous
        point: a profile event (``probe_on``: any call, Python or C, made since), another
        frame, an offset that went back (a loop), or an instruction between the two points
        that is not known to run without a check (``_gil_checks``). When in doubt: it can.
        """
        if t.probe is None or sys.getprofile() is not t.probe:
            t.switchable = True  # nothing tells whether it called something: assume it did
            return
        frame = _instrument.user_frame(_getframe(2))
        here = None if frame is None else (frame, frame.f_lasti)
        last, t.last_point = t.last_point, here
        t.switchable = (
            t.checked
            or here is None
            or last is None
            or last[0] is not here[0]
            or here[1] <= last[1]
            or _gil_checks(here[0].f_code, last[1], here[1])
        )
        if t.switchable:
            self.gil_points.append(self.step)
        t.checked = False

    def _consult(self, t: ControlledThread, step: int) -> None:
        """``_attend`` where only the chooser is due (an exploring schedule's usual point),
        written out: the options, the choice (taken by ranking where the chooser allows,
        see ``Chooser.rank``), the switch."""
        try:
            others = [
                u
                for u in self._order(t)
                if u.status == RUNNABLE or (u.status == BLOCKED and self._can_run(u))
            ]
            if not others:
                return  # nothing to choose between; the chooser is asked at the next point
            options = [t, *others]
            # No "advance the clock" option: computing takes no virtual time, so a timeout
            # elsewhere never fires in the middle of a thread's work (no false alarms from
            # timing no real machine shows); the clock moves when every thread waits.
            chooser = self.chooser
            rank = chooser.rank
            if rank is not None and step < chooser.ranked_until:
                choice = 0
                top = rank(t.actor)
                for index in range(1, len(options)):
                    value = rank(options[index].actor)
                    if value > top:
                        choice, top = index, value
                self.ranked.update(u.actor for u in options)
                if not choice:
                    self._quiet(t, top, chooser.ranked_until)
            elif chooser.counts_only:
                choice = chooser.choose_count(step, len(options), False)
            else:
                choice = chooser.choose(step, [u.actor for u in options], False)
            if not 0 <= choice < len(options):
                choice = 0
            if choice:
                self.decisions.append(Decision(step, self.kind, choice, options[choice].actor))
                self.anchors.append(self.where())
                if self.record and not t.switchable:
                    self.free_threaded.append(step)
                t.busy = True
                try:
                    self._switch(t, options[choice], "(preempted)")
                finally:
                    t.busy = False
        finally:
            self._refresh()

    def _quiet(self, t: ControlledThread, top: float, until: int) -> None:
        """``t`` ranks above every other thread alive (blocked ones too, all ranked): until
        the chooser's next change, or a thread starts, it takes ``t`` at every point."""
        rank = self.chooser.rank
        assert rank is not None
        ranked = self.ranked
        for u in self.threads:
            if u is not t and u.status != DONE and (u.actor not in ranked or rank(u.actor) > top):
                return
        self.quiet_until = until

    def _attend(self, t: ControlledThread) -> None:
        if self.aborting:
            self._abort_point(t)
            return
        step = self.step
        if step >= self.step_cap and not self.overtime():
            self._fail_from(
                t,
                "hang",
                None,
                self._hang_detail(f"the step budget ({self.settings.max_steps} steps)"),
            )
            return
        try:
            if step >= self.slice_end:
                # A time slice of points takes time (``POINTS_PER_MICROSECOND``): the clock
                # moves, so a spin-wait on a sleeping thread ends, and a timeout never fires
                # sooner than it would on the fastest machine because a thread computed.
                self.slice_end = step + self.settings.time_slice
                if self.overtime_note is None or not self._advance_clock():
                    self._tick(_slice_microseconds(self.settings))
                others = [u for u in self._order(t) if self._can_run(u)]
                if others:
                    target = min(others, key=lambda u: u.since)
                    self._switch(t, target, "(time slice)")
                return
            if step >= self.chooser.consult_at:
                self._consult(t, step)  # (attend takes this path itself)
        except _OverBudget as exc:
            self._fail_from(t, "hang", None, self._hang_detail(str(exc)))
        finally:
            self._refresh()

    def _choose(self, options: list[ControlledThread]) -> int:
        """Ask the chooser which of ``options`` (stock first) runs now; record a deviation."""
        step = self.step
        chooser = self.chooser
        choice = chooser.choose(step, [u.actor for u in options], False)
        if chooser.rank is not None:
            self.ranked.update(u.actor for u in options)
        if not 0 <= choice < len(options):
            choice = 0
        if choice:
            self.decisions.append(Decision(step, self.kind, choice, options[choice].actor))
            self.anchors.append(self.where())
        return choice

    def _cut(self) -> tuple[tuple[int, int], ...]:
        """Where the failure found the threads that had not ended: each one's actor and its
        position (as ``where`` counts), in the order they last gave the baton away, the one
        holding it last (``RunResult.cut``)."""
        holder = self._current
        alive = sorted(
            (u for u in self.threads if u.status != DONE and u is not holder),
            key=lambda u: u.since,
        )
        if holder is not None:
            alive.append(holder)
        return tuple(
            (
                u.actor,
                2 * (u.ran + (self.step - u.started if u is holder else 0) - u.blocks)
                + (1 if u.status == BLOCKED else 0),
            )
            for u in alive
        )

    def where(self) -> tuple[int, int]:
        """The thread that holds the baton and where it is in its own run, whatever the other
        threads did before (``Chooser.where``): twice the points it has passed (this one
        included), plus one while it blocks or ends there.

        Its blocks are not counted as points: whether a lock is free when a thread gets to it
        depends on the other threads, while its points do not.
        """
        t = self._current
        assert t is not None
        points = t.ran + self.step - t.started - t.blocks
        return t.actor, 2 * points + (1 if self.blocking else 0)

    def _switch(self, t: ControlledThread, u: ControlledThread, why: str) -> None:
        """Hand the baton from the running ``t`` (which stays as it is) to ``u``; wait."""
        self._note_switch(t, u, why)
        t.since = self.step
        if u.status == BLOCKED:
            u.status = RUNNABLE
        self.current = u
        self.slice_end = self.step + self.settings.time_slice
        u.park.release()
        self._park(t)

    def _park(self, t: ControlledThread) -> None:
        """Wait for the baton; once the run is over, unwind (raise ``Abort``) when woken."""
        if t.aborted:
            raise Abort
        self.wait_baton(t)
        if self.aborting:
            t.aborted = True
            raise Abort

    def wait_baton(self, t: ControlledThread) -> None:
        """Wait until ``t`` is given the baton, or must unwind without it (a stall), watching
        the thread that holds it meanwhile."""
        waited = 0.0
        last = self.step
        while not t.park.acquire(timeout=_POLL_SECONDS):
            if t.actor == 0:
                _interrupt.check()
            waited = waited + _POLL_SECONDS if self.step == last else 0.0
            last = self.step
            # The main thread watches the others; while it holds the baton itself, the
            # others that wait watch it (the first to see the stall reports it).
            current = self.current
            watching = t.actor == 0 or (current is not None and current.actor == 0)
            if (
                waited >= self.check_after
                and watching
                and not self.aborting
                and self._check_stalled(t, waited)
            ):
                return

    def _check_stalled(self, t: ControlledThread, waited: float) -> bool:
        """The running thread made no step for ``waited`` s: report it if it is stuck.

        True when ``t``, a thread other than the main one, must now unwind (without the
        baton): the main thread is the one stuck, and it waits for a lock that a parked
        thread holds, maybe ``t``. Unwinding the parked threads releases it; the main
        thread then ends the run as after any failure.
        """
        from interlace.harness import _pools

        current = self.current
        if current is None or current.ident is None:
            return False
        frame = sys._current_frames().get(current.ident)
        if _pools.waits_for_job(frame):
            return False  # a process pool's job: its wait has a time limit of its own
        lock_wait = _outside_lock_wait(frame)
        if lock_wait is not None:
            # A thread that loops in library code without a schedule point passes through
            # acquires of locks that are held (by itself, a moment before): it waits only if
            # seen at the same instruction of the same call twice, a poll apart, without
            # using the CPU meanwhile (where the platform tells).
            at = lock_wait[1]
            sample = (at, at.f_lasti, _cpu_seconds(current.ident))
            seen, self.lock_sample = self.lock_sample, sample
            if (
                seen is None
                or seen[:2] != sample[:2]
                or (seen[2] is not None and sample[2] is not None and sample[2] - seen[2] > 0.01)
            ):
                lock_wait = None
                if waited < self.stall_timeout:
                    return False
        elif waited < self.stall_timeout:
            return False
        with self._stall_lock:
            if self.aborting:
                return False
            self.stuck = current
            self.error = UnsupportedOperationError(
                _stall_message(self, current, frame, lock_wait, waited)
            )
            self._abort()
        if t.actor == 0:
            return False
        for u in self.threads[1:]:
            if u is not t and u.status != DONE and u.park.locked():
                self.current = u
                u.park.release()
                if u.thread is not None:
                    _orig_join(u.thread, _UNWIND_SECONDS)
        if lock_wait is None and current.ident == threading.main_thread().ident:
            # A wait for something real (a socket's accept, a pipe's read) that no thread of
            # the run can end now: interrupt it, and the main thread unwinds (once: its
            # clean-up then runs, as after any abort).
            current.aborted = True
            _interrupt.send_to_main(Abort())
        return True

    # -- blocking ---------------------------------------------------------------------------------

    def block(
        self,
        t: ControlledThread,
        predicate: Callable[[], bool] | None,
        waiting: tuple[str, Any],
        timeout: float | None = None,
        *,
        uncertain: bool = False,
    ) -> bool:
        """Park ``t`` until ``predicate()`` holds (True) or the virtual timeout passes (False)."""
        if self.aborting:
            if predicate is not None and predicate():
                return True
            self._abort_point(t)
            raise Abort
        if _called_from_user_code():
            self.step += 1
            self._point_before_block(t)
        if predicate is not None and predicate():
            return True
        # A wait that times out takes some time, at least a microsecond, as a real one returns
        # after its deadline and never at it. Library code that waits for what is left of a
        # timeout until that is below 0 (``concurrent.futures.as_completed``) has no schedule
        # point whose time slice could move the clock: without this it would find exactly 0
        # (or 1e-13 s) left, and wait again, for good.
        if timeout is not None and timeout <= 0:
            try:
                self._tick(1)
            except _OverBudget as exc:
                self._fail_from(t, "hang", None, self._hang_detail(str(exc)))
            return False
        # A microsecond past the deadline, never at it (as above): a thread that measures
        # its wait (``time.monotonic() - start >= timeout``) sees at least the timeout, as
        # on a stock interpreter, and not 0.29999999999995453 s for 0.3; nor does a wait for
        # what float arithmetic left of a timeout (``queue.Queue.get``) fall short of it.
        deadline = None if timeout is None else self.now + math.ceil(timeout * 1e6) + 1
        t.status = BLOCKED
        t.predicate = predicate
        t.waiting = waiting
        t.deadline = deadline
        t.timed_out = False
        t.uncertain = uncertain
        try:
            self._schedule(t, "")  # the report describes t.waiting, only when recording
        finally:
            t.status = RUNNABLE if t.status != DONE else t.status
            t.predicate = None
            t.waiting = None
            t.deadline = None
            t.uncertain = False
        timed_out = t.timed_out
        t.timed_out = False
        if timed_out and predicate is not None and predicate():
            return True
        return not timed_out

    def _point_before_block(self, t: ControlledThread) -> None:
        if self.step >= self.attention:
            self.attend(t)

    def _schedule(self, t: ControlledThread, why: str) -> None:
        """``t`` blocked or ended: run another thread (or the clock); ``t`` waits if blocked."""
        self.step += 1
        t.blocks += 1
        self.blocking = True
        try:
            while True:
                candidates = [u for u in (*self._order(t), t) if self._can_run(u)]
                if candidates:
                    break
                # Once the program ended, daemon threads that wait or sleep are dropped (at
                # interpreter exit): their timeouts never fire, so the clock stays.
                only_daemons = self._only_daemons_wait()
                if not only_daemons and self._woken_from_outside():
                    continue
                if only_daemons or not self._advance_clock():
                    self._nothing_can_run(t)
                    return
            choice = 0
            if len(candidates) > 1 and self.step >= self.chooser.consult_at:
                choice = self._choose(candidates)
        except _OverBudget as exc:
            self._fail_from(t, "hang", None, self._hang_detail(str(exc)))
            return
        finally:
            self.blocking = False
            self._refresh()
        u = candidates[choice]
        if u is t:
            return
        if t.status == DONE:
            self._note_switch(t, u, why)
            if u.status == BLOCKED:
                u.status = RUNNABLE
            self.current = u
            self.slice_end = self.step + self.settings.time_slice
            self._refresh()
            u.park.release()
            return
        self._switch(t, u, why)
        self._refresh()

    def _woken_from_outside(self) -> bool:
        """Every thread of the run waits: True if a thread outside the run woke one.

        A thread that existed before the run (the worker of an executor made at import, a
        test server) may be what a thread of the run waits for: a future's result, an event.
        It runs freely, so the wait ends in real time: give it up to ``_OUTSIDE_SECONDS``
        before the virtual clock moves on or a deadlock is reported. Only waits that such a
        thread can end count (not sleeps, nor joins of the run's own threads), and only while
        one may be working for the run (``_engaged_outside``): beside idle threads (a test
        runner's, a timer's) the wait ends after ``_OUTSIDE_IDLE_SECONDS``, and at once when
        the kernel shows that none of them can end it by then (``_natives``).
        """
        if not any(
            u.status == BLOCKED and u.waiting is not None and u.waiting[0] in _OUTSIDE_ENDS
            for u in self.threads
        ):
            return False
        if not self._outside_threads():
            return False
        ours = self._natives()
        if _kernel.idle_since(ours, quiet_for=_OUTSIDE_QUIET_SECONDS):
            return any(self._can_run(u) for u in self.threads)
        start = real_monotonic()
        end = start + _OUTSIDE_SECONDS
        # A thread that its timeout wakes within the wait (a poller between looks, which
        # nothing notifies) is given one look: as long after its next deadline as any
        # thread gets to move.
        looks = _kernel.wakes(ours, end)
        while (now := real_monotonic()) < end:
            _real_sleep(_OUTSIDE_POLL)
            if any(self._can_run(u) for u in self.threads):
                return True
            # A thread the run just woke (a worker handed a job) needs a moment to move.
            idle_from = max([start, *looks.values()])
            if now >= idle_from + _OUTSIDE_IDLE_SECONDS and not self._engaged_outside():
                for native, due in _kernel.wakes(ours, end).items():
                    looks.setdefault(native, due)  # one that was awake: its next look
                if now >= max([start, *looks.values()]) + _OUTSIDE_IDLE_SECONDS:
                    return False
        return False

    def _only_daemons_wait(self) -> bool:
        """The target returned and every thread left is a daemon (none can run now)."""
        if self.threads[0].status != DONE:
            return False
        return all(u.daemon for u in self.threads if u.status != DONE)

    def _nothing_can_run(self, t: ControlledThread) -> None:
        alive = [u for u in self.threads if u.status != DONE]
        main = self.threads[0]
        if not alive:
            self._finish_run()
            return
        if main.status == DONE and all(u.daemon for u in alive):
            self._finish_run()  # daemon threads waiting forever when the program ends: fine
            if t.status != DONE:
                self._park(t)
            return
        if any(u.uncertain for u in alive):
            self.error = UnsupportedOperationError(
                "every thread waits, but one waits in a lock acquire whose arguments "
                "interlace could not read (a timeout may end it): "
                + "; ".join(f"{u.name} at {self.location(u)}" for u in alive if u.uncertain)
                + ". Pass blocking/timeout as constants or local variables"
            )
            self._abort()
            if t.status != DONE:
                self._park(t)
            return
        self._fail_from(t, "deadlock", None, self._deadlock_detail())

    # -- ends of runs ------------------------------------------------------------------------------

    def _finish_run(self) -> None:
        """Every thread ended (or only daemon threads wait): wake the coordinator."""
        self.aborting = True
        self._refresh()
        self._wake_coordinator()

    def _wake_coordinator(self) -> None:
        main = self.threads[0]
        if main.status != DONE:
            if main.park.locked() and self.current is not main:
                self.current = main
                main.park.release()
        elif self.done.locked():
            self.done.release()

    def _abort(self) -> None:
        self.aborting = True
        self._refresh()
        self._wake_coordinator()

    def fail(self, kind: str, exc: BaseException | None, detail: str) -> None:
        if self.failure is None and self.error is None:
            self.failure = (kind, exc, detail)
            self.failed_in = self.current
            self.cut = self.cut_for(exc)
        self._abort()

    def cut_for(self, exc: BaseException | None) -> tuple[tuple[int, int], ...]:
        """Where the failure ``exc`` found the threads: where an executor job raised it, if
        one did (``raised``), else where they stand now (``_cut``)."""
        for raised, cut in self.raised:
            if raised is exc:
                return cut
        return self._cut()

    def _fail_from(
        self, t: ControlledThread, kind: str, exc: BaseException | None, detail: str
    ) -> None:
        """A failure seen in the running thread ``t``: stop the run; ``t`` unwinds."""
        self.fail(kind, exc, detail)
        if t.status == DONE:
            return
        if t.actor != 0:
            self._park(t)
        t.aborted = True
        raise Abort

    def _abort_point(self, t: ControlledThread) -> None:
        if not t.aborted:
            t.aborted = True
            raise Abort

    def thread_ended(self, t: ControlledThread, exc: BaseException | None) -> None:
        """``t``'s target returned (exc None) or raised: mark it done and pass the baton."""
        if exc is not None and not self.aborting:
            self.fail(
                "exception",
                exc,
                f"The exception escaped thread {t.name!r} (threading.excepthook would print it "
                "and the thread would die).",
            )
        t.status = DONE
        if self.aborting:
            return
        self._schedule(t, "(finished)" if exc is None else f"(raised {type(exc).__name__})")

    # -- reports ----------------------------------------------------------------------------------

    def _deadlock_detail(self) -> str:
        if not self.record:
            return "deadlock"  # naming objects is slow (gc); the recorded run says it all
        lines = ["No thread can run and no timeout is pending. Waiting:"]
        for u in self.threads:
            if u.status == DONE:
                continue
            where = self.location(u)
            # No frame of the code under test: a pool's idle worker, most often.
            text = f"  {u.name} at {where}" if where else f"  {u.name} (in library code)"
            task_lines: list[str] = []
            if u.waiting is not None:
                text += f" waits for {_describe_wait(u.waiting)}"
                holder = self._holder(u.waiting)
                if holder is not None and u.waiting[0] == "lock":
                    text += f", held by {holder.name}"
                if u.waiting[0] == "loop":  # an event loop's thread: its tasks, a line each
                    task_lines = u.waiting[1].task_lines("      ")
                    text += "; its tasks:" if task_lines else ""
            lines.append(text)
            lines.extend(task_lines)
        cycle = self._cycle()
        if cycle:
            lines.append("Wait-for cycle: " + " -> ".join(u.name for u in cycle))
        outside = self._outside_threads()
        if outside:
            lines.append(
                f"Threads outside the exploration were alive ({', '.join(outside)}); none "
                "of them woke a waiting thread (interlace waits for that up to "
                f"{_OUTSIDE_SECONDS:g} s of real time, while one of them is working)."
            )
        return "\n".join(lines)

    def _engaged_outside(self) -> bool:
        """Whether a thread outside the run may be working for it: one started since the run
        began, or one that has moved since (an executor's worker running a job the run
        submitted). A thread idle where it stood (a test runner's, a pool's idle worker)
        cannot be about to wake a thread of the run."""
        ours = {u.ident for u in self.threads}
        frames = sys._current_frames()
        for other in threading.enumerate():
            if other.ident in ours or not _orig_is_alive(other) or _never_wakes_run(other):
                continue
            frame = frames.get(other.ident) if other.ident is not None else None
            was = self.outside_at.get(other.ident) if other.ident is not None else None
            if frame is None or was is None or was[0] is not frame or was[1] != frame.f_lasti:
                return True
        return False

    def _natives(self) -> set[int]:
        """The kernel ids of the threads ``_kernel`` leaves out: the run's own (by their
        objects: a thread's ident may be reused by a new one) and those that cannot end a wait
        of the run (``_never_wakes_run``: pytest-timeout's timer, a process pool's idle
        threads).

        For the others, the kernel may show that none can end a wait of the run before the
        wait for them would give up: each has not run since before the run began, so nothing
        the run did woke it, and sleeps in a wait that only another thread ends, or that its
        own timeout ends further off than ``_OUTSIDE_QUIET_SECONDS`` (a heartbeat, a batch
        exporter): the wait for threads outside the run would give up before it moved, with
        the same outcome."""
        left_out = [u.thread for u in self.threads[1:] if u.thread is not None]
        left_out.extend(other for other in threading.enumerate() if _never_wakes_run(other))
        natives = {self.native}
        natives.update(thread.native_id for thread in left_out if thread.native_id is not None)
        return natives

    def _outside_threads(self) -> list[str]:
        """The names of the live threads that are not this run's, but for a process pool's
        idle threads (``_pools.quiet``), which cannot end a wait of the run."""
        from interlace.harness import _pools

        ours = {u.ident for u in self.threads}
        return [
            other.name
            for other in threading.enumerate()
            if other.ident not in ours and _orig_is_alive(other) and not _pools.quiet(other)
        ]

    def _holder(self, waiting: tuple[str, Any]) -> ControlledThread | None:
        kind, obj = waiting
        if kind == "lock":
            owner = self.owners.get(id(obj))
            if owner is not None and owner.status != DONE and _is_locked(obj):
                return owner
        if kind == "join":
            target = obj
            return (
                target if isinstance(target, ControlledThread) and target.status != DONE else None
            )
        return None

    def _cycle(self) -> list[ControlledThread]:
        for start in self.threads:
            seen: list[ControlledThread] = []
            node: ControlledThread | None = start
            while node is not None and node not in seen:
                seen.append(node)
                node = self._holder(node.waiting) if node.waiting is not None else None
            if node is not None and node is start:
                return [*seen, start]
        return []

    def overtime(self) -> bool:
        """The step budget ran out: whether the run goes on, in *overtime*.

        Busy work moves the clock by 10 ns a point, so a correct spin-wait on a
        thread that sleeps past what the budget reaches (``while not done.is_set():
        time.sleep(0)`` while a worker sleeps 1 s), which a stock interpreter gets through in
        real time, runs out of steps first. With a timed wait pending, the run goes on for
        another budget of points with the clock moving on to the next deadline after every
        time slice, as if the busy work took that long, as an event loop's overtime does. A
        run that then ends well passes; one that still fails in any way is reported as a
        hang that says why it may be none (``overtime_detail``).
        """
        if self.overtime_note is not None or self._earliest_deadline() is None:
            return False
        self.overtime_note = self._budget_note()
        self.overtime_from = self.now
        self.step_cap = self.step + self.settings.max_steps + 1
        return True

    def _budget_note(self) -> str:
        deadline = self._earliest_deadline()
        assert deadline is not None
        sleeper = next(u for u in self.threads if u.status == BLOCKED and u.deadline == deadline)
        what = _describe_wait(sleeper.waiting) if sleeper.waiting is not None else "a timeout"
        remaining = max(0, deadline - self.now) * POINTS_PER_MICROSECOND
        return (
            f"Not necessarily a hang: thread {sleeper.name!r} waits with a timeout, until "
            f"virtual time {deadline / 1e6:g} s ({what}). Busy work moves the clock by "
            f"{1000 // POINTS_PER_MICROSECOND} ns a point, so this run reaches it after about "
            f"{remaining:,} more points; if the "
            "threads are busy-waiting for it, a stock interpreter gets there. Pass "
            f"max_steps={self.step + remaining + self.settings.time_slice} or more to let the "
            "run get there too."
        )

    def overtime_detail(self, kind: str, exc: BaseException | None) -> str:
        """The hang report of a run that failed in overtime, after the clock jumped to a
        deadline the busy work had not reached (see ``overtime``)."""
        how = f"raised {type(exc).__name__}: {exc}" if exc is not None else f"ended in a {kind}"
        return (
            f"Still running after the step budget ({self.settings.max_steps} steps) (virtual "
            f"time {self.overtime_from / 1e6:g} s).\n{self.overtime_note} Continued past the "
            f"budget with the clock moving on to each pending deadline, the run then {how}; "
            "whether a stock interpreter gets that far depends on how long the busy work "
            "really takes."
        )

    def _hang_detail(self, reason: str) -> str:
        if not self.record:
            return reason
        lines = [f"Still running after {reason} (virtual time {self.now / 1e6:g} s)."]
        if self.overtime_note is not None:
            lines.append(
                f"{self.overtime_note} Continued past the budget with the clock moving on to "
                "each pending deadline, the run was still going a budget of points later."
            )
        lines.append("Threads and the schedule points each passed:")
        for u in self.threads:
            state = {RUNNABLE: "running", BLOCKED: "waiting", DONE: "finished"}[u.status]
            where = self.location(u) if u.status != DONE else ""
            text = f"  {u.name}: {state}" + (f" at {where}" if where else "")
            if u.status == BLOCKED and u.waiting is not None:
                text += f" for {_describe_wait(u.waiting)}"
            lines.append(text)
        return "\n".join(lines)

    # -- primitives --------------------------------------------------------------------------------

    def lock_free_for(self, lock: Any, t: ControlledThread) -> bool:
        """Whether a C lock's acquire by ``t`` would not block (evaluated by any thread)."""
        if type(lock) is _LOCK:
            return not lock.locked()
        if lock._is_owned():
            return thread_local.thread is t
        if lock.acquire(False):
            lock.release()
            return True
        return False

    def acquire(
        self,
        t: ControlledThread,
        lock: Any,
        blocking: bool = True,
        timeout: float | None = None,
        *,
        uncertain: bool = False,
    ) -> None:
        """Called just before ``lock``'s real acquire: return once it will not block."""
        if not blocking:
            if _called_from_user_code():
                self.step += 1
                self._point_before_block(t)
            if self.lock_free_for(lock, t):
                self.own(lock, t)
            return
        got = self.block(
            t, lambda: self.lock_free_for(lock, t), ("lock", lock), timeout, uncertain=uncertain
        )
        if got:
            self.own(lock, t)
            return
        # The timeout passed in virtual time and the lock is still taken (by a parked thread,
        # which cannot release it meanwhile): the real acquire that follows fails, but a C
        # lock's acquire cannot be cut short, so it waits its timeout in real time. Short
        # timeouts are worth that; a long one would cost it in every such schedule.
        if timeout is not None and timeout > _REAL_TIMEOUT_SECONDS:
            self.error = UnsupportedOperationError(
                f"{t.name} at {self.location(t)}: an acquire of {_name(lock)} with a timeout "
                f"of {timeout:g} s timed out in virtual time, but the acquire of a C lock "
                "cannot be cut short: it would wait those seconds in real time in every "
                "schedule where it times out. Use a timeout of at most "
                f"{_REAL_TIMEOUT_SECONDS:g} s, or wait with a timeout on a threading "
                "Condition, Event or Semaphore, whose timeouts are virtual"
            )
            self._abort()
            raise Abort

    def own(self, lock: Any, t: ControlledThread) -> None:
        """``t`` takes ``lock`` (it is free for ``t``)."""
        self.owners[id(lock)] = t
        self.held[id(lock)] = lock

    def released(self, lock: Any) -> None:
        self.owners.pop(id(lock), None)
        self.held.pop(id(lock), None)

    def using(self, sem: threading.Semaphore) -> None:
        """A thread of the run is about to acquire or release ``sem``."""
        if id(sem) not in self.semaphores:
            self.semaphores[id(sem)] = (sem, sem._value)

    def took_permit(self, sem: threading.Semaphore, t: ControlledThread) -> None:
        """``t``'s code under test acquired ``sem``."""
        taken = self.permits.setdefault(id(sem), {})
        taken[t] = taken.get(t, 0) + 1

    def gave_permits(self, sem: threading.Semaphore, t: ControlledThread, n: int) -> None:
        """``t`` released ``sem`` ``n`` times: first the permits it took, then (a hand-off)
        those other threads took."""
        taken = self.permits.get(id(sem))
        if not taken:
            return
        for holder in sorted(taken, key=lambda u: u is not t):
            given = min(n, taken[holder])
            taken[holder] -= given
            n -= given
            if not taken[holder]:
                del taken[holder]
            if not n:
                break

    def release_unwound(self) -> None:
        """Release the locks that threads unwound by the harness still hold.

        A thread unwound inside ``lock.acquire(); ...; lock.release()`` (no ``try``/
        ``finally``) would leave a module-level lock taken: every later run, and the rest of
        the test session, would wait for it forever, where the program, never cut short,
        releases it. Only threads of the run that were unwound and have ended count, and an
        ``RLock`` only while that thread still owns it.
        """
        for key, t in list(self.owners.items()):
            lock: Any = self.held.get(key)
            if lock is None or not t.aborted or t.status != DONE or not _is_locked(lock):
                continue
            if type(lock) is _LOCK:
                lock.release()
            elif t.ident is not None and f" owner={t.ident} " in repr(lock):
                lock._release_save()  # an RLock whose owner ended: release() would refuse
            else:
                continue
            self.released(lock)
        # Likewise the permits of a semaphore that an unwound thread took and had not given
        # back, as far as the semaphore is now below its value when the run began. A permit
        # is not owned: the thread may have taken it as a signal (another thread's release),
        # to keep, so a semaphore the run leaves where it found it is left alone.
        for key, taken in self.permits.items():
            sem, before = self.semaphores[key]
            held = sum(count for t, count in taken.items() if t.aborted and t.status == DONE)
            missing = min(held, before - sem._value)
            if missing > 0:
                _orig_sem_release(sem, missing)
        self.permits.clear()

    def sleep(self, t: ControlledThread, seconds: float) -> None:
        if seconds > 0:
            self.block(t, None, ("sleep", seconds), seconds)
            return
        # sleep(0) gives the GIL away: stock order runs the longest-waiting other thread.
        if self.aborting:
            return
        self.step += 1
        try:
            others = [u for u in self._order(t) if self._can_run(u)]
            if not others:
                return
            options = [*sorted(others, key=lambda u: u.since), t]
            choice = self._choose(options) if self.step >= self.chooser.consult_at else 0
            if options[choice] is not t:
                self._switch(t, options[choice], "(time.sleep(0))")
        finally:
            self._refresh()


class _OverBudget(Exception):
    pass


def _called_from_user_code() -> bool:
    """Whether the primitive was used by code under test (not by a library's internals).

    Library code may hold C locks interlace cannot see (``concurrent.futures`` holds one
    while it starts a worker), so a thread in library code is never preempted there: it
    only waits in the scheduler when its operation really has to wait.
    """
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in _PRIMITIVE_FILES:
        frame = frame.f_back
    return frame is not None and _instrument.is_under_test(frame.f_code.co_filename)


def _is_locked(lock: Any) -> bool:
    if type(lock) is _LOCK:
        return bool(lock.locked())
    if lock._is_owned():
        return True
    if lock.acquire(False):
        lock.release()
        return False
    return True


_SPAN_FILES = 3
"""The runs of points in one file a step's span shows; more show the first, ``…``, the last."""


def _extend_span(span: list[list[Any]], file: str, line: int) -> None:
    if span and span[-1][0] == file:
        entry = span[-1]
        entry[1], entry[2] = min(entry[1], line), max(entry[2], line)
        return
    span.append([file, line, line])
    if len(span) > 2 * _SPAN_FILES:  # only the first and the last few are ever shown
        del span[1:-_SPAN_FILES]


def _span(span: list[list[Any]]) -> str:
    """``a.py:3``, ``a.py:3-7``, ``a.py:3-7, b.py:9``: where a step ran in the code under
    test, a file at a time, with its lowest and highest line."""
    shown: list[list[Any] | None] = list(span)
    if len(span) > _SPAN_FILES:
        shown = [span[0], None, span[-1]]
    parts = []
    for entry in shown:
        if entry is None:
            parts.append("…")
            continue
        file, low, high = entry
        parts.append(f"{_short(file)}:{low}" + (f"-{high}" if high != low else ""))
    return ", ".join(parts)


def _short(filename: str) -> str:
    from interlace.harness._introspect import short_path

    return short_path(filename)


def _here() -> str:
    return _where(sys._getframe(1))


def _where(frame: types.FrameType | None) -> str:
    """``file:line`` of the innermost frame of the code under test on ``frame``'s stack, or
    of an installed library inside it, with the program's line that called into that
    (``_introspect.describe_position``)."""
    from interlace.harness._introspect import describe_position, frame_position

    return describe_position(frame_position(frame))[0]


def _name(obj: Any) -> str:
    from interlace.harness._introspect import name_of

    return name_of(
        obj, lambda code: code is not None and _instrument.is_under_test(code.co_filename)
    )


_KINDS = {_LOCK: "Lock", _RLOCK: "RLock"}


def _describe_wait(waiting: tuple[str, Any]) -> str:
    kind, obj = waiting
    if kind == "lock":
        return f"{_KINDS.get(type(obj), 'lock')} {_name(obj)}"
    if kind == "condition":
        return f"a notify on Condition {_name(obj)}"
    if kind == "join":
        return f"thread {obj.name} to finish"
    if kind == "sleep":
        return f"time.sleep({obj:g})"
    if kind == "flock":
        return f"fcntl.flock on file descriptor {obj}"
    if kind == "io":
        return "a wake-up of its event loop (from another thread or a timer)"
    if kind == "simple queue":
        return f"an item in SimpleQueue {_name(obj)}"
    return str(obj)


# -- the patched world ---------------------------------------------------------------------------

_PRIMITIVE_FILES = frozenset(
    {threading.__file__, queue.__file__, __file__, _virtual_clock.__file__}
)
_orig_start = threading.Thread.start
_orig_join = threading.Thread.join
_orig_is_alive = threading.Thread.is_alive
_orig_cond_enter = threading.Condition.__enter__
_orig_sem_acquire = threading.Semaphore.acquire
_orig_sem_release = threading.Semaphore.release
_orig_bsem_release = threading.BoundedSemaphore.release
_orig_cond_exit = threading.Condition.__exit__
_orig_cond_wait = threading.Condition.wait


def _controlled() -> tuple[ControlledThread, Controller] | None:
    t = thread_local.thread
    if t is None:
        return None
    return t, t.ctl


def _start(self: threading.Thread) -> None:
    found = _controlled()
    if (
        found is None
        and thread_local.activate is not None
        and getattr(self, "_il_thread", None) is None
    ):
        thread_local.activate()
        found = _controlled()
    if found is None or getattr(self, "_il_thread", None) is not None:
        if baton is not None:
            line_hooks(None, foreign=True)  # an uncontrolled thread, started during a run
        _orig_start(self)
        return
    t, ctl = found
    if ctl.aborting:
        ctl._abort_point(t)
    _refuse_uncontrollable_worker(self, t, ctl)
    # A thread started by library code (an executor's worker) is cleaned up by the library
    # at interpreter exit, so waiting forever once the target returned is no hang.
    caller = sys._getframe(1)
    library = not _instrument.is_under_test(caller.f_code.co_filename)
    # From the moment the child is known to the controller until threading has started it,
    # code under test that runs here (a finalizer the garbage collector calls on any
    # allocation) is no schedule point: a switch to the child would hand the baton to a thread
    # that does not run yet, and the parent, which would start it, waits for the baton.
    was_busy, t.busy = t.busy, True
    try:
        _begin_child(self, t, ctl, library)
    finally:
        t.busy = was_busy
    if _called_from_user_code():
        ctl.step += 1
        if ctl.step >= ctl.attention:
            ctl.attend(t)


def _begin_child(
    self: threading.Thread, t: ControlledThread, ctl: Controller, library: bool
) -> None:
    """``_start``'s part that registers the child and starts its OS thread, parked until it
    first gets the baton (``t``, the parent, holds it throughout)."""
    child = ctl.add(self.name, self, self.daemon or library)
    self._il_thread = child  # type: ignore[attr-defined]
    run = self.run

    def controlled_run() -> None:
        child.ident = _get_ident()
        ctl.wait_baton(child)
        if ctl.aborting:
            child.status = DONE
            return
        thread_local.thread = child
        tracing_on(ctl)
        profile = probe_on(child)
        exc: BaseException | None = None
        try:
            run()
        except Abort:
            pass
        except BaseException as raised:  # the thread's own exception is the failure
            if is_passthrough(raised) and not isinstance(raised, SystemExit):
                ctl.passthrough = ctl.passthrough or raised
                ctl._abort()
            else:
                with contextlib.suppress(Abort):
                    exc = _unhandled(ctl, self, raised)
        finally:
            tracing_off()
            probe_off(child, profile)
            thread_local.thread = None
            with contextlib.suppress(Abort):
                ctl.thread_ended(child, exc)
            child.status = DONE

    self.run = controlled_run  # type: ignore[method-assign]
    # threading's own start-up handshake runs uncontrolled: the parent waits for real
    # until the child is parked, which needs no baton. A Ctrl-C waits until it is over: one
    # raised as the parent takes ``_started``'s lock would leave the lock taken, and the
    # child (setting ``_started``) and the unwinding (waiting for it) blocked on it for good.
    thread_local.thread = None
    try:
        with _interrupt.deferred():
            _orig_start(self)
    finally:
        thread_local.thread = t
    # Known before the child can hold the baton (it sets it again itself): threading set
    # it before start() returned.
    child.ident = self.ident


_PY_SIMPLE_QUEUE: type = queue._PySimpleQueue  # type: ignore[attr-defined]
_C_SIMPLE_QUEUE: type | None = (
    queue.SimpleQueue if queue.SimpleQueue is not _PY_SIMPLE_QUEUE else None
)
"""The C ``queue.SimpleQueue``: its ``get`` blocks in C, where no schedule point can be."""


def _c_simple_queue_patches() -> list[tuple[Any, str, Any]]:
    """The C ``SimpleQueue``'s ``get``, replaced in the type itself (``_clock.TypeDict``).

    ``queue.SimpleQueue`` is the pure-Python twin during an exploration, but a module that
    did ``from queue import SimpleQueue`` at import (aiosqlite does) holds the C type, whose
    ``get`` waits in C: the thread that waits on it stalled the run. The replacement waits
    for an item the controlled way (a point, then parked until the queue has one, with a
    virtual timeout) and then takes it without blocking.
    """
    cls = _C_SIMPLE_QUEUE
    if cls is None or not _clock.REACHABLE or _clock.own_dict(cls) is None:
        return []
    real_get = cls.__dict__["get"]

    def get(self: Any, block: bool = True, timeout: float | None = None) -> Any:
        found = _controlled()
        if found is None or not block:
            return real_get(self, block, timeout)
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")
        t, ctl = found
        while True:
            if not self.empty():
                return real_get(self, False)
            if not ctl.block(t, lambda: not self.empty(), ("simple queue", self), timeout):
                raise queue.Empty

    get.__qualname__ = "SimpleQueue.get"
    get.__doc__ = real_get.__doc__
    return [(_clock.TypeDict(cls), "get", get)]


MSG_EXECUTOR_BEFORE = (
    "{thread} is a worker of a ThreadPoolExecutor created before the exploration (at import "
    "time, or in a fixture), started at {where}: its work queue was made before interlace "
    "took control of queue.SimpleQueue, so the worker would wait for work inside C, where "
    "interlace cannot switch threads, and the schedule could not finish. Create the executor "
    "inside the explored function (e.g. 'with ThreadPoolExecutor() as pool:'; in a pytest "
    "test, in the test body: fixtures are made once for all of a test's schedules), so that "
    "every schedule gets its own workers and queue"
)


MSG_PROCESS_POOL = (
    "{thread} is a thread of a multiprocessing pool (Pool or ThreadPool), started at {where}: "
    "its threads wait for real I/O on pipes (the pool's change notifier, a process pool's "
    "worker pipes) for what another of its threads writes first, and interlace runs one "
    "thread at a time, so the pool could not make progress. Use a "
    "concurrent.futures.ThreadPoolExecutor inside the explored function (interlace controls "
    "its queue), or create the pool outside it (a fixture, or module level) and explore the "
    "threads that use it"
)


def _on_pipes(target: Any, args: tuple[Any, ...]) -> bool:
    """Whether a thread of a multiprocessing pool waits on a pipe: a ``Pool``'s on those of
    its processes, any pool's worker handler (a ``ThreadPool``'s too) on its change notifier."""
    pipes = sys.modules["multiprocessing.queues"].SimpleQueue
    return any(isinstance(arg, pipes) for arg in args)


def _refuse_uncontrollable_worker(
    thread: threading.Thread, t: ControlledThread, ctl: Controller
) -> None:
    """Refuse a library thread that would wait where no schedule point can be: an executor
    worker on a C ``SimpleQueue`` made before the run, a process pool's thread (on its pipes;
    a ``ThreadPool``'s queues are controlled)."""
    target = getattr(thread, "_target", None)
    module = getattr(target, "__module__", None)
    args = getattr(thread, "_args", ())
    if module == "multiprocessing.pool" and _on_pipes(target, args):
        message = MSG_PROCESS_POOL
    elif (
        module == "concurrent.futures.thread"
        and _C_SIMPLE_QUEUE is not None
        and any(type(arg) is _C_SIMPLE_QUEUE for arg in args)
    ):
        message = MSG_EXECUTOR_BEFORE
    else:
        return
    ctl.error = UnsupportedOperationError(
        message.format(thread=repr(thread.name), where=ctl.location(t) or "?")
    )
    ctl._abort()
    t.aborted = True
    raise Abort


def _outside_lock_wait(frame: types.FrameType | None) -> tuple[Any, types.FrameType] | None:
    """The held C lock ``frame`` waits to take at a ``with`` or ``acquire`` in code outside
    the code under test (where interlace sees no lock), with that frame; else None."""
    if frame is None or _instrument.is_under_test(frame.f_code.co_filename):
        return None
    try:
        plan = _instrument.make_plan(frame.f_code)
        offset = frame.f_lasti
        lock: Any = None
        if offset in plan.withs:
            lock = _instrument.evaluate(plan.withs[offset], frame)
        elif offset in plan.calls and plan.calls[offset].method in ("acquire", "__enter__"):
            receiver = plan.calls[offset].receiver
            lock = _instrument.evaluate(receiver, frame) if receiver is not None else None
        if type(lock) in LOCK_TYPES and _is_locked(lock):
            return lock, frame
    except Exception:  # reading another thread's frame must never break the run
        return None
    return None


def _lock_kind(lock: Any) -> str:
    return "threading.Lock" if type(lock) is _LOCK else "threading.RLock"


def _cpu_seconds(ident: int) -> float | None:
    """The CPU time the thread ``ident`` has used, where the platform tells; else None."""
    clock = getattr(time, "pthread_getcpuclockid", None)
    if clock is None:
        return None
    try:
        return time.clock_gettime(clock(ident))
    except (OSError, OverflowError, ValueError):
        return None


def _module_to_instrument(frame: types.FrameType | None) -> str | None:
    """The module whose code waits at ``frame`` (outside the code under test), or the nearest
    one that called it, that ``instrument`` accepts; None if the code under test comes first.

    Instrumenting the module that *waits* is what makes its acquire a controlled one (the
    thread then waits in the scheduler until the holder runs and releases the lock).
    """
    while frame is not None and not _instrument.is_under_test(frame.f_code.co_filename):
        name = frame.f_globals.get("__name__")
        if isinstance(name, str) and name and _instrument.uninstrumentable(name) is None:
            return name
        frame = frame.f_back
    return None


def _holder(ctl: Controller, lock: Any, stuck: ControlledThread) -> str:
    """Which parked thread holds ``lock``, and in which module it took it, as far as that
    can be known: an ``RLock`` names its owner, and the module is the library code that
    called back into the code under test; a ``Lock`` is found by a frame outside the code
    under test with a ``with`` or ``acquire`` of it before where it is. "" if unknown."""
    owner = re.search(r" owner=(\d+) ", repr(lock)) if type(lock) is _RLOCK else None
    frames = sys._current_frames()
    for u in ctl.threads:
        if u is stuck or u.status == DONE or u.ident is None:
            continue
        if owner is not None and u.ident != int(owner.group(1)):
            continue
        frame = frames.get(u.ident)
        inner_under_test = False
        while frame is not None:
            under_test = _instrument.is_under_test(frame.f_code.co_filename)
            module = frame.f_globals.get("__name__") or "?"
            where = f"{_short(frame.f_code.co_filename)}:{frame.f_lineno}"
            if not under_test and _takes(frame, lock):
                return f"thread {u.name!r} holds (taken in {module}, at {where})"
            if not under_test and owner and inner_under_test:
                return (
                    f"thread {u.name!r} holds ({module} took it, and calls back into the "
                    f"code under test at {where})"
                )
            inner_under_test = under_test
            frame = frame.f_back
    return ""


def _takes(frame: types.FrameType, lock: Any) -> bool:
    """Whether ``frame`` took ``lock`` before where it is: a ``with`` on it (or on a
    ``Condition`` over it) or an ``acquire`` call."""
    try:
        plan = _instrument.make_plan(frame.f_code)
        recipes = [recipe for offset, recipe in plan.withs.items() if offset < frame.f_lasti]
        recipes += [
            site.receiver
            for offset, site in plan.calls.items()
            if offset < frame.f_lasti
            and site.receiver is not None
            and site.method in ("acquire", "__enter__")
        ]
        for recipe in recipes:
            with contextlib.suppress(Unknown):
                value = evaluate(recipe, frame)
                if value is lock or getattr(value, "_lock", None) is lock:
                    return True
    except Exception:  # reading another thread's frame must never break the run
        return False
    return False


def _stall_message(
    ctl: Controller,
    stuck: ControlledThread,
    frame: types.FrameType | None,
    lock_wait: tuple[Any, types.FrameType] | None,
    waited: float,
) -> str:
    import traceback

    stack = "".join(traceback.format_stack(frame)[-6:]) if frame is not None else ""
    where = ctl.location(stuck)
    if frame is not None and not where:
        where = f"{_short(frame.f_code.co_filename)}:{frame.f_lineno} (outside the code under test)"
    if lock_wait is not None:
        lock, at = lock_wait
        waits_in = str(at.f_globals.get("__name__", "")) or _short(at.f_code.co_filename)
        holder = _holder(ctl, lock, stuck) or "another thread holds"
        text = (
            f"thread {stuck.name!r} waits at {_short(at.f_code.co_filename)}:{at.f_lineno} "
            f"(in {waits_in}, outside the code under test) for a {_lock_kind(lock)} that "
            f"{holder}: interlace sees locks only in the code under test, so it "
            "switched threads while that lock was held (library code that holds "
            "a lock while it calls back into your code does this, such as "
            "functools.cached_property on Python 3.11, or logging.Handler around a "
            "subclass's emit)"
        )
        module = _module_to_instrument(at)
        if module is not None:
            text += (
                f". Add {module} to the code under test, so that interlace sees the lock "
                f"where it waits: explore(..., instrument=[{module!r}]), 'interlace explore "
                f"--instrument {module}', or @pytest.mark.interlace(instrument=[{module!r}])"
            )
        else:
            text += (
                f". {waits_in} cannot be instrumented (interlace's own machinery runs it), so "
                "this is a limit of interlace: please report it, with the stack below"
            )
    else:
        text = (
            f"thread {stuck.name!r} ran for {waited:g} s at {where} without reaching "
            "a schedule point: it is blocked or busy outside interlace's control (real I/O, a "
            "lock reached through an expression interlace cannot read, a C extension, or long "
            "work in a library). No other thread of the target runs meanwhile (interlace runs "
            "one at a time), so a wait for one of them (a server's accept for a client thread) "
            "never ends. Run the blocking part outside the explored target (a server in a "
            "fixture), or use the threading/queue primitives, which interlace controls. "
            + stall_timeout_advice(ctl.stall_timeout)
        )
    return text + (f". Where it is:\n{stack}" if stack else "")


def _unhandled(
    ctl: Controller, thread: threading.Thread, exc: BaseException
) -> BaseException | None:
    """What stock ``threading`` does with ``exc`` escaping ``thread``: the failure, or None.

    A ``threading.excepthook`` the target installed handles it, as on stock Python (only an
    exception the hook raises is a failure). Otherwise the default hook would print it and
    the thread die unnoticed: a failure, except ``SystemExit``, which ends a thread quietly.
    """
    hook = threading.excepthook
    if hook is None or hook is ctl.excepthook or hook is threading.__excepthook__:
        return None if isinstance(exc, SystemExit) else exc
    args = threading.ExceptHookArgs([type(exc), exc, exc.__traceback__, thread])
    try:
        hook(args)
    except Abort:
        raise
    except Exception as raised:  # stock prints "Exception in threading.excepthook"
        raised.add_note(
            f"(raised by threading.excepthook while it handled {type(exc).__name__} from "
            f"thread {thread.name!r})"
        )
        return raised
    return None


def _uncontrolled_start(original: Callable[..., Any]) -> Callable[..., Any]:
    """A ``_thread`` function that starts a thread: the new thread is not controlled, so
    the hooks check which thread runs from then on (see ``line_hooks``). ``threading``
    holds its own reference to these, so controlled threads never come through here."""

    def start(*args: Any, **kwargs: Any) -> Any:
        if baton is not None:
            line_hooks(None, foreign=True)
        return original(*args, **kwargs)

    start.__name__ = start.__qualname__ = original.__name__
    return start


_THREAD_STARTS = [
    (_thread, name, _uncontrolled_start(getattr(_thread, name)))
    for name in ("start_new_thread", "start_new", "start_joinable_thread")
    if hasattr(_thread, name)
]


def _join(self: threading.Thread, timeout: float | None = None) -> None:
    found = _controlled()
    child = getattr(self, "_il_thread", None)
    if found is None or child is None:
        _orig_join(self, timeout)
        return
    t, ctl = found
    if child is t:
        raise RuntimeError("cannot join current thread")
    if ctl.block(t, lambda: child.status == DONE, ("join", child), timeout):
        thread_local.thread = None
        try:
            _orig_join(self)
        finally:
            thread_local.thread = t


def _is_alive(self: threading.Thread) -> bool:
    child = getattr(self, "_il_thread", None)
    if child is not None and thread_local.thread is not None:
        return bool(child.status != DONE)
    return bool(_orig_is_alive(self))


def _cond_enter(self: threading.Condition) -> bool:
    found = _controlled()
    if found is not None:
        t, ctl = found
        ctl.acquire(t, self._lock)  # type: ignore[attr-defined]
    return bool(_orig_cond_enter(self))


def _cond_exit(self: threading.Condition, *args: Any) -> None:
    unrestored = thread_local.unrestored
    if unrestored and any(c is self for c in unrestored):
        # Its wait was unwound before it could take the lock back: nothing to release.
        thread_local.unrestored = tuple(c for c in unrestored if c is not self)
        return
    found = _controlled()
    if found is not None:
        found[1].released(self._lock)  # type: ignore[attr-defined]
    _orig_cond_exit(self, *args)


def _cond_wait(self: threading.Condition, timeout: float | None = None) -> bool:
    found = _controlled()
    if found is None:
        return bool(_orig_cond_wait(self, timeout))
    t, ctl = found
    if not self._is_owned():  # type: ignore[attr-defined]
        raise RuntimeError("cannot wait on un-acquired lock")
    waiter = _allocate_lock()
    waiter.acquire()
    self._waiters.append(waiter)  # type: ignore[attr-defined]
    saved = self._release_save()  # type: ignore[attr-defined]
    lock = self._lock  # type: ignore[attr-defined]
    ctl.released(lock)
    try:
        gotit = ctl.block(t, lambda: not waiter.locked(), ("condition", self), timeout)
        if gotit:
            waiter.acquire()
        else:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)  # type: ignore[attr-defined]
        ctl.acquire(t, lock)
    except BaseException:
        # Unwinding (Ctrl-C, the end of the run) while a parked thread may hold the lock:
        # a real acquire would wait for good, so take it back only if it is free now.
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)  # type: ignore[attr-defined]
        if not _take_back(lock, saved):
            thread_local.unrestored = (*thread_local.unrestored, self)
        raise
    self._acquire_restore(saved)  # type: ignore[attr-defined]
    return gotit


def _sem_acquire(
    self: threading.Semaphore, blocking: bool = True, timeout: float | None = None
) -> bool:
    found = _controlled()
    if found is None:
        return _orig_sem_acquire(self, blocking, timeout)
    t, ctl = found
    ctl.using(self)
    got = _orig_sem_acquire(self, blocking, timeout)
    if got and _called_from_user_code():
        ctl.took_permit(self, t)
    return got


def _counted_release(
    original: Callable[[threading.Semaphore, int], None],
) -> Callable[[threading.Semaphore, int], None]:
    """``Semaphore.release`` (or ``BoundedSemaphore``'s), counting the permits given back."""

    def release(self: threading.Semaphore, n: int = 1) -> None:
        found = _controlled()
        if found is not None:
            found[1].using(self)
        original(self, n)
        if found is not None:
            found[1].gave_permits(self, found[0], n)

    return release


_sem_release = _counted_release(_orig_sem_release)
_bsem_release = _counted_release(_orig_bsem_release)


def _take_back(lock: Any, saved: Any) -> bool:
    """Re-take a Condition's ``lock`` as its ``_release_save`` left it, without blocking."""
    if not lock.acquire(False):
        return False
    count = saved[0] if type(lock) is _RLOCK and isinstance(saved, tuple) else 1
    for _ in range(count - 1):
        lock.acquire(False)
    return True


_orig_selects: dict[type, Callable[..., Any]] = {
    cls: cls.select
    for cls in (
        getattr(selectors, name, None)
        for name in (
            "SelectSelector",
            "PollSelector",
            "EpollSelector",
            "DevpollSelector",
            "KqueueSelector",
        )
    )
    if cls is not None
}


def _internal_only(selector: selectors.BaseSelector) -> bool:
    """Only an event loop's own wake-up pipe is registered: no real I/O can arrive."""
    for key in selector.get_map().values():
        # asyncio registers a reader as ``(handle, None)``; anything else (``subprocess``'s
        # ``communicate`` registers its pipes with no data) is real I/O.
        if not isinstance(key.data, tuple):
            return False
        for handle in key.data:
            callback = getattr(handle, "_callback", None)
            if handle is not None and getattr(callback, "__name__", "") != "_read_from_self":
                return False
    return True


MSG_OWN_LOOP = (
    "the plain function {name} runs an event loop itself (asyncio.run, asyncio.Runner or "
    "loop.run_until_complete, at {where}), and two of its tasks were ready to run at once: "
    "interlace explores the threads of a plain function, but that loop's tasks would only ever "
    "run in the order a stock loop runs them, so a race between them would go unfound. Make "
    "{name} an async def function that awaits the coroutine instead of running a loop (e.g. "
    "'async def {name}(): await main()'), or pass the async def function itself: its tasks "
    "then run on interlace's controlled event loop, and threads they start still run under "
    "control"
)


def _note_stock_loop(t: ControlledThread, ctl: Controller) -> None:
    """A stock event loop waits in controlled thread ``t``: note whether it runs tasks
    whose order interlace cannot explore; in the target's own thread, refuse it."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return  # a selector used outside asyncio
    loop = asyncio.events._get_running_loop()
    ready = getattr(loop, "_ready", ())  # None: a selector used outside asyncio
    if len(ready) < 2:
        return
    # The loop is about to run what is ready, in FIFO order: steps of two tasks among it
    # are an order a controlled loop would have explored.
    tasks = {
        id(task)
        for handle in ready
        if isinstance(
            task := getattr(getattr(handle, "_callback", None), "__self__", None), asyncio.Task
        )
    }
    if len(tasks) < 2:
        return
    ctl.stock_loop_tasks = True
    if t.actor == 0 and ctl.target is not None and ctl.error is None and not ctl.aborting:
        from interlace.errors import InvalidTargetError

        ctl.error = InvalidTargetError(
            MSG_OWN_LOOP.format(name=ctl.target, where=ctl.location(t) or "?")
        )
        ctl._abort()
        t.aborted = True
        raise Abort


def _controlled_select(self: selectors.BaseSelector, timeout: float | None = None) -> Any:
    """An event loop waiting in a controlled thread waits in the scheduler, in virtual time."""
    original = _orig_selects[type(self)]
    found = _controlled()
    if found is not None and not found[1].stock_loop_tasks:
        _note_stock_loop(*found)
    if found is None or (timeout is not None and timeout <= 0):
        return original(self, timeout)
    t, ctl = found
    ready = original(self, 0)
    if ready:
        return ready
    if not _internal_only(self):
        # Real I/O may arrive without any thread running: wait for it for real.
        thread_local.thread = None
        try:
            return original(self, timeout)
        finally:
            thread_local.thread = t
    ctl.block(t, lambda: bool(original(self, 0)), ("io", self), timeout)
    return original(self, 0)


try:
    import fcntl
except ImportError:  # Windows: no flock
    fcntl = None  # type: ignore[assignment]


def _flock(fd: Any, operation: int) -> None:
    """``fcntl.flock``: between threads of one process it blocks, so wait in the scheduler."""
    assert fcntl is not None
    original = _orig_flock
    found = _controlled()
    if found is None or operation & fcntl.LOCK_NB or operation & fcntl.LOCK_UN:
        original(fd, operation)
        return
    t, ctl = found

    def taken() -> bool:
        # flock belongs to the open file, not to a thread: trying it for the waiter is
        # taking it for the waiter, whichever thread asks.
        try:
            original(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    if not ctl.block(t, taken, ("flock", fd)):
        original(fd, operation)


_orig_flock = fcntl.flock if fcntl is not None else None


def _sleep(seconds: float) -> None:
    found = _controlled()
    if found is None:
        _real_sleep(seconds)
        loop = thread_local.loop
        if loop is not None and loop._thread_id is not None:
            # The loop's thread really blocks (pytest-timeout and Ctrl-C see a blocked
            # test, threads outside the schedule run meanwhile), and its clock moves on.
            loop.block_for(seconds)
        return
    t, ctl = found
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    ctl.sleep(t, seconds)


# -- an executor job's exception ---------------------------------------------------------------

_orig_set_exception = concurrent.futures.Future.set_exception


def _future_set_exception(self: concurrent.futures.Future[Any], exception: Any) -> None:
    """``Future.set_exception``: an executor job of a run raised; note where the threads
    stood (``Controller.raised``)."""
    t = thread_local.thread
    if t is not None and isinstance(exception, BaseException):
        ctl = t.ctl
        if ctl.failure is None and not ctl.aborting and len(ctl.raised) < _RAISED_KEPT:
            ctl.raised.append((exception, ctl._cut()))
    _orig_set_exception(self, exception)


_RAISED_KEPT = 16
"""How many jobs' exceptions a run notes (a failure is most often the first)."""


_PATCHES: list[tuple[Any, str, Any]] = [
    (threading.Thread, "start", _start),
    *_THREAD_STARTS,
    (threading.Thread, "join", _join),
    (concurrent.futures.Future, "set_exception", _future_set_exception),
    (threading.Thread, "is_alive", _is_alive),
    (threading.Condition, "__enter__", _cond_enter),
    (threading.Condition, "__exit__", _cond_exit),
    (threading.Condition, "wait", _cond_wait),
    # Semaphores are Python code over a controlled Condition; these only count the permits
    # each thread holds, so a thread unwound holding some gives them back.
    (threading.Semaphore, "acquire", _sem_acquire),
    (threading.Semaphore, "__enter__", _sem_acquire),
    (threading.Semaphore, "release", _sem_release),
    (threading.BoundedSemaphore, "release", _bsem_release),
    (time, "sleep", _sleep),
    *((cls, "select", _controlled_select) for cls in _orig_selects),
    (time, "monotonic", _virtual_clock.monotonic),
    (time, "monotonic_ns", _virtual_clock.virtual_ns(time.monotonic_ns, EPOCH_MONOTONIC)),
    (time, "perf_counter", _virtual_clock.virtual(time.perf_counter, EPOCH_MONOTONIC)),
    (time, "perf_counter_ns", _virtual_clock.virtual_ns(time.perf_counter_ns, EPOCH_MONOTONIC)),
    (time, "time", _virtual_clock.wall),
    # ``time.localtime()`` and the others; ``datetime.now()`` and ``date.today()`` in the types.
    *_virtual_clock.CALENDAR,
    (time, "time_ns", _virtual_clock.virtual_ns(time.time_ns, EPOCH_WALL)),
    (threading, "_time", _virtual_clock.timeouts_monotonic),
    (queue, "time", _virtual_clock.timeouts_monotonic),
    # The C SimpleQueue blocks in C; its pure-Python twin waits on a (controlled) Semaphore.
    # Executors (asyncio.to_thread's among them) create theirs through this name.
    (queue, "SimpleQueue", queue._PySimpleQueue),  # type: ignore[attr-defined]
    *_c_simple_queue_patches(),
    *(((fcntl, "flock", _flock),) if fcntl is not None else ()),
    # A run's threads share one CPU (see ``_affinity``); the code under test sees the mask
    # it had.
    *_affinity.PATCHES,
]


# -- schedule points -----------------------------------------------------------------------------


# The hooks below run at every line of the code under test: each one does the least it can
# before the common answer (count the point; nothing to decide yet), and a schedule point's
# bookkeeping is written out in each rather than called (a Python call costs as much as the
# rest of a point).


def _site(plan: _instrument.Plan, t: ControlledThread, offset: int, frame: types.FrameType) -> None:
    """An instruction of interest in ``t``: a point inside a line, a ``with``, a lock call."""
    if offset in plan.inline:
        ctl = t.ctl
        ctl.step += 1
        if ctl.step >= ctl.attention:
            ctl.attend(t)
        return
    read = plan.with_readers.get(offset)
    if read is not None:
        _with_site(t, read, frame)
        return
    site = plan.calls.get(offset)
    if site is not None:
        _lock_call(t.ctl, t, site, frame)


def _with_site(
    t: ControlledThread, read: Callable[[types.FrameType], Any], frame: types.FrameType
) -> None:
    """Just before ``with manager:`` in ``t``: a C lock's acquire must not block for real."""
    try:
        manager = read(frame)
    except Unknown:
        return
    kind = type(manager)
    if kind is _LOCK:
        ctl = t.ctl
        if ctl.step + 1 < ctl.attention and not ctl.record and not manager.locked():
            # Exactly what ``ctl.acquire(t, manager)`` does for a free Lock when the point
            # before it needs no look (an aborting run has attention 0): count the point.
            # The owner is noted only for reports, which recorded runs make (the long way).
            ctl.step += 1
            return
    if kind in LOCK_TYPES:
        t.ctl.acquire(t, manager)


def _lock_call(
    ctl: Controller, t: ControlledThread, site: _instrument.CallSite, frame: types.FrameType
) -> None:
    if site.receiver is None:
        return
    try:
        receiver = evaluate(site.receiver, frame)
        method = _instrument.static_attr(receiver, site.method)
    except Unknown:
        return
    lock = getattr(method, "__self__", None)
    if type(lock) not in LOCK_TYPES or not isinstance(method, types.BuiltinMethodType):
        return
    name = method.__name__
    if name in ("release", "release_lock"):
        ctl.released(lock)
        return
    if name == "__enter__":
        ctl.acquire(t, lock)
        return
    blocking: Any = True
    timeout: Any = -1
    uncertain = False
    if site.args is None:
        uncertain = True
    else:
        try:
            values = [evaluate(r, frame) for r in site.args]
        except Unknown:
            values = None
            uncertain = True
        if values is not None:
            positional = len(values) - len(site.kwnames)
            named = dict(zip(site.kwnames, values[positional:], strict=True))
            given = values[:positional]
            if given:
                blocking = given[0]
            if len(given) > 1:
                timeout = given[1]
            blocking = named.get("blocking", blocking)
            timeout = named.get("timeout", timeout)
    if uncertain:
        if ctl.lock_free_for(lock, t):
            ctl.own(lock, t)
            return
        ctl.acquire(t, lock, True, None, uncertain=True)
        return
    seconds = None if timeout is None or timeout < 0 else float(timeout)
    ctl.acquire(t, lock, bool(blocking), seconds)


# -- instrumentation: sys.monitoring (3.12+) or sys.settrace (3.11) ----------------------------

_MON: Any = getattr(sys, "monitoring", None)  # 3.12+
_MONITORING = _MON is not None
_DISABLE: Any = _MON.DISABLE if _MONITORING else None
_tool: int | None = None
_instrumented: dict[int, types.CodeType] = {}
"""The code objects given local events, by ``id``: equal code objects (the same source in two
files compares equal) each need their own ``set_local_events``."""
_one_liners: set[types.CodeType] = set()


_def_line_bodies: dict[int, tuple[types.CodeType, bool]] = {}
"""``_body_on_def_line``'s answers, by ``id(code)`` (the code object kept alive with it): every
session instruments all code under test already loaded (``_instrument_eagerly``), and reading
each code object's bytecode again per session made a pytest run's later explorations slower
the more test modules it had imported."""


def _body_on_def_line(code: types.CodeType) -> bool:
    """Whether the code after ``RESUME`` (a closure's prologue comes first) starts on the
    def line, as a lambda's body does."""
    entry = _def_line_bodies.get(id(code))
    if entry is None:
        entry = _def_line_bodies[id(code)] = (code, _read_body_on_def_line(code))
    return entry[1]


def _read_body_on_def_line(code: types.CodeType) -> bool:
    body = 0
    for instr in dis.get_instructions(code):
        if instr.opname == "RESUME":
            body = instr.offset + 2
            break
    for _start, end, line in code.co_lines():
        if end > body and line is not None:
            return bool(line == code.co_firstlineno)
    return True


def _instrument_code(code: types.CodeType) -> None:
    global _careful_lines
    mon = _MON
    plan = plan_for(code)
    if plan is not None and _tool is not None and id(code) not in _instrumented:
        events = mon.events.LINE
        if _body_on_def_line(code):
            # A body on its def line (a lambda) gets a LINE event there on some calls only
            # (3.12 on every call, 3.13 on a code object's first call): never a point, so
            # every run agrees. Code all on that line needs no LINE events at all; the
            # rare one that goes on to other lines gets the hook that checks for it.
            if all(line in (None, code.co_firstlineno) for _, _, line in code.co_lines()):
                events = 0
            else:
                _one_liners.add(code)
                _careful_lines = True
                if baton is not None:  # a run is under way (else the next one picks it)
                    mon.register_callback(_tool, mon.events.LINE, _mon_line_careful)
        if plan.offsets:
            events |= mon.events.INSTRUCTION
            _plan_of[id(code)] = plan
        mon.set_local_events(_tool, code, events)
        _instrumented[id(code)] = code


_plan_of: dict[int, _instrument.Plan] = {}
"""The plan of each instrumented code object with points inside lines, by ``id(code)``
(the code objects stay alive in ``_instrumented``): hashing a code object on every
instruction event would cost more than the rest of the event."""


def _mon_start(code: types.CodeType, offset: int) -> Any:
    _instrument_code(code)
    module = _uninstrumented_module(code.co_filename)
    if not module:
        return _DISABLE
    # Installed code outside ``instrument`` keeps its PY_START event until a thread of a
    # run with another thread to preempt it calls it; noted once a session is enough (an
    # exploration is exhausted only if no run noted any), and an event at every call of a
    # library costs about 0.8 us a call on 3.12 (a 200,000-call library loop: 10x uncontrolled
    # with the event kept, 1.6x with it disabled once noted).
    t = baton
    if t is not None and len(t.ctl.threads) > 1 and t.ident == _get_ident():
        t.ctl.uninstrumented.add(module)
        return _DISABLE
    return None


_uninstrumented_module = _instrument.uninstrumented_module


def _codes_of(value: Any, seen: set[int]) -> Iterator[types.CodeType]:
    """The code objects of a function, class or code object, nested ones included."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, types.CodeType):
        yield value
        for const in value.co_consts:
            if isinstance(const, types.CodeType):
                yield from _codes_of(const, seen)
    elif isinstance(value, (staticmethod, classmethod)):
        yield from _codes_of(value.__func__, seen)
    elif isinstance(value, property):
        for accessor in (value.fget, value.fset, value.fdel):
            if accessor is not None:
                yield from _codes_of(accessor, seen)
    elif isinstance(value, types.FunctionType):
        yield from _codes_of(value.__code__, seen)
    elif isinstance(value, type):
        for member in list(vars(value).values()):
            yield from _codes_of(member, seen)


def _instrument_eagerly(target: Any) -> None:
    """Instrument the code under test that exists already, before any of it runs.

    Code instrumented from its own PY_START event would get one LINE event more on its
    first call than on later ones (a lambda's only line): instrumenting up front makes
    every run of a session, and every session, count the same schedule points.
    """
    global _codes_by_module
    for code in _codes_of(target, set()):
        _instrument_code(code)
    known, _codes_by_module = _codes_by_module, {}  # a module gone from sys.modules is let go
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str) or not _instrument.is_under_test(filename):
            continue
        for code in _module_codes(module, known.get(id(module))):
            _instrument_code(code)


_codes_by_module: dict[int, tuple[list[Any], tuple[int, ...], list[types.CodeType]]] = {}
"""``_module_codes``'s answers, by ``id(module)``: the module's values (kept alive, so their
ids stay theirs), those ids, and the code objects found from them. A pytest run imports every
test module before the first test, and walking all their functions and classes again for
each exploration made a suite's later explorations slower the more modules it had."""


def _module_codes(
    module: types.ModuleType, entry: tuple[list[Any], tuple[int, ...], list[types.CodeType]] | None
) -> list[types.CodeType]:
    """The code objects of the functions and classes a module defines, nested ones included.

    ``entry`` is what the last session found in it: read again when the module's namespace
    has changed (a value bound, rebound or deleted); a method added to one of its classes
    later is found when it first runs (PY_START).
    """
    values = list(vars(module).values())
    ids = tuple(map(id, values))
    if entry is not None and entry[1] == ids:
        _codes_by_module[id(module)] = entry
        return entry[2]
    seen: set[int] = set()
    codes = [
        code
        for value in values
        if getattr(value, "__module__", None) == module.__name__
        or isinstance(value, types.CodeType)
        for code in _codes_of(value, seen)
    ]
    _codes_by_module[id(module)] = (values, ids, codes)
    return codes


def _mon_instruction(code: types.CodeType, offset: int, depth: int = 1) -> Any:
    """The INSTRUCTION hook; ``depth`` is how far up the instruction's own frame is (1 when
    sys.monitoring calls this, 2 through ``_mon_instruction_careful``)."""
    plan = _plan_of.get(id(code))
    if plan is None or offset not in plan.offsets:
        return _DISABLE
    t = baton
    if t is not None:
        if offset in plan.inline:
            ctl = t.ctl
            ctl.step += 1
            if ctl.step >= ctl.attention:
                ctl.attend(t)
            return None
        name = plan.with_locals.get(offset)
        if name is not None:
            # ``with lock:``, written out (see _with_site): every ``with`` pays for it.
            manager = _getframe(depth).f_locals.get(name)
            if type(manager) is _LOCK:
                ctl = t.ctl
                if ctl.step + 1 < ctl.attention and not ctl.record and not manager.locked():
                    ctl.step += 1
                    return None
            if type(manager) in LOCK_TYPES:
                t.ctl.acquire(t, manager)
            return None
        _site(plan, t, offset, _getframe(depth))
    return None


def _mon_line_careful(code: types.CodeType, line: int) -> Any:
    """The LINE hook where another thread may run code under test, or where code whose body
    starts on its def line but goes on to other lines (``_one_liners``) was instrumented."""
    if line == code.co_firstlineno and code in _one_liners:
        return _DISABLE
    t = baton
    if t is not None and t.ident == _get_ident():
        ctl = t.ctl
        ctl.step += 1
        if ctl.step >= ctl.attention:
            ctl.attend(t)
    return None


def _mon_line_idle(code: types.CodeType, line: int) -> Any:
    """The LINE hook between runs: nothing is counted (see ``line_hooks``)."""
    return None


def _mon_instruction_idle(code: types.CodeType, offset: int) -> Any:
    """The INSTRUCTION hook between runs: it only turns off instructions that are no site."""
    plan = _plan_of.get(id(code))
    return _DISABLE if plan is None or offset not in plan.offsets else None


def _mon_instruction_careful(code: types.CodeType, offset: int) -> Any:
    """``_mon_instruction`` where another thread may run code under test."""
    t = baton
    if t is not None and t.ident != _get_ident():
        plan = _plan_of.get(id(code))
        return _DISABLE if plan is None or offset not in plan.offsets else None
    return _mon_instruction(code, offset, 2)  # the frame is our caller's


_careful_lines = False
"""Code whose body starts on its def line but goes on to other lines was instrumented."""


def line_hooks(ctl: Controller | None, *, foreign: bool) -> None:
    """Pick the schedule-point hooks for this run (3.12+; they count the same points).

    A hook on every line of code under test is most of what a schedule point costs, and
    asking which thread runs it (``get_ident()``) is most of the hook's own work. Only the
    baton holder runs code under test unless the process has threads the exploration does
    not control: so the hooks ask only when such a thread exists when the run starts
    (``foreign``), or is started during it (``threading`` or ``_thread``: ``ctl`` None,
    ``foreign`` True, from then on). ``Controller.attend`` always asks, so such a thread
    is never scheduled as another. Between runs (``ctl`` None, ``foreign`` False) the hooks
    count nothing and read no baton: a thread preempted inside a hook (at its first
    instruction, say) may finish that call once the next run holds a baton.
    """
    if _tool is None:
        return
    mon = _MON
    line: Callable[[types.CodeType, int], Any] = _mon_line_idle
    instruction: Callable[[types.CodeType, int], Any] = _mon_instruction_idle
    if foreign:
        line, instruction = _mon_line_careful, _mon_instruction_careful
    elif ctl is not None:
        line = _mon_line_careful if _careful_lines else ctl.on_line
        instruction = _mon_instruction
    mon.register_callback(_tool, mon.events.LINE, line)
    mon.register_callback(_tool, mon.events.INSTRUCTION, instruction)


def _trace_call(frame: types.FrameType, event: str, arg: Any) -> Any:
    t = baton
    if t is not None and t.pending is not None:
        # A call before a lazy point (see _trace_local) may reach points of its own: count
        # that point where it is after all.
        t.pending.f_trace_opcodes = True
        t.pending = None
    code = frame.f_code
    entry = _tracer_of.get(id(code))
    if entry is None or entry[0] is not code:
        entry = _tracer_for(code)
    if entry[2] and t is not None and len(t.ctl.threads) > 1:
        # Installed code outside ``instrument``: noted once a session, as on 3.12+.
        t.ctl.uninstrumented.add(entry[2])
        _tracer_of[id(code)] = (code, None, "")
    return entry[1]


_Tracer = Callable[[types.FrameType, str, Any], Any]


def _tracer_for(code: types.CodeType) -> tuple[types.CodeType, _Tracer | None, str]:
    plan = plan_for(code)
    tracer: _Tracer | None = None
    if plan is not None:
        # No point inside a line: no opcode events, no plan needed.
        tracer = _trace_local(plan) if plan.offsets else _trace_lines
    module = "" if plan is not None else _uninstrumented_module(code.co_filename)
    entry = _tracer_of[id(code)] = (code, tracer, module)
    return entry


_tracer_of: dict[int, tuple[types.CodeType, _Tracer | None, str]] = {}
"""Each code object's local tracer (None: not code under test), by ``id(code)``, with the
code itself to tell a reused id (hashing a code object costs more than the rest of a call),
and the installed module it belongs to when it runs without points (else "").
A plan depends on the bytecode alone, so a code object's tracer is made once a session."""

# On 3.11 the hooks below need no ident check (unlike the monitoring ones): sys.settrace is
# per thread, and only controlled threads trace, each only while it holds the baton.


def _trace_lines(frame: types.FrameType, event: str, arg: Any) -> Any:
    if event == "line":
        t = baton
        if t is not None:
            ctl = t.ctl
            ctl.step += 1
            if ctl.step >= ctl.attention:
                ctl.attend(t)
    return _trace_lines


def _trace_local(plan: _instrument.Plan) -> _Tracer:
    """The local tracer of code with points inside lines.

    Opcode events cost a call each, so they are on only from where a line with such a point
    is entered up to that line's last point (a loop back into the line is a line event).

    A line whose one point is an inline one reached through straight-line code
    (``Plan.lazy``, as in ``d[k] = d.get(k, 0) + 1``) traces no opcodes while that point needs
    no decision: it is counted at the frame's next event, once the frame is past it. The
    count comes out the same: until then no other point can come (a call converts the point
    back to an opcode-traced one, in ``_trace_call``), an exception before the point means
    it was never reached, and the point's number is below ``attention`` when the line starts.
    Until that event the frame's tracer is ``pending``, so no other event checks for it.

    A line that only loads a local before its one point, a ``with`` (``Plan.eager``, as in
    ``with lock:``), does that point's work at its line event: the local cannot change
    before the ``with`` is reached, and no other point comes between.
    """
    offsets = plan.offsets
    inline = plan.inline
    finals = plan.finals
    line_last = plan.line_last
    # Each line with points: its last point, where its lazy or eager point's straight run
    # starts and that point (-1, -1: neither), and an eager point's local ("" for a lazy one).
    lines: dict[int, tuple[int, int, int, str]] = {}
    for lineno, last in line_last.items():
        start, point, name = -1, -1, ""
        if lineno in plan.lazy:
            start, point = plan.lazy[lineno]
        elif lineno in plan.eager and plan.eager[lineno][1] in plan.with_locals:
            start, point = plan.eager[lineno]
            name = plan.with_locals[point]
        lines[lineno] = (last, start, point, name)

    # The hooks return None wherever they keep the frame's tracer: 3.11 sets ``f_trace``
    # only to a tracer returned. Layout matters here: a jump too long for one code unit
    # keeps 3.11 from specializing the comparison before it, hence the early returns.
    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event != "line":
            if event == "opcode":
                offset = frame.f_lasti
                if offset not in offsets:
                    if frame.f_lineno not in line_last:
                        frame.f_trace_opcodes = False  # left a line with points before its last
                    return None
                if offset in finals:
                    frame.f_trace_opcodes = False
                t = baton
                if t is not None:
                    if offset in inline:
                        ctl = t.ctl
                        ctl.step += 1
                        if ctl.step >= ctl.attention:
                            ctl.attend(t)
                    else:
                        _site(plan, t, offset, frame)
            return None
        lineno = frame.f_lineno
        if lineno not in line_last:  # the usual line: a point at its start only
            # (opcode events are off here: the last point of a line turns them off, and
            # an opcode event on a line without points does if the line was left early)
            t = baton
            if t is not None:
                ctl = t.ctl
                ctl.step += 1
                if ctl.step >= ctl.attention:
                    ctl.attend(t)
            return None
        last, start, point, name = lines[lineno]
        offset = frame.f_lasti
        t = baton
        if t is not None:
            ctl = t.ctl
            ctl.step += 1
            if ctl.step >= ctl.attention:
                ctl.attend(t)
            if start <= offset < point and baton is t:
                if not name:  # lazy
                    if ctl.step + 1 < ctl.attention:
                        frame.f_trace_opcodes = False
                        t.pending = frame
                        t.pending_at = point
                        return pending
                else:  # eager
                    frame.f_trace_opcodes = False
                    # _with_site's free-Lock way, written out (every ``with lock:`` pays it)
                    manager = frame.f_locals.get(name)
                    if (
                        type(manager) is _LOCK
                        and ctl.step + 1 < ctl.attention
                        and not ctl.record
                        and not manager.locked()
                    ):
                        ctl.step += 1
                    else:
                        _site(plan, t, point, frame)
                    return None
        frame.f_trace_opcodes = offset <= last
        return None

    def pending(frame: types.FrameType, event: str, arg: Any) -> Any:
        # The tracer of a frame from a lazy line on, up to its next event: that event counts
        # the lazy point if the frame is past it (and ``_trace_call`` has not made it an
        # opcode-traced one), then goes as in ``trace``, which the frame gets back.
        t = baton
        if t is not None and t.pending is frame:
            t.pending = None
            if event != "exception" or frame.f_lasti >= t.pending_at:
                ctl = t.ctl
                ctl.step += 1
                if ctl.step >= ctl.attention:
                    ctl.attend(t)
            if event == "line" and frame.f_lineno not in line_last:  # trace's usual line
                ctl = t.ctl
                ctl.step += 1
                if ctl.step >= ctl.attention:
                    ctl.attend(t)
                return trace
        result = trace(frame, event, arg)
        return trace if result is None else result

    return trace


def probe_on(t: ControlledThread) -> Any:
    """In a recorded run, make ``t``'s calls set ``t.checked`` (``Controller.gil_point``);
    returns the profile function to put back (``probe_off``)."""
    previous = sys.getprofile()
    if not t.ctl.record:
        return previous

    def probe(frame: types.FrameType, event: str, arg: Any) -> None:
        t.checked = True

    t.probe = probe
    t.checked = True
    _set_profile(probe)
    return previous


def probe_off(t: ControlledThread, previous: Any) -> None:
    if t.probe is not None:
        t.probe = None
        _set_profile(previous)


def _set_profile(profile: Any) -> None:
    sys.setprofile(profile)
    if _MONITORING:
        # On 3.12 and 3.13, a profile function set or removed re-instruments the code, and an
        # instruction whose INSTRUCTION event another instruction of its code object DISABLEd
        # loses its own: the points inside lines would vanish from this run and the next.
        _MON.restart_events()


# What runs between two schedule points of a thread without CPython checking whether to hand
# the GIL over (its "eval breaker"): loads, stores, operators, building values, forward jumps.
# Any of them that runs Python code (a property, ``__eq__``) enters a function, which the
# profile probe sees. Anything else (calls, returns, back-edges, yields, raises, with, await)
# counts as a check.
_NO_CHECK_PREFIXES = (
    "LOAD_",
    "STORE_",
    "DELETE_",
    "BINARY_",
    "UNARY_",
    "BUILD_",
    "LIST_",
    "SET_",
    "DICT_",
    "FORMAT_",
    "POP_JUMP_IF_",
    "POP_JUMP_FORWARD_IF_",
    "UNPACK_",
)
_NO_CHECK = frozenset(
    {
        "CACHE",
        "COMPARE_OP",
        "CONTAINS_OP",
        "CONVERT_VALUE",
        "COPY",
        "EXTENDED_ARG",
        "IS_OP",
        "JUMP_FORWARD",
        "JUMP_IF_FALSE_OR_POP",
        "JUMP_IF_TRUE_OR_POP",
        "KW_NAMES",
        "MAP_ADD",
        "NOP",
        "POP_TOP",
        "PUSH_NULL",
        "SWAP",
        "TO_BOOL",
    }
)
_checks_of: dict[types.CodeType, tuple[int, ...]] = {}


def _gil_checks(code: types.CodeType, start: int, end: int) -> bool:
    """Whether an instruction of ``code`` in ``[start, end)`` (offsets) may check whether to
    hand the GIL over."""
    checks = _checks_of.get(code)
    if checks is None:
        checks = _checks_of[code] = tuple(
            ins.offset
            for ins in dis.get_instructions(code)
            if ins.opname not in _NO_CHECK and not ins.opname.startswith(_NO_CHECK_PREFIXES)
        )
    index = bisect.bisect_left(checks, start)
    return index < len(checks) and checks[index] < end


def tracing_on(ctl: Controller) -> None:
    if not _MONITORING:
        sys.settrace(_trace_call)


def tracing_off() -> None:
    if not _MONITORING:
        sys.settrace(None)


_active = _allocate_lock()


def _ends_the_process(thread: threading.Thread) -> bool:
    """Whether ``thread`` is pytest-timeout's timer (``--timeout-method thread``): when it
    fires, it prints the stacks and ends the process (or, under a debugger, does nothing), so
    it never ends a wait of a run, though it waits with a timeout."""
    function = getattr(thread, "function", None) if isinstance(thread, threading.Timer) else None
    return (
        getattr(function, "__module__", None) == "pytest_timeout"
        and getattr(function, "__name__", None) == "timeout_timer"
    )


def _never_wakes_run(thread: threading.Thread) -> bool:
    """Whether ``thread``, outside the run, cannot end a wait of it: pytest-timeout's timer,
    or a process pool's idle thread (``_pools.quiet``)."""
    from interlace.harness import _pools

    return _ends_the_process(thread) or _pools.quiet(thread)


def _positions() -> dict[int, tuple[types.FrameType, int]]:
    """Where every other thread stands now: its innermost frame and instruction."""
    me = _get_ident()
    return {
        ident: (frame, frame.f_lasti)
        for ident, frame in sys._current_frames().items()
        if ident != me
    }


def _forget_control_in_child() -> None:
    """In a process forked during a run (``multiprocessing``'s fork start method, a plain
    ``os.fork``): only the forking thread exists and no scheduler does, so its code runs
    uncontrolled, as in a stock process. Before, the child's first schedule point waited
    for a baton no thread could pass, and the parent for the child."""
    global baton
    _affinity.forget_in_child()
    if thread_local.thread is None and thread_local.loop is None and baton is None:
        return
    thread_local.thread = None
    thread_local.loop = None
    thread_local.activate = None
    baton = None
    if _MONITORING:
        line_hooks(None, foreign=False)  # hooks that count nothing
    else:
        sys.settrace(None)


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_control_in_child)


def _not_unwinding(record: logging.LogRecord) -> bool:
    """Drop a library's log of a thread being unwound (an executor's "Exception in worker")."""
    return not (record.exc_info and isinstance(record.exc_info[1], Abort))


_LOGGERS = ("concurrent.futures", "asyncio")


_watching = False
"""Whether this session's schedule points are on (a lazy session turns them on late)."""


def activate_instrumentation(target: Any) -> None:
    """Turn the schedule points on, if the session has not yet (idempotent).

    A lazy session (an ``async def`` target's) turns them on when its event loop's thread
    first starts a thread, so a run that never does pays nothing for them. On 3.11 the
    tracer is per thread: ``tracing_on`` and ``trace_running_frames`` do that part.
    """
    global _watching
    if _watching or not _MONITORING or _tool is None:
        return
    _watching = True
    mon = _MON
    mon.set_events(_tool, mon.events.PY_START)
    # PY_START was DISABLEd for every code object the last session saw; see them anew.
    mon.restart_events()
    _instrument_eagerly(target)


def trace_running_frames(frame: types.FrameType | None) -> None:
    """3.11: trace the code under test already running in this thread from its next line.

    ``sys.settrace`` reaches only frames entered (or resumed) after it; the frames on the
    stack when a loop's thread comes under control need their local tracer set by hand.
    """
    if _MONITORING:
        return
    while frame is not None:
        code = frame.f_code
        entry = _tracer_of.get(id(code))
        if entry is None or entry[0] is not code:
            entry = _tracer_for(code)
        if entry[1] is not None:
            frame.f_trace = entry[1]
        frame = frame.f_back


@contextlib.contextmanager
def controlled_exploration(
    instrument: tuple[str, ...] = (), target: Any = None, *, lazy: bool = False
) -> Iterator[None]:
    """Install the patched primitives and the schedule-point instrumentation.

    With ``lazy`` the schedule points stay off until :func:`activate_instrumentation`.
    """
    global _tool, _watching, _careful_lines
    from interlace.harness import _pools

    if not _active.acquire(False):
        raise UnsupportedOperationError(
            "a threads exploration is already running in this process (another thread, or "
            "explore() called from inside an explored target); run one at a time"
        )
    saved: list[tuple[Any, str, Any]] = []
    EPOCH_WALL[0] = float(math.ceil(real_time()))
    try:
        _instrument.set_instrumented(instrument)
        _tracer_of.clear()
        if _MONITORING:
            mon = _MON
            for candidate in (3, 4, 2, 1, 0):
                if mon.get_tool(candidate) is None:
                    mon.use_tool_id(candidate, "interlace")
                    _tool = candidate
                    break
            else:
                raise UnsupportedOperationError(
                    "every sys.monitoring tool id is in use (coverage, a profiler and a "
                    "debugger at once?); run the exploration without one of them"
                )
            mon.register_callback(_tool, mon.events.PY_START, _mon_start)
            _careful_lines = False
            line_hooks(None, foreign=False)
            if not lazy:
                activate_instrumentation(target)
        for name in _LOGGERS:
            logging.getLogger(name).addFilter(_not_unwinding)
        for owner, attr, replacement in (*_PATCHES, *_pools.PATCHES):
            saved.append((owner, attr, getattr(owner, attr)))
            setattr(owner, attr, replacement)
        saved.extend(_patch_user_globals())
        yield
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)
        for name in _LOGGERS:
            logging.getLogger(name).removeFilter(_not_unwinding)
        if _MONITORING and _tool is not None:
            mon = _MON
            mon.set_events(_tool, 0)
            for code in _instrumented.values():
                mon.set_local_events(_tool, code, 0)
            _instrumented.clear()
            _plan_of.clear()
            for event in (mon.events.PY_START, mon.events.LINE, mon.events.INSTRUCTION):
                mon.register_callback(_tool, event, None)
            mon.free_tool_id(_tool)
            _tool = None
        _watching = False
        _active.release()


_GLOBAL_ORIGINALS = {
    id(_real_sleep): (_real_sleep, _sleep),
    id(real_monotonic): (real_monotonic, _virtual_clock.monotonic),
    id(real_time): (real_time, _virtual_clock.wall),
    # ``from time import localtime`` and the calendar's other functions.
    **{
        id(real): (real, virtual)
        for owner, name, virtual in _virtual_clock.CALENDAR
        if owner is time
        for real in (getattr(time, name),)
    },
}
if _affinity.real_getaffinity is not None:  # ``from os import sched_getaffinity``
    _GLOBAL_ORIGINALS[id(_affinity.real_getaffinity)] = (
        _affinity.real_getaffinity,
        _affinity.sched_getaffinity,
    )


# What the program calls in place of the stock functions: an exception they raise is the
# program's, as the stock function's would be (``_fault``).
_fault.stand_in(replacement for _, _, replacement in _PATCHES)
_fault.stand_in(virtual for _, virtual in _GLOBAL_ORIGINALS.values())


def _patch_user_globals() -> list[tuple[Any, str, Any]]:
    """``from time import sleep`` in code under test: point those names at the controlled ones."""
    patched: list[tuple[Any, str, Any]] = []
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str) or not _instrument.is_under_test(filename):
            continue
        namespace = vars(module)
        for name, value in list(namespace.items()):
            pair = _GLOBAL_ORIGINALS.get(id(value))
            if pair is not None and pair[0] is value:
                patched.append((module, name, value))
                namespace[name] = pair[1]
    return patched


# -- the backend ----------------------------------------------------------------------------------


class ThreadsBackend:
    """Runs a zero-argument function once per schedule with its threads under control."""

    def __init__(
        self,
        target: Callable[[], Any],
        settings: Settings,
        *,
        stall_timeout: float = STALL_SECONDS,
    ) -> None:
        self.target = target
        self.settings = settings
        self.stall_timeout = stall_timeout

    def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
        global baton
        from interlace.harness import _pools

        _interrupt.check()
        seed_run_random()
        ctl = Controller(chooser, self.settings, record, stall_timeout=self.stall_timeout)
        ctl.target = str(getattr(self.target, "__qualname__", None) or repr(self.target))
        if chooser.wants_where:
            chooser.where = ctl.where
        main = ctl.add("MainThread", None, False)
        main.ident = _get_ident()
        line_hooks(ctl, foreign=len(sys._current_frames()) > 1)
        ctl.current = main
        end_names = _runtime.run_thread_names()
        end_hashes = _runtime.run_ordered_hashes()
        previous_trace = sys.gettrace()
        interrupted: BaseException | None = None
        thread_local.thread = main
        profile = probe_on(main)
        pinned = _affinity.pin()
        try:
            tracing_on(ctl)
            try:
                returned = self.target()
                if inspect.isawaitable(returned):
                    ctl.error = _returned_awaitable(ctl.target, returned)
                    ctl._abort()
            except Abort:
                pass
            except BaseException as exc:
                if is_passthrough(exc):
                    interrupted = exc
                    ctl._abort()
                else:
                    ctl.fail(
                        "exception", exc.with_traceback(_user_traceback(exc.__traceback__)), ""
                    )
            finally:
                tracing_off()
                probe_off(main, profile)
            if not ctl.aborting:
                with contextlib.suppress(Abort):
                    ctl.thread_ended(main, None)
            main.status = DONE
            thread_local.thread = None
            try:
                self._wait(ctl)
            except BaseException as exc:  # Ctrl-C while the other threads run
                interrupted = interrupted or exc
                ctl._abort()
        finally:
            thread_local.thread = None
            thread_local.unrestored = ()
            unwind(ctl)
            baton = None  # the report still reads ctl.current
            line_hooks(None, foreign=False)
            end_names()
            end_hashes()
            sys.settrace(previous_trace)
            _affinity.unpin(pinned)
            _pools.end_run()
        if interrupted is not None:
            raise interrupted
        if ctl.passthrough is not None:
            raise ctl.passthrough
        if ctl.error is not None:
            raise ctl.error
        kind: Any = None
        exception: BaseException | None = None
        detail = ""
        if ctl.failure is not None:
            kind, exception, detail = ctl.failure
            refused = refusal(exception) or _fault.engine_fault(exception)
            if refused is not None:
                raise refused
            if record and ctl.failed_in is not None and kind == "exception":
                ctl.close_segment(ctl.failed_in, raised_at(exception))
            if ctl.overtime_note is not None and kind != "hang":
                kind, detail = "hang", ctl.overtime_detail(kind, exception)
                exception = None
        return RunResult(
            kind=kind,
            exception=exception,
            detail=detail,
            steps=ctl.step,
            decisions=tuple(ctl.decisions),
            anchors=tuple(ctl.anchors),
            cut=ctl.cut,
            trace=tuple(ctl.records),
            divergence=getattr(chooser, "divergence", None),
            opaque=ctl.stock_loop_tasks or ctl.opaque,
            free_threaded=tuple(ctl.free_threaded),
            gil_points=tuple(ctl.gil_points),
            uninstrumented=tuple(sorted(ctl.uninstrumented)),
        )

    def _wait(self, ctl: Controller) -> None:
        wait_for_end(ctl)


MSG_RETURNED_AWAITABLE = (
    "the target {name} is not an async def function, but it returned {what}: interlace ran "
    "it as a plain function (its threads under control), so {result} never ran. Pass an "
    "async def function instead (e.g. 'async def scenario(): await {call}'), so that every "
    "schedule runs it on interlace's controlled event loop"
)


_fault.program_calls(ThreadsBackend.run, "returned = self.target()")


def _returned_awaitable(name: str, returned: object) -> Exception:
    from interlace.errors import InvalidTargetError

    if inspect.iscoroutine(returned):
        returned.close()  # no "coroutine was never awaited" warning on top of the error
        what = f"a coroutine ({returned.__qualname__})"
        result = "the coroutine"
    else:
        what = f"an awaitable ({type(returned).__name__})"
        result = "what it stands for"
    call = f"{name}()" if name.isidentifier() else "..."
    return InvalidTargetError(
        MSG_RETURNED_AWAITABLE.format(name=name, what=what, result=result, call=call)
    )


def wait_for_end(ctl: Controller) -> None:
    """In the thread that ended the target: wait until every other thread ended or waits
    for good (or the run failed); report a thread that stalls outside the schedule."""
    waited = 0.0
    last = ctl.step
    while not ctl.aborting:
        if ctl.done.acquire(timeout=_POLL_SECONDS):
            return
        _interrupt.check()
        waited = waited + _POLL_SECONDS if ctl.step == last else 0.0
        last = ctl.step
        if waited >= ctl.check_after:
            ctl._check_stalled(ctl.threads[0], waited)


def unwind(ctl: Controller) -> None:
    """End every thread still parked, one at a time, and join them: nothing leaks."""
    ctl.aborting = True
    ctl._refresh()
    # A thread stuck outside the schedule waits for one that is parked: that one first.
    stuck = ctl.stuck
    for t in sorted(ctl.threads[1:], key=lambda u: u is stuck):
        thread = t.thread
        if t.status != DONE and t.park.locked():
            ctl.current = t
            t.park.release()
        if thread is not None and _has_started(thread):
            _orig_join(thread, _UNWIND_SECONDS)
    _kernel.unwound(
        t.thread.native_id
        for t in ctl.threads[1:]
        if t.thread is not None and t.thread.native_id is not None and not _orig_is_alive(t.thread)
    )
    ctl.release_unwound()


def _has_started(thread: threading.Thread) -> bool:
    """Whether ``thread`` can be joined. A Ctrl-C that lands in ``Thread.start``'s handshake
    (it waits for the new thread to say it started) leaves a thread that may say so a
    moment later, or that was never created; joining it before raises RuntimeError, which
    would hide the interrupt."""
    started: threading.Event = thread._started  # type: ignore[attr-defined]
    return started.is_set() or started.wait(_START_SECONDS)


_START_SECONDS = 1.0


def raised_at(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        if _instrument.is_under_test(tb.tb_frame.f_code.co_filename):
            where = f"{_short(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{where} raised {type(exc).__name__}".strip()


def _user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    first = tb
    while first is not None and not _instrument.is_under_test(first.tb_frame.f_code.co_filename):
        first = first.tb_next
    return first if first is not None else tb
