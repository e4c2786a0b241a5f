"""An alarm (a SIGALRM handler that raises, as pytest-timeout's signal method does) during an
exploration ends the whole exploration with the handler's exception, wherever it lands.

The alarm is raised with ``signal.raise_signal``: the handler runs in the main thread at the
next bytecode, so each test puts it exactly where it means to (a ``__del__``, an asyncio
callback, a task), which a timer could only hit by chance.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

import interlace
from interlace.harness import _interrupt

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGALRM")


class Timeout(Exception):
    """What the test's SIGALRM handler raises (pytest-timeout raises its ``Failed``)."""


@pytest.fixture
def alarm_handler() -> Iterator[list[int]]:
    """A SIGALRM handler that raises :class:`Timeout`; yields the list of its calls."""
    calls: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        calls.append(signum)
        raise Timeout("the alarm fired")

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        yield calls
    finally:
        signal.signal(signal.SIGALRM, previous)


class Collected:
    def __del__(self) -> None:
        signal.raise_signal(signal.SIGALRM)


def during_an_exploration(body: Callable[[], object]) -> None:
    """Run ``body`` as an exploration does, between the engine's checks."""
    with _interrupt.kept():
        body()


def swallowed_alarm() -> None:
    """An alarm whose exception something swallows, as asyncio does a callback's."""
    with contextlib.suppress(Timeout):
        signal.raise_signal(signal.SIGALRM)


def test_an_alarm_in_a_del_is_raised_when_the_exploration_ends(alarm_handler: list[int]) -> None:
    # Python would print "Exception ignored in ... __del__" and go on: the alarm would be lost.
    with pytest.raises(Timeout):
        during_an_exploration(Collected)
    assert alarm_handler == [signal.SIGALRM]


def test_an_alarm_wins_over_what_the_exploration_made_of_it(alarm_handler: list[int]) -> None:
    def body() -> None:
        swallowed_alarm()
        raise RuntimeError("the engine's own error after the alarm broke a run")

    with pytest.raises(Timeout) as raised:
        during_an_exploration(body)
    assert raised.value.__suppress_context__


def test_an_alarm_is_raised_at_every_check_and_kept_for_the_plugin(
    alarm_handler: list[int],
) -> None:
    checks: list[str] = []

    def body() -> None:
        swallowed_alarm()
        for _ in range(2):
            try:
                _interrupt.check()
            except Timeout:
                checks.append("raised")

    with pytest.raises(Timeout):
        during_an_exploration(body)
    assert checks == ["raised", "raised"]
    alarm = _interrupt.alarm()
    assert alarm is not None
    assert isinstance(alarm.exception, Timeout)
    innermost = alarm.stack
    assert innermost is not None
    while innermost.tb_next is not None:
        innermost = innermost.tb_next
    assert innermost.tb_frame.f_code is swallowed_alarm.__code__  # where the signal came


def test_a_ctrl_c_after_an_alarm_still_interrupts(alarm_handler: list[int]) -> None:
    def body() -> None:
        swallowed_alarm()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        during_an_exploration(body)


def test_the_handler_is_restored_and_the_next_exploration_starts_clean(
    alarm_handler: list[int],
) -> None:
    handler = signal.getsignal(signal.SIGALRM)
    during: list[object] = []

    def body() -> None:
        during.append(signal.getsignal(signal.SIGALRM))
        Collected()

    with pytest.raises(Timeout):
        during_an_exploration(body)
    assert during != [handler]
    assert signal.getsignal(signal.SIGALRM) is handler
    during_an_exploration(_interrupt.check)
    assert _interrupt.alarm() is None


def test_an_alarm_inside_a_deferred_block_is_raised_when_it_ends(
    alarm_handler: list[int],
) -> None:
    finished: list[bool] = []

    def body() -> None:
        with _interrupt.deferred():
            signal.raise_signal(signal.SIGALRM)
            finished.append(True)

    with pytest.raises(Timeout):
        during_an_exploration(body)
    assert finished == [True]


def test_an_alarm_in_library_code_comes_again_in_the_tests_code(alarm_handler: list[int]) -> None:
    reached: list[str] = []

    def body() -> None:
        with contextlib.ExitStack() as stack:  # the alarm comes in contextlib's frame
            stack.callback(signal.raise_signal, signal.SIGALRM)
        reached.append("past the library code")
        time.sleep(5)  # blocks for real in the test's code: the alarm comes again here

    started = time.monotonic()
    with pytest.raises(Timeout) as raised:
        during_an_exploration(body)
    assert time.monotonic() - started < 2
    assert reached == ["past the library code"]
    assert alarm_handler == [signal.SIGALRM]  # the wrapped handler ran once
    assert any(entry.name == "body" for entry in raised.traceback)


def test_an_alarm_in_a_library_wait_is_raised_there_after_a_grace(
    alarm_handler: list[int],
) -> None:
    def body() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        threading.Event().wait(5)  # the alarm comes in threading's frame, and again there

    started = time.monotonic()
    with pytest.raises(Timeout):
        during_an_exploration(body)
    assert time.monotonic() - started < 2
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_without_an_exploration_the_alarm_handler_is_left_alone(
    alarm_handler: list[int],
) -> None:
    with pytest.raises(Timeout):
        signal.raise_signal(signal.SIGALRM)
    _interrupt.check()  # nothing to raise outside an exploration


def test_an_alarm_in_an_asyncio_callback_ends_the_exploration(alarm_handler: list[int]) -> None:
    # asyncio hands what a callback raises to the loop's exception handler: before, the run
    # went on and the exploration ran out its budget and passed.
    async def target() -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(signal.raise_signal, signal.SIGALRM)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    with pytest.raises(Timeout):
        interlace.explore(target, max_schedules=20, seed=1)
    assert alarm_handler == [signal.SIGALRM]


def test_an_alarm_in_a_task_is_not_reported_as_a_failing_schedule(
    alarm_handler: list[int],
) -> None:
    async def child() -> None:
        await asyncio.sleep(0)
        signal.raise_signal(signal.SIGALRM)

    async def target() -> None:
        await asyncio.gather(child(), asyncio.sleep(0))

    with pytest.raises(Timeout):
        interlace.explore(target, max_schedules=20, seed=1)
    assert alarm_handler == [signal.SIGALRM]


def test_an_alarm_in_a_plain_targets_thread_start_ends_the_exploration(
    alarm_handler: list[int],
) -> None:
    def target() -> None:
        thread = threading.Thread(target=lambda: None)
        thread.start()
        Collected()
        thread.join()

    with pytest.raises(Timeout):
        interlace.explore(target, max_schedules=20, seed=1)
    assert alarm_handler == [signal.SIGALRM]


def test_a_ctrl_c_outside_the_tests_code_is_placed_at_the_innermost_frame_a_runner_shows() -> None:
    # No frame of the test's code on the stack (between runs, or a thread's): the frame is
    # the innermost outside interlace that pytest would show, skipping __tracebackhide__.
    package = os.path.dirname(os.path.abspath(_interrupt.__file__))
    engine = compile(
        "import sys\ndef engine(where, called):\n    where.append(sys._getframe())\n"
        "    called(where)\n",
        os.path.join(package, "engine_of_the_test.py"),
        "exec",
    )
    # Code the engine calls, where the signal may land too (CI saw ``<frozen abc>:117``).
    called = compile(
        "import sys\ndef called(where):\n    where.append(sys._getframe())\n",
        "<frozen abc>",
        "exec",
    )
    library = compile(
        "def hidden(engine, where, called):\n    __tracebackhide__ = True\n"
        "    engine(where, called)\n",
        os.path.join(os.sep, "lib", "site-packages", "runner_of_the_test.py"),
        "exec",
    )
    names: dict[str, Any] = {}
    exec(engine, names)
    exec(library, names)
    exec(called, names)
    frames: list[FrameType] = []
    thread = threading.Thread(
        target=names["hidden"], args=(names["engine"], frames, names["called"])
    )
    thread.start()
    thread.join()
    for innermost in frames:  # in the engine, and in what the engine called
        where = _interrupt._where(innermost)
        assert where is not None
        frame, _, line = where
        assert frame.f_code.co_filename == threading.__file__
        assert frame.f_code.co_name == "run"
        assert line == frame.f_lineno
