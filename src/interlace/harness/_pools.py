"""Process pools in a run: each job of a ``ProcessPoolExecutor`` is one opaque step.

A job of a process pool runs in another process, which no schedule reaches, and the pool
moves it there through threads of its own (a manager thread, a queue's feeder thread) that
wait in C on pipes for what the worker processes write. Under the scheduler, which runs one
thread of a run at a time, those threads would wait for real while holding the baton, or be
parked while the processes wait for them. So the pool runs outside the schedule:

* Every call on a pool made by a thread of a run (a controlled thread, or the thread of a
  controlled event loop) runs with that thread out of the schedule (``outside_schedule``):
  the pool's threads start uncontrolled, its locks and queues are taken for real, and the
  worker processes fork from a thread that no scheduler owns.
* ``submit`` (and so ``map``, and the loop's ``run_in_executor``) waits, for real, until the
  job is done, and returns the done future: the job is one step, with nothing else of the
  run moving meanwhile. A stock interpreter can run it so (the job finished before the
  thread that submitted it ran again), and the job shares no memory with the run, so which
  interleavings it had with the run's other threads decides nothing but that timing. The run
  is marked opaque, so an exploration that ran one never claims its space exhausted.
* A job that does not finish within the time limit of any executor job interlace does not
  control (the stall timeout, and at least ``_loop.JOB_SECONDS``) stops the exploration with
  an ``UnsupportedOperationError``, and the pool's worker processes are ended (as if they
  had crashed: the pool is broken from then on), so that nothing waits for the job for good,
  neither the run's end nor the interpreter's.
* A pool created during a run and not shut down by the program is shut down at the end of
  the run (``end_run``), its workers joined; using it in a later run is refused. A pool
  created outside the runs (at import, in a fixture) is the program's to shut down, as on a
  stock interpreter.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import contextlib
import multiprocessing.queues
import threading
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from interlace.errors import UnsupportedOperationError
from interlace.harness import _fault, _loop, _runtime

if TYPE_CHECKING:
    from interlace.harness._threads import ControlledThread

__all__ = ("PATCHES", "end_run", "quiet", "waits_for_job")

_POOL = concurrent.futures.ProcessPoolExecutor
_orig_init = _POOL.__init__
_orig_submit = _POOL.submit
_orig_shutdown = _POOL.shutdown

MSG_JOB_TIMEOUT = (
    "the process pool job {job} did not finish in {timeout:g} s: interlace runs each job of a "
    "concurrent.futures.ProcessPoolExecutor as one opaque step, from submit() to its result, "
    "while nothing else of the run moves, so a job that waits for another job or for the "
    "code under test (through a multiprocessing Event, Queue or Barrier, say) never "
    "finishes. interlace ended the pool's worker processes, so nothing waits for the job for "
    "good (the pool is broken from now on). Keep the jobs of explored code independent of "
    "each other and of the run, or use a ThreadPoolExecutor created inside the explored "
    "function (its jobs run as controlled threads, and their interleavings are explored). "
)
"""Why a process pool job's step is refused (``{job}``, ``{timeout}``); the advice on the
time limit (``_loop.MSG_JOB_TIMEOUT``) follows."""

MSG_POOL_ENDED = (
    "the process pool {pool!r} was created by an earlier schedule, which ended with the pool "
    "shut down (interlace shuts down every pool a schedule created when the schedule ends, so "
    "that no worker process is left behind), so the job {job} cannot run. Create the pool "
    "inside the explored function (every schedule then has its own), or outside the "
    "exploration (at module level, or in a fixture) to share one between schedules"
)
"""Why a pool kept from an earlier run cannot take a job (``{pool}``, ``{job}``)."""

_created: list[concurrent.futures.ProcessPoolExecutor] = []
"""The pools created during the run under way (one run at a time holds the patches)."""


@contextlib.contextmanager
def outside_schedule() -> Iterator[tuple[ControlledThread | None, Any]]:
    """Take the calling thread out of its run's schedule for the block; yield what it was
    (its controlled thread and its controlled event loop, both None outside any run).

    The thread still holds the baton meanwhile, so nothing else of the run moves: what the
    block does is one step. Threads it starts are not the run's, and the locks and
    conditions it takes are taken for real.
    """
    local = _runtime.thread_local
    saved = (local.thread, local.activate, local.loop)
    local.thread = local.activate = local.loop = None
    try:
        yield saved[0], saved[2]
    finally:
        local.thread, local.activate, local.loop = saved


def _describe(fn: Any) -> str:
    return repr(getattr(fn, "__qualname__", fn))


def _init(self: concurrent.futures.ProcessPoolExecutor, *args: Any, **kwargs: Any) -> None:
    with outside_schedule() as (t, loop):
        _orig_init(self, *args, **kwargs)
    if t is not None or loop is not None:
        _created.append(self)


def _submit(
    self: concurrent.futures.ProcessPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any
) -> concurrent.futures.Future[Any]:
    with outside_schedule() as (t, loop):
        if t is None and loop is None:
            return _orig_submit(self, fn, *args, **kwargs)
        if getattr(self, "_il_ended", False):
            error = UnsupportedOperationError(MSG_POOL_ENDED.format(pool=self, job=_describe(fn)))
        else:
            future = _orig_submit(self, fn, *args, **kwargs)
            # The limit of every executor job interlace does not control (``_loop``).
            if t is not None:
                timeout = max(_loop.JOB_SECONDS, t.ctl.stall_timeout)
            else:
                timeout = loop._job_timeout
            if _wait_for_job(future, timeout):
                _opaque(t, loop)
                return future
            # Ended now: the pool's manager thread would wait for the job for good, at the
            # run's end (``end_run``) and at the interpreter's exit, which joins it.
            for process in list((getattr(self, "_processes", None) or {}).values()):
                process.terminate()
            error = UnsupportedOperationError(
                MSG_JOB_TIMEOUT.format(job=_describe(fn), timeout=timeout)
                + _runtime.stall_timeout_advice(timeout, _loop.MSG_JOB_TIMEOUT)
            )
    _refuse(t, loop, error)


def _wait_for_job(future: concurrent.futures.Future[Any], timeout: float) -> bool:
    """Wait, for real, until the job of ``future`` is done (True) or ``timeout`` passed."""
    done, _ = concurrent.futures.wait((future,), timeout=timeout)
    return bool(done)


def _opaque(t: ControlledThread | None, loop: Any) -> None:
    """Mark the run as one that ran a step outside the schedule."""
    if t is not None:
        t.ctl.opaque = True
    if loop is not None:
        loop.opaque = True


def _refuse(t: ControlledThread | None, loop: Any, error: UnsupportedOperationError) -> NoReturn:
    """End the run with ``error``: from a controlled thread as every refusal of one does
    (the run unwinds), from a loop's own thread by raising it into the task (the loop's
    error then ends the exploration)."""
    if t is not None:
        ctl = t.ctl
        if ctl.error is None:
            ctl.error = error
        ctl._abort()
        t.aborted = True
        raise _runtime.Abort
    if loop.error is None:
        loop.error = error
    raise error


def _shutdown(
    self: concurrent.futures.ProcessPoolExecutor,
    wait: bool = True,
    *,
    cancel_futures: bool = False,
) -> None:
    with outside_schedule():
        _orig_shutdown(self, wait=wait, cancel_futures=cancel_futures)


def end_run() -> None:
    """At the end of every run: shut down the pools it created and left running, and join
    their workers."""
    while _created:
        pool = _created.pop()
        pool._il_ended = True  # type: ignore[attr-defined]
        with outside_schedule():
            _orig_shutdown(pool, wait=True, cancel_futures=True)


_FEED = getattr(multiprocessing.queues.Queue, "_feed", None)


def quiet(thread: threading.Thread) -> bool:
    """Whether ``thread`` is a process pool's thread that cannot end a wait of the run: its
    manager thread with no job pending (every job a run submits is done before ``submit``
    returns), or a ``multiprocessing`` queue's feeder thread (it only writes to a pipe)."""
    if isinstance(thread, concurrent.futures.process._ExecutorManagerThread):
        return not getattr(thread, "pending_work_items", True)
    return _FEED is not None and getattr(thread, "_target", None) is _FEED


def waits_for_job(frame: types.FrameType | None) -> bool:
    """Whether the thread at ``frame`` waits for a process pool job, which has a time limit
    of its own (the stall checks leave it alone)."""
    while frame is not None:
        if frame.f_code is _wait_for_job.__code__:
            return True
        frame = frame.f_back
    return False


PATCHES: tuple[tuple[Any, str, Callable[..., Any]], ...] = (
    (_POOL, "__init__", _init),
    (_POOL, "submit", _submit),
    (_POOL, "shutdown", _shutdown),
)
"""What a controlled exploration puts in place of the pool's own methods."""

# The program calls these in place of the pool's methods: what they raise (a RuntimeError
# after shutdown, a BrokenProcessPool) is the program's, as the stock method's would be.
_fault.stand_in(replacement for _, _, replacement in PATCHES)
