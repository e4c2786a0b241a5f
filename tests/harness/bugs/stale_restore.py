"""Stale restore across ``yield`` in an ``@asynccontextmanager`` (fails under stock order).

Bug: ``Agent.state_context`` saves ``state``, sets the new one, yields, and restores the saved
value (the pattern of seed 000's ``state_context``). Two overlapping runs of the agent: the second
saves the first's temporary state, the first restores "idle", then the second restores the
first's state, and the agent is left "thinking" with nothing running. Any two runs that overlap
at all do this, so stock order shows it.

Fix: keep the states of the runs that are active in a list and derive ``state`` from it on every
enter and exit, so no run restores a copy that another run has since changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ._io import io

KIND = "exception"
HIDDEN = False


class Agent:
    def __init__(self) -> None:
        self.state = "idle"
        self._active: list[str] = []

    @contextlib.asynccontextmanager
    async def state_context_saving(self, state: str) -> AsyncIterator[None]:
        saved = self.state
        self.state = state
        try:
            yield
        finally:
            self.state = saved

    @contextlib.asynccontextmanager
    async def state_context_tracking(self, state: str) -> AsyncIterator[None]:
        self._active.append(state)
        self.state = state
        try:
            yield
        finally:
            self._active.remove(state)
            self.state = self._active[-1] if self._active else "idle"


async def _run(agent: Agent, state: str, *, tracking: bool) -> None:
    context = agent.state_context_tracking if tracking else agent.state_context_saving
    async with context(state):
        await io()  # call the model


async def _scenario(*, tracking: bool) -> None:
    agent = Agent()
    await asyncio.gather(
        _run(agent, "thinking", tracking=tracking), _run(agent, "acting", tracking=tracking)
    )
    assert agent.state == "idle", f"agent left in state {agent.state!r}"


async def buggy() -> None:
    await _scenario(tracking=False)


async def fixed() -> None:
    await _scenario(tracking=True)
