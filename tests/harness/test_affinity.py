"""A run's threads share the CPU the run started on; the code under test never sees it.

Each run pins the thread that runs it to its current CPU, so the baton passes between
controlled threads without waking one on another (maybe busy) core (``_affinity``). These
tests need a platform with CPU affinity and at least two usable CPUs: elsewhere nothing is
pinned, which the last tests check.
"""

from __future__ import annotations

import _thread
import asyncio
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

import interlace
from interlace.harness import _affinity

MASK: set[int] = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
imported_getaffinity: Any = getattr(os, "sched_getaffinity", None)
"""As ``from os import sched_getaffinity`` leaves it: a module global bound to the function."""

needs_affinity = pytest.mark.skipif(
    len(MASK) < 2,
    reason="needs os.sched_getaffinity and at least two usable CPUs (Linux)",
)


def _real() -> set[int]:
    assert _affinity.real_getaffinity is not None
    return set(_affinity.real_getaffinity(0))


class Seen:
    def __init__(self) -> None:
        self.real: list[set[int]] = []
        self.reported: list[set[int]] = []
        self.imported: list[set[int]] = []
        self.counts: list[int | None] = []

    def look(self) -> None:
        self.real.append(_real())
        self.reported.append(set(os.sched_getaffinity(0)))  # type: ignore[attr-defined,unused-ignore]
        self.imported.append(set(imported_getaffinity(0)))
        if sys.version_info >= (3, 13):
            self.counts.append(os.process_cpu_count())


@needs_affinity
def test_a_threads_run_is_pinned_to_one_cpu_and_reports_the_mask_it_had() -> None:
    seen = Seen()

    def target() -> None:
        seen.look()
        worker = threading.Thread(target=seen.look)
        worker.start()
        worker.join()

    exploration = interlace.explore(target, max_schedules=3)

    assert exploration.failure is None
    assert len(seen.real) >= 2
    # Every thread of a run, the main one and those it starts, ran on one CPU of the mask.
    for real in seen.real:
        assert len(real) == 1
        assert real <= MASK
    # What the code under test read, through os or a name imported from it, was the mask.
    assert seen.reported == [MASK] * len(seen.reported)
    assert seen.imported == [MASK] * len(seen.imported)
    if sys.version_info >= (3, 13):
        assert seen.counts == [len(MASK)] * len(seen.counts)
    # And the thread that explored has its mask back.
    assert _real() == MASK
    assert os.sched_getaffinity is _affinity.real_getaffinity  # type: ignore[attr-defined,unused-ignore]


@needs_affinity
def test_an_async_run_pins_only_once_it_starts_threads_and_restores_after() -> None:
    seen = Seen()
    before_threads: list[set[int]] = []

    async def target() -> None:
        before_threads.append(_real())
        await asyncio.to_thread(seen.look)
        seen.look()

    exploration = interlace.explore(target, max_schedules=3)

    assert exploration.failure is None
    assert before_threads
    assert all(real == MASK for real in before_threads)
    assert seen.real
    assert all(len(real) == 1 for real in seen.real)
    assert seen.reported == [MASK] * len(seen.reported)
    assert _real() == MASK


@needs_affinity
def test_a_thread_a_run_leaves_behind_gets_the_mask_back() -> None:
    # Outside an exploration ``_thread`` is stock: this thread stands for a C library's
    # worker, started during a run and still there after it.
    pinned = _affinity.pin()
    assert pinned is not None
    release = _thread.allocate_lock()
    release.acquire()
    started = _thread.allocate_lock()
    started.acquire()
    tid: list[int] = []

    def worker() -> None:
        tid.append(threading.get_native_id())
        started.release()
        release.acquire()

    _thread.start_new_thread(worker, ())
    try:
        started.acquire()
        # Asked about it, the patch that runs install reports the mask from before.
        assert _affinity.sched_getaffinity(tid[0]) == MASK
        assert _affinity.real_getaffinity is not None
        assert _affinity.real_getaffinity(tid[0]) == {pinned.cpu}
        _affinity.unpin(pinned)
        assert _affinity.real_getaffinity(tid[0]) == MASK
        assert _real() == MASK
    finally:
        _affinity.unpin(pinned)
        release.release()


@needs_affinity
def test_a_platform_that_refuses_the_pin_runs_unpinned(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pid: int, mask: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(_affinity, "_real_setaffinity", refuse)
    monkeypatch.setattr(_affinity, "_usable", True)
    seen = Seen()

    def target() -> None:
        worker = threading.Thread(target=seen.look)
        worker.start()
        worker.join()

    exploration = interlace.explore(target, max_schedules=2)

    assert exploration.failure is None
    assert seen.real == [MASK] * len(seen.real)
    assert _affinity._usable is False  # it does not try again in this process


def test_without_affinity_nothing_is_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_affinity, "_usable", False)
    assert _affinity.pin() is None
    _affinity.unpin(None)  # nothing to give back

    def target() -> None:
        worker = threading.Thread(target=lambda: None)
        worker.start()
        worker.join()

    assert interlace.explore(target, max_schedules=2).failure is None


@needs_affinity
def test_the_cpu_is_read_from_proc_where_libc_has_no_sched_getcpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_affinity, "_getcpu", _affinity._cpu_from_proc)
    pinned = _affinity.pin()
    try:
        assert pinned is not None
        assert pinned.cpu in MASK
        assert _real() == {pinned.cpu}
    finally:
        _affinity.unpin(pinned)
    assert _real() == MASK


@needs_affinity
def test_a_cpu_number_that_cannot_be_read_leaves_the_run_unpinned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreadable() -> int:
        raise IndexError("list index out of range")

    monkeypatch.setattr(_affinity, "_getcpu", unreadable)
    monkeypatch.setattr(_affinity, "_usable", True)
    assert _affinity.pin() is None
    assert _real() == MASK
    assert _affinity._usable is False


_PRINT_MASK = "import os; print(sorted(os.sched_getaffinity(0)))"


@needs_affinity
def test_a_process_a_run_starts_has_the_mask_not_the_pin(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    written = tmp_path / "system.txt"

    def target() -> None:
        seen["run"] = _real()
        done = subprocess.run(
            [sys.executable, "-c", _PRINT_MASK], capture_output=True, text=True, check=True
        )
        seen["subprocess"] = done.stdout.strip()
        os.system(f'"{sys.executable}" -c "{_PRINT_MASK}" > "{written}"')
        seen["after"] = _real()

    assert interlace.explore(target, max_schedules=1).failure is None
    assert len(seen["run"]) == 1
    assert seen["subprocess"] == str(sorted(MASK))
    assert written.read_text().strip() == str(sorted(MASK))
    assert seen["after"] == seen["run"]  # and the run's thread is pinned again


@needs_affinity
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_forked_during_a_run_has_the_mask_not_the_pin() -> None:
    seen: dict[str, Any] = {}

    def target() -> None:
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover (the child)
            os.write(write, str(sorted(_real())).encode())
            os._exit(0)
        os.close(write)
        seen["child"] = os.read(read, 1000).decode()
        os.close(read)
        os.waitpid(child, 0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, 3.12+
        assert interlace.explore(target, max_schedules=1).failure is None
    assert seen["child"] == str(sorted(MASK))
