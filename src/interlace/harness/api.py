"""``explore`` and ``replay``: the public entry points of the harness."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import os
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from interlace._core.explorer import Backend, ReplayHints, explore_backend, make_failure
from interlace._core.result import Exploration, Failure
from interlace._core.schedule import Settings, decode_token
from interlace._core.split import explore_split
from interlace._core.strategy import (
    STRATEGIES,
    ReplayChooser,
    Strategy,
    make_strategy,
)
from interlace.errors import (
    ConfigError,
    InvalidTargetError,
    ReplayDivergedError,
    UnsupportedOperationError,
)
from interlace.harness import _instrument, _interrupt, _workers
from interlace.harness._asyncio_backend import AsyncioBackend, Watchdog
from interlace.harness._runtime import STALL_SECONDS as _STALL_SECONDS
from interlace.harness._threads import ThreadsBackend, controlled_exploration

__all__ = ("explore", "replay")

DEFAULT_MAX_SCHEDULES = 1000
DEFAULT_STRATEGY = "auto"
DEFAULT_MAX_STALL = 0.05
"""Seconds the event loop may stall in one run (``max_stall``); see docs/harness.md, "Loop
stalls", for the measurements behind it."""
MSG_JITTER_RENAMED = (
    "jitter={value!r} {source}: the timer-jitter window is now part of the loop-stall model; "
    "write max_stall={value!r} instead (seconds the event loop may stall in a run; timers "
    "due within it may also fire out of deadline order)"
)
DEFAULT_STALL_TIMEOUT = _STALL_SECONDS
SHARD_SEED = 0
"""The seed of a sharded exploration given none: every shard must explore the same space."""

# Notes for a failure whose cause is not the schedule it reports, one text for explore(), the
# command line and the pytest plugin (``explain``): {where} and {subject} name what
# explore() and the command line run (a function) or what the plugin runs (a test, with its
# fixtures). The tests format these same constants and match the output.
MSG_EARLIER_STATE = (
    "interlace: this is the stock-order schedule, which passed as the exploration's first "
    "schedule: the failure depends on state that earlier schedules left behind ({where}), "
    "not on this schedule, and its replay may pass. Build that state inside {subject}, so "
    "that every schedule starts fresh."
)
MSG_EARLIER_STATE_GLOBALS = "a module global, a class attribute, a cache"
MSG_EARLIER_STATE_FIXTURES = (
    "in the test's fixtures ({names}), which every schedule shares, or elsewhere"
)
MSG_OTHER_LOOP = (
    "interlace: an asyncio object (lock, queue, event, future) used here belongs to another "
    "event loop. Every schedule runs on a fresh event loop, so an object bound to a loop "
    "outside it cannot be used: {made}one kept in a module global, a class attribute or a "
    "cache, which an earlier schedule bound to its loop. Create asyncio objects inside "
    "{subject}; the failure does not depend on the schedule, and its replay may pass."
)
MSG_OTHER_LOOP_FIXTURES = (
    "one made by an async fixture (pytest-asyncio and anyio run those on their own loop, a "
    "module- or session-scoped one for every test), or "
)
MSG_OTHER_LOOP_BEFORE = "one bound to an event loop that ran before the exploration, or "
MSG_IN_FUNCTION = "the explored function"
MSG_IN_TEST = "the test (or have a fixture return a factory)"
MSG_REPLAY_STOCK = (
    "The token is the stock-order schedule: if its exploration found it failing only after "
    "its first schedule (stock order too) had passed, the failure needed state that earlier "
    "schedules left behind ({where}), which a replay, a single schedule, does not recreate."
)
MSG_OPAQUE = (
    "some steps ran outside interlace's control and their interleavings were not explored: "
    "executor jobs on threads it did not start (the workers of an executor created and used "
    "before {when}), jobs of a process pool (each ran as one step, in another process), or "
    "the tasks of an event loop run in a thread; for jobs whose interleavings are explored, "
    "run them on a ThreadPoolExecutor created inside {subject}"
)

MSG_UNINSTRUMENTED = (
    "threads ran code of {modules} without schedule points (installed code outside the "
    "explored function's own package is not instrumented by default), so no thread switch "
    "inside it was explored and the bounded space does not count as exhausted; to explore "
    "it, instrument {packages}: {how}"
)
MSG_UNINSTRUMENTED_API = "explore(..., instrument=[{names}]) or 'interlace explore {flags}'"
MSG_UNINSTRUMENTED_TEST = (
    "@pytest.mark.interlace(instrument=[{names}]) or --interlace-instrument={joined}"
)
_NAMED_MODULES = 5
"""How many modules the sentence names before it counts the rest."""

# The strategies whose first schedule is stock order.
_STOCK_FIRST = ("auto", "exhaustive")

_DIVERGENCE_CAUSES = (
    "Likely causes: the code changed since the token was made; the program reads the wall "
    "clock (time.time(), datetime.now()) or does real I/O; it uses unseeded randomness "
    "(random without a seed, uuid4()); or it iterates a set or dict keyed by str/bytes whose "
    "hash order changes between processes (run both with the same PYTHONHASHSEED)."
)


def _check_int(name: str, value: object, minimum: int, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"{name}={value!r} {source} is invalid: expected a whole number >= {minimum}"
        )
    return value


def _check_number(name: str, value: object, minimum: float, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum:
        raise ConfigError(f"{name}={value!r} {source} is invalid: expected a number >= {minimum}")
    return float(value)


def _check_timeout(name: str, value: object, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ConfigError(
            f"{name}={value!r} {source} is invalid: expected a number of seconds > 0, "
            f"e.g. {name}=60"
        )
    return float(value)


MSG_BAD_SHARD = (
    "shard={value!r} {source} is invalid: expected K/N, two whole numbers with "
    "1 <= K <= N (the K-th of N parts), e.g. 1/3, 2/3 and 3/3 for three CI jobs"
)


def check_shard(value: object, source: str) -> tuple[int, int]:
    """A shard ``(K, N)``, from a pair or from ``"K/N"``.

    Raises:
        ConfigError: not two whole numbers with 1 <= K <= N; the message names ``source``.
    """
    if isinstance(value, str):
        first, slash, second = value.strip().partition("/")
        try:
            pair: object = (int(first), int(second)) if slash else None
        except ValueError:
            pair = None
    else:
        pair = tuple(value) if isinstance(value, (tuple, list)) else None
    if (
        not isinstance(pair, tuple)
        or len(pair) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in pair)
        or not 1 <= pair[0] <= pair[1]
    ):
        raise ConfigError(MSG_BAD_SHARD.format(value=value, source=source))
    return pair[0], pair[1]


def _check_flag(name: str, value: object, source: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(
            f"{name}={value!r} {source} is invalid: expected True or False, e.g. {name}=True"
        )
    return value


def check_target(target: Any) -> Callable[[], Any]:
    """Validate an explore/replay target and return it.

    Raises:
        InvalidTargetError: not a zero-argument function (``async def`` or plain).
    """
    if not callable(target):
        raise InvalidTargetError(
            f"the target must be a zero-argument function (async def, or plain with its "
            f"threads), got {target!r} ({type(target).__name__}); pass the function itself, "
            "not a call of it"
        )
    if inspect.iscoroutine(target):
        raise InvalidTargetError(
            f"the target {target!r} is a coroutine object: pass the async function itself "
            "(explore(main), not explore(main())), since every schedule needs a fresh run"
        )
    name = getattr(target, "__qualname__", repr(target))
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        required = [
            p.name
            for p in signature.parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if required:
            wrapper = (
                f"async def scenario(): await {name}(...)"
                if _is_async(target)
                else f"def scenario(): {name}(...)"
            )
            raise InvalidTargetError(
                f"the target {name} takes required parameters ({', '.join(required)}): "
                "explore() calls it with no arguments once per schedule; wrap it, e.g. "
                f"'{wrapper}', and explore the wrapper"
            )
    if inspect.isasyncgenfunction(target) or inspect.isgeneratorfunction(target):
        raise InvalidTargetError(
            f"the target {name} is a generator function: explore a plain function (its "
            "threads run under control) or an async def function (on the controlled loop)"
        )
    checked: Callable[[], Any] = target
    return checked


def _is_async(target: object) -> bool:
    """An ``async def`` function (also through ``functools.partial``), or an object whose
    ``__call__`` is one: calling it makes a coroutine, which runs on the controlled loop."""
    return inspect.iscoroutinefunction(target) or (
        callable(target) and inspect.iscoroutinefunction(type(target).__call__)
    )


def _backend_name(target: Callable[[], Any]) -> str:
    return "asyncio" if _is_async(target) else "threads"


@contextlib.contextmanager
def _session(
    target: Callable[[], Any],
    settings: Settings,
    instrument: tuple[str, ...],
    *,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
) -> Iterator[Backend]:
    """The backend for ``settings.backend``, with what it needs installed while it runs.

    Every run seeds ``random`` (``seed_run_random``); the caller's state is put back after.
    """
    state = random.getstate()
    try:
        with _interrupt.kept(), _backend(target, settings, instrument, stall_timeout) as backend:
            yield backend
    finally:
        random.setstate(state)


@contextlib.contextmanager
def _backend(
    target: Callable[[], Any],
    settings: Settings,
    instrument: tuple[str, ...],
    stall_timeout: float,
) -> Iterator[Backend]:
    if settings.backend == "asyncio":
        with contextlib.ExitStack() as stack:
            # The thread primitives are installed for the session, the schedule points only
            # once a run starts a thread; while another threads exploration holds them (one
            # per process), executor jobs run as opaque steps.
            try:
                stack.enter_context(controlled_exploration(instrument, target, lazy=True))
            except UnsupportedOperationError:
                threads = False
            else:
                threads = True
            backend = AsyncioBackend(target, settings, threads=threads, stall_timeout=stall_timeout)
            backend.watchdog = Watchdog(stall_timeout)
            try:
                yield backend
            finally:
                if backend.watchdog is not None:
                    backend.watchdog.stop()
    else:
        with controlled_exploration(instrument, target):
            yield ThreadsBackend(target, settings, stall_timeout=stall_timeout)


def _strategy(name: str, backend: str, seed: int, bound: int, depth: int, budget: int) -> Strategy:
    """The named strategy; ``auto`` is the same portfolio for threads as for asyncio."""
    # Threads have a schedule point at every line, so the random walk switches threads at
    # about half of them; it still finds the thread suite's hidden bugs in the fewest
    # schedules (benchmarks/threads_find.py, 15 programs x 5 seeds: median 2, none missed).
    # Stock order plus the walk on three schedules in four needed a median 3 schedules and
    # 0.59x the total time of [exhaustive, delay, exhaustive, pct] (median 12), which
    # missed a bug that needs two preemptions on 3 of 5 seeds.
    return make_strategy(name, seed, bound=bound, depth=depth, budget=budget)


def _check_instrument(instrument: object, source: str) -> tuple[str, ...]:
    if isinstance(instrument, str) or not all(
        isinstance(item, str) and item
        for item in instrument  # type: ignore[attr-defined]
    ):
        raise ConfigError(
            f"instrument={instrument!r} {source} is invalid: expected a list of module names "
            "or paths, e.g. ['mypackage', 'src/vendored/']"
        )
    for name in instrument:  # type: ignore[attr-defined]
        reason = _instrument.uninstrumentable(name)
        if reason is not None:
            raise ConfigError(
                f"instrument={instrument!r} {source} names {name!r}, which cannot be "
                f"instrumented: {reason}"
            )
    return tuple(instrument)  # type: ignore[arg-type]


def _hints(target: Callable[..., Any], instrument: tuple[str, ...]) -> ReplayHints:
    module = getattr(target, "__module__", None) or "__main__"
    qualname = str(getattr(target, "__qualname__", None) or getattr(target, "__name__", "target"))
    # A function defined in __main__ or inside another function cannot be imported by
    # `interlace replay MODULE:FUNCTION`, so the report leaves that line out.
    cli = f"{module}:{qualname}" if "<" not in qualname and module != "__main__" else ""
    return ReplayHints(api=f"{module}.{qualname}", cli=cli, instrument=instrument)


def explain(
    failure: Failure,
    *,
    schedules: int,
    strategy: str,
    fixtures: Sequence[str] | None = None,
) -> list[str]:
    """Notes for a failure whose cause is not the schedule it reports.

    One text for every front end: :func:`explore` (and so the command line) adds them to the
    failure's report and exception; the pytest plugin adds them to the test's failure.

    Args:
        failure: the failure found.
        schedules: how many schedules the exploration ran.
        strategy: the strategy's name (``"auto"``, ...).
        fixtures: for a pytest test, the names of the fixtures it takes: the notes then
            speak of the test and its fixtures; None for a function.
    """
    subject = MSG_IN_FUNCTION if fixtures is None else MSG_IN_TEST
    exception = failure.exception
    if isinstance(exception, (RuntimeError, ValueError)) and (
        "different event loop" in str(exception) or "different loop" in str(exception)
    ):
        made = MSG_OTHER_LOOP_BEFORE if fixtures is None else MSG_OTHER_LOOP_FIXTURES
        return [MSG_OTHER_LOOP.format(made=made, subject=subject)]
    # The strategies that run stock order first: if it failed only later, a run's outcome
    # depends on the runs before it, which a replay (one run) does not repeat.
    if strategy in _STOCK_FIRST and failure.deviations == 0 and schedules > 1:
        return [MSG_EARLIER_STATE.format(where=_left_in(fixtures), subject=subject)]
    return []


def _left_in(fixtures: Sequence[str] | None) -> str:
    if fixtures:
        return MSG_EARLIER_STATE_FIXTURES.format(names=", ".join(fixtures))
    return MSG_EARLIER_STATE_GLOBALS


def explain_replay_pass(token: str, *, fixtures: Sequence[str] | None = None) -> str:
    """For a replay that passed: why a stock-order token can pass without a fix, or ""."""
    _, decisions = decode_token(token)
    return "" if decisions else MSG_REPLAY_STOCK.format(where=_left_in(fixtures))


def explain_opaque(exploration: Exploration, *, test: bool = False) -> str:
    """For an exploration that ran steps outside interlace's control: which interleavings it
    did not explore and what to do, or ""."""
    if not exploration.opaque:
        return ""
    if test:
        return MSG_OPAQUE.format(when="the test", subject="the test")
    return MSG_OPAQUE.format(when="the exploration", subject=MSG_IN_FUNCTION)


def _instrumentable(module: str) -> str:
    """The shortest prefix of ``module`` that ``instrument`` accepts (``requests`` for
    ``requests.sessions``; ``interlace.fixtures`` for ``interlace.fixtures._agent``)."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if _instrument.uninstrumentable(prefix) is None:
            return prefix
    return module


def explain_uninstrumented(exploration: Exploration, *, test: bool = False) -> str:
    """For an exploration whose threads ran installed code without schedule points: which
    modules, and the ``instrument`` value that explores them; "" when there were none."""
    modules = exploration.uninstrumented
    if not modules:
        return ""
    named = ", ".join(modules[:_NAMED_MODULES])
    if len(modules) > _NAMED_MODULES:
        named += f" and {len(modules) - _NAMED_MODULES} more"
    packages = sorted({_instrumentable(module) for module in modules})
    names = ", ".join(repr(package) for package in packages)
    if test:
        how = MSG_UNINSTRUMENTED_TEST.format(names=names, joined=",".join(packages))
    else:
        flags = " ".join(f"--instrument {package}" for package in packages)
        how = MSG_UNINSTRUMENTED_API.format(names=names, flags=flags)
    return MSG_UNINSTRUMENTED.format(modules=named, packages=", ".join(packages), how=how)


def _session_instrument(target: Callable[[], Any], instrument: tuple[str, ...]) -> tuple[str, ...]:
    """``instrument`` and the explored function's own installed package (``package_of_target``):
    what the session instruments. Not part of the replay lines: a replay finds it again."""
    package = _instrument.package_of_target(target)
    return (*instrument, package) if package and package not in instrument else instrument


def _with_notes(exploration: Exploration, notes: list[str]) -> Exploration:
    """``exploration`` with ``notes`` added to its failure's report and exception."""
    failure = exploration.failure
    if failure is None or not notes:
        return exploration
    if failure.exception is not None:
        for note in notes:
            failure.exception.add_note(note)
    report = failure.report + "\n\n" + "\n".join(notes)
    return dataclasses.replace(exploration, failure=dataclasses.replace(failure, report=report))


def explore(
    target: Callable[[], Any],
    *,
    strategy: str = DEFAULT_STRATEGY,
    max_schedules: int = DEFAULT_MAX_SCHEDULES,
    seed: int | None = None,
    max_steps: int = 200_000,
    max_time: float = 3600.0,
    max_stall: float = DEFAULT_MAX_STALL,
    bound: int = 2,
    depth: int = 3,
    max_seconds: float | None = None,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    progress: Callable[[int, int], None] | None = None,
    hints: ReplayHints | None = None,
    instrument: Sequence[str] = (),
    unfold: bool = False,
    jitter: float | None = None,
    keep_unshrunk: bool = False,
    workers: int = 1,
    shard: tuple[int, int] | None = None,
    worker_target: str | None = None,
) -> Exploration:
    """Run ``target`` under many schedules and return the first failure, shrunk.

    An ``async def`` target (or a ``functools.partial`` of one, or an object whose
    ``__call__`` is one) runs on a fresh controlled event loop per schedule (virtual clock,
    no real I/O). A plain function runs with every thread it starts under control:
    one thread at a time, switched at schedule points in the code under test and at every
    blocking operation, with ``time.sleep`` and timeouts on a virtual clock. The first
    schedule is stock order; the strategy picks the others. A failure is shrunk to the
    fewest deviations from stock order, then the fewest steps, replayed once more to record
    its report, and returned with a replay token.

    Args:
        target: a zero-argument function, ``async def`` or plain (called once per schedule).
        strategy: ``"auto"`` (stock order and bounded exhaustive search on one schedule in
            four, a seeded random walk on the others), ``"random"``, ``"pct"``, ``"delay"``
            or ``"exhaustive"``.
        max_schedules: the most schedules to run (shrinking runs are not counted).
        seed: makes the exploration repeatable; None picks one (see ``Exploration.seed``).
        max_steps: steps one schedule may take before it counts as a hang.
        max_time: virtual seconds one schedule may take before it counts as a hang.
        max_stall: seconds the event loop may stall in one run, all stalls together (a
            blocking call on the loop, a garbage-collector pause, the process descheduled):
            where the loop would wait for its next timer it may wake up that much later, so
            the timers due by then fire in one iteration, in deadline order. Timers due
            within it of each other may also fire out of deadline order (timer jitter).
            0 explores neither.
        bound: deviations per schedule for the exhaustive search.
        depth: the bug depth PCT targets.
        max_seconds: a wall-clock budget for the whole exploration, or None; no schedule
            starts after it is spent, but the first always runs. Shrinking a failure spends
            what is left of it (the failure is reported as far as it shrank), then the
            failing schedule runs once more, recorded for the report.
        stall_timeout: real seconds one step may run without reaching a schedule point (a
            task that does not return to the event loop, a thread blocked or computing
            outside interlace's control) before the exploration stops with
            ``UnsupportedOperationError``; raise it for code with a long CPU-bound step.
            Not part of the schedule: a token replays the same whatever it is.
        progress: called with (schedules run, max_schedules) after each schedule.
        hints: how the report names the target in its replay lines (the pytest plugin and
            the command line pass their own). With a pytest node id in them the failure
            gets no notes from :func:`explain`: the plugin adds them, naming the test.
        instrument: modules (``"httpx"``) or path prefixes whose code also gets schedule
            points in the threads the target runs under control: a plain function's
            threads, and an ``async def`` function's executor jobs (``asyncio.to_thread``,
            ``run_in_executor``); by default code outside the standard library and
            site-packages does, and so does the top-level package of the module that
            defines ``target`` wherever it is installed. Installed code that a thread ran
            without points is named in ``Exploration.uninstrumented``.
        unfold: the failure's report shows every recorded step on a line of its own: by
            default four or more steps in a row that start and stop in library code the
            program did not call (asyncio's callbacks, a framework's internal tasks), and
            four or more identical steps, read as one line each. Not part of the schedule:
            a token replays the same whatever it is.
        jitter: removed: raises ``ConfigError`` naming ``max_stall``, which replaced it.
        keep_unshrunk: also record the failing schedule as first found, before shrinking,
            in ``Failure.unshrunk`` (the HTML report shows it a click away): one more run of
            the target, made only when shrinking changed the schedule.
        workers: processes that run schedules (docs/scaling.md). With more than one, the
            first ``IN_PROCESS_SCHEDULES`` (50) run in this process, and worker processes
            start only if the exploration goes on; they import ``target`` by its module and
            qualified name, so it must be defined at the top level of an importable module.
            The failure reported (its token, ``failure_index``), ``schedules`` and
            ``exhausted`` are the same for every number of workers: the failure at the
            lowest schedule index, shrunk in this process. Under workers or a shard,
            ``"exhaustive"`` runs without partial-order reduction (its runs' models stay in
            the workers), so it may run more schedules to cover the same space than one
            process does where reduction works (3.12+): the token and ``exhausted`` are
            the same, ``schedules`` and ``failure_index`` (counted in runs) may not be.
        shard: ``(K, N)``: run only the K-th of N disjoint parts of the schedule space (the
            schedules whose index is K - 1 modulo N, and the bounded search's schedules
            below its bound, which every part needs). Without a ``seed`` every shard uses
            ``SHARD_SEED`` (0). ``interlace merge`` combines the shards' results; see
            docs/scaling.md.
        worker_target: ``MODULE:QUALNAME`` of the function the workers import and run in
            place of ``target``, when ``target`` is a wrapper of it that adds nothing to a
            run (the pytest plugin's).

    Returns:
        The :class:`~interlace.Exploration`: ``failure`` is None when every schedule passed;
        ``exhausted`` is never True when ``uninstrumented`` names a module.
        A failure whose cause is not its schedule (state an earlier schedule left behind,
        an asyncio object bound to another event loop) says so in a note at the end of its
        report and on its exception.

    Raises:
        InvalidTargetError: ``target`` is not a zero-argument function; or it is a plain
            function that returned a coroutine, or that ran tasks on an event loop of its
            own (whose orders could not be explored).
        ConfigError: an argument is out of range.
        UnsupportedOperationError: the target did something the harness cannot run (real
            I/O, a subprocess) and the error escaped it, or one step ran longer than
            ``stall_timeout``: a limit of the harness, not a failing schedule.
    """
    source = "(explore() argument)"
    check_target(target)
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"strategy={strategy!r} {source} is not a strategy: use one of "
            + ", ".join(repr(s) for s in STRATEGIES)
        )
    _check_int("max_schedules", max_schedules, 1, source)
    if seed is not None:
        _check_int("seed", seed, 0, source)
    _check_int("max_steps", max_steps, 1, source)
    _check_int("bound", bound, 0, source)
    _check_int("depth", depth, 1, source)
    max_time = _check_number("max_time", max_time, 0.0, source)
    if jitter is not None:
        raise ConfigError(MSG_JITTER_RENAMED.format(value=jitter, source=source))
    max_stall = _check_number("max_stall", max_stall, 0.0, source)
    if max_seconds is not None:
        max_seconds = _check_number("max_seconds", max_seconds, 0.0, source)
    stall_timeout = _check_timeout("stall_timeout", stall_timeout, source)
    instrumented = _check_instrument(instrument, source)
    unfold = _check_flag("unfold", unfold, source)
    keep_unshrunk = _check_flag("keep_unshrunk", keep_unshrunk, source)
    workers = _check_int("workers", workers, 1, source)
    if shard is not None:
        shard = check_shard(shard, source)
    if seed is None:
        # Shards split one space, which the seed picks: without one they agree on this.
        seed = SHARD_SEED if shard is not None else random.SystemRandom().randrange(2**32)
    settings = Settings(
        backend=_backend_name(target),
        stall_us=round(max_stall * 1e6),
        max_steps=max_steps,
        max_time_us=round(max_time * 1e6),
    )
    session = _session_instrument(target, instrumented)
    pool = None
    if workers > 1:
        name = worker_target
        if name is None:
            name, why = _workers.importable_name(target)
            if not name:
                raise ConfigError(
                    _workers.MSG_NOT_IMPORTABLE.format(
                        workers=workers,
                        source=source,
                        name=getattr(target, "__qualname__", target),
                        why=why,
                    )
                )
        spec = _workers.WorkerSpec(
            name, settings, session, stall_timeout, os.getpid(), tuple(sys.path), _session
        )
        pool = functools.partial(_workers.worker_pool, spec, workers)
    with _session(target, settings, session, stall_timeout=stall_timeout) as backend:
        if pool is None and shard is None:
            exploration = explore_backend(
                backend,
                _strategy(strategy, settings.backend, seed, bound, depth, max_schedules),
                max_schedules=max_schedules,
                seed=seed,
                hints=hints or _hints(target, instrumented),
                max_seconds=max_seconds,
                progress=progress,
                unfold=unfold,
                keep_unshrunk=keep_unshrunk,
            )
        else:
            # No partial-order reduction: its models would have to come back from the
            # workers, and a shard skips the runs they come from.
            split_strategy = make_strategy(
                strategy, seed, bound=bound, depth=depth, budget=max_schedules, reduce=False
            )
            exploration = explore_split(
                backend,
                split_strategy,
                max_schedules=max_schedules,
                seed=seed,
                hints=hints or _hints(target, instrumented),
                pool=pool,
                workers=workers,
                shard=shard,
                max_seconds=max_seconds,
                progress=progress,
                unfold=unfold,
                keep_unshrunk=keep_unshrunk,
            )
    if exploration.failure is None or (hints is not None and hints.pytest):
        # The pytest plugin adds the notes itself, naming the test's fixtures, where its
        # output shows them once.
        return exploration
    notes = explain(exploration.failure, schedules=exploration.schedules, strategy=strategy)
    return _with_notes(exploration, notes)


def replay(
    target: Callable[[], Any],
    token: str,
    *,
    hints: ReplayHints | None = None,
    instrument: Sequence[str] = (),
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    unfold: bool = False,
) -> Failure | None:
    """Re-run exactly the schedule in ``token``.

    Args:
        target: the same target the token was made with.
        token: a replay token from ``Failure.token`` or a report.
        hints: how the report names the target in its replay lines.
        instrument: the same ``instrument`` the exploration was given (the token does not
            carry it: it decides where the schedule points are).
        stall_timeout: as for :func:`explore` (the token does not carry it either: it
            changes no schedule).
        unfold: as for :func:`explore`: the report shows every recorded step.

    Returns:
        The failure again (with a freshly recorded report), or None if this schedule no
        longer fails (for example after a fix).

    Raises:
        ReplayTokenError: the token is malformed or from another interlace version.
        ReplayDivergedError: the program no longer offers a decision the schedule takes;
            the message names the step and the likely causes.
        ConfigError: ``instrument``, ``stall_timeout`` or ``unfold`` is invalid.
        InvalidTargetError: ``target`` is not a zero-argument function, or is an ``async
            def`` function for a token made with a plain one (or the other way round).
        UnsupportedOperationError: as for :func:`explore`.
    """
    check_target(target)
    source = "(replay() argument)"
    instrumented = _check_instrument(instrument, source)
    stall_timeout = _check_timeout("stall_timeout", stall_timeout, source)
    unfold = _check_flag("unfold", unfold, source)
    settings, decisions = decode_token(token)
    kind = _backend_name(target)
    if kind != settings.backend:
        made = "an async def" if settings.backend == "asyncio" else "a plain (threads)"
        given = "an async def" if kind == "asyncio" else "a plain"
        raise InvalidTargetError(
            f"the token was made by exploring {made} function, but "
            f"{getattr(target, '__qualname__', target)!r} is {given} function: replay the "
            "token with the target it was made with"
        )
    chooser = ReplayChooser(decisions, strict=True)
    session = _session_instrument(target, instrumented)
    with _session(target, settings, session, stall_timeout=stall_timeout) as backend:
        result = backend.run(chooser, record=True)
    if result.divergence is not None:
        raise ReplayDivergedError(f"replay diverged: {result.divergence}. {_DIVERGENCE_CAUSES}")
    if result.kind is None:
        missing = [d for d in decisions if d.step > result.steps]
        if missing:
            raise ReplayDivergedError(
                f"replay diverged: the run ended after {result.steps} steps, before the "
                f"schedule's decision at step {missing[0].step}. {_DIVERGENCE_CAUSES}"
            )
        return None
    hints = hints or _hints(target, instrumented)
    return make_failure(backend, result, result.steps, hints, recorded=result, unfold=unfold)
