"""A spin-wait on a flag that is only pulsed misses the pulse (a hang); the fix spins correctly.

Bug: the gate opener sets ``gate.open``, awaits one round-trip, and closes it again; the waiter
spins ``while not gate.open: await asyncio.sleep(0)``. In stock order the waiter checks while the
gate is open; if the waiter's wakeup is a little late (the loop is busy with other callbacks), it
never sees the pulse and spins forever.

Fix: latch the flag (set once, never reset). The fixed program is a *correct* spin-wait,
``while not flag: await asyncio.sleep(0)``, which a fair scheduler must never report as a hang:
every task that can run eventually runs, so the waiter sees the flag.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "hang"
HIDDEN = True


class Gate:
    open = False


async def opener(gate: Gate, *, latch: bool) -> None:
    await io()  # receive the go-ahead
    gate.open = True
    await io()  # tell the coordinator
    if not latch:
        gate.open = False


async def waiter(gate: Gate) -> None:
    while not gate.open:  # noqa: ASYNC110 - the spin-wait is the program under test
        await asyncio.sleep(0)


async def buggy() -> None:
    gate = Gate()
    await asyncio.gather(waiter(gate), opener(gate, latch=False))


async def fixed() -> None:
    gate = Gate()
    await asyncio.gather(waiter(gate), opener(gate, latch=True))
