"""What a schedule point costs at the least: interlace's stock run against a hook that does
nothing, on the workloads of ``threads_overhead.py``.

Run: ``python benchmarks/threads_point_floor.py`` (about a minute; ``--quick`` for fewer
repeats), on every CPython the project supports, e.g.
``PYENV_VERSION=3.13.0 PYTHONPATH=src python benchmarks/threads_point_floor.py``.

A schedule point before every line of the code under test needs a hook that the interpreter
calls at every line: ``sys.monitoring``'s LINE event on 3.12+, ``sys.settrace``'s line event
on 3.11. This prints, for one thread running each workload (so no thread ever waits for
another and the columns differ only by what runs at a line), the time over the uncontrolled
run's of:

* ``empty hook``: a hook that returns at once (on 3.11 a tracer that returns itself);
* ``counting hook``: one that counts the line and compares the count with a limit, the
  least a schedule point must do (a bound method, as interlace's);
* ``interlace stock``: one stock-order run of the controlled threads, in a session already
  set up (points inside lines and ``with lock:`` included; ``threads_overhead.py``'s
  ``stock`` column with one thread).

No tool that stops at every line can be cheaper than ``empty hook``: where that column is
over a target already, the target cannot be met at line granularity on that workload.

Each column is the minimum over the repeats; ``paired`` is the median, over the repeats, of
each repeat's ratio of ``interlace stock`` to the uncontrolled runs made just before and just
after it (as in ``threads_overhead.py``: the figure that a machine's changing load moves
least).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from threads_overhead import TOTAL_ITERATIONS, dict_list_workload, paired_stock, tight_workload

TOOL_ID = 4  # a sys.monitoring tool id interlace does not take while no exploration runs


class _Counter:
    def __init__(self) -> None:
        self.step = 0
        self.attention = 1 << 62

    def on_line(self, code: Any, line: int) -> Any:
        self.step += 1
        if self.step >= self.attention:
            return None
        return None

    def trace(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.step += 1
            if self.step >= self.attention:
                return self.trace
        return self.trace


def _empty_line(code: Any, line: int) -> Any:
    return None


def _empty_trace(frame: Any, event: str, arg: Any) -> Any:
    return _empty_trace


def _under_hook(workload: Callable[[], None], hook: str) -> float:
    """One uncontrolled run of ``workload`` with ``hook`` at every line of its worker."""
    counter = _Counter()
    if sys.version_info >= (3, 12):
        mon: Any = sys.monitoring
        mon.use_tool_id(TOOL_ID, "interlace-floor")
        try:
            mon.register_callback(
                TOOL_ID, mon.events.LINE, _empty_line if hook == "empty" else counter.on_line
            )
            for code in _codes(workload):
                mon.set_local_events(TOOL_ID, code, mon.events.LINE)
            started = time.perf_counter()
            workload()
            return time.perf_counter() - started
        finally:
            for code in _codes(workload):
                mon.set_local_events(TOOL_ID, code, 0)
            mon.register_callback(TOOL_ID, mon.events.LINE, None)
            mon.free_tool_id(TOOL_ID)
    tracer = _empty_trace if hook == "empty" else counter.trace
    codes = set(_codes(workload))

    def call(frame: Any, event: str, arg: Any) -> Any:
        return tracer if frame.f_code in codes else None

    threading.settrace(call)
    try:
        started = time.perf_counter()
        workload()
        return time.perf_counter() - started
    finally:
        threading.settrace(None)


def _codes(workload: Callable[[], None]) -> list[Any]:
    """The code objects under test: the workload and the worker nested in it."""
    top = workload.__code__
    return [top, *(c for c in top.co_consts if hasattr(c, "co_code"))]


def measure(name: str, workload: Callable[[], None], repeats: int) -> None:
    best: dict[str, float] = {}

    def keep(column: str, seconds: float) -> None:
        best[column] = min(best.get(column, float("inf")), seconds)

    paired: list[float] = []

    def uncontrolled() -> float:
        started = time.perf_counter()
        workload()
        seconds = time.perf_counter() - started
        keep("uncontrolled", seconds)
        return seconds

    for _ in range(repeats):
        uncontrolled()
        keep("empty hook", _under_hook(workload, "empty"))
        keep("counting hook", _under_hook(workload, "counting"))
        stock, ratio, _ = paired_stock(workload, uncontrolled)
        keep("interlace stock", stock)
        paired.append(ratio)
    base = best["uncontrolled"]
    print(
        f"{name:<12} {base * 1e3:9.1f} "
        + " ".join(
            f"{best[c] * 1e3:8.1f} {best[c] / base:5.2f}x"
            for c in ("empty hook", "counting hook", "interlace stock")
        )
        + f" {statistics.median(paired):5.2f}x ({min(paired):.2f}-{max(paired):.2f})",
        flush=True,
    )


def main(argv: list[str]) -> int:
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return 0
    repeats = 3 if "--quick" in argv else 7
    hook = "sys.monitoring LINE" if sys.version_info >= (3, 12) else "sys.settrace"
    print(
        f"python {sys.version.split()[0]}, hook: {hook}, one thread; min of {repeats} runs; "
        "ratio = time / uncontrolled"
    )
    print(
        f"{'workload':<12} {'uncontr ms':>9} {'empty hook':>15} {'counting hook':>15} "
        f"{'interlace stock':>15} {'paired (range)':>18}"
    )
    measure("dict/list", dict_list_workload(1, TOTAL_ITERATIONS), repeats)
    measure("tight", tight_workload(1, TOTAL_ITERATIONS * 4), repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
