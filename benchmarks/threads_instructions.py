"""Overhead of controlled threads in instructions, which a loaded machine does not change.

Run: ``python benchmarks/threads_instructions.py`` (a few minutes: every run is under
valgrind; ``--quick`` measures dict/list only), on every CPython the project supports, e.g.
``PYENV_VERSION=3.12.1 PYTHONPATH=src python benchmarks/threads_instructions.py``. Needs
``valgrind`` on the PATH (Debian: ``apt-get install valgrind``).

Wall-clock ratios (``threads_overhead.py``) move with whatever else the machine runs; on a
shared two-core machine the same run gives 2.3x one minute and 3.4x the next. This counts the
instructions the CPU executes instead (``valgrind --tool=callgrind``), which are the same on
every run of the same interpreter and inputs, whatever the load.

For each workload of ``threads_overhead.py`` (``dict/list`` and ``tight``, 1, 2 and 8 threads)
it runs, each in a fresh process under callgrind, the workload ``uncontrolled`` (real threads
under the GIL) and in one ``stock``-order run of the controlled threads (a session set up by
the internal API, as ``threads_overhead.py``'s ``stock`` column), each at two sizes, and
prints the difference per iteration of the worker's loop, so the interpreter's start-up,
imports and the session's set-up cancel out:

* ``uncontrolled`` and ``stock``: instructions per iteration (all threads together);
* ``ratio``: ``stock`` over ``uncontrolled``, the figure the overhead targets are about;
* ``points``: schedule points per iteration in the stock run.

What this does not count: time a thread spends blocked, and the operating system's work to
hand the baton from one thread to another (a futex wake and a context switch, some
microseconds each). With one thread there is none; with 2 and 8 threads, lock contention
hands the baton over a few hundred times a run, which the wall-clock benchmark shows.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SMALL, LARGE = 2_000, 6_000  # worker iterations in all, the two sizes of each run
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def child(kind: str, mode: str, threads: int, iterations: int) -> None:
    """The measured process: one run of one workload, ``uncontrolled`` or ``stock``."""
    sys.path.insert(0, HERE)
    from threads_overhead import MAX_STEPS, dict_list_workload, tight_workload

    from interlace._core.schedule import Settings
    from interlace._core.strategy import Chooser
    from interlace.harness._threads import ThreadsBackend, controlled_exploration

    make = dict_list_workload if kind == "dict/list" else tight_workload
    workload = make(threads, iterations // threads)
    if mode == "uncontrolled":
        workload()
        return
    with controlled_exploration((), workload):
        result = ThreadsBackend(workload, Settings(backend="threads", max_steps=MAX_STEPS)).run(
            Chooser()
        )
    assert result.kind is None, result.detail
    print(f"points {result.steps}")


def instructions(
    valgrind: str, kind: str, mode: str, threads: int, iterations: int
) -> tuple[int, int]:
    """The instructions a child run executed, and the schedule points it counted."""
    command = [
        valgrind,
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        kind,
        mode,
        str(threads),
        str(iterations),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        tail = (done.stdout + done.stderr).strip().splitlines()[-12:]
        raise SystemExit(
            f"threads_instructions: the run {' '.join(command[3:])!r} under valgrind failed "
            f"(exit {done.returncode}):\n  " + "\n  ".join(tail)
        )
    points = re.search(r"points (\d+)", done.stdout)
    return int(found.group(1)), int(points.group(1)) if points else 0


def per_iteration(valgrind: str, kind: str, mode: str, threads: int) -> tuple[float, float]:
    """Instructions and points per worker iteration: the two sizes' difference over theirs."""
    small, small_points = instructions(valgrind, kind, mode, threads, SMALL)
    large, large_points = instructions(valgrind, kind, mode, threads, LARGE)
    span = LARGE - SMALL
    return (large - small) / span, (large_points - small_points) / span


def main(argv: list[str]) -> int:
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return 0
    if argv[:1] == ["--child"]:
        kind, mode, threads, iterations = argv[1], argv[2], int(argv[3]), int(argv[4])
        child(kind, mode, threads, iterations)
        return 0
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print(
            "threads_instructions: valgrind is not on the PATH; install it (Debian: "
            "apt-get install valgrind) or use threads_overhead.py for wall-clock ratios",
            file=sys.stderr,
        )
        return 2
    import interlace

    print(
        f"python {sys.version.split()[0]}, interlace {interlace.__version__}, schedule points "
        f"from {'sys.monitoring' if sys.version_info >= (3, 12) else 'sys.settrace'}; "
        f"instructions per worker iteration (callgrind, runs of {LARGE} minus {SMALL})"
    )
    print(f"{'workload':<14} {'uncontrolled':>12} {'stock':>10} {'ratio':>7} {'points':>7}")
    kinds = ("dict/list",) if "--quick" in argv else ("dict/list", "tight")
    for kind in kinds:
        for threads in (1, 2, 8):
            base, _ = per_iteration(valgrind, kind, "uncontrolled", threads)
            stock, points = per_iteration(valgrind, kind, "stock", threads)
            print(
                f"{kind + ' x' + str(threads):<14} {base:12.0f} {stock:10.0f} "
                f"{stock / base:6.2f}x {points:7.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
