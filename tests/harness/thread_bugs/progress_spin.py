"""An orchestrator polls a progress counter that a lost update keeps short: a hang (hidden).

Bug: three worker threads report completion with a read-modify-write of ``job.done`` around a
log call (read ``done``, log "n of 3 done", write ``done + 1``); the orchestrator polls
``while job.done < 3: time.sleep(0.01)``. With no preemption the increments never overlap;
when the switch interval ends a worker between its read and its write, an increment is lost,
``done`` stays at 2 and the orchestrator polls forever without seeing progress.

Fix: hold a lock across the read, the log call and the write.

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
        self.log: list[str] = []
        self.lock = threading.Lock()


def _scenario(*, locked: bool) -> None:
    job = Job()

    def report() -> None:
        done = job.done + 1
        job.log.append(f"{done} of {WORKERS} done")
        job.done = done

    def work() -> None:
        if locked:
            with job.lock:
                report()
        else:
            report()

    workers = [threading.Thread(target=work, daemon=True) for _ in range(WORKERS)]
    for worker in workers:
        worker.start()
    while job.done < WORKERS:
        time.sleep(0.01)  # poll the progress counter


def buggy() -> None:
    _scenario(locked=False)


def fixed() -> None:
    _scenario(locked=True)
