"""Lock-order deadlock between agent memory and the tool registry (hidden under stock order).

Bug: ``summarize`` takes the memory lock, then the registry lock; ``register_tool`` first
validates the tool's schema, then takes the registry lock, then the memory lock. In stock order
``summarize`` holds both before ``register_tool`` asks for the registry, so it only waits. When
the memory read inside ``summarize`` is slower than the schema validation (one slow disk read),
each holds one lock and waits for the other forever.

Fix: both code paths take the locks in one global order (memory, then registry), so no cycle
of waiters can form.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "deadlock"
HIDDEN = True


class Runtime:
    def __init__(self) -> None:
        self.memory_lock = asyncio.Lock()
        self.registry_lock = asyncio.Lock()
        self.tools: list[str] = []
        self.summaries = 0


async def summarize(runtime: Runtime) -> None:
    async with runtime.memory_lock:
        await io()  # read the conversation memory
        async with runtime.registry_lock:
            await io()  # list the tools for the summary prompt
            runtime.summaries += 1


async def register_tool_unordered(runtime: Runtime, name: str) -> None:
    await io()  # validate the tool's JSON schema
    async with runtime.registry_lock:
        await io()  # persist the registration
        async with runtime.memory_lock:
            runtime.tools.append(name)


async def register_tool_ordered(runtime: Runtime, name: str) -> None:
    await io()  # validate the tool's JSON schema
    async with runtime.memory_lock, runtime.registry_lock:
        await io()  # persist the registration
        runtime.tools.append(name)


async def buggy() -> None:
    runtime = Runtime()
    await asyncio.gather(summarize(runtime), register_tool_unordered(runtime, "search"))
    assert runtime.tools == ["search"]


async def fixed() -> None:
    runtime = Runtime()
    await asyncio.gather(summarize(runtime), register_tool_ordered(runtime, "search"))
    assert runtime.tools == ["search"]
    assert runtime.summaries == 1
