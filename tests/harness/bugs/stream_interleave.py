"""Two agent runs interleave their chunks on one output stream (fails under stock order).

Bug: each run writes its opening chunk, awaits the model, then writes its closing chunk to the
shared stream; two concurrent runs interleave (``a:start, b:start, a:end, b:end``) and the client
cannot tell which chunk belongs to which response. Any overlap shows it, stock order included.

Fix: hold the stream's ``asyncio.Lock`` for the whole response, so one run's chunks are
contiguous.
"""

from __future__ import annotations

import asyncio
import contextlib

from ._io import io

KIND = "exception"
HIDDEN = False


async def respond(stream: list[str], name: str, lock: asyncio.Lock | None) -> None:
    async with lock if lock is not None else contextlib.nullcontext():
        stream.append(f"{name}:start")
        await io()  # wait for the model's tokens
        stream.append(f"{name}:end")


async def _scenario(*, locked: bool) -> None:
    stream: list[str] = []
    lock = asyncio.Lock() if locked else None
    await asyncio.gather(respond(stream, "a", lock), respond(stream, "b", lock))
    for index in range(0, len(stream), 2):
        run = stream[index].split(":")[0]
        assert stream[index + 1] == f"{run}:end", f"chunks interleaved: {stream}"


async def buggy() -> None:
    await _scenario(locked=False)


async def fixed() -> None:
    await _scenario(locked=True)
