"""A ``wait_for`` timeout racing the call's completion pays twice (a timer race, hidden).

Bug: ``pay`` wraps the provider call in ``asyncio.wait_for(..., timeout=1.0)`` and retries on
``TimeoutError``. The call takes 0.5 s to reach the provider (which takes the payment) and
0.495 s more for the acknowledgement, so in stock order it completes 5 ms before the timeout.
Under real timing the acknowledgement's timer can fire a few ms late (a busy loop, GC), the
timeout fires first, the retry sends the payment again, and the customer is charged twice.

Fix: the provider de-duplicates on an idempotency key, so a retry after an ambiguous timeout
cannot take the payment twice.
"""

from __future__ import annotations

import asyncio

KIND = "exception"
HIDDEN = True


class Provider:
    def __init__(self, *, idempotent: bool) -> None:
        self.payments: list[str] = []
        self._idempotent = idempotent

    async def charge(self, key: str) -> None:
        await asyncio.sleep(0.5)  # reach the payment provider
        if not (self._idempotent and key in self.payments):
            self.payments.append(key)
        await asyncio.sleep(0.495)  # wait for the acknowledgement


async def pay(provider: Provider, key: str) -> None:
    for _ in range(2):
        try:
            await asyncio.wait_for(provider.charge(key), timeout=1.0)
        except TimeoutError:
            continue
        return


async def _scenario(*, idempotent: bool) -> None:
    provider = Provider(idempotent=idempotent)
    await pay(provider, "order-17")
    assert provider.payments == ["order-17"], f"charged {len(provider.payments)} times"


async def buggy() -> None:
    await _scenario(idempotent=False)


async def fixed() -> None:
    await _scenario(idempotent=True)
