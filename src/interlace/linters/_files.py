"""Which files a lint run covers: explicit files, walked directories, ``exclude`` and
``.gitignore``.

As in ruff, a file named on the command line is linted even when ``exclude`` or ``.gitignore``
would skip it, unless ``force_exclude`` is set (pre-commit passes every changed file, so its hook
sets it). Directories are walked for ``*.py`` files, pruning excluded and git-ignored directories.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

__all__ = ("FileSet", "collect_files", "matches")


def matches(spec: pathspec.GitIgnoreSpec, relative: str, *, is_dir: bool = False) -> bool:
    """Return whether the root-relative POSIX path matches the gitignore-style ``spec``."""
    return spec.match_file(relative + "/" if is_dir else relative)


@dataclass
class _GitIgnores:
    """The ``.gitignore`` files from the project root down, loaded once per directory.

    Approximation (documented in docs/lint.md): a path is ignored when any ``.gitignore`` between
    the root and the path's directory matches it; a negation only re-includes within its own file.
    """

    root: Path
    specs: dict[Path, pathspec.GitIgnoreSpec | None] = field(default_factory=dict)

    def _spec(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self.specs:
            spec = None
            try:
                lines = (directory / ".gitignore").read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines = []
            if lines:
                spec = pathspec.GitIgnoreSpec.from_lines(lines)
            self.specs[directory] = spec
        return self.specs[directory]

    def ignored(self, path: Path, *, is_dir: bool) -> bool:
        try:
            relative = path.relative_to(self.root)
        except ValueError:
            return False
        directory = self.root
        parts = relative.parts
        for depth in range(len(parts)):
            spec = self._spec(directory)
            if spec is not None and matches(spec, "/".join(parts[depth:]), is_dir=is_dir):
                return True
            directory = directory / parts[depth]
        return False


@dataclass
class FileSet:
    """The files to lint (absolute paths, in order) and the arguments that named nothing."""

    files: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def collect_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    root: Path,
    exclude: Iterable[str] = (),
    respect_gitignore: bool = True,
    force_exclude: bool = False,
) -> FileSet:
    """Expand ``paths`` into the Python files to lint.

    Args:
        paths: files and directories; an empty sequence means the root directory.
        root: the project root that ``exclude`` globs and ``.gitignore`` files are relative to.
        exclude: gitignore-style globs (``"build"``, ``"tests/fixtures/**"``, ``"*_pb2.py"``).
        respect_gitignore: also skip what ``.gitignore`` files ignore.
        force_exclude: apply the exclusions to explicitly named files too.
    """
    root = root.resolve()
    spec = pathspec.GitIgnoreSpec.from_lines(list(exclude))
    gitignores = _GitIgnores(root) if respect_gitignore else None

    def skipped(path: Path, *, is_dir: bool) -> bool:
        try:
            relative = path.relative_to(root).as_posix()
        except ValueError:
            relative = path.name
        if relative != "." and matches(spec, relative, is_dir=is_dir):
            return True
        return gitignores is not None and gitignores.ignored(path, is_dir=is_dir)

    result = FileSet()
    seen: set[Path] = set()

    def add(path: Path) -> None:
        if path not in seen:
            seen.add(path)
            result.files.append(path)

    for raw in paths or [root]:
        path = Path(raw).absolute()
        if path.is_file():
            if not (force_exclude and skipped(path.resolve(), is_dir=False)):
                add(path)
            continue
        if not path.is_dir():
            result.missing.append(os.fspath(raw))
            continue
        if force_exclude and skipped(path.resolve(), is_dir=True):
            continue
        for directory, dirnames, filenames in os.walk(path):
            here = Path(directory)
            resolved = here.resolve()
            dirnames[:] = sorted(d for d in dirnames if not skipped(resolved / d, is_dir=True))
            for name in sorted(filenames):
                if name.endswith(".py") and not skipped(resolved / name, is_dir=False):
                    add(here / name)
    return result
