"""The one place where the buggy programs wait for simulated I/O.

Every program awaits :func:`io` where real code would wait on the network (an HTTP call, a
database round-trip). Under interlace that is ``await asyncio.sleep(0)``: a schedule point whose
resumption the harness may postpone (await latency). The stress-testing baseline in
``benchmarks/harness_find.py`` swaps in random real delays with :func:`injected_latency`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

__all__ = ("injected_latency", "io")

_latency: Callable[[], float] | None = None


async def io() -> None:
    """Wait for one simulated I/O round-trip (a schedule point)."""
    await asyncio.sleep(0 if _latency is None else _latency())


@contextlib.contextmanager
def injected_latency(latency: Callable[[], float]) -> Iterator[None]:
    """Make every :func:`io` call sleep ``latency()`` seconds (real time on a stock loop)."""
    global _latency
    previous = _latency
    _latency = latency
    try:
        yield
    finally:
        _latency = previous
