"""Telling interlace's own faults from the program's failures.

interlace's scheduler runs inside the program's threads: in the hooks at schedule points, in
the primitives it puts in place of the stock ones, and in the event loop that runs the
program's tasks. An exception raised there by a bug in interlace goes up through the
program's own frames and would be reported as the program failing, labelled like any other
failure ("fails under stock order"), and the user would hunt for a bug that a stock
interpreter never shows.

So every exception a run ends with is asked where it was raised. Its innermost frames that are
interlace's own (``_instrument.ENGINE``) say it:

- none: the program's code, a library's or the standard library's raised it: the program's
  failure;
- only **stand-ins**, the functions that take a stock function's place (``time.sleep``,
  ``Condition.wait``, ``loop.call_at``, registered with :func:`stand_in`): the call was made
  the way the program made it, and a stand-in raises what the stock function raises for the
  same call (``time.sleep(-1)`` is a ValueError there too): the program's failure;
- any other frame of interlace's (the scheduler, its hooks, a strategy): interlace's fault,
  raised as :class:`~interlace.errors.InternalError`, with the traceback that shows where.

Two refinements keep the program's failures its own. A C function the program hands over (a
loop callback, the target) raises with no frame of its own, so the lines where interlace calls
the program's callables are registered (:func:`program_calls`) and stand for it. Running out
of stack or memory is the program's wherever it happens: the hooks add frames to its deepest
recursion.

The exceptions a failure was raised from or during are asked too (the program may catch
interlace's error and raise its own), but only those that went up through a frame of the
program: one interlace raised and caught in its own frames is no fault that reached it.

interlace's own control flow (``_Abort``, budget and divergence signals) and the errors it
raises on purpose (:class:`~interlace.errors.InterlaceError`) are neither: they are handled
where they are raised.
"""

from __future__ import annotations

import inspect
import traceback
import types
from collections.abc import Iterable
from typing import Any

from interlace.errors import InterlaceError, InternalError
from interlace.harness import _instrument

__all__ = ("engine_fault", "program_calls", "stand_in")

_stand_ins: set[types.CodeType] = set()

_MSG_INTERNAL = (
    "interlace failed inside its own scheduler; this is a bug in interlace, not a failure of "
    "the code under test, and a stock interpreter would not raise it. Please report it with "
    "the traceback below and the code that ran.\n{traceback}"
)
_MAX_FRAMES = 30
"""The innermost frames the message shows: interlace's, and the program's that led there."""


def stand_in(functions: Iterable[Any]) -> None:
    """Register functions that take a stock function's place (see the module's docstring)."""
    for function in functions:
        function = getattr(function, "__func__", function)  # a classmethod, a bound method
        code = getattr(function, "__code__", None)
        if isinstance(code, types.CodeType):
            _stand_ins.add(code)


_program_calls: dict[types.CodeType, frozenset[int] | None] = {}
"""Lines where interlace's code calls the program's own callables (a loop callback, the
target): a C function called there (``call_soon(int, "x")``) raises with no frame of its
own, so the line stands for it. None: every line of the code (its source was not found)."""


def program_calls(function: Any, *fragments: str) -> None:
    """Register the lines of ``function`` whose source holds one of ``fragments`` as calls of
    the program's callables (see ``_program_calls``)."""
    code = function.__code__
    try:
        lines, start = inspect.getsourcelines(function)
    except (OSError, TypeError):
        _program_calls[code] = None
        return
    found = frozenset(
        start + index
        for index, line in enumerate(lines)
        if any(fragment in line for fragment in fragments)
    )
    if len(found) < len(fragments):
        raise AssertionError(f"{function.__qualname__} has no line with one of {fragments}")
    _program_calls[code] = found


def _is_engine(code: types.CodeType) -> bool:
    return code.co_filename.startswith(_instrument.ENGINE)


def _raised_in_scheduler(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by interlace's own code below its last frame of the program
    (a frame of interlace's that is not a stand-in)."""
    frames: list[tuple[types.CodeType, int]] = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code, tb.tb_lineno))
        tb = tb.tb_next
    if frames and frames[-1][0] in _program_calls:
        lines = _program_calls[frames[-1][0]]
        if lines is None or frames[-1][1] in lines:
            return False  # raised by the program's callable, one with no frame of its own
    for code, _ in reversed(frames):  # innermost first, up to the first frame not ours
        if not _is_engine(code):
            return False
        if code not in _stand_ins:
            return True
    return False


def _is_ours_on_purpose(exc: BaseException) -> bool:
    # Control flow (``_Abort`` and the like are BaseExceptions, as are KeyboardInterrupt and
    # SystemExit), refusals, and the signals the backends catch by type. Running out of
    # stack or memory is neither: it happens wherever the program has used the last of it,
    # and the hooks at its schedule points add a few frames to its deepest recursion.
    return (
        not isinstance(exc, Exception)
        or isinstance(exc, (InterlaceError, RecursionError, MemoryError))
        or type(exc).__module__.startswith(_ENGINE_MODULES)
    )


_ENGINE_MODULES = ("interlace.harness.", "interlace._core.")


def engine_fault(exception: BaseException | None) -> InternalError | None:
    """The error to raise if ``exception`` (or one in its group, or one it was raised from or
    during that reached the program) came from a fault in interlace's own code, else None."""
    pending: list[tuple[BaseException | None, bool]] = [(exception, False)]
    seen: set[int] = set()
    while pending:
        current, chained = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if (
            not _is_ours_on_purpose(current)
            and _raised_in_scheduler(current)
            and (not chained or _reached_the_program(current))
        ):
            return _internal(current)
        if isinstance(current, BaseExceptionGroup):
            pending.extend((member, chained) for member in current.exceptions)
        pending.extend(((current.__cause__, True), (current.__context__, True)))
    return None


def _reached_the_program(exc: BaseException) -> bool:
    """Whether ``exc`` went up through a frame of the program (or a library's) before it was
    caught. An exception interlace raised and caught itself, in its own frames, may be the
    context of one the program raises while interlace handles it: that is the program's."""
    tb = exc.__traceback__
    while tb is not None:
        if not _is_engine(tb.tb_frame.f_code):
            return True
        tb = tb.tb_next
    return False


def _internal(exc: BaseException) -> InternalError:
    text = "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-_MAX_FRAMES)
    )
    error = InternalError(_MSG_INTERNAL.format(traceback=text.rstrip()))
    error.__cause__ = exc
    return error
