"""Installed code that threads run without schedule points: named, and never "exhausted".

Code in a directory named ``site-packages`` gets no schedule points unless ``instrument``
names it, or it is the package of the explored function itself.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import interlace
from interlace.harness import api, cli

COUNTER = """
class Counter:
    def __init__(self):
        self.value = 0

    def incr(self):
        current = self.value
        self.value = current + 1


def total(values):
    return sum(values)
"""

SCENARIO = """
import threading

from unpointed_package import _counter


def two_increments():
    counter = _counter.Counter()
    threads = [threading.Thread(target=counter.incr) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.value == 2, counter.value
"""


@pytest.fixture
def site_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``site-packages`` directory on ``sys.path`` holding ``unpointed_lib`` (one module) and
    ``unpointed_package`` (a scenario module and the module with the race)."""
    library = tmp_path / "site-packages"
    package = library / "unpointed_package"
    package.mkdir(parents=True)
    (library / "unpointed_lib.py").write_text(COUNTER, encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "_counter.py").write_text(COUNTER, encoding="utf-8")
    (package / "scenarios.py").write_text(SCENARIO, encoding="utf-8")
    monkeypatch.syspath_prepend(str(library))
    yield library
    for name in list(sys.modules):  # the next test's copy is another file
        if name.split(".")[0] in ("unpointed_lib", "unpointed_package"):
            del sys.modules[name]


def _unpointed_lib() -> types.ModuleType:
    return importlib.import_module("unpointed_lib")


def _two_increments(library: types.ModuleType) -> Callable[[], None]:
    def scenario() -> None:
        counter = library.Counter()
        threads = [threading.Thread(target=counter.incr) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert counter.value == 2, counter.value

    return scenario


def test_a_race_in_uninstrumented_installed_code_is_never_called_exhausted(
    site_packages: Path,
) -> None:
    exploration = interlace.explore(
        _two_increments(_unpointed_lib()), strategy="exhaustive", max_schedules=500, seed=1
    )
    assert exploration.failure is None
    assert (exploration.exhausted, exploration.uninstrumented) == (False, ("unpointed_lib",))


def test_the_note_names_the_module_and_the_instrument_value_that_explores_it(
    site_packages: Path,
) -> None:
    exploration = interlace.explore(_two_increments(_unpointed_lib()), max_schedules=20, seed=1)
    how = api.MSG_UNINSTRUMENTED_API.format(
        names="'unpointed_lib'", flags="--instrument unpointed_lib"
    )
    assert api.explain_uninstrumented(exploration) == api.MSG_UNINSTRUMENTED.format(
        modules="unpointed_lib", packages="unpointed_lib", how=how
    )
    test_how = api.MSG_UNINSTRUMENTED_TEST.format(names="'unpointed_lib'", joined="unpointed_lib")
    assert api.explain_uninstrumented(exploration, test=True) == api.MSG_UNINSTRUMENTED.format(
        modules="unpointed_lib", packages="unpointed_lib", how=test_how
    )


def test_instrumenting_the_named_module_finds_the_race_and_names_nothing(
    site_packages: Path,
) -> None:
    exploration = interlace.explore(
        _two_increments(_unpointed_lib()),
        strategy="exhaustive",
        max_schedules=500,
        seed=1,
        instrument=["unpointed_lib"],
    )
    assert exploration.failure is not None
    assert isinstance(exploration.failure.exception, AssertionError)
    assert exploration.uninstrumented == ()
    assert api.explain_uninstrumented(exploration) == ""


def test_installed_code_run_while_the_run_has_one_thread_is_not_named(
    site_packages: Path,
) -> None:
    library = _unpointed_lib()

    def alone() -> None:
        counter = library.Counter()
        counter.incr()
        assert library.total([counter.value, 1]) == 2

    exploration = interlace.explore(alone, strategy="exhaustive", max_schedules=50, seed=1)
    assert (exploration.exhausted, exploration.uninstrumented) == (True, ())


def test_the_package_of_an_installed_target_gets_schedule_points_by_default(
    site_packages: Path,
) -> None:
    scenarios = importlib.import_module("unpointed_package.scenarios")
    exploration = interlace.explore(
        scenarios.two_increments, strategy="exhaustive", max_schedules=500, seed=1
    )
    assert exploration.failure is not None
    assert isinstance(exploration.failure.exception, AssertionError)
    assert exploration.uninstrumented == ()
    # The replay lines do not carry the automatic package: a replay finds it again.
    assert "instrument=" not in exploration.failure.report
    assert interlace.replay(scenarios.two_increments, exploration.failure.token) is not None


def test_the_package_of_the_target_is_found_whatever_the_last_session_instrumented(
    site_packages: Path,
) -> None:
    scenarios = importlib.import_module("unpointed_package.scenarios")
    for _ in range(2):  # the second session starts with the first one's instrumentation
        exploration = interlace.explore(
            scenarios.two_increments, strategy="exhaustive", max_schedules=500, seed=1
        )
        assert exploration.failure is not None


def test_the_command_line_summary_and_json_name_the_uninstrumented_module(
    site_packages: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "uses_unpointed_lib.py").write_text(
        "import threading\n\nimport unpointed_lib\n\n\n"
        "def scenario():\n"
        "    counter = unpointed_lib.Counter()\n"
        "    threads = [threading.Thread(target=counter.incr) for _ in range(2)]\n"
        "    for thread in threads:\n"
        "        thread.start()\n"
        "    for thread in threads:\n"
        "        thread.join()\n",
        encoding="utf-8",
    )
    target = f"{user / 'uses_unpointed_lib.py'}:scenario"
    args = ["explore", target, "--seed", "1", "--max-schedules", "20", "--strategy", "exhaustive"]
    assert cli.main(args) == cli.EXIT_CLEAN
    err = capsys.readouterr().err
    how = api.MSG_UNINSTRUMENTED_API.format(
        names="'unpointed_lib'", flags="--instrument unpointed_lib"
    )
    note = api.MSG_UNINSTRUMENTED.format(modules="unpointed_lib", packages="unpointed_lib", how=how)
    assert err.rstrip("\n").endswith(f" s); {note}")
    assert cli.main([*args, "--format", "json"]) == cli.EXIT_CLEAN
    payload = json.loads(capsys.readouterr().out)
    assert (payload["exhausted"], payload["uninstrumented"]) == (False, ["unpointed_lib"])


def test_a_test_tools_code_that_runs_in_a_thread_is_not_the_programs() -> None:
    # Hypothesis times every garbage collection with a gc callback, which runs in whichever
    # thread the collection happens in: a controlled thread of a later exploration in the
    # same process ran it "without schedule points", and the run was wrongly not exhausted.
    from hypothesis.internal.conjecture import junkdrawer

    from interlace.harness import _instrument

    junkdrawer.gc_cumulative_time()  # installs the callback, as a Hypothesis test run does
    assert _instrument.uninstrumented_module(junkdrawer.__file__) == ""

    def collect_in_two_threads() -> None:
        import gc

        threads = [threading.Thread(target=gc.collect) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    exploration = interlace.explore(collect_in_two_threads, max_schedules=50, seed=1)
    assert exploration.failure is None
    assert exploration.uninstrumented == ()
