"""A lease renewed 5 ms before it expires: two timers close together (hidden).

Bug: the lease server arms an expiry timer for the 1 s TTL when it grants the lease; the holder
sleeps 0.995 s and renews. In stock order the renewal timer is due first and always wins; under
real timing it can fire a few ms late (a busy loop, a GC pause) and the expiry timer, armed
earlier, fires first: the holder's renewal raises ``LeaseLostError`` while it still thinks it
holds the lease.

Fix: renew at half the TTL, so the renewal is due 0.5 s before the expiry: no plausible delay of
the renewal timer (and none within the harness's jitter window) lets the expiry overtake it.
"""

from __future__ import annotations

import asyncio

KIND = "exception"
HIDDEN = True

TTL = 1.0


class LeaseLostError(Exception):
    pass


class LeaseServer:
    def __init__(self) -> None:
        self.holder: str | None = None
        self._expiry: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry = asyncio.get_running_loop().call_later(TTL, self._expire)

    def _expire(self) -> None:
        self.holder = None

    def grant(self, holder: str) -> None:
        self.holder = holder
        self._arm()

    def renew(self, holder: str) -> None:
        if self.holder != holder:
            raise LeaseLostError(f"{holder!r} renewed a lease that had expired")
        self._arm()

    def release(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self.holder = None


async def _hold(renew_every: float) -> None:
    server = LeaseServer()
    server.grant("worker-1")
    for _ in range(3):
        await asyncio.sleep(renew_every)
        server.renew("worker-1")
    server.release()


async def buggy() -> None:
    await _hold(TTL - 0.005)


async def fixed() -> None:
    await _hold(TTL / 2)
