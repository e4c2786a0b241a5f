"""Ctrl-C during an exploration ends it, even where Python would swallow it.

Python's SIGINT handler raises ``KeyboardInterrupt`` in whatever Python code the main thread
runs next. If that code is a weakref callback or a ``__del__`` (``threading`` runs one each
time a ``Thread`` object dies, and an exploration frees thousands a second), the interpreter
prints "Exception ignored" and goes on: the Ctrl-C is lost and the exploration runs out its
whole budget. So while an exploration runs, SIGINT's default handler is replaced by one that
also remembers the signal, and the engine raises ``KeyboardInterrupt`` again where nothing
swallows it: before each run, and while the thread that started a run waits for it. Where an
interrupt would leave a lock taken, the engine defers it to the end of the block
(:func:`deferred`, trio's KeyboardInterrupt protection in small).

Only Python's own default handler is replaced (an application's or a test runner's handler
is left alone), only from the main thread, and it is restored when the exploration ends.

A timeout by alarm (pytest-timeout's signal method: a SIGALRM handler that raises ``Failed``)
has the same problem and more: the exception lands in whatever the main thread runs, which in
an exploration may be the test's code (the run then looks like a failing schedule), the
scheduler or an asyncio callback (a task is never woken: a bogus deadlock) or a ``__del__``
(swallowed: the exploration runs to the end and passes). So while an exploration runs, a
Python SIGALRM handler is wrapped: what it raises is remembered as an abort of the whole
exploration (:func:`alarm`, with the stack the signal interrupted), raised again before every
run, while the engine waits for a thread and when the exploration ends, and it wins over any
result or error the exploration produced after it. Where it lands it is raised as before (it
must interrupt the test's code or a wait that blocks for real), except in the engine's own
bookkeeping, which it would leave half done (a loop half built, a coroutine never awaited),
and in a ``__del__``, which would swallow it: there it waits for the engine's next check,
and the timer brings it again every few milliseconds, so that it lands in the test's code,
or in a wait for something real where it keeps coming at the same place.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

__all__ = ("Alarm", "alarm", "check", "deferred", "kept")

_received = False
"""A SIGINT reached the handler during the exploration (reset when the exploration ends)."""
_received_at: tuple[FrameType, int, int] | None = None
"""Where it came: the innermost frame of the test's code then (or else outside interlace),
its instruction and line. The ``KeyboardInterrupt`` raised for it ends there, so a report
of it (pytest's one line) names the test's code, not interlace's signal handler."""
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_deferring = 0
"""How many :func:`deferred` blocks the main thread is in."""


@dataclass(frozen=True)
class Alarm:
    """What a SIGALRM handler raised during an exploration, and where the signal came.

    Attributes:
        exception: the handler's exception (pytest-timeout's ``Failed``), raised again until
            the exploration has ended.
        stack: the main thread's stack when the signal came, outermost frame first, ending
            in the frame it interrupted (a traceback built from the live frames).
    """

    exception: BaseException
    stack: TracebackType | None


_alarm: Alarm | None = None
"""The first alarm of the current exploration (reset when it ends)."""
_last_alarm: Alarm | None = None
"""The alarm of the exploration that ended last, for :func:`alarm`."""
_raised = False
"""The alarm's exception has been raised (by the handler or a check) since it came."""
_refiring = False
"""The handler set the timer to bring the alarm again (cancelled when the exploration ends)."""
_deadline = 0.0
"""Until when (``time.monotonic()``) the alarm may wait for the engine's next check."""
_place: tuple[FrameType, int] | None = None
"""Where the last delivery that waited came: its frame and instruction."""
_same_place = 0
"""How many deliveries in a row came at ``_place``."""
_depth = 0
"""How many :func:`kept` blocks are open (an exploration inside an explored target: 2)."""

_REFIRE = 0.02
"""Seconds between two deliveries of an alarm that waits for the engine's next check."""
_STUCK = 5
"""Deliveries in a row at the same instruction of the same frame: a wait for something real
(a ``time.sleep`` of the test that the engine passes on), which the alarm then interrupts.
The engine's bookkeeping moves on between two deliveries, and reaches a check within a run."""
_GRACE = 1.0
"""Seconds an alarm waits for the engine's next check at most, wherever it comes again."""


class _AlarmHandler:
    """Wraps a SIGALRM handler: its exception is remembered, then raised where it came, or at
    the engine's next check if it came in the engine's bookkeeping or a ``__del__``.

    Invariant: the wrapped handler runs once per exploration (pytest-timeout's dumps the
    stacks and raises ``Failed``); until its exception is raised, the timer brings the
    alarm again every ``_REFIRE`` seconds, so that it still lands in the test's code, or in a
    wait where it keeps coming at the same place.
    """

    def __init__(self, handler: Callable[[int, FrameType | None], Any]) -> None:
        self.handler = handler

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        global _alarm, _deadline, _raised, _refiring, _place
        __tracebackhide__ = True
        if _alarm is None:
            try:
                return self.handler(signum, frame)
            except BaseException as exc:
                _alarm = Alarm(exc, _stack(frame))
                _deadline = time.monotonic() + _GRACE
        elif _raised:
            return None  # a delivery the timer brought after it was raised
        if _deferring or (frame is not None and _later(frame)):
            signal.setitimer(signal.ITIMER_REAL, _REFIRE)
            _refiring = True
            return None
        _raised = True
        _place = None
        raise _alarm.exception.with_traceback(None)


_ENGINE_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), part) + os.sep
    for part in ("harness", "_core")
)
_STDLIB = os.path.dirname(os.path.abspath(threading.__file__)) + os.sep


def _later(frame: FrameType) -> bool:
    """Whether an alarm in ``frame`` is better raised at the engine's next check, or where
    it comes again.

    In a ``__del__`` always: Python would only print it as "Exception ignored" (the loops and
    threads of earlier runs are collected as an exploration goes). Anywhere but in the test's
    (or a third-party library's) code, unless it keeps coming at the same place (a wait) or
    the grace is over: in interlace's engine it would leave the bookkeeping half done (a loop
    half built, a coroutine never awaited), in the standard library it may be a weakref
    callback that swallows it too.
    """
    global _place, _same_place
    if frame.f_code.co_name == "__del__":
        return True
    name = frame.f_code.co_filename
    if not (
        name.startswith(_ENGINE_DIRS)
        or name.startswith("<frozen ")
        or (name.startswith(_STDLIB) and "-packages" + os.sep not in name)
    ):
        return False
    if _place is not None and _place[0] is frame and _place[1] == frame.f_lasti:
        _same_place += 1
    else:
        _place, _same_place = (frame, frame.f_lasti), 1
    return _same_place < _STUCK and time.monotonic() < _deadline


def _stack(frame: FrameType | None) -> TracebackType | None:
    """The stack ending in ``frame`` as a traceback, outermost frame first."""
    tb: TracebackType | None = None
    while frame is not None:
        lineno = frame.f_lineno if frame.f_lineno is not None else frame.f_code.co_firstlineno
        tb = TracebackType(tb, frame, frame.f_lasti, lineno)
        frame = frame.f_back
    return tb


def alarm() -> Alarm | None:
    """The alarm that came during the current exploration, or else ended the last one."""
    return _alarm if _alarm is not None else _last_alarm


_sent: BaseException | None = None
"""What :func:`send_to_main` raises in the main thread with the next SIGINT."""


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received, _received_at, _sent
    sent = _sent
    if sent is not None:
        _sent = None
        raise sent
    _received = True
    _received_at = _where(frame)
    if not _deferring:
        raise _interrupt()


def _in_package(frame: FrameType) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)


def _where(frame: FrameType | None) -> tuple[FrameType, int, int] | None:
    """The frame a Ctrl-C that came in ``frame`` is reported at, with its instruction and
    line: the innermost of the test's code; or else (between runs, or while the main thread
    waits for the others) the innermost outside interlace that a test runner shows (pytest
    hides a frame with ``__tracebackhide__``): the line that called ``explore``, or pytest's
    call of the test. Code interlace called (``isinstance`` in ``<frozen abc>``) is passed
    over with interlace: the search starts from interlace's outermost frame."""
    from interlace.harness._instrument import user_frame

    at = user_frame(frame)
    if at is None:
        at = frame
        outer = frame
        while outer is not None:
            if _in_package(outer):
                at = outer
            outer = outer.f_back
        while at is not None and (
            _in_package(at)
            or at.f_locals.get("__tracebackhide__")
            or at.f_globals.get("__tracebackhide__")
        ):
            at = at.f_back
    if at is None:
        return None
    lineno = at.f_lineno if at.f_lineno is not None else at.f_code.co_firstlineno
    return at, at.f_lasti, lineno


def _interrupt() -> KeyboardInterrupt:
    """The ``KeyboardInterrupt`` for the Ctrl-C that came: its traceback ends where it came."""
    exc = KeyboardInterrupt()
    if _received_at is not None:
        frame, lasti, lineno = _received_at
        exc = exc.with_traceback(TracebackType(None, frame, lasti, lineno))
    return exc


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A Ctrl-C or an alarm that comes inside the block is raised when it ends, not inside it.

    For code that takes a lock in a ``with`` it does not own: an interrupt raised in the
    lock's ``__enter__`` once the lock is taken leaves it taken for good (``Thread.start``'s
    handshake on ``_started``, which the new thread then waits on forever). Only in the main
    thread, where signal handlers run, and only where :func:`kept` installed the handler.
    """
    global _deferring
    main = threading.current_thread() is threading.main_thread()
    if main:
        _deferring += 1
    try:
        yield
    finally:
        if main:
            _deferring -= 1
    check()


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C came during this exploration, else the alarm's
    exception if an alarm came."""
    global _raised
    if _received:
        raise _interrupt()
    if _alarm is not None:
        _raised = True
        raise _alarm.exception


def send_to_main(exc: BaseException) -> bool:
    """Raise ``exc`` in the main thread, even inside a call that blocks for real there (an
    ``accept`` on a socket): a SIGINT interrupts the call, and the handler :func:`kept`
    installed raises ``exc`` instead of ``KeyboardInterrupt``. False when that handler is not
    in place (an application's own), or on a platform without ``pthread_kill``."""
    global _sent
    kill = getattr(signal, "pthread_kill", None)
    main = threading.main_thread().ident
    if kill is None or main is None or signal.getsignal(signal.SIGINT) is not _handler:
        return False
    _sent = exc
    kill(main, signal.SIGINT)
    return True


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """While an exploration runs: a Ctrl-C or an alarm is remembered until it ends the
    exploration.

    An alarm's exception leaves the block whatever the exploration did after it (a failure
    it caused, an error of the engine, a normal end); :func:`alarm` keeps it until the next
    exploration starts.
    """
    global _received, _received_at, _alarm, _last_alarm, _raised, _refiring, _place, _depth
    global _sent
    if not _depth:
        _alarm = _last_alarm = _place = None
        _raised = _refiring = False
    _depth += 1
    main = threading.current_thread() is threading.main_thread()
    installed = main and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if installed:
        signal.signal(signal.SIGINT, _handler)
    sigalrm: int | None = getattr(signal, "SIGALRM", None)  # not on Windows
    alarm_handler = signal.getsignal(sigalrm) if main and sigalrm is not None else None
    wrapper: _AlarmHandler | None = None
    # SIG_DFL and SIG_IGN are not callable; an _AlarmHandler is an outer exploration's.
    if callable(alarm_handler) and not isinstance(alarm_handler, _AlarmHandler):
        wrapper = _AlarmHandler(alarm_handler)
        signal.signal(signal.SIGALRM, wrapper)
    try:
        yield
        check()  # one that came during the last run, where it was swallowed
    except BaseException as exc:
        # What the exploration did after the alarm is an effect of it (a run cut short, a
        # task never woken); only a Ctrl-C says more.
        if (
            _alarm is not None
            and exc is not _alarm.exception
            and not isinstance(exc, KeyboardInterrupt)
        ):
            raise _alarm.exception from None
        raise
    finally:
        if installed:
            if signal.getsignal(signal.SIGINT) is _handler:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            _received = False
            _received_at = None
            _sent = None
        _depth -= 1
        if not _depth and _refiring:
            # A timer still pending is the one the wrapper set (the alarm's own fired), and
            # must not bring the alarm to the restored handler.
            remaining, interval = signal.getitimer(signal.ITIMER_REAL)
            if remaining <= _REFIRE and not interval:
                signal.setitimer(signal.ITIMER_REAL, 0)
        if wrapper is not None and signal.getsignal(signal.SIGALRM) is wrapper:
            signal.signal(signal.SIGALRM, wrapper.handler)
        if not _depth:
            _last_alarm, _alarm, _place = _alarm, None, None
