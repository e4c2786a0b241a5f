"""Lost wakeup on an ``asyncio.Condition``: notify before wait, no predicate (hidden).

Bug: the waiter registers, then ``await cond.wait()`` for the tool's result without checking
whether the result is already there. In stock order it is waiting before the tool finishes;
when its registration round-trip is slower than the tool (a cached tool answers at once), the
tool notifies nobody, and the waiter then waits for a notification that has already happened.

Fix: ``await cond.wait_for(lambda: job.result is not None)`` checks the predicate under the lock
before waiting, so a result published earlier is seen.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "deadlock"
HIDDEN = True


class Job:
    def __init__(self) -> None:
        self.cond = asyncio.Condition()
        self.result: str | None = None


async def waiter(job: Job, *, predicate: bool) -> str | None:
    await io()  # register interest with the scheduler
    async with job.cond:
        if predicate:
            await job.cond.wait_for(lambda: job.result is not None)
        else:
            await job.cond.wait()
        return job.result


async def tool(job: Job) -> None:
    await io()  # run the tool
    async with job.cond:
        job.result = "42"
        job.cond.notify_all()


async def _scenario(*, predicate: bool) -> None:
    job = Job()
    result, _ = await asyncio.gather(waiter(job, predicate=predicate), tool(job))
    assert result == "42"


async def buggy() -> None:
    await _scenario(predicate=False)


async def fixed() -> None:
    await _scenario(predicate=True)
