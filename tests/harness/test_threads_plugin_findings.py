"""Threads-backend findings from the pytest plugin and CLI work, kept as regression tests.

``instrument=`` once stopped applying after the harness modules were imported again (as
pytester makes happen): ``_threads`` reached ``_instrument`` through two imports, which then
named two copies of the module.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest

import interlace.harness
import interlace.harness.api  # in sys.modules before the test drops it, as under pytester

LIBRARY = """
class Registry:
    def __init__(self):
        self.items = {}
        self.created = 0

    def get(self, key):
        if key not in self.items:
            self.created += 1
            self.items[key] = object()
        return self.items[key]
"""


def test_instrument_still_applies_after_the_harness_modules_are_imported_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytester restores sys.modules after every test, dropping the harness modules a test
    # imported first while the package keeps them as attributes: the same happens here.
    for name in ("api", "_threads", "_instrument"):
        module = sys.modules.get(f"interlace.harness.{name}")
        if module is not None:
            monkeypatch.setattr(interlace.harness, name, module)  # restored afterwards
            monkeypatch.delitem(sys.modules, f"interlace.harness.{name}")
    library = tmp_path / "site-packages"  # not code under test unless instrumented
    library.mkdir()
    (library / "racy_library_finding.py").write_text(LIBRARY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(library))
    racy_library_finding = importlib.import_module("racy_library_finding")

    def one_object() -> None:
        registry = racy_library_finding.Registry()
        threads = [threading.Thread(target=registry.get, args=("k",)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert registry.created == 1

    from interlace.harness.api import explore

    exploration = explore(
        one_object, seed=1, max_schedules=200, instrument=["racy_library_finding"]
    )
    assert exploration.failure is not None
