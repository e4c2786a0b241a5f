"""Two consumers check ``queue.empty()`` then ``get()``: one blocks forever (hidden).

Bug: the embedding workers drain a ``queue.Queue`` of documents with
``while not jobs.empty(): document = jobs.get()``. With no preemption the first worker drains
the queue and the second finds it empty. When the first worker is preempted between its
``empty()`` check and its ``get()`` (on the last document), the second takes that document and
exits; the first then blocks in ``get()`` on an empty queue that nobody fills again.

Fix: make the check and the take one operation: ``jobs.get_nowait()``, stopping on
``queue.Empty``.

Deviations: 1 (preempt the first worker between its check and its ``get``).
"""

from __future__ import annotations

import queue

from ._run import run_threads

KIND = "deadlock"
HIDDEN = True
DEVIATIONS = 1

DOCUMENTS = 3


def _scenario(*, atomic: bool) -> None:
    jobs: queue.Queue[str] = queue.Queue()
    for number in range(DOCUMENTS):
        jobs.put(f"document-{number}")
    embedded: list[str] = []

    def worker() -> None:
        if atomic:
            while True:
                try:
                    document = jobs.get_nowait()
                except queue.Empty:
                    return
                embedded.append(document)
        else:
            while not jobs.empty():
                document = jobs.get()
                embedded.append(document)

    run_threads(worker, worker)
    assert sorted(embedded) == [f"document-{n}" for n in range(DOCUMENTS)]


def buggy() -> None:
    _scenario(atomic=False)


def fixed() -> None:
    _scenario(atomic=True)
