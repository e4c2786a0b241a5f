"""One agent shared by two threads, each running its own event loop: the second hangs (hidden).

Bug: an ``Agent`` guards its history with an ``asyncio.Lock``, and two threads each drive the
same agent with ``asyncio.run(agent.step(...))``. An asyncio lock belongs to the loop of the
first task that waits for it, and its release wakes that waiter with a plain ``call_soon`` on
the waiter's loop, which does not wake a loop sleeping in another thread. With no preemption
the first thread's step ends before the second starts and nobody waits. When the first thread
is preempted while it holds the lock (its model call is slow), the second thread's task waits
for the lock and its loop goes to sleep in ``select``; the release queues the wake-up on that
loop without waking it, so the second thread never runs again.

Fix: do not share asyncio primitives between loops. The step awaits the model outside any
lock and appends to the history under a ``threading.Lock`` held only for the synchronous
update.

Deviations: 1 (preempt the first thread while it holds the lock).
"""

from __future__ import annotations

import asyncio
import threading

from ._run import run_threads

KIND = "deadlock"
HIDDEN = True
DEVIATIONS = 1


class Agent:
    def __init__(self) -> None:
        self.history: list[str] = []
        self._async_lock = asyncio.Lock()
        self._thread_lock = threading.Lock()

    async def _model(self, prompt: str) -> str:
        await asyncio.sleep(0)  # the model call
        return f"reply to {prompt}"

    async def step(self, prompt: str) -> None:
        async with self._async_lock:
            reply = await self._model(prompt)
            self.history.append(reply)

    async def step_fixed(self, prompt: str) -> None:
        reply = await self._model(prompt)
        with self._thread_lock:
            self.history.append(reply)


def _scenario(*, fixed: bool) -> None:
    agent = Agent()
    step = agent.step_fixed if fixed else agent.step
    run_threads(lambda: asyncio.run(step("plan")), lambda: asyncio.run(step("review")))
    assert sorted(agent.history) == ["reply to plan", "reply to review"]


def buggy() -> None:
    _scenario(fixed=False)


def fixed() -> None:
    _scenario(fixed=True)
