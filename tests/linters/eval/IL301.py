"""IL301 eval: an attribute saved, overwritten and restored after a suspension point.

Every expected finding carries a trailing ``# error: IL301`` on the line of the restore.
Negatives are named in a comment starting with ``# ok:``.
"""

import asyncio
import contextvars
from contextlib import asynccontextmanager, contextmanager

_current_state = contextvars.ContextVar("state", default="idle")
_mode = "normal"


class AgentState:
    IDLE = "idle"
    ERROR = "error"


class BaseAgent:
    def __init__(self):
        self.state = AgentState.IDLE
        self.depth = 0
        self.current_tool = None
        self._lock = asyncio.Lock()

    # Seed 000's state_context: restore in `finally` after the `yield`.
    @asynccontextmanager
    async def state_context(self, new_state):
        if not isinstance(new_state, str):
            raise ValueError(f"Invalid state: {new_state}")
        old_state = self.state
        self.state = new_state
        try:
            yield
        except Exception as e:
            self.state = AgentState.ERROR
            raise e
        finally:
            self.state = old_state  # error: IL301

    async def call_tool(self, tool, args):
        previous = self.current_tool
        self.current_tool = tool
        result = await tool(**args)
        self.current_tool = previous  # error: IL301
        return result

    async def nested(self, coro):
        saved_depth = self.depth
        self.depth = saved_depth + 1
        try:
            return await coro
        finally:
            self.depth = saved_depth  # error: IL301

    async def with_session(self, session_factory):
        previous = self.current_tool
        self.current_tool = "session"
        async with session_factory() as session:
            session.touch()
        self.current_tool = previous  # error: IL301

    # ok: the restore happens before the suspension point.
    async def quick_swap(self, tool):
        previous = self.current_tool
        self.current_tool = tool
        self.current_tool.prepare()
        self.current_tool = previous
        await asyncio.sleep(0)

    # ok: compare-and-restore: only restores if nobody changed it meanwhile.
    async def guarded_restore(self, tool):
        previous = self.current_tool
        self.current_tool = tool
        await tool()
        if self.current_tool is tool:
            self.current_tool = previous

    # ok: the lock is held across the save and the restore.
    async def locked_swap(self, tool):
        async with self._lock:
            previous = self.current_tool
            self.current_tool = tool
            await tool()
            self.current_tool = previous

    # ok: per-task state in a ContextVar instead of an attribute.
    @asynccontextmanager
    async def state_context_fixed(self, new_state):
        token = _current_state.set(new_state)
        try:
            yield
        finally:
            _current_state.reset(token)

    # ok: saved but never overwritten by this function before the suspension.
    async def snapshot(self):
        previous = self.state
        await asyncio.sleep(0)
        return previous

    # ok: the local is restored, not the attribute.
    async def local_only(self):
        state = self.state
        old = state
        state = "busy"
        await asyncio.sleep(0)
        state = old
        return state

    # ok: a synchronous context manager has no suspension point of its own.
    @contextmanager
    def sync_state(self, new_state):
        old = self.state
        self.state = new_state
        try:
            yield
        finally:
            self.state = old


async def with_mode(mode, coro):
    global _mode
    old_mode = _mode
    _mode = mode
    try:
        await coro
    finally:
        _mode = old_mode  # error: IL301


# ok: a rollback in `except` after a failed operation, not a temporary override.
class Session:
    async def connect(self, model):
        previous = self.model
        self.model = model
        try:
            await self.open()
        except BaseException:
            self.model = previous
            raise


# ok: the object is a parameter, owned by the caller for the duration of the call.
async def run_task(task, agent):
    original = task.description
    task.description = original + " (retry)"
    try:
        return await agent.execute(task)
    finally:
        task.description = original


# ok: the saved copy is rebound before the restore, so it is not a stale copy.
async def refreshed(agent):
    old = agent.state
    agent.state = "busy"
    await asyncio.sleep(0)
    old = agent.compute_state()
    agent.state = old
