"""interlace.stateful: scenarios drawn by Hypothesis, raced by interlace, checked for
linearizability."""

from __future__ import annotations

import pathlib
import re
import unittest
from typing import Any

import pytest
import stateful_machines as machines
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from hypothesis.stateful import rule

from interlace import stateful
from interlace.errors import ConfigError
from interlace.stateful import Call, ConcurrentStateMachine, NotLinearizableError, Scenario

QUIET = settings(
    database=None,
    deadline=None,
    derandomize=True,
    max_examples=50,
    # As a machine's own settings: without the explain phase, whose tracer ran every
    # shrinking step (and all of interlace's code in it) under a LINE hook.
    phases=[phase for phase in Phase if phase is not Phase.explain],
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
)


def run(machine: type[ConcurrentStateMachine], options: settings = QUIET) -> None:
    case: Any = machine.TestCase
    case.settings = options
    case("runTest").runTest()


def failure_of(machine: type[ConcurrentStateMachine], options: settings = QUIET) -> Any:
    with pytest.raises(NotLinearizableError) as caught:
        run(machine, options)
    return caught.value


@pytest.fixture(scope="module")
def counter_failure() -> Any:
    """The unlocked counter's failure, found once for the tests that read it."""
    return failure_of(machines.UnlockedCounterMachine)


def test_an_unlocked_async_counter_fails_with_a_shrunk_two_branch_scenario(
    counter_failure: Any,
) -> None:
    error = counter_failure
    assert error.scenario == Scenario(
        prefix=(),
        branches=((Call("A1", "increment", ()),), (Call("B1", "increment", ()),)),
        suffix=(),
    )


def test_a_locked_async_counter_passes() -> None:
    run(machines.LockedCounterMachine)


def test_the_report_explains_why_no_linearization_explains_the_results(
    counter_failure: Any,
) -> None:
    message = str(counter_failure)
    assert (
        "branch A            | branch B\n"
        "--------------------+--------------------\n"
        "A1 increment() -> 1 | B1 increment() -> 1\n"
    ) in message
    assert (
        f"{stateful._MSG_NO_LINEARIZATION}: 2 order(s) of the concurrent calls keep each "
        "branch's order and the run's real-time order (0 more are ruled out"
    ) in message
    assert "  A1 B1: B1 increment() returned 1 in the run, returned 2 in this order\n" in message
    assert "  B1 A1: A1 increment() returned 1 in the run, returned 2 in this order\n" in message
    assert "Failing schedule (" in message
    assert "Label: fails under stock order" in message


def test_the_printed_token_replays_the_same_failure(counter_failure: Any) -> None:
    error = counter_failure
    lines = re.findall(r"UnlockedCounterMachine\.replay\(error\.scenario, '([^']+)'\)", str(error))
    assert lines == [error.token]
    with pytest.raises(NotLinearizableError) as again:
        machines.UnlockedCounterMachine.replay(error.scenario, lines[0])
    assert again.value.token == error.token


def test_the_failing_scenario_passes_once_the_object_is_fixed(counter_failure: Any) -> None:
    machines.LockedCounterMachine.check_scenario(counter_failure.scenario)
    assert (
        machines.LockedCounterMachine.replay(counter_failure.scenario, counter_failure.token)
        is None
    )


def test_a_threaded_get_or_create_cache_without_a_lock_fails() -> None:
    error = failure_of(machines.UnlockedCacheMachine)
    assert error.scenario == Scenario(
        prefix=(),
        branches=(
            (Call("A1", "get_or_create", (("key", "a"),)),),
            (Call("B1", "get_or_create", (("key", "a"),)),),
        ),
        suffix=(),
    )
    message = str(error)
    # Objects compared by identity are named, not shown by address.
    assert (
        "A1 get_or_create(key='a') -> <object #1> | B1 get_or_create(key='a') -> <object #2>"
    ) in message
    assert (
        "  A1 B1: B1 get_or_create(key='a') returned <object #2> in the run, returned "
        "<object #1> in this order\n"
    ) in message
    assert "Label: needs thread preemption" in message
    # The runner's own bookkeeping gets no schedule points: only the machine's code does.
    schedule = message[message.index("Failing schedule (") :]
    assert "interlace/stateful.py" not in schedule


def test_a_threaded_get_or_create_cache_with_a_lock_passes() -> None:
    run(machines.LockedCacheMachine)


def test_an_unlocked_map_fails_against_a_dict_model() -> None:
    error = failure_of(machines.UnlockedMapMachine)
    assert [len(branch) for branch in error.scenario.branches] == [1, 1]
    assert {call.rule for branch in error.scenario.branches for call in branch} == {"setdefault"}


def test_a_locked_map_passes_against_a_dict_model() -> None:
    run(machines.LockedMapMachine)


def test_a_machine_that_disagrees_with_its_model_one_call_at_a_time_fails() -> None:
    message = str(failure_of(machines.OffByOneMapMachine))
    assert "get(key='k') returned 0 in the run, returned None in this order" in message


def test_a_model_without_a_rules_method_is_a_config_error() -> None:
    class Incomplete:
        def get(self, key: str) -> None:
            return None

    class Machine(machines.LockedMapMachine, model=Incomplete):
        pass

    with pytest.raises(ConfigError) as caught:
        run(Machine)
    assert str(caught.value) == stateful._MSG_MODEL_MISSING.format(
        model="test_a_model_without_a_rules_method_is_a_config_error.<locals>.Incomplete",
        machine="test_a_model_without_a_rules_method_is_a_config_error.<locals>.Machine",
        rule="setdefault",
    )


def test_an_invariant_that_fails_after_the_branches_raises_its_own_error() -> None:
    with pytest.raises(AssertionError) as caught:
        run(machines.CountedIncrementsMachine)
    assert not isinstance(caught.value, NotLinearizableError)
    assert caught.value.args == ((1, 2),)
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "A1 increment() | B1 increment()" in notes
    assert "Failing schedule (" in notes


def test_the_same_seed_gives_the_same_report() -> None:
    options = settings(QUIET, derandomize=False)

    @seed(1234)
    class Seeded(machines.UnlockedCounterMachine):
        pass

    first, second = (str(failure_of(Seeded, options)) for _ in range(2))
    assert first == second


def test_derandomized_runs_give_the_same_report() -> None:
    first, second = (str(failure_of(machines.UnlockedCacheMachine)) for _ in range(2))
    assert first == second


def test_the_failing_example_is_saved_and_replayed_first() -> None:
    database = InMemoryExampleDatabase()
    options = settings(QUIET, database=database, derandomize=False)
    failure_of(machines.UnlockedCounterMachine, options)
    assert database.data
    checked: list[Scenario] = []

    class Counting(machines.UnlockedCounterMachine):
        @classmethod
        def check_scenario(cls, scenario: Scenario) -> None:
            checked.append(scenario)
            super().check_scenario(scenario)

    # The database is keyed by machine: a machine of another name starts afresh.
    Counting.__qualname__ = machines.UnlockedCounterMachine.__qualname__
    Counting.__module__ = machines.UnlockedCounterMachine.__module__
    error = failure_of(Counting, settings(options, phases=[Phase.reuse]))
    # Only the saved example runs (Hypothesis runs it once more to report it).
    assert checked
    assert all(scenario == error.scenario for scenario in checked)


def test_an_order_that_breaks_real_time_does_not_explain_a_run() -> None:
    a, b = Call("A1", "put", ()), Call("B1", "put", ())
    scenario = Scenario(prefix=(), branches=((a,), (b,)), suffix=())
    replays = [
        stateful._Replay(
            ("A1", "B1"), {"A1": stateful._Result(1), "B1": stateful._Result(2)}, None
        ),
        stateful._Replay(
            ("B1", "A1"), {"B1": stateful._Result(1), "A1": stateful._Result(2)}, None
        ),
    ]
    checker = stateful._Checker(scenario, replays)
    results = {"A1": stateful._Result(2), "B1": stateful._Result(1)}
    overlapping = {"A1": (0, 3), "B1": (1, 2)}
    assert checker.check(results, overlapping) is None
    a_first = {"A1": (0, 1), "B1": (2, 3)}
    why = checker.check(results, a_first)
    assert why is not None
    assert "1 order(s) of the concurrent calls" in why
    assert "(1 more are ruled out because a call in them returned before another began)" in why


@given(st.data())
@settings(max_examples=30, deadline=None)
def test_branches_draw_only_from_the_prefix_and_their_own_bundle_values(data: Any) -> None:
    scenario = data.draw(machines.RegistryMachine.scenarios())
    defined = {call.var for call in scenario.prefix if call.var}
    for branch in scenario.branches:
        own = set(defined)
        for call in branch:
            assert {v.name for _, v in call.arguments if isinstance(v, stateful._Var)} <= own
            if call.var:
                own.add(call.var)


def test_a_machine_with_bundles_passes_when_its_object_is_correct() -> None:
    run(machines.RegistryMachine)


@given(st.data())
@settings(max_examples=30, deadline=None)
def test_a_rule_is_drawn_only_where_its_precondition_holds_in_drawing_order(data: Any) -> None:
    scenario = data.draw(machines.StockMachine.scenarios())
    stock = 0
    for call in scenario.calls():
        if call.rule == "take":
            assert stock > 0
            stock -= 1
        else:
            stock += 1


def test_class_keywords_set_the_settings() -> None:
    class Three(machines.LockedCounterMachine, branches=3, max_branch_calls=1, max_schedules=5):
        pass

    assert (Three.branches, Three.max_branch_calls, Three.max_schedules) == (3, 1, 5)

    @given(Three.scenarios())
    @settings(max_examples=5, database=None)
    def check(scenario: Scenario) -> None:
        assert [len(branch) for branch in scenario.branches] == [1, 1, 1]

    check()


def test_an_unknown_class_keyword_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^branch=2 \(class keyword of .*Bad\) is not a setting"):

        class Bad(machines.LockedCounterMachine, branch=2):
            pass


@pytest.mark.parametrize(("name", "value"), [("branches", 0), ("max_schedules", "5")])
def test_a_bad_setting_is_a_config_error_naming_it(name: str, value: object) -> None:
    machine: Any = type("Bad", (machines.LockedCounterMachine,), {name: value})
    with pytest.raises(ConfigError) as caught:
        machine.scenarios()
    low, what = stateful._SETTINGS[name]
    assert str(caught.value) == stateful._MSG_BAD_SETTING.format(
        name=name, value=value, source="attribute of Bad", low=low, what=what
    )


def test_a_machine_without_rules_is_a_config_error() -> None:
    class Empty(ConcurrentStateMachine):
        pass

    with pytest.raises(ConfigError) as caught:
        Empty.scenarios()
    assert str(caught.value) == stateful._MSG_NO_RULES.format(
        machine="test_a_machine_without_rules_is_a_config_error.<locals>.Empty"
    )


def test_the_test_case_is_a_unittest_case_per_machine() -> None:
    first = machines.LockedCounterMachine.TestCase
    assert issubclass(first, unittest.TestCase)
    assert first is machines.LockedCounterMachine.TestCase
    assert first is not machines.UnlockedCounterMachine.TestCase
    assert first.__qualname__ == "LockedCounterMachine.TestCase"


def test_a_rule_that_raises_is_a_result_not_a_failure() -> None:
    class Raising(ConcurrentStateMachine):
        def __init__(self) -> None:
            self.items: list[int] = []

        @rule()  # type: ignore[arg-type]  # Hypothesis's own rule: its hints expect None
        def pop(self) -> int:
            return self.items.pop()

    run(Raising)


PYTEST_FILE = """
from hypothesis import settings
import stateful_machines as machines

TestLocked = machines.LockedCounterMachine.TestCase
TestLocked.settings = settings(max_examples=5, database=None, deadline=None)
TestUnlocked = machines.UnlockedCounterMachine.TestCase
TestUnlocked.settings = settings(max_examples=50, database=None, deadline=None)
"""


def test_pytest_collects_the_test_case(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_machines=PYTEST_FILE)
    machines_source = pathlib.Path(machines.__file__).read_text(encoding="utf-8")
    pytester.makepyfile(stateful_machines=machines_source)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*NotLinearizableError: UnlockedCounterMachine*"])


def test_a_rule_that_raises_while_a_scenario_is_drawn_leaves_the_draw_going() -> None:
    run(machines.StackMachine)


def test_a_deadlock_between_branches_fails_with_the_schedule_report() -> None:
    with pytest.raises(AssertionError) as caught:
        run(machines.TwoLocksMachine)
    message = str(caught.value)
    assert not isinstance(caught.value, NotLinearizableError)
    assert stateful._MSG_SCHEDULE_FAILURE.format(kind="deadlock") in message
    assert "A1 backward() | B1 forward()" in message or "A1 forward() | B1 backward()" in message


def test_an_initializer_runs_first_and_a_model_may_lack_it() -> None:
    @given(machines.AccountMachine.scenarios())
    @settings(max_examples=10, database=None)
    def check(scenario: Scenario) -> None:
        assert [call.rule for call in scenario.prefix][:1] == ["open_with_ten"]

    check()
    run(machines.AccountMachine)


def test_instrument_reaches_the_exploration() -> None:
    class Instrumented(machines.LockedCacheMachine, instrument=("interlace.harness",)):
        pass

    with pytest.raises(ConfigError, match=r"instrument=.*'interlace\.harness'"):
        run(Instrumented)
