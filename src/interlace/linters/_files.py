"""Which files a lint run covers: explicit files, walked directories, ``exclude`` and
``.gitignore``.

As in ruff, a path named on the command line is linted even when ``exclude`` or ``.gitignore``
would skip it, unless ``force_exclude`` is set (pre-commit passes every changed file, so its hook
sets it); below a named directory the patterns still apply to what the walk finds. Directories
are walked for ``*.py``, ``*.pyi`` and ``*.ipynb`` files, pruning excluded and git-ignored
directories. A file
reached twice (``src/a.py src/../src/a.py``, or through a symlink) is linted once.

With one configuration per directory (ruff's hierarchical configuration), the entries of a
directory are matched against the ``exclude`` globs of that directory's configuration, relative to
that configuration's root, and a named path against those of its own.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from interlace.errors import ConfigError

__all__ = (
    "PYTHON_SUFFIXES",
    "Exclusion",
    "FileSet",
    "collect_files",
    "excluded_file",
    "glob_error",
    "matches",
    "per_file_matcher",
    "repository_root",
)

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
"""The files a directory walk collects (ruff's default ``include``: Python files, stubs and
Jupyter notebooks)."""

_DIR_MARK = "ps_d"
"""The regex group pathspec's gitignore patterns match the ``/`` after a directory with."""


def repository_root(start: Path) -> Path | None:
    """Return the root of the git work tree holding ``start`` (a ``.git`` directory or file),
    or ``None`` outside one. Found by walking up the directories; git itself is not run."""
    here = _resolved(start)
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _git_dir(work_tree: Path) -> Path | None:
    """Return the git directory whose ``info/exclude`` applies to ``work_tree``: its ``.git``
    directory, or for a linked worktree or a submodule (``.git`` is a file ``gitdir: PATH``)
    the common directory that file leads to."""
    dot_git = work_tree / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    git_dir = work_tree / text.removeprefix("gitdir:").strip()
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return git_dir
    return git_dir / common


GLOB_UNCLOSED_CLASS = (
    "it has a '[' that no ']' closes, so it matches no path (a '[' starts a character class; "
    "write '\\[' for a literal one)"
)
GLOB_NO_PATTERN = "it matches no path"


def glob_error(pattern: str) -> str | None:
    """Return why pathspec cannot compile the gitignore-style ``pattern``, or ``None``.

    git tolerates these lines (it skips them), so in a ``.gitignore`` they are dropped; in the
    configuration they are the user's typo and reported.
    """
    try:
        compiled = pathspec.GitIgnoreSpec.from_lines([pattern])
    except re.error as exc:
        return f"it has an invalid character class ({exc.msg})"
    except ValueError:
        stripped = pattern.rstrip()
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2:
            return (
                "it ends with a backslash, which escapes nothing (paths take forward "
                "slashes, e.g. 'build/')"
            )
        if stripped == "!":
            return "a lone '!' negates no pattern"
        return "it is not a valid gitignore-style pattern"
    # pathspec reads some lines as no pattern at all (git's wildmatch matches nothing with
    # them either) instead of raising: accepted as they are, they would exclude nothing.
    if all(compiled.include is None for compiled in compiled.patterns):
        return GLOB_UNCLOSED_CLASS if "[" in pattern else GLOB_NO_PATTERN
    return None


def _compile_lines(lines: Sequence[str]) -> pathspec.GitIgnoreSpec:
    """Compile gitignore lines, dropping the ones pathspec rejects but git skips (a lone
    ``!``, a trailing backslash, a bad character range) instead of failing on the file."""
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        return pathspec.GitIgnoreSpec.from_lines([x for x in lines if glob_error(x) is None])


def matches(spec: pathspec.GitIgnoreSpec, relative: str, *, is_dir: bool = False) -> bool:
    """Return whether the root-relative POSIX path matches the gitignore-style ``spec``."""
    return spec.match_file(relative + "/" if is_dir else relative)


def _deciding(
    spec: pathspec.GitIgnoreSpec,
    path: str,
    find: Callable[[re.Pattern[str], str], re.Match[str] | None],
) -> bool | None:
    """The ``include`` of the last pattern of ``spec`` that ``find`` matches on ``path``
    itself, not on a directory above it (``None``: none does)."""
    result = None
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if pattern.include is None or not isinstance(regex, re.Pattern):
            continue
        match = find(regex, path)
        if match is None:
            continue
        if match.groupdict().get(_DIR_MARK) is not None and match.end(_DIR_MARK) < len(path):
            continue
        result = pattern.include
    return result


def _from_the_start(regex: re.Pattern[str], path: str) -> re.Match[str] | None:
    return regex.match(path)


def _to_its_end(regex: re.Pattern[str], path: str) -> re.Match[str] | None:
    return _to_the_end(regex).search(path)


def _matches_itself(spec: pathspec.GitIgnoreSpec, relative: str, *, is_dir: bool) -> bool:
    """Like :func:`matches`, but a pattern counts only when it matches the path itself, not a
    directory above it (``build`` matches ``build/sub/build/`` but not ``build/b.py``).

    Used below an explicitly named directory that the patterns skip: as in ruff, the named
    directory is linted and the patterns apply to what the walk finds below it. The walk
    prunes every skipped directory below the named one, so a match through a directory can
    only come from the named directory or one above it.
    """
    return bool(_deciding(spec, relative + "/" if is_dir else relative, _from_the_start))


def per_file_matcher(glob: str) -> Callable[[str], bool]:
    """Return the test of root-relative POSIX file paths for a ``per-file-ignores`` glob.

    As in ruff, a leading ``!`` negates the glob: ``"!tests/**"`` selects the files *outside*
    ``tests``.
    """
    negated = glob.startswith("!")
    spec = pathspec.GitIgnoreSpec.from_lines([glob[1:] if negated else glob])
    return lambda relative: matches(spec, relative) != negated


@functools.cache
def _to_the_end(regex: re.Pattern[str]) -> re.Pattern[str]:
    """``regex``, matching only where the match ends with the string."""
    return re.compile(f"(?:{regex.pattern})\\Z", regex.flags)


def _last_match(spec: pathspec.GitIgnoreSpec, relative: str, *, is_dir: bool) -> bool | None:
    """Whether the last pattern of ``spec`` that matches the path itself (not a directory
    above it) ignores it (``True``) or re-includes it (``False``); ``None``: none matches.

    Not ``GitIgnoreSpec.match_file``: it lets a pattern that matches a directory above the
    path win over one that matches the path, so with ``*``, ``!*/`` and ``!*.py`` it ignores
    ``e/`` and ``e/w.py``, which git keeps. The patterns are searched as pathspec searches them,
    but for a match that ends with the path: ``!*/`` compiles to a bare ``/``, whose first match
    in ``e/f/`` is the one after ``e``.
    """
    return _deciding(spec, relative + "/" if is_dir else relative, _to_its_end)


@dataclass
class _GitIgnores:
    """The ``.gitignore`` files of a git work tree from its root down, and its
    ``.git/info/exclude``, each loaded once. Outside a work tree, the ``.gitignore`` files from
    the project root down (ruff honours them without git too).

    As git decides: a path is ignored when a directory above it is, else by the last pattern
    that matches it in the closest ``.gitignore`` with one (the deepest file wins, and a
    negation there re-includes what a file further up ignores), else in ``info/exclude``. The
    global ``core.excludesFile`` is not read.
    """

    fallback: Path
    specs: dict[Path, pathspec.GitIgnoreSpec | None] = field(default_factory=dict)
    excludes: dict[Path, Path | None] = field(default_factory=dict)
    directories: dict[tuple[Path, tuple[str, ...]], bool] = field(default_factory=dict)

    def base(self, top: Path) -> Path:
        """The directory the ignore files that apply to ``top`` are relative to."""
        return repository_root(top) or self.fallback

    def _spec(self, file: Path) -> pathspec.GitIgnoreSpec | None:
        if file not in self.specs:
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines = []
            self.specs[file] = _compile_lines(lines) if lines else None
        return self.specs[file]

    def _info_exclude(self, base: Path) -> pathspec.GitIgnoreSpec | None:
        if base not in self.excludes:
            git_dir = _git_dir(base)
            self.excludes[base] = None if git_dir is None else git_dir / "info" / "exclude"
        file = self.excludes[base]
        return None if file is None else self._spec(file)

    def _decides(self, base: Path, parts: tuple[str, ...], *, is_dir: bool) -> bool:
        """Whether the ignore files ignore the path ``parts`` below ``base`` by its own name,
        its directories aside."""
        for depth in range(len(parts) - 1, -1, -1):
            spec = self._spec(base.joinpath(*parts[:depth], ".gitignore"))
            if spec is None:
                continue
            decided = _last_match(spec, "/".join(parts[depth:]), is_dir=is_dir)
            if decided is not None:
                return decided
        spec = self._info_exclude(base)
        return spec is not None and _last_match(spec, "/".join(parts), is_dir=is_dir) is True

    def _directory_ignored(self, base: Path, parts: tuple[str, ...]) -> bool:
        key = (base, parts)
        if key not in self.directories:
            self.directories[key] = (
                len(parts) > 1 and self._directory_ignored(base, parts[:-1])
            ) or self._decides(base, parts, is_dir=True)
        return self.directories[key]

    def ignored(self, path: Path, base: Path, *, is_dir: bool, itself: bool = False) -> bool:
        """Whether git ignores ``path`` (``itself``: by its own name, whatever the directories
        above it, see :func:`_matches_itself`)."""
        try:
            relative = path.relative_to(base)
        except ValueError:
            return False
        parts = relative.parts
        if not parts:
            return False
        if not itself and len(parts) > 1 and self._directory_ignored(base, parts[:-1]):
            return True
        return self._decides(base, parts, is_dir=is_dir)


@dataclass
class FileSet:
    """The files to lint (absolute paths, in order), the arguments that named nothing, and
    the directories that could not be read.

    Attributes:
        files: each file once, spelled as first reached (named or walked).
        missing: the arguments, as given, that are neither a file nor a directory.
        unreadable: (absolute path, what went wrong) for each directory the walk could
            not list, e.g. ``("/repo/locked", "cannot read directory: Permission denied")``,
            and each source file that is a symbolic link which leads nowhere (``_unlintable``).
    """

    files: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Exclusion:
    """One configuration's ``exclude`` globs, compiled, and the directory they are relative to.

    Attributes:
        root: the resolved directory the globs are relative to.
        spec: the compiled globs.
    """

    root: Path
    spec: pathspec.GitIgnoreSpec

    @classmethod
    def compile(cls, root: Path, exclude: Iterable[str]) -> Exclusion:
        """Compile ``exclude``, relative to ``root``.

        Raises:
            ConfigError: a glob is invalid.
        """
        patterns = list(exclude)
        for pattern in patterns:
            reason = glob_error(pattern)
            if reason is not None:
                raise ConfigError(
                    f"invalid glob {pattern!r} in exclude: {reason}; write a gitignore-style "
                    "glob, e.g. 'build', 'tests/fixtures/**' or '*_pb2.py'"
                )
        return cls(root.resolve(), pathspec.GitIgnoreSpec.from_lines(patterns))


def _skipped(
    path: Path,
    base: Path | None,
    exclusion: Exclusion,
    gitignores: _GitIgnores | None,
    *,
    is_dir: bool,
    itself: bool = False,
) -> bool:
    """Whether ``exclusion``, or with ``gitignores`` the ignore files relative to ``base``,
    skip the resolved ``path`` (``itself``: see :func:`_matches_itself`)."""
    try:
        relative = path.relative_to(exclusion.root).as_posix()
    except ValueError:
        relative = path.name
    test = _matches_itself if itself else matches
    if relative != "." and test(exclusion.spec, relative, is_dir=is_dir):
        return True
    if gitignores is None or base is None:
        return False
    return gitignores.ignored(path, base, is_dir=is_dir, itself=itself)


def excluded_file(
    path: Path, exclusion: Exclusion, *, root: Path, respect_gitignore: bool = True
) -> bool:
    """Whether ``--force-exclude`` skips the file ``path`` when it is named: ``exclusion`` (its
    own configuration's) or, with ``respect_gitignore``, git ignores it, as
    :func:`collect_files` decides for a named file. ``path`` need not exist: it may be the name
    given to standard input (``--stdin-filename``).

    Args:
        path: the file, absolute or relative to the working directory.
        exclusion: the ``exclude`` globs of the configuration that applies to ``path``.
        root: the project root (outside a git work tree, the ``.gitignore`` files from there
            down apply).
        respect_gitignore: also skip what git ignores.
    """
    top = _resolved(path.absolute())
    gitignores = _GitIgnores(root.resolve()) if respect_gitignore else None
    base = gitignores.base(top) if gitignores is not None else None
    return _skipped(top, base, exclusion, gitignores, is_dir=False)


def _everywhere(exclusion: Exclusion) -> Callable[[Path], Exclusion]:
    return lambda directory: exclusion


def _unlintable(path: Path) -> tuple[str, bool] | None:
    """Why ``path``, a file the walk or the command line reached, cannot be linted, and
    whether to say so; None for a regular file (or a link to one).

    A link that leads nowhere, or to itself, is said (ruff reports E902 for both): the file
    the user means is not there. A pipe, socket or device is said when it was named, and
    passed over in a walk: reading one would wait for a writer, or never end.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if not path.is_symlink():
            return f"cannot read file: {exc.strerror or exc}", True
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        if exc.errno == errno.ELOOP:
            return (
                f"a loop of symbolic links (it links to {target!r}, which leads back to it): "
                "point it at a file, or remove it",
                True,
            )
        return (
            f"a broken symbolic link: its target {target!r} does not exist; fix the link, or "
            "remove it",
            True,
        )
    if stat.S_ISREG(mode):
        return None
    return "not a regular file (a pipe, a socket or a device): name a source file", False


def _resolved(path: Path) -> Path:
    """``path.resolve()``, or ``path`` itself where links loop (nothing to resolve to)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a loop, before 3.13
        return path


def collect_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    root: Path,
    exclude: Iterable[str] = (),
    respect_gitignore: bool = True,
    force_exclude: bool = False,
    exclusion_for: Callable[[Path], Exclusion] | None = None,
) -> FileSet:
    """Expand ``paths`` into the Python files to lint.

    Args:
        paths: files and directories; an empty sequence means the root directory.
        root: the project root that ``exclude`` globs are relative to.
        exclude: gitignore-style globs (``"build"``, ``"tests/fixtures/**"``, ``"*_pb2.py"``).
        respect_gitignore: also skip what the git work tree's ``.gitignore`` files and
            ``.git/info/exclude`` ignore (outside a work tree: the ``.gitignore`` files from
            ``root`` down).
        force_exclude: apply the exclusions to explicitly named files and directories too.
        exclusion_for: the exclusions that apply to the entries of a directory (given as
            reached, not resolved), in place of ``root`` and ``exclude`` everywhere.

    Raises:
        ConfigError: a glob in ``exclude`` is invalid, or ``exclusion_for`` raised it.
    """
    root = root.resolve()
    if exclusion_for is None:
        exclusion_for = _everywhere(Exclusion.compile(root, exclude))
    gitignores = _GitIgnores(root) if respect_gitignore else None

    def skipped(
        path: Path,
        base: Path | None,
        exclusion: Exclusion,
        *,
        is_dir: bool,
        itself: bool = False,
    ) -> bool:
        return _skipped(path, base, exclusion, gitignores, is_dir=is_dir, itself=itself)

    result = FileSet()
    seen: set[Path] = set()

    def add(path: Path, resolved: Path) -> None:
        if resolved not in seen:
            seen.add(resolved)
            result.files.append(path)

    def base_of(top: Path) -> Path | None:
        return gitignores.base(top) if gitignores is not None else None

    def unreadable(exc: OSError) -> None:
        where = os.fspath(exc.filename) if exc.filename is not None else "?"
        result.unreadable.append((where, f"cannot read directory: {exc.strerror or exc}"))

    for raw in paths or [root]:
        path = Path(raw).absolute()
        top = _resolved(path)
        if path.is_file():
            own = exclusion_for(path.parent)
            if not (force_exclude and skipped(top, base_of(top), own, is_dir=False)):
                add(path, top)
            continue
        if not path.is_dir():
            problem = _unlintable(path) if os.path.lexists(path) else None
            if problem is None:
                result.missing.append(os.fspath(raw))
            else:
                result.unreadable.append((os.fspath(path), problem[0]))
            continue
        base = base_of(top)
        named_skipped = skipped(top, base, exclusion_for(path), is_dir=True)
        if force_exclude and named_skipped:
            continue
        for directory, dirnames, filenames in os.walk(path, onerror=unreadable):
            here = Path(directory)
            resolved = _resolved(here)
            exclusion = exclusion_for(here)
            dirnames[:] = sorted(
                d
                for d in dirnames
                if not skipped(resolved / d, base, exclusion, is_dir=True, itself=named_skipped)
            )
            for name in sorted(filenames):
                if not name.endswith(PYTHON_SUFFIXES):
                    continue
                file = resolved / name
                if skipped(file, base, exclusion, is_dir=False, itself=named_skipped):
                    continue
                problem = _unlintable(file)
                if problem is not None:
                    if problem[1]:
                        result.unreadable.append((os.fspath(here / name), problem[0]))
                    continue
                add(here / name, file.resolve() if file.is_symlink() else file)
    return result
