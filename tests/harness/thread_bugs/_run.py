"""Start threads and wait for them: the one way every program here runs its workers."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ("run_threads",)


def run_threads(*targets: Callable[[], object]) -> None:
    """Start one thread per target, in order, then join them all."""
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
