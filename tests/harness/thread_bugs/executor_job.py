"""An executor job finishes before its submitter registers it (hidden).

Bug: the tool runner submits each tool call to a ``ThreadPoolExecutor`` and then records the
future in ``self.pending``; the job removes its own entry when it is done. With no preemption
the submitting thread goes on and registers the job before the worker thread runs it; when
the submitter is preempted right after ``submit`` (the worker picks the job up at once), the
job finishes first and its ``pop`` raises ``KeyError``, which ``future.result()`` re-raises.

Fix: register the job before submitting it (under the runner's lock), so the entry exists
whenever the job runs.

This is a plain-function target whose executor threads run under control; ``job_races_task``
and ``job_lock_order`` are the ``async def`` counterparts (a job racing a task on the loop).

Deviations: 1 (preempt the submitter right after ``submit``).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


class ToolRunner:
    def __init__(self, executor: ThreadPoolExecutor, *, register_first: bool) -> None:
        self.executor = executor
        self.pending: dict[str, object] = {}
        self.results: dict[str, str] = {}
        self._lock = threading.Lock()
        self._register_first = register_first

    def _job(self, call_id: str) -> str:
        result = f"result of {call_id}"
        with self._lock:
            self.results[call_id] = result
            self.pending.pop(call_id)
        return result

    def submit(self, call_id: str) -> Future[str]:
        if self._register_first:
            with self._lock:
                self.pending[call_id] = call_id
            return self.executor.submit(self._job, call_id)
        future = self.executor.submit(self._job, call_id)
        with self._lock:
            self.pending[call_id] = future
        return future


def _scenario(*, register_first: bool) -> None:
    with ThreadPoolExecutor(max_workers=1) as executor:
        runner = ToolRunner(executor, register_first=register_first)
        future = runner.submit("call-1")
        assert future.result() == "result of call-1"
    assert runner.pending == {}


def buggy() -> None:
    _scenario(register_first=False)


def fixed() -> None:
    _scenario(register_first=True)
