"""Code under test that the garbage collector runs inside the scheduler is no schedule point.

A finalizer (``weakref.finalize``, ``__del__``) runs wherever an allocation triggers a
collection, the thread engine's own code included. Between registering a new thread and
starting its OS thread, a schedule point there could hand the baton to the child, which does
not run yet, while the parent that would start it waits for the baton: the run hung (seen in
the conformance kit's tests on 3.13, where a file store's finalizer ran inside
``Thread.start``). The collector's timing is not reproducible, so the test makes the moment
explicit: the finalizer runs right after the controller registers the child.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
import threading

import interlace
from interlace.harness import _threads

calls = []


def finalizer():  # code under test, as a finalizer the collector runs
    calls.append("collected")
    calls.append("cleaned up")


register = _threads.Controller.add


def add(self, *args, **kwargs):
    child = register(self, *args, **kwargs)
    finalizer()  # the collector picked the moment the child is registered, not yet started
    return child


_threads.Controller.add = add


def scenario():
    box = []
    threads = [threading.Thread(target=box.append, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(box) == [0, 1]


exploration = interlace.explore(scenario, strategy="exhaustive", max_schedules=50, seed=1)
assert exploration.failure is None, exploration.failure
assert calls, "the finalizer never ran"
print("explored", exploration.schedules, "schedules")
"""


def test_a_finalizer_inside_thread_start_neither_switches_nor_hangs(tmp_path: Path) -> None:
    script = tmp_path / "finalizer_in_start.py"
    script.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    # A separate process: before the fix this hung for good, and a hang is the failure.
    try:
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            "the exploration hung: a schedule point inside Thread.start switched to the child"
        ) from None
    assert done.returncode == 0, done.stdout + done.stderr
    assert "explored" in done.stdout
