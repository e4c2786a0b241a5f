"""``@given`` with ``@pytest.mark.interlace``: Hypothesis runs as usual and each example it
tries is explored on its own; Hypothesis's own errors stay Hypothesis's.

pytester in a subprocess, output matched against the plugin's message constants.
"""

from __future__ import annotations

import os
import re

import pytest

from interlace.harness import pytest_plugin as plugin

_QUIET = ("-p", "no:benchmark", "-p", "no:detangle", "-p", "no:cacheprovider")

INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

TESTS = """
import asyncio
import threading

import pytest
from hypothesis import given, settings, strategies as st


@pytest.mark.interlace(max_schedules=20)
@settings(deadline=None, max_examples=40)
@given(st.integers(0, 10))
async def test_async_race(n):
    count = [0]

    async def increment():
        seen = count[0]
        if n >= 3:
            await asyncio.sleep(0)
        count[0] = seen + 1

    await asyncio.gather(increment(), increment())
    assert count[0] == 2


@pytest.mark.interlace(max_schedules=20)
@settings(deadline=None, max_examples=20)
@given(st.integers(0, 10))
def test_thread_race(n):
    lock = threading.Lock() if n < 4 else None
    count = [0]

    def increment():
        if lock is None:
            seen = count[0]
            count[0] = seen + 1
        else:
            with lock:
                seen = count[0]
                count[0] = seen + 1

    threads = [threading.Thread(target=increment) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert count[0] == 2


@pytest.mark.interlace(max_schedules=5)
@settings(deadline=None, max_examples=10)
@given(st.integers(0, 10))
async def test_async_passes(n):
    await asyncio.sleep(0)
    assert n >= 0


@pytest.mark.interlace(max_schedules=5)
@given(st.integers(0, 10).filter(lambda n: False))
async def test_unsatisfiable(n):
    await asyncio.sleep(0)
"""


@pytest.fixture
def outcome(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makeini(INI)
    pytester.makepyfile(test_given=TESTS)
    return pytester.runpytest_subprocess(*_QUIET, "-rA", timeout=300)


def _explored(nodeid: str, outcome: str) -> str:
    line = plugin.MSG_GIVEN_EXPLORED.format(
        nodeid=nodeid, examples="*", schedules="*", seed="*", outcome=outcome
    )
    return "*" + line.replace("*s ", "* ").replace("*s in", "* in")


def test_each_example_of_an_async_given_test_is_explored_and_the_race_shrinks(
    outcome: pytest.RunResult,
) -> None:
    outcome.assert_outcomes(passed=1, failed=3)
    text = outcome.stdout.str()
    assert "doesn't know how to run async test functions" not in text
    outcome.stdout.fnmatch_lines([_explored("test_given.py::test_async_race", "failed")])
    # Hypothesis shrank the example to the smallest n that awaits between read and write.
    section = text[text.index("_ test_async_race _") : text.index("_ test_thread_race _")]
    assert re.search(r"^E\s+n=3,$", section, re.M), section
    assert "--interlace-replay=il2." in section


def test_each_example_of_a_threaded_given_test_is_explored(outcome: pytest.RunResult) -> None:
    text = outcome.stdout.str()
    outcome.stdout.fnmatch_lines([_explored("test_given.py::test_thread_race", "failed")])
    examples = re.search(r"test_thread_race: (\d+) examples? explored", text)
    assert examples is not None
    assert int(examples.group(1)) > 1
    section = text[text.index("_ test_thread_race _") : text.index("_ test_unsatisfiable _")]
    assert re.search(r"^E\s+n=4,$", section, re.M), section


def test_a_passing_given_test_passes_with_its_examples_counted(outcome: pytest.RunResult) -> None:
    outcome.stdout.fnmatch_lines([_explored("test_given.py::test_async_passes", "passed")])


def test_a_hypothesis_error_is_reported_as_hypothesis_s_not_as_a_schedule(
    outcome: pytest.RunResult,
) -> None:
    text = outcome.stdout.str()
    # Up to the summary, which repeats every failure's message in full under CI=1.
    section = text[text.index("_ test_unsatisfiable _") : text.index("short test summary info")]
    assert "hypothesis.errors.Unsatisfiable" in section
    assert "interlace: failing schedule" not in section
    assert "interlace found" not in section
    outcome.stdout.fnmatch_lines(
        ["*test_given.py::test_unsatisfiable: 0 examples explored, 0 schedules in all*"]
    )


EXPLAINED = """
import asyncio

import pytest
from hypothesis import given, settings, strategies as st


@pytest.mark.interlace(max_schedules=20)
@settings(deadline=None, max_examples=40, database=None)
@given(st.integers(0, 10))
async def test_async_race(n):
    count = [0]

    async def increment():
        seen = count[0]
        if n >= 3:
            await asyncio.sleep(0)  # the line only failing examples run
        count[0] = seen + 1

    await asyncio.gather(increment(), increment())
    assert count[0] == 2
"""


def test_hypothesis_s_explanation_names_the_test_s_lines_and_none_of_interlace_s(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_explained=EXPLAINED)
    result = pytester.runpytest_subprocess(*_QUIET, timeout=300)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    explanation = text[text.index("Explanation:") : text.index("short test summary info")]
    lines = [line for line in explanation.splitlines() if ".py:" in line]
    assert any("test_explained.py:" in line for line in lines), explanation
    assert not [line for line in lines if f"{os.sep}interlace{os.sep}" in line], explanation


def test_the_printed_replay_line_replays_the_failing_example(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_given=TESTS)
    first = pytester.runpytest_subprocess(*_QUIET, "test_given.py::test_async_race", timeout=300)
    token = re.search(r"--interlace-replay=(\S+)", first.stdout.str())
    assert token is not None
    again = pytester.runpytest_subprocess(
        *_QUIET, "-rA", "test_given.py::test_async_race", f"--interlace-replay={token.group(1)}"
    )
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*assert 1 == 2*", "*n=3,*"])


def test_pytest_asyncio_auto_mode_leaves_the_examples_to_interlace(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI + "asyncio_mode = auto\n")
    pytester.makepyfile(test_given=TESTS)
    result = pytester.runpytest_subprocess(
        *_QUIET, "-rA", "test_given.py::test_async_race", "test_given.py::test_async_passes"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            _explored("test_given.py::test_async_race", "failed"),
            _explored("test_given.py::test_async_passes", "passed"),
        ]
    )


def test_given_tests_run_the_same_under_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeini(INI)
    pytester.makepyfile(test_given=TESTS)
    result = pytester.runpytest_subprocess(*_QUIET, "-n", "2", "-rA", timeout=300)
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random(
        [
            _explored("test_given.py::test_async_race", "failed"),
            _explored("test_given.py::test_thread_race", "failed"),
            _explored("test_given.py::test_async_passes", "passed"),
        ]
    )
    assert "doesn't know how to run async test functions" not in result.stdout.str()


ANYIO_TESTS = """
import anyio
import pytest
from hypothesis import given, settings, strategies as st


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.interlace(max_schedules=20)
@settings(deadline=None, max_examples=40)
@given(n=st.integers(0, 10))
async def test_anyio_race(n):
    count = [0]

    async def increment():
        seen = count[0]
        if n >= 3:
            await anyio.sleep(0)
        count[0] = seen + 1

    async with anyio.create_task_group() as group:
        group.start_soon(increment)
        group.start_soon(increment)
    assert count[0] == 2


@pytest.mark.anyio
@pytest.mark.interlace(max_schedules=5)
@settings(deadline=None, max_examples=10)
@given(n=st.integers(0, 10))
async def test_anyio_passes(n):
    await anyio.sleep(0)
    assert n >= 0
"""


def _anyio_given(pytester: pytest.Pytester, *arguments: str) -> pytest.RunResult:
    pytest.importorskip("anyio")
    pytester.makeini(INI)
    pytester.makepyfile(test_given=TESTS, test_anyio_given=ANYIO_TESTS)
    return pytester.runpytest_subprocess(*_QUIET, "-rA", *arguments, timeout=300)


def test_anyio_marked_given_tests_are_explored_per_example_by_interlace(
    pytester: pytest.Pytester,
) -> None:
    result = _anyio_given(pytester, "test_anyio_given.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            _explored("test_anyio_given.py::test_anyio_race", "failed"),
            _explored("test_anyio_given.py::test_anyio_passes", "passed"),
            "*n=3*",
        ]
    )
    assert "doesn't know how to run async test functions" not in result.stdout.str()


def test_given_tests_with_anyio_and_pytest_asyncio_auto_mode_run_the_same_under_xdist(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("xdist")
    pytester.makeini(INI + "asyncio_mode = auto\n")
    result = _anyio_given(pytester, "-n", "2")
    result.assert_outcomes(passed=2, failed=4)
    result.stdout.fnmatch_lines_random(
        [
            _explored("test_given.py::test_async_race", "failed"),
            _explored("test_given.py::test_thread_race", "failed"),
            _explored("test_given.py::test_async_passes", "passed"),
            _explored("test_anyio_given.py::test_anyio_race", "failed"),
            _explored("test_anyio_given.py::test_anyio_passes", "passed"),
        ]
    )
    assert "doesn't know how to run async test functions" not in result.stdout.str()
