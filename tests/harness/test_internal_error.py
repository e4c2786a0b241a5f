"""A fault in interlace's own code is reported as interlace's, never as the program's failure.

The faults are made by giving the scheduler a bad value, so the exception is raised by
interlace's own code, as a bug there would be.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import sys
import threading
import time
import types
from collections.abc import Iterator

import pytest

import interlace
from interlace.errors import InterlaceError, InternalError
from interlace.harness import _fault, _instrument, _loop, _virtual_clock

SEED = 3


@pytest.fixture
def broken_calendar(monkeypatch: pytest.MonkeyPatch) -> None:
    # The calendar's tick, added to a float at the second read of a run: a TypeError raised
    # inside the scheduler's clock, under a stand-in (datetime.now).
    monkeypatch.setattr(_virtual_clock, "_CALENDAR_TICK", "one microsecond")


def _two_reads() -> None:
    datetime.datetime.now()
    datetime.datetime.now()


@pytest.mark.usefixtures("broken_calendar")
def test_a_fault_in_the_scheduler_under_a_thread_is_interlaces() -> None:
    def target() -> None:
        worker = threading.Thread(target=_two_reads)
        worker.start()
        worker.join()

    with pytest.raises(InternalError) as caught:
        interlace.explore(target, max_schedules=3, seed=SEED)
    message = str(caught.value)
    assert "bug in interlace, not a failure of the code under test" in message
    assert "TypeError" in message
    assert "_wall_at" in message  # the traceback to report: where interlace raised it
    assert isinstance(caught.value, InterlaceError)
    assert isinstance(caught.value.__cause__, TypeError)


@pytest.mark.usefixtures("broken_calendar")
def test_a_fault_in_the_scheduler_under_a_task_is_interlaces() -> None:
    async def target() -> None:
        await asyncio.sleep(0)
        _two_reads()

    with pytest.raises(InternalError, match="_wall_at"):
        interlace.explore(target, max_schedules=3, seed=SEED)


def test_a_fault_in_the_event_loop_is_interlaces(monkeypatch: pytest.MonkeyPatch) -> None:
    # The loop moves its clock to the next timer: a fault there, with no frame of the program.
    monkeypatch.setattr(_loop.ControlledEventLoop, "_move_clock", None)

    async def target() -> None:
        await asyncio.sleep(1)

    with pytest.raises(InternalError, match="'NoneType' object is not callable"):
        interlace.explore(target, max_schedules=3, seed=SEED)


@pytest.mark.usefixtures("broken_calendar")
def test_a_fault_the_program_caught_and_replaced_is_still_interlaces() -> None:
    async def target() -> None:
        try:
            _two_reads()
        except TypeError:
            raise RuntimeError("could not stamp the message") from None

    # ``from None`` hides the cause from a traceback, not from __context__.
    with pytest.raises(InternalError):
        interlace.explore(target, max_schedules=3, seed=SEED)


# What a stand-in for a stock function raises for a bad call is what the stock function
# raises: the program's failure, as on a stock interpreter.


def _stock_raises(call: object) -> type[BaseException]:
    try:
        call()  # type: ignore[operator]
    except Exception as exc:
        return type(exc)
    raise AssertionError("the stock call raised nothing")


def _sleep_backwards() -> None:
    time.sleep(-1)


def _wait_unlocked() -> None:
    threading.Condition().wait(0.01)


def _sleep_text() -> None:
    time.sleep("1")  # type: ignore[arg-type]


@pytest.mark.parametrize("call", [_sleep_backwards, _wait_unlocked, _sleep_text])
def test_a_stand_ins_stock_error_is_the_programs_failure(call: object) -> None:
    expected = _stock_raises(call)

    def target() -> None:
        worker = threading.Thread(target=call)  # type: ignore[arg-type]
        worker.start()
        worker.join()
        call()  # type: ignore[operator]

    exploration = interlace.explore(target, max_schedules=3, seed=SEED)
    assert exploration.failure is not None
    assert exploration.failure.kind == "exception"
    assert type(exploration.failure.exception) is expected


def test_a_loop_methods_stock_error_is_the_programs_failure() -> None:
    def schedule_at_none() -> None:
        asyncio.get_running_loop().call_at(None, print)  # type: ignore[arg-type]

    async def stock() -> type[BaseException]:
        return _stock_raises(schedule_at_none)

    expected = asyncio.run(stock())

    async def target() -> None:
        await asyncio.sleep(0)
        schedule_at_none()

    exploration = interlace.explore(target, max_schedules=3, seed=SEED)
    assert exploration.failure is not None
    assert type(exploration.failure.exception) is expected


def test_the_programs_own_exception_is_its_failure() -> None:
    async def target() -> None:
        await asyncio.sleep(0)
        raise KeyError("the program's own")

    exploration = interlace.explore(target, max_schedules=3, seed=SEED)
    assert exploration.failure is not None
    assert isinstance(exploration.failure.exception, KeyError)


def _recurse(depth: int) -> int:
    return _recurse(depth + 1) + 1


def test_running_out_of_stack_is_the_programs_failure_wherever_it_happens() -> None:
    # The hooks at schedule points add frames, so the limit may be reached inside one of
    # them: the program's unbounded recursion still, as on a stock interpreter.
    def target() -> None:
        worker = threading.Thread(target=_recurse, args=(0,))
        worker.start()
        worker.join()
        _recurse(0)

    exploration = interlace.explore(target, max_schedules=2, seed=SEED)
    assert exploration.failure is not None
    assert isinstance(exploration.failure.exception, RecursionError)


def test_a_builtin_the_program_hands_over_raises_the_programs_failure() -> None:
    # A C function raises with no frame of its own: the last frame is the loop's, where it
    # runs callbacks, or the backend's, where it calls the target.
    async def callback_target() -> None:
        asyncio.get_running_loop().call_soon(int, "x")
        await asyncio.sleep(0)

    for target in (callback_target, functools.partial(int, "x")):
        exploration = interlace.explore(target, max_schedules=2, seed=SEED)
        assert exploration.failure is not None, target
        assert isinstance(exploration.failure.exception, ValueError), target


def _engine_frame() -> types.FrameType:
    """A frame of interlace's own code (``_fault.stand_in``'s, as it reads its argument)."""
    seen: list[types.FrameType] = []

    def frames() -> Iterator[object]:
        caller = sys._getframe(1)
        seen.append(caller)
        yield from ()

    _fault.stand_in(frames())
    assert seen[0].f_code.co_filename.startswith(_instrument.ENGINE)
    return seen[0]


def _raised_at(frame: types.FrameType, exc: BaseException) -> BaseException:
    return exc.with_traceback(types.TracebackType(None, frame, frame.f_lasti, frame.f_lineno))


def test_an_error_interlace_caught_itself_is_not_a_fault_of_the_programs_failure() -> None:
    # The program's error raised while interlace handled one of its own, in its own frames:
    # the program's (no frame of the program between that one's raise and its catch).
    handled = _raised_at(_engine_frame(), KeyError("handled inside interlace"))
    with pytest.raises(ValueError, match="the program's own") as caught:
        raise ValueError("the program's own")
    caught.value.__context__ = handled
    assert _fault.engine_fault(caught.value) is None
    # The same error after it went up through the program's frame is interlace's fault.
    reached = _raised_at(_engine_frame(), KeyError("a fault that reached the program"))
    here = sys._getframe()
    reached.__traceback__ = types.TracebackType(reached.__traceback__, here, 0, here.f_lineno)
    caught.value.__context__ = reached
    assert isinstance(_fault.engine_fault(caught.value), InternalError)
