"""``interlace lint --watch``: lint, then lint again when the files change, until Ctrl-C.

Most tests replace the file-system events with a generator that edits the project before it
yields each batch, and ends after a bound, so that they are fast, deterministic and cannot
hang; the last ones run a real watch (watchfiles) in a subprocess, edit its files and send it
a real SIGINT.
"""

from __future__ import annotations

import argparse
import io
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from lint_project import put

from interlace.linters.cli import (
    CHANGED,
    CLEAR_SCREEN,
    WATCH_SEPARATOR,
    WATCHING,
    add_parser,
    run,
)

PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"
TWO = "import asyncio\nLOCK = asyncio.Lock()\nEVENT = asyncio.Event()\n"
CLEAN = "x = 1\n"
A_LOCK = "a.py:2:8: IL201 `asyncio.Lock` is created at module level"


class Terminal(io.StringIO):
    """A stdout that is a terminal."""

    def isatty(self) -> bool:
        return True


def watch(
    argv: Sequence[str],
    steps: Sequence[Callable[[], object]] = (),
    *,
    max_batches: int | None = None,
    out: io.StringIO | None = None,
    roots: list[list[Path]] | None = None,
) -> tuple[int, str, str, int]:
    """Run ``interlace lint --watch *argv``; before the n-th batch of events, call ``steps[n]``
    (if any). Stop after ``max_batches`` batches (default: one more than the steps); the roots
    the watch asked to watch are appended to ``roots``.

    Returns the exit code, stdout, stderr and the number of batches taken. The steps' edits
    change the size of what they edit: two writes within one tick of the file system's clock
    can share a modification time.
    """
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["lint", "--watch", *argv])
    taken: list[int] = []
    batches = len(steps) + 1 if max_batches is None else max_batches

    def events(watched: Sequence[Path]) -> Iterator[set[str]]:
        if roots is not None:
            roots.append(list(watched))
        for n in range(batches):
            if n < len(steps):
                steps[n]()
            taken.append(n)
            yield {"something changed"}

    out = out if out is not None else io.StringIO()
    err = io.StringIO()
    try:
        code = run(args, out=out, err=err, events=events)
    except KeyboardInterrupt:  # it would stop pytest itself
        pytest.fail("Ctrl-C escaped --watch instead of ending it with exit code 130")
    return code, out.getvalue(), err.getvalue(), len(taken)


def summary(text: str) -> str:
    return f"{text}\n{WATCHING}\n"


def test_an_edit_between_two_looks_prints_a_second_report(
    project: Path,
) -> None:
    put(project, "a.py", PRIMITIVE)
    roots: list[list[Path]] = []
    code, out, err, taken = watch(
        ["--no-cache", "--format", "concise"], [lambda: put(project, "a.py", TWO)], roots=roots
    )
    first, second = out.split(WATCH_SEPARATOR)
    assert [line.split(",")[0] for line in first.splitlines()] == [A_LOCK]
    assert [line.split(",")[0] for line in second.splitlines()] == [
        A_LOCK,
        "a.py:3:9: IL201 `asyncio.Event` is created at module level",
    ]
    assert err == (
        summary("Found 1 finding (1 file checked).")
        + f"{CHANGED}\n"
        + summary("Found 2 findings (1 file checked).")
    )
    assert (code, taken) == (1, 2)
    assert roots == [[Path.cwd()]]


def test_nothing_is_linted_again_while_nothing_changes(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    code, out, err, taken = watch(["--no-cache", "--format", "pylint"], max_batches=3)
    assert out.count("a.py:2: [IL201]") == 1
    assert WATCH_SEPARATOR not in out
    assert err == summary("Found 1 finding (1 file checked).")
    assert (code, taken) == (1, 3)


def test_a_new_file_and_a_removed_one_are_changes(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    steps = [lambda: put(project, "b.py", PRIMITIVE), lambda: (project / "a.py").unlink()]
    code, out, err, _ = watch(["--no-cache", "--format", "pylint"], steps)
    reports = [
        [line.split(": [")[0] for line in report.splitlines()]
        for report in out.split(WATCH_SEPARATOR)
    ]
    assert reports == [["a.py:2"], ["a.py:2", "b.py:2"], ["b.py:2"]]
    assert err.count(CHANGED) == 2
    assert err.endswith(summary("Found 1 finding (1 file checked)."))
    assert code == 1


def test_the_cache_answers_for_the_files_that_did_not_change(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    put(project, "b.py", CLEAN)
    _, _, err, _ = watch(["--format", "concise"], [lambda: put(project, "b.py", "y = 22\n")])
    assert err.splitlines()[-2:] == [
        "Found 1 finding (2 files checked, 1 from cache).",
        WATCHING,
    ]


def test_a_change_to_the_configuration_is_a_change(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)

    def configure() -> None:
        put(project, "pyproject.toml", '[tool.interlace.lint]\nselect = ["IL101"]\n')

    code, out, err, _ = watch(["--no-cache", "--format", "concise"], [configure])
    assert out.split(WATCH_SEPARATOR)[1] == ""
    assert err.endswith(f"{CHANGED}\n" + summary("All checks passed (1 file checked)."))
    assert code == 0


def test_a_configuration_broken_while_watching_is_reported_and_the_watch_goes_on(
    project: Path,
) -> None:
    put(project, "a.py", PRIMITIVE)
    good = (project / "pyproject.toml").read_text(encoding="utf-8")
    steps = [
        lambda: put(project, "pyproject.toml", '[tool.interlace.lint]\nselect = "IL2"\n'),
        lambda: None,  # still broken: nothing new to report
        lambda: put(project, "pyproject.toml", good + "# fixed\n"),
    ]
    code, out, err, _ = watch(["--no-cache", "--format", "concise"], steps)
    assert out.count(A_LOCK) == 2
    assert out.count(WATCH_SEPARATOR) == 2
    assert err.count("interlace lint: error: ") == 1
    assert err.count(CHANGED) == 2
    assert err.endswith(summary("Found 1 finding (1 file checked)."))
    assert code == 1


def test_a_configuration_error_at_the_start_ends_the_watch(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    code, out, err, taken = watch(["--select", "il2"])
    assert (code, out, taken) == (2, "", 0)
    assert err == (
        "interlace lint: error: rule selector 'il2' in --select from the command line is not "
        "upper case: rule codes are matched exactly, as in ruff; write 'IL2'\n"
    )


def test_a_terminal_is_cleared_before_each_run_as_ruff_does(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    terminal = Terminal()
    _, out, _, _ = watch(
        ["--no-cache", "--format", "pylint"], [lambda: put(project, "a.py", TWO)], out=terminal
    )
    assert WATCH_SEPARATOR not in out
    first, second = out.split(CLEAR_SCREEN)[1:]
    assert (first.count("[IL201]"), second.count("[IL201]")) == (1, 2)
    assert out.startswith(CLEAR_SCREEN)


def test_quiet_keeps_the_reports_and_drops_the_watch_lines(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    _, out, err, _ = watch(["--no-cache", "-q", "--format", "pylint"], [lambda: None])
    assert out.count("[IL201]") == 1
    assert err == ""


def test_ctrl_c_while_waiting_exits_130_with_no_traceback(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)

    def interrupt() -> None:
        raise KeyboardInterrupt

    code, out, err, _ = watch(["--no-cache", "--format", "pylint"], [interrupt])
    assert code == 130
    assert out.count("[IL201]") == 1
    assert err == summary("Found 1 finding (1 file checked).")


def test_ctrl_c_while_linting_again_exits_130(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import interlace.linters._run as run_module

    put(project, "a.py", PRIMITIVE)
    linted = run_module.lint_paths
    calls: list[int] = []

    def lint_paths(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return linted(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_module, "lint_paths", lint_paths)
    code, _, err, _ = watch(["--no-cache"], [lambda: put(project, "a.py", TWO)], max_batches=5)
    assert (code, len(calls)) == (130, 2)
    assert err.endswith(f"{CHANGED}\n")


_WATCHING_PROCESS = textwrap.dedent(
    """
    import sys
    from interlace.cli import main

    sys.exit(main(["lint", "--watch", "--no-cache", "--format", "pylint"]))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is sent with os.kill")
def test_sigint_ends_a_real_watch_cleanly(project: Path) -> None:
    put(project, "a.py", PRIMITIVE)
    process = subprocess.Popen(
        [sys.executable, "-c", _WATCHING_PROCESS],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Whatever goes wrong, the process is killed and the pipes close: the test cannot hang.
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if line == f"{WATCHING}\n":
                break
        assert lines[-1:] == [f"{WATCHING}\n"], lines
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert err == ""
    assert out.startswith("a.py:2: [IL201] ")


class RealWatch:
    """``interlace lint --watch`` in a subprocess of its own, with watchfiles' real events: its
    stderr lines are read by a thread, each wait has a deadline, and a watchdog kills the
    process, so that no test can hang."""

    def __init__(self, project: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WATCHING_PROCESS],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._watchdog = threading.Timer(120, self.process.kill)
        self._watchdog.start()
        self.lines: list[str] = []
        self._arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._arrived:
                self.lines.append(line)
                self._arrived.notify_all()

    def wait_for_watching(self, count: int) -> None:
        """Wait until the watch has printed :data:`WATCHING` ``count`` times."""
        with self._arrived:
            done = self._arrived.wait_for(
                lambda: self.lines.count(f"{WATCHING}\n") >= count, timeout=60
            )
        assert done, f"no {count} x {WATCHING!r} in 60s; stderr so far: {self.lines}"

    def stop(self) -> tuple[int, str, str]:
        """Send SIGINT; return the exit code, stdout and stderr."""
        self.process.send_signal(signal.SIGINT)
        out, _ = self.process.communicate(timeout=60)
        return self.process.returncode, out, "".join(self.lines)

    def close(self) -> None:
        self._watchdog.cancel()
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture
def real_watch(project: Path) -> Iterator[Callable[[], RealWatch]]:
    started: list[RealWatch] = []

    def start() -> RealWatch:
        started.append(RealWatch(project))
        return started[-1]

    yield start
    for one in started:
        one.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is sent with os.kill")
def test_a_real_edit_is_seen_by_the_file_system_watcher_and_linted_again(
    project: Path, real_watch: Callable[[], RealWatch]
) -> None:
    put(project, "pkg/a.py", PRIMITIVE)
    watching = real_watch()
    watching.wait_for_watching(1)
    put(project, "pkg/a.py", TWO)
    watching.wait_for_watching(2)
    code, out, err = watching.stop()
    assert code == 130, err
    first, second = out.split(WATCH_SEPARATOR)
    assert first.count("[IL201]") == 1
    assert second.count("[IL201]") == 2
    assert err.count(f"{CHANGED}\n") == 1


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is sent with os.kill")
def test_a_real_watch_lints_nothing_again_while_idle_or_when_an_unlinted_file_changes(
    project: Path, real_watch: Callable[[], RealWatch]
) -> None:
    put(project, "a.py", PRIMITIVE)
    watching = real_watch()
    watching.wait_for_watching(1)
    put(project, "notes.txt", "not Python\n")
    put(project, "build/out.log", "not linted either\n")
    # Longer than the watcher's debounce and its first timeout (the one comparison it makes
    # to see the edits made while it started): a re-lint would have happened by then.
    time.sleep(6.5)
    code, out, err = watching.stop()
    assert code == 130, err
    assert WATCH_SEPARATOR not in out
    assert out.count("[IL201]") == 1
    assert err == summary("Found 1 finding (1 file checked).")


def test_an_idle_real_watch_looks_at_the_files_only_once_the_watcher_runs(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import interlace.linters.cli as cli

    put(project, "a.py", PRIMITIVE)
    looks: list[float] = []
    watched = cli._watched

    def counted(args: argparse.Namespace) -> object:
        looks.append(time.monotonic())
        return watched(args)

    monkeypatch.setattr(cli, "_watched", counted)
    monkeypatch.setattr(cli, "_WATCH_TIMEOUT_MS", 200)
    timeouts: list[int] = []

    def events(roots: Sequence[Path]) -> Iterator[object]:
        for batch in cli.file_events(roots):
            assert batch == set(), batch  # nothing changes
            timeouts.append(1)
            yield batch
            if len(timeouts) == 8:
                return

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["lint", "--watch", "--no-cache"])
    code = run(args, out=io.StringIO(), err=io.StringIO(), events=events)
    # The files before the first run, and once when the watcher first times out: polling would
    # have looked at them after each of the 8 timeouts.
    assert (code, len(looks), len(timeouts)) == (1, 2, 8)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--fix"],
            "--watch cannot be combined with --fix: --fix rewrites the files --watch watches, "
            "so each fix would start another run; run --fix once, then --watch",
        ),
        (
            ["--fix-only"],
            "--watch cannot be combined with --fix-only: --fix-only rewrites the files --watch "
            "watches, so each fix would start another run; run --fix-only once, then --watch",
        ),
        (
            ["--diff"],
            "--watch cannot be combined with --diff: --diff prints what --fix would change, "
            "not findings to keep up to date; run --diff on its own",
        ),
        (
            ["--add-noqa"],
            "--watch cannot be combined with --add-noqa: --add-noqa edits the files in place "
            "once; run it on its own, then --watch",
        ),
        (
            ["--show-files"],
            "--watch cannot be combined with --show-files: --show-files lints nothing, so "
            "there is nothing to watch; run it on its own",
        ),
        (
            ["--show-settings"],
            "--watch cannot be combined with --show-settings: --show-settings lints nothing, "
            "so there is nothing to watch; run it on its own",
        ),
        (
            ["--explain", "IL101"],
            "--watch cannot be combined with --explain IL101: --explain lints nothing; run it "
            "on its own",
        ),
        (
            ["-"],
            "--watch cannot be combined with standard input ('-'): it is read once and cannot "
            "change; name the files or directories to watch instead",
        ),
        (
            ["--stdin-filename", "a.py"],
            "--watch cannot be combined with standard input (--stdin-filename): it is read "
            "once and cannot change; name the files or directories to watch instead",
        ),
        (
            ["-o", "report.txt"],
            "--watch cannot be combined with --output-file 'report.txt': --watch prints a new "
            "report on each change for you to read; drop --output-file, or run without "
            "--watch to write a report",
        ),
    ],
)
def test_watch_is_refused_where_it_makes_no_sense(
    project: Path, argv: list[str], message: str
) -> None:
    put(project, "a.py", PRIMITIVE)
    code, out, err, taken = watch(argv, max_batches=1)
    assert (code, out, taken) == (2, "", 0)
    assert err == f"interlace lint: error: {message}\n"
    assert not (project / "report.txt").exists()
