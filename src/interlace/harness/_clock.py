"""The calendar on the virtual clock: ``datetime.now()``, ``date.today()``, ``time.localtime()``.

``time.time()`` reads the virtual clock in a run (``_threads._wall``), but the calendar reads
the real one from C: ``datetime.now()``, ``datetime.utcnow()``, ``datetime.today()``,
``date.today()``, and ``time.localtime()``, ``gmtime()``, ``ctime()`` and ``strftime()``
called without a time. Code that stamps an entry with ``datetime.now()`` and checks it after
an ``await asyncio.sleep(ttl)`` would see no time pass (the sleep is virtual), and a deadline
built from ``time.time()`` would lie years before ``datetime.now()``: failures a stock
interpreter never has.

The ``time`` functions are module attributes and are replaced like ``time.time``. ``datetime``
and ``date`` are C types, which refuse ``setattr``; their clock methods are replaced in the
types' own dictionaries instead (:class:`TypeDict`), for as long as an exploration holds the
patches. The types stay the real ones, so ``type(x) is datetime``, pickling, ``pydantic``'s
schemas and every library see nothing different, and library code reads the same clock as
the code under test. Giving the code under test look-alike classes instead was tried: a
``pydantic`` model declared with one as a field type has no schema (``pydantic`` asks
``obj is datetime.datetime``), a false failure. What the patch cannot reach is a method bound
before the exploration started, such as ``Field(default_factory=datetime.now)`` in a class
body: it calls the C function directly and reads the real clock.
"""

from __future__ import annotations

import ctypes
import datetime as _datetime
import gc
import sys
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ("TypeDict", "patches")

_real_localtime = time.localtime
_real_gmtime = time.gmtime
_real_ctime = time.ctime
_real_strftime = time.strftime
_UTC = _datetime.UTC

WallAt = Callable[[types.FrameType], float]
"""The wall clock as code in a frame reads it: virtual in a run, real elsewhere."""

_UTCNOW_DEPRECATED = sys.version_info >= (3, 12)


def own_dict(cls: type) -> dict[str, Any] | None:
    """The dictionary behind ``cls.__dict__``, or None if this interpreter does not show it."""
    referents = gc.get_referents(cls.__dict__)
    if len(referents) == 1 and isinstance(referents[0], dict):
        own: dict[str, Any] = referents[0]
        if own.keys() == cls.__dict__.keys():
            return own
    return None


class TypeDict:
    """A C type's own attributes, settable: ``setattr(TypeDict(cls), name, value)``.

    ``getattr`` answers the raw entry (a classmethod stays a descriptor), so what it answers
    can be set back. Each write tells the interpreter the type changed (``PyType_Modified``),
    which drops its cached lookups for the type and every subclass.
    """

    __slots__ = ("_cls", "_own")

    def __init__(self, cls: type) -> None:
        own = own_dict(cls)
        if own is None:
            raise TypeError(f"{cls.__qualname__}'s attributes are not reachable")
        object.__setattr__(self, "_cls", cls)
        object.__setattr__(self, "_own", own)

    def __getattr__(self, name: str) -> Any:
        return self._own[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self._own[name] = value
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(self._cls))

    def __repr__(self) -> str:
        return f"TypeDict({self._cls.__qualname__})"


def _reachable() -> bool:
    """Whether the types' own dictionaries can be written (CPython; checked, not assumed)."""
    try:
        return all(
            own_dict(cls) is not None and hasattr(ctypes.pythonapi, "PyType_Modified")
            for cls in (_datetime.datetime, _datetime.date)
        )
    except (AttributeError, TypeError, OSError):  # no ctypes.pythonapi: not CPython
        return False


REACHABLE = _reachable()
"""False on an interpreter whose type dictionaries are out of reach: the calendar stays real."""


def patches(wall_at: WallAt) -> list[tuple[Any, str, Any]]:
    """``(owner, name, replacement)`` for every calendar read, given the wall clock as code in
    a frame reads it. ``datetime``'s replacements build their value with ``cls.fromtimestamp``,
    as the pure-Python ``datetime`` does, so a subclass gets an instance of itself."""
    from sys import _getframe

    def now(cls: type[_datetime.datetime], tz: _datetime.tzinfo | None = None) -> Any:
        return cls.fromtimestamp(wall_at(_getframe(1)), tz)

    def utcnow(cls: type[_datetime.datetime]) -> Any:
        if _UTCNOW_DEPRECATED:
            warnings.warn(
                "datetime.datetime.utcnow() is deprecated and scheduled for removal in a "
                "future version. Use timezone-aware objects to represent datetimes in UTC: "
                "datetime.datetime.now(datetime.UTC).",
                DeprecationWarning,
                stacklevel=2,
            )
        return cls.fromtimestamp(wall_at(_getframe(1)), _UTC).replace(tzinfo=None)

    def today(cls: type[_datetime.date]) -> Any:
        return cls.fromtimestamp(wall_at(_getframe(1)))

    def localtime(seconds: float | None = None) -> time.struct_time:
        return _real_localtime(wall_at(_getframe(1)) if seconds is None else seconds)

    def gmtime(seconds: float | None = None) -> time.struct_time:
        return _real_gmtime(wall_at(_getframe(1)) if seconds is None else seconds)

    def ctime(seconds: float | None = None) -> str:
        return _real_ctime(wall_at(_getframe(1)) if seconds is None else seconds)

    def strftime(format: str, t: Any = None) -> str:
        return _real_strftime(format, _real_localtime(wall_at(_getframe(1))) if t is None else t)

    result: list[tuple[Any, str, Any]] = []
    function: Callable[..., Any]
    for function, real_function in (
        (localtime, _real_localtime),
        (gmtime, _real_gmtime),
        (ctime, _real_ctime),
        (strftime, _real_strftime),
    ):
        function.__name__ = function.__qualname__ = real_function.__name__
        function.__doc__ = real_function.__doc__
        result.append((time, function.__name__, function))
    if REACHABLE:
        method: Callable[..., Any]
        for cls, method in (
            (_datetime.datetime, now),
            (_datetime.datetime, utcnow),
            (_datetime.date, today),
        ):
            method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
            method.__doc__ = cls.__dict__[method.__name__].__doc__
            result.append((TypeDict(cls), method.__name__, classmethod(method)))
    return result
