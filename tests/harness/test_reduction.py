"""Partial-order reduction of the exhaustive search: sound, deterministic, and it saves runs."""

from __future__ import annotations

import importlib
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
import reduction_programs
from bugs import PROGRAMS as BUG_PROGRAMS

import interlace
from interlace._core.explorer import ReplayHints, explore_backend
from interlace._core.result import Exploration
from interlace._core.schedule import Settings, encode_token
from interlace._core.strategy import Chooser, ExhaustiveStrategy, _DFSChooser
from interlace.harness import _footprint, _por
from interlace.harness._asyncio_backend import AsyncioBackend

Program = Callable[[], Coroutine[Any, Any, None]]

needs_footprints = pytest.mark.skipif(
    not _footprint.AVAILABLE, reason="footprints need sys.monitoring (Python 3.12+)"
)


def search(
    program: Program, *, reduce: bool, bound: int = 2, budget: int = 5000
) -> tuple[Exploration, ExhaustiveStrategy]:
    strategy = ExhaustiveStrategy(bound, budget, reduce=reduce)
    backend = AsyncioBackend(program, Settings(max_steps=5000))
    exploration = explore_backend(
        backend, strategy, max_schedules=budget, seed=0, hints=ReplayHints(api="program")
    )
    return exploration, strategy


@pytest.fixture
def oracle() -> Iterator[list[int]]:
    """Run every schedule the reduction predicts, and check it runs as predicted."""
    checked: list[int] = []
    targets: weakref.WeakKeyDictionary[_por.AsyncioRunModel, Program] = weakref.WeakKeyDictionary()
    predict = _por.AsyncioRunModel.predict
    run = AsyncioBackend.run

    def checking(model: _por.AsyncioRunModel, chooser: Chooser) -> bool:
        predicted = predict(model, chooser)
        if predicted:
            assert isinstance(chooser, _DFSChooser)
            again = _DFSChooser(chooser._prefix, chooser._max_points)
            result = AsyncioBackend(targets[model], model.settings).run(again)
            assert result.kind is None, result.exception
            assert again.points == chooser.points
            assert again.prefix_taken == chooser.prefix_taken
            assert again.truncated == chooser.truncated
            checked.append(result.steps)
        return predicted

    def remembering(self: AsyncioBackend, chooser: Chooser, *, record: bool = False) -> Any:
        result = run(self, chooser, record=record)
        if isinstance(result.model, _por.AsyncioRunModel):
            targets[result.model] = self.target
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_por.AsyncioRunModel, "predict", checking)
        patch.setattr(AsyncioBackend, "run", remembering)
        yield checked


@needs_footprints
def test_independent_tasks_need_far_fewer_runs_and_the_space_is_still_exhausted() -> None:
    program = reduction_programs.make_independent_workers(tasks=3, steps=3)
    plain, _ = search(program, reduce=False)
    reduced, strategy = search(program, reduce=True)
    assert plain.exhausted
    assert reduced.exhausted
    assert plain.failure is None
    assert reduced.failure is None
    assert reduced.schedules * 5 <= plain.schedules
    assert reduced.schedules + strategy.predicted == plain.schedules


@needs_footprints
@pytest.mark.parametrize("name", sorted(reduction_programs.PROGRAMS))
@pytest.mark.parametrize("version", ["buggy", "fixed"])
def test_every_predicted_schedule_runs_as_predicted(
    name: str, version: str, oracle: list[int]
) -> None:
    buggy, fixed = reduction_programs.PROGRAMS[name]()
    exploration, strategy = search(buggy if version == "buggy" else fixed, reduce=True)
    assert len(oracle) == strategy.predicted
    if version == "fixed":
        assert exploration.failure is None
        assert exploration.exhausted


@pytest.mark.parametrize("name", sorted(reduction_programs.PROGRAMS))
@pytest.mark.parametrize("version", ["buggy", "fixed"])
def test_the_reduced_search_finds_exactly_the_failure_the_plain_search_finds(
    name: str, version: str
) -> None:
    buggy, fixed = reduction_programs.PROGRAMS[name]()
    program = buggy if version == "buggy" else fixed
    plain, _ = search(program, reduce=False)
    reduced, strategy = search(program, reduce=True)
    assert (plain.failure is None) is (version == "fixed")
    if plain.failure is None:
        assert reduced.failure is None
        assert reduced.exhausted is plain.exhausted
        assert reduced.schedules + strategy.predicted == plain.schedules
    else:
        assert reduced.failure is not None
        # Breadth-first, the first failing schedule is the same one: it is never predicted.
        assert reduced.failure.token == plain.failure.token
        assert reduced.schedules <= plain.schedules


@pytest.mark.parametrize("name", BUG_PROGRAMS)
def test_every_bug_of_the_suite_is_found_by_the_reduced_exhaustive_search(name: str) -> None:
    module = importlib.import_module(f"bugs.{name}")
    exploration = interlace.explore(
        module.buggy, strategy="exhaustive", bound=3, max_schedules=2000, max_steps=5000
    )
    assert exploration.failure is not None, f"{name}: {exploration.schedules} schedules"
    assert exploration.failure.kind == module.KIND
    plain, _ = search(module.buggy, reduce=False, bound=3, budget=2000)
    assert plain.failure is not None
    assert exploration.failure.deviations == plain.failure.deviations


@needs_footprints
def test_the_same_exploration_runs_the_same_schedules_every_time() -> None:
    buggy, _ = reduction_programs.PROGRAMS["closure_counter"]()
    program = reduction_programs.make_independent_workers(tasks=3, steps=2)

    def schedules(target: Program) -> tuple[list[str], int]:
        seen: list[str] = []
        original = AsyncioBackend.run

        def run(self: AsyncioBackend, chooser: Chooser, *, record: bool = False) -> Any:
            result = original(self, chooser, record=record)
            seen.append(encode_token(self.settings, result.decisions))
            return result

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(AsyncioBackend, "run", run)
            _, strategy = search(target, reduce=True)
        return seen, strategy.predicted

    for target in (program, buggy):
        first = schedules(target)
        assert all(schedules(target) == first for _ in range(3))


@pytest.mark.skipif(_footprint.AVAILABLE, reason="Python 3.11 has no sys.monitoring")
def test_without_sys_monitoring_the_search_runs_every_schedule() -> None:
    program = reduction_programs.make_independent_workers(tasks=3, steps=2)
    plain, _ = search(program, reduce=False)
    reduced, strategy = search(program, reduce=True)
    assert strategy.predicted == 0
    assert reduced.schedules == plain.schedules
    assert reduced.exhausted
    assert plain.exhausted


@needs_footprints
def test_a_run_stops_recording_footprints_as_its_threads_come_under_control() -> None:
    # A run whose threads are under control has no model: tracing the rest of the step that
    # starts the first thread (interlace's instrumentation pass among it) cost 17 s of the
    # 18 s S002-02 took on 3.12.
    seen: list[tuple[bool, bool]] = []

    def tracing() -> bool:
        tools = [sys.monitoring.get_tool(tool) for tool in range(6)]  # type: ignore[attr-defined]
        return "interlace footprints" in tools

    async def program() -> None:
        before = tracing()
        thread = threading.Thread(target=tracing)
        thread.start()
        seen.append((before, tracing()))  # the same step
        thread.join()

    exploration = interlace.explore(program, strategy="exhaustive", max_schedules=10, seed=0)
    assert exploration.failure is None
    assert seen[0] == (True, False)  # the first run records footprints until the start
    assert not any(during for _, during in seen)
