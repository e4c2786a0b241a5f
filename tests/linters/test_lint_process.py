"""``interlace lint`` as a process: internal errors, interrupts and its worker pool, and syntax
newer than the running interpreter's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from interlace.cli import main
from interlace.linters._engine import lint_source
from interlace.linters.rules import all_rules


def test_an_internal_error_exits_2_with_a_short_message_and_a_saved_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import interlace.linters._run as run_module

    def broken(*args: object, **kwargs: object) -> object:
        raise TypeError("unsupported operand type(s) for +=: 'int' and 'NoneType'")

    monkeypatch.setattr(run_module, "lint_paths", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    first, second = err.splitlines()[:2]
    assert first == (
        "interlace: internal error: TypeError: unsupported operand type(s) for +=: 'int' and "
        "'NoneType'"
    )
    assert second.startswith("This is a bug in interlace, not in your code; please report it")
    assert "Traceback" not in err
    (report,) = tmp_path.glob("interlace-crash-*.txt")
    saved = report.read_text(encoding="utf-8")
    assert str(report) in err
    assert "Traceback (most recent call last):" in saved
    assert "def broken" not in saved  # the traceback, not the source
    assert "in broken" in saved


def test_a_keyboard_interrupt_wrapped_by_python_is_still_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Python 3.11 turns a KeyboardInterrupt raised in __set_name__ (importing libcst) into a
    # RuntimeError whose cause is the interrupt.
    import interlace.cli as cli

    def interrupted() -> object:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from exc

    monkeypatch.setattr(cli, "_build_parser", interrupted)
    assert main(["lint"]) == 130
    assert capsys.readouterr().err == "interlace: interrupted\n"


def test_syntax_newer_than_the_interpreter_is_judged_by_libcst_in_every_file() -> None:
    # No rule's trigger word: only the quick syntax check looks at it. libcst parses 3.12's
    # ``type`` statement whatever the running interpreter, as it does for files rules parse.
    rules = list(all_rules())
    assert lint_source("type Alias = list[int]\n", rules, filename="a.py").errors == ()
    assert lint_source("import asyncio\ntype A = int\n", rules, filename="b.py").errors == ()
    broken = lint_source("type Alias = = list[int]\n", rules, filename="c.py")
    assert [e.kind for e in broken.errors] == ["syntax"]


_BLOCKING_RUN = textwrap.dedent(
    """
    import os, sys, time
    import interlace.linters._run as run_module
    from interlace.cli import main

    marks = sys.argv[1]

    def _lint_chunk(items, base):  # a worker that never finishes its chunk
        open(os.path.join(marks, str(os.getpid())), "w").close()
        time.sleep(3600)

    run_module._lint_chunk = _lint_chunk
    run_module._pool_context = lambda: __import__("multiprocessing").get_context("fork")
    sys.exit(main(["lint", "--no-cache", "--jobs", "2", sys.argv[2]]))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the blocking worker is patched in by fork")
@pytest.mark.parametrize(
    ("signum", "code", "message"),
    [
        (signal.SIGINT, 130, "interlace: interrupted"),
        # Killed by the SIGTERM, sent again once the workers are gone: the shell shows 143.
        (signal.SIGTERM, -signal.SIGTERM, "interlace: terminated"),
    ],
)
def test_an_interrupted_run_stops_its_workers_instead_of_waiting_for_them(
    tmp_path: Path, signum: int, code: int, message: str
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(40):
        (tree / f"m{i}.py").write_text("import asyncio\nLOCK = asyncio.Lock()\n")
    marks = tmp_path / "marks"
    marks.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-c", _BLOCKING_RUN, str(marks), str(tree)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(marks.iterdir())) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.05)
        process.send_signal(signum)
        # Before the fix this waited an hour for the workers (SIGINT) or left them running
        # (SIGTERM); a minute is only an upper bound for a loaded machine.
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == code, err
    assert err.strip().splitlines()[-1] == message
    assert "Traceback" not in err
    workers = [int(p.name) for p in marks.iterdir()]
    deadline = time.monotonic() + 30
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in workers if _running(pid)]
        time.sleep(0.05)
    assert alive == []


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie that init has not reaped yet is not running
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
