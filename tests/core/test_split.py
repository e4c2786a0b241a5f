"""The split explorer (``_core.split``) driven by a synthetic backend and an in-process
worker pool: the same schedules, in the same order, as one process."""

from __future__ import annotations

import contextlib
import pickle
import zlib
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from interlace._core import split
from interlace._core.explorer import ReplayHints, explore_backend
from interlace._core.result import RunResult
from interlace._core.schedule import READY, Decision, Settings
from interlace._core.split import Batch, Outcome, explore_split, run_outcome
from interlace._core.strategy import Chooser, make_strategy

HINTS = ReplayHints(api="toy")


class VaryingBackend:
    """Three options at every step; every deviation makes the run longer (so strategies
    that learn the run length learn something new late), and a run fails when its
    deviations hash to a multiple of ``rarity``: a failure at an index that depends on
    exactly which schedules ran before it."""

    def __init__(self, rarity: int) -> None:
        self.settings = Settings(backend="asyncio")
        self.rarity = rarity

    def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
        length = 20
        step = 0
        decisions: list[Decision] = []
        while step < length:
            step += 1
            if step >= chooser.consult_at:
                choice = chooser.choose(step, [1, 2, 3], False)
                if choice:
                    decisions.append(Decision(step, READY, choice, choice + 1))
                    length = min(200, length + 30)
        failed = zlib.crc32(repr(decisions).encode()) % self.rarity == 0 and bool(decisions)
        return RunResult(
            kind="exception" if failed else None,
            exception=AssertionError(len(decisions)) if failed else None,
            detail="",
            steps=step,
            decisions=tuple(decisions),
        )


class InlinePool:
    """Runs each batch as it is submitted, in this process: the pipeline still makes the
    choosers of later batches before it commits the runs of earlier ones."""

    def __init__(self, backend: VaryingBackend) -> None:
        self.backend = backend
        self.batches = 0
        self.stopped = False

    def submit(self, batch: Batch, deadline: float | None) -> Future[list[tuple[int, Outcome]]]:
        self.batches += 1
        outcomes = []
        for index, data in batch:
            outcome = run_outcome(self.backend, pickle.loads(data))
            outcomes.append((index, outcome))
            if outcome.kind is not None:
                break
        future: Future[list[tuple[int, Outcome]]] = Future()
        future.set_result(outcomes)
        return future

    def result(self, future: Future[list[tuple[int, Outcome]]]) -> list[tuple[int, Outcome]]:
        return future.result()

    def stop(self) -> None:
        self.stopped = True


def _answer(exploration: object) -> tuple[object, ...]:
    failure = exploration.failure  # type: ignore[attr-defined]
    return (
        failure.token if failure is not None else None,
        exploration.failure_index,  # type: ignore[attr-defined]
        exploration.schedules,  # type: ignore[attr-defined]
        exploration.exhausted,  # type: ignore[attr-defined]
    )


STRATEGIES = ["random", "pct", "delay", "exhaustive", "auto"]


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("rarity", [61, 10**9])
def test_a_split_exploration_runs_what_one_process_runs(
    name: str, rarity: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(split, "IN_PROCESS_SCHEDULES", 2)
    backend = VaryingBackend(rarity)
    budget = 300

    def strategy() -> object:
        return make_strategy(name, 7, bound=2, budget=budget, reduce=False)

    serial = explore_backend(backend, strategy(), max_schedules=budget, seed=7, hints=HINTS)  # type: ignore[arg-type]
    pool = InlinePool(VaryingBackend(rarity))

    @contextlib.contextmanager
    def start() -> Iterator[InlinePool]:
        yield pool

    parallel = explore_split(
        backend,
        strategy(),  # type: ignore[arg-type]
        max_schedules=budget,
        seed=7,
        hints=HINTS,
        pool=start,
        workers=2,
    )
    assert _answer(parallel) == _answer(serial)
    if serial.failure_index is None or serial.failure_index > split.IN_PROCESS_SCHEDULES:
        assert pool.batches >= 1
        assert pool.stopped


# PCT and sparse delays learn the run length from the runs they see, and a shard sees only
# its own (docs/scaling.md): their shards run other schedules than one exploration does.
@pytest.mark.parametrize("name", ["random", "exhaustive", "auto"])
def test_the_shards_lowest_failure_is_the_unsharded_failure(name: str) -> None:
    backend = VaryingBackend(61)

    def run(shard: tuple[int, int] | None) -> object:
        return explore_split(
            backend,
            make_strategy(name, 3, bound=2, budget=300, reduce=False),
            max_schedules=300,
            seed=3,
            hints=HINTS,
            pool=None,
            shard=shard,
        )

    whole = run(None)
    shards = [run((k, 3)) for k in (1, 2, 3)]
    failed = [s for s in shards if s.failure is not None]  # type: ignore[attr-defined]
    assert whole.failure is not None  # type: ignore[attr-defined]
    first = min(failed, key=lambda s: s.failure_index)  # type: ignore[attr-defined]
    assert first.failure_index == whole.failure_index  # type: ignore[attr-defined]
    assert first.failure.token == whole.failure.token  # type: ignore[attr-defined]
