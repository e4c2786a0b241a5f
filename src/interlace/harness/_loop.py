"""The controlled asyncio event loop: the stdlib loop with a virtual clock and a chooser.

``ControlledEventLoop`` derives from ``asyncio.BaseEventLoop`` and replaces only the scheduling
core (``_run_once``), the clock and the few entry points that would bring nondeterminism in
(threads calling back, executors, real I/O). Tasks, futures, locks, queues, timeouts, task
groups and anyio's asyncio backend run unmodified on top of it.

The model (documented for users in docs/harness.md):

* Stock order is option 0 everywhere: the ready queue runs FIFO in iterations, exactly as
  ``BaseEventLoop._run_once`` does, and timers become due when the clock reaches them, in
  the order of their deadlines at the clock's grain, then of their creation (``LoopTimer``):
  on a real clock a timer created later with the same delay has the later deadline.
* Virtual time: the clock starts at ``EPOCH`` (as ``time.monotonic()``, the stock loop's
  clock, never starts at 0), stands still while anything is ready, and jumps to the next
  timer when nothing is, by at least a ``GRAIN`` (waking up takes time, so a sleep shorter
  than the float resolution of the clock cannot fire again and again at one instant).
  Busy work takes time too, and no more than the fastest machine would take: every
  ``time_slice`` steps without the clock moving move it by ``time_slice`` grains (a
  microsecond a step, as a time slice of points does in controlled threads), so a
  spin-wait on a near timer ends, and a far timeout never fires because tasks were busy.
  A spin-wait on a timer farther than the step budget reaches runs on in *overtime*
  (``_out_of_steps``): it passes if it then ends well, and is reported as the hang it may be
  if it does not.
* While the loop runs, ``time.monotonic()``, ``time.time()``, ``perf_counter()`` (and their
  ``_ns`` forms) read this clock, as they do in controlled threads, and ``time.sleep`` in the
  loop's thread (which really blocks it) moves it too (``_runtime.ThreadLocal.loop``).
* Await latency: a task resuming from an await may be postponed behind entries that became
  ready after it (as if the event that woke it had arrived later), or past the next timer.
  First steps of new tasks and plain callbacks are never postponed: their order is fixed by
  the program, not by timing. An entry a timer's callback queued is never postponed behind
  one a later timer's callback queued, unless that timer could have fired first (timer
  jitter): on a stock loop they run in the timers' order (``_timer_wakeup``).
* Timer jitter: of the timers due within ``jitter`` seconds of the next one, a timer created
  *earlier* may fire before one created later with an earlier deadline (the later one's
  deadline drifts by the real time that passed between the two calls).
* Fairness: no entry is postponed more than ``fairness`` times in a row, so every reported
  hang is a hang under a fair scheduler, never a correct spin-wait.

Invariant: one loop instance runs one schedule; all decisions it takes are in ``decisions``.
"""

# One module of about 1,700 lines: ``ControlledEventLoop`` overrides the stdlib loop's private
# scheduling methods, and its timer, ready-queue and clock handling share that one class's
# state. It may call ``_runtime``, ``_instrument``, ``_introspect`` and ``_fault``, never the
# thread backend (docs/architecture.md).

from __future__ import annotations

import _weakrefset
import asyncio
import collections
import concurrent.futures
import contextvars
import heapq
import itertools
import math
import sys
import threading
import types
import weakref
from asyncio import events, format_helpers, futures
from collections.abc import Callable, Sequence
from typing import Any, overload

from interlace._core.schedule import ADDRESS, READY, STALL, TIMER, DecisionLog, Settings
from interlace._core.strategy import NEVER, Chooser
from interlace.errors import UnsupportedOperationError
from interlace.harness import _fault, _instrument, _runtime
from interlace.harness._introspect import (
    describe_tasks,
    describe_timer,
    is_library_file,
    short_path,
)

__all__ = ("Blocked", "ControlledEventLoop", "ControlledTask", "Diverged", "OverBudget")


class _LoopSignal(Exception):
    """Raised out of ``_run_once`` to end a run; never reaches user code."""


class Blocked(_LoopSignal):
    """Nothing is ready, no timer is pending and nothing else can wake a task: a deadlock."""


class OverBudget(_LoopSignal):
    """The step or virtual-time budget ran out: a hang."""

    note = ""
    """What the report should add (how far the next timer is, when the steps ran out)."""


class Diverged(_LoopSignal):
    """A strict replay asked for a decision the run does not offer."""


ADDRESS_ORDERS = 64
"""How many orders of object addresses a run may hash its tasks and futures in (the
``ADDRESS`` decision): insertion order, roughly reverse creation order, and pseudo-random
ones."""

_SLOT_BITS = 8
"""Order 0 leaves this many low bits of every hash zero: in a set's table of up to
``2 ** _SLOT_BITS`` slots (sets of up to about 150 objects) every object then starts at the
same slot and is placed at the next free one, so the set iterates in insertion order."""

_WEAKREF_FILES = frozenset({weakref.__file__, _weakrefset.__file__})
"""Where a hash only registers an object (``asyncio.all_tasks``'s weak set): no order the
program sees."""


def address_hash(number: int, order: int) -> int:
    """The hash of the run's ``number``-th object under address order ``order``.

    On a stock interpreter a task's hash comes from its address, so a set of tasks (what
    ``asyncio.wait`` returns, a ``TaskGroup``'s) iterates in an order that differs from
    process to process. Order 0 makes small sets iterate in the order objects were added to
    them (the order freshly allocated objects often get, and what a quiet process gives
    one loop iteration after another); order 1 puts a later-created object first in a small
    set (unless the two numbers differ by a multiple of the table's size); the others mix the
    number pseudo-randomly. Every order is the same in every process, so a token replays.
    """
    if order == 0:
        return number << _SLOT_BITS
    if order == 1:
        return (number << _SLOT_BITS) | (-number & ((1 << _SLOT_BITS) - 1))
    mixed = (number + order * 0x9E3779B97F4A7C15) * 0xBF58476D1CE4E5B9
    return ((mixed ^ (mixed >> 31)) & ((1 << 61) - 1)) | 1


class _AddressHashed:
    """Tasks and futures of the run hash by their number in the run, in its address order.

    Invariant: ``_il_hash`` is fixed when the object is made and never changes.
    """

    __slots__ = ()
    _il_id: int
    _il_hash: int
    _il_seen: bool
    _loop: Any

    def __hash__(self) -> int:
        # The first hash that puts the object where its order shows (a set, not the weak
        # set of all tasks): the run depends on address order from here.
        if not self._il_seen and sys._getframe(1).f_code.co_filename not in _WEAKREF_FILES:
            self._il_seen = True  # type: ignore[misc]  # in the instance __dict__: no slots here
            loop = self._loop
            if isinstance(loop, ControlledEventLoop):
                loop.hashed += 1
        return self._il_hash


class ControlledTask(_AddressHashed, asyncio.Task):  # type: ignore[type-arg]
    """A ``Task`` whose hash is its creation number in the run, in the run's address order.

    ``TaskGroup``, ``asyncio.wait`` and anyio keep tasks in sets; with the default
    address-based hash their iteration order (and so the order of cancellations and wakeups)
    would differ from run to run, and no token could replay it. The order is a decision of
    the run instead (``ADDRESS``).
    """

    def __init__(
        self,
        coro: Any,
        *,
        loop: asyncio.AbstractEventLoop,
        name: str,
        context: contextvars.Context | None,
        il_id: int,
        **kwargs: Any,
    ) -> None:
        # Before super().__init__: 3.12+ registers (hashes) the task there.
        self._il_id = il_id
        self._il_hash = address_hash(il_id, getattr(loop, "address_order", 0))
        self._il_seen = False
        super().__init__(coro, loop=loop, name=name, context=context, **kwargs)

    __hash__ = _AddressHashed.__hash__


def _eager_factory_code() -> types.CodeType | None:
    factory = getattr(asyncio, "eager_task_factory", None)  # 3.12+
    return getattr(factory, "__code__", None)


_EAGER_FACTORY_CODE = _eager_factory_code()


def _builds_eager_tasks(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` is asyncio's eager factory of plain tasks:
    ``asyncio.eager_task_factory``, or ``asyncio.create_eager_task_factory(asyncio.Task)``.
    The loop builds its tasks itself, as eager ``ControlledTask``s: the same tasks, with the
    per-run hash and name every other task of the run has."""
    if _EAGER_FACTORY_CODE is None or getattr(factory, "__code__", None) is not _EAGER_FACTORY_CODE:
        return False
    cells: tuple[Any, ...] = getattr(factory, "__closure__", None) or ()
    plain = (asyncio.Task, getattr(asyncio.tasks, "_PyTask", asyncio.Task))
    return len(cells) == 1 and cells[0].cell_contents in plain


class ControlledFuture(_AddressHashed, asyncio.Future):  # type: ignore[type-arg]
    """A ``Future`` with a per-run deterministic hash, for the same reason as tasks."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop, il_id: int) -> None:
        self._il_id = il_id
        self._il_hash = address_hash(il_id, getattr(loop, "address_order", 0))
        self._il_seen = False
        super().__init__(loop=loop)

    __hash__ = _AddressHashed.__hash__


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


EPOCH = _runtime.EPOCH_MONOTONIC[0]
"""Where the virtual clock starts, in every run: the stock loop's clock is
``time.monotonic()``, seconds since the machine booted, never 0.0 (code that takes 0.0 for
"never" relies on that). It is also where ``time.monotonic()`` starts in controlled threads,
so ``loop.time()`` and ``time.monotonic()`` read the same clock, as on a stock loop."""

GRAIN = 1e-6
"""The virtual clock's grain, in seconds: a wake-up for a timer moves the clock by at least
this much (on a real clock every iteration of the loop takes time), and a step of busy work
takes this long (``time_slice`` steps move the clock by ``time_slice`` grains, as a time
slice of points does in controlled threads)."""


def grains(when: float) -> int:
    """A deadline in whole grains of the clock, for ordering timers (``LoopTimer``)."""
    if math.isfinite(when):
        return round(when / GRAIN)
    return -sys.maxsize if when < 0 else sys.maxsize  # nan and inf: never due


LAG = 0.01
"""Seconds past the next timer a yield, a timer's wakeup or a job's callback may be postponed
(loop lag): a wakeup that lags more than this is a loop stall, which is its own decision
(``ControlledEventLoop._stall``) with its own budget."""

CANCELLED = -1
"""``_il_budget`` of a cancelled handle: the option scan skips it."""

TIMER_CREATED = 0
ENTRY_CANCELLED = 1
"""Operations a recording loop logs in ``_log`` while a step runs (partial-order reduction)."""


def _log_cancel(handle: Any) -> None:
    log = handle._loop._log
    if log is not None:
        log.append((ENTRY_CANCELLED, handle))


class LoopStep(events.Handle):
    """A ready handle that remembers why it became ready (one of the causes above).

    Invariant: ``_il_budget`` is how many more times the entry may be postponed: ``fairness``
    minus its postponements for a postponable cause, 0 for any other cause, ``CANCELLED``
    once cancelled. The option scan reads that one slot per entry. ``_il_rank`` is the
    chooser's rank of the entry's actor once a ranking scan read it, else None (and None
    again when ranks may have changed: see ``_forget_ranks``).
    """

    __slots__ = ("_il_actor", "_il_budget", "_il_cause", "_il_rank", "_il_timer")

    _il_cause: int
    _il_actor: int
    _il_budget: int
    _il_rank: float | None
    _il_timer: LoopTimer | None
    """The timer whose callback queued the entry (a TIMED entry), else None."""
    _callback: Callable[..., object]
    _args: Any
    _cancelled: bool
    _context: contextvars.Context
    _loop: Any
    _repr: str | None
    _source_traceback: Any

    def cancel(self) -> None:
        if self._il_actor < 0 and not self._cancelled:
            # cancel() drops the callback, which names the actor: a decision that took
            # this entry reads the actor later.
            self._il_actor = _compute_actor(self)
        super().cancel()
        self._il_budget = CANCELLED
        _log_cancel(self)


class LoopTimer(events.TimerHandle):
    """A timer that remembers its creation order; what it queues while it runs is TIMED.

    Invariant: timers order by deadline at the clock's grain (``_il_at``, whole
    microseconds), then by creation (``_il_seq``), wherever they are ordered (the heap, the
    jitter window). On a real clock a timer created later with the same delay reads a later
    clock, so its deadline is strictly later and the stock loop fires it second; on the
    virtual clock the deadlines are equal, or differ only by float rounding (``t + 0.1``
    against ``t + 0.05 + 0.05``) in either direction, and ``TimerHandle``'s own comparison
    (the exact deadline alone) would leave the tie to the rounding or the heap's order.
    """

    __slots__ = ("_il_at", "_il_budget", "_il_rank", "_il_seq")

    _il_at: int
    """The deadline in whole grains (``round(_when / GRAIN)``)."""
    _il_seq: int
    _il_budget: int
    _il_rank: float | None
    _il_cause = EVENT  # a timer's own callback is a plain callback
    _il_actor = 0
    _il_timer = None
    _loop: Any
    _when: float
    _scheduled: bool

    def __lt__(self, other: events.TimerHandle) -> bool:
        if isinstance(other, LoopTimer):
            return (self._il_at, self._il_seq) < (other._il_at, other._il_seq)
        return super().__lt__(other)

    def __gt__(self, other: events.TimerHandle) -> bool:
        if isinstance(other, LoopTimer):
            return (self._il_at, self._il_seq) > (other._il_at, other._il_seq)
        return super().__gt__(other)

    def __le__(self, other: events.TimerHandle) -> bool:
        if isinstance(other, LoopTimer):
            return (self._il_at, self._il_seq) <= (other._il_at, other._il_seq)
        return super().__le__(other)

    def __ge__(self, other: events.TimerHandle) -> bool:
        if isinstance(other, LoopTimer):
            return (self._il_at, self._il_seq) >= (other._il_at, other._il_seq)
        return super().__ge__(other)

    def cancel(self) -> None:
        super().cancel()
        self._il_budget = CANCELLED
        _log_cancel(self)

    def _run(self) -> None:
        loop = self._loop
        loop._cause = TIMED
        loop._firing = self
        try:
            super()._run()
        finally:
            loop._cause = EVENT
            loop._firing = None


class _Arrival(events.Handle):
    """A callback from another thread; what it queues while it runs is IO."""

    __slots__ = ("_il_budget", "_il_rank")

    _il_budget: int
    _il_rank: float | None
    _il_cause = EVENT
    _il_actor = 0
    _il_timer = None
    _il_queues = IO
    """The cause of what the callback queues."""
    _loop: Any

    def cancel(self) -> None:
        super().cancel()
        self._il_budget = CANCELLED
        _log_cancel(self)

    def _run(self) -> None:
        loop = self._loop
        loop._cause = self._il_queues
        try:
            super()._run()
        finally:
            loop._cause = EVENT


class _ThreadArrival(_Arrival):
    """A callback from a controlled thread: it came at a known virtual time, so what it
    queues may lag only as a timer's wakeup may (the jitter window), not past any timer."""

    __slots__ = ()

    _il_queues = TIMED


_STEP_NAMES = frozenset({"_Task__step", "__step"})  # the pure-Python Task's step method
_TASK_CALLBACKS = frozenset({"task_wakeup", "_Task__wakeup", "__wakeup", "_Task__step", "__step"})

_OTHER, _STEP_WRAPPER, _BY_NAME = 0, 1, 2
_CALLBACK_KINDS: dict[type, int] = {types.MethodType: _BY_NAME}
"""Callback type -> whether it is a task's step (C ``TaskStepMethWrapper``), or whether the
callback's name says so (bound methods: the pure-Python Task), or neither. Filled as types are
seen, so ``call_soon`` decides with one dict lookup instead of comparing names."""


_new_step: Callable[[type[LoopStep]], LoopStep] = object.__new__


def _callback_failed(handle: Any, exc: BaseException) -> None:
    """What ``Handle._run`` does when its callback raises: tell the exception handler."""
    source = format_helpers._format_callback_source(handle._callback, handle._args)
    context = {"message": f"Exception in callback {source}", "exception": exc, "handle": handle}
    if handle._source_traceback:
        context["source_traceback"] = handle._source_traceback
    handle._loop.call_exception_handler(context)


def _callback_kind(cls: type) -> int:
    kind = _STEP_WRAPPER if cls.__name__ == "TaskStepMethWrapper" else _OTHER
    _CALLBACK_KINDS[cls] = kind
    return kind


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


def _called_where(frame: types.FrameType | None, loop: asyncio.AbstractEventLoop) -> str:
    """`` (by task 'x', at lib/client.py:12; from the code under test at app.py:3)``: who
    called a refused loop method, for its message. The first place is the innermost frame
    outside asyncio, interlace and the async libraries (often a client library's); the
    second, the innermost frame of the code under test, when it is another."""
    first = user = None
    while frame is not None and user is None:
        filename = frame.f_code.co_filename
        if first is None and not is_library_file(filename):
            first = frame
        if _instrument.is_under_test(filename):
            user = frame
        frame = frame.f_back
    parts = []
    task = asyncio.current_task(loop)
    if task is not None:
        parts.append(f"by task {task.get_name()!r}")
    for label, found in (("at", first), ("from the code under test at", user)):
        if found is not None and (label == "at" or found is not first):
            parts.append(f"{label} {short_path(found.f_code.co_filename)}:{found.f_lineno}")
    return f" ({', '.join(parts)})" if parts else ""


def _unsupported(name: str, what: str) -> Callable[..., Any]:
    def method(self: ControlledEventLoop, *args: Any, **kwargs: Any) -> Any:
        where = _called_where(sys._getframe(1), self)
        raise UnsupportedOperationError(
            f"loop.{name}() was called to {what}{where}: real I/O cannot be scheduled "
            "deterministically, so interlace's controlled event loop does not run it. "
            "Replace it in the code under test with an in-memory fake (an asyncio.Queue or "
            "anyio.create_memory_object_stream pair, or a stub client whose methods "
            "'await asyncio.sleep(0)' where the real one waits on the network), or test this "
            "code path without interlace."
        )

    method.__name__ = name
    return method


DEFAULT_EXECUTOR_WORKERS = 32
"""Worker threads of the loop's default executor when its jobs run as controlled threads."""


def _callable(func: Any) -> str:
    return repr(getattr(func, "__qualname__", func))


class _IdleLoop:
    """What an idle loop's thread waits for, said in a deadlock report (computed only then)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def __str__(self) -> str:
        return "a thread to finish a job or call back, or a timer"

    def task_lines(self, indent: str) -> list[str]:
        """Its tasks, for a deadlock report, under the line of the loop's thread."""
        tasks = sorted(
            (task for task in asyncio.all_tasks(self.loop) if not task.done()),
            key=lambda task: getattr(task, "_il_id", 0),
        )
        return describe_tasks(tasks, indent)


JOB_SECONDS = 30.0
"""The least time, in real seconds, an executor job interlace cannot control may take before
it is reported: the stall timeout when that is longer (``AsyncioBackend``)."""

MSG_JOB_TIMEOUT = (
    "If the job only takes long (it ends on its own), allow it more: such a job may take the "
    f"stall timeout, or {JOB_SECONDS:g} s if that is longer; " + _runtime.MSG_STALL_WHERE
)
"""The sentence an executor job's timeout report ends with (``{more}``: a longer timeout)."""


def _job_timeout_message(func: Any, timeout: float) -> str:
    return (
        f"the executor job {_callable(func)} (run_in_executor/to_thread) did not finish in "
        f"{timeout:g} s: its executor is one interlace cannot control (a custom executor, "
        "or a thread pool whose workers started before the exploration), so "
        "the job runs as one opaque step while the event loop waits, and a job that waits for "
        "the loop (for example through run_coroutine_threadsafe(...).result()) can never "
        "finish. Use the loop's default executor (asyncio.to_thread, run_in_executor(None, "
        "...)) or a ThreadPoolExecutor created inside the target: their jobs run as "
        "controlled threads. " + _runtime.stall_timeout_advice(timeout, MSG_JOB_TIMEOUT)
    )


def actor_of(handle: Any) -> int:
    """The id of the task a ready handle steps (0 for a plain callback), computed once."""
    actor: int = handle._il_actor
    if actor < 0:
        actor = handle._il_actor = _compute_actor(handle)
    return actor


def _compute_actor(handle: Any) -> int:
    callback = handle._callback
    task = getattr(callback, "__self__", None)
    cls = type(callback)
    kind = _CALLBACK_KINDS.get(cls)
    if kind is None:
        kind = _callback_kind(cls)
    if isinstance(task, ControlledTask) and (
        kind == _STEP_WRAPPER or getattr(callback, "__name__", "") in _TASK_CALLBACKS
    ):
        return task._il_id
    return 0


class _Actors(Sequence[int]):
    """The actor ids of a decision's options, computed only for the ones a chooser reads.

    The random walk and the exhaustive search only count options; PCT and replay read ids.
    ``handles`` is the ready queue itself when no cancelled entry sits among the options (the
    common case: no list is built), else the options gathered in a list.
    """

    __slots__ = ("_count", "_handles")

    def __init__(self, handles: Sequence[Any], count: int) -> None:
        self._handles = handles
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return [actor_of(self._handles[i]) for i in range(self._count)[index]]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return actor_of(self._handles[index % self._count])


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
    _debug: bool
    _closed: bool
    _thread_id: int | None
    _default_executor: concurrent.futures.ThreadPoolExecutor | None
    _check_closed: Callable[[], None]

    # Read by close() and __del__, which may run on a loop whose __init__ was interrupted
    # (Ctrl-C) before it set them: class-level values stand in until it does.
    _job_executor: concurrent.futures.ThreadPoolExecutor | None = None
    _il_built = False
    """True once ``__init__`` has run to its end."""

    def __init__(self, chooser: Chooser, settings: Settings, *, job_timeout: float = JOB_SECONDS):
        super().__init__()
        self._chooser = chooser
        self._settings = settings
        self._window = settings.window
        self._fairness = settings.fairness
        self._jitter = settings.stall_us / 1e6
        self._lag = min(LAG, self._jitter)
        """How far past the next timer a ready entry may be postponed (await latency)."""
        self._stall_left = settings.stall_us / 1e6
        """What is left of the run's stall budget, in seconds (``_stall``)."""
        self.stalled_us = 0
        """How long the loop stalled in this run, all stalls together, in microseconds."""
        self.hashed = 0
        """How many tasks and futures the run hashed where their order shows (a set)."""
        self._time_slice = settings.time_slice
        self._max_steps = settings.max_steps
        self._max_time = settings.max_time_us / 1e6
        self._job_timeout = job_timeout
        self._now = EPOCH
        self._step = 0
        self._ntodo = 0
        self._slice_at = settings.time_slice
        self._slice_from = EPOCH
        """The clock when the current time slice began (see ``_consult``)."""
        self._firing: LoopTimer | None = None
        """The timer whose callback runs now."""
        self.overtime: str | None = None
        """Once the step budget ran out with a timer pending: why that may be no hang (see
        ``_out_of_steps``); a failure after it is reported as that hang."""
        self.overtime_from = 0.0
        """The virtual time (``elapsed()``) when the step budget ran out."""
        self._timer_woken: list[LoopStep] = []
        """Entries queued by timer callbacks that may still be postponed (``_timer_wakeup``)."""
        self._consult_at = 0
        self._refresh_consult()
        self._ids = 0
        self._timer_seq = 0
        # step, kind, choice, actor, step, kind, ...: plain ints, so a random walk's thousands
        # of decisions add no objects for the garbage collector to visit while it runs.
        self._decisions: list[int] = []
        self.divergence: str | None = None
        # The address order comes first: every task's and future's hash depends on it.
        self.address_order = chooser.choose_address(ADDRESS_ORDERS)
        """Which order of addresses the run's tasks and futures hash in (``address_hash``)."""
        if chooser.divergence is not None:
            self.divergence = chooser.divergence
        elif self.address_order:
            self._decisions += (0, ADDRESS, self.address_order, 0)
        self._refresh_consult()
        self._anchors: list[int] = []
        """Once the run has started a thread: each decision's index and anchor, as ``where``
        tells it, three ints a decision (``anchors``)."""
        self._actors = _Actors((), 0)
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
        self.mixed_capable = False
        """Set by the backend when threads the run starts can run under control (the session
        installed the controlled primitives): executor jobs then run as controlled threads."""
        self._mixed: Any = None
        """The run's thread scheduler (``_mixed.LoopController``) once it started a thread."""
        self.error: BaseException | None = None
        """An interlace error found inside the run (raised by the backend once it is over)."""
        self._threads_at_start = threading.active_count()
        self.unhandled: list[tuple[int, dict[str, Any]]] = []
        """(step, context) of each call of the exception handler, in order."""
        self.tasks: list[tuple[int, weakref.ref[asyncio.Task[Any]]]] = []
        """Every task of the run, in creation order, with its creation number, held weakly
        (as asyncio holds them)."""
        self.set_exception_handler(self._collect_exception)
        self.observer: Callable[[events.Handle], None] | None = None
        self.on_create: Callable[[asyncio.Task[Any]], None] | None = None
        """Called with every task the run creates, while a run is recorded for its report."""
        self._log: list[tuple[int, Any]] | None = None
        """While a run is recorded for partial-order reduction: the timers created and the
        entries cancelled by the running step, in order."""

        self._il_built = True

    @property
    def decisions(self) -> DecisionLog:
        """The non-stock decisions taken so far, in step order (built only when read)."""
        return DecisionLog(self._decisions.copy())

    @property
    def anchors(self) -> list[tuple[int, int]]:
        """Each decision's anchor, in step order (``RunResult.anchors``): where the thread
        that held the baton was. Until the run starts a thread that is the loop's thread at
        the step before the decision's, which needs no recording on the hot path."""
        anchors = [(0, 2 * (step - 1)) for step in self._decisions[::4]]
        flat = self._anchors
        for index, actor, position in zip(flat[::3], flat[1::3], flat[2::3], strict=True):
            anchors[index] = (actor, position)
        return anchors

    def where(self) -> tuple[int, int]:
        """The thread that holds the baton and its position in its own run
        (``Chooser.where``): the loop's thread, which holds it alone until the run starts a
        thread, is actor 0 and has passed every step till then."""
        ctl = self._mixed
        return ctl.where() if ctl is not None else (0, 2 * self._step)

    @property
    def last_decision_step(self) -> int:
        """The step of the latest non-stock decision (0 before the first)."""
        return self._decisions[-4] if self._decisions else 0

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
        if name is None:
            name = f"Task-{il_id}"
        # Typed loosely: typeshed's factory returns a Future, but create_task returns a task.
        factory: Callable[..., Any] | None = self.get_task_factory()
        eager = factory is not None and _builds_eager_tasks(factory)
        # A lazy task's first step is queued by its constructor (FIRST); an eager one runs
        # that step at once, inside this one, and what it queues is queued as by any step.
        self._creating = not (eager and self.is_running())
        try:
            task: asyncio.Task[Any]
            if factory is None or eager:
                if eager:
                    kwargs["eager_start"] = True
                task = ControlledTask(
                    coro, loop=self, name=name, context=context, il_id=il_id, **kwargs
                )
            else:
                # As BaseEventLoop.create_task calls a factory. Its tasks hash by address,
                # so a set of them may be iterated in another order in another run.
                if context is None:
                    task = factory(self, coro, **kwargs)
                else:
                    task = factory(self, coro, context=context, **kwargs)
                task.set_name(name)
        finally:
            self._creating = False
        self.tasks.append((il_id, weakref.ref(task)))
        if self.on_create is not None:
            self.on_create(task)
        return task

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> events.Handle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        # Handle.__init__, inlined: this runs once per step.
        handle = _new_step(LoopStep)
        handle._context = context if context is not None else contextvars.copy_context()
        handle._loop = self
        handle._callback = callback
        handle._args = args
        handle._cancelled = False
        handle._repr = None
        handle._source_traceback = (
            format_helpers.extract_stack(sys._getframe(1)) if self._debug else None
        )
        handle._il_actor = -1  # computed when a chooser or a decision reads it
        handle._il_rank = None
        handle._il_timer = None
        if self._creating:
            handle._il_cause = FIRST
            handle._il_budget = 0
        else:
            cls = type(callback)
            kind = _CALLBACK_KINDS.get(cls)
            if kind is None:
                kind = _callback_kind(cls)
            if kind == _STEP_WRAPPER:
                # A step queued by a running task: its bare yield. Most steps are these,
                # and this is the cheapest place to name their actor.
                handle._il_cause = YIELD
                handle._il_budget = self._fairness
                task = callback.__self__  # type: ignore[attr-defined]
                if type(task) is ControlledTask:
                    handle._il_actor = task._il_id
            elif kind == _BY_NAME and getattr(callback, "__name__", "") in _STEP_NAMES:
                handle._il_cause = YIELD
                handle._il_budget = self._fairness
            else:
                cause = handle._il_cause = self._cause
                handle._il_budget = self._fairness if cause >= TIMED else 0
                if cause == TIMED and self._firing is not None:
                    self._timer_wakeup(handle, self._firing)
        self._ready.append(handle)
        return handle

    def create_future(self) -> asyncio.Future[Any]:
        return ControlledFuture(loop=self, il_id=self._next_id())

    # -- clock and timers -----------------------------------------------------------------

    epoch = EPOCH
    """Where the clock starts (``time()`` at the start of a run)."""

    def time(self) -> float:
        """The virtual clock: ``EPOCH`` plus the virtual seconds since the run started."""
        return self._now

    def elapsed(self) -> float:
        """Virtual seconds since the run started (what reports show)."""
        return self._now - self.epoch

    def block_for(self, seconds: float) -> None:
        """The loop's thread blocked for ``seconds`` inside a step (``time.sleep``).

        The loop could run nothing meanwhile, so its clock moves on as a real one would:
        timers due by then fire at the next iteration. The budget is checked where the clock
        next advances (raising here would raise inside the program's code).
        """
        if seconds > 0:
            self._now += seconds

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
        timer = LoopTimer(when, callback, args, self, context)
        self._timer_seq += 1
        timer._il_seq = self._timer_seq
        timer._il_at = grains(when)
        timer._il_budget = 0
        timer._il_rank = None
        if self._log is not None:
            self._log.append((TIMER_CREATED, timer))
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
        if self._mixed is None or _runtime.thread_local.thread is None:
            self.opaque = True  # a thread outside the schedule called back
            handle = _Arrival(callback, args, self, context)
        else:
            handle = _ThreadArrival(callback, args, self, context)
        handle._il_budget = 0
        handle._il_rank = None
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
        """Run ``func`` in a controlled thread of the executor, as the stock loop does.

        Without controlled threads (or with an executor whose workers run outside the
        schedule), ``func`` runs as one opaque step at its place in the ready queue.
        """
        self._check_closed()
        if self.mixed_capable:
            pool = self._controlled_executor(executor, func)
            if pool is not None:
                return futures.wrap_future(pool.submit(func, *args), loop=self)
        future = self.create_future()
        self.call_soon(self._run_job, future, executor, func, args)
        return future

    def _controlled_executor(
        self, executor: Any, func: Callable[..., Any]
    ) -> concurrent.futures.ThreadPoolExecutor | None:
        """The thread pool whose workers run under this run's control, or None (opaque)."""
        if executor is None:
            executor = self._default_executor
            if executor is None:
                # A fixed size (the stdlib's largest default), so a schedule does not depend
                # on the number of cores of the machine that made it.
                executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=DEFAULT_EXECUTOR_WORKERS, thread_name_prefix="asyncio"
                )
                self._default_executor = executor
        if type(executor) is not concurrent.futures.ThreadPoolExecutor:
            return None  # a process pool, or a pool with its own threading: opaque steps
        for worker in list(getattr(executor, "_threads", ())):
            child = getattr(worker, "_il_thread", None)
            if child is not None and self._mixed is not None and child.ctl is self._mixed:
                continue
            if _runtime.real_is_alive(worker) and child is None:
                return None  # started outside the exploration: its jobs run as opaque steps
            self.error = UnsupportedOperationError(
                f"the executor {executor!r} was used by an earlier schedule: its worker "
                f"threads ended with that schedule, so the job {_callable(func)} would never "
                "run. Create the executor inside the explored target (every schedule needs "
                "its own), or use the loop's default executor (asyncio.to_thread, "
                "run_in_executor(None, ...))"
            )
            raise self.error
        return executor

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
        self._cause = IO  # the job's real duration could be anything: its waiter may lag
        try:
            # A process pool's submit returns once the job is done, or refuses it (``_pools``).
            job = executor.submit(func, *args)
            result = job.result(timeout=self._job_timeout)
        except concurrent.futures.TimeoutError:
            future.set_exception(
                UnsupportedOperationError(_job_timeout_message(func, self._job_timeout))
            )
        except BaseException as exc:  # the job's own exception goes to its awaiter
            future.set_exception(exc)
        else:
            future.set_result(result)
        finally:
            self._cause = EVENT

    def set_default_executor(self, executor: Any) -> None:
        self._job_executor = executor
        self._default_executor = executor

    async def shutdown_default_executor(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if self._job_executor is not None:
            self._job_executor.shutdown(wait=False)
            self._job_executor = None
        executor = self._default_executor
        if executor is not None:
            self._default_executor = None
            # In a controlled thread the joins wait in the scheduler while the jobs finish.
            executor.shutdown(wait=self._mixed is not None)

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
            if observer is not None:
                observer(handle)
            elif type(handle) is LoopStep:
                # Handle._run, inlined (one Python frame less per step); timers and arrivals
                # keep their own _run, which sets the cause of what they queue.
                try:
                    handle._context.run(handle._callback, *handle._args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    _callback_failed(handle, exc)
            else:
                handle._run()

    def _consult(self) -> events.Handle | None:
        """Take the next ready entry at a schedule point, asking the chooser when it is due.

        The options are the ready entries a decision may pick, in stock order. An entry is
        an option if every entry before it may be postponed: its cause is a bare yield, a
        finished job or thread, or a timer (see the causes above), and it has been postponed
        fewer than ``fairness`` times. The scan stops at the first entry that may not, and
        after ``window`` entries. Advancing the clock postpones every ready entry past the
        next timer, so it is offered only when every entry's wait could have lasted that
        long: finished jobs and threads always (their latency is real), yields and timer
        wakeups only when the timer is within the jitter window (loop lag), and a timer
        wakeup only past a timer that could have fired before its own (``_overtakes``).
        """
        step = self._step
        if step >= self._max_steps:
            self._out_of_steps()
        if step >= self._slice_at:
            self._slice_at = step + self._time_slice
            if self.overtime is not None:
                if self._pending_timer() is not None:
                    # Past the step budget: the busy work lasts until the next timer.
                    self._fire_due(advance=True)
            elif self._now == self._slice_from:
                # Busy work takes time: a slice of steps moves the clock by its grains (in a
                # run with threads, their time slices may have moved it already).
                self._move_clock(self._now + self._time_slice * GRAIN)
                self._fire_due(advance=False)
            self._slice_from = self._now
        ready = self._ready
        chooser = self._chooser
        handle: events.Handle | None
        if step + 1 < chooser.consult_at:
            handle = ready.popleft()
        else:
            while ready and ready[0]._cancelled:
                ready.popleft()
            if not ready:
                self._refresh_consult()
                self._ntodo = 0
                return None
            if len(ready) == 1 and not self._scheduled:
                chooser.consult_at = max(chooser.consult_at, step + 2)
                self._refresh_consult()
                only: events.Handle = ready.popleft()
                return only
            # The option scan reads one slot per entry (see LoopStep's invariant).
            window = self._window
            count = 0
            skipped = 0
            movable = True
            ids: list[int] | None = None
            ranked = False
            if not chooser.reads_actors:
                for entry in ready:
                    budget = entry._il_budget
                    if budget > 0:
                        count += 1
                        if count == window:
                            break
                    elif budget == 0:
                        count += 1
                        movable = False
                        break
                    else:
                        skipped += 1
                else:
                    movable = count > 0
            elif (rank := chooser.rank) is not None and step + 1 < chooser.ranked_until:
                ranked = True
                # PCT between change points: the highest-ranked option, the first of equals,
                # found in the scan itself. Options are ranked in order and only if there is
                # a choice (two options, or one and the clock), as choose() would rank them:
                # a first sighting draws the actor's rank, and draws must come in that order.
                # An entry keeps its rank while it waits (ranks change only in choose()).
                choice = 0
                best: float | None = None  # the head's rank, read once a second option is found
                head: Any = ready[0]  # not cancelled (see above)
                count = 1
                if head._il_budget == 0:
                    movable = False
                elif window > 1:
                    entries = iter(ready)
                    next(entries)
                    for entry in entries:
                        budget = entry._il_budget
                        if budget >= 0:
                            if best is None:
                                best = head._il_rank
                                if best is None:
                                    best = head._il_rank = rank(actor_of(head))
                            value = entry._il_rank
                            if value is None:
                                value = entry._il_rank = rank(actor_of(entry))
                            if value > best:
                                best = value
                                choice = count
                            count += 1
                            if budget == 0:
                                movable = False
                                break
                            if count == window:
                                break
                        else:
                            skipped += 1
            else:
                # The same scan, also collecting every option's actor.
                ids = []
                append = ids.append
                for entry in ready:
                    budget = entry._il_budget
                    if budget >= 0:
                        actor = entry._il_actor
                        append(actor if actor >= 0 else actor_of(entry))
                        count += 1
                        if budget == 0:
                            movable = False
                            break
                        if count == window:
                            break
                    else:
                        skipped += 1
                else:
                    movable = count > 0
            # Option k is ready[k] unless a cancelled entry sits among the options.
            handles: Sequence[Any] = ready
            if skipped:
                handles = [h for h in itertools.islice(ready, count + skipped) if not h._cancelled]
            can_advance = False
            if movable and not skipped and count == len(ready) and self._scheduled:
                timer = self._pending_timer()
                if timer is not None:
                    can_advance = (
                        timer._when - self._now <= self._lag
                        and all(
                            entry._il_timer is None or self._overtakes(timer, entry._il_timer)
                            for entry in ready
                        )
                    ) or all(entry._il_cause == IO for entry in ready)
            if ranked:
                if can_advance:
                    assert rank is not None
                    if best is None:  # one option: not ranked by the scan
                        best = head._il_rank
                        if best is None:
                            best = head._il_rank = rank(actor_of(head))
                    if rank(-1) > best:
                        choice = count
                elif count == 1:
                    chooser.consult_at = max(chooser.consult_at, step + 2)
            elif count == 1 and not can_advance:
                choice = 0
                chooser.consult_at = max(chooser.consult_at, step + 2)
            else:
                uniform = chooser.uniform
                if uniform is not None:
                    # The random walk's draw, taken here: no call at every step.
                    choice = int(uniform() * (count + can_advance))
                elif ids is not None:
                    if chooser.wants_where:
                        chooser.loop_consult = True
                        choice = chooser.choose(step + 1, ids, can_advance)
                        chooser.loop_consult = False
                    else:
                        choice = chooser.choose(step + 1, ids, can_advance)
                    if chooser.rank is not None:
                        self._forget_ranks()
                elif chooser.counts_only:
                    points = chooser.stock_points
                    if (
                        points is not None
                        and chooser.stock_after <= len(points) < chooser.max_points - 1
                    ):
                        # The exhaustive search past its prefix: stock order, every point
                        # recorded with its number of options, as choose_count() would.
                        points.append(count + can_advance)
                        choice = 0
                    else:
                        choice = chooser.choose_count(step + 1, count, can_advance)
                else:
                    actors = self._actors
                    actors._handles = handles
                    actors._count = count
                    choice = chooser.choose(step + 1, actors, can_advance)
                    actors._handles = ()
                if chooser.divergence is not None:
                    self.divergence = chooser.divergence
                    raise Diverged(chooser.divergence)
            if choice == 0:
                handle = ready.popleft()
            elif choice < count:
                if handles is ready:
                    taken = ready[choice]
                    del ready[choice]
                    for earlier in itertools.islice(ready, choice):
                        earlier._il_budget -= 1
                else:
                    taken = handles[choice]
                    ready.remove(taken)
                    for earlier in handles[:choice]:
                        earlier._il_budget -= 1
                actor = taken._il_actor
                if actor < 0:
                    actor = actor_of(taken)
                self._decisions += (step + 1, READY, choice, actor)
                if self._mixed is not None:
                    self._anchors += (len(self._decisions) // 4 - 1, *self._mixed.where())
                handle = taken
            else:
                # Postpone everything that is ready until the next timer has fired and the
                # work it wakes has run: the ready tasks' awaits took that long.
                for earlier in ready:
                    earlier._il_budget -= 1
                self._parked.extend(ready)
                ready.clear()
                self._advance_requested = True
                self._ntodo = 0
                self._decisions.extend((step + 1, READY, choice, 0))
                if self._mixed is not None:
                    self._anchors += (len(self._decisions) // 4 - 1, *self._mixed.where())
                handle = None
        # _refresh_consult, inlined: this runs at every schedule point.
        consult_at = chooser.consult_at - 1
        if consult_at > self._max_steps:
            consult_at = self._max_steps
        if consult_at > self._slice_at:
            consult_at = self._slice_at
        self._consult_at = consult_at
        return handle

    def _out_of_steps(self) -> None:
        """The step budget ran out: a hang, unless busy work may be heading for a timer.

        Busy work moves the clock by a grain a step, so a correct spin-wait on a far timer
        (which a stock loop gets to in real time) can use up the budget before the clock
        reaches the timer. Then the run goes on for another budget of steps in *overtime*,
        with the clock moving on to the next timer after every time slice, as if the busy
        work took that long. A run that then ends well passes (a stock loop may finish it
        too); one that still fails in any way is reported as this hang, with what overtime
        showed (``overtime`` is the note the backend adds), since whether a stock loop gets
        that far depends on how long the busy work would really take.
        """
        if self.enter_overtime():
            return
        max_steps = self._settings.max_steps
        over = OverBudget(f"the run took more than {max_steps} steps")
        if self.overtime is None:
            over.note = self._budget_note()
        else:
            over.note = (
                f"{self.overtime} Continued past the budget with the clock moving on to each "
                f"pending timer, the run was still going {max_steps} steps later."
            )
        raise over

    def enter_overtime(self) -> bool:
        """Go on in overtime if the steps ran out with a timer pending (``_out_of_steps``).

        Also asked by the thread scheduler of a run with threads, whose schedule points in
        the middle of a step may reach the budget first.
        """
        max_steps = self._settings.max_steps
        if (
            self.overtime is not None
            or self._max_steps != max_steps  # the clean-up's budget
            or self._pending_timer() is None
        ):
            return False
        self.overtime = self._budget_note()
        self.overtime_from = self.elapsed()
        self._max_steps = self._step + max_steps
        if self._mixed is not None:
            self._mixed.step_cap = self._max_steps + 1
            self._mixed._refresh()
        self._refresh_consult()
        return True

    def _budget_note(self) -> str:
        """Whether running out of steps means a hang: how far busy work is from the next timer.

        Busy work moves the clock by a grain a step, so a spin-wait on a far timer (correct
        code on a stock loop, which gets there in real time) needs as many steps as the
        timer has grains to go; the report says so instead of passing it off as a hang.
        """
        timer = self._pending_timer()
        if timer is None:
            return "No timer is pending: only the tasks that kept running can change what they see."
        remaining = max(0, math.ceil((timer._when - self._now) / GRAIN - 1e-6))
        return (
            f"Not necessarily a hang: a timer is pending, due at virtual time "
            f"{timer._when - EPOCH:g} s ({describe_timer(timer)}). Busy work moves the clock "
            f"by {GRAIN * 1e6:g} us a step, so this run reaches that timer after about "
            f"{remaining:,} more steps; if the tasks are busy-waiting for it, a stock loop "
            f"gets there. Pass max_steps={self._step + remaining + self._time_slice} or more "
            "to let the run get there too."
        )

    def _forget_ranks(self) -> None:
        """The chooser was asked, and may have changed ranks: waiting entries forget theirs."""
        entry: Any
        for entry in self._ready:
            entry._il_rank = None
        for entry in self._parked:
            entry._il_rank = None

    def _overtakes(self, later: LoopTimer, earlier: LoopTimer) -> bool:
        """Whether ``later`` could fire before ``earlier`` on a stock loop.

        A timer created before another may fire first when its deadline is within the
        jitter window of the other's (timer jitter); one with an earlier deadline fires
        first anyway. Otherwise the stock loop fires them in their order, and what their
        callbacks queue runs in that order too.
        """
        return later._il_at < earlier._il_at or (
            later._il_seq < earlier._il_seq and later._when - earlier._when <= self._jitter
        )

    def _timer_wakeup(self, entry: LoopStep, timer: LoopTimer) -> None:
        """``timer``'s callback queued ``entry`` (TIMED): keep the timers' order.

        A TIMED entry may be postponed behind what is queued after it (its timer may have
        fired an iteration later), but not behind what a timer that cannot overtake its own
        queued: that would need the timers to fire in an order no stock loop fires them in.
        Earlier entries ``timer`` cannot overtake are therefore pinned (budget 0), which
        also keeps them ahead of everything queued after this one. Pinning an entry that
        already ran changes nothing.
        """
        entry._il_timer = timer
        keep: list[LoopStep] = []
        for earlier in self._timer_woken:
            if earlier._il_budget <= 0:
                continue  # pinned, cancelled, or out of postponements: never overtaken
            assert earlier._il_timer is not None
            if self._overtakes(timer, earlier._il_timer):
                keep.append(earlier)
            else:
                earlier._il_budget = 0
        keep.append(entry)
        self._timer_woken = keep

    def _pending_timer(self) -> LoopTimer | None:
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
        elif self._mixed is not None and self._wait_in_scheduler():
            pass  # a thread called back or the next timer is due: the next iteration takes it
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

    def _wait_in_scheduler(self) -> bool:
        """Nothing is ready and threads of this run are alive: wait for them, under control.

        The loop's thread blocks in the thread scheduler until a thread calls back or, once
        every thread waits, the clock reaches the next timer. False when no thread of the run
        is alive, or the next timer is due now: the loop goes on as it does without threads.
        """
        ctl = self._mixed
        if ctl.aborting:
            raise _runtime.Abort
        if all(u.status == _runtime.DONE for u in ctl.threads[1:]):
            return False
        timer = self._pending_timer()
        timeout = None
        if timer is not None:
            timeout = timer._when - self._now
            if timeout < 1e-6:  # the clock's grain is a microsecond
                return False
        inbox = self._inbox
        ctl.block(ctl.threads[0], inbox.__len__, ("loop", _IdleLoop(self)), timeout)
        return True

    def _wait_for_threads(self) -> bool:
        """Nothing can run: wait for a real thread of the target to call back, if one exists."""
        if self._mixed is not None:
            # Threads of the run that have ended but not yet exited are no callers.
            others = sum(
                1 for thread in threading.enumerate() if getattr(thread, "_il_thread", None) is None
            )
            if others <= self._threads_at_start:
                return False
        elif threading.active_count() <= self._threads_at_start + (
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
            if len(scheduled) > 1:
                stall = self._stall(first) if self._stall_left > 0.0 else None
                if stall is not None:
                    when = stall
                elif self._jitter > 0.0:
                    when = self._jitter_pick(first)
            # Waking up takes time on a real clock: the clock reads a grain past the timer's
            # deadline, and later than before even for a timer that was due already (a
            # sleep of a float rounding error would otherwise fire again and again at one
            # instant). A task that measures its sleep (``loop.time() - start >= 0.3``)
            # sees at least what it asked for, not 0.29999999999995453 s.
            self._move_clock(max(when, self._now) + GRAIN)
            self._slice_at = self._step + self._time_slice
            self._slice_from = self._now
            self._refresh_consult()
        end = self._now + self._clock_resolution
        while scheduled:
            handle = scheduled[0]
            if handle._when >= end:
                break
            handle = heapq.heappop(scheduled)
            handle._scheduled = False
            ready.append(handle)

    def _move_clock(self, when: float) -> None:
        """Move the clock forward to ``when`` (seconds on the loop's clock)."""
        if when - EPOCH > self._max_time:
            over = OverBudget(f"virtual time passed the budget of {self._max_time:g} seconds")
            if self.overtime is not None:
                over.note = (
                    f"{self.overtime} Continued past the step budget with the clock moving on "
                    "to each pending timer, the run then passed the virtual-time budget."
                )
            raise over
        self._now = when
        if self._mixed is not None:
            self._mixed.clock_moved()

    def _stall(self, first: LoopTimer) -> float | None:
        """The loop would wait for ``first``: let the chooser pick how late it wakes up.

        On a stock loop the wake-up for a timer comes late whenever the loop's thread does
        not run for a while: a blocking call in the step before (JSON parsing, a tokenizer, a
        sync SDK call), a garbage-collector pause, the process descheduled. Every timer due
        by then fires in that one iteration, in deadline order, and what their callbacks
        queue runs in that order (a timeout's callback before the task its sleep woke, when
        the timeout's deadline came first or was created first). Option ``j`` wakes up at the
        ``j``-th distinct later deadline within what is left of the run's stall budget.
        Returns the deadline to wake up at, or None to wake up on time.
        """
        scheduled = self._scheduled
        # Timers within a grain of the first fire with it anyway (``_fire_due``).
        floor = first._when + GRAIN + self._clock_resolution
        reach = first._when + self._stall_left
        deadlines: list[float] = []
        popped: list[LoopTimer] = []
        while scheduled and len(deadlines) < self._window:
            timer = heapq.heappop(scheduled)
            popped.append(timer)
            if timer._cancelled:
                continue
            if timer._when > reach:
                break
            if timer._when >= floor and (not deadlines or timer._when > deadlines[-1] + GRAIN):
                deadlines.append(timer._when)
        for timer in popped:
            heapq.heappush(scheduled, timer)
        if not deadlines:
            return None
        step = self._step + 1
        chooser = self._chooser
        choice = chooser.choose_stall(step, len(deadlines) + 1)
        if chooser.divergence is not None:
            self.divergence = chooser.divergence
            raise Diverged(chooser.divergence)
        if not choice:
            return None
        when = deadlines[choice - 1]
        stall = when - first._when
        self._stall_left -= stall
        stall_us = max(1, round(stall * 1e6))
        self.stalled_us += stall_us
        self._decisions.extend((step, STALL, choice, stall_us))
        if self._mixed is not None:
            self._anchors += (len(self._decisions) // 4 - 1, *self._mixed.where())
        return when

    def _jitter_pick(self, first: LoopTimer) -> float:
        """Let the chooser pick which timer due within the jitter window fires first.

        A timer created before ``first`` overtakes it when ``first``'s deadline drifted past
        its own: the code between the two calls took that long (a stall inside a step). The
        drift comes out of the run's stall budget, as a stall between steps does.
        """
        scheduled = self._scheduled
        limit = first._when + min(self._jitter, self._stall_left)
        window: list[LoopTimer] = []
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
                drift = window[pick]._when - first._when
                self._stall_left -= drift
                drift_us = max(1, round(drift * 1e6))
                self.stalled_us += drift_us
                self._decisions.extend((step, TIMER, choice, drift_us))
                if self._mixed is not None:
                    self._anchors += (len(self._decisions) // 4 - 1, *self._mixed.where())
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
        """The loop's exception handler: keep what a stock loop would log, with its step.

        A callback that raised, a task whose exception nothing retrieved (reported when the
        task is freed), an error while closing an async generator: the backend decides at the
        end of the run which of them fail it (``_asyncio_backend._lost_exceptions``).
        """
        self.unhandled.append((self._step, context))

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
        if self._il_built:
            super().close()

    def __del__(self) -> None:
        # Unlike the stock loop this one holds no OS resource (no selector, no self-pipe), so
        # an unclosed one (a run interrupted between building the loop and its try/finally)
        # is closed without a ResourceWarning, and one whose __init__ was interrupted, which
        # owns nothing yet, is left alone.
        if self._il_built and not self.is_closed() and not self.is_running():
            self.close()


for _name, _what in _UNSUPPORTED.items():
    setattr(ControlledEventLoop, _name, _unsupported(_name, _what))
del _name, _what

# Where the loop calls a callback the program gave it (``_fault``).
_fault.program_calls(ControlledEventLoop._run_once, "handle._context.run(handle._callback")

# The methods the program (and asyncio on its behalf) calls in place of the stock ones: an
# exception they raise is the program's, as the stock method's would be (``_fault``).
_fault.stand_in(
    function
    for cls, stock in (
        (ControlledEventLoop, asyncio.AbstractEventLoop),
        (ControlledTask, asyncio.Task),
        (ControlledFuture, asyncio.Future),
        (LoopStep, events.Handle),
        (LoopTimer, events.TimerHandle),
        (_Arrival, events.Handle),
        (_ThreadArrival, events.Handle),
    )
    for name, function in vars(cls).items()
    if not name.startswith("_") and hasattr(stock, name)
)

NEVER_CONSULT = NEVER
