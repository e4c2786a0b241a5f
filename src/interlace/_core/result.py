"""What an exploration returns: :class:`Exploration`, :class:`Failure`, and their parts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from interlace._core.schedule import Decision

if TYPE_CHECKING:
    from interlace._core.html_report import ScenarioColumns
    from interlace._core.strategy import Chooser

__all__ = ("Exploration", "Failure", "FailureKind", "RunModel", "RunResult", "StepRecord")

FailureKind = Literal["exception", "deadlock", "hang"]

LABEL_STOCK = "fails under stock order"
LABEL_LATENCY = "needs await latency"
LABEL_STALL = "needs the loop to stall {ms} (a blocking call of that length on the loop)"
LABEL_ADDRESS = "fails on some stock runs: depends on object addresses"
NEED_ADDRESS = "needs an order of object addresses that only some stock runs have"
LABEL_PREEMPTION = "needs thread preemption"
LABEL_FREE_THREADING = "needs a free-threaded build"


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of a recorded run, for the report.

    Attributes:
        step: 1-based step number.
        actor: the task or thread's display name.
        action: what the step did, e.g. ``"ran"`` or ``"callback Future.set_result"``.
        resumed: ``file:line`` where the actor resumed (empty for a first step or callback).
        suspended: ``file:line`` where it suspended next, or ``"finished"``/``"raised ..."``.
        deviation: ``""`` for the stock choice, else why this step is not stock order.
        library: None when the step starts or stops in the code under test (or the backend
            does not say); else it starts and stops in other code, of these packages
            (``("asyncio", "langgraph")``; empty when not known). A report folds runs of
            such steps.
    """

    step: int
    actor: str
    action: str
    resumed: str
    suspended: str
    deviation: str = ""
    library: tuple[str, ...] | None = None


class RunModel(Protocol):
    """A passing run, recorded well enough to recognize schedules that only reorder its
    independent steps (a backend attaches one when the chooser asks, see
    ``Chooser.wants_model``)."""

    def predict(self, chooser: Chooser) -> bool:
        """Drive ``chooser`` through the run it would get, without running the target.

        Returns True only if that run executes exactly this run's steps with every pair of
        dependent steps in the same order: it then passes as this run did, and ``chooser``
        has seen every schedule point it would have seen. Returns False when that cannot
        be shown (the target must run); ``chooser`` is then spent.
        """
        ...


@dataclass(slots=True)
class RunResult:
    """What one run of the target under one chooser produced (backend -> engine)."""

    kind: FailureKind | None
    exception: BaseException | None
    detail: str
    steps: int
    decisions: Sequence[Decision]
    """The run's non-stock decisions in step order (a tuple, or a lazy ``DecisionLog``)."""
    anchors: tuple[tuple[int, int], ...] = ()
    """For a run of threads, each decision's anchor: the thread that held the baton and its
    position in its own run (``Chooser.where``, ``AnchoredChooser``); empty from other
    backends."""
    cut: tuple[tuple[int, int], ...] = ()
    """For a failing run of threads: the threads that had not ended when it failed, each with
    its position in its own run, in the order they last gave the baton away (the failing one
    last); empty from other backends."""
    trace: tuple[StepRecord, ...] = ()
    divergence: str | None = None
    opaque: bool = False
    """Code ran outside the schedule (executor jobs, real threads): exhaustion proves less."""
    hashed: int = 0
    """How many tasks and futures the run hashed where their order shows (put in a set): with
    two or more, what it does may depend on their addresses (``ADDRESS`` decisions)."""
    uninstrumented: tuple[str, ...] = ()
    """The installed modules whose code a thread ran without schedule points while another
    thread could have preempted it (sorted): the interleavings inside it were not explored."""
    free_threaded: tuple[int, ...] = ()
    """In a recorded run: the steps of thread preemptions that, with the GIL, CPython does not
    make (no call, function start or loop back-edge since the thread's previous point)."""
    gil_points: tuple[int, ...] = ()
    """In a recorded run of threads: the steps of the points where a GIL build can switch
    threads (where such a preemption may move to, ``explorer.at_gil_switches``)."""
    model: RunModel | None = None
    """For partial-order reduction: set by a backend that can predict reorderings of this
    (passing) run, when the chooser asked for it."""

    def same_failure(self, other: RunResult) -> bool:
        """Whether two runs fail the same way: the same kind and, for exceptions, the same
        type raised at the same line (as Hypothesis tells failures apart), so that shrinking
        never trades the failure found for another one of the same type."""
        if self.kind != other.kind:
            return False
        if self.kind == "exception":
            return type(self.exception) is type(other.exception) and _origin(
                self.exception
            ) == _origin(other.exception)
        return True


def _origin(exception: BaseException | None) -> tuple[str, int] | None:
    """Where ``exception`` was raised: the file and line of its traceback's last frame."""
    tb = exception.__traceback__ if exception is not None else None
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename, tb.tb_lineno


@dataclass(frozen=True)
class Failure:
    """A failing schedule, shrunk and replayable.

    Attributes:
        kind: ``"exception"``, ``"deadlock"`` or ``"hang"``.
        token: the replay token; ``interlace.replay(target, token)`` re-runs this schedule.
        exception: the exception that escaped the target (``kind == "exception"``), else None.
        report: the human-readable report (the failing schedule, what failed, how to replay).
        label: what the failure needs to happen on a stock interpreter, e.g.
            ``"fails under stock order"`` or ``"needs await latency"``.
        steps: steps in the shrunk schedule.
        shrunk_from: steps in the schedule first found.
        deviations: non-stock decisions in the shrunk schedule.
        schedule: the recorded steps of the shrunk schedule.
        detail: for deadlocks and hangs, what every task was doing.
        unshrunk: the recorded steps of the schedule as first found, when
            ``explore(..., keep_unshrunk=True)`` asked for them and shrinking changed it
            (empty otherwise, and for a replay).
    """

    kind: FailureKind
    token: str
    exception: BaseException | None
    report: str
    label: str
    steps: int
    shrunk_from: int
    deviations: int
    schedule: tuple[StepRecord, ...] = field(repr=False, default=())
    detail: str = ""
    unshrunk: tuple[StepRecord, ...] = field(repr=False, default=())

    def __str__(self) -> str:
        return self.report

    def to_html(self, *, title: str = "", scenario: ScenarioColumns | None = None) -> str:
        """The failure as a self-contained HTML swimlane report (docs/report.md).

        Args:
            title: what failed, as the page's heading (a test's node id, a target).
            scenario: a concurrent state machine's scenario, shown as columns above the lanes.

        Returns:
            The page (inline CSS and JS, no network); write it with ``encoding="utf-8"``.
        """
        from interlace._core.html_report import render_html

        return render_html(self, title=title, scenario=scenario)


@dataclass(frozen=True)
class Exploration:
    """The outcome of :func:`interlace.explore`.

    Attributes:
        failure: the first failure found (shrunk), or None.
        schedules: how many schedules ran (shrinking runs not included).
        exhausted: True when the bounded exhaustive search visited its whole space.
        strategy: the strategy's description, e.g. ``"auto(exhaustive(bound=2), ...)"``.
        seed: the seed used (pass it back to get the same exploration).
        elapsed: wall-clock seconds spent.
        opaque: True when some schedule ran steps outside interlace's control: executor
            jobs on threads it did not start (an executor whose workers started before the
            exploration, a process pool) or the tasks of an event loop run in a thread. The
            interleavings inside those steps were not explored, and ``exhausted`` is False.
        space: when ``exhausted``, the space it covered, in words (the deviation bound, the
            loop stalls, the address orders); else empty.
        uninstrumented: the installed modules (site-packages, outside the standard library
            and interlace's engine) whose code a controlled thread ran without schedule
            points while another thread could have preempted it, sorted. The interleavings
            inside that code were not explored, and ``exhausted`` is False; naming the
            modules in ``instrument`` explores them.
        failure_index: the failing schedule's index in the exploration's order of
            schedules (0 is the first), the same whatever ``workers`` or ``shard``; None
            without a failure.
        shard: ``(K, N)`` when the exploration ran only the K-th of N parts of its schedule
            space (``explore(..., shard=...)``), else None.
        workers: how many processes ran schedules (1: only this one).
    """

    failure: Failure | None
    schedules: int
    exhausted: bool
    strategy: str
    seed: int
    elapsed: float
    opaque: bool = False
    space: str = ""
    uninstrumented: tuple[str, ...] = ()
    failure_index: int | None = None
    shard: tuple[int, int] | None = None
    workers: int = 1
