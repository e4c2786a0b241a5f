"""Telling interlace's own faults from the program's failures.

interlace's scheduler runs inside the program's threads: in the hooks at schedule points, in
the primitives it puts in place of the stock ones, and in the event loop that runs the
program's tasks. An exception raised there by a bug in interlace goes up through the
program's own frames and would be reported as the program failing, labelled like any other
failure ("fails under stock order"), and the user would hunt for a bug that a stock
interpreter never shows.

So every exception a run ends with is asked where it was raised. Its innermost frames that are
interlace's own (``_instrument._ENGINE``) say it:

- none: the program's code, a library's or the standard library's raised it: the program's
  failure;
- only **stand-ins**, the functions that take a stock function's place (``time.sleep``,
  ``Condition.wait``, ``loop.call_at``, registered with :func:`stand_in`): the call was made
  the way the program made it, and a stand-in raises what the stock function raises for the
  same call (``time.sleep(-1)`` is a ValueError there too): the program's failure;
- any other frame of interlace's (the scheduler, its hooks, a strategy): interlace's fault,
  raised as :class:`~interlace.errors.InternalError`, with the traceback that shows where.

interlace's own control flow (``_Abort``, budget and divergence signals) and the errors it
raises on purpose (:class:`~interlace.errors.InterlaceError`) are neither: they are handled
where they are raised.
"""

from __future__ import annotations

import traceback
import types
from collections.abc import Iterable
from typing import Any

from interlace.errors import InterlaceError, InternalError
from interlace.harness import _instrument

__all__ = ("engine_fault", "stand_in")

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


def _is_engine(code: types.CodeType) -> bool:
    return code.co_filename.startswith(_instrument._ENGINE)


def _raised_in_scheduler(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by interlace's own code below its last frame of the program
    (a frame of interlace's that is not a stand-in)."""
    codes: list[types.CodeType] = []
    tb = exc.__traceback__
    while tb is not None:
        codes.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    for code in reversed(codes):  # innermost first, up to the first frame not interlace's
        if not _is_engine(code):
            return False
        if code not in _stand_ins:
            return True
    return False


def _is_ours_on_purpose(exc: BaseException) -> bool:
    # Control flow (``_Abort`` and the like are BaseExceptions, as are KeyboardInterrupt and
    # SystemExit), refusals, and the signals the backends catch by type.
    return (
        not isinstance(exc, Exception)
        or isinstance(exc, InterlaceError)
        or type(exc).__module__.startswith(_ENGINE_MODULES)
    )


_ENGINE_MODULES = ("interlace.harness.", "interlace._core.")


def engine_fault(exception: BaseException | None) -> InternalError | None:
    """The error to raise if ``exception`` (or one it was raised from or during, or one in
    its group) came from a fault in interlace's own code, else None."""
    pending: list[BaseException | None] = [exception]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if not _is_ours_on_purpose(current) and _raised_in_scheduler(current):
            return _internal(current)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend((current.__cause__, current.__context__))
    return None


def _internal(exc: BaseException) -> InternalError:
    text = "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-_MAX_FRAMES)
    )
    error = InternalError(_MSG_INTERNAL.format(traceback=text.rstrip()))
    error.__cause__ = exc
    return error
