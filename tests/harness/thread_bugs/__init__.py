"""A suite of small buggy threaded programs, each with its fix.

Every module defines ``buggy()`` and ``fixed()`` (zero-argument functions: plain ones that
start their own threads, or ``async def`` ones whose tasks start executor jobs), ``KIND`` (the
failure kind interlace must report for ``buggy``), ``HIDDEN`` (True when ``buggy`` passes when
no thread is preempted, so the harness has to deviate to find it), ``DEVIATIONS`` (the fewest
deviations from stock order any failing schedule has, argued in the docstring) and a
docstring naming the bug, the real-world timing that triggers it, and why the fix works.

Stock order is what a GIL interpreter does with no preemption: the running thread goes on until
it blocks or ends, then the thread that has waited longest runs (docs/harness.md, "Controlled
threads"). One deviation is one thread switch the switch interval (or an I/O wait the program
does not show) could cause.
"""

from __future__ import annotations

__all__ = ("PROGRAMS",)

PROGRAMS = (
    "error_history",
    "lazy_singleton",
    "double_checked",
    "token_counter",
    "transfer_deadlock",
    "lost_notify",
    "progress_spin",
    "marker_file",
    "import_time_lock",
    "executor_job",
    "two_loops",
    "lost_subscription",
    "queue_check_then_get",
    "semaphore_over_release",
    "barrier_timeout",
    "job_races_task",
    "job_lock_order",
)
"""Module names, in the order the tests and benchmarks list them."""
