"""The process pools of ``interlace lint`` and ``interlace reproduce``: a Ctrl-C or SIGTERM
ends the wait for a worker's result even when Python lost the exception the handler raised."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from interlace import _processes


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("received", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, SystemExit)]
)
def test_a_signal_whose_exception_was_lost_still_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch, received: signal.Signals, raised: type[BaseException]
) -> None:
    # The handler ran inside a finalizer, which swallowed its exception: only the record of
    # the signal is left, and the result never comes.
    monkeypatch.setattr(_processes, "_received", [received])
    with pytest.raises(raised) as caught:
        _processes.result(Future())
    if isinstance(caught.value, SystemExit):
        assert caught.value.code == 128 + signal.SIGTERM


@pytest.mark.parametrize(
    ("received", "raised"), [([signal.SIGINT], KeyboardInterrupt), ([], BrokenProcessPool)]
)
def test_a_pool_broken_by_the_interrupt_is_the_interrupt(
    monkeypatch: pytest.MonkeyPatch, received: list[int], raised: type[BaseException]
) -> None:
    # A Ctrl-C to the process group that reaches a worker before its initializer ignores it
    # kills the worker and breaks the pool; the command then stopped with "internal error:
    # BrokenProcessPool" instead of as interrupted (exit 2, not 130). Without a signal the
    # broken pool is what it is.
    monkeypatch.setattr(_processes, "_received", received)
    broken: Future[int] = Future()
    broken.set_exception(BrokenProcessPool("a worker died"))
    with pytest.raises(raised):
        _processes.result(broken)


def test_a_result_that_comes_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_processes, "_received", [])
    done: Future[int] = Future()
    done.set_result(7)
    assert _processes.result(done) == 7


_CAUGHT_SIGTERM = textwrap.dedent(
    """
    import os, sys, time
    from interlace._processes import process_pool, result, pool_context

    def stuck(marks):  # a worker that never finishes
        open(os.path.join(marks, str(os.getpid())), "w").close()
        time.sleep(3600)

    try:
        with process_pool(2) as pool:
            futures = [pool.submit(stuck, sys.argv[1]) for _ in range(2)]
            result(futures[0])
    except SystemExit:  # as pytest does: one test's failure, and the session goes on
        pass
    print("went on")
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
def test_sigterm_ends_the_process_even_when_the_caller_catches_systemexit(
    tmp_path: Path,
) -> None:
    # Under pytest, the handler's SystemExit was one test's failure: the session went on,
    # where without the pool's handler the SIGTERM would have ended it.
    process = subprocess.Popen(
        [sys.executable, "-c", _CAUGHT_SIGTERM, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == -signal.SIGTERM, err
    assert "went on" not in out
    assert err.strip().splitlines()[-1] == "interlace: terminated"
    workers = [int(path.name) for path in tmp_path.iterdir()]
    deadline = time.monotonic() + 30
    while (alive := [pid for pid in workers if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive == []


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # it ended between the signal and the read
        return False
    return "zombie" not in status


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_worker_starts_is_raised_after_and_leaves_no_worker_behind(
    monkeypatch: pytest.MonkeyPatch, sent: signal.Signals
) -> None:
    # The signal lands between the fork of a worker and the pool recording it: raised there,
    # the pool never knew of that worker, so nothing ended it, and interpreter exit then
    # waited for it forever (multiprocessing joins its children at exit).
    context = _processes.pool_context()
    process_type = type(context.Process())  # type: ignore[attr-defined]
    real_start = process_type.start
    started: list[int] = []

    def start_then_signalled(self: Any) -> None:
        real_start(self)
        assert self.pid is not None
        started.append(self.pid)
        if len(started) == 1:
            signal.raise_signal(sent)

    monkeypatch.setattr(process_type, "start", start_then_signalled)
    # The test's own SIGTERM disposition is the default one, which the pool takes over.
    monkeypatch.setattr(_processes, "_die_of_sigterm", lambda previous: None)
    raised = KeyboardInterrupt if sent == signal.SIGINT else SystemExit
    try:
        with pytest.raises(raised), _processes.process_pool(2, context) as pool:
            _processes.result(pool.submit(time.sleep, 60))
        assert started
        deadline = time.monotonic() + 10
        while (alive := [p for p in started if _running(p)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive == []
    finally:
        for pid in started:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
