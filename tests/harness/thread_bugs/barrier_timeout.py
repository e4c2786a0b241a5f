"""A barrier timeout shorter than the slowest warm-up breaks the barrier (fails under stock order).

Bug: two workers load their models and meet at a ``threading.Barrier`` before serving; the
second waits with ``barrier.wait(timeout=1.0)``, but the first worker's warm-up takes 2 s. The
timeout expires, the barrier breaks, and both workers get ``BrokenBarrierError``. No
interleaving is needed: it fails every time (here in virtual time, instantly).

Fix: the timeout bounds the slowest party's warm-up (or there is none), so the barrier only
breaks when a worker is really stuck.

Deviations: 0.
"""

from __future__ import annotations

import threading
import time

from ._run import run_threads

KIND = "exception"
HIDDEN = False
DEVIATIONS = 0

WARM_UP = 2.0


def _scenario(timeout: float) -> None:
    barrier = threading.Barrier(2)
    served: list[str] = []

    def slow_worker() -> None:
        time.sleep(WARM_UP)  # load the large model
        barrier.wait()
        served.append("large")

    def fast_worker() -> None:
        barrier.wait(timeout=timeout)
        served.append("small")

    run_threads(slow_worker, fast_worker)
    assert sorted(served) == ["large", "small"]


def buggy() -> None:
    _scenario(timeout=1.0)


def fixed() -> None:
    _scenario(timeout=WARM_UP * 5)
