"""Error records silently dropped by a get-or-create on a shared dict (seed 003; hidden).

Bug: ``ErrorRecoveryService.record_error`` finds the plan's history with
``if plan_id not in self._histories: self._histories[plan_id] = ErrorHistory(plan_id)``, then
adds the record to it. Two worker threads record the first errors of one plan. With no
preemption the first worker checks, inserts and records before the second one checks; when
the first is preempted between its check and its insert (its switch interval ends there),
both see no history, both create one, and the second insert replaces the history that holds
the first record: the record is lost, and nothing raises.

Fix: ``self._histories.setdefault(plan_id, ErrorHistory(plan_id))``, the report's own fix. It is
one call into C on a dict keyed by ``str`` (hashing and comparing a ``str`` run no Python code),
so no other thread runs between its lookup and its insert. A lock held across the check and
the insert works too.

Deviations: 1 (preempt the first worker between its check and its insert; the second worker
then runs to its end).
"""

from __future__ import annotations

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


class ErrorHistory:
    def __init__(self, plan_id: str) -> None:
        self.plan_id = plan_id
        self.records: list[str] = []


class ErrorRecoveryService:
    def __init__(self, *, atomic: bool) -> None:
        self._histories: dict[str, ErrorHistory] = {}
        self._atomic = atomic

    def _get_or_create_history(self, plan_id: str) -> ErrorHistory:
        if self._atomic:
            return self._histories.setdefault(plan_id, ErrorHistory(plan_id))
        if plan_id not in self._histories:
            self._histories[plan_id] = ErrorHistory(plan_id)
        return self._histories[plan_id]

    def record_error(self, plan_id: str, error: str) -> None:
        self._get_or_create_history(plan_id).records.append(error)

    def errors(self, plan_id: str) -> list[str]:
        return sorted(self._histories[plan_id].records)


def _scenario(*, atomic: bool) -> None:
    service = ErrorRecoveryService(atomic=atomic)
    run_threads(
        lambda: service.record_error("plan-1", "timeout in step 2"),
        lambda: service.record_error("plan-1", "tool crashed in step 3"),
    )
    recorded = service.errors("plan-1")
    assert recorded == ["timeout in step 2", "tool crashed in step 3"], f"kept only {recorded}"


def buggy() -> None:
    _scenario(atomic=False)


def fixed() -> None:
    _scenario(atomic=True)
