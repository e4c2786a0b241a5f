"""Worker processes for ``explore(..., workers=N)``: each imports the explored function by
``module:qualname``, opens one session (backend, instrumentation) for its life, and runs the
choosers the exploring process sends it (``_core.split``).

Workers start with ``spawn``, never ``fork``: the exploring process may run threads (a
watchdog, pytest's), which a forked child would inherit broken; nor ``forkserver``, whose
children hold the server's lifeline open, so that neither ends when the exploring process
dies. A worker ends with its parent: its interrupts are the parent's (``_processes``), which
kills every worker on Ctrl-C, SIGTERM, a timeout's exception or once the answer is settled;
and on Linux the kernel kills it if the parent dies without doing so (``PR_SET_PDEATHSIG``:
pytest-timeout's thread method ends the process with ``os._exit``).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from interlace import _processes
from interlace._core.schedule import Settings
from interlace._core.split import Batch, Outcome, run_outcome
from interlace._core.strategy import Chooser

__all__ = ("ProcessWorkers", "WorkerSpec", "importable_name", "worker_pool")

MSG_NOT_IMPORTABLE = (
    "workers={workers!r} {source}: the worker processes import the explored function by its "
    "module and name, but {name!r} {why}. Define it at the top level of an importable module "
    "(not in __main__, not inside another function, not a lambda or a decorated wrapper), "
    "or explore with workers=1"
)

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker needs to run the exploring process's schedules.

    Attributes:
        target: ``module:qualname`` of the explored function.
        settings: the exploration's settings (the same as the token's).
        instrument: what the session instruments (``api._session_instrument``).
        stall_timeout: as for ``explore``.
        parent: the exploring process's id (a worker whose parent is gone ends).
        path: the exploring process's ``sys.path`` (a spawned worker starts with its own).
        open_session: the function that opens the backend's session (``explore``'s own,
            handed over by reference: pickled by name, it is imported in the worker, and
            this module needs no import of the API above it).
    """

    target: str
    settings: Settings
    instrument: tuple[str, ...]
    stall_timeout: float
    parent: int
    path: tuple[str, ...]
    open_session: Callable[..., contextlib.AbstractContextManager[Any]]


def _resolve(name: str) -> Any:
    module, _, qualname = name.partition(":")
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def importable_name(target: Callable[..., Any]) -> tuple[str, str]:
    """``("module:qualname", "")`` when importing that gives ``target`` itself, else
    ``("", why not)``."""
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return "", "has no module and qualified name"
    if module == "__main__":
        return "", "is defined in __main__ (the script run), which a worker does not run"
    if "<" in qualname:
        return "", f"is {qualname.split('.')[-1]!r} defined inside another function"
    try:
        found = _resolve(f"{module}:{qualname}")
    except Exception:  # any failure to import means "not importable"
        return "", f"cannot be imported as {module}:{qualname}"
    if found is not target:
        return "", f"is not what {module}:{qualname} names (a wrapper, or redefined)"
    return f"{module}:{qualname}", ""


_session: contextlib.ExitStack | None = None
_backend: Any = None


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died before the call above (and not yet been reaped).
        if os.getppid() != parent or not _running(parent):
            os._exit(1)


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (state, parent, ...)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()
    except OSError:
        return []


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def _start(spec: WorkerSpec) -> None:
    """A worker's initializer: tie it to its parent, import the target, open the session."""
    global _session, _backend
    _die_with_parent(spec.parent)
    for entry in reversed(spec.path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    target = _resolve(spec.target)
    stack = contextlib.ExitStack()
    _backend = stack.enter_context(
        spec.open_session(target, spec.settings, spec.instrument, stall_timeout=spec.stall_timeout)
    )
    _session = stack


def _run_batch(batch: Batch, deadline: float | None) -> list[tuple[int, Outcome]]:
    """Run a job in this worker, up to its first failure or ``deadline``."""
    outcomes: list[tuple[int, Outcome]] = []
    for index, data in batch:
        if outcomes and deadline is not None and time.time() > deadline:
            break
        chooser: Chooser = pickle.loads(data)
        outcome = run_outcome(_backend, chooser)
        outcomes.append((index, outcome))
        if outcome.kind is not None:
            break
    return outcomes


class ProcessWorkers:
    """``_core.split.WorkerPool`` on a process pool."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self._pool = pool

    def submit(self, batch: Batch, deadline: float | None) -> Future[list[tuple[int, Outcome]]]:
        return self._pool.submit(_run_batch, batch, deadline)

    def result(self, future: Future[list[tuple[int, Outcome]]]) -> list[tuple[int, Outcome]]:
        return _processes.result(future)

    def stop(self) -> None:
        _processes.kill(self._pool)


def _context() -> multiprocessing.context.BaseContext:
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def worker_pool(spec: WorkerSpec, workers: int) -> Iterator[ProcessWorkers]:
    """``workers`` worker processes for the exploration ``spec`` describes."""
    with _processes.process_pool(workers, _context(), initializer=_start, initargs=(spec,)) as pool:
        yield ProcessWorkers(pool)
