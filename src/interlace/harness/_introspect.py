"""Where tasks are, what they wait on and who holds it: for reports, never for decisions.

Everything here runs only when a report is made (a deadlock, a hang, a recorded replay), so it
may be slow (``gc.get_referrers``). Lock ownership is the one thing asyncio does not keep; the
``ownership`` context manager records it while a run is recorded for its report.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import gc
import linecache
import os
import sys
import sysconfig
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from interlace.harness import _instrument

__all__ = (
    "Position",
    "describe_position",
    "describe_task",
    "describe_tasks",
    "describe_timer",
    "describe_wait",
    "frame_position",
    "is_installed_library",
    "is_library_file",
    "libraries_called",
    "location_of",
    "name_of",
    "ownership",
    "package_of",
    "position_of",
    "position_text",
    "short_path",
    "started_by_program",
    "wait_cycle",
)

_STDLIB = os.path.normcase(os.path.realpath(sysconfig.get_paths()["stdlib"])) + os.sep
_HERE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_HIDDEN_INTERLACE = tuple(
    os.path.normcase(os.path.join(_HERE, part)) + os.sep for part in ("harness", "_core")
)
_LIBRARY_PACKAGES = ("anyio", "sniffio", "_pytest", "pluggy", "pytest_asyncio", "exceptiongroup")

_owners: weakref.WeakKeyDictionary[Any, list[asyncio.Task[Any]]] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=4096)
def is_library_file(filename: str) -> bool:
    """True for frames a report should hide: stdlib, interlace's own, and async libraries.

    Cached: a recorded run asks for every frame of the running task at every step, and
    ``realpath`` costs a system call per component.
    """
    path = os.path.normcase(os.path.realpath(filename))
    if path.startswith(_STDLIB) and "site-packages" not in path:
        return True
    if path.startswith(_HIDDEN_INTERLACE):
        return True
    parts = path.split(os.sep)
    return "site-packages" in parts and any(p in parts for p in _LIBRARY_PACKAGES)


@functools.lru_cache(maxsize=4096)
def is_installed_library(filename: str) -> bool:
    """True for a file of an installed distribution (site-packages, dist-packages) that
    :func:`is_library_file` does not hide: a package the program uses, or the package under
    test installed (not editable). A report shows its frames, with the program's line that
    called into them."""
    if is_library_file(filename):
        return False
    parts = os.path.normcase(os.path.realpath(filename)).split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def short_path(filename: str) -> str:
    """A file name relative to the working directory when it is below it; else, for a file
    of an installed distribution or of the standard library, relative to the directory it
    was installed in (``langgraph/pregel/main.py``, ``asyncio/tasks.py``)."""
    return _short_path(filename, os.getcwd())


@functools.lru_cache(maxsize=4096)
def _short_path(filename: str, cwd: str) -> str:
    try:
        relative = os.path.relpath(filename, cwd)
    except ValueError:
        relative = os.pardir
    if not relative.startswith(os.pardir):
        return relative
    parts = filename.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            return os.sep.join(parts[len(parts) - parts[::-1].index(marker) :])
    path = os.path.normcase(os.path.realpath(filename))
    if path.startswith(_STDLIB) and path != _STDLIB:
        return path[len(_STDLIB) :]
    return filename


def _frames_of(awaitable: Any) -> Iterator[types.FrameType]:
    """The frames of a coroutine's await chain, outermost first.

    The chain goes on through an async generator a frame awaits (the ``anext()`` and
    ``athrow()`` of ``contextlib``'s ``__aenter__``/``__aexit__``), so a task suspended in
    the ``finally`` of an async context manager is seen there, not at its ``async with``.
    """
    seen = 0
    while awaitable is not None and seen < 100:
        seen += 1
        if type(awaitable).__name__ in _AGEN_AWAITABLES:
            # Their generator is reachable only as a referent (no attribute names it).
            awaitable = next(
                (r for r in gc.get_referents(awaitable) if isinstance(r, types.AsyncGeneratorType)),
                None,
            )
            continue
        frame = (
            getattr(awaitable, "cr_frame", None)
            or getattr(awaitable, "gi_frame", None)
            or getattr(awaitable, "ag_frame", None)
        )
        if frame is None:
            return
        yield frame
        awaitable = (
            getattr(awaitable, "cr_await", None)
            or getattr(awaitable, "gi_yieldfrom", None)
            or getattr(awaitable, "ag_await", None)
        )


_AGEN_AWAITABLES = ("async_generator_asend", "async_generator_athrow")


@functools.lru_cache(maxsize=4096)
def package_of(filename: str) -> str:
    """The top-level package or module a file of the standard library or of an installed
    distribution belongs to (``asyncio``, ``langgraph``); "" for any other file."""
    path = os.path.normcase(os.path.realpath(filename))
    parts = path.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            index = len(parts) - 1 - parts[::-1].index(marker)
            return parts[index + 1].removesuffix(".py") if index + 1 < len(parts) else ""
    if path.startswith(_STDLIB):
        return path[len(_STDLIB) :].split(os.sep)[0].removesuffix(".py")
    return ""


class Position(NamedTuple):
    """Where a task or thread stood, for a step of the report.

    Attributes:
        filename: the file of the innermost frame a report shows: the code under test's or
            an installed library's (:func:`is_installed_library`), never the standard
            library's or an async framework's.
        line: its line.
        function: its function's qualified name.
        caller: for a frame of an installed library, the (file, line) of the innermost frame
            of the program's own code that called into it, if one is on the stack.
        api: for a frame of an installed library, the asyncio API it is inside
            (``"asyncio.Lock.acquire"``), if any.
    """

    filename: str
    line: int
    function: str
    caller: tuple[str, int] | None = None
    api: str = ""


def _shown_in_task(filename: str) -> bool:
    return not is_library_file(filename)


def _shown_in_thread(filename: str) -> bool:
    return _instrument.is_under_test(filename) or is_installed_library(filename)


def _position(frames: Sequence[types.FrameType], shown: Callable[[str], bool]) -> Position | None:
    """The :class:`Position` of a stack given outermost frame first."""
    index = next(
        (i for i in range(len(frames) - 1, -1, -1) if shown(frames[i].f_code.co_filename)),
        None,
    )
    if index is None:
        return None
    frame = frames[index]
    code = frame.f_code
    if not is_installed_library(code.co_filename):
        return Position(code.co_filename, frame.f_lineno, code.co_qualname)
    caller = next(
        (
            (outer.f_code.co_filename, outer.f_lineno)
            for outer in reversed(frames[:index])
            if shown(outer.f_code.co_filename)
            and not is_installed_library(outer.f_code.co_filename)
        ),
        None,
    )
    # The asyncio API it called: past the dunders an ``async with`` goes through
    # (``_ContextManagerMixin.__aenter__`` calls ``Lock.acquire``) and interlace's own
    # frames (``ownership`` wraps ``Lock.acquire`` while a run is recorded).
    api = ""
    for inner in frames[index + 1 :]:
        if package_of(inner.f_code.co_filename) != "asyncio":
            continue
        api = api or "asyncio." + inner.f_code.co_qualname
        if not inner.f_code.co_name.startswith("__"):
            api = "asyncio." + inner.f_code.co_qualname
            break
    return Position(code.co_filename, frame.f_lineno, code.co_qualname, caller, api)


def position_of(task: asyncio.Task[Any]) -> Position | None:
    """Where the task is suspended: the innermost frame outside the standard library and
    the async frameworks (:func:`is_library_file`), or None.

    The cheap half of :func:`location_of`, for a recorder that formats only the steps a
    report shows.
    """
    return _position(list(_frames_of(task.get_coro())), _shown_in_task)


def frame_position(frame: types.FrameType | None) -> Position | None:
    """Where a thread stands, ``frame`` its innermost frame: the innermost frame of the
    code under test or of an installed library, or None."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    return _position(frames, _shown_in_thread)


def libraries_called(task: asyncio.Task[Any], *, from_program: bool) -> set[str]:
    """The installed libraries (:func:`package_of`) the program has called into on the
    task's await chain: those with a frame inside a frame of the program's own code, or
    every one on it for a task the program started (``from_program``)."""
    called: set[str] = set()
    inside = from_program
    for frame in _frames_of(task.get_coro()):
        filename = frame.f_code.co_filename
        if is_library_file(filename):
            continue
        if is_installed_library(filename):
            if inside:
                called.add(package_of(filename))
        else:
            inside = True
    return called


def started_by_program(frame: types.FrameType | None) -> bool:
    """Whether the innermost frame of ``frame``'s stack that a report would show (outside
    the standard library, interlace and the async frameworks) is the program's own code:
    a task created there is one the program started, even through ``gather`` or a
    ``TaskGroup``."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_library_file(filename):
            return not is_installed_library(filename)
        frame = frame.f_back
    return False


def position_text(position: Position | None) -> str:
    """``file:line`` and its source text on one line (``app.py:3 await start()``); a frame
    of an installed library with a colon after its location (``lib/mod.py:12 in C.m
    (called from app.py:3): await x``)."""
    where, text = describe_position(position)
    if not text:
        return where
    separator = ": " if position is not None and is_installed_library(position.filename) else " "
    return where + separator + text


def describe_position(position: Position | None) -> tuple[str, str]:
    """(``file:line``, source text) of a :func:`position_of` result; empty strings for None.

    A frame of an installed library reads ``lib/mod.py:12 in Class.method (called from
    app.py:3)``: its function, the asyncio API it waits in when its line does not name it,
    and the line of the program that called into it.
    """
    if position is None:
        return "", ""
    filename, line = position.filename, position.line
    text = linecache.getline(filename, line).strip()
    if text.count("(") > text.count(")") or text.count("[") > text.count("]"):
        text += " …"  # the statement goes on over more lines
    where = f"{short_path(filename)}:{line}"
    if is_installed_library(filename):
        where += f" in {position.function}"
        notes = []
        if position.api and position.api.rpartition(".")[2].lstrip("_") not in text:
            notes.append(f"in {position.api}")
        if position.caller is not None:
            notes.append(f"called from {short_path(position.caller[0])}:{position.caller[1]}")
        if notes:
            where += f" ({', '.join(notes)})"
    return where, text


def location_of(task: asyncio.Task[Any]) -> tuple[str, str]:
    """Return (``file:line``, source text) of the innermost user frame the task is suspended in."""
    return describe_position(position_of(task))


def name_of(obj: Any, code: Callable[[types.CodeType], bool] | None = None) -> str:
    """A readable name for an object: ``Class.attr``, ``module.global`` or a local's name.

    ``code`` filters whose locals and closure cells may name it (the threads backend passes
    "code under test", so the scheduler's own frames and closures, holding a lock as
    ``lock``, never do). A plain dict's key is the last resort.
    """
    fallback = ""
    for referrer in gc.get_referrers(obj):
        if isinstance(referrer, dict):
            key = next((k for k, v in referrer.items() if v is obj and isinstance(k, str)), None)
            if key is None:
                continue
            module_name = referrer.get("__name__")
            if (
                isinstance(module_name, str)
                and referrer.get("__dict__") is None
                and (
                    sys.modules.get(module_name) is not None
                    and getattr(sys.modules[module_name], "__dict__", None) is referrer
                )
            ):
                return f"{module_name}.{key}"
            for holder in gc.get_referrers(referrer):
                if getattr(holder, "__dict__", None) is referrer:
                    return f"{type(holder).__name__}.{key}"
            fallback = fallback or key  # a plain dict's key: only if nothing names it better
            continue
        if isinstance(referrer, types.CellType):
            for closure in gc.get_referrers(referrer):
                if not isinstance(closure, tuple):
                    continue
                for function in gc.get_referrers(closure):
                    if not isinstance(function, types.FunctionType):
                        continue
                    if code is not None and not code(function.__code__):
                        continue
                    if function.__closure__ is closure:
                        return function.__code__.co_freevars[closure.index(referrer)]
        frame = _suspended_frame(referrer)
        if frame is not None:
            if code is not None and not code(frame.f_code):
                continue
            for key, value in frame.f_locals.items():
                if value is obj:
                    return key
            continue
        if not isinstance(referrer, (list, tuple, dict)) and hasattr(referrer, "__dict__"):
            for key, value in vars(referrer).items():
                if value is obj:
                    return f"{type(referrer).__name__}.{key}"
    return fallback or f"(an unnamed {type(obj).__name__})"


def _suspended_frame(referrer: object) -> types.FrameType | None:
    """The frame whose locals ``referrer`` holds: a frame, or a suspended coroutine or
    generator (since 3.11 a suspended one keeps its locals itself, not in a frame object)."""
    if isinstance(referrer, types.FrameType):
        return referrer
    if isinstance(referrer, types.CoroutineType):
        return referrer.cr_frame
    if isinstance(referrer, types.GeneratorType):
        return referrer.gi_frame
    if isinstance(referrer, types.AsyncGeneratorType):
        return referrer.ag_frame
    return None


def _user_code(code: types.CodeType) -> bool:
    return not is_library_file(code.co_filename)


def _named(obj: Any) -> str:
    """``Kind name`` for a primitive or future, e.g. ``Lock first``, ``an unnamed Event``."""
    kind = type(obj).__name__
    if isinstance(obj, asyncio.Future) and not isinstance(obj, asyncio.Task):
        kind = "future"
    name = name_of(obj, _user_code)
    if name.startswith("(an unnamed "):
        return f"an unnamed {kind}"
    return f"{kind} {name}"


_CONTAINERS = (list, tuple, dict, set, collections.deque, collections.OrderedDict)


def _primitive_waiting_on(future: Any) -> Any:
    """The asyncio/anyio primitive whose waiter list holds ``future``, if any.

    Walks referrers breadth-first through containers (asyncio keeps waiters in a deque,
    anyio in a deque of ``(task, future)`` tuples) and instance dicts, a few levels deep.
    """
    frontier = [future]
    seen = {id(future)}
    for _ in range(4):
        next_frontier = []
        for obj in frontier:
            for referrer in gc.get_referrers(obj):
                if id(referrer) in seen or isinstance(referrer, types.FrameType):
                    continue
                seen.add(id(referrer))
                if isinstance(referrer, _CONTAINERS):
                    if isinstance(referrer, dict):
                        owner = next(
                            (
                                h
                                for h in gc.get_referrers(referrer)
                                if getattr(h, "__dict__", None) is referrer
                            ),
                            None,
                        )
                        if owner is not None and _is_primitive(owner):
                            return owner
                    next_frontier.append(referrer)
                elif _is_primitive(referrer):
                    return referrer
        frontier = next_frontier
    return None


def _is_primitive(obj: Any) -> bool:
    module = type(obj).__module__
    return module.startswith(("asyncio", "anyio")) and not isinstance(
        obj, (asyncio.Future, asyncio.Handle, types.FrameType, types.CoroutineType)
    )


def _creation_order(task: asyncio.Task[Any]) -> int:
    return int(getattr(task, "_il_id", 0))


def _task_label(task: asyncio.Task[Any]) -> str:
    return repr(task.get_name())


def holders_of(primitive: Any) -> list[asyncio.Task[Any]]:
    """Tasks known to hold ``primitive`` (asyncio locks/semaphores, anyio locks)."""
    holders = list(_owners.get(primitive, ()))
    owner = getattr(primitive, "_owner_task", None)  # anyio.Lock keeps its owner
    if isinstance(owner, asyncio.Task):
        holders.append(owner)
    inner = getattr(primitive, "_lock", None)  # asyncio.Condition wraps a Lock
    if inner is not None and inner is not primitive:
        holders.extend(_owners.get(inner, ()))
    return holders


def _awaited(future: Any) -> str:
    if isinstance(future, asyncio.Task):
        return "task " + _task_label(future)
    return _named(future)


def _library_wait(task: asyncio.Task[Any], waiter: Any) -> str | None:
    """What a task suspended inside ``asyncio.sleep``/``asyncio.wait`` waits for, or None.

    Their future is a local of the stdlib's frame, which says nothing to the user.
    """
    innermost: types.FrameType | None = None
    for frame in _frames_of(task.get_coro()):
        innermost = frame
    if innermost is None:
        return None
    code = innermost.f_code
    if not code.co_filename.endswith(os.path.join("asyncio", "tasks.py")):
        return None
    if code.co_name == "sleep":
        delay = innermost.f_locals.get("delay")
        return f"sleeps (asyncio.sleep({delay!r}))" if delay is not None else "sleeps"
    if code.co_name == "_wait":
        futures = innermost.f_locals.get("fs")
        if futures is None or innermost.f_locals.get("waiter") is not waiter:
            return None
        pending = sorted((f for f in futures if not f.done()), key=_creation_order)
        names = ", ".join(_awaited(f) for f in pending)
        return f"waits in asyncio.wait() for {names or 'finished futures'}"
    return None


_SLEEP_DONE = asyncio.futures._set_result_unless_cancelled  # type: ignore[attr-defined]
"""The callback of the timer that ends an ``asyncio.sleep``."""


def _sleep_timer(waiter: Any) -> Any:
    """The pending timer that ends an ``asyncio.sleep`` waiting on ``waiter``, if one does."""
    loop = getattr(waiter, "_loop", None)
    for timer in getattr(loop, "_scheduled", ()):
        if (
            not timer.cancelled()
            and timer._callback is _SLEEP_DONE
            and timer._args
            and timer._args[0] is waiter
        ):
            return timer
    return None


def _clock_text(timer: Any) -> str:
    """When a timer is due: virtual seconds since the run started, on interlace's loop."""
    epoch = getattr(timer._loop, "epoch", None)
    if isinstance(epoch, float):
        return f"virtual time {timer.when() - epoch:g} s"
    return f"loop time {timer.when():g}"


def describe_timer(timer: Any) -> str:
    """What a pending timer does when it fires: whose sleep it ends, whose timeout it is."""
    callback = timer._callback
    args = timer._args or ()
    if callback is _SLEEP_DONE and args:
        for task in asyncio.all_tasks(timer._loop):
            if getattr(task, "_fut_waiter", None) is args[0]:
                where, _ = location_of(task)
                at = f" at {where}" if where else ""
                return f"it ends the sleep of task {_task_label(task)}{at}"
        return "it ends a sleep"
    owner = getattr(callback, "__self__", None)
    timed = getattr(owner, "_task", None)
    if isinstance(owner, asyncio.Timeout) and isinstance(timed, asyncio.Task):
        return f"it is the timeout of task {_task_label(timed)}"
    name = getattr(callback, "__qualname__", None)
    if not isinstance(name, str):
        name = type(callback).__qualname__
    if name == "_release_waiter":
        return "it is a wait_for() timeout"
    return f"it calls {name}"


def describe_wait(task: asyncio.Task[Any]) -> str:
    """What a suspended task waits on, and who holds it."""
    waiter = getattr(task, "_fut_waiter", None)
    if waiter is None:
        return "is ready to run"
    if isinstance(waiter, asyncio.Task):
        return f"waits for task {_task_label(waiter)}"
    children = getattr(waiter, "_children", None)
    if children is not None:
        pending = [c for c in children if not c.done()]
        names = ", ".join(
            _task_label(c) if isinstance(c, asyncio.Task) else _named(c) for c in pending
        )
        return f"waits for gather() of {names or 'finished children'}"
    sleep = _sleep_timer(waiter)
    if sleep is not None:
        return f"sleeps until {_clock_text(sleep)}"
    primitive = _primitive_waiting_on(waiter)
    if primitive is None:
        inside = _library_wait(task, waiter)
        if inside is not None:
            return inside
        return f"waits on {_named(waiter)} (nothing has completed it)"
    kind = type(primitive).__name__
    if kind == "TaskGroup":
        children = [t for t in getattr(primitive, "_tasks", ()) if isinstance(t, asyncio.Task)]
        names = ", ".join(_task_label(t) for t in sorted(children, key=_creation_order))
        return f"waits for its task group to finish ({names or 'no task left'})"
    text = f"waits on {_named(primitive)}"
    holders = holders_of(primitive)
    if holders:
        text += " held by " + ", ".join(
            "task " + _task_label(h) + (" (itself)" if h is task else "") for h in holders
        )
    elif waiter in getattr(primitive, "_putters", ()):
        text += " (full: no task will get an item)"
    elif waiter in getattr(primitive, "_getters", ()):
        text += " (empty: no task will put an item)"
    elif kind == "Event":
        text += " (no task will set it)"
    elif kind == "Condition":
        text += " (no task will notify it)"
    return text


def _waits_for(task: asyncio.Task[Any]) -> asyncio.Task[Any] | None:
    """The one task ``task`` waits for: the task it awaits, or the one holder of the lock or
    semaphore it waits on; None if there is no such single task."""
    waiter = getattr(task, "_fut_waiter", None)
    if waiter is None:
        return None
    if isinstance(waiter, asyncio.Task):
        return waiter
    if getattr(waiter, "_children", None) is not None:  # gather(): several
        return None
    primitive = _primitive_waiting_on(waiter)
    holders = holders_of(primitive) if primitive is not None else []
    return holders[0] if len(holders) == 1 else None


def wait_cycle(tasks: Sequence[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """The first cycle of tasks each waiting for the next (``_waits_for``), from the task
    of ``tasks`` that comes first in it; [] if there is none."""
    for start in tasks:
        path: list[asyncio.Task[Any]] = []
        at: dict[asyncio.Task[Any], int] = {}
        task: asyncio.Task[Any] | None = start
        while task is not None and task not in at:
            at[task] = len(path)
            path.append(task)
            task = _waits_for(task)
        if task is not None:
            return path[at[task] :]
    return []


def describe_tasks(tasks: Sequence[asyncio.Task[Any]], indent: str) -> list[str]:
    """A deadlock report's lines for ``tasks``: the tasks of a wait-for cycle first, each on a
    line of its own, then the others, then the cycle itself."""
    cycle = wait_cycle(tasks)
    ordered = [*cycle, *(task for task in tasks if task not in cycle)]
    lines = [indent + describe_task(task) for task in ordered]
    if cycle:
        names = [f"task {_task_label(task)}" for task in (*cycle, cycle[0])]
        lines.append(f"{indent}Wait-for cycle: {' -> '.join(names)}")
    return lines


def describe_task(task: asyncio.Task[Any]) -> str:
    """One line: the task, where it is suspended, and what it waits on."""
    where, text = location_of(task)
    at = f" at {where}" + (f" ({text})" if text else "") if where else ""
    return f"task {_task_label(task)}{at} {describe_wait(task)}"


@contextlib.contextmanager
def ownership() -> Iterator[None]:
    """Record which task holds each asyncio ``Lock``/``Semaphore`` while the block runs."""
    lock_acquire = asyncio.Lock.acquire
    lock_release = asyncio.Lock.release
    sem_acquire = asyncio.Semaphore.acquire
    sem_release = asyncio.Semaphore.release

    async def acquire_lock(self: asyncio.Lock) -> bool:
        result = await lock_acquire(self)
        task = asyncio.current_task()
        if task is not None:
            _owners[self] = [task]
        return result

    def release_lock(self: asyncio.Lock) -> None:
        lock_release(self)
        _owners.pop(self, None)

    async def acquire_sem(self: asyncio.Semaphore) -> bool:
        result = await sem_acquire(self)
        task = asyncio.current_task()
        if task is not None:
            _owners.setdefault(self, []).append(task)
        return result

    def release_sem(self: asyncio.Semaphore) -> None:
        sem_release(self)
        holders = _owners.get(self)
        task = asyncio.current_task() if asyncio._get_running_loop() is not None else None
        if holders:
            holders.remove(task if task in holders else holders[0])

    asyncio.Lock.acquire = acquire_lock  # type: ignore[method-assign,assignment]
    asyncio.Lock.release = release_lock  # type: ignore[method-assign]
    asyncio.Semaphore.acquire = acquire_sem  # type: ignore[method-assign,assignment]
    asyncio.Semaphore.release = release_sem  # type: ignore[method-assign]
    try:
        yield
    finally:
        asyncio.Lock.acquire = lock_acquire  # type: ignore[method-assign]
        asyncio.Lock.release = lock_release  # type: ignore[method-assign]
        asyncio.Semaphore.acquire = sem_acquire  # type: ignore[method-assign]
        asyncio.Semaphore.release = sem_release  # type: ignore[method-assign]
