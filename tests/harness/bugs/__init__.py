"""A suite of small buggy asyncio programs, each with its fix.

Every module defines ``buggy()`` and ``fixed()`` (zero-argument ``async def`` functions), ``KIND``
(the failure kind interlace must report for ``buggy``), ``HIDDEN`` (True when ``buggy`` passes under
stock asyncio order, so the harness has to deviate to find it) and a docstring naming the bug,
the real-world timing that triggers it, and why the fix works.
"""

from __future__ import annotations

__all__ = ("PROGRAMS",)

PROGRAMS = (
    "lost_update",
    "lock_order_deadlock",
    "wait_for_retry",
    "lease_expiry",
    "stale_restore",
    "event_lost_wakeup",
    "condition_lost_wakeup",
    "orphaned_get",
    "cancel_check_act",
    "cache_double_create",
    "anyio_stream_clone",
    "anyio_cancel_scope",
    "anyio_counter",
    "pool_oversubscription",
    "request_quota",
    "fanout_order",
    "missed_subscription",
    "progress_spin",
    "pulse_spin",
    "stream_interleave",
)
"""Module names, in the order the tests and benchmarks list them."""
