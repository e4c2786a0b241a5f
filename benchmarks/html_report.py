"""The HTML report's size, the time to make one, and what keeping the schedule as first
found costs.

Run: ``python benchmarks/html_report.py`` (about a minute on 2 cores). Programs: the five
failing programs of ``tests/report/html_targets.py`` (an asyncio race and deadlock, a thread
race and deadlock, a mixed asyncio/thread race).

* size: ``len(failure.to_html(title=name).encode())`` for the failure of
  ``interlace.explore(target, max_schedules=300, seed=1, keep_unshrunk=True)``.
* time: the wall time of that ``to_html`` call (the first one of the process includes
  importing the renderer and reading its CSS and JS).
* keep_unshrunk: ``Exploration.elapsed`` summed over seeds 0-5 with ``keep_unshrunk=True``
  and without, in the same process, and their ratio.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "report"))

import html_targets

import interlace

NAMES = (
    "async_lost_update",
    "async_deadlock",
    "thread_lost_update",
    "thread_deadlock",
    "mixed_lost_update",
)
SEEDS = range(6)


def main() -> None:
    print(
        "| program | kind | steps | page bytes | to_html ms | explore s (keep_unshrunk) "
        "| explore s (without) | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in NAMES:
        target = getattr(html_targets, name)
        failure = interlace.explore(target, max_schedules=300, seed=1, keep_unshrunk=True).failure
        assert failure is not None, name
        started = time.perf_counter()
        page = failure.to_html(title=name)
        made = time.perf_counter() - started
        kept = sum(
            interlace.explore(target, max_schedules=300, seed=s, keep_unshrunk=True).elapsed
            for s in SEEDS
        )
        plain = sum(interlace.explore(target, max_schedules=300, seed=s).elapsed for s in SEEDS)
        print(
            f"| {name} | {failure.kind} | {failure.steps} | {len(page.encode())} | "
            f"{made * 1000:.1f} | {kept:.2f} | {plain:.2f} | {kept / plain:.2f} |"
        )


if __name__ == "__main__":
    main()
