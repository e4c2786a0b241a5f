"""An LLM request quota shared by 30 agent tasks grants more calls than it has (hidden).

Bug: ``Quota.try_take`` checks ``remaining > 0``, awaits the audit log, then decrements. The 30
agents' requests arrive 5 ms apart, so in stock order each request finishes before the next
arrives and exactly 10 are granted. When an audit write is slower than the gap to the next
request (a slow log sink), two requests see the last unit and the provider is called 11 times
(and rejects the 11th with a 429 in production).

Fix: decrement in the same step as the check and write the audit record afterwards.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "exception"
HIDDEN = True

AGENTS = 30
LIMIT = 10


class Quota:
    def __init__(self, *, take_first: bool) -> None:
        self.remaining = LIMIT
        self.granted = 0
        self._take_first = take_first

    async def try_take(self) -> bool:
        if self.remaining <= 0:
            return False
        if self._take_first:
            self.remaining -= 1
            await io()  # write the audit record
        else:
            await io()  # write the audit record
            self.remaining -= 1
        self.granted += 1
        return True


async def agent(quota: Quota, index: int) -> None:
    await asyncio.sleep(index * 0.005)
    await quota.try_take()


async def _scenario(*, take_first: bool) -> None:
    quota = Quota(take_first=take_first)
    await asyncio.gather(*(agent(quota, index) for index in range(AGENTS)))
    assert quota.granted == LIMIT, f"{quota.granted} calls granted on a quota of {LIMIT}"


async def buggy() -> None:
    await _scenario(take_first=False)


async def fixed() -> None:
    await _scenario(take_first=True)
