"""The failing schedule shows the lines of an installed library the program called into.

The library here is written into a directory named ``site-packages`` under the test's tmp
path and imported from there, so that interlace treats it as an installed distribution (the
package under test installed, not editable), while this file is the program that calls it.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import textwrap
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import interlace
from interlace.errors import ConfigError
from interlace.harness import cli
from interlace.harness._introspect import short_path

LIBRARY = """
import asyncio
from contextlib import asynccontextmanager

from ticker import tick


class Agent:
    def __init__(self):
        self.state = "idle"
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def state_context(self, new_state):
        old_state = self.state
        self.state = new_state
        try:
            yield
        finally:
            async with self._lock:
                await asyncio.sleep(0)  # the restore
                self.state = old_state

    async def run(self, queue):
        async with self.state_context("running"):
            getter = asyncio.ensure_future(queue.get())
            done, pending = await asyncio.wait({getter}, timeout=1)
            for task in pending:
                task.cancel()
            return [t.result() for t in done]

    async def spin(self, count):
        for _ in range(count):
            await asyncio.sleep(0)  # spin a
            await asyncio.sleep(0)  # spin b

    async def run_with_ticks(self):
        await asyncio.ensure_future(tick(6))
        self.state = "ticked"


class Counter:
    def __init__(self):
        self.value = 0

    def incr(self):
        current = self.value
        self.value = current + 1
"""

TICKER = """
import asyncio


async def tick(count):
    for _ in range(count):
        await asyncio.sleep(0)
        await asyncio.sleep(0)
"""


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """``reportlib.agent``, installed in a ``site-packages`` directory of its own, with
    ``ticker``, a second installed package only ``reportlib`` calls."""
    site = tmp_path / "site-packages"
    (site / "reportlib").mkdir(parents=True)
    (site / "reportlib" / "__init__.py").write_text("")
    (site / "reportlib" / "agent.py").write_text(LIBRARY)
    (site / "ticker.py").write_text(TICKER)
    monkeypatch.syspath_prepend(str(site))
    yield importlib.import_module("reportlib.agent")
    for name in ("reportlib", "reportlib.agent", "ticker"):
        sys.modules.pop(name, None)


def _line(source: str, text: str) -> int:
    """The 1-based number of the one line of ``source`` that contains ``text``."""
    numbers = [n for n, line in enumerate(source.splitlines(), 1) if text in line]
    assert len(numbers) == 1, (text, numbers)
    return numbers[0]


HERE = Path(__file__).read_text()
THIS = short_path(__file__)
LIB = "reportlib/agent.py"


def _shown(report: str) -> list[str]:
    """The numbered schedule's lines, without the header."""
    return report.split("\n\n")[0].splitlines()[1:]


def _runs_directly(agent_module: types.ModuleType) -> types.FunctionType:
    Agent = agent_module.Agent

    async def runs_directly() -> None:
        agent = Agent()
        queue: asyncio.Queue[int] = asyncio.Queue()
        queue.put_nowait(1)
        queue.put_nowait(2)
        other = asyncio.create_task(agent.run(queue))
        await agent.run(queue)  # <program-call>
        await other
        assert agent.state == "idle", agent.state

    return runs_directly  # type: ignore[return-value]


def test_a_step_in_an_installed_library_shows_its_line_and_the_programs_call(
    library: types.ModuleType,
) -> None:
    failure = interlace.explore(_runs_directly(library), max_schedules=20, seed=1).failure
    assert failure is not None
    wait = _line(LIBRARY, "await asyncio.wait(")
    call = _line(HERE, "# <" + "program-call>")
    lines = _shown(failure.report)
    assert lines[0] == (
        f"   1. main: started _runs_directly.<locals>.runs_directly -> {LIB}:{wait} in "
        f"Agent.run (called from {THIS}:{call}): "
        "done, pending = await asyncio.wait({getter}, timeout=1)"
    )
    # The task the program started runs the library's code from its first frame on: there
    # is no line of the program on its stack to name.
    assert lines[1] == (
        f"   2. Task-2: started Agent.run -> {LIB}:{wait} in Agent.run: "
        "done, pending = await asyncio.wait({getter}, timeout=1)"
    )


def test_the_restore_inside_an_async_context_manager_is_shown_where_it_waits(
    library: types.ModuleType,
) -> None:
    failure = interlace.explore(_runs_directly(library), max_schedules=20, seed=1).failure
    assert failure is not None
    restore = _line(LIBRARY, "# the restore")
    acquire = _line(LIBRARY, "async with self._lock:")
    call = _line(HERE, "# <" + "program-call>")
    report = failure.report
    assert (
        f"-> {LIB}:{restore} in Agent.state_context (called from {THIS}:{call}): "
        "await asyncio.sleep(0)  # the restore" in report
    )
    # Its line does not name the asyncio call it waits in: the report does.
    assert (
        f"-> {LIB}:{acquire} in Agent.state_context (in asyncio.Lock.acquire): "
        "async with self._lock:" in report
    )


def test_steps_only_in_asyncio_are_still_folded_and_unfold_shows_them(
    library: types.ModuleType,
) -> None:
    target = _runs_directly(library)
    failure = interlace.explore(target, max_schedules=20, seed=1).failure
    assert failure is not None
    folded = _shown(failure.report)
    assert (
        "      ... steps 3-6: 4 steps that start and stop in library code (asyncio) ..." in folded
    )
    assert not any("started Queue.get" in line for line in folded)

    unfolded = interlace.explore(target, max_schedules=20, seed=1, unfold=True).failure
    assert unfolded is not None
    lines = _shown(unfolded.report)
    assert len(lines) == failure.steps == len(unfolded.schedule)
    assert not any("library code" in line for line in lines)
    assert "   3. Task-3: started Queue.get -> finished" in lines
    # Folding is only how the report reads: the schedule and its token are the same.
    assert unfolded.token == failure.token
    replayed = interlace.replay(target, failure.token, unfold=True)
    assert replayed is not None
    assert _shown(replayed.report) == lines


def test_steps_in_a_library_the_program_called_are_never_folded(
    library: types.ModuleType,
) -> None:
    Agent = library.Agent

    async def spins() -> None:
        agent = Agent()
        await agent.spin(3)  # <spin-call>
        assert agent.state == "spun", agent.state

    failure = interlace.explore(spins, max_schedules=5, seed=1).failure
    assert failure is not None
    call = _line(HERE, "# <" + "spin-call>")
    a = f"{LIB}:{_line(LIBRARY, '# spin a')} in Agent.spin (called from {THIS}:{call})"
    b = f"{LIB}:{_line(LIBRARY, '# spin b')} in Agent.spin (called from {THIS}:{call})"
    # Six steps in a row that start and stop in the library: each has its line.
    assert _shown(failure.report) == [
        f"  1. main: started {spins.__qualname__} -> {a}: await asyncio.sleep(0)  # spin a",
        *(
            f"  {n}. main: resumed at {x} -> {y}: await asyncio.sleep(0)  # spin {name}"
            for n, x, y, name in [
                (2, a, b, "b"),
                (3, b, a, "a"),
                (4, a, b, "b"),
                (5, b, a, "a"),
                (6, a, b, "b"),
            ]
        ),
        f"  7. main: resumed at {b} -> raised AssertionError: idle ...",
        "  8. loop: callback _run_until_complete_cb",
    ]


def test_a_library_the_program_never_called_is_still_folded(library: types.ModuleType) -> None:
    Agent = library.Agent

    async def ticks() -> None:
        agent = Agent()
        await agent.run_with_ticks()  # <ticks-call>
        assert agent.state == "idle", agent.state

    failure = interlace.explore(ticks, max_schedules=5, seed=1).failure
    assert failure is not None
    call = _line(HERE, "# <" + "ticks-call>")
    # ticker's task was started by reportlib, not by the program: its steps fold, and
    # what the program called stays.
    assert _shown(failure.report) == [
        f"   1. main: started {ticks.__qualname__} -> {LIB}:{_line(LIBRARY, 'tick(6)')} in "
        f"Agent.run_with_ticks (called from {THIS}:{call}): await asyncio.ensure_future(tick(6))",
        "      ... steps 2-14: 13 steps that start and stop in library code (ticker) ...",
        f"  15. main: resumed at {LIB}:{_line(LIBRARY, 'tick(6)')} in Agent.run_with_ticks "
        f"(called from {THIS}:{call}) -> raised AssertionError: ticked ...",
        "  16. loop: callback _run_until_complete_cb",
    ]


def test_a_thread_in_an_instrumented_library_shows_its_line_and_the_programs_call(
    library: types.ModuleType,
) -> None:
    counter = library.Counter()

    def bump() -> None:
        counter.incr()  # <thread-call>

    def two_threads() -> None:
        counter.value = 0
        threads = [threading.Thread(target=bump) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert counter.value == 2

    exploration = interlace.explore(two_threads, max_schedules=50, seed=1, instrument=["reportlib"])
    assert exploration.failure is not None
    act = _line(LIBRARY, "self.value = current + 1")
    call = _line(HERE, "# <" + "thread-call>")
    assert (
        f"-> {LIB}:{act} in Counter.incr (called from {THIS}:{call}) (preempted)"
        in exploration.failure.report
    )


async def _passes() -> None:
    await asyncio.sleep(0)


@pytest.mark.parametrize("value", [1, "yes", None])
def test_unfold_must_be_true_or_false(value: object) -> None:
    with pytest.raises(ConfigError) as explored:
        interlace.explore(_passes, unfold=value)  # type: ignore[arg-type]
    assert str(explored.value) == (
        f"unfold={value!r} (explore() argument) is invalid: expected True or False, "
        "e.g. unfold=True"
    )
    with pytest.raises(ConfigError) as replayed:
        interlace.replay(_passes, "il2.x", unfold=value)  # type: ignore[arg-type]
    assert str(replayed.value) == (
        f"unfold={value!r} (replay() argument) is invalid: expected True or False, e.g. unfold=True"
    )


def test_unfold_on_the_command_line_shows_every_step(
    library: types.ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "program.py").write_text(
        textwrap.dedent(
            """
            import asyncio

            from reportlib.agent import Agent


            async def runs_directly():
                agent = Agent()
                queue = asyncio.Queue()
                queue.put_nowait(1)
                queue.put_nowait(2)
                other = asyncio.create_task(agent.run(queue))
                await agent.run(queue)
                await other
                assert agent.state == "idle", agent.state
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "program", raising=False)
    assert cli.main(["explore", "program:runs_directly", "--seed", "1"]) == cli.EXIT_FINDINGS
    folded = capsys.readouterr().out
    token = next(
        line.split()[-1] for line in folded.splitlines() if line.startswith("  interlace replay")
    )
    assert "steps that start and stop in library code (asyncio)" in folded
    for command in (
        ["explore", "program:runs_directly", "--seed", "1", "--unfold"],
        ["replay", "program:runs_directly", token, "--unfold"],
    ):
        assert cli.main(command) == cli.EXIT_FINDINGS
        out = capsys.readouterr().out
        assert "library code" not in out
        assert "   3. Task-3: started Queue.get -> finished" in out
        assert "(called from program.py:13)" in out
