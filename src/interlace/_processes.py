"""Process pools for the commands that fan work out over cores (``interlace lint``,
``interlace reproduce``): the workers leave interrupts to the parent, and the parent kills
them, not waits for them, when it is interrupted."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ("jobs_argument", "kill", "pool_context", "process_pool", "result")

_T = TypeVar("_T")

_POLL_SECONDS = 0.2
_received: list[int] = []
"""The signals the parent of a running pool received (see :func:`result`)."""


def jobs_argument(value: str) -> int:
    """argparse's type for ``--jobs``: a whole number of processes, at least 1."""
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(
            f"invalid --jobs value {value!r}: expected a whole number of processes >= 1, "
            "e.g. --jobs 4"
        )
    return jobs


def pool_context() -> multiprocessing.context.BaseContext:
    """How to start workers: fork, the cheapest (what the parent imported is there already),
    where it is safe; spawn where the parent runs other threads, which forking leaves
    broken (and warns of since Python 3.12)."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _init_worker() -> None:
    # Interrupts are the parent's to handle: it stops the workers itself (a Ctrl-C reaches the
    # whole process group, and a forked worker inherits the parent's SIGTERM handler).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


_deferring = 0
"""How many ``submit`` calls are under way: a signal that arrives during one is raised when
it returns (see :class:`_Pool`)."""


def _terminated(signum: int, frame: object) -> None:
    _received.append(signum)
    print("interlace: terminated", file=sys.stderr)
    if not _deferring:
        raise SystemExit(128 + signum)


def _interrupted(signum: int, frame: object) -> None:
    _received.append(signum)
    if not _deferring:
        raise KeyboardInterrupt


class _Pool(ProcessPoolExecutor):
    """A pool whose ``submit`` is never cut short by the parent's own signal handlers.

    ``submit`` starts workers (a fork, then recording the process) and takes the pool's
    locks: an exception raised in between leaves a worker the pool does not know of, which
    :func:`kill` cannot end and interpreter exit then waits for, or a lock that
    ``shutdown`` waits on forever. So a Ctrl-C or SIGTERM that arrives during ``submit`` is
    recorded and raised once it has returned.
    """

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        global _deferring
        _deferring += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        finally:
            _deferring -= 1
        _raise_received()
        return future


def result(future: Future[_T]) -> _T:
    """``future.result()``, ended by a Ctrl-C or SIGTERM the parent of the pool received.

    The exception a signal handler raises is lost when the main thread happens to run a
    finalizer at that moment (Python prints "Exception ignored in ..." and goes on), so the
    wait also polls what :func:`process_pool`'s handlers recorded.
    """
    while True:
        try:
            return future.result(timeout=_POLL_SECONDS)
        except TimeoutError:
            _raise_received()
        except BrokenProcessPool:
            # A Ctrl-C to the process group that lands in a worker before its initializer
            # ignores SIGINT kills it, and the pool breaks: that is the interrupt, not a
            # failure of the work (the parent's own handler may run a moment later).
            for _ in range(_BROKEN_WAITS):
                _raise_received()
                time.sleep(_POLL_SECONDS / 4)
            raise


_BROKEN_WAITS = 4
"""How many times a broken pool waits for the signal that may have broken it."""


def _raise_received() -> None:
    if signal.SIGTERM in _received:
        raise SystemExit(128 + signal.SIGTERM) from None
    if signal.SIGINT in _received:
        raise KeyboardInterrupt from None


def _die_of_sigterm(previous: Any) -> None:
    """End the process as the SIGTERM it received would have, now that the workers are gone.

    The handler's SystemExit is only a way out of the wait: a caller that catches it would
    go on (pytest records it as one test's failure and runs the rest of the session), where
    without the handler the process would have ended. So the signal is sent again with the
    disposition it had (the default: the process ends, and its parent sees it was killed by
    SIGTERM), as a program that cleans up on a signal should do.
    """
    signal.signal(signal.SIGTERM, previous)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.kill(os.getpid(), signal.SIGTERM)


def _init_then(initializer: Callable[..., None], *args: Any) -> None:
    _init_worker()
    initializer(*args)


def kill(pool: ProcessPoolExecutor) -> None:
    """End ``pool``'s workers now, whatever they are running, and wait until they are gone."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(5)
        if process.is_alive():  # it handles SIGTERM (the program it runs set a handler)
            process.kill()
            process.join(5)


@contextmanager
def process_pool(
    workers: int,
    context: multiprocessing.context.BaseContext | None = None,
    *,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers are killed, not waited for, when the parent is interrupted
    (Ctrl-C, or SIGTERM, which then ends the process, as it would have without the pool,
    once the workers are gone instead of leaving them orphaned). ``initializer(*initargs)``
    runs in each worker after it has left interrupts to the parent."""
    if initializer is None:
        pool = _Pool(
            max_workers=workers, mp_context=context or pool_context(), initializer=_init_worker
        )
    else:
        pool = _Pool(
            max_workers=workers,
            mp_context=context or pool_context(),
            initializer=_init_then,
            initargs=(initializer, *initargs),
        )
    previous = previous_int = None
    _received.clear()
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            previous = signal.signal(signal.SIGTERM, _terminated)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous_int = signal.signal(signal.SIGINT, _interrupted)
    try:
        yield pool
    except BaseException:
        kill(pool)
        if previous is not None and signal.SIGTERM in _received:
            _die_of_sigterm(previous)
        raise
    else:
        pool.shutdown()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)
