"""What every backend of the harness shares: the bottom layer, which imports none of them.

It owns the signals a run ends with (``Abort``, the thread states ``RUNNABLE``/``BLOCKED``/
``DONE``), the real clocks captured before any patch (``real_monotonic``...), where the virtual
clocks start (``EPOCH_MONOTONIC``, ``EPOCH_WALL``), the stall limit and the sentences its
reports end with, the per-thread record of which run a thread belongs to (``thread_local``),
the per-run seeding of ``random``, the numbering of threads' names and hashes in each run's
own order, and how an exception that ends a run is classified (a pass-through such as
Ctrl-C, or interlace's refusal of an operation).

It may import the standard library, ``interlace.errors`` and nothing else of interlace: the
thread backend (``_threads``), the controlled loop (``_loop``), the mixed backend
(``_mixed``), the process pools (``_pools``) and the asyncio backend (``_asyncio_backend``)
all import it, so an import of any of them from here would be a cycle
(``tests/test_architecture.py`` checks).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from interlace.errors import UnsupportedOperationError

if TYPE_CHECKING:
    from interlace.harness._threads import ControlledThread

__all__ = (
    "BLOCKED",
    "DONE",
    "EPOCH_MONOTONIC",
    "EPOCH_WALL",
    "MSG_STALL_TIMEOUT",
    "MSG_STALL_WHERE",
    "RANDOM_SEED",
    "RUNNABLE",
    "STALL_SECONDS",
    "Abort",
    "ThreadLocal",
    "is_passthrough",
    "real_is_alive",
    "real_monotonic",
    "real_time",
    "refusal",
    "run_ordered_hashes",
    "run_thread_names",
    "seed_run_random",
    "stall_timeout_advice",
    "thread_local",
)

# Captured at import, before any run patches them: every backend measures real time with these.
real_monotonic = time.monotonic
real_time = time.time
real_is_alive = threading.Thread.is_alive

RUNNABLE, BLOCKED, DONE = 0, 1, 2
"""A controlled thread's status (``ControlledThread.status``)."""

STALL_SECONDS = 20.0
"""The default ``stall_timeout``: how long one step may run, in real time, without reaching a
schedule point before it counts as blocked for real."""
MSG_STALL_WHERE = (
    "stall_timeout={more} in explore() or replay(), '--stall-timeout {more}' for 'interlace "
    "explore' or 'interlace replay', or @pytest.mark.interlace(stall_timeout={more})"
)
"""Where a user sets the stall timeout, in each front end."""
MSG_STALL_TIMEOUT = (
    "If it only takes long (the step ends on its own), allow more than the stall timeout of "
    "{timeout:g} s: " + MSG_STALL_WHERE
)
"""The sentence a stall report of either backend ends with (before the stack, if any)."""

EPOCH_MONOTONIC = [1_000.0]
"""Where the virtual monotonic clocks start in every run, so a schedule reads the same times
every run (one cell, read at each clock read)."""
EPOCH_WALL = [1_700_000_000.0]
"""Where the virtual wall clock (``time.time()``, the calendar) starts in every run of an
exploration: the real time, in whole seconds, at which the exploration began
(``controlled_exploration``), so that a time the program took before it (a timestamp made
at import, a fixture's) lies before every time a run reads, as it would on a stock
interpreter, and every run of the exploration reads the same times."""


class Abort(BaseException):
    """Unwinds a controlled thread once its run is over (a failure, an interrupt, the end)."""


class ThreadLocal(threading.local):
    """Which run, if any, the current OS thread belongs to, and as what."""

    thread: ControlledThread | None = None
    activate: Callable[[], None] | None = None
    """Set in the thread of a controlled event loop while its run has started no thread:
    the first thread it starts puts the loop's thread, and so that thread, under control."""
    unrestored: tuple[Any, ...] = ()
    """Conditions whose wait was unwound (an interrupt, the end of the run) without taking
    their lock back, because a parked thread held it: their ``with`` block releases nothing."""
    loop: Any = None
    """Set in the thread of a controlled event loop for its run: while the loop runs and
    ``thread`` is None (no thread started yet), ``time.monotonic()`` and the other clocks read
    its virtual clock, and ``time.sleep`` also moves it (the loop is blocked meanwhile)."""


thread_local = ThreadLocal()


def stall_timeout_advice(timeout: float, message: str = MSG_STALL_TIMEOUT) -> str:
    """The sentence of a stall report that says how to allow a longer step (``message``,
    given the timeout and a value well above it)."""
    # Three times the timeout, in whole seconds: well above it, and easy to read and type.
    return message.format(timeout=timeout, more=math.ceil(3 * timeout))


RANDOM_SEED = 0
"""What ``random`` is seeded with at the start of every run (``seed_run_random``)."""


def seed_run_random() -> None:
    """Start the run's draws from the ``random`` module where every run starts them.

    A program that draws from it (a retry's jittered backoff, a random pick of a worker)
    makes the same draws in a replay as in the run it replays, so the replay is exact, as
    Hypothesis seeds ``random`` for each example. The exploration restores the state the
    caller had (``api._session``).
    """
    random.seed(RANDOM_SEED)


# -- hashes and thread names in a run's own order -------------------------------------------------

_hashes: Callable[[], int] | None = None
"""While a run is under way, the next hash in the run's own creation order."""


def _run_ordered_hash(self: object) -> int:
    """The hash of a thread or an executor's future, fixed the first time it is asked for.

    ``object.__hash__`` comes from the object's address, which changes from process to
    process: a set of them (``ThreadPoolExecutor`` joins its workers out of one at shutdown,
    ``concurrent.futures.as_completed`` yields out of one) would iterate in a different order
    in each process, and the same seed would give a different schedule. Objects first hashed
    during a run take the next number of that run instead, as the controlled loop's tasks do.
    """
    try:
        return self.__dict__["_il_hash"]  # type: ignore[no-any-return]
    except KeyError:
        pass
    hashes = _hashes
    value = hashes() if hashes is not None else object.__hash__(self)
    self.__dict__["_il_hash"] = value
    return value


def run_thread_names() -> Callable[[], None]:
    """Number default thread names (``Thread-3``, ``ThreadPoolExecutor-0_1``) per run, from
    process-wide counters, so a schedule names its threads the same way every time, in
    every process; returns what puts the process's counters back."""
    executors = concurrent.futures.ThreadPoolExecutor
    saved = threading._counter, executors._counter  # type: ignore[attr-defined]
    threading._counter = itertools.count(1).__next__  # type: ignore[attr-defined]
    executors._counter = itertools.count().__next__  # type: ignore[attr-defined]

    def end() -> None:
        threading._counter, executors._counter = saved  # type: ignore[attr-defined]

    return end


def run_ordered_hashes() -> Callable[[], None]:
    """Start a run's hash numbering; the returned function ends it."""
    global _hashes
    _install_hashes()
    previous = _hashes
    _hashes = itertools.count(_HASH_BASE).__next__

    def end() -> None:
        global _hashes
        _hashes = previous

    return end


_HASH_BASE = 1 << 32
"""Above the small ints most programs put in sets, so the numbers seldom collide with them."""

_HASHED_CLASSES = (threading.Thread, concurrent.futures.Future)


def _install_hashes() -> None:
    """Give the classes the run-ordered hash, for good: a hash must never change over an
    object's life, and threads and futures outlive the exploration that made them (in
    ``threading._dangling``, an executor's ``_threads_queues``)."""
    for cls in _HASHED_CLASSES:
        if cls.__dict__.get("__hash__") is not _run_ordered_hash:
            cls.__hash__ = _run_ordered_hash  # type: ignore[method-assign]


# -- how an exception ends a run ------------------------------------------------------------------


def is_passthrough(exc: BaseException) -> bool:
    """Exceptions that end the whole exploration instead of counting as a failure.

    Ctrl-C, ``sys.exit`` and pytest's ``exit``/``skip``/``xfail`` outcomes keep their meaning
    inside an explored target (``pytest.fail`` and assertions are failures).
    """
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return True
    # pytest sets __module__ = "builtins" on its outcome classes for display, so they are
    # recognized by class; pytest is only consulted if the test process imported it.
    outcomes = sys.modules.get("_pytest.outcomes")
    if outcomes is None:
        return False
    passthrough = tuple(
        getattr(outcomes, name)
        for name in ("Exit", "Skipped", "XFailed")
        if hasattr(outcomes, name)
    )
    return isinstance(exc, passthrough)


def refusal(exc: BaseException | None) -> UnsupportedOperationError | None:
    """interlace's refusal of an operation, if ``exc`` is one or was caused by one.

    A refusal is no bug of the program: the explored code cannot run here at all (real I/O,
    a subprocess), so it ends the exploration as an error instead of counting as a failure.
    """
    pending = [exc]
    seen = 0
    while pending and seen < 50:
        current = pending.pop()
        seen += 1
        if current is None:
            continue
        if isinstance(current, UnsupportedOperationError):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend((current.__cause__, current.__context__))
    return None
