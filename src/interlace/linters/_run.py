"""A whole lint run: collect files, consult the cache, lint the rest serially or in a process
pool, and gather the results in a stable order."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from interlace.linters._cache import ResultCache, content_key
from interlace.linters._config import (
    LintConfig,
    check_declared,
    find_config,
    load_config,
    opt_in_codes,
    selected_codes,
)
from interlace.linters._engine import FileError, FileResult, Finding, lint_source
from interlace.linters._files import collect_files, per_file_matcher
from interlace.linters._rule import LintContext

__all__ = ("LintResult", "lint_paths")

_SERIAL_BELOW = 16
"""Fewer files than this are linted in-process: starting workers costs more than it saves."""


@dataclass
class LintResult:
    """The outcome of :func:`lint_paths`.

    Attributes:
        findings: every finding, sorted by file, row, column and code.
        errors: files that could not be read or parsed, missing paths, internal errors.
        files: how many files were considered; lines: their total line count.
        cached: how many of them were answered from the cache.
        parsed: how many were parsed (the others were skipped by the pre-filter or the cache).
        config: the settings the run used.
    """

    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    cached: int = 0
    parsed: int = 0
    config: LintConfig = field(default_factory=LintConfig)


def _display(path: Path, cwd: Path) -> str:
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return os.fspath(path)


def _lint_chunk(
    items: Sequence[tuple[str, bytes, tuple[str, ...]]], base: LintContext
) -> list[FileResult]:
    """Lint a chunk of (filename, bytes, codes); the unit of work of a pool worker."""
    from interlace.linters.rules import rules_by_code

    registry = rules_by_code()
    results = []
    for filename, data, codes in items:
        context = replace(base, path=filename)
        results.append(
            lint_source(data, [registry[c] for c in codes], filename=filename, context=context)
        )
    return results


def _lint_isolated(item: tuple[str, bytes, tuple[str, ...]], base: LintContext) -> FileResult:
    """Lint one file in its own worker process, after a worker died (a crash in native code):
    the file that kills this worker too is reported instead of taking the run down."""
    filename = item[0]
    try:
        with _pool(1) as pool:
            return pool.submit(_lint_chunk, [item], base).result()[0]
    except BrokenProcessPool:
        message = (
            "internal error: the linter's worker process died on this file (a crash in "
            "native code, e.g. libcst's parser). This is a bug in interlace or libcst: please "
            "report it with this file"
        )
        return FileResult(filename, errors=(FileError(filename, 1, 1, message, "internal"),))


def _chunks(
    items: list[tuple[str, bytes, tuple[str, ...]]], count: int
) -> list[list[tuple[str, bytes, tuple[str, ...]]]]:
    # Biggest files first, dealt round-robin, so chunks finish at about the same time.
    ordered = sorted(items, key=lambda item: len(item[1]), reverse=True)
    return [chunk for chunk in (ordered[i::count] for i in range(count)) if chunk]


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork is the cheapest start (libcst and the rules are already imported), but forking a
    # process that runs other threads is unsafe (and warns since Python 3.12).
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _init_worker() -> None:
    # Interrupts are the parent's to handle: it stops the workers itself (a Ctrl-C reaches the
    # whole process group, and a forked worker inherits the parent's SIGTERM handler).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _terminated(signum: int, frame: object) -> None:
    print("interlace: terminated", file=sys.stderr)
    raise SystemExit(128 + signum)


@contextmanager
def _pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers are killed, not waited for, when the parent is interrupted
    (Ctrl-C, or SIGTERM, which then exits 143 instead of leaving the workers orphaned)."""
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=_pool_context(), initializer=_init_worker
    )
    previous = None
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield pool
    except BaseException:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(5)
        raise
    else:
        pool.shutdown()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def lint_paths(
    paths: Sequence[str | os.PathLike[str]] = (),
    *,
    config: LintConfig | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
    force_exclude: bool = False,
) -> LintResult:
    """Lint files and directories with the configured rules.

    Args:
        paths: files and directories (empty: the project root).
        config: the settings; ``None`` reads ``[tool.interlace.lint]`` from the nearest
            ``pyproject.toml`` above the working directory.
        jobs: worker processes (``None``: all cores); few files are always linted in-process.
        use_cache: read and write results under ``<root>/.interlace_cache/``.
        force_exclude: apply ``exclude`` and ``.gitignore`` to explicitly named files too.

    Returns:
        The findings and errors of the run; exit-code policy is the caller's.

    Raises:
        ConfigError: the discovered configuration file is invalid, or ``sharing = "declared"``
            with no class declared.
    """
    if config is None:
        config = load_config(find_config(Path.cwd()))
    check_declared(config)
    from interlace.linters.rules import all_rules

    cwd = Path.cwd()
    result = LintResult(config=config)
    fileset = collect_files(
        paths,
        root=config.root,
        exclude=config.exclude,
        respect_gitignore=config.respect_gitignore,
        force_exclude=force_exclude,
    )
    for missing in fileset.missing:
        result.errors.append(FileError(missing, 0, 0, "no such file or directory", "io"))
    for directory, message in fileset.unreadable:
        result.errors.append(FileError(_display(Path(directory), cwd), 0, 0, message, "io"))
    all_codes = [rule.code for rule in all_rules()]
    enabled = selected_codes(
        all_codes,
        select=config.select,
        extend_select=config.extend_select,
        ignore=config.ignore,
        opt_in=opt_in_codes(),
    )
    per_file = [(per_file_matcher(glob), codes) for glob, codes in config.per_file_ignores]
    base = LintContext(
        target_version=config.target_version,
        shared_classes=config.shared_classes,
        instance_primitives=config.instance_primitives,
        task_shared_classes=config.task_shared_classes,
        sharing=config.sharing,
    )
    cache = None
    if use_cache:
        settings = (
            f"{base.target_version}|{sorted(base.shared_classes)}|{base.instance_primitives}"
            f"|{base.sharing}|{sorted(base.task_shared_classes)}"
        )
        cache = ResultCache(config.root, settings)
    root = config.root.resolve()
    ordered: list[FileResult | None] = []
    pending: list[tuple[int, str, bytes, tuple[str, ...], str]] = []
    for path in fileset.files:
        filename = _display(path, cwd)
        try:
            data = path.read_bytes()
        except OSError as exc:
            ordered.append(
                FileResult(filename, errors=(FileError(filename, 0, 0, str(exc), "io"),))
            )
            continue
        codes = enabled
        if per_file:
            try:
                relative = path.resolve().relative_to(root).as_posix()
            except ValueError:
                relative = path.name
            ignored = [c for match, cs in per_file if match(relative) for c in cs]
            codes = tuple(c for c in codes if not c.startswith(tuple(ignored)))
        key = content_key(data, codes)
        hit = cache.get(key, filename) if cache is not None else None
        ordered.append(hit)
        if hit is None:
            pending.append((len(ordered) - 1, filename, data, codes, key))
    items = [(filename, data, codes) for _, filename, data, codes, _ in pending]
    workers = min(jobs or os.cpu_count() or 1, max(1, len(items) // 4))
    if workers <= 1 or len(items) < _SERIAL_BELOW:
        fresh = _lint_chunk(items, base)
    else:
        chunks = _chunks(items, workers * 4)
        by_name: dict[str, FileResult] = {}
        broken: list[tuple[str, bytes, tuple[str, ...]]] = []
        with _pool(workers) as pool:
            futures = [pool.submit(_lint_chunk, chunk, base) for chunk in chunks]
            for chunk, future in zip(chunks, futures, strict=True):
                try:
                    by_name.update((r.filename, r) for r in future.result())
                except BrokenProcessPool:
                    broken.extend(chunk)
        for item in broken:
            by_name[item[0]] = _lint_isolated(item, base)
        fresh = [by_name[filename] for filename, _, _ in items]
    for (index, _, _, _, key), file_result in zip(pending, fresh, strict=True):
        ordered[index] = file_result
        if cache is not None:
            cache.put(key, file_result)
    if cache is not None:
        cache.save()
    for maybe in ordered:
        assert maybe is not None
        file_result = maybe
        result.files += 1
        result.lines += file_result.lines
        result.cached += file_result.cached
        result.parsed += file_result.parsed and not file_result.cached
        result.findings.extend(file_result.findings)
        result.errors.extend(file_result.errors)
    return result
