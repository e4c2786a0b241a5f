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

import pytest

from interlace.harness import cli

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


def plain():
    pass


def generator():
    yield


async def needs_an_argument(value):
    pass
"""

STRATEGIES = "auto, random, pct, delay, exhaustive"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project directory as the current directory, with ``scenarios.py`` in it.

    The modules the command imports are forgotten afterwards, so each test imports its own.
    """
    (tmp_path / "scenarios.py").write_text(SCENARIOS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def invoke(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def token_of(report: str) -> str:
    match = re.search(r"interlace replay \S+ (il1\.[\w-]+)", report)
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
    assert "  interlace.replay(scenarios.lost_update, 'il1." in out
    assert "  interlace replay scenarios:lost_update il1." in out
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
    assert "  interlace replay scenarios.py:lock_order il1." in out
    assert err.startswith("interlace explore: found a deadlock after 1 schedule (seed 1, ")


@pytest.mark.usefixtures("project")
def test_explore_without_a_failure_exits_0_with_only_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(
        capsys, "explore", "scenarios:correct", "--seed", "2", "--max-schedules", "30"
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
        "failure",
        "schedules",
        "exhausted",
        "strategy",
        "seed",
        "elapsed",
    }
    assert payload["target"] == target
    assert payload["seed"] == 3
    assert payload["strategy"].startswith("auto(")
    assert isinstance(payload["elapsed"], float)
    if failure is None:
        assert code == cli.EXIT_CLEAN
        assert payload["failure"] is None
        assert payload["schedules"] == 50
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
        "--jitter=0",
        "--max-schedules=3",
        "--seed=8",
        "--format=json",
    )
    payload = json.loads(out)
    assert code == cli.EXIT_CLEAN
    assert (payload["strategy"], payload["schedules"], payload["seed"]) == ("random", 3, 8)


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
    expected = cli.MSG_REPLAY_FAILED.format(kind="exception", steps=steps)
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
    assert set(payload) == {"target", "token", "failure"}
    assert (payload["target"], payload["token"]) == ("scenarios:lock_order", token)
    assert payload["failure"]["kind"] == "deadlock"

    code, out, err = invoke(capsys, "replay", "scenarios:correct", token)
    assert code == cli.EXIT_CLEAN
    assert out == ""
    assert (
        err == "interlace replay: " + cli.MSG_REPLAY_PASSED.format(spec="scenarios:correct") + "\n"
    )


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
                    names="correct, lock_order, lost_update, needs_an_argument, plain, short"
                ),
            ),
        ),
        (
            ["replay", "scenarios:generator", "il1.x"],
            "interlace replay: error: the target generator is a generator function",
        ),
        (
            ["explore", "scenarios:needs_an_argument"],
            "interlace explore: error: the target needs_an_argument takes required parameters",
        ),
        (
            ["replay", "scenarios:short", "not-a-token"],
            "interlace replay: error: replay token 'not-a-token' does not start with 'il1.'",
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
        (["--jitter", "soon"], "argument --jitter: 'soon' is not a number of seconds >= 0"),
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


@pytest.mark.parametrize("subcommand", ["explore", "replay"])
def test_help_explains_every_flag(capsys: pytest.CaptureFixture[str], subcommand: str) -> None:
    assert cli.main([subcommand, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "MODULE:FUNCTION the function to run:" in text
    assert "--format {text,json} text (default)" in text
    if subcommand == "explore":
        assert f"--strategy {{{STRATEGIES.replace(', ', ',')}}} how schedules are chosen" in text
        assert "--max-schedules N the most schedules to run" in text
        assert "--seed N makes the exploration repeatable" in text
        assert "--max-steps N steps one schedule may take" in text
        assert "--jitter SECONDS timers due within" in text
    else:
        assert "TOKEN the replay token" in text


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
    assert frames[1:-1] == [f"interlace explore: {n}/1000 schedules" for n in range(16, 65, 4)]
    assert frames[-1] == "\x1b[K"


def test_progress_is_silent_when_stderr_is_not_a_terminal() -> None:
    now = [0.0]
    stream = io.StringIO()
    progress = cli.Progress(stream, "interlace explore", clock=lambda: now[0])
    for done in range(1, 301):
        now[0] = done * 0.01
        progress(done, 1000)
    progress.finish()
    assert stream.getvalue() == ""
