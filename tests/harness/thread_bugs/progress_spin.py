"""An orchestrator polls a progress counter that a lost update keeps short: a hang (hidden).

Bug: three worker threads report completion with ``job.done += 1`` (a read-modify-write); the
orchestrator polls ``while job.done < 3: time.sleep(0.01)``. With no preemption the increments
never overlap; when the switch interval ends a worker between its read and its write, an
increment is lost, ``done`` stays at 2 and the orchestrator polls forever without seeing
progress.

Fix: increment under a lock.

Deviations: 1 (preempt one worker inside its increment; the next worker's increment is then
overwritten).
"""

from __future__ import annotations

import threading
import time

KIND = "hang"
HIDDEN = True
DEVIATIONS = 1

WORKERS = 3


class Job:
    def __init__(self) -> None:
        self.done = 0
        self.lock = threading.Lock()


def _scenario(*, locked: bool) -> None:
    job = Job()

    def work() -> None:
        if locked:
            with job.lock:
                job.done += 1
        else:
            job.done += 1

    workers = [threading.Thread(target=work, daemon=True) for _ in range(WORKERS)]
    for worker in workers:
        worker.start()
    while job.done < WORKERS:
        time.sleep(0.01)  # poll the progress counter


def buggy() -> None:
    _scenario(locked=False)


def fixed() -> None:
    _scenario(locked=True)
