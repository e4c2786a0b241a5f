"""The public exception hierarchy of interlace.

Every error interlace raises on purpose derives from :class:`InterlaceError`, so
``except InterlaceError`` separates "interlace refused this" from "the code under test
failed" (the user's own exceptions are re-raised unchanged, with a note).
"""

from __future__ import annotations

__all__ = (
    "ConfigError",
    "InterlaceError",
    "InternalError",
    "InvalidTargetError",
    "ReplayDivergedError",
    "ReplayTokenError",
    "UnsupportedOperationError",
)


class InterlaceError(Exception):
    """Base class of every error interlace raises on purpose."""


class ConfigError(InterlaceError, ValueError):
    """A setting (argument, marker, option, ini key or environment variable) is invalid.

    The message names the setting, the offending value, where it came from and what to use instead.
    """


class InvalidTargetError(InterlaceError, TypeError):
    """The target given to ``explore``/``replay`` is not something interlace can run.

    A target is a zero-argument ``async def`` function (asyncio) or a zero-argument plain
    function (threads); on the command line it is written ``MODULE:FUNCTION``.
    """


class ReplayTokenError(InterlaceError, ValueError):
    """A replay token is malformed, truncated, or was made by an incompatible interlace version."""


class ReplayDivergedError(InterlaceError):
    """A replayed schedule asked for a decision that the program no longer offers.

    The message names the step and the likely cause: the code changed, or the program depends
    on the wall clock, real I/O, unseeded randomness or hash order.
    """


class UnsupportedOperationError(InterlaceError, RuntimeError):
    """The code under test used an operation the controlled scheduler cannot run deterministically.

    Raised at the call (for example opening a real socket under the controlled event loop);
    the message names the call and what to use instead.
    """


class InternalError(InterlaceError):
    """interlace itself failed: a bug in interlace, not a failure of the code under test.

    Raised in place of a failure when the exception a run ended with was raised inside
    interlace's scheduler (its hooks, its event loop, a strategy) rather than by the program
    or by a stand-in for a stock function. The message carries the traceback to report.
    """
