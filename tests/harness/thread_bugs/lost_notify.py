"""A notify sent before anyone waits is lost: the worker waits forever (hidden).

Bug: the worker waits for its configuration with ``condition.wait()`` and no predicate; the
loader stores the configuration and calls ``notify()``. With no preemption the worker (started
first) reaches its wait before the loader runs, so the notify wakes it. When the worker's
start is delayed (the loader runs first), the notify finds nobody waiting and is lost; the
worker then waits for a notify that never comes.

Fix: wait for the state, not for the signal: ``condition.wait_for(lambda: config)`` returns at
once when the configuration is already there.

Deviations: 1 (run the loader before the worker when the main thread waits for them).
"""

from __future__ import annotations

import threading

from ._run import run_threads

KIND = "deadlock"
HIDDEN = True
DEVIATIONS = 1


def _scenario(*, predicate: bool) -> None:
    condition = threading.Condition()
    config: dict[str, str] = {}
    used: list[str] = []

    def worker() -> None:
        with condition:
            if predicate:
                condition.wait_for(lambda: config)
            else:
                condition.wait()
            used.append(config["model"])

    def loader() -> None:
        with condition:
            config["model"] = "small"
            condition.notify()

    run_threads(worker, loader)
    assert used == ["small"]


def buggy() -> None:
    _scenario(predicate=False)


def fixed() -> None:
    _scenario(predicate=True)
