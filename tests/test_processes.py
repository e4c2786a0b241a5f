"""The process pools of ``interlace lint`` and ``interlace reproduce``: a Ctrl-C or SIGTERM
ends the wait for a worker's result even when Python lost the exception the handler raised."""

from __future__ import annotations

import signal
from concurrent.futures import Future

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


def test_a_result_that_comes_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_processes, "_received", [])
    done: Future[int] = Future()
    done.set_result(7)
    assert _processes.result(done) == 7
