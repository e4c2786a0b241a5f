"""What a passing marked test costs: schedules and wall time of explorations that find nothing.

Run: ``python benchmarks/passing_cost.py [--against SRC]``. Every program is correct code: the
fixed versions of the bug suite (``tests/harness/bugs``, small programs of 2-30 tasks) and a
few scenarios of the reference runtime's size. Each is explored with the defaults a
``@pytest.mark.interlace`` test gets (strategy ``auto``, ``max_schedules=1000``, seed 1), and
the table gives the schedules run, whether the search said it was exhausted, and the wall
seconds. ``--against SRC`` runs the same programs in a subprocess with ``SRC`` (another
checkout's ``src`` directory, e.g. a worktree of the previous release) first on
``sys.path``, so both columns come from one command on one machine.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "harness"))

Program = Callable[[], Coroutine[Any, Any, None]]


async def two_tasks_locked() -> None:
    lock = asyncio.Lock()
    balance = [100]

    async def withdraw(amount: int) -> None:
        async with lock:
            if balance[0] >= amount:
                await asyncio.sleep(0)
                balance[0] -= amount

    await asyncio.gather(withdraw(80), withdraw(80))
    assert balance[0] == 20


async def task_group_of_three() -> None:
    results: list[int] = []

    async def work(n: int) -> None:
        await asyncio.sleep(0.01 * n)
        results.append(n)

    async with asyncio.TaskGroup() as group:
        for n in range(3):
            group.create_task(work(n))
    assert sorted(results) == [0, 1, 2]


async def fifty_workers_on_a_queue() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for item in range(200):
        queue.put_nowait(item)
    seen: list[int] = []

    async def worker() -> None:
        while True:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await asyncio.sleep(0)
            seen.append(item)

    await asyncio.gather(*(worker() for _ in range(50)))
    assert sorted(seen) == list(range(200))


def programs() -> list[tuple[str, Program]]:
    from bugs import PROGRAMS  # type: ignore[import-not-found]

    found: list[tuple[str, Program]] = [
        ("two_tasks_locked", two_tasks_locked),
        ("task_group_of_three", task_group_of_three),
        ("fifty_workers_on_a_queue", fifty_workers_on_a_queue),
    ]
    for name in PROGRAMS:
        module = importlib.import_module(f"bugs.{name}")
        fixed = getattr(module, "fixed", None)
        if fixed is not None and asyncio.iscoroutinefunction(fixed):
            found.append((f"bugs.{name}.fixed", fixed))
    return found


def measure() -> list[dict[str, Any]]:
    import interlace

    rows = []
    for name, program in programs():
        started = time.perf_counter()
        exploration = interlace.explore(program, seed=1)
        rows.append(
            {
                "name": name,
                "schedules": exploration.schedules,
                "exhausted": exploration.exhausted,
                "failed": exploration.failure is not None,
                "seconds": time.perf_counter() - started,
            }
        )
    return rows


def main(argv: list[str]) -> int:
    if "--json" in argv:
        json.dump(measure(), sys.stdout)
        return 0
    against = argv[argv.index("--against") + 1] if "--against" in argv else None
    new = measure()
    old: list[dict[str, Any]] = []
    if against is not None:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(against))
        out = subprocess.run(
            [sys.executable, __file__, "--json"], env=env, capture_output=True, text=True
        )
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        old = json.loads(out.stdout)
    print(f"Python {sys.version.split()[0]}; explore(program, seed=1) with the defaults")
    head = f"{'program':<34} {'schedules':>9} {'exh':>4} {'s':>7}"
    if old:
        head += f"   {'before':>9} {'exh':>4} {'s':>7} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    total_new = total_old = 0.0
    for index, row in enumerate(new):
        line = (
            f"{row['name']:<34} {row['schedules']:>9} {'yes' if row['exhausted'] else 'no':>4} "
            f"{row['seconds']:>7.2f}" + ("  FAILED" if row["failed"] else "")
        )
        total_new += row["seconds"]
        if old:
            before = old[index]
            total_old += before["seconds"]
            ratio = row["seconds"] / before["seconds"] if before["seconds"] else 0.0
            line += (
                f"   {before['schedules']:>9} {'yes' if before['exhausted'] else 'no':>4} "
                f"{before['seconds']:>7.2f} {ratio:>5.1f}x"
            )
        print(line)
    total = f"{'total':<34} {'':>9} {'':>4} {total_new:>7.2f}"
    if old:
        total += f"   {'':>9} {'':>4} {total_old:>7.2f} {total_new / total_old:>5.1f}x"
    print(total)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
