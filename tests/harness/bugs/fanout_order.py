"""Ten parallel tool calls written to the transcript in completion order (hidden).

Bug: each tool call appends its result to the shared transcript when it finishes; the
transcript is expected in call order (the model's tool-call ids are matched by position). With
equal latencies stock order finishes them in call order; any call that returns a little later
than the next one (real network jitter) puts the transcript out of order.

Fix: collect the results with ``asyncio.gather``, which returns them in call order whatever the
completion order, and extend the transcript once.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "exception"
HIDDEN = True

CALLS = 10


async def call_tool(index: int, transcript: list[int] | None) -> int:
    await io()  # call the tool
    if transcript is not None:
        transcript.append(index)
    return index


async def buggy() -> None:
    transcript: list[int] = []
    await asyncio.gather(*(call_tool(index, transcript) for index in range(CALLS)))
    assert transcript == list(range(CALLS)), f"transcript out of order: {transcript}"


async def fixed() -> None:
    transcript: list[int] = []
    transcript.extend(await asyncio.gather(*(call_tool(index, None) for index in range(CALLS))))
    assert transcript == list(range(CALLS)), f"transcript out of order: {transcript}"
