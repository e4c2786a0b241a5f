"""Which preemptions a GIL build can make: the label says when a schedule needs free threading.

CPython with the GIL hands it to another thread only where the running thread checks for a
request (a call, a function's start, a loop's back-edge) or blocks. A failing schedule that
preempts a thread at a point with no such check since its previous point happens only on a
free-threaded build: the label says "needs a free-threaded build", and the step says why.
Where the same preemption a few points on (at a call) fails the same way, the report shows
that one, labelled "needs thread preemption".
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import interlace

SEED = 1
FREE_THREADED = "needs a free-threaded build"
PREEMPTION = "needs thread preemption"


def _two_threads(work: Callable[[], object]) -> None:
    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def in_place(self) -> None:
        self.count += 1

    def over_two_lines(self) -> None:
        count = self.count
        self.count = count + 1

    def with_a_call_between(self) -> None:
        count = self.count
        len(())  # a call: with the GIL, the thread may be switched out here
        self.count = count + 1

    def with_a_loop_between(self) -> None:
        count = self.count
        while count < 0:  # never taken, but its test is a call-free back-edge target
            count += 1
        for _ in [()]:
            pass  # the back-edge of this loop is a check
        self.count = count + 1

    def through_a_property(self) -> None:
        count = self.through
        self.count = count + 1

    @property
    def through(self) -> int:
        return self.count


def _lost_update(method: str) -> Callable[[], None]:
    def scenario() -> None:
        counter = Counter()
        _two_threads(getattr(counter, method))
        assert counter.count == 2, counter.count

    scenario.__qualname__ = f"lost_update_{method}"
    return scenario


@pytest.mark.parametrize(
    ("method", "label"),
    [
        ("in_place", FREE_THREADED),
        ("over_two_lines", FREE_THREADED),
        ("with_a_call_between", PREEMPTION),
        ("with_a_loop_between", PREEMPTION),
        ("through_a_property", PREEMPTION),
    ],
)
def test_a_lost_update_is_labelled_with_where_a_gil_build_can_switch(
    method: str, label: str
) -> None:
    failure = interlace.explore(_lost_update(method), seed=SEED).failure
    assert failure is not None
    assert (failure.label, failure.deviations) == (label, 1)
    if label == FREE_THREADED:
        assert "(thread preemption, free-threaded builds only: with the GIL, " in failure.report
        assert "a free-threaded build (3.13t and later) can" in failure.report
    else:
        assert "(thread preemption)" in failure.report
        assert "free-threaded" not in failure.report


def _bump(counts: dict[str, int]) -> None:
    count = counts.get("k", 0)  # the read is a call: the GIL may switch as it returns
    counts["k"] = count + 1


def lost_update_read_by_a_call() -> None:
    counts: dict[str, int] = {}
    _two_threads(lambda: _bump(counts))
    assert counts["k"] == 2, counts


def test_a_preemption_a_gil_build_cannot_make_moves_back_to_where_it_can() -> None:
    # Shrinking may keep the preemption at the write's line, where a GIL build does not
    # switch (no call since the previous point); the same preemption a point back, as the
    # get() call returns, fails the same way with the GIL. A stock build loses updates here
    # (it was labelled "needs a free-threaded build" on one of these seeds).
    for seed in range(10):
        failure = interlace.explore(lost_update_read_by_a_call, seed=seed).failure
        assert failure is not None
        assert (failure.label, failure.deviations) == (PREEMPTION, 1), (seed, failure.report)


class Registry:
    def __init__(self) -> None:
        self.items: dict[str, object] = {}
        self.created = 0

    def get(self, key: str) -> object:
        if key not in self.items:
            self.created += 1
            self.items[key] = object()  # noqa: IL102 - the race under test
        return self.items[key]


def check_then_insert() -> None:
    registry = Registry()
    _two_threads(lambda: registry.get("k"))
    assert registry.created == 1, registry.created


def test_a_preemption_found_where_a_gil_build_cannot_switch_moves_to_where_it_can() -> None:
    # Shrinking leaves the preemption right after the check (no call since: free threading
    # only); the same preemption at the call of object() fails the same way with the GIL.
    failure = interlace.explore(check_then_insert, seed=7).failure
    assert failure is not None
    assert (failure.label, failure.deviations) == (PREEMPTION, 1)
    preempted = next(step for step in failure.schedule if "(preempted)" in step.suspended)
    where = preempted.suspended.removesuffix(" (preempted)")
    assert where.endswith(f"test_gil_realizable.py:{where.rsplit(':')[-1]}")
    line = int(where.rsplit(":")[-1])
    assert Path(__file__).read_text(encoding="utf-8").splitlines()[line - 1].strip() == (
        "self.items[key] = object()  # noqa: IL102 - the race under test"
    )
    replayed = interlace.replay(check_then_insert, failure.token)
    assert replayed is not None
    assert (replayed.label, replayed.schedule) == (failure.label, failure.schedule)


def test_a_replay_in_a_new_process_gives_the_same_label(tmp_path: Path) -> None:
    (tmp_path / "counters.py").write_text(
        textwrap.dedent(
            """
            import threading

            class Counter:
                def __init__(self):
                    self.count = 0

                def bump(self):
                    self.count += 1

            def scenario():
                counter = Counter()
                threads = [threading.Thread(target=counter.bump) for _ in range(2)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                assert counter.count == 2
            """
        ),
        encoding="utf-8",
    )

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "interlace", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        return done.stdout

    found = run("explore", "counters:scenario", "--seed", "1")
    assert "Label: needs a free-threaded build (1 deviation from stock order)" in found
    token = next(word for word in found.split() if word.startswith("il2."))
    replayed = run("replay", "counters:scenario", token)
    steps_and_label = found[found.index("\n") : found.index("Replay:")]  # after the header
    assert steps_and_label in replayed


def test_a_profile_function_of_the_program_is_put_back() -> None:
    calls: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        calls.append(event)

    sys.setprofile(profile)
    try:
        failure = interlace.explore(_lost_update("in_place"), seed=SEED).failure
        assert sys.getprofile() is profile
    finally:
        sys.setprofile(None)
    assert failure is not None
    assert failure.label == FREE_THREADED  # the probe was in place for the recorded run


# -- threads inside an async def exploration ------------------------------------------------------


async def lost_update_beside_the_loop() -> None:
    counter = Counter()
    job = asyncio.ensure_future(asyncio.to_thread(counter.in_place))
    await asyncio.sleep(0)
    counter.in_place()
    await job
    assert counter.count == 2, counter.count


async def check_then_insert_beside_the_loop() -> None:
    registry = Registry()
    job = asyncio.ensure_future(asyncio.to_thread(registry.get, "k"))
    await asyncio.sleep(0)
    first = registry.get("k")
    assert await job is first


@pytest.mark.parametrize(
    ("target", "label"),
    [
        (lost_update_beside_the_loop, FREE_THREADED),
        (check_then_insert_beside_the_loop, PREEMPTION),
    ],
)
def test_a_thread_preempting_the_loops_thread_is_labelled_the_same_way(
    target: Callable[[], object], label: str
) -> None:
    failure = interlace.explore(target, seed=1).failure
    assert failure is not None
    assert (failure.label, failure.deviations) == (label, 1)
    replayed = interlace.replay(target, failure.token)
    assert replayed is not None
    assert replayed.label == label
