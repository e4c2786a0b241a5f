"""The controlled asyncio event loop: the stdlib loop with a virtual clock and a chooser.

``ControlledEventLoop`` derives from ``asyncio.BaseEventLoop`` and replaces only the scheduling
core (``_run_once``), the clock and the few entry points that would bring nondeterminism in
(threads calling back, executors, real I/O). Tasks, futures, locks, queues, timeouts, task
groups and anyio's asyncio backend run unmodified on top of it.

The model (documented for users in docs/harness.md):

* Stock order is option 0 everywhere: the ready queue runs FIFO in iterations, exactly as
  ``BaseEventLoop._run_once`` does, and timers become due when the clock reaches them.
* Virtual time: the clock stands still while anything is ready, and jumps to the next timer
  when nothing is. Busy work takes time too: after ``time_slice`` steps without the clock
  moving, the next pending timer fires (so a spin-wait on a timer terminates, as it does on a
  real clock).
* Await latency: a task resuming from an await may be postponed behind entries that became
  ready after it (as if the event that woke it had arrived later), or past the next timer.
  First steps of new tasks and plain callbacks are never postponed: their order is fixed by
  the program, not by timing.
* Timer jitter: of the timers due within ``jitter`` seconds of the next one, a timer created
  *earlier* may fire before one created later with an earlier deadline (the later one's
  deadline drifts by the real time that passed between the two calls).
* Fairness: no entry is postponed more than ``fairness`` times in a row, so every reported
  hang is a hang under a fair scheduler, never a correct spin-wait.

Invariant: one loop instance runs one schedule; all decisions it takes are in ``decisions``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import heapq
import threading
from asyncio import events
from collections.abc import Callable, Sequence
from typing import Any, overload

from interlace._core.schedule import READY, TIMER, Decision, Settings
from interlace._core.strategy import NEVER, Chooser
from interlace.errors import UnsupportedOperationError

__all__ = ("Blocked", "ControlledEventLoop", "ControlledTask", "Diverged", "OverBudget")


class _LoopSignal(Exception):
    """Raised out of ``_run_once`` to end a run; never reaches user code."""


class Blocked(_LoopSignal):
    """Nothing is ready, no timer is pending and nothing else can wake a task: a deadlock."""


class OverBudget(_LoopSignal):
    """The step or virtual-time budget ran out: a hang."""


class Diverged(_LoopSignal):
    """A strict replay asked for a decision the run does not offer."""


class ControlledTask(asyncio.Task):  # type: ignore[type-arg]
    """A ``Task`` whose hash is its creation number in the run.

    ``TaskGroup``, ``asyncio.wait`` and anyio keep tasks in sets; with the default
    address-based hash their iteration order (and so the order of cancellations and wakeups)
    would differ from run to run.
    """

    _il_id: int

    def __init__(
        self,
        coro: Any,
        *,
        loop: asyncio.AbstractEventLoop,
        name: str,
        context: contextvars.Context | None,
        il_id: int,
    ) -> None:
        self._il_id = il_id  # before super().__init__: 3.12+ registers (hashes) the task there
        super().__init__(coro, loop=loop, name=name, context=context)

    def __hash__(self) -> int:
        return self._il_id


class ControlledFuture(asyncio.Future):  # type: ignore[type-arg]
    """A ``Future`` with a per-run deterministic hash, for the same reason as tasks."""

    _il_id: int

    def __init__(self, *, loop: asyncio.AbstractEventLoop, il_id: int) -> None:
        self._il_id = il_id
        super().__init__(loop=loop)

    def __hash__(self) -> int:
        return self._il_id


# Why a handle became ready decides whether real timing could have made it later.
FIRST = 0  # a new task's first step: its place is fixed by create_task's order
EVENT = 1  # queued by the program (a future set, a callback): queued at once on any loop
TIMED = 2  # queued while a timer ran: may lag by the jitter window, never more
YIELD = 3  # a task's bare yield (``await asyncio.sleep(0)``, the usual stand-in for I/O)
IO = 4  # an executor job or a real thread finished: any latency is possible

_POSTPONABLE = (TIMED, YIELD, IO)
"""Causes whose entry may run after entries queued later at the same virtual instant."""
_PARKABLE = (IO,)
"""Causes whose entry may also wait past a later timer: a job or thread can take any time.
A yield or a timer wakeup may lag past a later timer only by the jitter window (loop lag)."""


class _Step(events.Handle):
    """A ready handle that remembers why it became ready (one of the causes above)."""

    __slots__ = ("_il_actor", "_il_cause")

    _il_cause: int
    _il_actor: int
    _callback: Callable[..., object]
    _cancelled: bool


class _Timer(events.TimerHandle):
    """A timer that remembers its creation order; what it queues while it runs is TIMED."""

    __slots__ = ("_il_seq",)

    _il_seq: int
    _il_cause = EVENT  # a timer's own callback is a plain callback
    _il_actor = 0
    _loop: Any
    _when: float
    _scheduled: bool

    def _run(self) -> None:
        loop = self._loop
        loop._cause = TIMED
        try:
            super()._run()
        finally:
            loop._cause = EVENT


class _Arrival(events.Handle):
    """A callback from another thread; what it queues while it runs is IO."""

    __slots__ = ()

    _il_cause = EVENT
    _il_actor = 0
    _loop: Any

    def _run(self) -> None:
        loop = self._loop
        loop._cause = IO
        try:
            super()._run()
        finally:
            loop._cause = EVENT


_STEP_NAMES = frozenset({"_Task__step", "__step"})  # the pure-Python Task's step method
_TASK_CALLBACKS = frozenset({"task_wakeup", "_Task__wakeup", "__wakeup", "_Task__step", "__step"})

_UNSUPPORTED = {
    "create_connection": "open a network connection",
    "create_server": "start a network server",
    "create_datagram_endpoint": "open a datagram socket",
    "create_unix_connection": "open a Unix socket connection",
    "create_unix_server": "start a Unix socket server",
    "connect_accepted_socket": "wrap a real socket",
    "connect_read_pipe": "read from a real pipe",
    "connect_write_pipe": "write to a real pipe",
    "subprocess_exec": "start a subprocess",
    "subprocess_shell": "start a subprocess",
    "sock_recv": "read from a real socket",
    "sock_recv_into": "read from a real socket",
    "sock_recvfrom": "read from a real socket",
    "sock_recvfrom_into": "read from a real socket",
    "sock_sendall": "write to a real socket",
    "sock_sendto": "write to a real socket",
    "sock_connect": "connect a real socket",
    "sock_accept": "accept on a real socket",
    "sock_sendfile": "send a file over a real socket",
    "sendfile": "send a file over a real transport",
    "start_tls": "start TLS on a real transport",
    "getaddrinfo": "resolve a host name",
    "getnameinfo": "resolve an address",
    "add_reader": "watch a file descriptor",
    "add_writer": "watch a file descriptor",
    "add_signal_handler": "install a signal handler",
}


def _unsupported(name: str, what: str) -> Callable[..., Any]:
    def method(self: ControlledEventLoop, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError(
            f"loop.{name}() was called to {what}: real I/O cannot be scheduled "
            "deterministically, so interlace's controlled event loop does not run it. "
            "Replace it in the code under test with an in-memory fake (an asyncio.Queue or "
            "anyio.create_memory_object_stream pair, or a stub client whose methods "
            "'await asyncio.sleep(0)' where the real one waits on the network), or test this "
            "code path without interlace."
        )

    method.__name__ = name
    return method


def _job_timeout_message(func: Any) -> str:
    return (
        f"the executor job {getattr(func, '__qualname__', func)!r} (run_in_executor/to_thread) "
        "did not finish: until controlled threads land, interlace runs executor jobs as single "
        "opaque steps while the event loop waits, so a job that waits for the loop (for example "
        "through run_coroutine_threadsafe(...).result()) can never finish. Make the job "
        "independent of the loop, or test this path without interlace."
    )


def _actor_of(handle: Any) -> int:
    """The id of the task a ready handle steps (0 for a plain callback), computed once."""
    actor: int = handle._il_actor
    if actor < 0:
        actor = handle._il_actor = _compute_actor(handle)
    return actor


def _compute_actor(handle: Any) -> int:
    callback = handle._callback
    task = getattr(callback, "__self__", None)
    if isinstance(task, ControlledTask) and (
        type(callback).__name__ == "TaskStepMethWrapper"
        or getattr(callback, "__name__", "") in _TASK_CALLBACKS
    ):
        return task._il_id
    return 0


class _Actors(Sequence[int]):
    """The actor ids of a decision's options, computed only for the ones a chooser reads.

    The random walk and the exhaustive search only count options; PCT and replay read ids.
    """

    __slots__ = ("_handles",)

    def __init__(self, handles: list[Any]) -> None:
        self._handles = handles

    def __len__(self) -> int:
        return len(self._handles)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return [_actor_of(h) for h in self._handles[index]]
        return _actor_of(self._handles[index])


class ControlledEventLoop(asyncio.BaseEventLoop):
    """An asyncio event loop whose every scheduling decision is taken by a chooser.

    Args:
        chooser: decides at the schedule points it asks for (see ``Chooser.consult_at``).
        settings: the model parameters (window, fairness, jitter, time slice, budgets).
        job_timeout: wall-clock seconds an executor job may take before it is reported.
    """

    # Set by BaseEventLoop.__init__; private in the stdlib, so typeshed does not declare them.
    _ready: collections.deque[Any]
    _scheduled: list[Any]
    _timer_cancelled_count: int
    _clock_resolution: float
    _stopping: bool
    _closed: bool
    _thread_id: int | None
    _check_closed: Callable[[], None]

    def __init__(self, chooser: Chooser, settings: Settings, *, job_timeout: float = 30.0):
        super().__init__()
        self._chooser = chooser
        self._settings = settings
        self._window = settings.window
        self._fairness = settings.fairness
        self._jitter = settings.jitter_us / 1e6
        self._time_slice = settings.time_slice
        self._max_steps = settings.max_steps
        self._max_time = settings.max_time_us / 1e6
        self._job_timeout = job_timeout
        self._now = 0.0
        self._step = 0
        self._ntodo = 0
        self._slice_at = settings.time_slice
        self._consult_at = 0
        self._refresh_consult()
        self._ids = 0
        self._timer_seq = 0
        self.decisions: list[Decision] = []
        self._postponed: dict[events.Handle, int] = {}
        self._cause = EVENT
        self._creating = False
        self.opaque = False
        """True once code ran outside the schedule (an executor job, a real thread's callback):
        schedules of this run that differ only inside that code were not explored."""
        self._parked: list[events.Handle] = []
        self._advance_requested = False
        self._inbox: collections.deque[events.Handle] = collections.deque()
        self._inbox_lock = threading.Lock()
        self._inbox_event = threading.Event()
        self._job_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._threads_at_start = threading.active_count()
        self.unhandled: list[dict[str, Any]] = []
        self.set_exception_handler(self._collect_exception)
        self.observer: Callable[[events.Handle], None] | None = None
        self.divergence: str | None = None

    # -- identity -------------------------------------------------------------------------

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def create_task(  # type: ignore[override]
        self,
        coro: Any,
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
        **kwargs: Any,
    ) -> asyncio.Task[Any]:
        self._check_closed()
        il_id = self._next_id()
        # Default names ("Task-57") come from a process-wide counter; a per-run one keeps
        # names, and so reports and anything keyed on names, identical across runs.
        self._creating = True
        try:
            task = ControlledTask(
                coro,
                loop=self,
                name=name if name is not None else f"Task-{il_id}",
                context=context,
                il_id=il_id,
            )
        finally:
            self._creating = False
        return task

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> events.Handle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        handle = _Step(callback, args, self, context)
        handle._il_actor = -1
        if self._creating:
            handle._il_cause = FIRST
        elif type(callback).__name__ == "TaskStepMethWrapper" or (
            getattr(callback, "__name__", "") in _STEP_NAMES
        ):
            handle._il_cause = YIELD  # a step queued by a running task: its bare yield
        else:
            handle._il_cause = self._cause
        self._ready.append(handle)
        return handle

    def create_future(self) -> asyncio.Future[Any]:
        return ControlledFuture(loop=self, il_id=self._next_id())

    # -- clock and timers -----------------------------------------------------------------

    def time(self) -> float:
        """The virtual clock: seconds since the run started."""
        return self._now

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> events.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        self._check_closed()
        timer = _Timer(when, callback, args, self, context)
        self._timer_seq += 1
        timer._il_seq = self._timer_seq
        heapq.heappush(self._scheduled, timer)
        timer._scheduled = True
        return timer

    # -- threads and executors ------------------------------------------------------------

    def call_soon_threadsafe(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> events.Handle:
        self._check_closed()
        if self._thread_id is None or threading.get_ident() == self._thread_id:
            return self.call_soon(callback, *args, context=context)
        self.opaque = True
        handle = _Arrival(callback, args, self, context)
        with self._inbox_lock:
            self._inbox.append(handle)
        self._inbox_event.set()
        return handle

    def _write_to_self(self) -> None:
        self._inbox_event.set()

    def _process_events(self, event_list: Any) -> None:
        """No selector: real I/O is refused, so there are never events to process."""

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        """Run ``func`` as one opaque step at its place in the ready queue (a schedule point)."""
        self._check_closed()
        future = self.create_future()
        self.call_soon(self._run_job, future, executor, func, args)
        return future

    def _run_job(
        self,
        future: asyncio.Future[Any],
        executor: Any,
        func: Callable[..., Any],
        args: Sequence[Any],
    ) -> None:
        if future.cancelled():
            return
        self.opaque = True
        if executor is None:
            if self._job_executor is None:
                self._job_executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="interlace-job"
                )
            executor = self._job_executor
        job = executor.submit(func, *args)
        self._cause = IO  # the job's real duration could be anything: its waiter may lag
        try:
            result = job.result(timeout=self._job_timeout)
        except concurrent.futures.TimeoutError:
            future.set_exception(UnsupportedOperationError(_job_timeout_message(func)))
        except BaseException as exc:  # the job's own exception goes to its awaiter
            future.set_exception(exc)
        else:
            future.set_result(result)
        finally:
            self._cause = EVENT

    def set_default_executor(self, executor: Any) -> None:
        self._job_executor = executor

    async def shutdown_default_executor(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if self._job_executor is not None:
            self._job_executor.shutdown(wait=False)
            self._job_executor = None

    # -- the scheduler --------------------------------------------------------------------

    def _refresh_consult(self) -> None:
        # One integer comparison per step decides whether the slow path runs: it folds the
        # chooser's next schedule point, the step budget and the time slice together.
        self._consult_at = min(self._chooser.consult_at - 1, self._max_steps, self._slice_at)

    def _run_once(self) -> None:
        ready = self._ready
        observer = self.observer
        while not self._stopping:
            if self._ntodo <= 0:
                self._new_iteration()
                continue
            self._ntodo -= 1
            if self._step >= self._consult_at:
                handle = self._consult()
                if handle is None:
                    continue
            else:
                handle = ready.popleft()
            if handle._cancelled:
                continue
            self._step += 1
            if observer is None:
                handle._run()
            else:
                observer(handle)

    def _consult(self) -> events.Handle | None:
        step = self._step
        if step >= self._max_steps:
            raise OverBudget(f"the run took more than {self._max_steps} steps")
        if step >= self._slice_at:
            self._slice_at = step + self._time_slice
            if self._pending_timer() is not None:
                # Busy work takes time: fire the next timer now, behind what is ready.
                self._fire_due(advance=True)
        ready = self._ready
        chooser = self._chooser
        handle: events.Handle | None
        if step + 1 >= chooser.consult_at:
            while ready and ready[0]._cancelled:
                ready.popleft()
            if not ready:
                self._refresh_consult()
                self._ntodo = 0
                return None
            if len(ready) == 1 and not self._scheduled:
                handle = ready.popleft()
                chooser.consult_at = max(chooser.consult_at, step + 2)
                self._refresh_consult()
                return handle
            handles, can_advance = self._options()
            actors = _Actors(handles)
            if len(handles) == 1 and not can_advance:
                choice = 0
                chooser.consult_at = max(chooser.consult_at, step + 2)
            else:
                choice = chooser.choose(step + 1, actors, can_advance)
            divergence = getattr(chooser, "divergence", None)
            if divergence is not None:
                self.divergence = divergence
                raise Diverged(divergence)
            if choice == 0:
                handle = ready.popleft()
            elif choice < len(handles):
                handle = handles[choice]
                ready.remove(handle)
                postponed = self._postponed
                for earlier in handles[:choice]:
                    postponed[earlier] = postponed.get(earlier, 0) + 1
                self.decisions.append(Decision(step + 1, READY, choice, actors[choice]))
            else:
                # Postpone everything that is ready until the next timer has fired and the
                # work it wakes has run: the ready tasks' awaits took that long.
                postponed = self._postponed
                for earlier in ready:
                    postponed[earlier] = postponed.get(earlier, 0) + 1
                self._parked.extend(ready)
                ready.clear()
                self._advance_requested = True
                self._ntodo = 0
                self.decisions.append(Decision(step + 1, READY, choice, 0))
                handle = None
        else:
            handle = ready.popleft()
        self._refresh_consult()
        return handle

    def _options(self) -> tuple[list[Any], bool]:
        """The ready entries a decision may pick, in stock order, and whether it may advance.

        An entry is an option if every entry before it may be postponed: its cause is a
        bare yield, a finished job or thread, or a timer (see the causes above), and it has
        been postponed fewer than ``fairness`` times. The scan stops at the first entry that
        may not, and after ``window`` entries. Advancing the clock postpones every ready
        entry past the next timer, so it is offered only when every entry's wait could have
        lasted that long: finished jobs and threads always (their latency is real), yields
        and timer wakeups only when the timer is within the jitter window (loop lag).
        """
        handles: list[Any] = []
        append = handles.append
        remaining = self._window
        fairness = self._fairness
        postponed = self._postponed
        parkable = True
        movable = False
        for handle in self._ready:
            if handle._cancelled:
                continue
            append(handle)
            cause = handle._il_cause
            movable = cause >= TIMED and not (postponed and postponed.get(handle, 0) >= fairness)
            if cause != IO:
                parkable = False
            remaining -= 1
            if not movable or not remaining:
                break
        can_advance = False
        if movable and len(handles) == len(self._ready):
            timer = self._pending_timer()
            if timer is not None:
                can_advance = parkable or timer._when - self._now <= self._jitter
        return handles, can_advance

    def _pending_timer(self) -> _Timer | None:
        scheduled = self._scheduled
        while scheduled and scheduled[0]._cancelled:
            self._timer_cancelled_count -= 1
            heapq.heappop(scheduled)._scheduled = False
        return scheduled[0] if scheduled else None

    def _new_iteration(self) -> None:
        """Start an iteration of the stock loop: take in callbacks, timers, parked tasks."""
        ready = self._ready
        if self._inbox:
            with self._inbox_lock:
                ready.extend(self._inbox)
                self._inbox.clear()
        if self._parked and not self._advance_requested:
            # Parked tasks come back one iteration after the timer fired: behind the work the
            # timer woke, and never later (a callback that keeps rescheduling itself, like
            # anyio's cancellation delivery, must not starve them).
            ready.extend(self._parked)
            self._parked.clear()
        if ready:
            self._fire_due(advance=False)
        elif self._pending_timer() is not None:
            self._advance_requested = False
            self._fire_due(advance=True)
        elif self._parked:
            self._advance_requested = False
            ready.extend(self._parked)
            self._parked.clear()
        elif not self._wait_for_threads():
            raise Blocked
        self._ntodo = len(ready)

    def _wait_for_threads(self) -> bool:
        """Nothing can run: wait for a real thread of the target to call back, if one exists."""
        if threading.active_count() <= self._threads_at_start + (
            1 if self._job_executor is not None else 0
        ):
            return False
        self._inbox_event.wait(timeout=self._job_timeout)
        self._inbox_event.clear()
        with self._inbox_lock:
            if not self._inbox:
                return False
            self._ready.extend(self._inbox)
            self._inbox.clear()
        return True

    def _fire_due(self, *, advance: bool) -> None:
        """Move due timers to the ready queue; with ``advance``, first move the clock."""
        scheduled = self._scheduled
        ready = self._ready
        first = self._pending_timer()
        if first is None:
            return
        if advance:
            when = first._when
            if self._jitter > 0.0 and len(scheduled) > 1:
                when = self._jitter_pick(first)
            if when > self._now:
                if when > self._max_time:
                    raise OverBudget(
                        f"virtual time passed the budget of {self._max_time:g} seconds"
                    )
                self._now = when
            self._slice_at = self._step + self._time_slice
            self._refresh_consult()
        end = self._now + self._clock_resolution
        while scheduled:
            handle = scheduled[0]
            if handle._when >= end:
                break
            handle = heapq.heappop(scheduled)
            handle._scheduled = False
            ready.append(handle)

    def _jitter_pick(self, first: _Timer) -> float:
        """Let the chooser pick which timer due within the jitter window fires first."""
        scheduled = self._scheduled
        limit = first._when + self._jitter
        window: list[_Timer] = []
        while scheduled and len(window) < self._window and scheduled[0]._when <= limit:
            timer = heapq.heappop(scheduled)
            if timer._cancelled:
                self._timer_cancelled_count -= 1
                timer._scheduled = False
                continue
            window.append(timer)
        # Option j > 0 is realizable only if timer j was created before every timer with an
        # earlier deadline that it overtakes (their deadlines may drift later, never earlier).
        options = [0]
        earliest_seq = window[0]._il_seq if window else 0
        for index in range(1, len(window)):
            if window[index]._il_seq < earliest_seq:
                options.append(index)
            earliest_seq = min(earliest_seq, window[index]._il_seq)
        pick = 0
        if len(options) > 1:
            step = self._step + 1
            choice = self._chooser.choose_timer(step, len(options))
            divergence = getattr(self._chooser, "divergence", None)
            if divergence is not None:
                for timer in window:
                    heapq.heappush(scheduled, timer)
                self.divergence = divergence
                raise Diverged(divergence)
            if choice:
                pick = options[choice]
                self.decisions.append(Decision(step, TIMER, choice, 0))
        chosen = window[pick] if window else None
        for index, timer in enumerate(window):
            if index != pick:
                heapq.heappush(scheduled, timer)
        if chosen is None:
            return first._when
        if pick == 0:
            heapq.heappush(scheduled, chosen)
            return chosen._when
        chosen._scheduled = False
        self._ready.append(chosen)
        return chosen._when

    # -- errors and refusals --------------------------------------------------------------

    def _collect_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.unhandled.append(context)

    def remove_reader(self, fd: Any) -> bool:
        return False

    def remove_writer(self, fd: Any) -> bool:
        return False

    def remove_signal_handler(self, sig: int) -> bool:
        return False

    def close(self) -> None:
        if self._job_executor is not None:
            self._job_executor.shutdown(wait=False)
            self._job_executor = None
        super().close()


for _name, _what in _UNSUPPORTED.items():
    setattr(ControlledEventLoop, _name, _unsupported(_name, _what))
del _name, _what

NEVER_CONSULT = NEVER
