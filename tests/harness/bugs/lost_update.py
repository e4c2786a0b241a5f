"""Lost update on an agent's token budget (hidden under stock order).

Bug: ``Budget.charge`` reads ``used``, awaits the billing service, then writes ``used + tokens``.
Two tool calls charge the same budget; the second first fetches its prompt. In stock order the
first charge finishes before the second reads, so the test passes; when the first billing call
is slower than the second tool's prompt fetch (a few ms of network latency), both read the old
total and one charge is lost.

Fix: hold an ``asyncio.Lock`` across the read, the await and the write, so the read-modify-write
is atomic with respect to other charges.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "exception"
HIDDEN = True


class Budget:
    def __init__(self, *, locked: bool) -> None:
        self.used = 0
        self._lock = asyncio.Lock() if locked else None

    async def charge(self, tokens: int) -> None:
        if self._lock is None:
            await self._charge(tokens)
        else:
            async with self._lock:
                await self._charge(tokens)

    async def _charge(self, tokens: int) -> None:
        used = self.used
        await io()  # record the charge with the billing service
        self.used = used + tokens


async def _tool_call(budget: Budget, tokens: int, fetches: int) -> None:
    for _ in range(fetches):
        await io()  # fetch the prompt
    await budget.charge(tokens)


async def _scenario(*, locked: bool) -> None:
    budget = Budget(locked=locked)
    await asyncio.gather(_tool_call(budget, 100, 0), _tool_call(budget, 30, 1))
    assert budget.used == 130, f"budget shows {budget.used} tokens used, expected 130"


async def buggy() -> None:
    await _scenario(locked=False)


async def fixed() -> None:
    await _scenario(locked=True)
