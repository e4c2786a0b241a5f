"""Run an ``async def`` target once on the controlled loop, under one chooser.

This is the asyncio side of the backend interface the engine drives (``_core.explorer``):
``run(chooser, record=...) -> RunResult``.
"""

from __future__ import annotations

import _thread
import asyncio
import collections
import contextlib
import ctypes
import functools
import inspect
import sys
import threading
import types
import weakref
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from interlace._core.result import RunResult, StepRecord
from interlace._core.schedule import (
    ADDRESS,
    READY,
    STALL,
    THREAD,
    Decision,
    Settings,
    address_order_text,
)
from interlace._core.strategy import Chooser
from interlace.errors import UnsupportedOperationError
from interlace.harness import (
    _fault,
    _instrument,
    _interrupt,
    _kernel,
    _loop,
    _pools,
    _runtime,
)
from interlace.harness._footprint import AVAILABLE as FOOTPRINTS
from interlace.harness._footprint import Tracer
from interlace.harness._introspect import (
    Position,
    describe_position,
    describe_task,
    describe_tasks,
    is_installed_library,
    is_library_file,
    libraries_called,
    ownership,
    package_of,
    position_of,
    position_text,
    short_path,
    started_by_program,
)
from interlace.harness._loop import (
    Blocked,
    ControlledEventLoop,
    ControlledTask,
    Diverged,
    OverBudget,
)
from interlace.harness._mixed import MixedRun
from interlace.harness._por import ModelRecorder
from interlace.harness._runtime import Abort, is_passthrough, refusal
from interlace.harness._threads import raised_at

__all__ = ("AsyncioBackend", "is_passthrough", "refusal")

_CLEANUP_STEPS = 10_000
_TRACE_LIMIT = 400


_Where = Position | None
"""Where a task stood (``_introspect.position_of``), formatted only if the report shows it."""


class _Recorder:
    """Runs each handle and records what it did, for the report.

    A run may take hundreds of thousands of steps (a hang) and the report shows the last
    ``_TRACE_LIMIT``: each step keeps raw positions, and only those steps are formatted.

    It also keeps which installed libraries the program called into over the whole run
    (``called``): the program's tasks (``program``: the main task, and the tasks created
    from the program's own code) with such a library on their await chain, and any task
    whose chain goes from the program's code into one. A step in one of those libraries is
    never folded as library code: it is the code under test's business (the package under
    test, installed; a library whose misuse decides the failure).
    """

    def __init__(self, loop: ControlledEventLoop) -> None:
        self.loop = loop
        self._raw: collections.deque[
            tuple[int, str, str, _Where, _Where | str, str, str | None]
        ] = collections.deque(maxlen=_TRACE_LIMIT)
        self.step_counts: collections.Counter[str] = collections.Counter()
        self.program: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        self.called: set[str] = set()

    def created(self, task: asyncio.Task[Any]) -> None:
        """``ControlledEventLoop.on_create``: note a task the program's own code created."""
        if started_by_program(sys._getframe(1)):
            self.program.add(task)

    @property
    def records(self) -> list[StepRecord]:
        """The last ``_TRACE_LIMIT`` steps, formatted."""
        records = []
        for step, name, action, resumed, suspended, deviation, code_file in self._raw:
            library = _library(resumed, suspended, code_file)
            if library is not None and self.called & _installed(resumed, suspended, code_file):
                library = None
            if not isinstance(suspended, str):
                suspended = position_text(suspended)
            where = describe_position(resumed)[0] if resumed is not None else ""
            records.append(StepRecord(step, name, action, where, suspended, deviation, library))
        return records

    def __call__(self, handle: Any) -> None:
        loop = self.loop
        step = loop._step
        callback = handle._callback
        task = getattr(callback, "__self__", None)
        deviation = ""
        if loop.last_decision_step == step:
            deviation = "; ".join(
                _deviation_text(decision) for decision in loop.decisions if decision.step == step
            )
        if isinstance(task, asyncio.Task):
            name = task.get_name()
            coro = task.get_coro()
            resumed: _Where = None
            suspended: _Where | str
            code_file: str | None = None
            if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == "CORO_CREATED":
                action = "started " + getattr(coro, "__qualname__", "coroutine")
                code_file = coro.cr_code.co_filename
            else:
                action = "resumed"
                resumed = position_of(task)
                self._note_called(task)
            handle._run()
            if task.done():
                # Read without task.exception(), which would mark the exception retrieved:
                # the recorded run must fail the way the explored one did.
                exc = None if task.cancelled() else task._exception
                if task.cancelled():
                    suspended = "cancelled"
                elif isinstance(exc, Abort):
                    # The thread scheduler ended the run while this step ran (a deadlock
                    # or a failure in a thread): it stopped where the run ended.
                    where = raised_at(exc).rpartition(" raised ")[0]
                    suspended = f"{where} (the run ended here)".strip()
                elif exc is not None:
                    suspended = _raised(exc)
                else:
                    suspended = "finished"
            else:
                suspended = position_of(task)
                self._note_called(task)
            self.step_counts[name] += 1
        else:
            name = "loop"
            action = "callback " + _callable_name(callback)
            resumed = None
            code_file = _code_file(callback)
            handle._run()
            suspended = ""
        self._raw.append((step, name, action, resumed, suspended, deviation, code_file))

    def _note_called(self, task: asyncio.Task[Any]) -> None:
        self.called |= libraries_called(task, from_program=task in self.program)


def _installed(resumed: _Where, suspended: _Where | str, code_file: str | None) -> set[str]:
    """The installed libraries (:func:`is_installed_library`) a step started or stopped in."""
    files = [where.filename for where in (resumed, suspended) if isinstance(where, Position)]
    if code_file is not None:
        files.append(code_file)
    return {package_of(file) for file in files if is_installed_library(file)}


def _code_file(callback: Any) -> str | None:
    """The file of a callback's Python code; None for a builtin (``Future.set_result``)."""
    while isinstance(callback, functools.partial):
        callback = callback.func
    code = getattr(getattr(callback, "__func__", callback), "__code__", None)
    return code.co_filename if isinstance(code, types.CodeType) else None


def _library(
    resumed: _Where, suspended: _Where | str, code_file: str | None
) -> tuple[str, ...] | None:
    """``StepRecord.library``: the packages of the code a step started and stopped in, if
    none of it is code under test. A step that raised or was cancelled is never library's:
    the report shows it."""
    if isinstance(suspended, str) and suspended not in ("", "finished"):
        return None
    files = [where.filename for where in (resumed, suspended) if isinstance(where, Position)]
    if code_file is not None:
        files.append(code_file)
    if any(_instrument.is_under_test(file) for file in files):
        return None
    # No file at all: a builtin callback (``Future.set_result``), or a task whose frames are
    # all the standard library's or an async library's (``is_library_file``).
    return tuple(sorted({package_of(file) for file in files} - {""}))


def _raised(exc: BaseException) -> str:
    """``raised Type: message`` on one line, for a step of the schedule: a message of several
    lines (pytest's rewritten assertions) is cut after its first, with `` ...``."""
    text = str(exc)
    first, _, rest = text.partition("\n")
    return (
        f"raised {type(exc).__name__}" + (f": {first}" if first else "") + (" ..." if rest else "")
    )


def _callable_name(callback: Any) -> str:
    """A name for a callback that is the same in every process (no addresses)."""
    if isinstance(callback, functools.partial):
        return f"partial({_callable_name(callback.func)})"
    name = getattr(callback, "__qualname__", None)
    if isinstance(name, str):
        return name
    return type(callback).__qualname__


def _deviation_text(decision: Decision) -> str:
    if decision.kind == THREAD:
        return "thread preemption: this thread runs instead of the running one"
    if decision.kind == READY:
        return (
            f"postponed the {decision.choice} entr{'y' if decision.choice == 1 else 'ies'} "
            "ready before it (await latency)"
        )
    if decision.kind == STALL:
        return (
            f"the loop stalled {decision.actor / 1000:g} ms before this iteration (a blocking "
            "call of that length on the loop), so the timers due by then fired together"
        )
    if decision.kind == ADDRESS:
        return address_order_text(decision.choice)
    return (
        f"timer {decision.choice} of those due within {decision.actor / 1000:g} ms fired first "
        "(it was created first; the code between the two calls took that long)"
    )


_STALL_SECONDS = _runtime.STALL_SECONDS
"""The default ``stall_timeout`` (the same for both backends): how long one step of a run may
take, in real time, before it counts as blocked for real."""
_WATCH_POLL = 1.0
_WATCH_POLL_MIN = 0.05

MSG_LOOP_STALLED = (
    "{task} ran for {seconds:g} s at {where} without returning to the event loop: a call "
    "that blocks for real (a socket's recv or accept, a lock's acquire, a subprocess's wait) "
    "or computes that long inside async code stops every task, in interlace's loop as in a "
    "stock one, so no schedule can go on. Await the asyncio form instead (loop.sock_recv, "
    "asyncio streams, asyncio.create_subprocess_exec, asyncio.Lock), or run the call in a "
    "thread: 'await asyncio.to_thread(...)'. {advice}"
)


class Watchdog:
    """Notices a run whose loop is stuck in one step (a blocking call in a task) and ends it.

    A stock loop stuck so hangs too, but an exploration must not: a thread of its own (a bare
    ``_thread`` one, which ``threading`` does not count) looks once a second (more often for a
    stall timeout under 4 s) whether the run's loop has taken a step; after ``stall_timeout``
    seconds without one, outside the loop's own waits (executor jobs, which have their
    timeout), it sets the loop's error and interrupts the exploring thread, again each second
    until the step ends: in the main thread with a signal, which also ends a call blocked in C
    (``_interrupt.send_to_main``); in another thread, or under an application's own SIGINT
    handler, with an exception raised at the thread's next bytecode (``_raise_in``), which
    ends a step that computes but not one blocked in C. Only until a run puts threads under
    control: the thread scheduler watches its threads itself, and a thread it does not
    control would make every schedule point of theirs slower.
    """

    def __init__(self, stall_timeout: float = _STALL_SECONDS) -> None:
        self.loop: ControlledEventLoop | None = None
        self.stall_timeout = stall_timeout
        # A step is seen up to a poll after it began, and reported at the first poll past
        # the timeout: a quarter of a short timeout keeps that within half of it over.
        self._poll = max(_WATCH_POLL_MIN, min(_WATCH_POLL, stall_timeout / 4))
        self._main = _thread.get_ident()
        self._in_main = _thread.get_ident() == threading.main_thread().ident
        self._sent = False
        self._stop = _thread.allocate_lock()
        self._stop.acquire()
        self._ended = _thread.allocate_lock()
        self._ended.acquire()
        self._running = True
        _thread.start_new_thread(self._watch, ())

    def stop(self) -> None:
        """End the watching thread and wait for it (idempotent)."""
        if self._running:
            self._running = False
            self._stop.release()
            self._ended.acquire()
            if self._sent and _thread.get_ident() == self._main:
                _take_back()

    def _watch(self) -> None:
        _kernel.own_thread_started()  # a thread no run waits for
        try:
            seen: tuple[ControlledEventLoop | None, int] = (None, -1)
            since = _runtime.real_monotonic()
            while not self._stop.acquire(timeout=self._poll):
                loop = self.loop
                now = _runtime.real_monotonic()
                mark = (loop, loop._step if loop is not None else -1)
                if mark != seen:
                    seen, since = mark, now
                    continue
                if loop is None or now - since < self.stall_timeout:
                    continue
                frame = sys._current_frames().get(self._main)
                if frame is None or _waits_in_loop(frame):
                    since = now
                    continue
                if loop.error is None:
                    loop.error = UnsupportedOperationError(
                        _stalled_message(loop, frame, now - since, self.stall_timeout)
                    )
                if not (self._in_main and _interrupt.send_to_main(loop.error)):
                    self._sent = True
                    _raise_in(self._main, _Stalled)
                since = now - self.stall_timeout + _WATCH_POLL  # once a second from now on
        finally:
            _kernel.own_thread_ending()
            self._ended.release()


class _Stalled(BaseException):
    """Raised in the exploring thread when no signal can reach it (``Watchdog``): the run
    ends with the loop's error, which the watchdog set first."""


def _raise_in(ident: int, exception: type[BaseException]) -> None:
    """Raise ``exception`` in the thread ``ident`` at its next bytecode boundary. A call
    blocked in C is not interrupted: the exception comes when it returns."""
    set_async_exc = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)
    if set_async_exc is not None:
        set_async_exc(ctypes.c_ulong(ident), ctypes.py_object(exception))


def _take_back() -> None:
    """In the exploring thread, as its exploration ends: let a ``_Stalled`` sent to it and not
    raised yet be raised here, where it is caught, rather than in the program's code later.

    One is sent again first, and a loop of bytecodes runs until it comes: withdrawing one
    instead (``PyThreadState_SetAsyncExc`` with NULL) would leave 3.11's evaluation loop
    flagged for good, every thread of the process then stopping at every instruction."""
    try:
        _raise_in(_thread.get_ident(), _Stalled)
        for _ in range(1_000_000):
            pass
    except _Stalled:
        pass


def _waits_in_loop(frame: types.FrameType | None) -> bool:
    """Whether the loop's thread, at ``frame``, waits in the loop itself (for a job), or for
    a process pool's job (``_pools``)."""
    waits = (
        ControlledEventLoop._wait_for_threads.__code__,
        ControlledEventLoop._wait_in_scheduler.__code__,
    )
    if _pools.waits_for_job(frame):
        return True  # a process pool's job: its wait has a time limit of its own
    while frame is not None:
        if frame.f_code in waits:
            return True
        frame = frame.f_back
    return False


def _stalled_message(
    loop: ControlledEventLoop, frame: types.FrameType, seconds: float, timeout: float
) -> str:
    task = asyncio.tasks._current_tasks.get(loop)  # type: ignore[attr-defined]
    who = f"task {task.get_name()!r}" if task is not None else "a callback of the event loop"
    at = _instrument.user_frame(frame) or frame
    where = f"{short_path(at.f_code.co_filename)}:{at.f_lineno}"
    return MSG_LOOP_STALLED.format(
        task=who,
        seconds=round(seconds, 1),
        where=where,
        advice=_runtime.stall_timeout_advice(timeout),
    )


class AsyncioBackend:
    """Runs a zero-argument ``async def`` target on a fresh controlled loop per run.

    With ``threads`` (the session installed the controlled thread primitives), threads the
    run starts, executor jobs among them, run under control with the loop (``_mixed``);
    without it executor jobs run as opaque steps.
    """

    def __init__(
        self,
        target: Callable[[], Coroutine[Any, Any, Any]],
        settings: Settings,
        *,
        threads: bool = False,
        stall_timeout: float = _STALL_SECONDS,
    ) -> None:
        self.target = target
        self.settings = settings
        self.threads = threads
        self.stall_timeout = stall_timeout
        """The stall timeout of a run's threads once it starts some (``MixedRun``); the session
        gives the same one to the watchdog."""
        self.watchdog: Watchdog | None = None
        """Set by the session (``api``) for an exploration in the main thread; stopped as a
        run first puts threads under control, and when the session ends."""

    def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
        """Run the target once; a passthrough exception (Ctrl-C, pytest.exit) propagates.

        A recorded run (the one a report is made from) also records which task holds each
        lock, for the report; the wrapped ``acquire`` costs a coroutine a call, so the runs
        that only explore go without.
        """
        _interrupt.check()
        _runtime.seed_run_random()
        with ownership() if record else contextlib.nullcontext():
            return self._run(chooser, record=record)

    def _threads_come(self, tracer: Tracer | None) -> None:
        """A run puts its threads under control: stop what watches the loop alone."""
        if tracer is not None:
            tracer.stop()
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog = None

    def _run(self, chooser: Chooser, *, record: bool) -> RunResult:
        # An executor job interlace cannot control is one step of real work: it may take the
        # stall timeout, and at least the loop's own limit.
        job_timeout = max(_loop.JOB_SECONDS, self.stall_timeout)
        loop = ControlledEventLoop(chooser, self.settings, job_timeout=job_timeout)
        mixed: MixedRun | None = None
        if self.threads:
            mixed = MixedRun(
                loop, chooser, self.settings, record, self.target, stall_timeout=self.stall_timeout
            )
            mixed.arm()
            if chooser.wants_where:
                chooser.where = loop.where
        recorder = _Recorder(loop) if record else None
        loop.observer = recorder
        if recorder is not None:
            loop.on_create = recorder.created
        modeller: ModelRecorder | None = None
        tracer: Tracer | None = None
        if chooser.wants_model and not record and FOOTPRINTS:
            tracer = Tracer()
            if tracer.start():
                modeller = ModelRecorder(loop, tracer)
                loop.observer = modeller
            else:
                tracer = None
        if mixed is not None:
            mixed.on_activate = functools.partial(self._threads_come, tracer)
        watchdog = self.watchdog
        if watchdog is not None:
            watchdog.loop = loop
        kind: Any = None
        exception: BaseException | None = None
        detail = ""
        passthrough: BaseException | None = None
        main: asyncio.Task[Any] | None = None
        try:
            coro = self.target()
            main = loop.create_task(coro, name="main")
            if recorder is not None:
                recorder.program.add(main)  # the target is the program's, whoever called it
            if modeller is not None:
                modeller.begin()
            try:
                loop.run_until_complete(main)
            except Blocked:
                kind = "deadlock"
                detail = _deadlock_detail(loop)
            except OverBudget as exc:
                kind = "hang"
                detail = _hang_detail(loop, str(exc), recorder, exc.note)
            except Diverged:
                pass
            except Abort:
                pass  # the thread scheduler ended the run; its failure or error says why
            except BaseException as exc:  # the target's own exception, or a passthrough
                if is_passthrough(exc):
                    passthrough = exc
                else:
                    kind = "exception"
                    exception = exc.with_traceback(_user_traceback(exc.__traceback__))
        finally:
            if watchdog is not None:
                watchdog.loop = None
            if tracer is not None:
                tracer.stop()
            steps = loop._step
            ctl = mixed.ctl if mixed is not None else None
            if ctl is not None and kind is not None and not ctl.cut:
                ctl.cut = ctl.cut_for(exception)  # the failure came out of the loop
            model = None
            if (
                modeller is not None
                and kind is None
                and not loop.opaque
                and not loop.divergence
                and ctl is None  # footprints of the run's threads are not recorded
            ):
                model = modeller.model(self.settings)
            try:
                if mixed is None:
                    _cleanup(loop)
                else:
                    ended = kind is None and passthrough is None and not loop.divergence
                    try:
                        _end_mixed(loop, mixed, ended=ended)
                    except BaseException as exc:  # Ctrl-C while the run's threads finish
                        passthrough = passthrough or exc
            finally:
                _pools.end_run()
        if passthrough is not None:
            raise passthrough
        ctl = mixed.ctl if mixed is not None else None
        divergence = loop.divergence
        lost = _lost_exceptions(loop)
        for lost_exc, _ in lost:
            refused = refusal(lost_exc) or _fault.engine_fault(lost_exc)
            if refused is not None:
                raise refused
        decisions: Sequence[Decision] = loop.decisions
        anchors: tuple[tuple[int, int], ...] = ()
        cut: tuple[tuple[int, int], ...] = ()
        trace = tuple(recorder.records) if recorder is not None else ()
        if ctl is not None:
            if ctl.passthrough is not None:
                raise ctl.passthrough
            if ctl.error is not None:
                raise ctl.error
            if ctl.failure is not None and kind is None:
                kind, exception, detail = ctl.failure
                if record and ctl.failed_in is not None and kind == "exception":
                    ctl.close_segment(ctl.failed_in, raised_at(exception))
            divergence = divergence or chooser.divergence
            # Each decision with its anchor, the loop's and the threads' merged in step order.
            pairs = sorted(
                (
                    *zip(decisions, loop.anchors, strict=True),
                    *zip(ctl.decisions, ctl.anchors, strict=True),
                ),
                key=lambda pair: pair[0],
            )
            decisions = tuple(decision for decision, _ in pairs)
            anchors = tuple(anchor for _, anchor in pairs)
            cut = ctl.cut
            trace = tuple(sorted((*trace, *ctl.records), key=lambda record: record.step))
        if loop.error is not None:
            raise loop.error
        refused = (
            refusal(exception) or _fault.engine_fault(exception) if kind == "exception" else None
        )
        if refused is not None:
            raise refused
        if lost and not divergence:
            if kind is None:
                # The run passed, but a task or callback raised and nothing saw it: the
                # exception escaped the program as surely as one that escapes the target.
                kind = "exception"
                exception, detail = lost[0]
                exception = exception.with_traceback(_user_traceback(exception.__traceback__))
                note = "interlace: " + detail
                if note not in getattr(exception, "__notes__", ()):  # one instance, many runs
                    exception.add_note(note)
                model = None
            elif kind != "exception":
                detail += "\nEnded with an exception nothing retrieved:\n" + "\n".join(
                    f"  {text}" for _, text in lost
                )
        if loop.overtime is not None and kind is not None and kind != "hang":
            # It failed in overtime, after the clock jumped to a timer the busy work had not
            # reached: a stock loop fails so only if the busy work lasts that long.
            kind, exception, detail = "hang", None, _overtime_detail(loop, kind, exception)
        return RunResult(
            model=model,
            kind=kind,
            exception=exception,
            detail=detail,
            steps=steps,
            decisions=decisions,
            anchors=anchors,
            cut=cut,
            trace=trace,
            divergence=divergence,
            opaque=loop.opaque or (ctl is not None and (ctl.stock_loop_tasks or ctl.opaque)),
            hashed=loop.hashed,
            free_threaded=tuple(ctl.free_threaded) if ctl is not None else (),
            gil_points=tuple(ctl.gil_points) if ctl is not None else (),
            uninstrumented=tuple(sorted(ctl.uninstrumented)) if ctl is not None else (),
        )


_fault.program_calls(AsyncioBackend._run, "coro = self.target()")

_MSG_LOST_TASK = (
    "task {task!r} raised {error} and nothing retrieved its exception (no task awaited it, "
    "and nothing called its result() or exception()); a stock event loop logs 'Task exception "
    "was never retrieved' and goes on. Await the task (or gather it), or handle the error "
    "inside it"
)
_MSG_LOST_CALLBACK = (
    "the callback {callback} raised {error} in the event loop; a stock event loop logs "
    "'Exception in callback' and goes on. Handle the error inside the callback"
)
_MSG_LOST_AT_SHUTDOWN = (
    "task {task!r} raised {error} when it was cancelled at the end of the run; asyncio.run "
    "logs 'unhandled exception during asyncio.run() shutdown'. Let CancelledError through "
    "(a finally block that raises replaces it)"
)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _counts(exc: object) -> bool:
    """An exception of the program's own (not a signal of the harness or a passthrough)."""
    return (
        isinstance(exc, BaseException)
        and not isinstance(exc, (asyncio.CancelledError, Abort, Blocked, OverBudget, Diverged))
        and not is_passthrough(exc)
    )


def _lost_exceptions(loop: ControlledEventLoop) -> list[tuple[BaseException, str]]:
    """Exceptions of the run that nothing retrieved, each with a sentence saying whose.

    The order is the same in every run of a schedule: callbacks by the step they ran at,
    then tasks by creation. A task's unretrieved exception reaches the exception handler
    when the task is freed, which for a task in a reference cycle depends on the garbage
    collector; so every task of the run is also looked at here, and the handler's reports
    of tasks only confirm what this finds. Plain futures are left out: only the collector
    would say whether a future in a cycle was dropped during the run.
    """
    found: dict[tuple[int, int], tuple[BaseException, str]] = {}
    for step, context in loop.unhandled:
        exc = context.get("exception")
        if not _counts(exc):
            continue
        assert isinstance(exc, BaseException)
        task = context.get("future") or context.get("task")
        handle = context.get("handle")
        if isinstance(task, ControlledTask) and task.get_loop() is loop:
            template = _MSG_LOST_AT_SHUTDOWN if "shutdown" in context["message"] else _MSG_LOST_TASK
            text = template.format(task=task.get_name(), error=_error_text(exc))
            found.setdefault((1, task._il_id), (exc, text))
        elif handle is not None and task is None:
            callback = _callable_name(getattr(handle, "_callback", None))
            text = _MSG_LOST_CALLBACK.format(callback=callback, error=_error_text(exc))
            found.setdefault((0, step), (exc, text))
    for il_id, ref in loop.tasks:
        task = ref()
        if task is None or not task.done() or task.cancelled():
            continue
        if not task._log_traceback:
            continue  # retrieved (or reported when it was freed: the handler saw it)
        exc = task.exception()  # marks it retrieved: the stock loop would not log it again
        if _counts(exc):
            assert exc is not None
            text = _MSG_LOST_TASK.format(task=task.get_name(), error=_error_text(exc))
            found.setdefault((1, il_id), (exc, text))
    return [found[key] for key in sorted(found)]


def _user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """Drop the leading frames of the harness and asyncio that re-raised a task's exception."""
    first = tb
    while first is not None and is_library_file(first.tb_frame.f_code.co_filename):
        first = first.tb_next
    return first if first is not None else tb


def _pending_tasks(loop: ControlledEventLoop) -> list[asyncio.Task[Any]]:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    return sorted(tasks, key=lambda t: getattr(t, "_il_id", 0))


def _deadlock_detail(loop: ControlledEventLoop) -> str:
    lines = ["No task can run and no timer is pending. Blocked:"]
    lines.extend(describe_tasks(_pending_tasks(loop), "  "))
    return "\n".join(lines)


def _hang_detail(
    loop: ControlledEventLoop, reason: str, recorder: _Recorder | None, note: str = ""
) -> str:
    lines = [f"Still running: {reason} (virtual time {loop.elapsed():g} s)."]
    if note:
        lines.append(note)
    records = recorder.records if recorder is not None else []
    if records:
        recent = collections.Counter(r.actor for r in records)
        lines.append(f"Tasks that kept running in the last {len(records)} steps:")
        lines.extend(f"  {name!r}: {count} steps" for name, count in recent.most_common())
    lines.append("Every task at the end:")
    lines.extend("  " + describe_task(task) for task in _pending_tasks(loop))
    return "\n".join(lines)


def _overtime_detail(loop: ControlledEventLoop, kind: str, exception: BaseException | None) -> str:
    """The hang report of a run that failed in overtime (see ``_loop``'s ``_out_of_steps``)."""
    if kind == "exception" and exception is not None:
        ended = _raised(exception)
    else:
        ended = f"ended in a {kind}"
    lines = [
        f"Still running: the run took more than {loop._settings.max_steps} steps "
        f"(virtual time {loop.overtime_from:g} s).",
        f"{loop.overtime} Continued past the budget with the clock moving on to each pending "
        f"timer (as if the busy work took that long), the run then {ended}.",
    ]
    return "\n".join(lines)


def _end_mixed(loop: ControlledEventLoop, mixed: MixedRun, *, ended: bool) -> None:
    """The end of a run that may have started threads.

    A run that ended (its main task is done) finishes as ``asyncio.run`` does, with its
    threads still under control. One that failed or was cut short unwinds its threads
    first, so the clean-up of its tasks runs alone (no thread holds a lock it needs).
    """
    ctl = mixed.ctl
    try:
        if ctl is None or not ended or ctl.aborting:
            if ctl is not None:
                ctl.aborting = True
                ctl._refresh()
            mixed.close()
            _cleanup(loop)
            return
        mixed.use_stock_chooser(Chooser())
        _cleanup(loop, close=False)
        mixed.end()
    finally:
        mixed.close()
        loop.close()


def _cleanup(loop: ControlledEventLoop, *, close: bool = True) -> None:
    """Cancel what is left (as ``asyncio.run`` does), in stock order, then close the loop."""
    loop.observer = None
    loop._chooser = Chooser()
    try:
        pending = _pending_tasks(loop)
        if pending and not loop.is_closed():
            loop._max_steps = loop._step + _CLEANUP_STEPS
            loop._refresh_consult()
            for task in pending:
                task.cancel()
            gathered = asyncio.gather(*pending, return_exceptions=True)
            try:
                loop.run_until_complete(gathered)
            except (Blocked, OverBudget, Diverged):
                gathered.cancel()
            for task in pending:
                # What asyncio.run reports of the tasks it cancels at its end.
                if task.done() and not task.cancelled() and task.exception() is not None:
                    context = {
                        "message": "unhandled exception during asyncio.run() shutdown",
                        "exception": task.exception(),
                        "task": task,
                    }
                    loop.unhandled.append((loop._step, context))
        if not loop.is_closed():
            try:
                loop._max_steps = loop._step + _CLEANUP_STEPS
                loop._refresh_consult()
                loop.run_until_complete(loop.shutdown_asyncgens())
            except (Blocked, OverBudget, Diverged):
                pass
    except BaseException as exc:
        if is_passthrough(exc):
            raise
    finally:
        # Tasks abandoned in a cycle would log "Task was destroyed but it is pending" when
        # collected; they belong to a finished run, so the loop's collector swallows that.
        if close:
            loop.close()
