"""Equal code objects in two files are two programs to instrument, not one.

Code objects compare by their bytecode, names and constants, not by their file: the same source
loaded from two files (a test module loaded twice, a module and its vendored copy) gives equal
code objects with equal hashes. The harness keeps per-code state (a code object's schedule
points, its local ``sys.monitoring`` events, its footprint summary); keyed by value, the second
copy was taken for the first and ran without schedule points, so a race in it was missed.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import interlace

RACY = """
class Tracker:
    def __init__(self):
        self.histories = {}

    def record(self, key, message):
        history = self.histories.get(key)
        if history is None:
            history = []
            self.histories[key] = history
        history.append(message)
"""


@pytest.fixture
def load(tmp_path: Path) -> Iterator[Callable[[str, str], types.ModuleType]]:
    """Load ``RACY`` as module ``name`` from the file ``tmp_path/<folder>/<name>.py``."""
    names: list[str] = []

    def loader(folder: str, name: str) -> types.ModuleType:
        path = tmp_path / folder / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(RACY, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        names.append(name)
        spec.loader.exec_module(module)
        return module

    yield loader
    for name in names:
        sys.modules.pop(name, None)


def _two_records(module: types.ModuleType) -> Callable[[], None]:
    def scenario() -> None:
        tracker = module.Tracker()
        threads = [
            threading.Thread(target=tracker.record, args=("plan", message))
            for message in ("timeout", "refused")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(tracker.histories["plan"]) == 2, tracker.histories

    return scenario


def test_the_copies_are_equal_code_objects(
    load: Callable[[str, str], types.ModuleType],
) -> None:
    # The premise of this file: if CPython ever compares code by identity, it is moot.
    first, second = load("one", "tracker_one"), load("two", "tracker_two")
    assert first.Tracker.record.__code__ is not second.Tracker.record.__code__
    assert first.Tracker.record.__code__ == second.Tracker.record.__code__


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
def test_a_race_is_found_in_each_copy_explored_in_one_process(
    load: Callable[[str, str], types.ModuleType], strategy: str
) -> None:
    for folder, name in (("one", "tracker_one"), ("two", "tracker_two")):
        exploration = interlace.explore(
            _two_records(load(folder, name)), strategy=strategy, max_schedules=200, seed=3
        )
        assert exploration.failure is not None, f"the race in {name} was missed"


def test_an_installed_copy_explored_first_leaves_the_tested_copy_its_points(
    load: Callable[[str, str], types.ModuleType],
) -> None:
    installed = load("site-packages", "tracker_installed")
    first = interlace.explore(
        _two_records(installed), strategy="exhaustive", max_schedules=200, seed=3
    )
    assert first.failure is None
    assert first.uninstrumented == ("tracker_installed",)
    tested = interlace.explore(
        _two_records(load("tests", "tracker_tested")), strategy="exhaustive", max_schedules=200
    )
    assert tested.failure is not None
