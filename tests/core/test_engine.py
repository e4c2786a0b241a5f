"""The engine, driven by a synthetic backend: no event loop, no threads."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from interlace._core.explorer import (
    ReplayHints,
    _size,
    _without_pick,
    _without_step,
    explore_backend,
    format_report,
    label_for,
    shrink,
)
from interlace._core.result import FailureKind, RunResult, StepRecord
from interlace._core.schedule import (
    ADDRESS,
    READY,
    STALL,
    THREAD,
    TIMER,
    Decision,
    DecisionLog,
    Settings,
    decode_token,
    encode_token,
)
from interlace._core.strategy import (
    NEVER,
    AnchoredChooser,
    Chooser,
    ExhaustiveStrategy,
    PCTStrategy,
    RandomWalkStrategy,
    ReplayChooser,
    SparseDelayStrategy,
    make_strategy,
)
from interlace.errors import ReplayTokenError

Op = Callable[[dict[str, int]], None]


class ToyBackend:
    """Actors run lists of operations on a shared dict, one operation per step.

    The ready queue works like asyncio's: option 0 is the head; option k runs the k-th entry
    and postpones the ones before it; an actor that ran goes to the back. ``check`` decides
    whether the final state is a failure.
    """

    def __init__(self, programs: Sequence[Sequence[Op]], check: Callable[[dict[str, int]], bool]):
        self.programs = programs
        self.check = check
        self.settings = Settings(backend="asyncio")
        self.runs = 0

    def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
        self.runs += 1
        state: dict[str, int] = {}
        positions = [0] * len(self.programs)
        ready = [i for i, program in enumerate(self.programs) if program]
        decisions: list[Decision] = []
        step = 0
        while ready:
            step += 1
            choice = 0
            if step >= chooser.consult_at:
                choice = chooser.choose(step, [i + 1 for i in ready], False)
                if choice:
                    decisions.append(Decision(step, READY, choice, ready[choice] + 1))
            actor = ready.pop(choice)
            self.programs[actor][positions[actor]](state)
            positions[actor] += 1
            if positions[actor] < len(self.programs[actor]):
                ready.append(actor)
        failed = self.check(state)
        return RunResult(
            kind="exception" if failed else None,
            exception=AssertionError(state) if failed else None,
            detail="",
            steps=step,
            decisions=tuple(decisions),
        )


def read(name: str, into: str) -> Op:
    def op(state: dict[str, int]) -> None:
        state[into] = state.get(name, 0)

    return op


def write_incremented(name: str, source: str) -> Op:
    def op(state: dict[str, int]) -> None:
        state[name] = state[source] + 1

    return op


def noop(state: dict[str, int]) -> None:
    """A step that touches nothing (an await with no effect)."""


def lost_update_hidden() -> ToyBackend:
    """Two increments; the second actor reads one step late, so stock order passes.

    Stock: 0 reads, 1 waits, 0 writes, 1 reads and writes. Postponing 0's write once (one
    deviation) lets 1 read the old value.
    """
    first = [read("n", "a"), write_incremented("n", "a")]
    second = [noop, read("n", "b"), write_incremented("n", "b")]
    return ToyBackend([first, second], lambda state: state["n"] != 2)


def correct_program() -> ToyBackend:
    """Increments with read and write in one step: no interleaving can lose one."""

    def increment(state: dict[str, int]) -> None:
        state["n"] = state.get("n", 0) + 1

    return ToyBackend([[increment, noop], [noop, increment]], lambda s: s["n"] != 2)


HINTS = ReplayHints(api="toy.program")


def test_stock_order_of_the_hidden_bug_passes() -> None:
    assert ToyBackend.run(lost_update_hidden(), Chooser()).kind is None


def test_exhaustive_search_finds_the_hidden_lost_update_with_one_deviation() -> None:
    backend = lost_update_hidden()
    exploration = explore_backend(
        backend, ExhaustiveStrategy(bound=2), max_schedules=100, seed=0, hints=HINTS
    )
    assert exploration.failure is not None
    assert exploration.failure.deviations == 1
    assert exploration.failure.label == "needs await latency"
    assert exploration.exhausted is False


@pytest.mark.parametrize(("budget", "most"), [(None, 20.0), (1000.0, 20.0), (3.0, 3.0)])
def test_shrinking_spends_at_most_what_is_left_of_the_budget(
    monkeypatch: pytest.MonkeyPatch, budget: float | None, most: float
) -> None:
    given: list[float] = []
    real_shrink = shrink

    def watched(backend: ToyBackend, found: RunResult, *, max_seconds: float) -> object:
        given.append(max_seconds)
        return real_shrink(backend, found, max_seconds=max_seconds)

    monkeypatch.setattr("interlace._core.explorer.shrink", watched)
    exploration = explore_backend(
        lost_update_hidden(),
        ExhaustiveStrategy(bound=2),
        max_schedules=100,
        seed=0,
        hints=HINTS,
        max_seconds=budget,
    )
    assert exploration.failure is not None
    assert len(given) == 1
    assert most - exploration.elapsed <= given[0] <= most


def test_the_default_stops_once_its_exhaustive_part_has_run_every_schedule() -> None:
    # Two actors of two steps: every schedule has at most two deviations, so the bound of 2
    # leaves none out, and the random walks could only repeat them.
    exploration = explore_backend(
        correct_program(), make_strategy("auto", 0), max_schedules=150, seed=0, hints=HINTS
    )
    assert exploration.failure is None
    assert exploration.exhausted
    assert exploration.schedules < 150
    # With a bound of 1 some schedules are left out: the random walks go on to the budget.
    bounded = explore_backend(
        correct_program(),
        make_strategy("auto", 0, bound=1),
        max_schedules=150,
        seed=0,
        hints=HINTS,
    )
    assert bounded.exhausted
    assert bounded.schedules == 150


def test_exhaustive_search_reports_exhaustion_on_a_correct_program() -> None:
    exploration = explore_backend(
        correct_program(), ExhaustiveStrategy(bound=3), max_schedules=10_000, seed=0, hints=HINTS
    )
    assert exploration.failure is None
    assert exploration.exhausted is True


def test_exhaustive_search_runs_each_schedule_once_fewest_deviations_first() -> None:
    seen: list[tuple[int, ...]] = []

    class Recording(ToyBackend):
        def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
            result = super().run(chooser, record=record)
            seen.append(tuple(d.step for d in result.decisions))
            return result

    backend = Recording([[noop, noop], [noop, noop]], lambda state: False)
    exploration = explore_backend(
        backend, ExhaustiveStrategy(bound=2), max_schedules=1000, seed=0, hints=HINTS
    )
    assert exploration.exhausted is True
    assert len(seen) == len(set(seen))
    deviation_counts = [len(steps) for steps in seen]
    assert deviation_counts == sorted(deviation_counts)
    assert deviation_counts[0] == 0


def test_shrinking_removes_deviations_that_the_failure_does_not_need() -> None:
    backend = lost_update_hidden()
    # Find a failure with a random walk (which deviates freely), then shrink it.
    strategy = RandomWalkStrategy(seed=3)
    for _ in range(200):
        chooser = strategy.next_chooser()
        found = backend.run(chooser)
        if found.kind is not None and len(found.decisions) > 1:
            break
    else:
        pytest.fail("the random walk never produced a failure with several deviations")
    best, runs = shrink(backend, found)
    assert best.kind == "exception"
    assert len(best.decisions) == 1
    assert runs >= 1


def test_replay_chooser_retakes_the_recorded_decisions() -> None:
    backend = lost_update_hidden()
    exploration = explore_backend(
        backend, ExhaustiveStrategy(bound=1), max_schedules=100, seed=0, hints=HINTS
    )
    assert exploration.failure is not None
    _, decisions = decode_token(exploration.failure.token)
    again = backend.run(ReplayChooser(decisions, strict=True))
    assert again.kind == "exception"
    assert again.decisions == decisions


def test_strict_replay_names_the_step_that_no_longer_offers_the_option() -> None:
    backend = ToyBackend([[noop], [noop]], lambda state: False)
    chooser = ReplayChooser([Decision(1, READY, 5, 2)], strict=True)
    backend.run(chooser)
    assert chooser.divergence == "step 1 offers 2 option(s) but the schedule takes option 5"


def test_strict_replay_names_the_actor_it_expected() -> None:
    backend = ToyBackend([[noop], [noop]], lambda state: False)
    chooser = ReplayChooser([Decision(1, READY, 1, 7)], strict=True)
    backend.run(chooser)
    assert chooser.divergence == "step 1 expected to run actor #7 but option 1 is actor #2"


def _picked(chooser: ReplayChooser, actors: Sequence[int]) -> int:
    return chooser.choose(1, actors, False)


def test_a_shrinking_replay_by_actor_runs_the_decisions_actor_wherever_it_now_is() -> None:
    # Recorded as option 1 = actor 5; an earlier deviation dropped, actor 5 is option 3 now.
    decision = Decision(1, READY, 1, 5)
    assert _picked(ReplayChooser([decision], strict=False, by_actor=True), [2, 3, 4, 5]) == 3
    # By index, as before (and as a strict replay always does): option 1, another actor.
    assert _picked(ReplayChooser([decision], strict=False), [2, 3, 4, 5]) == 1
    strict = ReplayChooser([decision], strict=True, by_actor=True)
    assert _picked(strict, [2, 3, 4, 5]) == 0
    assert strict.divergence == "step 1 expected to run actor #5 but option 1 is actor #3"


def test_a_replay_by_actor_takes_the_index_when_the_actor_is_not_offered_or_not_named() -> None:
    absent = ReplayChooser([Decision(1, READY, 2, 9)], strict=False, by_actor=True)
    assert _picked(absent, [2, 3, 4, 5]) == 2
    unnamed = ReplayChooser([Decision(1, READY, 2, -1)], strict=False, by_actor=True)
    assert _picked(unnamed, [2, 3, 4, 5]) == 2
    # Advancing the clock is the option past the entries: its actor names none of them.
    advance = ReplayChooser([Decision(1, READY, 4, 2)], strict=False, by_actor=True)
    assert advance.choose(1, [2, 3, 4, 5], True) == 4


def _raised(at_first: bool) -> AssertionError:
    try:
        if at_first:
            raise AssertionError("first")
        raise AssertionError("second")
    except AssertionError as exc:
        return exc


def test_the_same_failure_is_the_same_kind_and_exception_type_raised_at_the_same_line() -> None:
    def result(exception: BaseException | None, kind: FailureKind = "exception") -> RunResult:
        return RunResult(kind=kind, exception=exception, detail="", steps=1, decisions=())

    first = result(_raised(True))
    assert first.same_failure(result(_raised(True)))
    # Shrinking never trades the failure found for another of the same type elsewhere.
    assert not first.same_failure(result(_raised(False)))
    assert not first.same_failure(result(ValueError()))
    assert result(None, "deadlock").same_failure(result(None, "deadlock"))
    assert not result(None, "deadlock").same_failure(result(None, "hang"))


def test_an_anchored_replay_switches_when_its_thread_reaches_its_point() -> None:
    # Thread 1 is preempted for thread 3 once it has reached point 4 of its own run, thread 3
    # for thread 2 at its point 6: whichever global step that is.
    chooser = AnchoredChooser([(3, 6, 2), (1, 4, 3)])
    assert chooser.wants_where
    assert chooser.consult_at == 0
    where = (1, 2)
    chooser.where = lambda: where
    assert chooser.choose(10, [1, 2, 3], False) == 0
    where = (2, 8)  # another thread, past point 4: not thread 1's deviation
    assert chooser.choose(11, [2, 1, 3], False) == 0
    where = (1, 5)  # thread 1 past its point (4 was not a consult): it switches now
    assert chooser.choose(12, [1, 2, 3], False) == 2
    where = (1, 9)  # once only
    assert chooser.choose(13, [1, 2, 3], False) == 0
    where = (3, 6)
    assert chooser.choose(14, [3, 1], False) == 0  # thread 2 cannot run: no switch, and done
    assert chooser.consult_at == NEVER
    assert chooser.choose(15, [3, 2], False) == 0


def test_an_anchored_replay_tells_the_event_loops_choices_from_its_threads() -> None:
    # In a run of tasks and threads the loop's thread (actor 0) makes choices of its own
    # (READY: which task runs; TIMER: which timer fires) and is preempted like any thread.
    chooser = AnchoredChooser([(0, 4, 7, READY), (0, 4, 2, THREAD), (0, 6, 1, TIMER)])
    chooser.where = lambda: (0, 5)
    assert chooser.choose(9, [1, 2], False) == 1  # a thread's point: the THREAD deviation
    chooser.loop_consult = True
    assert chooser.choose(10, [5, 7], True) == 1  # the loop's own choice: task 7
    assert chooser.choose_timer(11, 2) == 0  # its timer deviation is at point 6
    chooser.where = lambda: (0, 6)
    assert chooser.choose_timer(12, 2) == 1
    assert chooser.consult_at == NEVER
    # A plain callback (actor 0) that is not ready where the failing run took it: the
    # clock's advance, when it is an option.
    advance = AnchoredChooser([(0, 2, 0, READY)])
    advance.where = lambda: (0, 2)
    advance.loop_consult = True
    assert advance.choose(3, [4, 5], True) == 2


def test_dropping_a_deviation_brings_the_later_ones_a_step_sooner() -> None:
    decisions = [Decision(4, READY, 2, 7), Decision(5, READY, 3, 9), Decision(8, TIMER, 1, 0)]
    assert _without_step(decisions, 0) == [Decision(4, READY, 3, 9), Decision(7, TIMER, 1, 0)]
    assert _without_step(decisions, 2) == decisions[:2]


def test_dropping_a_deviations_entry_moves_each_later_entry_to_the_step_before() -> None:
    decisions = [
        Decision(4, READY, 2, 7),
        Decision(6, TIMER, 1, 0),
        Decision(7, READY, 3, 9),
        Decision(9, READY, 1, 4),
    ]
    # Without actor 7: actor 9 deviates at step 4, actor 4 at step 7; the timer stays put.
    assert _without_pick(decisions, 0) == [
        Decision(4, READY, 3, 9),
        Decision(6, TIMER, 1, 0),
        Decision(7, READY, 1, 4),
    ]
    assert _without_pick(decisions, 1) == [d for d in decisions if d.kind != TIMER]


STALL_30 = "needs the loop to stall 30 ms (a blocking call of that length on the loop)"


@pytest.mark.parametrize(
    ("decisions", "backend", "label"),
    [
        ((), "asyncio", "fails under stock order"),
        ((Decision(3, READY, 1, 2),), "asyncio", "needs await latency"),
        ((Decision(3, TIMER, 1, 30_000),), "asyncio", STALL_30),
        ((Decision(3, STALL, 2, 30_000),), "asyncio", STALL_30),
        ((Decision(3, STALL, 1, 400),), "asyncio", STALL_30.replace("30 ms", "0.4 ms")),
        ((Decision(3, STALL, 1, 40),), "asyncio", STALL_30.replace("30 ms", "40 us")),
        ((Decision(3, STALL, 1, 10_000), Decision(9, TIMER, 1, 20_000)), "asyncio", STALL_30),
        (
            (Decision(3, READY, 1, 2), Decision(5, TIMER, 1, 30_000)),
            "asyncio",
            "needs await latency and the loop to stall 30 ms (a blocking call of that length "
            "on the loop)",
        ),
        (
            (Decision(0, ADDRESS, 1, 0),),
            "asyncio",
            "fails on some stock runs: depends on object addresses",
        ),
        (
            (Decision(0, ADDRESS, 5, 0), Decision(3, READY, 1, 2)),
            "asyncio",
            "needs await latency and an order of object addresses that only some stock runs have",
        ),
        ((Decision(3, READY, 1, 2),), "threads", "needs thread preemption"),
    ],
)
def test_label_names_what_the_schedule_needs(
    decisions: tuple[Decision, ...], backend: str, label: str
) -> None:
    assert label_for(decisions, backend) == label


def test_a_preemption_a_gil_build_cannot_make_needs_a_free_threaded_build() -> None:
    decisions = (Decision(3, READY, 1, 2), Decision(9, READY, 1, 1))
    assert label_for(decisions, "threads", (9,)) == "needs a free-threaded build"
    mixed = (Decision(3, THREAD, 1, 2), Decision(5, TIMER, 1, 30_000))
    assert label_for(mixed, "asyncio", (3,)) == (
        "needs a free-threaded build and the loop to stall 30 ms (a blocking call of that "
        "length on the loop)"
    )


decision_lists = st.lists(
    st.tuples(
        st.integers(1, 10**6),
        st.sampled_from([READY, TIMER]),
        st.integers(0, 200),
        st.integers(0, 10**5),
    ),
    max_size=50,
).map(
    lambda items: tuple(
        Decision(step, kind, choice, actor)
        for step, kind, choice, actor in sorted(items, key=lambda item: item[0])
    )
)


@given(decision_lists, st.integers(1, 64), st.integers(0, 10**7), st.integers(1, 10**9))
def test_token_round_trips(
    decisions: tuple[Decision, ...], window: int, stall: int, max_steps: int
) -> None:
    settings = Settings(window=window, stall_us=stall, max_steps=max_steps)
    token = encode_token(settings, decisions)
    assert token.startswith("il2.")
    assert decode_token(token) == (settings, decisions)


@given(decision_lists)
def test_a_decision_log_reads_as_the_tuple_of_its_decisions(
    decisions: tuple[Decision, ...],
) -> None:
    log = DecisionLog([field for decision in decisions for field in decision])
    assert len(log) == len(decisions)
    assert log == decisions
    assert hash(log) == hash(decisions)
    assert tuple(log) == decisions
    assert list(log[::-1]) == list(decisions[::-1])
    assert encode_token(Settings(), log) == encode_token(Settings(), decisions)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (
            "il9.abc",
            "replay token 'il9.abc' does not start with 'il2.' (found 'il9'): it was made by "
            "another version of interlace or is not a replay token; re-run the exploration "
            "with this version to get a new token",
        ),
        (
            "il2.AAAA",
            "replay token 'il2.AAAA' is damaged: its characters do not unpack to a schedule: "
            "some were changed or left out. Copy the whole token, on one line, from the "
            "failure report",
        ),
    ],
)
def test_bad_tokens_are_refused_with_what_to_do(token: str, message: str) -> None:
    with pytest.raises(ReplayTokenError) as info:
        decode_token(token)
    assert str(info.value) == message


# A token whose text is two characters past a multiple of four: cut by one, no token has its length.
_TOKEN = encode_token(Settings(max_steps=1000), (Decision(4, READY, 1, 2),) * 3)
assert len(_TOKEN.partition(".")[2]) % 4 == 2


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        (_TOKEN[:-6], "it ends too early: characters are missing at its end"),
        (_TOKEN[:-1], "no token has its length: a character is missing or left over"),
        (_TOKEN[:12] + "\n" + _TOKEN[12:], "it contains whitespace: it was wrapped across lines"),
        (_TOKEN[:12] + "!" + _TOKEN[13:], "it contains '!', which no token contains"),
        ("il2.", "nothing follows 'il2.'"),
    ],
    ids=["cut", "one-short", "wrapped", "mistyped", "empty"],
)
def test_a_damaged_token_says_what_is_wrong_with_it(token: str, problem: str) -> None:
    with pytest.raises(ReplayTokenError) as info:
        decode_token(token)
    assert str(info.value).startswith(f"replay token {token!r} is damaged: {problem}")


def test_a_token_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(ReplayTokenError, match="a replay token is a str"):
        decode_token(12345)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["random", "pct", "delay", "exhaustive", "auto"])
def test_strategies_are_deterministic_for_a_seed(name: str) -> None:
    def tokens() -> list[str]:
        backend = lost_update_hidden()
        strategy = make_strategy(name, seed=11)
        out = []
        for _ in range(30):
            chooser = strategy.next_chooser()
            if chooser is None:
                break
            result = backend.run(chooser)
            strategy.finished(chooser, result.steps)
            out.append(encode_token(backend.settings, result.decisions))
        return out

    assert tokens() == tokens()


def test_different_seeds_give_different_random_schedules() -> None:
    def first_tokens(seed: int) -> list[str]:
        backend = ToyBackend([[noop] * 5 for _ in range(3)], lambda state: False)
        strategy = RandomWalkStrategy(seed)
        return [
            encode_token(backend.settings, backend.run(strategy.next_chooser()).decisions)
            for _ in range(5)
        ]

    assert first_tokens(1) != first_tokens(2)


def test_pct_and_sparse_delays_find_the_hidden_bug() -> None:
    for strategy in (PCTStrategy(seed=5, depth=2), SparseDelayStrategy(seed=5)):
        exploration = explore_backend(
            lost_update_hidden(), strategy, max_schedules=500, seed=5, hints=HINTS
        )
        assert exploration.failure is not None, strategy.describe()
        assert exploration.failure.deviations == 1


def _record(
    step: int, suspended: str = "app.py:6 await asyncio.sleep(0)", deviation: str = ""
) -> StepRecord:
    return StepRecord(step, "main", "resumed", "app.py:6", suspended, deviation)


def _report_lines(trace: Sequence[StepRecord], steps: int) -> list[str]:
    run = RunResult(
        kind="hang",
        exception=None,
        detail="Still running.",
        steps=steps,
        decisions=(),
        trace=tuple(trace),
    )
    report = format_report(
        run, run, steps, "fails under stock order", "il2.x", ReplayHints(api="app.main")
    )
    return report.split("\n\n")[0].splitlines()[1:]


def test_a_run_of_identical_steps_is_one_step_and_a_count() -> None:
    trace = [_record(1, "app.py:3 await start()"), *(_record(step) for step in range(2, 9))]
    assert _report_lines(trace, 8) == [
        "  1. main: resumed at app.py:6 -> app.py:3 await start()",
        "  2. main: resumed at app.py:6 -> app.py:6 await asyncio.sleep(0)",
        "     ... the same step 6 more times, to step 8 ...",
    ]


def test_three_identical_steps_and_deviations_are_shown_as_they_are() -> None:
    three = [_record(step) for step in range(1, 4)]
    assert len(_report_lines(three, 3)) == 3
    # A deviation is where the schedule leaves stock order: never folded into a count.
    deviating = [*three, _record(4, deviation="postponed"), _record(5), _record(6)]
    assert len(_report_lines(deviating, 6)) == 6


def _in(step: int, *packages: str, deviation: str = "") -> StepRecord:
    """A step that starts and stops in library code."""
    return StepRecord(
        step, "Task-2", "resumed", "lib.py:1", f"lib.py:{step}", deviation, tuple(packages)
    )


def test_a_run_of_library_steps_is_one_line_naming_the_packages() -> None:
    trace = [
        _record(1),
        _in(2, "langgraph"),
        _in(3, "asyncio"),
        _in(4),
        _in(5, "langgraph", "asyncio"),
        _record(6),
    ]
    assert _report_lines(trace, 6) == [
        "  1. main: resumed at app.py:6 -> app.py:6 await asyncio.sleep(0)",
        "     ... steps 2-5: 4 steps that start and stop in library code (asyncio, langgraph) ...",
        "  6. main: resumed at app.py:6 -> app.py:6 await asyncio.sleep(0)",
    ]


def test_library_steps_around_a_deviation_and_at_the_end_are_shown() -> None:
    # Three library steps read as they are; the step before a deviation shows where the
    # schedule leaves stock order; the last is where the run failed.
    few = [_record(1), *(_in(step, "asyncio") for step in range(2, 5)), _record(5)]
    assert len(_report_lines(few, 5)) == 5
    deviating = [
        *(_in(step, "asyncio") for step in range(1, 6)),
        _in(6, "asyncio", deviation="postponed"),
        *(_in(step, "asyncio") for step in range(7, 12)),
    ]
    lines = _report_lines(deviating, 11)
    assert [line.split(".")[0].strip() for line in lines] == ["", "5", "6", "", "11"]
    assert "steps 1-4: 4 steps" in lines[0]
    assert "steps 7-10: 4 steps" in lines[3]


@pytest.mark.parametrize(
    ("steps", "shrunk_from", "text"),
    [
        (7, 8, "7 steps, shrunk from 8"),
        (1, 1, "1 step"),
        (39, 39, "39 steps"),
        # Fewer deviations may take longer: "25 steps, shrunk from 24" would read as a typo.
        (25, 24, "25 steps"),
    ],
)
def test_a_report_says_what_it_was_shrunk_from_only_when_shrinking_took_steps_away(
    steps: int, shrunk_from: int, text: str
) -> None:
    assert _size(steps, shrunk_from) == text


def _first_steps(actors: int, steps: int, check: Callable[[dict[str, int]], bool]) -> ToyBackend:
    """Each actor notes the clock at its first step (``first<a>``); every step ticks it."""

    def tick(actor: int) -> Op:
        def op(state: dict[str, int]) -> None:
            clock = state.get("clock", 0)
            state.setdefault(f"first{actor}", clock)
            state["clock"] = clock + 1

        return op

    return ToyBackend([[tick(a)] * steps for a in range(actors)], check)


@given(
    actors=st.integers(3, 9),
    steps=st.integers(1, 2),
    inversions=st.lists(
        st.tuples(st.integers(0, 8), st.integers(0, 8)).filter(lambda p: p[0] < p[1]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    seed=st.integers(0, 2**16),
)
def test_shrinking_any_failure_keeps_it_and_never_adds_deviations(
    actors: int, steps: int, inversions: list[tuple[int, int]], seed: int
) -> None:
    # Fails when each pair's later actor started before its earlier one.
    pairs = [(a, b) for a, b in inversions if b < actors]
    assume(pairs)

    def check(state: dict[str, int]) -> bool:
        return all(state[f"first{b}"] < state[f"first{a}"] for a, b in pairs)

    backend = _first_steps(actors, steps, check)
    strategy = RandomWalkStrategy(seed=seed)
    for _ in range(50):
        found = backend.run(strategy.next_chooser())
        if found.kind is not None:
            break
    else:
        assume(False)
    best, _ = shrink(backend, found, max_runs=200)
    assert best.same_failure(found)
    assert len(best.decisions) <= len(found.decisions)
    again = backend.run(ReplayChooser(best.decisions, strict=True))
    assert again.kind == "exception"
    assert again.decisions == best.decisions


class StockWhenEarlier:
    """Fails with deviations at steps 5 and 9. Run a step earlier, the second one's choice is
    what stock order does there (not a deviation), and the run still fails."""

    settings = Settings(backend="asyncio")

    def run(self, chooser: Chooser, *, record: bool = False) -> RunResult:
        decisions: list[Decision] = []
        at_eight = False
        for step in range(1, 12):
            choice = chooser.choose(step, [1, 2, 3], False)
            if choice and step == 8:
                at_eight = True
            elif choice:
                decisions.append(Decision(step, READY, choice, choice + 1))
        steps = {d.step for d in decisions}
        failed = 5 in steps and (9 in steps or at_eight)
        return RunResult(
            kind="exception" if failed else None,
            exception=AssertionError() if failed else None,
            detail="",
            steps=11,
            decisions=tuple(decisions),
        )


def test_moving_a_deviation_earlier_may_leave_fewer_deviations() -> None:
    backend = StockWhenEarlier()
    found = backend.run(
        ReplayChooser([Decision(5, READY, 1, 2), Decision(9, READY, 1, 2)], strict=True)
    )
    assert found.kind == "exception"
    # Before, shrinking read the moved deviation back by its index and raised IndexError.
    best, _ = shrink(backend, found)
    assert best.same_failure(found)
    assert best.decisions == (Decision(5, READY, 1, 2),)


def test_a_version_1_token_is_refused_with_what_to_do_instead_of_being_misread() -> None:
    old = "il1." + _TOKEN.partition(".")[2]
    with pytest.raises(ReplayTokenError) as info:
        decode_token(old)
    message = str(info.value)
    assert message.startswith(f"replay token {old!r} is a version-1 token: it was made by an")
    assert message.endswith(
        "Re-run the exploration with this version of interlace to get a new token"
    )
