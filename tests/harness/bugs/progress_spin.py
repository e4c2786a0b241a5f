"""An orchestrator polls a progress counter that a lost update keeps short: it spins forever.

Bug: three subtasks report completion with a read-await-write on ``job.done``; the
orchestrator polls every second until ``done == 3``. Their start-up work differs, so in stock
order the updates never overlap; when one progress report is slower than another subtask's
start-up (a slow dashboard call), an increment is lost, ``done`` stays at 2, and the
orchestrator polls without ever seeing progress (a hang).

Fix: do the awaited report first, then increment in one step (``job.done += 1`` after the
await), so no increment is computed from a stale read.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "hang"
HIDDEN = True

SUBTASKS = 3


class Job:
    done = 0


async def subtask(job: Job, startup: int, *, atomic: bool) -> None:
    for _ in range(startup):
        await io()  # start-up work
    if atomic:
        await io()  # report progress to the dashboard
        job.done += 1
    else:
        done = job.done
        await io()  # report progress to the dashboard
        job.done = done + 1


async def _scenario(*, atomic: bool) -> None:
    job = Job()
    tasks = [asyncio.ensure_future(subtask(job, n, atomic=atomic)) for n in range(SUBTASKS)]
    while job.done < SUBTASKS:  # noqa: ASYNC110 - the polling loop is the program under test
        await asyncio.sleep(1.0)  # poll
    await asyncio.gather(*tasks)


async def buggy() -> None:
    await _scenario(atomic=False)


async def fixed() -> None:
    await _scenario(atomic=True)
