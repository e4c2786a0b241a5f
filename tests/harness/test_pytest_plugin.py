"""The pytest plugin, run the way users run it: pytester in a subprocess.

Output is matched against the plugin's own message constants (pytest-timeout's style), so the
tests and the plugin cannot drift apart. Settings validation runs in-process through
``pytester.parseconfigure``, which exercises the same hook without a subprocess per case.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from fnmatch import fnmatch

import pytest

import interlace

# pytester restores sys.modules after each test; importing the harness before any test keeps
# this process on one copy of it (tests/harness/test_threads_plugin_findings.py says why).
import interlace.harness.api
from interlace._core.schedule import Settings, encode_token
from interlace.harness import api
from interlace.harness import pytest_plugin as plugin
from interlace.harness._runtime import MSG_STALL_TIMEOUT

# Plugins installed for benchmarks; unrelated to what these tests check and slow to load.
_QUIET: tuple[str, ...] = ("-p", "no:benchmark", "-p", "no:detangle")
_QUIET += ("-p", "no:hypothesispytest", "-p", "no:cacheprovider")

INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

BUGS = """
import asyncio

import pytest


@pytest.mark.interlace(seed=7)
async def test_lost_update():
    count = [0]

    async def increment():
        seen = count[0]
        await asyncio.sleep(0)
        count[0] = seen + 1

    task = asyncio.create_task(increment())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await increment()
    await task
    assert count[0] == 2
"""

FIXED = """
import asyncio

import pytest


@pytest.mark.interlace(seed=7)
async def test_lost_update():
    count = [0]
    lock = asyncio.Lock()

    async def increment():
        async with lock:
            seen = count[0]
            await asyncio.sleep(0)
            count[0] = seen + 1

    task = asyncio.create_task(increment())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await increment()
    await task
    assert count[0] == 2
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*_QUIET, *args)


def pattern(template: str, **known: object) -> str:
    """A constant as an fnmatch pattern: the given fields filled in, every other field ``*``."""
    escaped = template.replace("[", "[[]")
    fields = {name: "*" for name in re.findall(r"{(\w+)[^}]*}", template)}
    fields.update({k: str(v) for k, v in known.items()})
    return re.sub(r"{(\w+)[^}]*}", lambda m: fields[m.group(1)], escaped)


def replay_line(output: str, nodeid: str) -> list[str]:
    """The printed ``pytest '<nodeid>' --interlace-replay=TOKEN`` line, as arguments."""
    match = re.search(rf"pytest '({re.escape(nodeid)})' --interlace-replay=(il2\.[\w-]+)", output)
    assert match is not None, output
    return [match.group(1), f"--interlace-replay={match.group(2)}"]


def test_the_printed_replay_line_fails_the_same_way_until_the_bug_is_fixed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bank=BUGS)
    found = run(pytester)
    found.assert_outcomes(failed=1)
    found.stdout.fnmatch_lines(
        [
            ">       assert count[[]0] == 2",
            "E       assert 1 == 2",
            "E       interlace: failing schedule (*), needs await latency.",
            "E           pytest 'test_bank.py::test_lost_update' --interlace-replay=il2.*",
            "*- Captured interlace call -*",
            pattern(plugin.MSG_EXPLORED, nodeid="test_bank.py::test_lost_update", seed=7),
            "Failing schedule (* step*):",
            "Label: needs await latency (1 deviation from stock order)",
        ]
    )
    args = replay_line(found.stdout.str(), "test_bank.py::test_lost_update")

    replayed = run(pytester, *args)
    replayed.assert_outcomes(failed=1)
    replayed.stdout.fnmatch_lines(
        [
            "E       assert 1 == 2",
            "*= interlace =*",
            plugin.MSG_REPLAY_FAILED.format(
                nodeid="test_bank.py::test_lost_update", kind="exception"
            ),
        ]
    )
    # The same schedule, step for step: the report's numbered steps are identical.
    assert _schedule(replayed.stdout.str()) == _schedule(found.stdout.str())

    pytester.makepyfile(test_bank=FIXED)
    fixed = run(pytester, *args)
    fixed.assert_outcomes(passed=1)
    fixed.stdout.fnmatch_lines(
        [plugin.MSG_REPLAY_PASSED.format(nodeid="test_bank.py::test_lost_update", cause="")]
    )


def _schedule(output: str) -> list[str]:
    return re.findall(r"^ +\d+\. .*$", output, flags=re.MULTILINE)


def test_a_deadlock_fails_with_the_report_and_passing_tests_show_schedules_and_seed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_locks="""
        import asyncio

        import pytest


        @pytest.fixture
        def names():
            return ("a", "b")


        @pytest.mark.interlace(seed=3)
        async def test_lock_order(names):
            first, second = asyncio.Lock(), asyncio.Lock()

            async def one():
                async with first:
                    await asyncio.sleep(0)
                    async with second:
                        pass

            async def two():
                async with second:
                    await asyncio.sleep(0)
                    async with first:
                        pass

            await asyncio.gather(one(), two())


        @pytest.mark.interlace(seed=4, max_schedules=40, strategy="random")
        async def test_with_a_lock(names):
            lock = asyncio.Lock()
            seen = []

            async def append(name):
                async with lock:
                    await asyncio.sleep(0)
                    seen.append(name)

            await asyncio.gather(*(append(name) for name in names))
            assert sorted(seen) == ["a", "b"]


        @pytest.mark.interlace
        async def test_settings_from_the_command_line():
            await asyncio.sleep(0)
        """
    )
    # The markers' settings beat the command line's; the unmarked knobs come from it.
    result = run(pytester, "-v", "-rP", "--interlace-seed=9", "--interlace-max-schedules=2")
    result.assert_outcomes(failed=1, passed=2)
    header = plugin.MSG_FOUND.format(
        article="a",
        kind="deadlock",
        nodeid="test_locks.py::test_lock_order",
        schedules="1 schedule",
        seed=3,
    )
    result.stdout.fnmatch_lines(
        [
            header,
            "Failing schedule (* step*):",
            "Deadlock:",
            "    task 'Task-2' at test_locks.py:* waits on Lock second held by task 'Task-3'",
            "    task 'Task-3' at test_locks.py:* waits on Lock first held by task 'Task-2'",
            "  pytest 'test_locks.py::test_lock_order' --interlace-replay=il2.*",
        ]
    )
    assert "All traceback entries are hidden" not in result.stdout.str()
    # It takes fixtures: no function a user could pass to interlace.replay or the CLI.
    assert "interlace.replay(" not in result.stdout.str()
    assert "interlace replay test_locks.py" not in result.stdout.str()
    with_a_lock = pattern(
        plugin.MSG_EXPLORED,
        nodeid="test_locks.py::test_with_a_lock",
        outcome="no failure",
        schedules="40 schedules",
        seed=4,
        exhausted="",
    )
    from_the_command_line = pattern(
        plugin.MSG_EXPLORED,
        nodeid="test_locks.py::test_settings_from_the_command_line",
        outcome="no failure",
        schedules="2 schedules",
        seed=9,
    )
    # In each test's report section (-rP) and in the -v terminal summary.
    result.stdout.fnmatch_lines(["*- Captured interlace call -*", with_a_lock])
    result.stdout.fnmatch_lines(["*- Captured interlace call -*", from_the_command_line])
    result.stdout.fnmatch_lines(["*= interlace =*", with_a_lock, from_the_command_line])


def test_a_wall_clock_budget_from_the_command_line_ends_explorations(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_budget="""
        import asyncio

        import pytest


        @pytest.mark.interlace(max_schedules=10**6, seed=1)
        async def test_spent():
            await asyncio.gather(asyncio.sleep(0), asyncio.sleep(0))


        @pytest.mark.interlace(max_schedules=3, seed=1, max_seconds=60)
        async def test_own_budget():
            await asyncio.gather(asyncio.sleep(0), asyncio.sleep(0))
        """
    )
    result = run(pytester, "-v", "--interlace-max-seconds=0")
    result.assert_outcomes(passed=2)
    spent = pattern(
        plugin.MSG_EXPLORED,
        nodeid="test_budget.py::test_spent",
        outcome="no failure",
        schedules="1 schedule",
    )
    own = pattern(
        plugin.MSG_EXPLORED,
        nodeid="test_budget.py::test_own_budget",
        outcome="no failure",
        schedules="3 schedules",
    )
    result.stdout.fnmatch_lines(["*= interlace =*", spent, own])


STALLS = """
import asyncio
import time

import pytest

_clock = time.perf_counter  # taken at import: during an exploration it reads virtual time


async def compute_for_a_second_and_a_half():
    await asyncio.sleep(0)
    end = _clock() + 1.5
    while _clock() < end:  # one step of real work, which ends on its own
        pass


@pytest.mark.interlace(max_schedules=1, stall_timeout=0.5)
async def test_marker():
    await compute_for_a_second_and_a_half()


@pytest.mark.interlace(max_schedules=1)
async def test_command_line():
    await compute_for_a_second_and_a_half()


@pytest.mark.interlace(max_schedules=1, stall_timeout=5)
async def test_marker_beats_command_line():
    await compute_for_a_second_and_a_half()
"""


def _stalled(nodeid: str) -> str:
    """The start of the message of a test the stall timeout of 0.5 s stopped."""
    return plugin.MSG_HARNESS_ERROR.format(nodeid=nodeid, error="task 'main' ran for 0.")


def test_the_stall_timeout_from_the_marker_or_the_command_line_stops_a_long_step(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_stalls=STALLS)
    result = run(pytester, "--interlace-stall-timeout=0.5")
    result.assert_outcomes(failed=2, passed=1)
    output = result.stdout.str()
    assert _stalled("test_stalls.py::test_marker") in output
    assert _stalled("test_stalls.py::test_command_line") in output
    advice = MSG_STALL_TIMEOUT.format(timeout=0.5, more=2)
    # Each failure's message ends with how to allow more (pytest may repeat the messages in
    # its short summary: it does not cut them when the CI variable is set).
    failures = [line for line in output.splitlines() if line.startswith("interlace could not")]
    assert len(failures) == 2
    assert all(line.endswith(advice) for line in failures)


def test_a_replay_keeps_the_stall_timeout_of_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_stalls=STALLS)
    token = encode_token(Settings(backend="asyncio"), ())  # stock order
    result = run(
        pytester,
        "test_stalls.py::test_command_line",
        f"--interlace-replay={token}",
        "--interlace-stall-timeout=0.5",
    )
    result.assert_outcomes(failed=1)
    assert _stalled("test_stalls.py::test_command_line") in result.stdout.str()


def test_explored_tests_see_the_controlled_loop_and_their_neighbours_do_not(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        # Runs first: loading the plugin and running unmarked tests import no harness.
        test_a_light="""
        import sys


        def test_the_harness_is_not_imported():
            assert "interlace.harness.api" not in sys.modules
            assert "interlace._core" not in sys.modules
        """,
        test_b_neighbours="""
        import asyncio

        import pytest

        runs = []


        def loop_name():
            return type(asyncio.get_running_loop()).__name__


        @pytest.fixture
        def anyio_backend():
            return "asyncio"


        @pytest.mark.asyncio
        async def test_pytest_asyncio_runs_its_own_test():
            assert loop_name() != "ControlledEventLoop"


        @pytest.mark.anyio
        async def test_anyio_runs_its_own_test():
            assert loop_name() != "ControlledEventLoop"


        @pytest.mark.interlace(max_schedules=5)
        async def test_explored():
            runs.append(loop_name())


        @pytest.mark.interlace(max_schedules=5)
        @pytest.mark.asyncio
        async def test_explored_although_marked_asyncio():
            runs.append(loop_name())


        @pytest.mark.interlace(max_schedules=5)
        @pytest.mark.anyio
        @pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
        async def test_explored_with_anyio(anyio_backend):
            import anyio

            async with anyio.create_task_group() as group:
                group.start_soon(anyio.sleep, 0)
            runs.append(loop_name())


        @pytest.mark.interlace
        async def test_skip_inside_an_explored_test():
            pytest.skip("skipped from inside")


        def test_each_explored_test_ran_on_the_controlled_loop():
            assert runs == ["ControlledEventLoop"] * 15
        """,
    )
    result = run(pytester, "-rs")
    result.assert_outcomes(passed=7, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1] test_b_neighbours.py:*: "
            + plugin.MSG_ANYIO_VARIANT.format(backend="trio")[:60]
            + "*",
            "SKIPPED * skipped from inside",
        ]
    )
    assert "failing schedule" not in result.stdout.str()


def test_pytest_asyncio_auto_mode_leaves_marked_tests_to_interlace(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI + "asyncio_mode = auto\n")
    pytester.makepyfile(
        """
        import asyncio

        import pytest

        runs = []


        async def test_unmarked_runs_on_pytest_asyncio():
            assert type(asyncio.get_running_loop()).__name__ != "ControlledEventLoop"


        @pytest.mark.interlace(max_schedules=4)
        async def test_marked_runs_under_interlace():
            runs.append(type(asyncio.get_running_loop()).__name__)


        def test_marked_ran_every_schedule():
            assert runs == ["ControlledEventLoop"] * 4
        """
    )
    run(pytester).assert_outcomes(passed=3)


def test_marker_mistakes_fail_that_test_with_a_message_naming_the_marker(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_marks="""
        import pytest


        @pytest.mark.interlace(100)
        async def test_positional():
            pass


        @pytest.mark.interlace(max_schedule=100)
        async def test_misspelled():
            pass


        @pytest.mark.interlace(max_schedules="100")
        async def test_text_count():
            pass


        @pytest.mark.interlace(seed=True)
        async def test_bool_seed():
            pass


        @pytest.mark.interlace(strategy="bfs")
        async def test_unknown_strategy():
            pass


        @pytest.mark.interlace(max_stall=-1)
        async def test_negative_max_stall():
            pass


        @pytest.mark.interlace(jitter=0.01)
        async def test_renamed_jitter():
            pass


        @pytest.mark.interlace(stall_timeout=0)
        async def test_zero_stall_timeout():
            pass


        @pytest.mark.interlace(instrument="httpx")
        def test_instrument_not_a_list():
            pass


        @pytest.mark.interlace(instrument=["httpx", "not a module"])
        def test_instrument_not_a_name():
            pass


        @pytest.mark.interlace(max_schedules=2)
        def test_plain_is_explored_too():
            pass


        @pytest.mark.interlace(max_schedules=2)
        async def test_fine():
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=2, errors=10)
    source = plugin.SOURCE_MARKER
    strategies = "'auto', 'random', 'pct', 'delay', 'exhaustive'"
    expected = [
        plugin.MSG_MARKER_POSITIONAL.format(args=(100,)),
        plugin.MSG_MARKER_UNKNOWN.format(
            name="max_schedule", choices=", ".join(plugin._MARKER_KNOBS)
        ),
        plugin.MSG_NOT_WHOLE.format(setting="max_schedules", value="100", source=source, minimum=1),
        plugin.MSG_NOT_WHOLE.format(setting="seed", value=True, source=source, minimum=0),
        plugin.MSG_NOT_STRATEGY.format(
            setting="strategy", value="bfs", source=source, choices=strategies
        ),
        plugin.MSG_NOT_NUMBER.format(setting="max_stall", value=-1, source=source, minimum=0.0),
        plugin.MSG_MARKER_RENAMED.format(
            name="jitter", value=0.01, new="max_stall", why=plugin._RENAMED_KNOBS["jitter"][1]
        ),
        plugin.MSG_NOT_TIMEOUT.format(setting="stall_timeout", value=0, source=source, minimum=0.0),
        plugin.MSG_NOT_MODULES.format(
            setting="instrument",
            value="httpx",
            source=source,
            example="instrument=['mypackage', 'src/vendored/']",
        ),
        plugin.MSG_NOT_MODULES.format(
            setting="instrument",
            value=["httpx", "not a module"],
            source=source,
            example="instrument=['mypackage', 'src/vendored/']",
        ),
    ]
    output = result.stdout.str()
    for message in expected:
        assert message in output
    assert "Traceback" not in output
    assert "pytest_plugin.py" not in output


def test_a_bad_value_is_a_usage_error_without_a_traceback(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = run(pytester, "--interlace-max-schedules=abc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    expected = plugin.MSG_NOT_WHOLE.format(
        setting="--interlace-max-schedules",
        value="abc",
        source=plugin.SOURCE_COMMAND_LINE,
        minimum=1,
    )
    assert result.stderr.lines == [f"ERROR: {expected}", ""]


def test_a_damaged_replay_token_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    with pytest.raises(pytest.UsageError) as caught:
        pytester.parseconfigure("--interlace-replay=il2.abc")
    prefix = plugin.MSG_BAD_TOKEN.format(token="il2.abc", reason="")
    assert str(caught.value).startswith(prefix + "replay token 'il2.abc' is damaged")


def _configure(pytester: pytest.Pytester, *args: str) -> plugin._Runner:
    config = pytester.parseconfigure(*args)
    runner = config.pluginmanager.get_plugin(plugin.RUNNER_NAME)
    assert isinstance(runner, plugin._Runner)
    return runner


@pytest.mark.parametrize(
    ("ini", "env", "option", "expected"),
    [
        ({}, {}, [], {}),
        ({"interlace_seed": "1"}, {}, [], {"seed": 1}),
        ({"interlace_seed": "1"}, {"INTERLACE_SEED": "2"}, [], {"seed": 2}),
        ({"interlace_seed": "1"}, {"INTERLACE_SEED": "2"}, ["--interlace-seed=3"], {"seed": 3}),
        ({"interlace_seed": "1"}, {"INTERLACE_SEED": " "}, [], {"seed": 1}),
        (
            {"interlace_max_schedules": "50", "interlace_strategy": "pct"},
            {"INTERLACE_MAX_SCHEDULES": "60", "INTERLACE_STRATEGY": "random"},
            ["--interlace-max-schedules", "70"],
            {"max_schedules": 70, "strategy": "random"},
        ),
        ({"interlace_max_seconds": "30"}, {}, [], {"max_seconds": 30.0}),
        (
            {"interlace_max_seconds": "30"},
            {"INTERLACE_MAX_SECONDS": "20"},
            ["--interlace-max-seconds=2.5"],
            {"max_seconds": 2.5},
        ),
        ({"interlace_stall_timeout": "60"}, {}, [], {"stall_timeout": 60.0}),
        (
            {"interlace_stall_timeout": "60"},
            {"INTERLACE_STALL_TIMEOUT": "90"},
            [],
            {"stall_timeout": 90.0},
        ),
        (
            {"interlace_stall_timeout": "60"},
            {"INTERLACE_STALL_TIMEOUT": "90"},
            ["--interlace-stall-timeout=0.5"],
            {"stall_timeout": 0.5},
        ),
        ({"interlace_unfold": "true"}, {}, [], {"unfold": True}),
        ({"interlace_unfold": "Yes"}, {"INTERLACE_UNFOLD": "0"}, [], {"unfold": False}),
        (
            {"interlace_unfold": "off"},
            {"INTERLACE_UNFOLD": "no"},
            ["--interlace-unfold"],
            {"unfold": True},
        ),
    ],
)
def test_command_line_beats_environment_beats_ini(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ini: dict[str, str],
    env: dict[str, str],
    option: list[str],
    expected: dict[str, object],
) -> None:
    for knob in plugin._CONFIG_KNOBS:
        monkeypatch.delenv(plugin._env(knob), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makeini(INI + "".join(f"{k} = {v}\n" for k, v in ini.items()))
    assert _configure(pytester, *option).settings == expected


@pytest.mark.parametrize(
    ("source", "knob", "value", "message"),
    [
        ("ini", "max_schedules", "abc", plugin.MSG_NOT_WHOLE),
        ("ini", "seed", "-1", plugin.MSG_NOT_WHOLE),
        ("ini", "strategy", "dfs", plugin.MSG_NOT_STRATEGY),
        ("env", "max_schedules", "0", plugin.MSG_NOT_WHOLE),
        ("env", "seed", "1.5", plugin.MSG_NOT_WHOLE),
        ("env", "strategy", "Random", plugin.MSG_NOT_STRATEGY),
        ("option", "max_schedules", "ten", plugin.MSG_NOT_WHOLE),
        ("option", "seed", "0x10", plugin.MSG_NOT_WHOLE),
        ("option", "strategy", "pcts", plugin.MSG_NOT_STRATEGY),
        ("ini", "max_seconds", "soon", plugin.MSG_NOT_NUMBER),
        ("env", "max_seconds", "-1", plugin.MSG_NOT_NUMBER),
        ("option", "max_seconds", "inf", plugin.MSG_NOT_NUMBER),
        ("ini", "stall_timeout", "x", plugin.MSG_NOT_TIMEOUT),
        ("env", "stall_timeout", "-1", plugin.MSG_NOT_TIMEOUT),
        ("option", "stall_timeout", "0", plugin.MSG_NOT_TIMEOUT),
        ("option", "stall_timeout", "inf", plugin.MSG_NOT_TIMEOUT),
        ("ini", "instrument", ", ,", plugin.MSG_NOT_MODULES),
        ("env", "instrument", "httpx,my lib", plugin.MSG_NOT_MODULES),
        ("option", "instrument", "httpx;anyio", plugin.MSG_NOT_MODULES),
    ],
)
def test_a_bad_value_names_its_setting_and_source(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    knob: str,
    value: str,
    message: str,
) -> None:
    for name in plugin._CONFIG_KNOBS:
        monkeypatch.delenv(plugin._env(name), raising=False)
    args: list[str] = []
    pytester.makeini(INI)
    if source == "ini":
        pytester.makeini(f"{INI}{plugin._ini(knob)} = {value}\n")
        setting, where = plugin._ini(knob), plugin.SOURCE_INI
    elif source == "env":
        monkeypatch.setenv(plugin._env(knob), value)
        setting, where = plugin._env(knob), plugin.SOURCE_ENVIRONMENT
    else:
        args = [f"{plugin._option(knob)}={value}"]
        setting, where = plugin._option(knob), plugin.SOURCE_COMMAND_LINE
    minimum: object = {"seed": 0, "max_seconds": 0.0, "stall_timeout": 0.0}.get(knob, 1)
    expected = message.format(
        setting=setting,
        value=value,
        source=where,
        minimum=minimum,
        choices="'auto', 'random', 'pct', 'delay', 'exhaustive'",
        example=plugin._TEXT_MODULES_EXAMPLE,
    )
    with pytest.raises(pytest.UsageError) as caught:
        _configure(pytester, *args)
    assert str(caught.value) == expected


@pytest.mark.parametrize(("source", "value"), [("ini", "maybe"), ("env", "2"), ("env", "truee")])
def test_a_flag_that_is_not_yes_or_no_names_its_setting_and_source(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str, value: str
) -> None:
    for name in plugin._CONFIG_KNOBS:
        monkeypatch.delenv(plugin._env(name), raising=False)
    if source == "ini":
        pytester.makeini(f"{INI}interlace_unfold = {value}\n")
        setting, where = "interlace_unfold", plugin.SOURCE_INI
    else:
        pytester.makeini(INI)
        monkeypatch.setenv("INTERLACE_UNFOLD", value)
        setting, where = "INTERLACE_UNFOLD", plugin.SOURCE_ENVIRONMENT
    with pytest.raises(pytest.UsageError) as caught:
        _configure(pytester)
    assert str(caught.value) == plugin.MSG_NOT_FLAG.format(
        setting=setting, value=value, source=where, example=plugin._TEXT_FLAG_EXAMPLE
    )


THROUGH_ASYNCIO = """
import asyncio

import pytest


async def _scenario():
    state = {"n": 0}

    async def bump():
        n = state["n"]
        await asyncio.sleep(0)
        state["n"] = n + 1

    # Steps of asyncio's own code (the sleeps' tasks and gather's callbacks), folded.
    await asyncio.gather(*(asyncio.sleep(0) for _ in range(6)))
    await asyncio.gather(bump(), bump())
    assert state["n"] == 2, state


@pytest.mark.interlace(seed=4, max_schedules=200)
async def test_folded():
    await _scenario()


@pytest.mark.interlace(seed=4, max_schedules=200, unfold=True)
async def test_unfolded():
    await _scenario()


@pytest.mark.interlace(unfold="yes")
async def test_bad_flag():
    pass
"""


def _section(output: str, nodeid: str) -> str:
    """The report section of one test: from its explored line to the next section."""
    start = output.index(f"{nodeid}: ")
    end = output.find("- Captured", start)
    return output[start : end if end != -1 else len(output)]


def test_unfold_from_the_marker_or_the_command_line_shows_every_step(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_fold=THROUGH_ASYNCIO)
    found = run(pytester)
    found.assert_outcomes(failed=2, errors=1)
    output = found.stdout.str()
    folded = _section(output, "test_fold.py::test_folded")
    unfolded = _section(output, "test_fold.py::test_unfolded")
    assert "steps that start and stop in library code (asyncio) ..." in folded
    assert "library code" not in unfolded
    assert len(_schedule(unfolded)) > len(_schedule(folded))
    assert (
        plugin.MSG_NOT_FLAG.format(
            setting="unfold",
            value="yes",
            source=plugin.SOURCE_MARKER,
            example="unfold=True or unfold=False",
        )
        in output
    )

    args = replay_line(output, "test_fold.py::test_folded")
    replayed = run(pytester, *args, "--interlace-unfold")
    replayed.assert_outcomes(failed=1)
    again = replayed.stdout.str()
    assert "library code" not in again
    # The same steps as the test unfolded by its marker (but for the test's name).
    assert _schedule(again) == [
        line.replace("test_unfolded", "test_folded") for line in _schedule(unfolded)
    ]


@pytest.mark.parametrize(
    ("source", "value", "name"),
    [
        ("ini", "mypackage,threading", "threading"),
        ("env", "interlace.harness._threads", "interlace.harness._threads"),
        ("option", "contextlib", "contextlib"),
    ],
)
def test_a_module_that_cannot_be_instrumented_is_refused_naming_its_source(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    value: str,
    name: str,
) -> None:
    from interlace.harness._instrument import uninstrumentable

    monkeypatch.delenv(plugin._env("instrument"), raising=False)
    args: list[str] = []
    pytester.makeini(INI)
    if source == "ini":
        pytester.makeini(f"{INI}{plugin._ini('instrument')} = {value}\n")
        setting, where = plugin._ini("instrument"), plugin.SOURCE_INI
    elif source == "env":
        monkeypatch.setenv(plugin._env("instrument"), value)
        setting, where = plugin._env("instrument"), plugin.SOURCE_ENVIRONMENT
    else:
        args = [f"{plugin._option('instrument')}={value}"]
        setting, where = plugin._option("instrument"), plugin.SOURCE_COMMAND_LINE
    expected = plugin.MSG_NOT_INSTRUMENTABLE.format(
        setting=setting, value=value, source=where, name=name, reason=uninstrumentable(name)
    )
    with pytest.raises(pytest.UsageError) as caught:
        _configure(pytester, *args)
    assert str(caught.value) == expected


def test_a_module_that_cannot_be_instrumented_is_refused_from_the_marker(
    pytester: pytest.Pytester,
) -> None:
    from interlace.harness._instrument import uninstrumentable

    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import pytest


        @pytest.mark.interlace(instrument=["threading"])
        def test_threading():
            pass


        @pytest.mark.interlace(instrument=["queue"])
        def test_queue():
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    expected = plugin.MSG_NOT_INSTRUMENTABLE.format(
        setting="instrument",
        value=["threading"],
        source=plugin.SOURCE_MARKER,
        name="threading",
        reason=uninstrumentable("threading"),
    )
    output = result.stdout.str()
    assert expected in output
    assert "Traceback" not in output


def test_instrument_takes_the_same_precedence_and_anchors_relative_paths_where_written(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERLACE_INSTRUMENT", raising=False)
    sub = pytester.mkdir("sub")
    # One name per line or comma-separated; a relative path is relative to the ini file.
    (sub / "pytest.ini").write_text(
        INI + "interlace_instrument = ini_lib,\n    vendored/\n", encoding="utf-8"
    )
    ini = ["-c", "sub/pytest.ini"]
    runner = _configure(pytester, *ini)
    assert runner.settings == {"instrument": ("ini_lib", os.path.join(sub, "vendored/"))}
    assert runner.replay_option == ""  # the ini file is read again by the replay

    # The environment's and the command line's paths are relative to the current directory,
    # and the replay line repeats them as given.
    monkeypatch.setenv("INTERLACE_INSTRUMENT", "env_lib, tools/helpers.py")
    runner = _configure(pytester, *ini)
    assert runner.settings == {
        "instrument": ("env_lib", os.path.join(pytester.path, "tools/helpers.py"))
    }
    assert runner.replay_option == "'--interlace-instrument=env_lib, tools/helpers.py'"

    runner = _configure(
        pytester, *ini, "--interlace-instrument=cli_lib", "--interlace-instrument", "/abs/lib/"
    )
    assert runner.settings == {"instrument": ("cli_lib", "/abs/lib/")}
    assert runner.replay_option == "--interlace-instrument=cli_lib,/abs/lib/"


def test_pytest_exit_inside_an_explored_test_ends_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import pytest


        @pytest.mark.interlace
        async def test_exits():
            pytest.exit("leaving from inside the schedule", returncode=3)


        def test_never_runs():
            open("ran", "w").close()
        """
    )
    result = run(pytester)
    assert result.ret == 3
    result.stdout.fnmatch_lines(["*Exit: leaving from inside the schedule*"])
    assert not (pytester.path / "ran").exists()


def _ctrl_c_once_started(pytester: pytest.Pytester, after: float) -> tuple[int, str]:
    """Run the session, send it Ctrl-C ``after`` seconds after its test made ``started``,
    and return its exit code and what it printed. A session still running a minute later
    is killed, with every thread's stack (pytest's faulthandler) in the failure, never left
    to the next test."""
    process = pytester.popen(
        [sys.executable, "-m", "pytest", *_QUIET, "-o", "faulthandler_timeout=45"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # A shell's background job starts with SIGINT ignored; Ctrl-C needs the default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while not (pytester.path / "started").exists():
            assert process.poll() is None, "the session ended before its test started"
            assert time.monotonic() < deadline, "the test did not start within a minute"
            time.sleep(0.05)
        time.sleep(after)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    except BaseException:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"the session did not end after Ctrl-C; it printed:\n{output}")
    return process.returncode, str(output)


def _assert_interrupted_outside_interlace(output: str) -> None:
    """pytest's one line for the interrupt names the test's code (or, when the signal came
    between runs, pytest's call of the test), never interlace's signal handler."""
    where = re.search(r"^(\S+):\d+: KeyboardInterrupt$", output, flags=re.MULTILINE)
    assert where is not None, output
    package = os.path.dirname(os.path.abspath(interlace.__file__))
    assert not os.path.abspath(where.group(1)).startswith(package + os.sep), output


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_during_an_exploration_interrupts_the_session(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import asyncio
        import pathlib
        import time

        import pytest


        @pytest.mark.interlace(max_schedules=1_000_000, strategy="random")
        async def test_long_exploration():
            pathlib.Path("started").touch()
            for _ in range(20):
                time.sleep(0.001)
                await asyncio.sleep(0)


        def test_never_runs():
            pathlib.Path("ran").touch()
        """
    )
    returncode, output = _ctrl_c_once_started(pytester, after=0.2)  # inside the exploration
    assert returncode == pytest.ExitCode.INTERRUPTED, output
    assert "! KeyboardInterrupt !" in output
    _assert_interrupted_outside_interlace(output)
    assert not (pytester.path / "ran").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="the signal method needs SIGALRM")
def test_pytest_timeout_signal_method_fails_an_explored_test_that_blocks(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import time

        import pytest

        import interlace.harness.api  # not imported by the test, inside its 1 s timeout


        @pytest.mark.timeout(1, method="signal")
        @pytest.mark.interlace
        async def test_blocks_the_thread():
            time.sleep(60)


        def test_runs_afterwards():
            pass
        """
    )
    result = run(pytester, "--durations=0")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [">       time.sleep(60)", "E       Failed: Timeout (>1.0s) from pytest-timeout."]
    )
    durations = re.search(r"([\d.]+)s call +\S+::test_blocks_the_thread", result.stdout.str())
    assert durations is not None
    assert float(durations.group(1)) < 10


def test_pytest_timeout_thread_method_ends_a_blocked_explored_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import time

        import pytest

        import interlace.harness.api  # not imported by the test, inside its 1 s timeout


        @pytest.mark.timeout(1, method="thread")
        @pytest.mark.interlace
        async def test_blocks_the_thread():
            time.sleep(60)
        """
    )
    result = pytester.runpytest_subprocess(*_QUIET, timeout=30)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*+ Timeout +*", "*time.sleep(60)", "*+ Timeout +*"])


def test_the_marker_is_registered_with_its_help(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    config = pytester.parseconfigure("--strict-markers")
    assert plugin.MARKER_HELP in config.getini("markers")


# -- plain tests: their threads run under control -------------------------------------------------

THREAD_BUGS = """
import threading

import pytest


class Registry:
    def __init__(self):
        self.items = {}
        self.created = 0

    def get(self, key):
        if key not in self.items:
            self.created += 1
            self.items[key] = object()
        return self.items[key]


@pytest.fixture
def keys():
    return ("k", "k")


@pytest.mark.interlace(seed=7)
def test_one_client(keys):
    registry = Registry()
    threads = [threading.Thread(target=registry.get, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert registry.created == 1
"""

THREAD_FIXED = THREAD_BUGS.replace(
    "    def get(self, key):\n        if",
    "    lock = threading.Lock()\n\n    def get(self, key):\n        with self.lock:\n"
    "            return self._get(key)\n\n    def _get(self, key):\n        if",
)


def test_a_plain_test_runs_its_threads_under_control_and_its_replay_line_fails_the_same_way(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_clients=THREAD_BUGS)
    found = run(pytester)
    found.assert_outcomes(failed=1)
    nodeid = "test_clients.py::test_one_client"
    found.stdout.fnmatch_lines(
        [
            ">       assert registry.created == 1",
            "E       assert 2 == 1",
            "E       interlace: failing schedule (*), needs thread preemption.",
            f"E           pytest '{nodeid}' --interlace-replay=il2.*",
            "*- Captured interlace call -*",
            pattern(plugin.MSG_EXPLORED, nodeid=nodeid, seed=7),
            "Failing schedule (* step*):",
            "  *. Thread-1 (get): ran test_clients.py:* -> test_clients.py:* (preempted)",
            "  *. Thread-2 (get): ran test_clients.py:* -> (finished)    <- preempts "
            "Thread-1 (get) (thread preemption)",
            "Label: needs thread preemption (1 deviation from stock order)",
        ]
    )
    assert "interlace.replay(" not in found.stdout.str()  # it takes a fixture
    args = replay_line(found.stdout.str(), nodeid)

    replayed = run(pytester, *args)
    replayed.assert_outcomes(failed=1)
    replayed.stdout.fnmatch_lines(
        [
            "E       assert 2 == 1",
            "*= interlace =*",
            plugin.MSG_REPLAY_FAILED.format(nodeid=nodeid, kind="exception"),
        ]
    )
    assert _schedule(replayed.stdout.str()) == _schedule(found.stdout.str())

    pytester.makepyfile(test_clients=THREAD_FIXED)
    fixed = run(pytester, *args)
    fixed.assert_outcomes(passed=1)
    fixtures = plugin.MSG_REPLAY_PASSED_FIXTURES.format(names="keys")
    fixed.stdout.fnmatch_lines([plugin.MSG_REPLAY_PASSED.format(nodeid=nodeid, cause=fixtures)])
    explored = run(pytester, "-rP")
    explored.assert_outcomes(passed=1)
    explored.stdout.fnmatch_lines(
        [pattern(plugin.MSG_EXPLORED, nodeid=nodeid, outcome="no failure", seed=7)]
    )

    # A token from an async def exploration means nothing for a plain test: said, not raised.
    async_token = _async_failure_token()
    mismatched = run(pytester, nodeid, f"--interlace-replay={async_token}")
    mismatched.assert_outcomes(failed=1)
    mismatched.stdout.fnmatch_lines(
        [
            "*"
            + plugin.MSG_HARNESS_ERROR.format(
                nodeid=nodeid,
                error="the token was made by exploring an async def function, but "
                "'test_one_client' is a plain function*",
            )
        ]
    )
    assert "Traceback" not in mismatched.stdout.str()


def _async_failure_token() -> str:
    async def fails() -> None:
        raise RuntimeError("fails under stock order")

    failure = interlace.explore(fails, max_schedules=1, seed=0).failure
    assert failure is not None
    return failure.token


def test_a_thread_deadlock_fails_with_the_wait_for_graph_and_settings_keep_their_precedence(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_locks="""
        import threading

        import pytest

        FIRST = threading.Lock()
        SECOND = threading.Lock()
        seen = []


        def run_threads(*targets):
            threads = [threading.Thread(target=target) for target in targets]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()


        @pytest.mark.interlace(seed=3, max_schedules=300)
        def test_lock_order():
            def one():
                with FIRST, SECOND:
                    pass

            def two():
                with SECOND, FIRST:
                    pass

            run_threads(one, two)


        @pytest.mark.interlace
        def test_settings_from_the_command_line(tmp_path):
            seen.append(tmp_path)
            run_threads(lambda: None)


        def test_fixtures_are_resolved_once_per_test():
            assert len(seen) == 2 and seen[0] == seen[1]
        """
    )
    result = run(pytester, "-v", "--interlace-seed=9", "--interlace-max-schedules=2")
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(
        [
            plugin.MSG_FOUND.format(
                article="a",
                kind="deadlock",
                nodeid="test_locks.py::test_lock_order",
                schedules="*",
                seed=3,
            ),
            "Failing schedule (* step*):",
            "Deadlock:",
            "  No thread can run and no timeout is pending. Waiting:",
            "    Thread-1 (one) at test_locks.py:* waits for Lock test_locks.SECOND, held by "
            "Thread-2 (two)",
            "    Thread-2 (two) at test_locks.py:* waits for Lock test_locks.FIRST, held by "
            "Thread-1 (one)",
            "  Wait-for cycle: Thread-1 (one) -> Thread-2 (two) -> Thread-1 (one)",
            "Label: needs thread preemption (1 deviation from stock order)",
            "  pytest 'test_locks.py::test_lock_order' --interlace-replay=il2.*",
            "  interlace.replay(test_locks.test_lock_order, 'il2.*')",
            "  interlace replay test_locks.py:test_lock_order il2.*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*= interlace =*",
            pattern(
                plugin.MSG_EXPLORED,
                nodeid="test_locks.py::test_settings_from_the_command_line",
                outcome="no failure",
                schedules="2 schedules",
                seed=9,
            ),
        ]
    )


LIBRARY = """
class Registry:
    def __init__(self):
        self.items = {}
        self.created = 0

    def get(self, key):
        if key not in self.items:
            self.created += 1
            self.items[key] = object()
        return self.items[key]
"""


def test_instrument_gives_a_library_schedule_points_and_the_replay_line_repeats_it(
    pytester: pytest.Pytester,
) -> None:
    # A directory named site-packages: its code gets no schedule points unless instrumented.
    pytester.makeini(INI + "pythonpath = site-packages\n")
    pytester.mkdir("site-packages")
    (pytester.path / "site-packages" / "racy_lib.py").write_text(LIBRARY, encoding="utf-8")
    pytester.makepyfile(
        test_library="""
        import threading

        import pytest

        import racy_lib


        def one_client():
            registry = racy_lib.Registry()
            threads = [threading.Thread(target=registry.get, args=("k",)) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert registry.created == 1


        @pytest.mark.interlace(seed=1, max_schedules=200)
        def test_settings():
            one_client()


        @pytest.mark.interlace(seed=1, max_schedules=200, instrument=[])
        def test_marker_instruments_nothing_more():
            one_client()


        @pytest.mark.interlace(seed=1, max_schedules=200, instrument=["racy_lib"])
        def test_marker_instruments_the_library():
            one_client()
        """
    )
    plain = run(pytester)
    plain.assert_outcomes(passed=2, failed=1)
    plain.stdout.fnmatch_lines(["FAILED test_library.py::test_marker_instruments_the_library*"])
    # The passes explored no switch inside racy_lib: each says so, and what to add.
    how = api.MSG_UNINSTRUMENTED_TEST.format(names="'racy_lib'", joined="racy_lib")
    note = api.MSG_UNINSTRUMENTED.format(modules="racy_lib", packages="racy_lib", how=how)
    for test in ("test_settings", "test_marker_instruments_nothing_more"):
        plain.stdout.fnmatch_lines(
            [f"test_library.py::{test}: no failure in *; " + note.replace("[", "[[]")]
        )

    instrumented = run(pytester, "--interlace-instrument=racy_lib")
    instrumented.assert_outcomes(passed=1, failed=2)
    nodeid = "test_library.py::test_settings"
    instrumented.stdout.fnmatch_lines(
        [
            f"E           pytest '{nodeid}' --interlace-replay=il2.* --interlace-instrument="
            "racy_lib",
            "E           interlace.replay(test_library.test_settings, 'il2.*', "
            "instrument=[[]'racy_lib'])",
            # --path: the ini's pythonpath, without which `import racy_lib` fails outside pytest.
            "E           interlace replay test_library.py:test_settings il2.* --instrument "
            "racy_lib --path site-packages",
        ]
    )
    assert "test_library.py::test_marker_instruments_nothing_more PASSED" not in (
        instrumented.stdout.str()
    )
    line = re.search(
        rf"pytest '({re.escape(nodeid)})' (--interlace-replay=il2\.[\w-]+) "
        r"(--interlace-instrument=racy_lib)",
        instrumented.stdout.str(),
    )
    assert line is not None
    replayed = run(pytester, *line.groups())
    replayed.assert_outcomes(failed=1)
    replayed.stdout.fnmatch_lines(
        [plugin.MSG_REPLAY_FAILED.format(nodeid=nodeid, kind="exception")]
    )
    without = run(pytester, *line.groups()[:2])  # without the library's points: not this schedule
    assert "the schedule in --interlace-replay still fails" not in without.stdout.str()


@pytest.mark.parametrize("where", ["test", "thread"])
def test_pytest_exit_inside_a_plain_explored_test_or_its_thread_ends_the_session(
    pytester: pytest.Pytester, where: str
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        f"""
        import threading

        import pytest


        def leave():
            pytest.exit("leaving from inside the schedule", returncode=3)


        @pytest.mark.interlace
        def test_exits():
            if {where!r} == "test":
                leave()
            thread = threading.Thread(target=leave)
            thread.start()
            thread.join()


        def test_never_runs():
            open("ran", "w").close()
        """
    )
    result = run(pytester)
    assert result.ret == 3
    result.stdout.fnmatch_lines(["*Exit: leaving from inside the schedule*"])
    assert not (pytester.path / "ran").exists()


def test_skip_inside_a_plain_explored_test_or_its_thread_skips_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import threading

        import pytest


        @pytest.mark.interlace
        def test_skips():
            pytest.skip("skipped from the test")


        @pytest.mark.interlace
        def test_skips_in_a_thread():
            thread = threading.Thread(target=pytest.skip, args=("skipped from a thread",))
            thread.start()
            thread.join()
        """
    )
    result = run(pytester, "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines_random(
        ["SKIPPED * skipped from the test", "SKIPPED * skipped from a thread"]
    )


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_during_a_threads_exploration_interrupts_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import pathlib
        import threading

        import pytest


        @pytest.mark.interlace(max_schedules=1_000_000, strategy="random")
        def test_long_exploration():
            pathlib.Path("started").touch()
            count = [0]

            def work():
                for _ in range(50):
                    count[0] += 1

            threads = [threading.Thread(target=work) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()


        def test_never_runs():
            pathlib.Path("ran").touch()
        """
    )
    # Well inside the exploration, most likely while a thread holds the baton.
    returncode, output = _ctrl_c_once_started(pytester, after=0.5)
    assert returncode == pytest.ExitCode.INTERRUPTED, output
    assert "! KeyboardInterrupt !" in output
    _assert_interrupted_outside_interlace(output)
    assert not (pytester.path / "ran").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="the signal method needs SIGALRM")
@pytest.mark.parametrize(
    ("body", "blocked_at"),
    [
        ("os.read(read_end, 1)", "os.read(read_end, 1)"),
        (
            "worker = threading.Thread(target=os.read, args=(read_end, 1), daemon=True)\n"
            "            worker.start()\n"
            "            worker.join()",
            "worker.join()",
        ),
    ],
    ids=["the-test-blocks", "its-thread-blocks"],
)
def test_pytest_timeout_signal_method_fails_a_plain_explored_test_that_blocks(
    pytester: pytest.Pytester, body: str, blocked_at: str
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        f"""
        import os
        import threading

        import pytest

        import interlace.harness.api  # not imported by the test, inside its 1 s timeout


        @pytest.mark.timeout(1, method="signal")
        @pytest.mark.interlace
        def test_blocks():
            read_end, _ = os.pipe()  # nothing is ever written: a real, endless wait
            {body}


        def test_runs_afterwards():
            pass
        """
    )
    result = run(pytester, "--durations=0")
    result.assert_outcomes(failed=1, passed=1)
    # The traceback ends in the test, where it was blocked, not inside interlace's scheduler.
    result.stdout.fnmatch_lines(
        [
            f">       {blocked_at}",
            "E       Failed: Timeout (>1.0s) from pytest-timeout.",
            "",
            "test_pytest_timeout_signal_method_fails_a_plain_explored_test_that_blocks.py:*: "
            "Failed",
        ]
    )
    durations = re.search(r"([\d.]+)s call +\S+::test_blocks", result.stdout.str())
    assert durations is not None
    assert float(durations.group(1)) < 10


def test_pytest_timeout_thread_method_ends_a_blocked_plain_explored_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import os

        import pytest

        import interlace.harness.api  # not imported by the test, inside its 1 s timeout


        @pytest.mark.timeout(1, method="thread")
        @pytest.mark.interlace
        def test_blocks_the_thread():
            read_end, _ = os.pipe()
            os.read(read_end, 1)
        """
    )
    result = pytester.runpytest_subprocess(*_QUIET, timeout=30)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*+ Timeout +*", "*os.read(read_end, 1)", "*+ Timeout +*"])


ALARM_DELAYS = (0.2, 0.3, 0.45, 0.6, 0.75, 0.9)


@pytest.mark.skipif(sys.platform == "win32", reason="the signal method needs SIGALRM")
def test_a_pytest_timeout_alarm_fails_the_test_with_the_timeout_wherever_it_lands(
    pytester: pytest.Pytester,
) -> None:
    # Long explorations of correct code, each cut by an alarm at another moment: it lands in
    # the test's code, in a task, in interlace's scheduler, in an asyncio callback or in a
    # __del__. Before, it was reported as a failing schedule, as a deadlock, or swallowed.
    pytester.makeini(INI)
    pytester.makepyfile(
        f"""
        import asyncio
        import threading

        import pytest

        import interlace.harness.api  # not imported by the first test, inside its timeout

        DELAYS = [
            pytest.param(delay, marks=pytest.mark.timeout(delay, method="signal"))
            for delay in {ALARM_DELAYS!r}
        ]


        class Registry:
            def __init__(self):
                self._lock = asyncio.Lock()
                self._items = {{}}

            async def get(self, key):
                async with self._lock:
                    if key not in self._items:
                        await asyncio.sleep(0)
                        self._items[key] = object()
                    return self._items[key]


        @pytest.mark.parametrize("delay", DELAYS)
        @pytest.mark.interlace(max_schedules=10**7, seed=1)
        async def test_tasks(delay):
            registry = Registry()
            queue = asyncio.Queue(maxsize=2)

            async def produce():
                for i in range(5):
                    await queue.put(i)
                    await asyncio.sleep(0)

            async def consume():
                for _ in range(5):
                    await queue.get()
                    await registry.get(1)

            await asyncio.gather(produce(), consume(), registry.get(1), registry.get(2))


        @pytest.mark.parametrize("delay", DELAYS)
        @pytest.mark.interlace(max_schedules=10**7, seed=1)
        def test_threads(delay):
            lock = threading.Lock()
            count = [0]

            def work():
                with lock:
                    count[0] += 1

            threads = [threading.Thread(target=work) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert count[0] == 3
        """
    )
    # An alarm lost as before lets an exploration run its 10**7 schedules: the session is cut.
    result = pytester.runpytest_subprocess(*_QUIET, timeout=180)
    output = result.stdout.str()
    result.assert_outcomes(failed=2 * len(ALARM_DELAYS))
    for delay in ALARM_DELAYS:
        timeout = f"Failed: Timeout (>{delay}s) from pytest-timeout."
        assert len(re.findall(rf"^E +{re.escape(timeout)}$", output, re.MULTILINE)) == 2, output
    note = "*" + pattern(plugin.MSG_TIMEOUT) + "*"
    notes = [line for line in _reports(output).splitlines() if fnmatch(line, note)]
    assert len(notes) == 2 * len(ALARM_DELAYS), output
    for wrong in ("interlace found", "failing schedule", "Exception ignored"):
        assert wrong not in output
    if "warnings summary" in output:
        # An alarm raised in the test's own coroutine abandons what it was awaiting (the
        # __aexit__ of an `async with`), as pytest-timeout does without interlace: Python then
        # warns that the coroutine was never awaited. No other warning may appear.
        summary = output.split("warnings summary")[1].split("-- Docs")[0]
        warned = [line for line in summary.splitlines() if "Warning" in line]
        assert warned, output
        for line in warned:
            assert "RuntimeWarning: coroutine" in line, output
            assert "was never awaited" in line, output


def test_a_marker_mistake_and_a_replay_divergence_are_printed_once(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_once="""
        import asyncio

        import pytest


        @pytest.mark.interlace(seed=-1)
        async def test_negative_seed():
            pass


        @pytest.mark.interlace(seed=1)
        async def test_short():
            await asyncio.sleep(0)
        """
    )
    result = run(pytester, "test_once.py::test_negative_seed")
    result.assert_outcomes(errors=1)
    message = plugin.MSG_NOT_WHOLE.format(
        setting="seed", value=-1, source=plugin.SOURCE_MARKER, minimum=0
    )
    output = result.stdout.str()
    assert _reports(output).count(message) == 1, output
    assert "During handling of the above exception" not in output

    # A token whose decision comes after the end of test_short's only run.
    token = _async_token_deciding_late()
    diverged = run(pytester, "test_once.py::test_short", f"--interlace-replay={token}")
    diverged.assert_outcomes(failed=1)
    output = diverged.stdout.str()
    assert _reports(output).count("interlace could not replay the schedule") == 1, output
    assert "During handling of the above exception" not in output
    # A token from a different test is one of the causes it names.
    diverged.stdout.fnmatch_lines(
        ["*" + pattern(plugin.MSG_REPLAY_DIVERGED, nodeid="test_once.py::test_short")]
    )


def _async_token_deciding_late() -> str:
    """A token of an async def exploration whose decision comes after its 20th step."""

    async def fails() -> None:
        for _ in range(20):
            await asyncio.sleep(0)
        count = [0]

        async def increment() -> None:
            seen = count[0]
            await asyncio.sleep(0)
            count[0] = seen + 1

        task = asyncio.create_task(increment())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await increment()
        await task
        assert count[0] == 2

    failure = interlace.explore(fails, max_schedules=200, seed=0).failure
    assert failure is not None
    assert failure.deviations == 1
    return failure.token


def test_the_printed_replay_line_works_from_the_directory_pytest_ran_in(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini(INI)
    sub = pytester.mkdir("sub")
    (sub / "test_bank.py").write_text(textwrap.dedent(BUGS))
    monkeypatch.chdir(sub)
    found = run(pytester)
    found.assert_outcomes(failed=1)
    # The rootdir is pytester.path (its ini); the node id says sub/test_bank.py.
    found.stdout.fnmatch_lines(
        [pattern(plugin.MSG_EXPLORED, nodeid="sub/test_bank.py::test_lost_update", seed=7)]
    )
    args = replay_line(found.stdout.str(), "test_bank.py::test_lost_update")
    assert "sub/" not in " ".join(args)

    replayed = run(pytester, *args)
    replayed.assert_outcomes(failed=1)
    replayed.stdout.fnmatch_lines(
        [
            plugin.MSG_REPLAY_FAILED.format(
                nodeid="sub/test_bank.py::test_lost_update", kind="exception"
            )
        ]
    )


def test_a_token_from_a_different_test_says_it_may_be_one(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_bank=BUGS
        + """

@pytest.mark.interlace(seed=7)
async def test_other():
    for _ in range(10):
        await asyncio.sleep(0)
"""
    )
    found = run(pytester, "test_bank.py::test_lost_update")
    _, option = replay_line(found.stdout.str(), "test_bank.py::test_lost_update")
    other = run(pytester, "test_bank.py::test_other", option)
    other.assert_outcomes(passed=1)
    other.stdout.fnmatch_lines(
        [plugin.MSG_REPLAY_PASSED.format(nodeid="test_bank.py::test_other", cause="")]
    )
    assert "a token from a different test" in plugin.MSG_REPLAY_PASSED
    assert "different test" in plugin.MSG_REPLAY_DIVERGED


FIXTURE_STATE = """
import asyncio

import pytest
import pytest_asyncio


@pytest.fixture
def registry():
    return {}


@pytest.mark.interlace(max_schedules=20, seed=1)
async def test_fixture_state(registry):
    assert "k" not in registry
    registry["k"] = 1
    await asyncio.sleep(0)


@pytest_asyncio.fixture
async def lock():
    lock = asyncio.Lock()
    async with lock:
        pass
    return lock


@pytest.mark.interlace(max_schedules=20, seed=1)
async def test_fixture_lock(lock):
    async def critical():
        async with lock:
            await asyncio.sleep(0)

    await asyncio.gather(critical(), critical())


runs = []


@pytest.mark.interlace(max_schedules=20, seed=1)
async def test_module_state():
    runs.append(1)
    await asyncio.sleep(0)
    assert len(runs) == 1
"""


def test_a_failure_left_by_earlier_schedules_in_fixtures_says_so(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_fixtures=FIXTURE_STATE)
    found = run(pytester)
    found.assert_outcomes(failed=3)
    output = found.stdout.str()
    in_fixtures = api.MSG_EARLIER_STATE_FIXTURES.format(names="registry")
    earlier = api.MSG_EARLIER_STATE.format(where=in_fixtures, subject=api.MSG_IN_TEST)
    assert f"E       {earlier}" in output
    other_loop = api.MSG_OTHER_LOOP.format(
        made=api.MSG_OTHER_LOOP_FIXTURES, subject=api.MSG_IN_TEST
    )
    assert f"E           {other_loop}" in output
    globals_left = api.MSG_EARLIER_STATE.format(
        where=api.MSG_EARLIER_STATE_GLOBALS, subject=api.MSG_IN_TEST
    )
    assert f"E       {globals_left}" in output
    assert _reports(output).count("interlace: this is the stock-order schedule") == 2  # no lock
    # The two that take fixtures have no API or CLI line; the third has both.
    assert "interlace.replay(test_fixtures.test_fixture_" not in output
    assert "called with its fixtures" not in output
    assert "interlace.replay(test_fixtures.test_module_state, " in output

    args = replay_line(output, "test_fixtures.py::test_fixture_state")
    replayed = run(pytester, *args)
    replayed.assert_outcomes(passed=1)
    # The token is stock order: the line names what earlier schedules left in the fixtures.
    cause = " " + api.MSG_REPLAY_STOCK.format(where=in_fixtures)
    replayed.stdout.fnmatch_lines(
        [
            plugin.MSG_REPLAY_PASSED.format(
                nodeid="test_fixtures.py::test_fixture_state", cause=cause
            )
        ]
    )


def test_a_failure_under_stock_order_on_the_first_schedule_gets_no_such_note(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import pytest


        @pytest.fixture
        def registry():
            return {}


        @pytest.mark.interlace(seed=1)
        async def test_fails_every_time(registry):
            assert registry
        """
    )
    found = run(pytester)
    found.assert_outcomes(failed=1)
    assert "interlace: this is the stock-order schedule" not in found.stdout.str()


MODULE_LOCK = """
import asyncio

import pytest

lock = asyncio.Lock()


@pytest.mark.interlace(max_schedules=20, seed=1)
async def test_module_lock():
    async def critical():
        async with lock:
            await asyncio.sleep(0)

    await asyncio.gather(critical(), critical())
"""


def test_a_module_level_asyncio_object_is_explained_once_and_its_passing_replay_says_why(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_module_lock=MODULE_LOCK)
    found = run(pytester)
    found.assert_outcomes(failed=1)
    output = found.stdout.str()
    other_loop = api.MSG_OTHER_LOOP.format(
        made=api.MSG_OTHER_LOOP_FIXTURES, subject=api.MSG_IN_TEST
    )
    assert f"E           {other_loop}" in output
    assert _reports(output).count("belongs to another event loop") == 1

    replayed = run(pytester, *replay_line(output, "test_module_lock.py::test_module_lock"))
    replayed.assert_outcomes(passed=1)
    cause = " " + api.MSG_REPLAY_STOCK.format(where=api.MSG_EARLIER_STATE_GLOBALS)
    replayed.stdout.fnmatch_lines(
        [
            plugin.MSG_REPLAY_PASSED.format(
                nodeid="test_module_lock.py::test_module_lock", cause=cause
            )
        ]
    )


MODULE_POOL = """
import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

pool = ThreadPoolExecutor(max_workers=1)


def test_starts_the_pools_worker():
    assert pool.submit(int).result() == 0


@pytest.mark.interlace(max_schedules=5, seed=1)
async def test_uses_the_pool():
    await asyncio.get_running_loop().run_in_executor(pool, int)
"""


def test_a_pass_with_executor_jobs_outside_interlaces_control_says_so_without_verbose(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_pool=MODULE_POOL)
    result = run(pytester)
    result.assert_outcomes(passed=2)
    explored = pattern(
        plugin.MSG_EXPLORED, nodeid="test_pool.py::test_uses_the_pool", outcome="no failure"
    )
    opaque = api.MSG_OPAQUE.format(when="the test", subject="the test")
    result.stdout.fnmatch_lines(
        ["*= interlace =*", pattern(plugin.MSG_EXPLORED_OPAQUE, line=explored, opaque=opaque)]
    )


@pytest.mark.skipif(importlib.util.find_spec("trio") is None, reason="needs trio installed")
def test_anyios_trio_variant_of_a_marked_test_is_skipped(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_variants="""
        import anyio
        import pytest


        @pytest.mark.anyio
        @pytest.mark.interlace(max_schedules=5)
        async def test_on_anyios_backends():
            async with anyio.create_task_group() as group:
                group.start_soon(anyio.sleep, 0)
        """,
        test_only_trio="""
        import pytest


        @pytest.fixture
        def anyio_backend():
            return "trio"


        @pytest.mark.anyio
        @pytest.mark.interlace(max_schedules=5)
        async def test_asks_for_trio():
            pass
        """,
    )
    result = run(pytester, "-rs", "-v")
    result.assert_outcomes(passed=1, skipped=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_on_anyios_backends?asyncio? PASSED*",
            "SKIPPED [[]1] test_variants.py:*: "
            + plugin.MSG_ANYIO_VARIANT.format(backend="trio")[:60]
            + "*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*"
            + plugin.MSG_ANYIO_BACKEND.format(
                nodeid="test_only_trio.py::test_asks_for_trio", backend="trio"
            )[:60]
            + "*"
        ]
    )


def _reports(output: str) -> str:
    """pytest's output up to its short test summary, which repeats whole messages when the CI
    environment variable is set (and cuts them short otherwise)."""
    return output.split("short test summary info")[0]
