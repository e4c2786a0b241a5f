"""The reference error-recovery service: per-plan error histories that never lose a record."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping

from interlace.reference_impl._messages import ErrorRecord

__all__ = (
    "ErrorHistory",
    "ErrorRecoveryService",
)


class ErrorHistory:
    """The errors recorded for one plan, oldest first, bounded to ``max_records``.

    Thread-safe: :meth:`add` and the readers take the history's lock.

    Args:
        plan_id: The plan.
        max_records: Records kept (oldest dropped first), at least 1; ``None`` for no bound.

    Raises:
        ValueError: ``max_records`` is less than 1.
    """

    def __init__(self, plan_id: str, *, max_records: int | None = None) -> None:
        if max_records is not None and (
            isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1
        ):
            raise ValueError(f"max_records must be None or an int >= 1, got {max_records!r}")
        self.plan_id = plan_id
        self._lock = threading.Lock()
        self._records: deque[ErrorRecord] = deque(maxlen=max_records)

    def add(self, record: ErrorRecord) -> None:
        """Append ``record``. Thread-safe; not a schedule point.

        Raises:
            ValueError: ``record`` belongs to another plan.
        """
        if record.plan_id != self.plan_id:
            raise ValueError(
                f"record for plan {record.plan_id!r} cannot go into the history of {self.plan_id!r}"
            )
        with self._lock:
            self._records.append(record)

    @property
    def records(self) -> tuple[ErrorRecord, ...]:
        """A snapshot of the records, oldest first."""
        with self._lock:
            return tuple(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)


class ErrorRecoveryService:
    """Records errors per plan; safe to share between threads (for example as a DI singleton).

    The get-or-create of a plan's history, the numbering of the record and its append happen
    under one lock, so concurrent ``record_error`` calls for the same new plan share one
    history and no record is lost (the reported bug: two threads each create a history and one
    overwrites the other). ``dict.setdefault`` alone would keep the dict consistent but still
    build a throw-away history per call and leaves numbering and append unordered.

    Args:
        max_records_per_plan: Records kept per plan, or ``None`` for no bound.
    """

    def __init__(self, *, max_records_per_plan: int | None = None) -> None:
        self.max_records_per_plan = max_records_per_plan
        self._lock = threading.Lock()
        self._histories: dict[str, ErrorHistory] = {}
        self._next_sequence = 0

    def record_error(
        self,
        plan_id: str,
        error: BaseException | str,
        *,
        step_id: str | None = None,
        context: Mapping[str, object] | None = None,
    ) -> ErrorRecord:
        """Record ``error`` for ``plan_id`` and return the record. Thread-safe; never awaits.

        Raises:
            ValueError: ``plan_id`` is empty.
            TypeError: ``plan_id`` is not a str, or ``error`` is neither an exception nor a str.
        """
        if not isinstance(plan_id, str):
            raise TypeError(f"plan_id must be a str, got {type(plan_id).__name__}: {plan_id!r}")
        if not plan_id:
            raise ValueError("plan_id must be a non-empty string, got ''")
        if isinstance(error, BaseException):
            error_type, message = type(error).__name__, str(error)
        elif isinstance(error, str):
            error_type, message = "str", error
        else:
            raise TypeError(
                f"error must be an exception or a str, got {type(error).__name__}: {error!r}"
            )
        with self._lock:
            history = self._histories.get(plan_id)
            if history is None:
                history = ErrorHistory(plan_id, max_records=self.max_records_per_plan)
                self._histories[plan_id] = history
            record = ErrorRecord(
                plan_id=plan_id,
                sequence=self._next_sequence,
                error_type=error_type,
                message=message,
                step_id=step_id,
                context=dict(context or {}),
            )
            self._next_sequence += 1
            history.add(record)
        return record

    def get_history(self, plan_id: str) -> ErrorHistory | None:
        """The history of ``plan_id``, or ``None`` if no error was recorded for it."""
        with self._lock:
            return self._histories.get(plan_id)

    def error_count(self, plan_id: str) -> int:
        """The number of records kept for ``plan_id``."""
        history = self.get_history(plan_id)
        return 0 if history is None else len(history)

    def plan_ids(self) -> list[str]:
        """The plans with a history, in the order their first error was recorded."""
        with self._lock:
            return list(self._histories)

    def clear(self, plan_id: str) -> bool:
        """Drop ``plan_id``'s history; return whether it had one."""
        with self._lock:
            return self._histories.pop(plan_id, None) is not None
