"""Dependence between footprints, and the reducing exhaustive search on a synthetic backend."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from interlace._core.explorer import ReplayHints, explore_backend
from interlace._core.footprint import Footprint, dependent, predecessors
from interlace._core.result import RunResult
from interlace._core.schedule import READY, Decision, Settings
from interlace._core.strategy import Chooser, ExhaustiveStrategy

keys = st.lists(st.sampled_from(["a", "b"]), min_size=0, max_size=3).map(tuple)
footprints = st.one_of(
    st.none(),
    st.builds(
        Footprint,
        st.frozensets(keys, max_size=3),
        st.frozensets(keys, max_size=2),
    ),
)


def test_a_key_conflicts_with_its_prefixes_and_extensions_only() -> None:
    write = Footprint(frozenset(), frozenset({("attr", "x", 1)}))
    assert dependent(write, Footprint(frozenset({("attr", "x", 1)}), frozenset()))
    assert dependent(write, Footprint(frozenset({("attr", "x")}), frozenset()))
    assert dependent(write, Footprint(frozenset({("attr",)}), frozenset()))
    assert not dependent(write, Footprint(frozenset({("attr", "x", 2)}), frozenset()))
    assert not dependent(write, Footprint(frozenset({("attr", "y")}), frozenset()))
    reader = Footprint(frozenset({("attr", "x", 1)}), frozenset())
    assert not dependent(reader, reader)
    assert dependent(None, reader)


@given(st.lists(footprints, max_size=12))
def test_every_dependent_pair_is_ordered_by_a_chain_of_listed_predecessors(
    steps: list[Footprint | None],
) -> None:
    before = predecessors(steps)
    reach = [set(earlier) for earlier in before]
    for index, earlier in enumerate(before):
        assert all(e < index for e in earlier)
        for e in earlier:
            reach[index] |= reach[e]
    for first, second in itertools.combinations(range(len(steps)), 2):
        if dependent(steps[first], steps[second]):
            assert first in reach[second], (first, second)


class Independent:
    """Actors that each take ``length`` steps touching only their own key.

    Option ``k`` at a schedule point runs the ``k``-th ready actor; every run passes. The
    model predicts any schedule (all its runs are reorderings of independent steps), and
    counts how often it was asked.
    """

    def __init__(self, actors: int, length: int) -> None:
        self.actors = actors
        self.length = length
        self.settings = Settings()
        self.runs = 0
        self.predictions = 0

    def _drive(self, chooser: Chooser) -> tuple[int, tuple[Decision, ...]]:
        left = [self.length] * self.actors
        ready = list(range(self.actors))
        decisions = []
        step = 0
        while ready:
            step += 1
            choice = 0
            if len(ready) > 1 and step >= chooser.consult_at:
                choice = chooser.choose(step, [a + 1 for a in ready], False)
                if choice:
                    decisions.append(Decision(step, READY, choice, ready[choice] + 1))
            actor = ready.pop(choice)
            left[actor] -= 1
            if left[actor]:
                ready.append(actor)
        return step, tuple(decisions)

    def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
        self.runs += 1
        steps, decisions = self._drive(chooser)
        model = self if chooser.wants_model else None
        return RunResult(None, None, "", steps, decisions, model=model)

    def predict(self, chooser: Chooser) -> bool:
        self.predictions += 1
        self._drive(chooser)
        return True


def explore(backend: Independent, *, reduce: bool, bound: int = 2) -> tuple[int, bool, int]:
    strategy = ExhaustiveStrategy(bound, reduce=reduce)
    exploration = explore_backend(
        backend, strategy, max_schedules=100_000, seed=0, hints=ReplayHints(api="toy")
    )
    return exploration.schedules, exploration.exhausted, strategy.predicted


def test_a_predicted_schedule_is_not_run_but_its_children_are_still_visited() -> None:
    plain = explore(Independent(3, 3), reduce=False)
    reduced = explore(Independent(3, 3), reduce=True)
    assert plain[1]
    assert reduced[1]
    assert reduced[0] == 1  # only the stock schedule runs
    assert reduced[0] + reduced[2] == plain[0]


def test_schedules_at_the_bound_do_not_ask_for_a_model() -> None:
    asked: list[int] = []

    class Recording(Independent):
        def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
            result = super().run(chooser, record=record)
            asked.append(len(result.decisions) if chooser.wants_model else -1)
            return result

        def predict(self, chooser: Chooser) -> bool:
            return False

    explore(Recording(2, 3), reduce=True, bound=1)
    assert asked[0] == 0
    assert set(asked[1:]) == {-1}


def test_without_reduction_no_model_is_asked_for_or_used() -> None:
    backend = Independent(2, 2)
    schedules, exhausted, predicted = explore(backend, reduce=False)
    assert backend.predictions == 0
    assert predicted == 0
    assert schedules == backend.runs
    assert exhausted


def test_the_reduced_search_visits_schedules_in_the_same_order_every_time() -> None:
    def visited() -> Sequence[tuple[int, ...]]:
        seen: list[tuple[int, ...]] = []

        class Tracking(Independent):
            def predict(self, chooser: Chooser) -> bool:
                seen.append(tuple(getattr(chooser, "_prefix", ())))
                return len(seen) % 3 != 0  # a deterministic mix of predicted and run

        explore(Tracking(3, 2), reduce=True)
        return seen

    assert visited() == visited()
