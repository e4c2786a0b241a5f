"""A cancellation lands between check and act and money disappears (hidden).

Bug: ``transfer`` checks the balance, debits the source, awaits the journal write, then credits
the destination. It runs in a ``TaskGroup`` next to a quota check that fails after two
round-trips; the task group then cancels the transfer. In stock order the transfer has finished
by then; when its journal write is slower than the quota check (one slow disk flush), the
cancellation lands at that await, after the debit and before the credit: 30 is gone.

Fix: do the awaited journal write first, then check, debit and credit with no await between
them, so a cancellation can land only before any state changed.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "exception"
HIDDEN = True


class QuotaExceededError(Exception):
    pass


async def transfer_split(balances: dict[str, int], amount: int) -> None:
    await io()  # authorize
    if balances["alice"] >= amount:
        balances["alice"] -= amount
        await io()  # write the journal entry
        balances["bob"] += amount


async def transfer_atomic(balances: dict[str, int], amount: int) -> None:
    await io()  # authorize
    await io()  # write the journal entry
    if balances["alice"] >= amount:
        balances["alice"] -= amount
        balances["bob"] += amount


async def check_quota() -> None:
    await io()
    await io()
    raise QuotaExceededError("daily transfer quota exceeded")


async def _scenario(*, atomic: bool) -> None:
    balances = {"alice": 100, "bob": 0}
    move = transfer_atomic if atomic else transfer_split
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(move(balances, 30))
            group.create_task(check_quota())
    except* QuotaExceededError:
        pass
    assert sum(balances.values()) == 100, f"balances after the cancelled transfer: {balances}"


async def buggy() -> None:
    await _scenario(atomic=False)


async def fixed() -> None:
    await _scenario(atomic=True)
