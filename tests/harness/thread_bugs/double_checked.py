"""Double-checked locking without the re-check loads the settings twice (hidden).

Bug: ``Settings.get`` checks ``self._values is None`` without the lock (the fast path), then
takes the lock and loads, but does not check again under the lock. Two threads read the
settings at start-up. With no preemption the first thread loads them before the second
checks; when the first is preempted between its check and taking the lock, the second checks
too, and both load in turn: the settings file is read twice and the two threads may hold
different dicts (a change made through one is not seen through the other).

Fix: check again once the lock is held (the second half of double-checked locking), so the
thread that waited for the lock finds the settings loaded.

Deviations: 1 (preempt the first thread after its unlocked check).
"""

from __future__ import annotations

import threading

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


class Settings:
    def __init__(self, *, recheck: bool) -> None:
        self.loads = 0
        self._values: dict[str, str] | None = None
        self._lock = threading.Lock()
        self._recheck = recheck

    def _load(self) -> dict[str, str]:
        self.loads += 1
        return {"model": "small", "region": "eu"}

    def get(self) -> dict[str, str]:
        if self._values is None:
            with self._lock:
                if not self._recheck or self._values is None:
                    self._values = self._load()
        return self._values


def _scenario(*, recheck: bool) -> None:
    settings = Settings(recheck=recheck)
    run_threads(settings.get, settings.get)
    assert settings.loads == 1, f"the settings were loaded {settings.loads} times"


def buggy() -> None:
    _scenario(recheck=False)


def fixed() -> None:
    _scenario(recheck=True)
