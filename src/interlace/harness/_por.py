"""Partial-order reduction for the controlled loop: record a run, predict its reorderings.

A recorded run keeps, for every ready entry it had, why it became ready and whom it steps,
and for every step: the virtual time it ran at, the entries it queued (in order), the
timers it created and the entries it cancelled (in order), whether it stopped the loop, and
its footprint (``_footprint``). The loop's own bookkeeping is part of the footprint: every
step of a task writes the task's own state (and the task as a future when it finishes), a
step after which the task waits on a future writes that future, creating tasks or futures
writes the id counter, creating or cancelling timers writes the timer heap, and stopping
the loop touches everything.

To predict another schedule, :meth:`AsyncioRunModel.predict` runs a fresh controlled loop
under that schedule's chooser, with a *phantom* in place of every entry: running a phantom
replays what its step did (queues the same phantoms, creates and cancels the same timers,
stops the loop) instead of running user code. The loop's scheduling code is the real one,
so the chooser sees exactly the schedule points the target would offer, as long as every
step would do what it did in the recorded run. That holds by induction when every step
runs after all the steps it depends on (``_core.footprint.predecessors``) and at the same
virtual time; the prediction gives up at the first step for which either fails, or that
never ran in the recorded run. A completed prediction has run every recorded step, so the
predicted run ends as the recorded one did: it passes.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import types
from dataclasses import dataclass
from typing import Any

from interlace._core.footprint import Footprint, predecessors
from interlace._core.schedule import Settings
from interlace._core.strategy import Chooser
from interlace.harness._footprint import StepAccess, Tracer, classify_call, python_call
from interlace.harness._loop import (
    TIMED,
    TIMER_CREATED,
    Blocked,
    ControlledEventLoop,
    Diverged,
    LoopStep,
    LoopTimer,
    OverBudget,
    actor_of,
    grains,
)

__all__ = ("MODEL_MAX_STEPS", "AsyncioRunModel", "ModelRecorder")

MODEL_MAX_STEPS = 2_000
"""Runs longer than this are not recorded: their schedules are run, not predicted."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """A ready entry of the recorded run, as it was when it became ready."""

    cause: int
    budget: int
    actor: int
    when: float | None  # a timer's deadline; None for a ready handle


@dataclass(frozen=True, slots=True)
class _Effects:
    """What running one entry did."""

    now: float
    queued: tuple[int, ...]
    log: tuple[tuple[int, int], ...]  # (TIMER_CREATED or ENTRY_CANCELLED, entry), in order
    stops: bool


class _Unpredictable(Exception):
    """The predicted run leaves the recorded one (a dependent step out of order, ...)."""


class ModelRecorder:
    """A loop observer that runs every step while recording it (see the module docstring).

    Invariant: every entry that can reach the ready queue was registered when it was
    queued or created, so a step whose entry is unknown means the run cannot be modelled.
    """

    def __init__(self, loop: ControlledEventLoop, tracer: Tracer) -> None:
        self.loop = loop
        self.tracer = tracer
        self.failed = False
        self._index: dict[int, int] = {}
        self._handles: list[Any] = []  # alive for the run, so ids are not reused
        self._entries: list[_Entry] = []
        self._effects: dict[int, _Effects] = {}
        self._order: list[int] = []
        self._footprints: list[Footprint | None] = []
        self._keep: list[object] = []
        self._initial: list[int] = []

    def begin(self) -> None:
        """Register what is ready before the first step (the main task's first step)."""
        self._initial = [self._register(handle) for handle in self.loop._ready]
        self.loop._log = []

    def _register(self, handle: Any) -> int:
        index = len(self._entries)
        self._index[id(handle)] = index
        self._handles.append(handle)
        when = handle._when if isinstance(handle, LoopTimer) else None
        actor = 0 if when is not None else actor_of(handle)
        self._entries.append(_Entry(handle._il_cause, handle._il_budget, actor, when))
        return index

    def __call__(self, handle: Any) -> None:
        loop = self.loop
        index = self._index.get(id(handle))
        if self.failed or index is None or len(self._order) >= MODEL_MAX_STEPS:
            if not self.failed:
                self.failed = True
                self.tracer.stop()  # the rest of the run costs what an unrecorded run does
            handle._run()
            return
        ready = loop._ready
        before = len(ready)
        ids = loop._ids
        now = loop._now
        log = loop._log
        assert log is not None
        log.clear()
        access = StepAccess()
        self.tracer.current = access
        try:
            handle._run()
        finally:
            self.tracer.current = None
        queued = tuple(self._register(h) for h in itertools.islice(ready, before, None))
        ops = []
        timers = False
        for op, target in log:
            if op == TIMER_CREATED:
                ops.append((op, self._register(target)))
                timers = True
                continue
            found = self._index.get(id(target))
            if found is None:
                self.failed = True
                self.tracer.stop()
                return
            timers = timers or isinstance(target, LoopTimer)
            ops.append((op, found))
        stops = loop._stopping
        self._effects[index] = _Effects(now, queued, tuple(ops), stops)
        self._order.append(index)
        self._footprints.append(
            None if stops else self._footprint(handle, access, loop._ids != ids, timers)
        )
        self._keep.append(access.keep)

    def _footprint(
        self, handle: Any, access: StepAccess, ids: bool, timers: bool
    ) -> Footprint | None:
        callback = handle._callback
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, asyncio.Task) and actor_of(handle) > 0:
            # A task's step or wakeup: it writes the task's own state, and, if the task is
            # done after it, the task as a future (what awaiting it reads); after it, the
            # task may wait on a future (it added a callback to it); a wakeup reads the
            # future that woke it.
            access.keep.append(owner)
            access.writes.add(("task", id(owner)))
            if owner.done():
                access.write_future(owner)
            waiter = getattr(owner, "_fut_waiter", None)
            if waiter is not None:
                access.write_future(waiter)
            if handle._args and isinstance(handle._args[0], asyncio.Future):
                access.read_future(handle._args[0])
        elif callback is not None and not _is_python(callback):
            classify_call(access, callback, handle._args[0] if handle._args else None)
        if access.everything:
            return None
        if ids:
            access.writes.add(("loop", "ids"))
        if timers:
            access.writes.add(("loop", "timers"))
        return Footprint(frozenset(access.reads), frozenset(access.writes))

    def model(self, settings: Settings) -> AsyncioRunModel | None:
        """The model of the finished run, or None if it could not be recorded whole."""
        self.loop._log = None
        if self.failed or not self._order or not self._effects[self._order[-1]].stops:
            return None
        self._keep.clear()
        self._handles.clear()
        return AsyncioRunModel(
            settings,
            tuple(self._entries),
            self._effects,
            tuple(self._initial),
            tuple(self._order),
            tuple(self._footprints),
            address_order=self.loop.address_order,
        )


def _is_python(callback: Any) -> bool:
    if isinstance(callback, (types.FunctionType, types.MethodType)):
        return True
    return python_call(type(callback))


class AsyncioRunModel:
    """A recorded passing run of the controlled loop (implements ``_core``'s ``RunModel``)."""

    def __init__(
        self,
        settings: Settings,
        entries: tuple[_Entry, ...],
        effects: dict[int, _Effects],
        initial: tuple[int, ...],
        order: tuple[int, ...],
        footprints: tuple[Footprint | None, ...],
        *,
        address_order: int = 0,
    ) -> None:
        self.settings = settings
        self.address_order = address_order
        """The run's address order: a schedule under another one may iterate sets of tasks
        in another order, which the recorded steps do not show, so it is never predicted."""
        self.entries = entries
        self.effects = effects
        self.initial = initial
        self.steps = len(effects)
        self._order = order
        self._footprints = footprints
        self._before: dict[int, tuple[int, ...]] | None = None

    @property
    def before(self) -> dict[int, tuple[int, ...]]:
        """Entry -> the entries whose steps must run before its step (computed once)."""
        if self._before is None:
            order = self._order
            self._before = {
                order[position]: tuple(order[p] for p in earlier)
                for position, earlier in enumerate(predecessors(self._footprints))
            }
        return self._before

    def predict(self, chooser: Chooser) -> bool:
        loop = ControlledEventLoop(chooser, self.settings)
        replay = _Replay(self, loop)
        try:
            if loop.address_order != self.address_order:
                return False
            return replay.run()
        except (_Unpredictable, Blocked, OverBudget, Diverged):
            return False
        finally:
            loop._ready.clear()
            loop._scheduled.clear()
            loop._parked.clear()
            loop.close()


_CONTEXT = contextvars.Context()


def _nothing() -> None:
    """The callback of a phantom (never called: a phantom's ``_run`` replays instead)."""


class _PhantomStep(LoopStep):
    __slots__ = ("_il_index", "_il_replay")

    _il_index: int
    _il_replay: _Replay

    def _run(self) -> None:
        self._il_replay.execute(self._il_index)


class _PhantomTimer(LoopTimer):
    __slots__ = ("_il_index", "_il_replay")

    _il_index: int
    _il_replay: _Replay

    def _run(self) -> None:
        self._il_replay.execute(self._il_index)


class _Replay:
    """One prediction: phantoms on a fresh loop, replaying the recorded steps' effects."""

    def __init__(self, model: AsyncioRunModel, loop: ControlledEventLoop) -> None:
        self.model = model
        self.loop = loop
        self.phantoms: list[Any] = [None] * len(model.entries)
        self.executed = bytearray(len(model.entries))
        self.count = 0

    def run(self) -> bool:
        ready = self.loop._ready
        for index in self.model.initial:
            ready.append(self._queue(index))
        self.loop._run_once()
        return self.count == self.model.steps

    def _queue(self, index: int) -> _PhantomStep:
        entry = self.model.entries[index]
        if entry.when is not None:
            raise _Unpredictable(index)
        phantom = _PhantomStep(_nothing, (), self.loop, _CONTEXT)
        phantom._il_cause = entry.cause
        phantom._il_budget = entry.budget
        phantom._il_actor = entry.actor
        phantom._il_rank = None
        phantom._il_timer = None
        phantom._il_index = index
        phantom._il_replay = self
        self.phantoms[index] = phantom
        return phantom

    def _create_timer(self, index: int) -> None:
        loop = self.loop
        entry = self.model.entries[index]
        assert entry.when is not None
        timer = _PhantomTimer(entry.when, _nothing, (), loop, _CONTEXT)
        loop._timer_seq += 1
        timer._il_seq = loop._timer_seq
        timer._il_at = grains(entry.when)
        timer._il_budget = 0
        timer._il_rank = None
        timer._il_index = index
        timer._il_replay = self
        heapq.heappush(loop._scheduled, timer)
        timer._scheduled = True
        self.phantoms[index] = timer

    def execute(self, index: int) -> None:
        effects = self.model.effects.get(index)
        if effects is None or effects.now != self.loop._now:
            raise _Unpredictable(index)
        executed = self.executed
        for earlier in self.model.before[index]:
            if not executed[earlier]:
                raise _Unpredictable(index)
        executed[index] = 1
        self.count += 1
        ready = self.loop._ready
        timer = self.phantoms[index]
        if not isinstance(timer, LoopTimer):
            timer = None
        for queued in effects.queued:
            phantom = self._queue(queued)
            if timer is not None and phantom._il_cause == TIMED:
                # What the timer's callback queued keeps the timers' order, as in the run.
                self.loop._timer_wakeup(phantom, timer)
            ready.append(phantom)
        for op, target in effects.log:
            if op == TIMER_CREATED:
                self._create_timer(target)
            else:
                phantom = self.phantoms[target]
                if phantom is None:
                    raise _Unpredictable(index)
                phantom.cancel()
        if effects.stops:
            self.loop.stop()
