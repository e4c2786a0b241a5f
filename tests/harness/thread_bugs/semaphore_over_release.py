"""A semaphore released twice on an error path lets three calls in at once (hidden).

Bug: the model client allows two calls in flight with ``threading.Semaphore(2)``. Its error
path releases the slot in ``except`` and again in ``finally``, so each failed call adds a slot
for good. After one failed call three threads call the model; the summary is a long
generation that waits on the network while the other two run. With no preemption the other
two calls run one after the other while the summary waits, so at most two are in flight and
the extra slot is never used. When the second call is preempted in flight (its switch
interval ends), the third is let in as well: three calls against a limit of two (the provider
answers 429, or the memory budget is exceeded).

Fix: release in exactly one place (``with self._slots:``). A ``BoundedSemaphore`` would have
raised ``ValueError`` at the second release under any schedule.

Deviations: 1 (preempt the second call while it is in flight; the summary already waits).
"""

from __future__ import annotations

import threading
import time

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1

LIMIT = 2


class ModelClient:
    def __init__(self, *, release_once: bool) -> None:
        self._slots = threading.Semaphore(LIMIT)
        self._release_once = release_once
        self.in_flight: list[str] = []

    def _send(self, prompt: str) -> str:
        if prompt == "":
            raise ValueError("empty prompt")
        self.in_flight.append(prompt)
        assert len(self.in_flight) <= LIMIT, f"{len(self.in_flight)} calls in flight"
        if prompt == "summarise":
            time.sleep(0.5)  # a long generation, streamed from the provider
        self.in_flight.remove(prompt)
        return f"reply to {prompt}"

    def call(self, prompt: str) -> str | None:
        if self._release_once:
            with self._slots:
                try:
                    return self._send(prompt)
                except ValueError:
                    return None
        self._slots.acquire()
        try:
            return self._send(prompt)
        except ValueError:
            self._slots.release()
            return None
        finally:
            self._slots.release()


def _scenario(*, release_once: bool) -> None:
    client = ModelClient(release_once=release_once)
    assert client.call("") is None
    run_threads(
        lambda: client.call("summarise"),
        lambda: client.call("plan"),
        lambda: client.call("search"),
    )


def buggy() -> None:
    _scenario(release_once=False)


def fixed() -> None:
    _scenario(release_once=True)
