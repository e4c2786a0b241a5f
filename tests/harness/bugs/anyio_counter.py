"""anyio task group: a session counter loses an increment (hidden under stock order).

Bug: three request handlers in an anyio task group count finished sessions with a
read-await-write on a shared counter; each handler first does a different number of
round-trips, so in stock order their updates never overlap. When one handler's audit write is
slower than another's lookups, two read the same count and one increment is lost.

Fix: an ``anyio.Lock`` held across the read-modify-write.
"""

from __future__ import annotations

import contextlib

import anyio

from ._io import io

KIND = "exception"
HIDDEN = True


class Sessions:
    def __init__(self, *, locked: bool) -> None:
        self.finished = 0
        self._lock = anyio.Lock() if locked else None

    async def finish(self) -> None:
        async with self._lock if self._lock is not None else contextlib.nullcontext():
            count = self.finished
            await io()  # write the audit record
            self.finished = count + 1


async def handle(sessions: Sessions, lookups: int) -> None:
    for _ in range(lookups):
        await io()  # look up the user
    await sessions.finish()


async def _scenario(*, locked: bool) -> None:
    sessions = Sessions(locked=locked)
    async with anyio.create_task_group() as group:
        for lookups in (0, 2, 4):
            group.start_soon(handle, sessions, lookups)
    assert sessions.finished == 3, f"{sessions.finished} sessions counted, expected 3"


async def buggy() -> None:
    await _scenario(locked=False)


async def fixed() -> None:
    await _scenario(locked=True)
