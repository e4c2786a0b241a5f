"""A whole lint run: collect files, consult the cache, lint the rest serially or in a process
pool, and gather the results in a stable order.

Each file is linted with the settings of its own configuration (:class:`ConfigResolver`); what
a configuration implies (its codes, rule context, exclusions and cache) is worked out once per
configuration, in a :class:`_Plan`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from interlace.linters._cache import ResultCache, content_key
from interlace.linters._config import (
    ConfigResolver,
    LintConfig,
    find_config,
    load_config,
    opt_in_codes,
    selected_codes,
)
from interlace.linters._engine import FileError, FileResult, Finding, lint_source
from interlace.linters._files import Exclusion, collect_files, per_file_matcher
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
        config: the run's base settings: those found from the working directory (or given),
            which every file without a closer configuration used.
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


_Item = tuple[str, bytes, tuple[str, ...]]
"""One file to lint: its filename, its bytes and the codes enabled for it."""


def _lint_chunk(items: Sequence[_Item], base: LintContext) -> list[FileResult]:
    """Lint a chunk of files that share one configuration; the unit of work of a pool
    worker."""
    from interlace.linters.rules import rules_by_code

    registry = rules_by_code()
    results = []
    for filename, data, codes in items:
        context = replace(base, path=filename)
        results.append(
            lint_source(data, [registry[c] for c in codes], filename=filename, context=context)
        )
    return results


def _lint_isolated(item: _Item, base: LintContext) -> FileResult:
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


def _chunks(items: list[_Item], count: int) -> list[list[_Item]]:
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


@dataclass
class _Plan:
    """What linting a file under one configuration takes, worked out once per configuration.

    Attributes:
        root: the configuration's root, resolved: ``per-file-ignores`` globs are relative to it.
        codes: the codes its selection enables.
        per_file: its ``per-file-ignores``, compiled.
        context: what its rules may know (target version, shared classes, ...).
        exclusion: its ``exclude`` globs, compiled.
        cache: its result cache, under its root (``None``: no cache, or not opened yet).
    """

    root: Path
    codes: tuple[str, ...]
    per_file: list[tuple[Callable[[str], bool], tuple[str, ...]]]
    context: LintContext
    exclusion: Exclusion
    cache: ResultCache | None = None


class _Plans:
    """The plan of each configuration a run meets, keyed by the configuration object (the
    resolver returns one object per configuration file), and their caches, one per root and
    settings so that two plans never write the same index."""

    def __init__(self, configs: ConfigResolver, *, use_cache: bool) -> None:
        from interlace.linters.rules import all_rules

        self.configs = configs
        self.use_cache = use_cache
        self._codes = [rule.code for rule in all_rules()]
        self._opt_in = opt_in_codes()
        self._plans: dict[int, _Plan] = {}
        self._caches: dict[tuple[Path, str], ResultCache] = {}

    def of(self, config: LintConfig) -> _Plan:
        plan = self._plans.get(id(config))
        if plan is None:
            plan = self._plans[id(config)] = self._make(config)
        return plan

    def _make(self, config: LintConfig) -> _Plan:
        codes = selected_codes(
            self._codes,
            select=config.select,
            extend_select=config.extend_select,
            ignore=config.ignore,
            opt_in=self._opt_in,
        )
        context = LintContext(
            target_version=config.target_version,
            shared_classes=config.shared_classes,
            instance_primitives=config.instance_primitives,
            task_shared_classes=config.task_shared_classes,
            sharing=config.sharing,
        )
        per_file = [(per_file_matcher(glob), cs) for glob, cs in config.per_file_ignores]
        exclusion = Exclusion.compile(config.root, config.exclude)
        return _Plan(exclusion.root, codes, per_file, context, exclusion)

    def exclusion(self, directory: Path) -> Exclusion:
        """The exclusions that apply to the entries of ``directory``."""
        return self.of(self.configs.for_directory(directory)).exclusion

    def cache(self, plan: _Plan) -> ResultCache | None:
        if not self.use_cache:
            return None
        if plan.cache is None:
            context = plan.context
            settings = (
                f"{context.target_version}|{sorted(context.shared_classes)}"
                f"|{context.instance_primitives}|{context.sharing}"
                f"|{sorted(context.task_shared_classes)}"
            )
            key = (plan.root, settings)
            if key not in self._caches:
                self._caches[key] = ResultCache(plan.root, settings)
            plan.cache = self._caches[key]
        return plan.cache

    def save(self) -> None:
        for cache in self._caches.values():
            cache.save()


def lint_paths(
    paths: Sequence[str | os.PathLike[str]] = (),
    *,
    config: LintConfig | None = None,
    overrides: Callable[[LintConfig], LintConfig] | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
    force_exclude: bool = False,
) -> LintResult:
    """Lint files and directories with the configured rules.

    Args:
        paths: files and directories (empty: the root of the base configuration).
        config: the settings of every file; ``None``: as in ruff, each file takes
            ``[tool.interlace.lint]`` from the closest ``pyproject.toml`` with the table among
            its ancestor directories, and a file with none takes the one found from the
            working directory (else the defaults).
        overrides: applied to every configuration the run uses, ``config`` included (the
            command line's flags, which win over each file).
        jobs: worker processes (``None``: all cores); few files are always linted in-process.
        use_cache: read and write results under ``<root>/.interlace_cache/``, where ``<root>``
            is the root of the configuration each file used.
        force_exclude: apply ``exclude`` and ``.gitignore`` to explicitly named files too.

    Returns:
        The findings and errors of the run; exit-code policy is the caller's.

    Raises:
        ConfigError: a configuration file the run needs is invalid, or one has
            ``sharing = "declared"`` with no class declared.
    """
    if config is None:
        configs = ConfigResolver(load_config(find_config(Path.cwd())), overrides=overrides)
    else:
        configs = ConfigResolver(config, fixed=True, overrides=overrides)
    base = configs.base
    plans = _Plans(configs, use_cache=use_cache)
    cwd = Path.cwd()
    result = LintResult(config=base)
    # respect-gitignore decides the walk, so as in ruff it is read from the base configuration.
    fileset = collect_files(
        paths,
        root=base.root,
        respect_gitignore=base.respect_gitignore,
        force_exclude=force_exclude,
        exclusion_for=plans.exclusion,
    )
    for missing in fileset.missing:
        result.errors.append(FileError(missing, 0, 0, "no such file or directory", "io"))
    for directory, message in fileset.unreadable:
        result.errors.append(FileError(_display(Path(directory), cwd), 0, 0, message, "io"))
    ordered: list[FileResult | None] = []
    pending: list[tuple[int, str, str, ResultCache | None]] = []
    # The files to lint, grouped by configuration: a chunk of work shares one rule context.
    groups: dict[int, tuple[LintContext, list[_Item]]] = {}
    for path in fileset.files:
        filename = _display(path, cwd)
        try:
            data = path.read_bytes()
        except OSError as exc:
            ordered.append(
                FileResult(filename, errors=(FileError(filename, 0, 0, str(exc), "io"),))
            )
            continue
        plan = plans.of(configs.for_file(path))
        codes = plan.codes
        if plan.per_file:
            try:
                relative = path.resolve().relative_to(plan.root).as_posix()
            except ValueError:
                relative = path.name
            ignored = [c for match, cs in plan.per_file if match(relative) for c in cs]
            codes = tuple(c for c in codes if not c.startswith(tuple(ignored)))
        key = content_key(data, codes)
        cache = plans.cache(plan)
        hit = cache.get(key, filename) if cache is not None else None
        ordered.append(hit)
        if hit is None:
            pending.append((len(ordered) - 1, filename, key, cache))
            groups.setdefault(id(plan), (plan.context, []))[1].append((filename, data, codes))
    by_name: dict[str, FileResult] = {}
    total = len(pending)
    workers = min(jobs or os.cpu_count() or 1, max(1, total // 4))
    if workers <= 1 or total < _SERIAL_BELOW:
        for context, items in groups.values():
            by_name.update((r.filename, r) for r in _lint_chunk(items, context))
    else:
        work = [
            (chunk, context)
            for context, items in groups.values()
            for chunk in _chunks(items, max(1, workers * 4 * len(items) // total))
        ]
        broken: list[tuple[_Item, LintContext]] = []
        with _pool(workers) as pool:
            futures = [pool.submit(_lint_chunk, chunk, context) for chunk, context in work]
            for (chunk, context), future in zip(work, futures, strict=True):
                try:
                    by_name.update((r.filename, r) for r in future.result())
                except BrokenProcessPool:
                    broken.extend((item, context) for item in chunk)
        for item, context in broken:
            by_name[item[0]] = _lint_isolated(item, context)
    for index, filename, key, cache in pending:
        file_result = by_name[filename]
        ordered[index] = file_result
        if cache is not None:
            cache.put(key, file_result)
    plans.save()
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
