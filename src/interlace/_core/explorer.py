"""Explore schedules with a strategy, shrink the first failure, and build its report.

The engine knows nothing about asyncio or threads: it drives a backend through
``run(chooser, record=...) -> RunResult`` and works only on the decisions runs took.
"""

from __future__ import annotations

import itertools
import shlex
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from interlace._core.result import (
    LABEL_ADDRESS,
    LABEL_FREE_THREADING,
    LABEL_LATENCY,
    LABEL_PREEMPTION,
    LABEL_STALL,
    LABEL_STOCK,
    NEED_ADDRESS,
    Exploration,
    Failure,
    RunResult,
    StepRecord,
)
from interlace._core.schedule import (
    ADDRESS,
    READY,
    STALL,
    THREAD,
    TIMER,
    Decision,
    Settings,
    address_order_text,
    encode_token,
)
from interlace._core.strategy import (
    AnchoredChooser,
    Chooser,
    ExhaustiveStrategy,
    ReplayChooser,
    Strategy,
)

__all__ = (
    "Backend",
    "ReplayHints",
    "address_label",
    "address_order_text",
    "at_gil_switches",
    "describe_space",
    "explore_backend",
    "label_for",
    "make_failure",
    "shrink",
    "stall_text",
)

_SHRINK_RUNS = 400
SHRINK_SECONDS = 20.0


class Backend(Protocol):
    """What the engine needs from a backend (the controlled asyncio loop, controlled threads)."""

    settings: Settings

    def run(self, chooser: Chooser, *, record: bool = False) -> RunResult: ...


@dataclass(frozen=True, slots=True)
class ReplayHints:
    """How to name the target in the report's replay lines.

    Attributes:
        api: the target as a Python expression, e.g. ``tests.test_bank.test_transfer``, or
            empty when there is none (a test that takes fixtures).
        cli: the target as ``MODULE:FUNCTION`` for ``interlace replay``, or empty.
        pytest: the pytest node id, or empty outside pytest.
        instrument: the modules and paths the exploration instrumented (plain-function
            targets): the API and command-line lines pass them again, since the schedule
            points, and so the schedule, depend on them.
        pytest_options: options the pytest line repeats after the token (the plugin's
            ``--interlace-instrument`` when it came from the command line or environment).
        path: directories the command-line line puts first on ``sys.path`` (``--path``), as
            they appear to the user: pytest's ``pythonpath`` in a src-layout project, without
            which the test file's imports fail outside pytest.
    """

    api: str
    cli: str = ""
    pytest: str = ""
    instrument: tuple[str, ...] = ()
    pytest_options: str = ""
    path: tuple[str, ...] = ()


def label_for(
    decisions: Sequence[Decision], backend: str, free_threaded: Sequence[int] = ()
) -> str:
    """What a schedule needs on a stock interpreter, from its non-stock decisions.

    ``free_threaded`` are the steps of preemptions a GIL build does not make (a recorded
    run's ``RunResult.free_threaded``): the schedule then needs a free-threaded build.
    """
    if not decisions:
        return LABEL_STOCK
    if all(d.kind == ADDRESS for d in decisions):
        return LABEL_ADDRESS
    preemption = LABEL_FREE_THREADING if free_threaded else LABEL_PREEMPTION
    needs = []
    if any(d.kind == THREAD for d in decisions):
        needs.append(preemption)
    if any(d.kind == READY for d in decisions):
        needs.append(preemption if backend == "threads" else LABEL_LATENCY)
    # A timer that fired before one with an earlier deadline needs a stall too: between
    # the two calls that created them (the decision's actor is the drift).
    stalled = sum(max(1, d.actor) for d in decisions if d.kind in (STALL, TIMER))
    if stalled:
        needs.append(LABEL_STALL.format(ms=stall_text(stalled)))
    if any(d.kind == ADDRESS for d in decisions):
        needs.append(NEED_ADDRESS)
    return " and ".join(needs[:1] + [n.removeprefix("needs ") for n in needs[1:]])


def stall_text(microseconds: int) -> str:
    """A stall for a label: ``"30 ms"``, ``"0.5 ms"``, ``"40 us"``."""
    if microseconds < 100:
        return f"{microseconds} us"
    return f"{round(microseconds / 1000, 1):g} ms"


_ADDRESS_TRIALS = 8
"""How many address orders a failure found under creation order is run under, to tell
whether every stock run fails (``address_label``)."""


def address_label(backend: Backend, best: RunResult) -> str | None:
    """For a failure with no deviation from stock order: ``LABEL_ADDRESS`` if the run put
    tasks or futures in sets and some other address order passes, else None.

    A stock run hashes its tasks by their addresses, which differ from process to process;
    the failure then happens on some stock runs, not on every one, and "fails under stock
    order" would overstate it.
    """
    if best.decisions or best.hashed < 2:
        return None
    for order in range(1, _ADDRESS_TRIALS):
        trial = backend.run(ReplayChooser((Decision(0, ADDRESS, order, 0),), strict=True))
        if trial.divergence is None and trial.kind is None:
            return LABEL_ADDRESS
    return None


def _cost(result: RunResult) -> tuple[int, int, int, int]:
    """Fewest deviations, then the shortest stall (all stalls and timer drifts together),
    then the lowest options, then the fewest steps."""
    decisions = result.decisions
    stalled = sum(d.actor for d in decisions if d.kind in (STALL, TIMER))
    return (len(decisions), stalled, sum(d.choice for d in decisions), result.steps)


_STALL_MOVES = 64
"""How many later steps the shrinker tries each stall at: where the loop waits for a later
timer, a shorter stall may break the run the same way."""


def _without_step(decisions: Sequence[Decision], index: int) -> list[Decision]:
    """``decisions`` without deviation ``index``, every later one a step sooner.

    The entry that deviation ran no longer takes a step there, so what came after it comes
    one step sooner (it runs later, at its place in stock order). For a replay ``by_actor``.
    """
    dropped = decisions[index].step
    if decisions[index].kind in (STALL, ADDRESS):
        dropped = 1 << 62  # no entry ran for it: the later ones keep their steps
    return [
        d if d.step < dropped else d._replace(step=d.step - 1)
        for k, d in enumerate(decisions)
        if k != index
    ]


def _picks(decisions: Sequence[Decision]) -> list[int]:
    """The indexes of the deviations that run a task or thread (not a timer choice)."""
    return [k for k, decision in enumerate(decisions) if decision.kind in (READY, THREAD)]


def _in_slot(slot: Decision, moved: Decision) -> Decision:
    """``moved``'s task or thread, run at ``slot``'s step."""
    return slot._replace(choice=moved.choice, actor=moved.actor)


def _without_pick(decisions: Sequence[Decision], index: int) -> list[Decision]:
    """``decisions`` without the task or thread that deviation ``index`` runs, keeping the
    steps that deviate: each later deviation that runs one takes the step of the one before.

    Dropping a deviation outright lets the entry it postponed run at its step, and that entry
    is often one the failure needs kept back (many deviations in a row each postpone the
    same entry). Here the next deviation's entry runs at that step instead, and the entries
    kept back stay kept back. Timer choices keep their steps. The result is meant for a
    replay ``by_actor``.
    """
    picks = _picks(decisions)
    if index not in picks:
        return [d for k, d in enumerate(decisions) if k != index]
    trial = list(decisions)
    at = picks.index(index)
    for here, after in zip(picks[at:], picks[at + 1 :], strict=False):
        trial[here] = _in_slot(decisions[here], decisions[after])
    del trial[picks[-1]]
    return trial


def _pulled_forward(
    decisions: Sequence[Decision], index: int, later: int, *, sooner: bool
) -> list[Decision]:
    """``decisions`` with deviation ``later``'s task or thread run at deviation ``index``'s
    step instead of ``index``'s (one deviation fewer). For a replay ``by_actor``.

    A failure that needs an entry run early may have got there by several deviations that
    each keep the same entries back; running it at the first of them often makes the ones
    between unnecessary, and the removal passes then drop them. With ``sooner`` the
    deviations after ``later`` come a step sooner (the entry ``index`` ran no longer takes a
    step before them), else they keep their steps.
    """
    trial = list(decisions)
    trial[index] = _in_slot(decisions[index], decisions[later])
    if sooner:
        trial[later + 1 :] = [d._replace(step=d.step - 1) for d in trial[later + 1 :]]
    del trial[later]
    return trial


_CUT_ORDERS = 4
"""Up to this many threads alive at a failure, shrinking tries them in every order."""
_CUT_BACK = 3
"""How many points before where it ended the failing thread is also stopped at, when an
order runs it before others: the exception escaped it after its ``except`` and ``finally``
blocks ran, so it raised a few points before."""


def _anchored(run: RunResult, backend: str) -> list[tuple[int, int, int, int]]:
    """``run``'s deviations as ``AnchoredChooser`` takes them: each one's anchor (the thread
    that held the baton, and its position), what ran instead (a thread, a task, or a timer's
    index) and its kind; empty if the backend recorded no anchors.

    The threads backend records its choices as ``READY`` (``_threads.Controller.kind``); an
    event loop's ``READY`` choices only come from the asyncio backend.
    """
    if not run.anchors or len(run.anchors) != len(run.decisions):
        return []
    return [
        (
            actor,
            position,
            d.choice if d.kind in (TIMER, STALL) else d.actor,
            THREAD if backend == "threads" else d.kind,
        )
        for (actor, position), d in zip(run.anchors, run.decisions, strict=True)
    ]


def shrink(
    backend: Backend,
    found: RunResult,
    *,
    max_runs: int = _SHRINK_RUNS,
    max_seconds: float = SHRINK_SECONDS,
) -> tuple[RunResult, int]:
    """Shrink a failing run to the fewest deviations from stock order, then the fewest steps.

    First locally (drop deviations, lower each one's option, move each one earlier), then
    globally: a breadth-first search over schedules with fewer deviations than the local
    result, which finds a smaller failure that shares no deviation with the first one; then
    locally again. Everything is bounded by ``max_runs`` and ``max_seconds``.

    Returns the best run (failing the same way as ``found``) and the number of runs spent.
    """
    best = found
    runs = 0
    deadline = time.monotonic() + max_seconds

    def spent() -> bool:
        return runs >= max_runs or time.monotonic() > deadline

    def run(chooser: Chooser) -> RunResult:
        nonlocal runs
        runs += 1
        return backend.run(chooser)

    def attempt(decisions: Sequence[Decision]) -> bool:
        return attempt_with(ReplayChooser(decisions, strict=False, by_actor=True))

    def attempt_with(chooser: Chooser) -> bool:
        nonlocal best
        if spent():
            return False
        result = run(chooser)
        if result.same_failure(found) and _cost(result) < _cost(best):
            best = result
            return True
        return False

    def anchored_drops() -> Iterator[bool]:
        """Each deviation dropped with the others anchored where their threads were (a
        schedule of threads: ``AnchoredChooser``)."""
        deviations = _anchored(best, backend.settings.backend)
        for index in range(len(deviations)):
            yield attempt_with(AnchoredChooser(deviations[:index] + deviations[index + 1 :]))

    def local() -> None:
        # Remove deviations: halves first (ddmin-style), then one at a time, to a fixpoint.
        changed = True
        while changed and best.decisions:
            changed = False
            current = list(best.decisions)
            size = len(current) // 2
            while size >= 1 and not changed:
                for start in range(0, len(current), size):
                    if attempt(current[:start] + current[start + size :]):
                        changed = True
                        break
                size //= 2
            if changed:
                continue
            # Then each deviation dropped so that the later ones still run the entries
            # the failure needed: a step sooner, or in the step of the one before.
            drops = (
                drop(current, index)
                for drop in (_without_step, _without_pick)
                for index in range(len(current))
            )
            # Then an entry a later deviation runs, run at an earlier deviation's step.
            picks = _picks(current)
            pulls = (
                _pulled_forward(current, index, later, sooner=sooner)
                for sooner in (False, True)
                for at, index in enumerate(picks)
                for later in picks[at + 1 :]
            )
            trials = (attempt(trial) for trial in itertools.chain(drops, pulls))
            changed = any(itertools.chain(anchored_drops(), trials))
        # Take each remaining deviation's smallest option that still fails.
        for index in range(len(best.decisions)):
            if index >= len(best.decisions):
                break
            decision = best.decisions[index]
            for choice in range(1, decision.choice):
                trial = list(best.decisions)
                # No actor: the option at ``choice``, whichever entry that is.
                trial[index] = decision._replace(choice=choice, actor=-1)
                if attempt(trial):
                    break
        # A shorter stall: each stall (or timer drift), as short as it can be, at a later
        # wake-up of the loop.
        for index in range(len(best.decisions)):
            if index >= len(best.decisions) or best.decisions[index].kind not in (STALL, TIMER):
                continue
            decision = best.decisions[index]
            limit = decision.step + _STALL_MOVES
            if index + 1 < len(best.decisions):
                limit = min(limit, best.decisions[index + 1].step)
            for step in range(decision.step + 1, limit):
                trial = list(best.decisions)
                trial[index] = decision._replace(step=step, choice=1)
                if attempt(trial):
                    break
        # Fewer steps: try each deviation earlier (the failure may then come sooner).
        for index in range(len(best.decisions)):
            if index >= len(best.decisions):
                break
            decision = best.decisions[index]
            lower = best.decisions[index - 1].step + 1 if index else 1
            step = decision.step
            while step - 1 >= lower:
                trial = list(best.decisions)
                trial[index] = Decision(step - 1, decision.kind, decision.choice, decision.actor)
                if not attempt(trial):
                    break
                step -= 1
                if index >= len(best.decisions) or best.decisions[index].step != step:
                    break  # the run has fewer deviations now (this one became stock order)
                decision = best.decisions[index]

    def anchored_search() -> bool:
        """Schedules with fewer deviations, made only where ``best`` preempted a thread
        (anchored in that thread's progress), running any of its threads instead: fewest
        deviations first. True once one fails the same way."""
        anchors = best.anchors
        if len(anchors) != len(best.decisions):
            return False
        # First the threads run one after another, each to where the failure found it (as
        # they last gave the baton away, then in every other order for a few threads; the
        # failing thread, run before others, also a few points sooner). A thread that stock
        # order runs first and the order puts later is held back where ``best`` first
        # preempted it.
        cut = dict(best.cut)
        orders = [list(cut)]
        if len(cut) <= _CUT_ORDERS:
            orders.extend(list(order) for order in itertools.permutations(cut))
        tried: set[tuple[tuple[int, int, int], ...]] = set()
        failing = best.cut[-1][0] if best.cut else -1
        for held, back in itertools.product((False, True), range(_CUT_BACK + 1)):
            for order in orders:
                if back and order[-1] == failing:
                    continue
                chain = [
                    (a, cut[a] - (2 * back if a == failing else 0), b)
                    for a, b in itertools.pairwise(order)
                ]
                if held:
                    first = next(((a, p) for a, p in anchors if a in order[1:]), None)
                    if first is None:
                        continue
                    chain.insert(0, (*first, order[0]))
                key = tuple(chain)
                if not chain or key in tried:
                    continue
                tried.add(key)
                if spent():
                    return False
                if attempt_with(AnchoredChooser(chain)):
                    return True
        # Then fewer deviations at the anchors: a thread's to any thread, an event loop's
        # choice (in a run of tasks and threads) to any option the failing run took there.
        deviations = _anchored(best, backend.settings.backend)
        points = list(dict.fromkeys((a, p, kind) for a, p, _, kind in deviations))
        threads = {actor for actor, _ in anchors}
        threads.update(t for _, _, t, kind in deviations if kind == THREAD)
        taken: dict[int, set[int]] = {THREAD: threads}
        for _, _, target, kind in deviations:
            taken.setdefault(kind, set()).add(target)
        for size in range(1, len(best.decisions)):
            for subset in itertools.combinations(points, size):
                if spent():
                    return False
                options = [
                    sorted(t for t in taken[kind] if kind != THREAD or t != actor)
                    for actor, _, kind in subset
                ]
                for targets in itertools.product(*options):
                    if spent():
                        return False
                    trial = [(a, p, t, k) for (a, p, k), t in zip(subset, targets, strict=True)]
                    if attempt_with(AnchoredChooser(trial)):
                        return True
        return False

    if best.decisions and attempt(()):
        return best, runs
    local()
    while len(best.decisions) > 1 and not spent() and anchored_search():
        local()
    if len(best.decisions) > 1 and not spent():
        # Without reduction: shrinking runs few schedules, and needs no footprints.
        search = ExhaustiveStrategy(bound=len(best.decisions) - 1, reduce=False)
        while not spent():
            chooser = search.next_chooser()
            if chooser is None:
                break
            result = run(chooser)
            search.finished(chooser, result.steps)
            if result.same_failure(found) and len(result.decisions) < len(best.decisions):
                best = result
                local()
                break
    return best, runs


def make_failure(
    backend: Backend,
    best: RunResult,
    shrunk_from: int,
    hints: ReplayHints,
    *,
    recorded: RunResult | None = None,
    unfold: bool = False,
    found: RunResult | None = None,
) -> Failure:
    """Record the schedule once more, step by step, and build the public ``Failure``
    (``unfold``: its report shows every recorded step, see :func:`format_report`).

    ``found`` is the failing run as first found, before shrinking: when its decisions differ
    from ``best``'s it is recorded too, for ``Failure.unshrunk`` (the HTML report shows it).
    """
    if recorded is None:
        recorded = backend.run(ReplayChooser(best.decisions, strict=True), record=True)
        if not recorded.same_failure(best):  # a nondeterministic target: keep what we had
            recorded = best
        elif recorded.free_threaded:
            best, recorded = at_gil_switches(backend, best, recorded)
    token = encode_token(backend.settings, best.decisions)
    assert best.kind is not None
    label = address_label(backend, best) or label_for(
        best.decisions, backend.settings.backend, recorded.free_threaded
    )
    report = format_report(recorded, best, shrunk_from, label, token, hints, unfold=unfold)
    exception = recorded.exception if recorded.kind == "exception" else None
    if exception is not None:
        exception.add_note(_exception_note(label, token, hints, best.steps, shrunk_from))
    return Failure(
        kind=best.kind,
        token=token,
        exception=exception,
        report=report,
        label=label,
        steps=best.steps,
        shrunk_from=shrunk_from,
        deviations=len(best.decisions),
        schedule=recorded.trace,
        detail=recorded.detail or best.detail,
        unshrunk=_record_found(backend, found, best),
    )


def _record_found(
    backend: Backend, found: RunResult | None, best: RunResult
) -> tuple[StepRecord, ...]:
    """The recorded steps of the run first found, if shrinking changed it and it replays
    the same failure (a nondeterministic target may not: then nothing, not another run)."""
    if found is None or tuple(found.decisions) == tuple(best.decisions):
        return ()
    again = backend.run(ReplayChooser(found.decisions, strict=True), record=True)
    if again.divergence is not None or not again.same_failure(found):
        return ()
    return again.trace


_GIL_MOVES = 3
"""How many later points, and how many earlier ones, a preemption a GIL build cannot make is
tried at."""


def at_gil_switches(
    backend: Backend, best: RunResult, recorded: RunResult
) -> tuple[RunResult, RunResult]:
    """Move each preemption of ``best`` that a GIL build cannot make (``recorded`` is its
    recorded run) to one of the nearest points where it can, while the run still fails the
    same way with no more deviations; returns the schedule and its recorded run.

    Shrinking counts deviations, not where a GIL build can switch threads: a check-then-act
    split between the check and the act needs a free-threaded build there, but the same
    preemption a few points on (at the call that computes what to write), or a point back
    (right after the call that read), happens with the GIL too. The next points are tried
    first, then the ones before (after the deviation before it). Every candidate is run: the
    failure reported is one that ran.
    """
    for _ in range(len(recorded.free_threaded)):
        step = recorded.free_threaded[0]
        decisions = list(best.decisions)
        index = next((i for i, d in enumerate(decisions) if d.step == step), None)
        if index is None:
            break
        prefix = backend.run(ReplayChooser(decisions[:index], strict=False), record=True)
        floor = decisions[index - 1].step if index else 0
        later = [point for point in prefix.gil_points if point > step][:_GIL_MOVES]
        earlier = [point for point in prefix.gil_points if floor < point < step]
        for point in [*later, *reversed(earlier[-_GIL_MOVES:])]:
            shift = point - step
            moved = [
                *decisions[:index],
                decisions[index]._replace(step=point),
                *(d._replace(step=d.step + shift) for d in decisions[index + 1 :]),
            ]
            candidate = backend.run(ReplayChooser(moved, strict=False), record=True)
            if (
                candidate.same_failure(best)
                and len(candidate.decisions) <= len(decisions)
                and len(candidate.free_threaded) < len(recorded.free_threaded)
            ):
                best = recorded = candidate
                break
        else:
            break
    return best, recorded


def replay_lines(token: str, hints: ReplayHints) -> list[str]:
    """The copy-pasteable lines that replay a schedule (pytest, API, command line)."""
    lines = []
    if hints.pytest:
        options = f" {hints.pytest_options}" if hints.pytest_options else ""
        lines.append(f"pytest '{hints.pytest}' --interlace-replay={token}{options}")
    if hints.api:
        instrument = f", instrument={list(hints.instrument)!r}" if hints.instrument else ""
        lines.append(f"interlace.replay({hints.api}, {token!r}{instrument})")
    if hints.cli:
        instrument = ""
        if hints.instrument:
            instrument = " --instrument " + shlex.quote(",".join(hints.instrument))
        path = "".join(f" --path {shlex.quote(entry)}" for entry in hints.path)
        lines.append(f"interlace replay {shlex.quote(hints.cli)} {token}{instrument}{path}")
    return lines


def _steps(count: int) -> str:
    return "1 step" if count == 1 else f"{count} steps"


def _size(steps: int, shrunk_from: int) -> str:
    """ "7 steps, shrunk from 8"; only the steps when shrinking took none away (a replay, or a
    schedule with fewer deviations that runs longer than the one first found)."""
    if shrunk_from > steps:
        return f"{_steps(steps)}, shrunk from {shrunk_from}"
    return _steps(steps)


def _exception_note(
    label: str, token: str, hints: ReplayHints, steps: int, shrunk_from: int
) -> str:
    lines = [f"interlace: failing schedule ({_size(steps, shrunk_from)}), {label}."]
    lines.append("Replay it with:")
    lines.extend("    " + line for line in replay_lines(token, hints))
    return "\n".join(lines)


_KIND_TITLES = {"exception": "Exception", "deadlock": "Deadlock", "hang": "Hang"}


def format_report(
    recorded: RunResult,
    best: RunResult,
    shrunk_from: int,
    label: str,
    token: str,
    hints: ReplayHints,
    *,
    unfold: bool = False,
) -> str:
    """The human report: the numbered schedule, what failed, the label, how to replay.

    Runs of steps in library code and of identical steps read as one line each
    (:func:`_runs`); with ``unfold`` every recorded step has its own line.
    """
    steps = best.steps
    lines = [f"Failing schedule ({_size(steps, shrunk_from)}):"]
    trace = recorded.trace
    if trace and trace[0].step > 1:
        lines.append(f"  ... {trace[0].step - 1} earlier steps not shown ...")
    for decision in best.decisions:
        if decision.kind == ADDRESS:
            lines.append(f"  (before step 1: {address_order_text(decision.choice)})")
    width = len(str(max(steps, trace[-1].step if trace else 0)))
    for folded, run in _runs(trace, unfold=unfold):
        record = run[0]
        if folded == "library":
            lines.append(_library_line(run, width))
            continue
        text = f"  {record.step:>{width}}. {record.actor}: {record.action}"
        if record.resumed:
            text += f" at {record.resumed}"
        if record.suspended:
            text += f" -> {record.suspended}"
        if record.deviation:
            text += f"    <- {record.deviation}"
        lines.append(text)
        if len(run) > 1:
            lines.append(
                f"  {'':>{width}}  ... the same step {len(run) - 1} more times, to step "
                f"{run[-1].step} ..."
            )
    kind = best.kind or "exception"
    lines.append("")
    if kind == "exception" and recorded.exception is not None:
        exc = recorded.exception
        lines.append(
            f"{_KIND_TITLES[kind]}: {type(exc).__module__}.{type(exc).__qualname__}: {exc}"
            if type(exc).__module__ != "builtins"
            else f"{_KIND_TITLES[kind]}: {type(exc).__name__}: {exc}"
        )
    else:
        lines.append(f"{_KIND_TITLES[kind]}:")
    detail = recorded.detail or best.detail
    if detail:
        lines.extend("  " + line for line in detail.splitlines())
    deviations = len(best.decisions)
    plural = "" if deviations == 1 else "s"
    lines.append("")
    lines.append(f"Label: {label} ({deviations} deviation{plural} from stock order)")
    if LABEL_FREE_THREADING in label:
        lines.append(
            "  CPython with the GIL never switches threads where this schedule does (the step "
            "marked 'free-threaded builds only'); a free-threaded build (3.13t and later) can: "
            "code that relies on the GIL there breaks on it"
        )
    lines.append("Replay:")
    lines.extend("  " + line for line in replay_lines(token, hints))
    return "\n".join(lines)


_SAME_STEP_RUN = 4
"""Consecutive identical steps (a spin-wait, a hang) shown as one step and a count."""
_LIBRARY_RUN = 4
"""Consecutive steps in library code (``StepRecord.library``) shown as one line."""


def _library_line(run: Sequence[StepRecord], width: int) -> str:
    packages = sorted({package for record in run for package in record.library or ()})
    where = f" ({', '.join(packages)})" if packages else ""
    return (
        f"  {'':>{width}}  ... steps {run[0].step}-{run[-1].step}: {len(run)} steps that start "
        f"and stop in library code{where} ..."
    )


def _runs(
    trace: Sequence[StepRecord], *, unfold: bool = False
) -> Iterator[tuple[str, list[StepRecord]]]:
    """The trace in runs, each with how it is shown: a ``"step"`` alone; ``"same"``, for
    ``_SAME_STEP_RUN`` or more consecutive steps that read the same but for their numbers; or
    ``"library"``, for ``_LIBRARY_RUN`` or more consecutive steps in library code. No run
    holds a deviation; a library run holds neither the step before one (where the schedule
    leaves stock order) nor the last step (where it failed). With ``unfold``, every step
    alone."""
    if unfold:
        yield from (("step", [record]) for record in trace)
        return

    def key(record: StepRecord) -> tuple[str, str, str, str]:
        return (record.actor, record.action, record.resumed, record.suspended)

    def library(k: int) -> bool:
        return (
            trace[k].library is not None
            and not trace[k].deviation
            and k + 1 < len(trace)
            and not trace[k + 1].deviation
        )

    i = 0
    while i < len(trace):
        j = i + 1
        if not trace[i].deviation:
            while j < len(trace) and not trace[j].deviation and key(trace[j]) == key(trace[i]):
                j += 1
        if j - i >= _SAME_STEP_RUN:
            yield "same", list(trace[i:j])
            i = j
            continue
        j = i
        while j < len(trace) and library(j):
            j += 1
        if j - i >= _LIBRARY_RUN:
            yield "library", list(trace[i:j])
            i = j
            continue
        yield "step", [trace[i]]
        i += 1


def explore_backend(
    backend: Backend,
    strategy: Strategy,
    *,
    max_schedules: int,
    seed: int,
    hints: ReplayHints,
    max_seconds: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    unfold: bool = False,
    keep_unshrunk: bool = False,
) -> Exploration:
    """Run schedules until one fails, the budget is spent or the bounded space is exhausted
    (``unfold``: the failure's report shows every recorded step; ``keep_unshrunk``: the
    failure also has the recorded steps of the schedule first found, ``Failure.unshrunk``)."""
    started = time.monotonic()
    schedules = 0
    failure: Failure | None = None
    opaque = False
    uninstrumented: set[str] = set()
    while schedules < max_schedules:
        # The first schedule runs whatever the budget: an exploration that ran none would
        # pass a program that fails on every schedule.
        if schedules and max_seconds is not None and time.monotonic() - started > max_seconds:
            break
        chooser = strategy.next_chooser()
        if chooser is None:
            break
        result = backend.run(chooser)
        schedules += 1
        opaque = opaque or result.opaque
        uninstrumented.update(result.uninstrumented)
        strategy.finished(chooser, result.steps, result)
        if progress is not None:
            progress(schedules, max_schedules)
        if result.kind is not None:
            # Shrinking spends what is left of the budget (at most its own bound).
            seconds = SHRINK_SECONDS
            if max_seconds is not None:
                seconds = min(seconds, max(0.0, max_seconds - (time.monotonic() - started)))
            best, _ = shrink(backend, result, max_seconds=seconds)
            failure = make_failure(
                backend,
                best,
                result.steps,
                hints,
                unfold=unfold,
                found=result if keep_unshrunk else None,
            )
            break
    # Opaque steps (executor jobs, real threads) hide interleavings inside them, so a
    # search that ran any cannot claim to have covered the bounded space.
    # Nor can one whose threads ran code without schedule points, whose interleavings it
    # skipped.
    exhausted = strategy.exhausted and failure is None and not opaque and not uninstrumented
    return Exploration(
        failure=failure,
        schedules=schedules,
        exhausted=exhausted,
        strategy=strategy.describe(),
        seed=seed,
        elapsed=time.monotonic() - started,
        opaque=opaque,
        space=describe_space(strategy, backend.settings) if exhausted else "",
        uninstrumented=tuple(sorted(uninstrumented)),
        failure_index=schedules - 1 if failure is not None else None,
    )


def _bounded_member(strategy: Strategy) -> ExhaustiveStrategy | None:
    if isinstance(strategy, ExhaustiveStrategy):
        return strategy
    for member in getattr(strategy, "members", ()):
        if isinstance(member, ExhaustiveStrategy):
            return member
    return None


def describe_space(strategy: Strategy, settings: Settings) -> str:
    """What an exhausted search covered, in words, for every report that says "exhausted"."""
    search = _bounded_member(strategy)
    if search is None:
        return ""
    bound = search.bound
    deviations = f"{bound} deviation{'' if bound == 1 else 's'}"
    if settings.backend == "threads":
        return (
            f"every schedule with at most {deviations} from stock order (a thread switched "
            "at a schedule point in instrumented code)"
        )
    stall = stall_text(settings.stall_us)
    kinds = ["ready tasks and callbacks run in another order (await latency)"]
    if settings.stall_us:
        kinds.append(f"loop stalls of up to {stall} in a run")
        kinds.append(f"timers due within {stall} of each other fired out of order")
    if not search.orders_left:
        kinds.append("any address order (no run put two tasks or futures in a set)")
    elif search.address_orders > 1:
        kinds.append(
            "tasks and futures hashed in two address orders, insertion order and about "
            "reverse creation order (stock can give others, which the random walks sample)"
        )
    else:
        kinds.append(
            "tasks and futures hashed in insertion order only (stock order put no two in a "
            "set; stock can give other orders, which the random walks sample)"
        )
    scope = (
        "every schedule there is"
        if search.complete
        else f"every schedule with at most {deviations} from stock order"
    )
    return f"{scope}: " + "; ".join(kinds)
