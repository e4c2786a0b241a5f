"""Connection pool over-subscription with 20 clients (hidden under stock order).

Bug: ``Pool.acquire`` waits on a condition until a slot is free, releases the condition's lock,
does the TLS handshake, and only then takes the slot. Requests arrive every 10 ms and hold a
connection for 25 ms, so up to 3 are in use at once; in stock order the handshake completes in
the same instant as the check and the pool never exceeds 3. When a handshake takes longer than
the gap to the next arrival or release (a few ms of network latency), another client sees the
same free slot and the pool opens a fourth connection (the database refuses it in production).

Fix: take the slot under the condition's lock, in the same step as the check, and do the
handshake after; a failed handshake would give the slot back.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "exception"
HIDDEN = True

CLIENTS = 20
SIZE = 3


class Pool:
    def __init__(self, *, reserve_first: bool) -> None:
        self.in_use = 0
        self.peak = 0
        self._cond = asyncio.Condition()
        self._reserve_first = reserve_first

    async def acquire(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_use < SIZE)
            if self._reserve_first:
                self._take()
        await io()  # TLS handshake
        if not self._reserve_first:
            self._take()

    def _take(self) -> None:
        self.in_use += 1
        self.peak = max(self.peak, self.in_use)

    async def release(self) -> None:
        async with self._cond:
            self.in_use -= 1
            self._cond.notify()


async def client(pool: Pool, index: int) -> None:
    await asyncio.sleep(index * 0.01)  # requests arrive every 10 ms
    await pool.acquire()
    try:
        await asyncio.sleep(0.025)  # run the query
    finally:
        await pool.release()


async def _scenario(*, reserve_first: bool) -> None:
    pool = Pool(reserve_first=reserve_first)
    await asyncio.gather(*(client(pool, index) for index in range(CLIENTS)))
    assert pool.peak <= SIZE, f"{pool.peak} connections open in a pool of {SIZE}"
    assert pool.in_use == 0


async def buggy() -> None:
    await _scenario(reserve_first=False)


async def fixed() -> None:
    await _scenario(reserve_first=True)
