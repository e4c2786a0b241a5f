"""Child-process entry points for the file store tests (importable under spawn)."""

from __future__ import annotations

import time
from multiprocessing.synchronize import Event
from pathlib import Path

from interlace.reference_impl import AgentMemory


def write_keys(base: str, agent_id: str, prefix: str, count: int) -> None:
    """Save ``count`` keys ``<prefix>-<i>`` for ``agent_id``."""
    with AgentMemory(base) as memory:
        for i in range(count):
            memory.save_sync(agent_id, f"{prefix}-{i}", {"writer": prefix, "i": i})


def write_and_hang_before_replace(
    base: str, agent_id: str, key: str, value: str, ready: Event
) -> None:
    """Start saving ``value``; pause forever once the temporary file is complete."""

    def pause(temp: Path, target: Path) -> None:
        ready.set()
        while True:
            time.sleep(60)

    memory = AgentMemory(base, before_replace=pause)
    memory.save_sync(agent_id, key, value)
