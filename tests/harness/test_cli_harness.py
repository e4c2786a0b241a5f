"""``interlace explore`` and ``interlace replay`` on the command line.

Most tests call ``interlace.harness.cli.main`` in-process (fast, same code path as the
console script); the replay-line test runs the real ``python -m interlace`` twice.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlace._core.schedule import Settings, encode_token
from interlace.harness import api, cli
from interlace.harness import pytest_plugin as plugin
from interlace.harness._instrument import uninstrumentable
from interlace.harness._runtime import MSG_STALL_TIMEOUT

SCENARIOS = """
import asyncio

count = [0]


async def lost_update():
    count[0] = 0

    async def increment():
        seen = count[0]
        await asyncio.sleep(0)
        count[0] = seen + 1

    task = asyncio.create_task(increment())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await increment()
    await task
    assert count[0] == 2, f"lost an update: {count[0]}"


async def lock_order():
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


async def correct():
    lock = asyncio.Lock()

    async def increment():
        async with lock:
            seen = count[0]
            await asyncio.sleep(0)
            count[0] = seen + 1

    count[0] = 0
    await asyncio.gather(increment(), increment())
    assert count[0] == 2


async def short():
    pass


async def a_minute():
    await asyncio.sleep(60)


def plain():
    pass


def generator():
    yield


async def needs_an_argument(value):
    pass
"""

# Plain functions: their threads run under control. ``racy_lib`` sits in a directory named
# site-packages, so its code gets no schedule points unless --instrument names it.
THREAD_SCENARIOS = """
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))

import racy_lib


class Registry:
    def __init__(self):
        self.items = {}
        self.created = 0

    def get(self, key):
        if key not in self.items:
            self.created += 1
            self.items[key] = object()
        return self.items[key]


def run_threads(*targets):
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def check_then_insert():
    registry = Registry()
    run_threads(lambda: registry.get("k"), lambda: registry.get("k"))
    assert registry.created == 1, f"created {registry.created} times"


def locked_insert():
    registry = Registry()
    lock = threading.Lock()

    def get():
        with lock:
            registry.get("k")

    run_threads(get, get)
    assert registry.created == 1, f"created {registry.created} times"


FIRST = threading.Lock()
SECOND = threading.Lock()


def lock_order():
    def one():
        with FIRST, SECOND:
            pass

    def two():
        with SECOND, FIRST:
            pass

    run_threads(one, two)


def needs_a_config(config):
    pass


def library_race():
    registry = racy_lib.Registry()
    run_threads(lambda: registry.get("k"), lambda: registry.get("k"))
    assert registry.created == 1, f"created {registry.created} times"
"""

RACY_LIB = """
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

STRATEGIES = "auto, random, pct, delay, exhaustive"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project directory as the current directory, with ``scenarios.py`` and ``threads.py``.

    The project's modules the command imports are forgotten afterwards, so each test imports
    its own. interlace's own modules stay: a second copy of the harness next to the first
    would not share its state (which code gets schedule points, for one).
    """
    (tmp_path / "scenarios.py").write_text(SCENARIOS, encoding="utf-8")
    (tmp_path / "threads.py").write_text(THREAD_SCENARIOS, encoding="utf-8")
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "racy_lib.py").write_text(RACY_LIB, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name != "interlace" and not name.startswith("interlace."):
            del sys.modules[name]


def invoke(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def token_of(report: str) -> str:
    match = re.search(r"interlace replay \S+ (il2\.[\w-]+)", report)
    assert match is not None, report
    return match.group(1)


@pytest.mark.usefixtures("project")
def test_explore_prints_the_report_on_stdout_and_a_summary_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "explore", "scenarios:lost_update", "--seed", "5")
    assert code == cli.EXIT_FINDINGS
    assert out.startswith("Failing schedule (")
    assert "Exception: AssertionError: lost an update: 1\n" in out
    assert "Label: needs await latency (1 deviation from stock order)\n" in out
    assert "  interlace.replay(scenarios.lost_update, 'il2." in out
    assert "  interlace replay scenarios:lost_update il2." in out
    # The user's traceback, with only the user's frames.
    assert re.search(r'File ".*scenarios\.py", line \d+, in lost_update\n', out)
    assert "interlace/" not in out.split("Traceback (most recent call last):")[1]
    summary = re.escape(cli.MSG_EXPLORE_FAILED).replace(r"\{article\}", "an")
    summary = re.sub(r"\\\{\w+(?::[^}]*)?\\\}", ".+", summary)
    assert re.fullmatch(f"interlace explore: {summary}\n", err)
    assert "seed 5" in err


@pytest.mark.usefixtures("project")
def test_explore_reports_a_deadlock_with_who_holds_what(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "explore", "scenarios.py:lock_order", "--seed", "1")
    assert code == cli.EXIT_FINDINGS
    assert "\nDeadlock:\n" in out
    assert "waits on Lock second held by task 'Task-3'" in out
    assert "  interlace replay scenarios.py:lock_order il2." in out
    assert err.startswith("interlace explore: found a deadlock after 1 schedule (seed 1, ")


@pytest.mark.usefixtures("project")
def test_explore_without_a_failure_exits_0_with_only_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(
        capsys,
        "explore",
        "scenarios:correct",
        *("--seed", "2", "--max-schedules", "30", "--strategy", "random"),
    )
    assert code == cli.EXIT_CLEAN
    assert out == ""
    assert err.startswith("interlace explore: no failure in 30 schedules (seed 2, strategy ")


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize(
    ("target", "failure"),
    [
        ("scenarios:lost_update", "exception"),
        ("scenarios:lock_order", "deadlock"),
        ("scenarios:correct", None),
    ],
)
def test_explore_json_is_one_object_with_the_documented_keys(
    capsys: pytest.CaptureFixture[str], target: str, failure: str | None
) -> None:
    code, out, _ = invoke(
        capsys, "explore", target, "--seed", "3", "--max-schedules", "50", "--format", "json"
    )
    payload = json.loads(out)
    assert set(payload) == {
        "target",
        "error",
        "failure",
        "schedules",
        "exhausted",
        "space",
        "opaque",
        "uninstrumented",
        "strategy",
        "seed",
        "elapsed",
        "failure_index",
        "shard",
        "workers",
    }
    assert payload["target"] == target
    assert (payload["error"], payload["opaque"]) == (None, False)
    assert payload["seed"] == 3
    assert payload["strategy"].startswith("auto(")
    assert isinstance(payload["elapsed"], float)
    if failure is None:
        assert code == cli.EXIT_CLEAN
        assert payload["failure"] is None
        # Every schedule there is, fewer than the budget: the default stops there.
        assert payload["exhausted"]
        assert payload["schedules"] < 50
        return
    assert code == cli.EXIT_FINDINGS
    found = payload["failure"]
    assert set(found) == {
        "kind",
        "label",
        "token",
        "steps",
        "shrunk_from",
        "deviations",
        "report",
        "exception",
    }
    assert found["kind"] == failure
    assert found["report"].startswith("Failing schedule (")
    assert found["token"] in found["report"]
    assert found["steps"] <= found["shrunk_from"]
    expected = "AssertionError: lost an update: 1" if failure == "exception" else None
    assert found["exception"] == expected


@pytest.mark.usefixtures("project")
def test_explore_passes_the_engine_knobs_through(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = invoke(
        capsys,
        "explore",
        "scenarios:correct",
        "--strategy=random",
        "--max-steps=50",
        "--max-stall=0",
        "--max-schedules=3",
        "--seed=8",
        "--format=json",
    )
    payload = json.loads(out)
    assert code == cli.EXIT_CLEAN
    assert (payload["strategy"], payload["schedules"], payload["seed"]) == ("random", 3, 8)


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize(
    ("argv", "strategy"),
    [
        (["--strategy=exhaustive", "--bound=0"], "exhaustive(bound=0)"),
        (["--bound=1"], "auto(exhaustive(bound=1), random, random, random)"),
        (["--strategy=pct", "--depth=5"], "pct(depth=5)"),
    ],
)
def test_explore_passes_bound_and_depth_to_the_strategy(
    capsys: pytest.CaptureFixture[str], argv: list[str], strategy: str
) -> None:
    code, out, _ = invoke(
        capsys, "explore", "scenarios:correct", *argv, "--max-schedules=5", "--format=json"
    )
    assert code == cli.EXIT_CLEAN
    assert json.loads(out)["strategy"] == strategy


@pytest.mark.usefixtures("project")
def test_explore_max_time_reports_a_longer_schedule_as_a_hang(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, _ = invoke(capsys, "explore", "scenarios:a_minute", "--max-schedules=2")
    assert code == cli.EXIT_CLEAN
    code, out, err = invoke(
        capsys, "explore", "scenarios:a_minute", "--max-time=30", "--format=json"
    )
    assert code == cli.EXIT_FINDINGS, err
    assert json.loads(out)["failure"]["kind"] == "hang"


SLOW = """
import asyncio
import time

_clock = time.perf_counter  # taken at import: during an exploration it reads virtual time


async def computes_for_a_second_and_a_half():
    await asyncio.sleep(0)
    end = _clock() + 1.5
    while _clock() < end:  # one step of real work, which ends on its own
        pass
"""


@pytest.mark.parametrize("command", ["explore", "replay"])
def test_stall_timeout_stops_a_longer_step_and_the_message_names_it(
    project: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    (project / "slow.py").write_text(SLOW, encoding="utf-8")
    token = [encode_token(Settings(backend="asyncio"), ())] if command == "replay" else []
    code, out, err = invoke(
        capsys,
        command,
        "slow:computes_for_a_second_and_a_half",
        *token,
        "--stall-timeout=0.5",
        *(["--max-schedules=1"] if command == "explore" else []),
    )
    assert code == cli.EXIT_ERROR
    assert out == ""
    assert err.startswith(f"interlace {command}: error: task 'main' ran for 0.")
    assert err.endswith(MSG_STALL_TIMEOUT.format(timeout=0.5, more=2) + "\n")


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize("command", ["explore", "replay"])
@pytest.mark.parametrize("value", ["0", "-1", "x", "inf"])
def test_a_stall_timeout_that_is_not_a_positive_number_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: str, value: str
) -> None:
    token = ["il2.unused"] if command == "replay" else []
    code, out, err = invoke(capsys, command, "scenarios:correct", *token, "--stall-timeout", value)
    assert code == cli.EXIT_ERROR
    assert out == ""
    assert (
        f"interlace {command}: error: argument --stall-timeout: {value!r} is not a number of "
        "seconds > 0\n"
    ) in err


@pytest.mark.usefixtures("project")
def test_explore_max_seconds_stops_after_the_first_schedule_when_spent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = invoke(
        capsys, "explore", "scenarios:correct", "--max-seconds=0", "--format=json"
    )
    assert code == cli.EXIT_CLEAN
    assert json.loads(out)["schedules"] == 1


def test_the_printed_replay_line_replays_the_same_failure(project: Path) -> None:
    def interlace(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "interlace", *argv],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    found = interlace("explore", "scenarios:lost_update")
    assert found.returncode == cli.EXIT_FINDINGS, found.stderr
    line = re.search(r"^  (interlace replay .+)$", found.stdout, flags=re.MULTILINE)
    assert line is not None, found.stdout
    argv = line.group(1).split()
    assert argv[:3] == ["interlace", "replay", "scenarios:lost_update"]

    replayed = interlace(*argv[1:])
    assert replayed.returncode == cli.EXIT_FINDINGS, replayed.stderr
    # The same schedule step for step, the same exception; only "shrunk from" may differ.
    assert _steps(replayed.stdout) == _steps(found.stdout)
    assert len(_steps(found.stdout)) > 3
    assert "Exception: AssertionError: lost an update: 1\n" in replayed.stdout
    steps = len(_steps(found.stdout))
    expected = cli.MSG_REPLAY_FAILED.format(kind="exception", steps=f"{steps} steps")
    assert replayed.stderr == f"interlace replay: {expected}\n"


def _steps(report: str) -> list[str]:
    return re.findall(r"^ +\d+\. .*$", report, flags=re.MULTILINE)


@pytest.mark.usefixtures("project")
def test_replay_json_and_a_schedule_that_no_longer_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = invoke(capsys, "explore", "scenarios:lock_order", "--seed", "1")
    token = token_of(out)
    code, out, err = invoke(capsys, "replay", "scenarios:lock_order", token, "--format", "json")
    assert code == cli.EXIT_FINDINGS
    payload = json.loads(out)
    assert set(payload) == {"target", "token", "error", "failure"}
    assert (payload["target"], payload["token"]) == ("scenarios:lock_order", token)
    assert payload["error"] is None
    assert payload["failure"]["kind"] == "deadlock"

    code, out, err = invoke(capsys, "replay", "scenarios:correct", token)
    assert code == cli.EXIT_CLEAN
    assert out == ""
    # The deadlock is stock order, so the line also names the other cause it could have.
    stock = api.MSG_REPLAY_STOCK.format(where=api.MSG_EARLIER_STATE_GLOBALS)
    passed = cli.MSG_REPLAY_PASSED.format(spec="scenarios:correct")
    assert err == f"interlace replay: {passed}. {stock}\n"


@pytest.mark.usefixtures("project")
def test_a_replay_that_diverges_exits_2_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = invoke(capsys, "explore", "scenarios:lost_update", "--seed", "5")
    code, out, err = invoke(capsys, "replay", "scenarios:short", token_of(out))
    assert code == cli.EXIT_ERROR
    assert out == ""
    assert err.startswith("interlace replay: error: replay diverged: ")
    assert "Likely causes:" in err


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["explore", "scenarios"],
            "interlace explore: error: " + cli.MSG_BAD_SPEC.format(spec="scenarios"),
        ),
        (
            ["explore", "scenarios:"],
            "interlace explore: error: " + cli.MSG_BAD_SPEC.format(spec="scenarios:"),
        ),
        (
            ["explore", "nosuchmodule:main"],
            "interlace explore: error: cannot import 'nosuchmodule': no module named "
            "'nosuchmodule' (searched the current directory ",
        ),
        (
            ["explore", "missing/file.py:main"],
            "interlace explore: error: "
            + cli.MSG_NO_FILE.format(path="missing/file.py", cwd="").rsplit(" ", 1)[0],
        ),
        (
            ["explore", "scenarios:nothing"],
            "interlace explore: error: "
            + cli.MSG_NO_FUNCTION.format(
                module="scenarios",
                name="nothing",
                available=cli.MSG_AVAILABLE.format(
                    names="a_minute, correct, lock_order, lost_update, needs_an_argument, plain, "
                    "short"
                ),
            ),
        ),
        (
            ["replay", "scenarios:generator", "il2.x"],
            "interlace replay: error: the target generator is a generator function",
        ),
        (
            ["explore", "scenarios:needs_an_argument"],
            "interlace explore: error: the target needs_an_argument takes required parameters",
        ),
        (
            ["explore", "threads:needs_a_config"],
            "interlace explore: error: the target needs_a_config takes required parameters "
            "(config): explore() calls it with no arguments once per schedule; wrap it, e.g. "
            "'def scenario(): needs_a_config(...)', and explore the wrapper",
        ),
        (
            ["replay", "scenarios:short", "not-a-token"],
            "interlace replay: error: replay token 'not-a-token' does not start with 'il2.'",
        ),
    ],
)
def test_mistakes_exit_2_with_a_message_and_no_traceback(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, err = invoke(capsys, *argv)
    assert code == cli.EXIT_ERROR
    assert out == ""
    assert err.startswith(expected)
    assert "Traceback" not in err


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--max-schedules", "0"], "argument --max-schedules: '0' is not a whole number >= 1"),
        (["--seed", "-3"], "argument --seed: '-3' is not a whole number >= 0"),
        (["--max-stall", "soon"], "argument --max-stall: 'soon' is not a number of seconds >= 0"),
        (["--jitter", "0.01"], "argument --jitter: " + cli.MSG_JITTER_FLAG.format(value="0.01")),
        (["--max-time", "-1"], "argument --max-time: '-1' is not a number of seconds >= 0"),
        (
            ["--max-seconds", "inf"],
            "argument --max-seconds: 'inf' is not a number of seconds >= 0",
        ),
        (["--bound", "-1"], "argument --bound: '-1' is not a whole number >= 0"),
        (["--depth", "0"], "argument --depth: '0' is not a whole number >= 1"),
        (["--strategy", "bfs"], "argument --strategy: invalid choice: 'bfs'"),
        (["--format", "xml"], "argument --format: invalid choice: 'xml'"),
    ],
)
def test_bad_flags_are_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, err = invoke(capsys, "explore", "scenarios:correct", *argv)
    assert code == cli.EXIT_ERROR
    assert out == ""
    assert f"interlace explore: error: {expected}" in err


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize("command", ["explore", "replay"])
@pytest.mark.parametrize("flag", [" , ", "httpx;anyio", "httpx,my lib"])
def test_a_malformed_instrument_is_refused_as_the_pytest_plugin_refuses_it(
    capsys: pytest.CaptureFixture[str], command: str, flag: str
) -> None:
    token = ["il2.unused"] if command == "replay" else []
    code, out, err = invoke(
        capsys, command, "threads:check_then_insert", *token, "--instrument", flag
    )
    assert code == cli.EXIT_ERROR
    assert out == ""
    expected = plugin.MSG_NOT_MODULES.format(
        setting="--instrument",
        value=flag,
        source=plugin.SOURCE_COMMAND_LINE,
        example=plugin._TEXT_MODULES_EXAMPLE,
    )
    assert err == f"interlace {command}: error: {expected}\n"


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize("command", ["explore", "replay"])
@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("racy_lib,threading", "threading"),
        ("interlace.harness._threads", "interlace.harness._threads"),
    ],
)
def test_instrumenting_a_module_that_cannot_be_instrumented_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: str, flag: str, name: str
) -> None:
    token = ["il2.unused"] if command == "replay" else []
    code, out, err = invoke(
        capsys, command, "threads:check_then_insert", *token, "--instrument", flag
    )
    assert code == cli.EXIT_ERROR
    assert out == ""
    expected = plugin.MSG_NOT_INSTRUMENTABLE.format(
        setting="--instrument",
        value=flag,
        source=plugin.SOURCE_COMMAND_LINE,
        name=name,
        reason=uninstrumentable(name),
    )
    assert f"interlace {command}: error: {expected}\n" in err


def test_an_import_error_in_the_users_module_shows_their_traceback(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "broken.py").write_text("import asyncio\n\n1 / 0\n", encoding="utf-8")
    code, _, err = invoke(capsys, "explore", "broken:main")
    assert code == cli.EXIT_ERROR
    assert err.startswith(
        "interlace explore: error: "
        + cli.MSG_IMPORT_RAISED.format(module="broken", error="ZeroDivisionError")
    )
    assert re.search(r'File ".*broken\.py", line 3, in <module>\n', err)
    assert err.endswith("ZeroDivisionError: division by zero\n")
    assert "importlib" not in err


@pytest.mark.parametrize("spec", ["unparsable:main", "unparsable.py:main"])
def test_a_syntax_error_in_the_users_module_shows_the_line_and_the_caret(
    project: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    (project / "unparsable.py").write_text("import asyncio\n\ndef main(:\n    pass\n")
    code, _, err = invoke(capsys, "explore", spec)
    assert code == cli.EXIT_ERROR
    module = spec.partition(":")[0]
    header = "interlace explore: error: " + cli.MSG_IMPORT_RAISED.format(
        module=module, error="SyntaxError"
    )
    path = project / "unparsable.py"
    # No traceback: the import itself raised it, and Python shows none either.
    assert err.splitlines() == [
        header,
        f'  File "{path.resolve()}", line 3',
        "    def main(:",
        "             ^",
        "SyntaxError: invalid syntax",
    ]


def test_a_syntax_error_in_a_module_the_target_imports_shows_the_users_frames_and_the_caret(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "importer.py").write_text("import half_written\n")
    (project / "half_written.py").write_text("value = (1,\n")
    code, _, err = invoke(capsys, "explore", "importer:main")
    assert code == cli.EXIT_ERROR
    assert err.splitlines() == [
        "interlace explore: error: "
        + cli.MSG_IMPORT_RAISED.format(module="importer", error="SyntaxError"),
        "Traceback (most recent call last):",
        f'  File "{(project / "importer.py").resolve()}", line 1, in <module>',
        "    import half_written",
        f'  File "{(project / "half_written.py").resolve()}", line 1',
        "    value = (1,",
        "            ^",
        "SyntaxError: '(' was never closed",
    ]


MISUSED = """
import asyncio


async def work():
    await asyncio.sleep(0)


def returns_a_coroutine():
    return work()


async def starts_a_subprocess():
    await asyncio.create_subprocess_exec("true")


def runs_its_own_loop():
    async def main():
        await asyncio.gather(work(), work())

    asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (
            "returns_a_coroutine",
            "the target returns_a_coroutine is not an async def function, but it returned a "
            "coroutine (work): interlace ran it as a plain function",
        ),
        (
            "starts_a_subprocess",
            "loop.subprocess_exec() was called to start a subprocess (by task 'main', at "
            "misused.py:",
        ),
        (
            "runs_its_own_loop",
            "the plain function runs_its_own_loop runs an event loop itself (asyncio.run, "
            "asyncio.Runner or loop.run_until_complete, at misused.py:21)",
        ),
    ],
)
@pytest.mark.parametrize("output", ["text", "json"])
def test_a_target_interlace_cannot_explore_exits_2_without_a_failure_or_replay_line(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    function: str,
    expected: str,
    output: str,
) -> None:
    (project / "misused.py").write_text(MISUSED, encoding="utf-8")
    code, out, err = invoke(
        capsys, "explore", f"misused:{function}", "--seed", "1", "--format", output
    )
    assert code == cli.EXIT_ERROR
    assert err.startswith(f"interlace explore: error: {expected}")
    assert err.count("\n") == 1  # one line: no report, no traceback, no replay token
    assert "il2." not in err
    if output == "text":
        assert out == ""
    else:  # an object whatever happened, for a CI step that parses stdout
        message = err.removeprefix("interlace explore: error: ").removesuffix("\n")
        assert json.loads(out) == {"target": f"misused:{function}", "error": message}


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["explore", "nowhere:scenario"], "cannot import 'nowhere'"),
        (["replay", "nowhere:scenario", "il2.eNpj4OCY4PeC_cAsnoYT57bwMgAALmgGGw"], "cannot"),
        (["replay", "scenarios:correct", "il2.not-a-token"], "replay token"),
    ],
)
def test_json_output_of_a_command_that_cannot_run_is_an_object_with_the_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    code, out, err = invoke(capsys, *argv, "--format", "json")
    assert code == cli.EXIT_ERROR
    payload = json.loads(out)
    assert payload["target"] == argv[1]
    assert payload["error"] == err.split(": error: ", 1)[1].removesuffix("\n")
    assert error in payload["error"]
    if argv[0] == "replay":
        assert payload["token"] == argv[2]


@pytest.mark.parametrize("subcommand", ["explore", "replay"])
def test_help_explains_every_flag(capsys: pytest.CaptureFixture[str], subcommand: str) -> None:
    assert cli.main([subcommand, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--format {text,json} text (default)" in text
    if subcommand == "explore":
        assert f"--strategy {{{STRATEGIES.replace(', ', ',')}}} how schedules are chosen" in text
        assert "--max-schedules N the most schedules to run" in text
        assert "--seed N makes the exploration repeatable" in text
        assert "--max-steps N steps one schedule may take" in text
        assert "--max-stall SECONDS seconds the event loop may stall in one schedule" in text
        assert "--jitter" not in text
        assert "--instrument NAMES for a plain (threaded) function: modules or paths" in text
        assert "a plain function runs with every thread it starts under control" in text
        assert "--stall-timeout SECONDS real seconds one step may run without" in text
    else:
        assert "TOKEN the replay token" in text
        assert "--instrument NAMES the same --instrument the exploration had" in text
        assert "--stall-timeout SECONDS real seconds one step may run without" in text
        assert "(the token does not carry it)" in text
    assert "MODULE:FUNCTION the function to run, async def or plain (threads):" in text


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_starts_late_and_redraws_at_most_ten_times_a_second() -> None:
    now = [0.0]
    stream = _Terminal()
    progress = cli.Progress(stream, "interlace explore", clock=lambda: now[0])
    for done in range(1, 65):
        now[0] = done / 32  # a schedule every 1/32 s (exact in binary) for two seconds
        progress(done, 1000)
    progress.finish()
    frames = stream.getvalue().split("\r")
    # Nothing for the first half second, then one frame per 0.1 s at most (every 4th run).
    assert frames[1:-1] == [
        f"interlace explore: {n}/1000 schedules, 32 schedules/s, {n / 32:.1f} s elapsed, "
        f"~{(1000 - n) / 32:.1f} s left\x1b[K"
        for n in range(16, 65, 4)
    ]
    assert frames[-1] == "\x1b[K"


def test_progress_time_left_is_the_sooner_of_the_schedules_and_max_seconds() -> None:
    now = [0.0]
    stream = _Terminal()
    progress = cli.Progress(stream, "p", max_seconds=3.0, clock=lambda: now[0])
    now[0] = 1.0
    progress(10, 1000)  # 990 more at 10/s would take 99 s; max_seconds ends it in 2 s
    now[0] = 2.0
    progress(990, 1000)  # 10 more at 495/s: well before max_seconds
    assert stream.getvalue().split("\r")[1:] == [
        "p: 10/1000 schedules, 10 schedules/s, 1.0 s elapsed, ~2.0 s left\x1b[K",
        "p: 990/1000 schedules, 495 schedules/s, 2.0 s elapsed, ~0.0 s left\x1b[K",
    ]


def test_progress_is_silent_when_stderr_is_not_a_terminal() -> None:
    now = [0.0]
    stream = io.StringIO()
    progress = cli.Progress(stream, "interlace explore", clock=lambda: now[0])
    for done in range(1, 301):
        now[0] = done * 0.01
        progress(done, 1000)
    progress.finish()
    assert stream.getvalue() == ""


# -- plain functions: threads under control -------------------------------------------------------


@pytest.mark.usefixtures("project")
def test_explore_finds_a_race_between_the_threads_of_a_plain_function(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "explore", "threads:check_then_insert", "--seed", "5")
    assert code == cli.EXIT_FINDINGS
    assert out.startswith("Failing schedule (")
    assert re.search(
        r"^ +\d+\. Thread-1 \(<lambda>\): ran threads\.py:[\d-]+ -> threads\.py:\d+ \(preempted\)$",
        out,
        re.M,
    )
    assert "<- preempts Thread-1 (<lambda>) (thread preemption)" in out
    assert "Exception: AssertionError: created 2 times\n" in out
    assert "Label: needs thread preemption (1 deviation from stock order)\n" in out
    assert "  interlace.replay(threads.check_then_insert, 'il2." in out
    assert re.search(r"^  interlace replay threads:check_then_insert il2\.[\w-]+$", out, re.M)
    assert re.search(r'File ".*threads\.py", line \d+, in check_then_insert\n', out)
    assert "interlace/" not in out.split("Traceback (most recent call last):")[1]
    assert err.startswith("interlace explore: found an exception after ")
    assert "(seed 5, strategy auto(" in err


@pytest.mark.usefixtures("project")
def test_explore_reports_a_lock_order_deadlock_between_threads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "explore", "threads.py:lock_order", "--seed", "1")
    assert code == cli.EXIT_FINDINGS
    assert "\nDeadlock:\n" in out
    assert re.search(
        r"^    Thread-1 \(one\) at threads\.py:\d+ waits for Lock threads\.SECOND, held by "
        r"Thread-2 \(two\)$",
        out,
        re.M,
    )
    assert re.search(
        r"^    Thread-2 \(two\) at threads\.py:\d+ waits for Lock threads\.FIRST, held by "
        r"Thread-1 \(one\)$",
        out,
        re.M,
    )
    assert "  Wait-for cycle: Thread-1 (one) -> Thread-2 (two) -> Thread-1 (one)\n" in out
    assert "Label: needs thread preemption" in out
    assert "  interlace replay threads.py:lock_order il2." in out
    assert err.startswith("interlace explore: found a deadlock after ")


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize(
    ("target", "failure"),
    [
        ("threads:check_then_insert", "exception"),
        ("threads:lock_order", "deadlock"),
        ("threads:locked_insert", None),
    ],
)
def test_explore_json_for_a_plain_function(
    capsys: pytest.CaptureFixture[str], target: str, failure: str | None
) -> None:
    code, out, _ = invoke(
        capsys, "explore", target, "--seed", "3", "--max-schedules", "60", "--format", "json"
    )
    payload = json.loads(out)
    assert set(payload) == {
        "target",
        "error",
        "failure",
        "schedules",
        "exhausted",
        "space",
        "opaque",
        "uninstrumented",
        "strategy",
        "seed",
        "elapsed",
        "failure_index",
        "shard",
        "workers",
    }
    assert (payload["target"], payload["seed"]) == (target, 3)
    if failure is None:
        assert code == cli.EXIT_CLEAN
        assert payload["failure"] is None
        assert payload["schedules"] == 60 or payload["exhausted"]
        return
    assert code == cli.EXIT_FINDINGS
    found = payload["failure"]
    assert (found["kind"], found["label"], found["deviations"]) == (
        failure,
        "needs thread preemption",
        1,
    )
    assert found["token"] in found["report"]
    expected = "AssertionError: created 2 times" if failure == "exception" else None
    assert found["exception"] == expected


@pytest.mark.usefixtures("project")
def test_a_threads_token_replays_and_json_names_the_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = invoke(capsys, "explore", "threads:check_then_insert", "--seed", "2")
    token = token_of(out)
    code, out, err = invoke(capsys, "replay", "threads:check_then_insert", token, "--format=json")
    assert code == cli.EXIT_FINDINGS
    payload = json.loads(out)
    assert (payload["target"], payload["token"]) == ("threads:check_then_insert", token)
    assert payload["failure"]["kind"] == "exception"
    assert payload["failure"]["exception"] == "AssertionError: created 2 times"

    # The fixed version (a lock around the check and the insert) passes the same schedule.
    code, out, err = invoke(capsys, "replay", "threads:locked_insert", token)
    assert (code, out) == (cli.EXIT_CLEAN, "")
    assert err == (
        "interlace replay: " + cli.MSG_REPLAY_PASSED.format(spec="threads:locked_insert") + "\n"
    )


def test_instrument_gives_a_library_schedule_points_and_the_replay_line_repeats_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = invoke(capsys, "explore", "threads:library_race", "--seed", "4")
    assert (code, out) == (cli.EXIT_CLEAN, "")  # racy_lib is in site-packages: no points
    # ... so the space explored is not the program's: the summary says which module to add.
    assert "explored completely" not in err
    how = api.MSG_UNINSTRUMENTED_API.format(names="'racy_lib'", flags="--instrument racy_lib")
    note = api.MSG_UNINSTRUMENTED.format(modules="racy_lib", packages="racy_lib", how=how)
    assert err.rstrip("\n").endswith(f" s); {note}")

    code, out, _ = invoke(
        capsys, "explore", "threads:library_race", "--seed", "4", "--instrument", "racy_lib"
    )
    assert code == cli.EXIT_FINDINGS
    assert re.search(r"Thread-1 \(<lambda>\): ran [^>]+ -> site-packages/racy_lib\.py:\d+", out)
    token = token_of(out)
    assert f"  interlace replay threads:library_race {token} --instrument racy_lib\n" in out
    assert f"  interlace.replay(threads.library_race, '{token}', instrument=['racy_lib'])\n" in (
        out
    )

    # The printed line, run as printed, replays the failure step for step.
    line = re.search(r"^  (interlace replay .+)$", out, flags=re.MULTILINE)
    assert line is not None
    replayed = subprocess.run(
        [sys.executable, "-m", "interlace", *line.group(1).split()[1:]],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert replayed.returncode == cli.EXIT_FINDINGS, replayed.stderr
    assert _steps(replayed.stdout) == _steps(out)

    # Given twice, or as a list: the same names.
    code, again, _ = invoke(
        capsys,
        "explore",
        "threads:library_race",
        "--seed=4",
        "--instrument=racy_lib,other_lib",
        "--instrument",
        "third",
    )
    assert code == cli.EXIT_FINDINGS
    assert "--instrument racy_lib,other_lib,third\n" in again


TIME = r"(?:\d+ min \d\d s|[\d.]+ s)"
"""A duration as the progress line writes it: ``2.9 s``, or ``1 min 09 s`` from a minute up."""


@pytest.mark.usefixtures("project")
def test_progress_counts_the_schedules_of_a_threads_exploration(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = cli.Progress.__init__

    def immediate(self: cli.Progress, stream: Any, prefix: str, **_: Any) -> None:
        original(self, stream, prefix, delay=0.0, interval=0.0)

    monkeypatch.setattr(cli.Progress, "__init__", immediate)
    stream = _Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    code = cli.main(["explore", "threads:locked_insert", "--seed=1", "--max-schedules=25"])
    assert code == cli.EXIT_CLEAN
    frames = stream.getvalue().split("\r")
    # The rate and times depend on the machine: the counts are what this test pins.
    assert [frame.partition(",")[0] for frame in frames[1:-1]] == [
        f"interlace explore: {n}/25 schedules" for n in range(1, 26)
    ]
    assert all(
        re.fullmatch(rf"[^,]+, [\d.]+ schedules/s, {TIME} elapsed, ~{TIME} left\x1b\[K", f)
        for f in frames[1:-1]
    ), frames
    assert frames[-1].startswith("\x1b[K")
    assert "interlace explore: no failure in 25 schedules" in frames[-1]


LEFT_BEHIND = """
import asyncio
from concurrent.futures import ThreadPoolExecutor

runs = []
lock = asyncio.Lock()
pool = ThreadPoolExecutor(max_workers=1)
pool.submit(int).result()  # its worker starts now, outside any exploration


async def module_state():
    runs.append(1)
    await asyncio.sleep(0)
    assert len(runs) == 1, "ran before"


async def module_lock():
    async def critical():
        async with lock:
            await asyncio.sleep(0)

    await asyncio.gather(critical(), critical())


async def module_pool():
    await asyncio.get_running_loop().run_in_executor(pool, int)
"""


@pytest.fixture
def left_behind(project: Path) -> Iterator[Path]:
    (project / "left_behind.py").write_text(LEFT_BEHIND, encoding="utf-8")
    yield project
    module = sys.modules.get("left_behind")
    if module is not None:
        module.pool.shutdown()


@pytest.mark.usefixtures("left_behind")
@pytest.mark.parametrize(
    ("function", "note"),
    [
        (
            "module_state",
            api.MSG_EARLIER_STATE.format(
                where=api.MSG_EARLIER_STATE_GLOBALS, subject=api.MSG_IN_FUNCTION
            ),
        ),
        (
            "module_lock",
            api.MSG_OTHER_LOOP.format(made=api.MSG_OTHER_LOOP_BEFORE, subject=api.MSG_IN_FUNCTION),
        ),
    ],
    ids=["state", "lock"],
)
def test_explore_says_when_a_failure_depends_on_what_earlier_schedules_left(
    capsys: pytest.CaptureFixture[str], function: str, note: str
) -> None:
    code, out, err = invoke(capsys, "explore", f"left_behind:{function}", "--seed", "1")
    assert code == cli.EXIT_FINDINGS
    assert "Label: fails under stock order (0 deviations from stock order)\n" in out
    assert out.count(note) == 1
    assert f"\n\n{note}\n\nTraceback (most recent call last):\n" in out
    assert err.startswith("interlace explore: found an exception after 2 schedules (seed 1, ")

    sys.modules["left_behind"].runs.clear()  # as in a new process
    code, out, err = invoke(capsys, "explore", f"left_behind:{function}", "--format=json")
    assert json.loads(out)["failure"]["report"].endswith("\n\n" + note)


@pytest.mark.usefixtures("left_behind")
def test_a_passing_replay_of_a_stock_order_token_names_state_left_by_earlier_schedules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = invoke(capsys, "explore", "left_behind:module_state", "--seed", "1")
    token = token_of(out)
    sys.modules["left_behind"].runs.clear()  # as in a new process
    code, out, err = invoke(capsys, "replay", "left_behind:module_state", token)
    assert code == cli.EXIT_CLEAN
    passed = cli.MSG_REPLAY_PASSED.format(spec="left_behind:module_state")
    stock = api.MSG_REPLAY_STOCK.format(where=api.MSG_EARLIER_STATE_GLOBALS)
    assert err == f"interlace replay: {passed}. {stock}\n"


@pytest.mark.usefixtures("left_behind")
def test_explore_says_when_executor_jobs_ran_outside_its_control(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(
        capsys, "explore", "left_behind:module_pool", "--seed", "1", "--max-schedules", "5"
    )
    assert (code, out) == (cli.EXIT_CLEAN, "")
    opaque = api.MSG_OPAQUE.format(when="the exploration", subject=api.MSG_IN_FUNCTION)
    assert err.startswith("interlace explore: no failure in 5 schedules (seed 1, ")
    assert err.endswith(f" s); {opaque}\n")

    code, out, err = invoke(capsys, "explore", "left_behind:module_pool", "--format=json")
    assert json.loads(out)["opaque"] is True
