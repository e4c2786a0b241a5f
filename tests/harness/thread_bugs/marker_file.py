"""Exists-then-create on a file: the second thread's exclusive create fails (hidden).

Bug: two threads initialise one workspace; each writes the workspace's marker file with
``if not os.path.exists(path): open(path, "x")``. With no preemption the first thread's file
exists before the second checks; when the first is preempted between its check and its
create (a slow ``stat`` on a network file system is enough), both see no file, and the second
``open(..., "x")`` raises ``FileExistsError``.

Fix: ask for forgiveness, not permission: create with ``open(path, "x")`` and treat
``FileExistsError`` as "another thread initialised it". The operating system makes the
exclusive create atomic; no check before it can.

Deviations: 1 (preempt the first thread between its check and its create).
"""

from __future__ import annotations

import os
import tempfile

from ._run import run_threads

KIND = "exception"
HIDDEN = True
DEVIATIONS = 1


def initialise(path: str, owner: str, *, atomic: bool) -> None:
    if atomic:
        try:
            with open(path, "x") as marker:
                marker.write(owner)
        except FileExistsError:
            pass
        return
    if not os.path.exists(path):
        with open(path, "x") as marker:
            marker.write(owner)


def _scenario(*, atomic: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="interlace-marker-") as workspace:
        path = os.path.join(workspace, ".initialised")
        run_threads(
            lambda: initialise(path, "indexer", atomic=atomic),
            lambda: initialise(path, "planner", atomic=atomic),
        )
        with open(path) as marker:
            assert marker.read() in ("indexer", "planner")


def buggy() -> None:
    _scenario(atomic=False)


def fixed() -> None:
    _scenario(atomic=True)
