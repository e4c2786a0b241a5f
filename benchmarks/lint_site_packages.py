"""Never-crash run: lint every ``*.py`` file in this environment's site-packages.

Usage::

    python benchmarks/lint_site_packages.py [--jobs N] [--no-prefilter] [DIR ...]

Prints the number of files, lines, findings per code, syntax errors (files CPython or libcst
cannot parse, e.g. Python 2 test data) and internal errors, each internal error with its file.
Exits 1 if any internal error occurred. The test suite runs a fixed sample of the same files
(tests/linters/test_lint_never_crash.py).
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument(
        "--no-prefilter",
        action="store_true",
        help="run every rule on every file, ignoring the rules' TRIGGERS (slower, more coverage)",
    )
    args = parser.parse_args(argv)

    from interlace.linters import LintConfig, lint_paths
    from interlace.linters.rules import all_rules

    if args.no_prefilter:
        # Worker processes are forked from this one, so they see the change too.
        for rule in all_rules():
            rule.TRIGGERS = ()

    dirs = args.dirs or [Path(sysconfig.get_paths()["purelib"])]
    config = LintConfig(root=dirs[0], exclude=(), respect_gitignore=False)
    start = time.perf_counter()
    result = lint_paths(dirs, config=config, jobs=args.jobs, use_cache=False)
    elapsed = time.perf_counter() - start
    kinds = Counter(e.kind for e in result.errors)
    print(
        f"{result.files} files, {result.lines} lines, {result.parsed} parsed by libcst, "
        f"in {elapsed:.1f} s ({result.lines / elapsed:,.0f} lines/s)"
    )
    print(f"findings per code: {dict(sorted(Counter(f.code for f in result.findings).items()))}")
    print(
        f"syntax errors: {kinds['syntax']}, io errors: {kinds['io']}, "
        f"too deeply nested to lint: {kinds['limit']}"
    )
    internal = [e for e in result.errors if e.kind == "internal"]
    print(f"internal errors: {len(internal)}")
    for error in internal:
        print(f"  {error.filename}: {error.message}")
    return 1 if internal else 0


if __name__ == "__main__":
    sys.exit(main())
