"""A whole lint run: collect files, consult the cache, lint the rest serially or in a process
pool, fix what ``--fix`` fixes, and gather the results in a stable order; or the same for source
read from standard input (``interlace lint -``), which is never cached.

Each file is linted with the settings of its own configuration (:class:`ConfigResolver`); what
a configuration implies (its codes, rule context, exclusions and cache) is worked out once per
configuration, in a :class:`_Plan`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

from interlace._processes import pool_context, process_pool
from interlace.linters._cache import ResultCache, content_key
from interlace.linters._config import (
    ConfigResolver,
    LintConfig,
    find_config,
    load_config,
    opt_in_codes,
    selected_codes,
)
from interlace.linters._engine import FileError, FileResult, Finding
from interlace.linters._files import (
    Exclusion,
    FileSet,
    collect_files,
    excluded_file,
    per_file_matcher,
)
from interlace.linters._noqa import replace_file
from interlace.linters._notebook import fix_document, lint_document
from interlace.linters._rule import LintContext

__all__ = (
    "STDIN",
    "FileSelection",
    "FileSettings",
    "FixedFile",
    "LintResult",
    "collect_paths",
    "lint_paths",
    "lint_stdin",
)

STDIN = "-"
"""The path that stands for standard input, and its name when ``--stdin-filename`` gives none."""

_SERIAL_BELOW = 16
"""Fewer files than this are linted in-process: starting workers costs more than it saves."""


@dataclass(frozen=True, slots=True)
class FixedFile:
    """A file the fixes changed (or, with ``diff``, would change).

    Attributes:
        filename: its name in the findings (``-`` for standard input without a name).
        original: its content as linted.
        fixed: its content with the fixes applied.
        count: how many findings the fixes fix.
    """

    filename: str
    original: bytes
    fixed: bytes
    count: int


@dataclass
class LintResult:
    """The outcome of :func:`lint_paths` or :func:`lint_stdin`.

    Attributes:
        findings: every finding, sorted by file, row, column and code; with ``fix``, those
            left after fixing.
        errors: files that could not be read, parsed or fixed, missing paths, internal errors.
        files: how many files were considered; lines: their total line count.
        cached: how many of them were answered from the cache.
        parsed: how many were parsed (the others were skipped by the pre-filter or the cache).
        fixed: how many findings ``fix`` fixed (they are not in ``findings``).
        fixed_files: the files ``fix`` changed (with ``diff``: would change), in the order of
            the run.
        config: the run's base settings: those found from the working directory (or given),
            which every file without a closer configuration used.
        source: for :func:`lint_stdin`, the source read, with the fixes applied.
    """

    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    cached: int = 0
    parsed: int = 0
    fixed: int = 0
    fixed_files: list[FixedFile] = field(default_factory=list)
    config: LintConfig = field(default_factory=LintConfig)
    source: bytes | None = None

    def add(self, file_result: FileResult) -> None:
        """Count in one file's result."""
        self.files += 1
        self.lines += file_result.lines
        self.cached += file_result.cached
        self.parsed += file_result.parsed and not file_result.cached
        self.findings.extend(file_result.findings)
        self.errors.extend(file_result.errors)


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
            lint_document(data, [registry[c] for c in codes], filename=filename, context=context)
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


_pool_context = pool_context
"""How workers start (a module global, so that tests can choose fork or spawn)."""


def _pool(workers: int) -> AbstractContextManager[ProcessPoolExecutor]:
    return process_pool(workers, _pool_context())


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


def _file_codes(plan: _Plan, path: Path | None) -> tuple[str, ...]:
    """The codes enabled for the file ``path``: the plan's, less its ``per-file-ignores``
    (``None``: standard input without a name, which no glob matches)."""
    if not plan.per_file or path is None:
        return plan.codes
    try:
        relative = path.resolve().relative_to(plan.root).as_posix()
    except (ValueError, OSError, RuntimeError):  # outside the root; or links that loop
        relative = path.name
    ignored = tuple(c for match, cs in plan.per_file if match(relative) for c in cs)
    return tuple(c for c in plan.codes if not c.startswith(ignored))


def _lint_groups(
    groups: dict[int, tuple[LintContext, list[_Item]]], jobs: int | None
) -> dict[str, FileResult]:
    """Lint the files of ``groups`` (each a rule context and its files), in-process when they
    are few, else in a pool of at most ``jobs`` workers; return their results by filename."""
    by_name: dict[str, FileResult] = {}
    total = sum(len(items) for _, items in groups.values())
    workers = min(jobs or os.cpu_count() or 1, max(1, total // 4))
    if workers <= 1 or total < _SERIAL_BELOW:
        for context, items in groups.values():
            by_name.update((r.filename, r) for r in _lint_chunk(items, context))
        return by_name
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
    return by_name


def _fixable(file_result: FileResult) -> bool:
    return any(f.fix is not None for f in file_result.findings)


def _not_fixed(file_result: FileResult, reason: str) -> FileResult:
    """``file_result`` with an error saying why its file was left as it was."""
    filename = file_result.filename
    error = FileError(filename, 0, 0, f"cannot fix: {reason}", "io")
    return replace(file_result, errors=(*file_result.errors, error))


@dataclass
class _Fix:
    """A file ``--fix`` rewrites: its index in the run's results, where it is, the content
    that was linted and the fixed content, how many findings that fixes, and where the
    result of linting the fixed content is cached.

    Invariant: ``original`` is the content that was linted (its cache key matched), read
    again just before fixing.
    """

    index: int
    path: Path
    original: bytes
    fixed: bytes
    count: int
    codes: tuple[str, ...]
    cache: ResultCache | None


def _fix_files(
    ordered: list[FileResult],
    linted: dict[int, tuple[Path, str, tuple[str, ...], _Plan]],
    plans: _Plans,
    jobs: int | None,
    *,
    write: bool,
) -> list[FixedFile]:
    """Fix the files whose results have fixable findings, in place unless ``write`` is false
    (``--diff``), and put the results of the fixed files in ``ordered``; return the files
    fixed.

    A file is rewritten only if it still holds what was linted, both when it is read again to
    be fixed and just before it is replaced (an edit made meanwhile wins, and the file is
    reported instead); the fixed bytes are linted again, so that the findings left are exact.
    """
    fixes: list[_Fix] = []
    groups: dict[int, tuple[LintContext, list[_Item]]] = {}
    for index, (path, key, codes, plan) in linted.items():
        file_result = ordered[index]
        if not _fixable(file_result):
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            ordered[index] = _not_fixed(file_result, f"cannot read the file again: {exc}")
            continue
        if content_key(data, codes) != key:
            ordered[index] = _not_fixed(
                file_result,
                "the file changed since it was linted, so it was left as it is; run "
                "interlace lint --fix again",
            )
            continue
        fixed = fix_document(data, file_result.findings, file_result.filename)
        if fixed.error is not None:
            ordered[index] = _not_fixed(file_result, fixed.error)
            continue
        if not fixed.fixed:
            continue
        cache = plans.cache(plan)
        fixes.append(_Fix(index, path, data, fixed.data, fixed.fixed, codes, cache))
        item = (file_result.filename, fixed.data, codes)
        groups.setdefault(id(plan), (plan.context, []))[1].append(item)
    relinted = _lint_groups(groups, jobs)
    done: list[FixedFile] = []
    for fix in fixes:
        file_result = ordered[fix.index]
        new_result = relinted[file_result.filename]
        changed = FixedFile(file_result.filename, fix.original, fix.fixed, fix.count)
        if not write:
            ordered[fix.index] = new_result
            done.append(changed)
            continue
        try:
            # The real path: a symlink stays a symlink.
            written = replace_file(os.path.realpath(fix.path), fix.fixed, expected=fix.original)
        except OSError as exc:
            ordered[fix.index] = _not_fixed(file_result, f"cannot write the file: {exc}")
            continue
        if not written:
            ordered[fix.index] = _not_fixed(
                file_result,
                "the file changed while it was being fixed, so it was left as it is; run "
                "interlace lint --fix again",
            )
            continue
        ordered[fix.index] = new_result
        done.append(changed)
        if fix.cache is not None:
            fix.cache.put(content_key(fix.fixed, fix.codes), new_result)
    return done


def _configs(
    config: LintConfig | None, overrides: Callable[[LintConfig], LintConfig] | None
) -> ConfigResolver:
    if config is None:
        return ConfigResolver(load_config(find_config(Path.cwd())), overrides=overrides)
    return ConfigResolver(config, fixed=True, overrides=overrides)


def _collect(
    paths: Sequence[str | os.PathLike[str]], plans: _Plans, *, force_exclude: bool | None
) -> tuple[FileSet, list[FileError]]:
    """The files a run covers, and an error for each path that does not exist and each
    directory that could not be listed."""
    base = plans.configs.base
    cwd = Path.cwd()
    # respect-gitignore and force-exclude decide the walk, so as in ruff they are read from the
    # base configuration.
    fileset = collect_files(
        paths,
        root=base.root,
        respect_gitignore=base.respect_gitignore,
        force_exclude=base.force_exclude if force_exclude is None else force_exclude,
        exclusion_for=plans.exclusion,
    )
    errors = [
        FileError(missing, 0, 0, "no such file or directory", "io") for missing in fileset.missing
    ]
    errors.extend(
        FileError(_display(Path(directory), cwd), 0, 0, message, "io")
        for directory, message in fileset.unreadable
    )
    return fileset, errors


@dataclass(frozen=True, slots=True)
class FileSettings:
    """The settings one file is linted with.

    Attributes:
        config: its configuration, with the command line's overrides applied.
        codes: the codes enabled for it: the configuration's selection, less the codes its
            ``per-file-ignores`` disable for this file.
    """

    config: LintConfig
    codes: tuple[str, ...]


@dataclass
class FileSelection:
    """The files a lint run covers, found exactly as :func:`lint_paths` finds them, but not
    read or linted (``--show-files``, ``--show-settings``).

    Attributes:
        files: each file once, absolute and normalised lexically (symlinks are not followed),
            sorted component by component as ruff sorts them.
        errors: the paths that do not exist and the directories that could not be listed.
        config: the run's base settings, as :attr:`LintResult.config`.
    """

    files: list[Path]
    errors: list[FileError]
    config: LintConfig
    _plans: _Plans = field(repr=False)

    def settings(self, path: Path) -> FileSettings:
        """Return the settings the file ``path`` is linted with.

        Raises:
            ConfigError: the configuration that applies to ``path`` is invalid.
        """
        config = self._plans.configs.for_file(path)
        return FileSettings(config, _file_codes(self._plans.of(config), path))


def collect_paths(
    paths: Sequence[str | os.PathLike[str]] = (),
    *,
    config: LintConfig | None = None,
    overrides: Callable[[LintConfig], LintConfig] | None = None,
    force_exclude: bool | None = None,
) -> FileSelection:
    """Find the files :func:`lint_paths` would lint with the same arguments, without linting
    them.

    Raises:
        ConfigError: as for :func:`lint_paths`.
    """
    plans = _Plans(_configs(config, overrides), use_cache=False)
    fileset, errors = _collect(paths, plans, force_exclude=force_exclude)
    files = sorted(Path(os.path.normpath(path)) for path in fileset.files)
    return FileSelection(files, errors, plans.configs.base, plans)


def lint_paths(
    paths: Sequence[str | os.PathLike[str]] = (),
    *,
    config: LintConfig | None = None,
    overrides: Callable[[LintConfig], LintConfig] | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
    force_exclude: bool | None = None,
    fix: bool = False,
    diff: bool = False,
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
        force_exclude: apply ``exclude`` and ``.gitignore`` to explicitly named files too
            (``None``: as the base configuration's ``force-exclude`` says).
        fix: rewrite the files with fixable findings (IL001's unused ``# noqa`` codes) and
            report the findings left; a file that cannot be fixed is left as it is, with an
            error.
        diff: fix as ``fix`` does, but write nothing (``--diff``): ``fixed_files`` holds what
            each file would become, and ``findings`` what would be left.

    Returns:
        The findings and errors of the run; exit-code policy is the caller's.

    Raises:
        ConfigError: a configuration file the run needs is invalid, or one has
            ``sharing = "declared"`` with no class declared.
    """
    configs = _configs(config, overrides)
    plans = _Plans(configs, use_cache=use_cache)
    cwd = Path.cwd()
    result = LintResult(config=configs.base)
    fileset, result.errors = _collect(paths, plans, force_exclude=force_exclude)
    fix = fix or diff
    ordered: list[FileResult | None] = []
    pending: list[tuple[int, str, str, ResultCache | None]] = []
    # What each linted file was linted as, by its index in ``ordered``, for ``fix``.
    linted: dict[int, tuple[Path, str, tuple[str, ...], _Plan]] = {}
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
        codes = _file_codes(plan, path)
        key = content_key(data, codes)
        cache = plans.cache(plan)
        hit = cache.get(key, filename) if cache is not None else None
        ordered.append(hit)
        if fix:
            linted[len(ordered) - 1] = (path, key, codes, plan)
        if hit is None:
            pending.append((len(ordered) - 1, filename, key, cache))
            groups.setdefault(id(plan), (plan.context, []))[1].append((filename, data, codes))
    by_name = _lint_groups(groups, jobs)
    for index, filename, key, cache in pending:
        file_result = by_name[filename]
        ordered[index] = file_result
        if cache is not None:
            cache.put(key, file_result)
    done: list[FileResult] = []
    for maybe in ordered:
        assert maybe is not None
        done.append(maybe)
    if fix:
        result.fixed_files = _fix_files(done, linted, plans, jobs, write=not diff)
        result.fixed = sum(fixed.count for fixed in result.fixed_files)
    plans.save()
    for file_result in done:
        result.add(file_result)
    return result


def lint_stdin(
    data: bytes,
    *,
    filename: str | None = None,
    config: LintConfig | None = None,
    overrides: Callable[[LintConfig], LintConfig] | None = None,
    force_exclude: bool | None = None,
    fix: bool = False,
) -> LintResult:
    """Lint source read from standard input (``interlace lint -``), as if it were a file.

    Never cached: the source has no file to key it by, and an editor sends a new one each time.

    Args:
        data: the source's bytes, decoded as a file's (BOM, coding cookie, UTF-8).
        filename: the path it stands for (``--stdin-filename``): the name in the findings, and
            where its configuration is found (the closest ``pyproject.toml`` above it), which
            its ``per-file-ignores`` and, with ``force_exclude``, its exclusions are matched
            against. It need not exist. ``None``: the name is ``-`` and the configuration is
            the one found from the working directory.
        config, overrides: as for :func:`lint_paths`.
        force_exclude: skip the source (no file is linted) when ``exclude`` or ``.gitignore``
            skips ``filename``, as ruff does (``None``: as the base configuration's
            ``force-exclude`` says).
        fix: apply the fixes to the source; ``source`` in the result holds it either way, and
            ``fixed_files`` the source before and after when a fix changed it.

    Returns:
        The findings and errors, and the (fixed) source.

    Raises:
        ConfigError: as for :func:`lint_paths`.
    """
    configs = _configs(config, overrides)
    base = configs.base
    plans = _Plans(configs, use_cache=False)
    result = LintResult(config=base, source=data)
    path = None if filename is None else Path(filename).absolute()
    if path is None:
        name, plan = STDIN, plans.of(base)
    else:
        name, plan = _display(path, Path.cwd()), plans.of(configs.for_file(path))
        if force_exclude is None:
            force_exclude = base.force_exclude
        if force_exclude and excluded_file(
            path, plan.exclusion, root=base.root, respect_gitignore=base.respect_gitignore
        ):
            return result
    codes = _file_codes(plan, path)
    file_result = _lint_chunk([(name, data, codes)], plan.context)[0]
    if fix and _fixable(file_result):
        fixed = fix_document(data, file_result.findings, name)
        if fixed.error is not None:
            file_result = _not_fixed(file_result, fixed.error)
        elif fixed.fixed:
            file_result = _lint_chunk([(name, fixed.data, codes)], plan.context)[0]
            result.fixed, result.source = fixed.fixed, fixed.data
            result.fixed_files.append(FixedFile(name, data, fixed.data, fixed.fixed))
    result.add(file_result)
    return result
