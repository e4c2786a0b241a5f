"""Lock-order deadlock between two budget transfers (hidden).

Bug: ``transfer(source, target, amount)`` locks the source account, writes an audit entry,
then locks the target. One thread moves budget from the research agent to the writer while
another moves it back. With no preemption the first transfer holds both locks before the
second starts; when the first thread is preempted between its two acquires (its switch
interval ends in the audit call), each thread holds one account's lock and waits for the
other's forever.

Fix: take the two locks in one global order (by account number), whichever way the money
moves, so no cycle of waiters can form.

Deviations: 1 (preempt the first thread after its first acquire; the second then takes its
first lock and blocks on the first thread's, which resumes and blocks in turn).
"""

from __future__ import annotations

import threading

from ._run import run_threads

KIND = "deadlock"
HIDDEN = True
DEVIATIONS = 1


class Account:
    def __init__(self, number: int, balance: int) -> None:
        self.number = number
        self.balance = balance
        self.audit: list[str] = []
        self.lock = threading.Lock()


def transfer(source: Account, target: Account, amount: int, *, ordered: bool) -> None:
    first, second = source, target
    if ordered and target.number < source.number:
        first, second = target, source
    with first.lock:
        source.audit.append(f"transfer {amount} to account {target.number}")
        with second.lock:
            source.balance -= amount
            target.balance += amount


def _scenario(*, ordered: bool) -> None:
    research, writer = Account(1, 100), Account(2, 100)
    run_threads(
        lambda: transfer(research, writer, 30, ordered=ordered),
        lambda: transfer(writer, research, 10, ordered=ordered),
    )
    assert (research.balance, writer.balance) == (80, 120)


def buggy() -> None:
    _scenario(ordered=False)


def fixed() -> None:
    _scenario(ordered=True)
