"""Every schedule point has the same number whether or not a chooser looks at it.

Python 3.11 counts some points inside lines without tracing the line's opcodes while no
decision is due there (``_threads._trace_local``, ``Plan.lazy``); a step number is how a
token names a point, so a point must get the same number either way. Each test here runs a
program once with a chooser consulted at every point (every point counted where it is) and
then once per point with a chooser consulted only there, and checks that the chooser sees
the same place under the same number. On 3.12+ every point is counted where it is, and the
tests check the same thing of the ``sys.monitoring`` hooks. The last test checks that the
shortcut 3.11 takes at ``with lock:`` (``Plan.eager``) reads the lock the line is about to
take.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from interlace._core.schedule import Settings
from interlace._core.strategy import Chooser
from interlace.harness._threads import ThreadsBackend, controlled_exploration

# The choosers run inside the scheduler, so their own code must not be code under test (it
# would have schedule points): they are compiled under a "<...>" name, which is not.
_CHOOSERS = """
import sys

from interlace._core.strategy import NEVER, Chooser


def place(program):
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == program:
            return frame.f_code.co_name, frame.f_lineno, frame.f_lasti
        frame = frame.f_back
    return "", 0, 0  # a point of the scheduler's own (a thread's start or end)


class Everywhere(Chooser):
    def __init__(self, program):
        self.consult_at = 0
        self.program = program
        self.places = {}

    def choose(self, step, actors, can_advance):
        self.places[step] = place(self.program)
        self.consult_at = step + 1
        return 0


class SwitchAt(Chooser):
    # Consulted at every point up to the first in function name at line: there it takes
    # the first other thread, and is never consulted again.

    def __init__(self, program, name, line):
        self.consult_at = 0
        self.program = program
        self.name = name
        self.line = line
        self.switched = False

    def choose(self, step, actors, can_advance):
        where = place(self.program)
        if where[0] == self.name and where[1] == self.line:
            self.consult_at = NEVER
            self.switched = True
            return 1
        self.consult_at = step + 1
        return 0


class Once(Chooser):
    def __init__(self, program, step):
        self.consult_at = step
        self.program = program
        self.places = {}

    def choose(self, step, actors, can_advance):
        self.places[step] = place(self.program)
        self.consult_at = NEVER
        return 0
"""
_namespace: dict[str, Any] = {}
exec(compile(_CHOOSERS, "<choosers>", "exec"), _namespace)
Everywhere: Callable[[str], Any] = _namespace["Everywhere"]
"""Consulted at every point; ``places`` maps each step to where it was."""
SwitchAt: Callable[[str, str, int], Any] = _namespace["SwitchAt"]
"""Takes another thread at the first point at a place, and is never consulted again."""
Once: Callable[[str, int], Any] = _namespace["Once"]
"""Consulted only at the given step; ``places`` maps it to where it was."""


def _helper(table: dict[object, int], key: object) -> int:
    return table.get(key, 0)


def _counts(table: dict[object, int]) -> Iterator[int]:
    for key in range(3):
        table[key] = table.get(key, 0) + 1
        yield key


class _Box:
    def __init__(self) -> None:
        self.items: dict[object, int] = {}
        self.lock = threading.Lock()

    @property
    def size(self) -> int:
        return len(self.items)


def _worker(table: dict[object, int], lock: threading.Lock) -> None:
    box = _Box()
    frozen = (1,)
    for key in range(4):
        with lock:  # a with of a plain local, its one point
            time.sleep(0.001)  # the other thread runs, and waits for the lock
            table[key] = table.get(key, 0) + 1
        with box.lock:  # a with of an attribute
            pass
        gone = lock
        del gone
        try:
            with gone:  # type: ignore[misc]  # noqa: F821 - unbound: raises before the with
                pass
        except UnboundLocalError:
            pass
        table[key] = table.get(key, 0) + 1  # a point inside the line, straight to it
        table[key] = _helper(table, key) + 1  # a call to code under test before it
        box.items[key] = box.size + 1  # a property (a call) before it
        try:  # noqa: SIM105 - the exception must come from this frame's line
            table[key] = table["missing"] + 1  # raises before the point
        except KeyError:
            pass
        try:  # noqa: SIM105 - the exception must come from this frame's line
            frozen[0] = frozen[0] + 1  # type: ignore[index]  # raises at the point
        except TypeError:
            pass
        table[key] = (
            table.get(key, 0)  # a statement on several lines
            + 1
        )
        for _ in _counts(table):  # the point in a generator's frame
            pass
        table[key] = table[key] + 1 if key % 2 else table[key]  # a jump before it
    table["last"] = table.get("last", 0) + 1  # the last line before the return


def _program() -> None:
    table: dict[object, int] = {}
    lock = threading.Lock()
    threads = [threading.Thread(target=_worker, args=(table, lock)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _run(backend: ThreadsBackend, chooser: Chooser) -> int:
    result = backend.run(chooser)
    assert result.kind is None, result.detail
    return result.steps


def test_a_point_has_the_same_number_whether_or_not_a_chooser_is_due_there() -> None:
    with controlled_exploration((), _program):
        backend = ThreadsBackend(_program, Settings(backend="threads"))
        everywhere = Everywhere(__file__)
        steps = _run(backend, everywhere)
        assert _run(backend, Chooser()) == steps
        inside = [step for step, (_, line, _) in everywhere.places.items() if line]
        assert len(inside) > 100, "the program should offer a choice at most of its points"
        for step in inside:
            once = Once(__file__, step)
            assert _run(backend, once) == steps
            assert once.places == {step: everywhere.places[step]}, step


_LOCK_C = threading.Lock()
_LOCK_D = threading.Lock()
_HOLDS_D = threading.Event()


def _rebinds_its_lock() -> None:
    lock = _LOCK_C
    with lock:
        pass
    _HOLDS_D.wait()
    lock = _LOCK_D  # the same local: now a lock the other thread holds
    with lock:
        pass


def _holds_d() -> None:
    with _LOCK_D:
        _HOLDS_D.set()
        pass  # SwitchAt's place: the other thread runs from here, while this one holds D


def _rebinding_program() -> None:
    _HOLDS_D.clear()
    threads = [threading.Thread(target=target) for target in (_rebinds_its_lock, _holds_d)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_a_with_of_a_rebound_local_reads_the_local_anew() -> None:
    # 3.11 reads the lock of ``with lock:`` from the frame's f_locals at the line's event.
    # That dict is the same object at every event of a frame but is brought up to date only
    # when f_locals is read: a dict kept from the first ``with`` would show _LOCK_C at the
    # second, free, and the thread would take _LOCK_D for real while the other thread holds
    # it (a stall).
    line = _holds_d.__code__.co_firstlineno + 3
    with controlled_exploration((), _rebinding_program):
        backend = ThreadsBackend(_rebinding_program, Settings(backend="threads"))
        chooser = SwitchAt(__file__, "_holds_d", line)
        _run(backend, chooser)
        assert chooser.switched
