"""One exploration split over worker processes and shards, with the result of one process.

Every schedule has an index: its place in the order one process runs the strategy's
choosers. The strategy makes its choosers here, in that order; workers run them, and their
runs are *committed* (``Strategy.finished``, the budget, the failure check) in index order,
whatever order they end in. So the strategy learns exactly what it would in one process,
and the failure reported is the one at the lowest failing index, run again and shrunk here:
the same token for every number of workers. Where a chooser's run depends on runs not yet
committed (``Strategy.ready``, ``Strategy.reissue``), the pipeline waits or runs it again.

A shard ``(K, N)`` runs the schedules whose index is ``K - 1`` modulo ``N``, and the ones
every later chooser needs (``Strategy.required``: the bounded search's schedules below its
bound); the others are ``skipped``.
"""

from __future__ import annotations

import pickle
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol

from interlace._core.explorer import (
    SHRINK_SECONDS,
    Backend,
    ReplayHints,
    describe_space,
    make_failure,
    shrink,
)
from interlace._core.result import Exploration, FailureKind, RunResult
from interlace._core.strategy import RUN_STATE, Chooser, Strategy

__all__ = ("IN_PROCESS_SCHEDULES", "Outcome", "WorkerPool", "explore_split", "run_outcome")

IN_PROCESS_SCHEDULES = 50
"""Schedules run in this process before any worker starts: an exploration that ends within
them pays nothing for workers."""
_BATCH_SECONDS = 0.05
"""About how long one job sent to a worker runs (from the schedules run in this process):
long enough that the round trip costs little, short enough that little is run past the
answer."""
_MAX_BATCH = 256
_AHEAD = 3
"""Jobs in flight per worker, so none idles while the oldest is committed."""


class Outcome(NamedTuple):
    """What a worker sends back of one run (the rest stays in the worker)."""

    kind: FailureKind | None
    steps: int
    hashed: int
    opaque: bool
    uninstrumented: tuple[str, ...]
    state: dict[str, object]
    """The chooser's ``RUN_STATE`` after the run."""


Batch = list[tuple[int, bytes]]
"""A job: pickled choosers with their schedule indexes, in index order."""


class WorkerPool(Protocol):
    """Worker processes that run batches of choosers (the harness's ``_workers``)."""

    def submit(self, batch: Batch, deadline: float | None) -> Future[list[tuple[int, Outcome]]]:
        """Run ``batch`` in a worker, up to its first failure; no run starts after
        ``deadline`` (``time.time()``), except the batch's first."""
        ...

    def result(self, future: Future[list[tuple[int, Outcome]]]) -> list[tuple[int, Outcome]]:
        """Wait for a submitted batch (ended by a Ctrl-C or SIGTERM)."""
        ...

    def stop(self) -> None:
        """End every worker now (the answer is settled)."""
        ...


def run_outcome(backend: Backend, chooser: Chooser) -> Outcome:
    """Run ``chooser`` (in a worker) and keep what the committing process needs."""
    result = backend.run(chooser)
    state = {name: getattr(chooser, name) for name in RUN_STATE if hasattr(chooser, name)}
    return Outcome(
        result.kind, result.steps, result.hashed, result.opaque, result.uninstrumented, state
    )


class _Split:
    """One split exploration's progress.

    Invariant: runs are committed in index order; ``issued`` choosers were made, of which
    every one before the oldest uncommitted was committed or skipped.
    """

    def __init__(
        self,
        backend: Backend,
        strategy: Strategy,
        max_schedules: int,
        shard: tuple[int, int] | None,
        max_seconds: float | None,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.backend = backend
        self.strategy = strategy
        self.max_schedules = max_schedules
        self.shard = shard
        self.max_seconds = max_seconds
        self.progress = progress
        self.started = time.monotonic()
        self.schedules = 0
        self.issued = 0
        self.ended = False
        self.opaque = False
        self.uninstrumented: set[str] = set()
        self.failing: tuple[int, RunResult] | None = None

    def over(self) -> bool:
        """The wall-clock budget is spent (the first schedule runs whatever it is)."""
        return (
            self.schedules > 0
            and self.max_seconds is not None
            and time.monotonic() - self.started > self.max_seconds
        )

    def deadline(self) -> float | None:
        if self.max_seconds is None:
            return None
        return time.time() + self.max_seconds - (time.monotonic() - self.started)

    def more(self) -> bool:
        """Whether the exploration may go on."""
        return (
            self.failing is None
            and not self.ended
            and self.issued < self.max_schedules
            and not self.over()
        )

    def take(self) -> tuple[int, Chooser] | None:
        """The next chooser to run and its index, or None (no more, or not ready until
        the runs in flight are committed); the ones of other shards are skipped."""
        strategy = self.strategy
        while self.more() and strategy.ready():
            chooser = strategy.next_chooser()
            if chooser is None:
                self.ended = True
                return None
            index = self.issued
            self.issued += 1
            if self.shard is None or index % self.shard[1] == self.shard[0] - 1:
                return index, chooser
            if strategy.required(chooser):
                return index, chooser
            strategy.skipped(chooser)
        return None

    def commit(self, index: int, chooser: Chooser, result: RunResult) -> None:
        self.schedules += 1
        self.opaque = self.opaque or result.opaque
        self.uninstrumented.update(result.uninstrumented)
        self.strategy.finished(chooser, result.steps, result)
        if self.progress is not None:
            self.progress(self.schedules, self.max_schedules)
        if result.kind is not None:
            self.failing = (index, result)

    def commit_outcome(self, index: int, chooser: Chooser, data: bytes, outcome: Outcome) -> None:
        """Commit a worker's run: run it here instead when one process would have run
        another chooser (``reissue``), or when it failed (the failure is shrunk here)."""
        for name, value in outcome.state.items():
            setattr(chooser, name, value)
        again = self.strategy.reissue(chooser)
        if again is not None:
            self.commit(index, again, self.backend.run(again))
        elif outcome.kind is not None:
            # The chooser as it was made, unused: the same schedule, run in this process.
            self.commit(index, chooser, self.backend.run(pickle.loads(data)))
        else:
            passed = RunResult(
                kind=None,
                exception=None,
                detail="",
                steps=outcome.steps,
                decisions=(),
                opaque=outcome.opaque,
                hashed=outcome.hashed,
                uninstrumented=outcome.uninstrumented,
            )
            self.commit(index, chooser, passed)

    def run_here(self, index: int, chooser: Chooser) -> None:
        """Run a chooser made while earlier runs were in flight in this process, and commit
        it (or the chooser one process would have made in its place)."""
        result = self.backend.run(chooser)
        again = self.strategy.reissue(chooser)
        if again is not None:
            chooser, result = again, self.backend.run(again)
        self.commit(index, chooser, result)

    def in_process(self, until: int) -> None:
        """Run schedules here until ``until`` have run or the exploration is settled."""
        while self.schedules < until:
            taken = self.take()
            if taken is None:
                return
            self.commit(taken[0], taken[1], self.backend.run(taken[1]))

    def pipeline(self, pool: WorkerPool, workers: int) -> None:
        """Run the rest on ``pool``: batches in flight, committed oldest first."""
        flight: deque[tuple[list[tuple[int, Chooser, bytes]], Future[list[tuple[int, Outcome]]]]]
        flight = deque()
        per_run = (time.monotonic() - self.started) / max(1, self.schedules)
        size = max(1, min(_MAX_BATCH, int(_BATCH_SECONDS / max(per_run, 1e-6))))
        while True:
            while len(flight) < workers * _AHEAD:
                batch: list[tuple[int, Chooser, bytes]] = []
                while len(batch) < size:
                    taken = self.take()
                    if taken is None:
                        break
                    batch.append((taken[0], taken[1], pickle.dumps(taken[1])))
                if not batch:
                    break
                job = [(index, data) for index, _, data in batch]
                flight.append((batch, pool.submit(job, self.deadline())))
            if not flight:
                return
            batch, future = flight.popleft()
            ran = pool.result(future)
            outcomes = dict(ran)
            stopped_at_failure = bool(ran) and ran[-1][1].kind is not None
            for index, chooser, data in batch:
                outcome = outcomes.get(index)
                if outcome is not None:
                    self.commit_outcome(index, chooser, data, outcome)
                elif stopped_at_failure:
                    # The worker stopped at a failure that, run again here, was not one
                    # (``reissue``, or a nondeterministic target): the rest run here.
                    self.run_here(index, chooser)
                else:
                    # The worker stopped at the deadline: nothing after this counts.
                    self.ended = True
                    return
                if self.failing is not None:
                    return


def explore_split(
    backend: Backend,
    strategy: Strategy,
    *,
    max_schedules: int,
    seed: int,
    hints: ReplayHints,
    pool: Callable[[], AbstractContextManager[WorkerPool]] | None,
    workers: int = 1,
    shard: tuple[int, int] | None = None,
    max_seconds: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    unfold: bool = False,
    keep_unshrunk: bool = False,
) -> Exploration:
    """``explore_backend`` over worker processes and in shard ``shard`` (K of N).

    ``pool`` starts the workers; it is entered only once ``IN_PROCESS_SCHEDULES`` have run
    here and the exploration goes on, and the workers are stopped as soon as the answer is
    settled. The failure, its token and ``failure_index`` are the same for every number of
    workers; of a set of shards, the one with the lowest ``failure_index`` reports the
    failure a single exploration reports.
    """
    split = _Split(backend, strategy, max_schedules, shard, max_seconds, progress)
    split.in_process(IN_PROCESS_SCHEDULES if pool is not None else max_schedules)
    if pool is not None and split.more():
        with pool() as running:
            try:
                split.pipeline(running, workers)
            finally:
                running.stop()
    failing = split.failing
    failure = None
    if failing is not None:
        seconds = SHRINK_SECONDS
        if max_seconds is not None:
            elapsed = time.monotonic() - split.started
            seconds = min(seconds, max(0.0, max_seconds - elapsed))
        best, _ = shrink(backend, failing[1], max_seconds=seconds)
        failure = make_failure(
            backend,
            best,
            failing[1].steps,
            hints,
            unfold=unfold,
            found=failing[1] if keep_unshrunk else None,
        )
    exhausted = (
        strategy.exhausted and failure is None and not split.opaque and not split.uninstrumented
    )
    space = describe_space(strategy, backend.settings) if exhausted else ""
    if space and shard is not None:
        space = f"shard {shard[0]}/{shard[1]}'s part of {space}"
    return Exploration(
        failure=failure,
        schedules=split.schedules,
        exhausted=exhausted,
        strategy=strategy.describe(),
        seed=seed,
        elapsed=time.monotonic() - split.started,
        opaque=split.opaque,
        space=space,
        uninstrumented=tuple(sorted(split.uninstrumented)),
        failure_index=failing[0] if failing is not None else None,
        shard=shard,
        workers=workers,
    )
