"""explore(..., workers=N) and shards: the same answer for every split of the work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import scale_programs as programs

import interlace
from interlace._core import split
from interlace.cli import main as cli_main
from interlace.errors import ConfigError
from interlace.harness import _shards, _workers
from interlace.harness.api import MSG_BAD_SHARD, SHARD_SEED
from interlace.harness.pytest_plugin import (
    MSG_NOT_SHARD,
    MSG_WORKERS,
    SOURCE_COMMAND_LINE,
    SOURCE_MARKER,
    effective_workers,
)

HERE = Path(__file__).parent


@pytest.fixture
def early_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers start after 3 schedules instead of 50, so that small spaces use them."""
    monkeypatch.setattr(split, "IN_PROCESS_SCHEDULES", 3)


def _answer(exploration: interlace.Exploration) -> tuple[Any, ...]:
    failure = exploration.failure
    return (
        failure.token if failure is not None else None,
        exploration.failure_index,
        exploration.schedules,
        exploration.exhausted,
    )


CASES = [
    (programs.reversed_order, "exhaustive"),
    (programs.reversed_order, "auto"),
    (programs.reversed_order, "random"),
    (programs.reversed_order, "pct"),
    (programs.ordered_finish, "exhaustive"),
    (programs.ordered_finish, "auto"),
    (programs.rare_race, "delay"),
    (programs.threads_lost_update, "exhaustive"),
]


@pytest.mark.parametrize(("target", "strategy"), CASES)
@pytest.mark.usefixtures("early_workers")
def test_one_two_and_three_workers_report_the_same_failure_and_verdict(
    target: Callable[[], Any], strategy: str
) -> None:
    answers = [
        _answer(
            interlace.explore(
                target, strategy=strategy, seed=5, max_schedules=400, max_stall=0, workers=n
            )
        )
        for n in (1, 2, 3)
    ]
    assert answers[2] == answers[1]
    if strategy == "exhaustive":
        # One process reduces partial orders where the Python has footprints (3.12+),
        # which saves runs: the runs counted and the failure's index among them differ.
        assert (answers[1][0], answers[1][3]) == (answers[0][0], answers[0][3])
    else:
        assert answers[1] == answers[0]


def test_the_known_race_is_found_past_the_first_level_and_the_correct_program_exhausted() -> None:
    # What the test above compares: a failure deep in the bounded space, and an exhausted
    # space with none (else the comparison could pass on two empty answers).
    found = interlace.explore(
        programs.reversed_order, strategy="exhaustive", seed=5, max_stall=0, workers=2
    )
    assert found.failure is not None
    assert found.failure_index is not None
    assert found.failure_index > 10
    correct = interlace.explore(
        programs.ordered_finish, strategy="exhaustive", seed=5, max_stall=0, workers=2
    )
    assert correct.failure is None
    assert correct.exhausted


@pytest.mark.usefixtures("early_workers")
def test_pct_reruns_a_schedule_made_before_a_longer_run_taught_it_the_run_length() -> None:
    # PCT's change points depend on the longest run so far: a chooser made while an earlier,
    # longer run was in flight must be run again with what one process would have known.
    serial = interlace.explore(programs.busy_pipeline, strategy="pct", seed=2, max_schedules=60)
    parallel = interlace.explore(
        programs.busy_pipeline, strategy="pct", seed=2, max_schedules=60, workers=2
    )
    assert _answer(parallel) == _answer(serial)


def test_an_exploration_that_ends_within_the_first_schedules_starts_no_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(_workers, "worker_pool", refuse)
    exploration = interlace.explore(programs.locked_update, strategy="exhaustive", workers=4)
    assert exploration.exhausted
    assert exploration.schedules < split.IN_PROCESS_SCHEDULES


def test_a_function_defined_inside_another_is_refused_with_workers_naming_it() -> None:
    async def local_target() -> None:
        pass

    with pytest.raises(ConfigError) as caught:
        interlace.explore(local_target, workers=2)
    message = str(caught.value)
    assert "workers=2 (explore() argument)" in message
    assert "local_target" in message
    assert "defined inside another function" in message
    assert "or explore with workers=1" in message


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
def test_a_bad_workers_value_is_refused(value: object) -> None:
    with pytest.raises(ConfigError, match=r"workers=.* \(explore\(\) argument\) is invalid"):
        interlace.explore(programs.locked_update, workers=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [(3, 2), (0, 2), ("a", "b"), (1,), "3/2", "0/2", "a/b"])
def test_a_bad_shard_is_refused_naming_the_value(value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        interlace.explore(programs.locked_update, shard=value)  # type: ignore[arg-type]
    assert str(caught.value) == MSG_BAD_SHARD.format(value=value, source="(explore() argument)")


def _descendants(root: int) -> dict[int, int]:
    """Every live process under ``root``: pid -> parent pid."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = ppid
                frontier.append(pid)
    return found


def _alive(pids: set[int]) -> set[int]:
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in pids if _exists(pid)}
        time.sleep(0.1)
    return alive


def _exists(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


LONG = textwrap.dedent(
    """
    import sys
    import interlace, scale_programs
    interlace.explore(
        scale_programs.busy_pipeline, strategy="random", seed=1, max_schedules=10**7,
        workers=2, {extra}
    )
    print("returned", flush=True)
    """
)

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _start(extra: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", LONG.format(extra=extra)],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _workers_of(process: subprocess.Popen[str]) -> set[int]:
    """Wait until ``process`` runs its two workers (and the forkserver); every descendant."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = _descendants(process.pid)
        if len(found) >= 3:
            return set(found)
        assert process.poll() is None, process.communicate()
        time.sleep(0.1)
    raise AssertionError("the workers did not start")


@needs_proc
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_end_every_worker(signum: int) -> None:
    process = _start()
    pids = _workers_of(process)
    os.killpg(process.pid, signum)  # a Ctrl-C reaches the whole process group
    process.communicate(timeout=60)
    assert process.returncode != 0
    assert _alive(pids) == set()


@needs_proc
def test_max_seconds_ends_the_exploration_and_every_worker() -> None:
    process = _start("max_seconds=3")
    pids = _workers_of(process)
    out, err = process.communicate(timeout=120)
    assert "returned" in out, err
    assert _alive(pids) == set()


@needs_proc
def test_workers_die_with_an_exploring_process_killed_outright() -> None:
    # pytest-timeout's thread method ends the process with os._exit: nothing cleans up.
    process = _start()
    pids = _workers_of(process)
    process.kill()
    process.communicate(timeout=60)
    assert _alive(pids) == set()


@needs_proc
@pytest.mark.parametrize("method", ["signal", "thread"])
def test_pytest_timeout_leaves_no_worker(pytester: pytest.Pytester, method: str) -> None:
    pids_file = pytester.path / "pids.txt"
    pytester.makepyfile(
        test_long=f"""
        import os, sys
        import pytest
        sys.path.insert(0, {str(HERE)!r})
        import interlace, scale_programs

        def record(done, total):
            with open({str(pids_file)!r}, "a") as out:
                for entry in os.listdir("/proc/self/task"):
                    pass
                out.write(f"{{os.getpid()}}\\n")

        @pytest.mark.timeout(8, method={method!r})
        def test_long():
            interlace.explore(
                scale_programs.busy_pipeline, strategy="random", seed=1,
                max_schedules=10**7, workers=2, progress=record,
            )
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "timeout", "-q", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = _workers_of(process)
    out, _ = process.communicate(timeout=120)
    assert "Timeout" in out
    assert _alive(pids) == set()


def _merged(target: Callable[[], Any]) -> _shards.Verdict:
    payloads = [
        _shards.report_payload(
            "t",
            interlace.explore(
                target, strategy="exhaustive", seed=5, max_stall=0, shard=(k, 3), workers=2
            ),
            1000,
        )
        for k in (1, 2, 3)
    ]
    (verdict,) = _shards.merge_reports(payloads)
    return verdict


@pytest.mark.usefixtures("early_workers")
def test_workers_and_three_merged_shards_agree_on_the_failure_and_the_exhausted_verdict() -> None:
    racy = [
        interlace.explore(
            programs.reversed_order, strategy="exhaustive", seed=5, max_stall=0, workers=n
        )
        for n in (1, 2, 3)
    ]
    tokens = {e.failure.token for e in racy if e.failure is not None}
    assert len(tokens) == 1
    assert racy[1].failure_index == racy[2].failure_index
    merged = _merged(programs.reversed_order)
    assert merged.outcome == "failed"
    assert merged.failure is not None
    assert merged.failure["token"] in tokens
    # The index among the runs of a search without partial-order reduction, as the
    # workers' and the shards' are.
    assert merged.failure_index == racy[1].failure_index

    correct = [
        interlace.explore(
            programs.ordered_finish, strategy="exhaustive", seed=5, max_stall=0, workers=n
        )
        for n in (1, 2, 3)
    ]
    assert [(e.failure, e.exhausted) for e in correct] == [(None, True)] * 3
    assert _merged(programs.ordered_finish).outcome == "exhausted"


def test_merge_names_the_missing_shards_and_claims_no_exhaustion_without_them() -> None:
    payloads = [
        _shards.report_payload(
            "t",
            interlace.explore(programs.ordered_finish, strategy="exhaustive", shard=(k, 3)),
            1000,
        )
        for k in (1, 3)
    ]
    (verdict,) = _shards.merge_reports(payloads)
    assert verdict.outcome == "incomplete"
    assert verdict.missing == [2]
    assert verdict.line == _shards.MSG_INCOMPLETE.format(name="t", missing="2", total=3)


def test_merge_refuses_shards_of_different_seeds() -> None:
    payloads = [
        _shards.report_payload(
            "t",
            interlace.explore(programs.ordered_finish, seed=k, max_schedules=20, shard=(k, 2)),
            20,
        )
        for k in (1, 2)
    ]
    (verdict,) = _shards.merge_reports(payloads)
    assert verdict.outcome == "mixed"
    assert verdict.line == _shards.MSG_MIXED.format(name="t", what="seed", values="1, 2")


def test_shards_without_a_seed_share_one() -> None:
    first = interlace.explore(programs.ordered_finish, max_schedules=5, shard=(1, 2))
    second = interlace.explore(programs.ordered_finish, max_schedules=5, shard=(2, 2))
    assert first.seed == second.seed == SHARD_SEED


@pytest.mark.parametrize(
    ("requested", "cores", "xdist", "expected"),
    [
        (1, 8, 1, 1),
        (4, 8, 1, 4),
        (4, 2, 1, 2),
        (4, 8, 2, 4),
        (4, 8, 4, 2),
        (4, 2, 2, 1),
        (3, 2, 8, 1),
    ],
)
def test_workers_under_xdist_never_exceed_the_cores_left_to_each_xdist_worker(
    requested: int, cores: int, xdist: int, expected: int
) -> None:
    assert effective_workers(requested, cores, xdist) == expected


CONFTEST_PATH = f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
SHARDED_TEST = """
import pytest
import scale_programs

searched = pytest.mark.interlace(strategy="exhaustive", max_stall=0)
test_race = searched(scale_programs.reversed_order)
test_correct = searched(scale_programs.ordered_finish)
"""


def test_pytest_shards_merged_by_the_command_report_the_unsharded_token(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makeconftest(CONFTEST_PATH)
    pytester.makepyfile(test_sharded=SHARDED_TEST)
    reports = pytester.path / "reports"
    for k in (1, 2, 3):
        pytester.runpytest_subprocess(
            "-p",
            "no:cacheprovider",
            f"--interlace-shard={k}/3",
            f"--interlace-report-dir={reports}",
        )
    # One shard of one: the whole space, without partial-order reduction, as every shard.
    whole = interlace.explore(
        programs.reversed_order, strategy="exhaustive", max_stall=0, shard=(1, 1)
    )
    assert whole.failure is not None
    capsys.readouterr()  # the shards' own output
    assert cli_main(["merge", str(reports)]) == 1
    out = capsys.readouterr().out.splitlines()
    race = next(line for line in out if line.startswith("test_sharded.py::test_race"))
    assert race.endswith(f"token {whole.failure.token}")
    assert f"at schedule {whole.failure_index} " in race
    correct = next(line for line in out if line.startswith("test_sharded.py::test_correct"))
    assert correct.startswith("test_sharded.py::test_correct: exhausted")


@pytest.mark.parametrize(
    ("option", "value"),
    [("--interlace-shard", "3/2"), ("--interlace-shard", "0/2"), ("--interlace-shard", "a/b")],
)
def test_a_bad_shard_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, option: str, value: str
) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{option}={value}")
    message = MSG_NOT_SHARD.format(
        setting=option, value=value, source=SOURCE_COMMAND_LINE, example="K/N", example_value="1/3"
    )
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert result.ret != 0


def test_a_bad_shard_in_the_marker_names_the_marker(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST_PATH)
    pytester.makepyfile(
        test_one="""
        import pytest, scale_programs
        test_one = pytest.mark.interlace(shard=(3, 2))(scale_programs.ordered_finish)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    message = MSG_NOT_SHARD.format(
        setting="shard",
        value=(3, 2),
        source=SOURCE_MARKER,
        example="(K, N)",
        example_value="shard=(1, 3)",
    )
    result.stdout.fnmatch_lines([f"*{message}*"])


@pytest.mark.parametrize("xdist", [False, True])
def test_workers_from_the_environment_are_capped_under_xdist(
    pytester: pytest.Pytester, xdist: bool
) -> None:
    pytester.makeconftest(CONFTEST_PATH)
    pytester.makepyfile(
        test_one="""
        import pytest, scale_programs
        walked = pytest.mark.interlace(strategy="random", max_schedules=60)
        test_one = walked(scale_programs.ordered_finish)
        """
    )
    args = ["-p", "no:cacheprovider", "-v", "-s"]
    if xdist:
        args += ["-n", "2"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INTERLACE_WORKERS", "2")
        # When this suite itself runs under xdist, its worker's variables would say so to
        # the inner pytest too.
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
            patch.delenv(name, raising=False)
        result = pytester.runpytest_subprocess(*args)
    cores = effective_workers(2, len(os.sched_getaffinity(0)), 2 if xdist else 1)
    text = result.stdout.str()
    assert result.ret == 0, text
    if cores > 1:
        assert MSG_WORKERS.format(workers=cores) in text
    else:
        assert "worker processes" not in text
