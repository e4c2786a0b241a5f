"""The calendar on the virtual clock: ``datetime.now()``, ``date.today()``, ``time.localtime()``.

``time.time()`` reads the virtual clock in a run (``_threads._wall``), but the calendar reads
the real one from C: ``datetime.now()``, ``datetime.utcnow()``, ``datetime.today()``,
``date.today()``, and ``time.localtime()``, ``gmtime()``, ``ctime()`` and ``strftime()``
called without a time. Code that stamps an entry with ``datetime.now()`` and checks it after
an ``await asyncio.sleep(ttl)`` would see no time pass (the sleep is virtual), and a deadline
built from ``time.time()`` would lie years before ``datetime.now()``: failures a stock
interpreter never has.

The ``datetime`` and ``date`` types are C types whose methods cannot be replaced, so the code
under test gets stand-ins instead (``_threads._patch_user_globals``, for its names
``datetime``, ``date`` and the module ``datetime``): classes whose ``now()``/``today()`` read
the virtual clock and that make and accept the real types everywhere else. ``isinstance`` and
``issubclass`` against them answer for the real types, constructing one makes a real
instance, and every other class method and attribute is the real type's. ``sys.modules``
keeps the real module, so pickling and library code see nothing different. ``type(x) is
datetime`` against the stand-in is false: the one thing that tells them apart.
"""

from __future__ import annotations

import datetime as _datetime
import time
import types
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ("Calendar", "calendar")

_real_datetime = _datetime.datetime
_real_date = _datetime.date
_real_localtime = time.localtime
_real_gmtime = time.gmtime
_real_ctime = time.ctime
_real_strftime = time.strftime
_UTC = _datetime.UTC

WallAt = Callable[[types.FrameType], float]
"""The wall clock as code in a frame reads it: virtual in a run, real elsewhere."""


class Calendar(NamedTuple):
    """The stand-ins, each for the original it replaces."""

    datetime: type[_datetime.datetime]
    date: type[_datetime.date]
    module: types.ModuleType
    localtime: Callable[..., time.struct_time]
    gmtime: Callable[..., time.struct_time]
    ctime: Callable[..., str]
    strftime: Callable[..., str]


class _StandsFor(type):
    """The metaclass of a stand-in: type checks answer for the real type."""

    _real: type

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls._real)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._real)


def calendar(wall_at: WallAt) -> Calendar:
    """The stand-ins, reading the wall clock through ``wall_at`` (given the caller's frame)."""
    from sys import _getframe

    class datetime(_real_datetime, metaclass=_StandsFor):
        _real = _real_datetime

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return _real_datetime(*args, **kwargs)

        @classmethod
        def now(cls, tz: _datetime.tzinfo | None = None) -> Any:
            return _real_datetime.fromtimestamp(wall_at(_getframe(1)), tz)

        @classmethod
        def today(cls) -> Any:
            return _real_datetime.fromtimestamp(wall_at(_getframe(1)))

        @classmethod
        def utcnow(cls) -> Any:
            return _real_datetime.fromtimestamp(wall_at(_getframe(1)), _UTC).replace(tzinfo=None)

    class date(_real_date, metaclass=_StandsFor):
        _real = _real_date

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return _real_date(*args, **kwargs)

        @classmethod
        def today(cls) -> Any:
            return _real_date.fromtimestamp(wall_at(_getframe(1)))

    for stand_in, real in ((datetime, _real_datetime), (date, _real_date)):
        stand_in.__module__ = real.__module__
        stand_in.__qualname__ = real.__qualname__
        stand_in.__doc__ = real.__doc__

    module = types.ModuleType(_datetime.__name__, _datetime.__doc__)
    module.__dict__.update(vars(_datetime))
    module.datetime = datetime  # type: ignore[attr-defined]
    module.date = date  # type: ignore[attr-defined]

    def localtime(seconds: float | None = None) -> time.struct_time:
        return _real_localtime(wall_at(_getframe(1)) if seconds is None else seconds)

    def gmtime(seconds: float | None = None) -> time.struct_time:
        return _real_gmtime(wall_at(_getframe(1)) if seconds is None else seconds)

    def ctime(seconds: float | None = None) -> str:
        return _real_ctime(wall_at(_getframe(1)) if seconds is None else seconds)

    def strftime(format: str, t: Any = None) -> str:
        return _real_strftime(format, _real_localtime(wall_at(_getframe(1))) if t is None else t)

    for function, real_function in (
        (localtime, _real_localtime),
        (gmtime, _real_gmtime),
        (ctime, _real_ctime),
        (strftime, _real_strftime),
    ):
        function.__name__ = function.__qualname__ = real_function.__name__
        function.__doc__ = real_function.__doc__
    return Calendar(datetime, date, module, localtime, gmtime, ctime, strftime)


REAL = Calendar(
    _real_datetime,
    _real_date,
    _datetime,
    _real_localtime,
    _real_gmtime,
    _real_ctime,
    _real_strftime,
)
"""The originals, field by field."""
