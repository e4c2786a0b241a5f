"""``[tool.interlace.lint]`` configuration: discovery, validation and rule selection.

Keys (kebab-case, as in ruff): ``select``, ``extend-select``, ``ignore``, ``per-file-ignores``,
``exclude``, ``extend-exclude``, ``target-version``, ``shared-classes``, ``task-shared-classes``,
``sharing``, ``instance-primitives``, ``respect-gitignore``, ``force-exclude``.
Every bad value raises :class:`~interlace.errors.ConfigError` naming the key, the value, the file
and what to write instead; so does anything else under ``[tool.interlace]``, which holds only the
``lint`` table.

As in ruff, each linted file takes its settings from the closest ``pyproject.toml`` with the table
among its ancestor directories (:class:`ConfigResolver`); settings are not merged between files.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from interlace.errors import ConfigError
from interlace.linters._files import glob_error
from interlace.linters._sharing import SHARING, class_pattern_error

__all__ = (
    "DEFAULT_EXCLUDE",
    "INSTANCE_PRIMITIVES",
    "TARGET_VERSIONS",
    "ConfigResolver",
    "LintConfig",
    "RuleSelection",
    "check_declared",
    "check_globs",
    "check_selectors",
    "find_config",
    "layer_selection",
    "load_config",
    "opt_in_codes",
    "parse_target_version",
    "rebase_glob",
    "resolve_selection",
    "selected_codes",
)

DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".interlace_cache",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)
"""Directory names never walked into (explicitly named files are still linted)."""

_TABLES = ("lint",)
"""The tables under ``[tool.interlace]``; nothing else in interlace reads that table."""
_KEYS = (
    "select",
    "extend-select",
    "ignore",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "target-version",
    "shared-classes",
    "task-shared-classes",
    "sharing",
    "instance-primitives",
    "respect-gitignore",
    "force-exclude",
)
INSTANCE_PRIMITIVES = ("evidence", "all")
"""Values of ``instance-primitives`` (IL201 on Python 3.10+): report an asyncio primitive
created per instance only with evidence in the file that the object outlives one event loop,
or always."""
_SELECTOR = re.compile(r"^(IL[0-9]{0,3}|ALL)$")
_OLDEST_TARGET = 7
_NEWEST_TARGET = 15
TARGET_VERSIONS = tuple(f"py3{minor}" for minor in range(_OLDEST_TARGET, _NEWEST_TARGET + 1))
"""The values of ``target-version``: a CPython 3 release, as in ruff (``py37`` to ``py315``)."""


@dataclass(frozen=True, slots=True)
class LintConfig:
    """The resolved lint settings.

    Attributes:
        root: the directory ``exclude`` and ``per-file-ignores`` globs are relative to and the
            cache lives in: the config file's directory, else (no file, or a file given with
            ``--config``, as in ruff) the working directory.
        source: the config file the settings came from, if any.
        select, extend_select, ignore: code prefixes (``"IL"``, ``"IL1"``, ``"IL201"``).
        per_file_ignores: (gitignore-style glob, code prefixes) pairs.
        exclude: gitignore-style globs of paths never linted when walking directories.
        target_version: the oldest Python the linted code supports.
        shared_classes: class names or patterns declared shared between threads (IL102;
            with ``sharing = "declared"`` also the task rules).
        task_shared_classes: class names or patterns declared shared between concurrent
            asyncio tasks (IL101, IL104, IL301, IL303 with ``sharing = "declared"``).
        sharing: ``"inferred"`` or ``"declared"``, see :data:`~interlace.linters._sharing.SHARING`.
        instance_primitives: ``"evidence"`` or ``"all"``, see :data:`INSTANCE_PRIMITIVES`.
        respect_gitignore: skip files ignored by ``.gitignore`` files.
        force_exclude: apply ``exclude`` and ``.gitignore`` to files named on the command line
            (and to ``--stdin-filename``) too.
    """

    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None
    select: tuple[str, ...] = ("IL",)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    target_version: tuple[int, int] = (3, 11)
    shared_classes: frozenset[str] = frozenset()
    task_shared_classes: frozenset[str] = frozenset()
    sharing: str = "inferred"
    instance_primitives: str = "evidence"
    respect_gitignore: bool = True
    force_exclude: bool = False

    def with_overrides(self, **changes: object) -> LintConfig:
        """Return a copy with the given fields replaced (command-line flags win over files)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def describe(self) -> str:
        """Return every setting as ``key = value`` lines (``--show-settings``), in a stable
        form: the keys of ``[tool.interlace.lint]`` (``exclude`` holds ``extend-exclude`` too),
        TOML values, sets sorted, one list item per line.

        ``root`` and ``source`` are left out: they say where the settings came from, and are
        no keys of the table, so the lines can be pasted into ``[tool.interlace.lint]``.
        """
        lines = []
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in ("root", "source"):
                continue
            if item.name == "target_version":
                text = json.dumps(f"py{value[0]}{value[1]}")
            elif item.name == "per_file_ignores":
                # On one line: TOML 1.0 (tomllib) refuses an inline table over several.
                pairs = ", ".join(f"{json.dumps(glob)} = {_inline(codes)}" for glob, codes in value)
                text = "{ " + pairs + " }" if pairs else "{}"
            elif isinstance(value, (tuple, frozenset)):
                text = _block(
                    "[",
                    [
                        json.dumps(v)
                        for v in (sorted(value) if isinstance(value, frozenset) else value)
                    ],
                    "]",
                )
            elif isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = json.dumps(str(value))
            lines.append(f"{item.name.replace('_', '-')} = {text}\n")
        return "".join(lines)


def _inline(values: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def _block(opening: str, items: Sequence[str], closing: str) -> str:
    """``items`` between brackets, one per line (nothing between them when empty)."""
    if not items:
        return opening + closing
    return opening + "\n" + "".join(f"    {item},\n" for item in items) + closing


def parse_target_version(value: object, *, where: str) -> tuple[int, int]:
    """Parse ``"py311"`` into ``(3, 11)``.

    Raises:
        ConfigError: ``value`` is not one of :data:`TARGET_VERSIONS` (``py399`` names no
            CPython; ruff refuses it too).
    """
    if value not in TARGET_VERSIONS:
        raise ConfigError(
            f"invalid target-version {value!r} {where}: expected one of "
            f"{', '.join(TARGET_VERSIONS)} (CPython 3.{_OLDEST_TARGET} to "
            f'3.{_NEWEST_TARGET}), e.g. target-version = "py311"'
        )
    assert isinstance(value, str)
    return (3, int(value.removeprefix("py3")))


def _interlace_table(data: Mapping[str, object]) -> object:
    """``[tool.interlace]`` of a parsed pyproject.toml, or ``None``."""
    tool = data.get("tool")
    return tool.get("interlace") if isinstance(tool, dict) else None


def _config_file_in(directory: Path) -> Path | None:
    """Return ``directory/pyproject.toml`` if it has a ``[tool.interlace]`` table, else ``None``.

    Any ``[tool.interlace]`` table counts, not only a well-formed ``[tool.interlace.lint]``: a
    misspelt table is the user's configuration, to be reported by :func:`load_config` rather
    than skipped for a file further up.
    """
    candidate = directory / "pyproject.toml"
    if not candidate.is_file():
        return None
    try:
        text = candidate.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        # A broken file that mentions our table is ours to report, not to skip.
        return candidate if "tool.interlace" in text else None
    return candidate if _interlace_table(data) is not None else None


def find_config(start: Path) -> Path | None:
    """Return the nearest ``pyproject.toml`` with a ``[tool.interlace]`` table, walking up from
    the directory ``start`` (itself included).

    Any ``[tool.interlace]`` table counts, not only a well-formed ``[tool.interlace.lint]``: a
    misspelt table is the user's configuration, to be reported by :func:`load_config` rather
    than skipped for a file further up.
    """
    for directory in (start, *start.parents):
        found = _config_file_in(directory)
        if found is not None:
            return found
    return None


def _codes(value: object, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"invalid value for {key!r} {where}: {value!r}; expected a list of rule code "
            f'prefixes, e.g. {key} = ["IL1", "IL201"]'
        )
    return check_selectors(value, key=key, where=where)


def check_selectors(values: Iterable[str], *, key: str, where: str) -> tuple[str, ...]:
    """Validate code prefixes (``IL``, ``IL1``, ``IL201``, ``ALL``) and return them, with
    ``ALL`` as ``IL``.

    An empty selector is refused like any unknown one, as in ruff: it selects no rule, so
    ``--select IL2,`` or ``--select ""`` would otherwise quietly mean something else. So is a
    selector that is not upper case (``il101``, ``all``), as in ruff and in ``# noqa``
    comments, naming the code to write. A ``select`` or ``extend-select`` prefix that reaches
    only opt-in rules (``IL0``: only IL001) is refused too: it would enable nothing, and the
    run would report a clean result for rules that never ran.

    Raises:
        ConfigError: a prefix is empty, malformed, not upper case, matches no registered
            rule, or (to select) reaches only opt-in rules.
    """
    from interlace.linters.rules import all_rules

    codes = [rule.code for rule in all_rules()]
    opt_in = opt_in_codes()
    out = []
    for raw in values:
        selector = raw.strip()
        upper = selector.upper()
        known = upper == "ALL" or (
            _SELECTOR.match(upper) is not None and any(c.startswith(upper) for c in codes)
        )
        if known and selector != upper:
            raise ConfigError(
                f"rule selector {raw!r} in {key} {where} is not upper case: rule codes are "
                f"matched exactly, as in ruff; write {upper!r}"
            )
        if selector == "ALL":
            out.append("IL")
            continue
        if not known:
            hint = (
                " (an empty selector comes from an empty value or a stray comma, as in "
                "'IL2,'; it would select no rule)"
                if not selector
                else ""
            )
            raise ConfigError(
                f"unknown rule selector {raw!r} in {key} {where}{hint}: expected a prefix of "
                f"one of {', '.join(codes)} (for example 'IL', 'IL1' or 'IL201')"
            )
        if key.lstrip("-") in ("select", "extend-select") and selector not in codes:
            reached = [code for code in codes if code.startswith(selector)]
            if reached and all(code in opt_in for code in reached):
                one = len(reached) == 1
                raise ConfigError(
                    f"rule selector {raw!r} in {key} {where} enables no rule: it reaches only "
                    f"{', '.join(reached)}, which {'is' if one else 'are'} opt-in, enabled only "
                    f"by {'its full code' if one else 'their full codes'}; write "
                    + (repr(reached[0]) if one else f"one of them, e.g. {reached[0]!r}")
                )
        out.append(selector)
    return tuple(out)


def _without_dot(glob: str) -> str:
    """``glob`` with a leading ``./`` (after a ``!``) removed: ruff reads ``./src/a.py`` as
    ``src/a.py``, while to gitignore it names no path, so a glob copied from a ruff
    configuration would silently match nothing."""
    bang = "!" if glob.startswith("!") else ""
    body = glob[len(bang) :]
    while body.startswith("./"):
        body = body[2:].lstrip("/")
    return bang + body


def check_globs(
    values: Iterable[str],
    *,
    key: str,
    where: str,
    negation: bool = False,
    relative_to: str = "the project root",
) -> tuple[str, ...]:
    """Validate gitignore-style globs (``exclude``, ``per-file-ignores``) and return them, a
    leading ``./`` removed (as ruff reads it).

    ``negation``: a leading ``!`` negates the glob (``per-file-ignores``, as in ruff); in
    ``exclude`` it is gitignore's re-inclusion. ``relative_to``: what the globs are relative
    to, for the message.

    Raises:
        ConfigError: a glob cannot be compiled, or matches nothing (empty, a ``#`` comment).
    """
    out = []
    for given in values:
        glob = _without_dot(given)
        body = glob[1:] if negation and glob.startswith("!") else glob
        if not body.strip():
            reason: str | None = "an empty glob matches no path"
        elif body.startswith("#"):
            reason = (
                "a leading '#' makes it a comment, which matches no path (escape the '#' with "
                "a backslash for a name that starts with one)"
            )
        else:
            reason = glob_error(body)
        if reason is not None:
            raise ConfigError(
                f"invalid glob {given!r} in {key} {where}: {reason}; write a gitignore-style "
                f"glob relative to {relative_to}, e.g. 'build', 'tests/fixtures/**' or "
                "'*_pb2.py'"
            )
        out.append(glob)
    return tuple(out)


def rebase_glob(glob: str, *, start: Path, root: Path) -> str | None:
    """Return the glob, relative to the directory ``start``, as a glob relative to ``root``
    that matches the same paths below ``root``; ``None`` if it can match none there.

    As in ruff, the globs of ``--per-file-ignores`` and ``--extend-exclude`` are relative to
    the working directory, and each configuration's globs to its root. A glob with no ``/``
    but a trailing one (``*_pb2.py``, ``build/``) matches a name at any depth, so it is kept
    as it is. A leading ``!`` is kept in front.
    """
    bang = "!" if glob.startswith("!") else ""
    body = glob[len(bang) :]
    if "/" not in body.rstrip("/"):
        return glob
    body = body.lstrip("/")
    here = os.path.relpath(start.resolve(), root.resolve())
    if here == ".":
        return bang + body
    if not here.startswith(".."):
        return f"{bang}{Path(here).as_posix()}/{body}"
    # ``root`` may be below ``start`` (a package's configuration, linted from the top): the
    # glob's first parts must match the way down to it.
    down = os.path.relpath(root.resolve(), start.resolve())
    if down.startswith(".."):
        return None
    parts = body.split("/")
    for name in Path(down).parts:
        if not parts or not parts[0]:
            return None
        if parts[0] == "**":
            return bang + "/".join(parts)
        if not fnmatch.fnmatchcase(name, parts[0]):
            return None
        parts.pop(0)
    rest = "/".join(parts)
    if not rest.rstrip("/"):
        return None
    return bang + (rest if "/" in rest.rstrip("/") else "/" + rest)


def _globs(value: object, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"invalid value for {key!r} {where}: {value!r}; expected a list of glob strings, "
            f'e.g. {key} = ["tests/fixtures/**", "*_pb2.py"]'
        )
    return check_globs(value, key=key, where=where)


def _per_file_ignores(value: object, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"invalid value for 'per-file-ignores' {where}: {value!r}; expected a table of glob "
            'to code prefixes, e.g. per-file-ignores = { "tests/**" = ["IL201"] }'
        )
    globs = check_globs(value, key="per-file-ignores", where=where, negation=True)
    return tuple(
        (glob, _codes(codes, f"per-file-ignores.{given}", where))
        for glob, (given, codes) in zip(globs, value.items(), strict=True)
    )


def _lowest_minor(spec: str) -> int | None:
    """The lowest Python 3 minor version a ``requires-python`` specifier admits (``None``: no
    3.x release at all). Raises ``InvalidSpecifier``.

    A minor version is admitted when one of its releases is: ``>3.8`` admits 3.8.1, so 3.8.
    Testing each minor's ``.0`` release and the releases around each bound the specifier
    names is enough, since the admitted releases are intervals between those bounds.
    """
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    specifiers = SpecifierSet(spec)
    patches: dict[int, set[int]] = {}
    for specifier in specifiers:
        try:
            release = Version(specifier.version.removesuffix(".*")).release
        except InvalidVersion:
            continue
        if len(release) >= 2 and release[0] == 3:
            patch = release[2] if len(release) > 2 else 0
            patches.setdefault(release[1], set()).update((patch, patch + 1))
    for minor in range(100):
        candidates = [f"3.{minor}", *(f"3.{minor}.{p}" for p in sorted(patches.get(minor, {0})))]
        if any(specifiers.contains(candidate) for candidate in candidates):
            return minor
    return None


def _requires_python(data: Mapping[str, object], path: Path) -> tuple[int, int] | None:
    """The target version ``[project] requires-python`` implies: its lowest admitted Python 3
    minor version, at least 3.7 (``None``: not set, or it admits no Python 3).

    Raises:
        ConfigError: it is not a PEP 440 version specifier (ruff refuses it too).
    """
    from packaging.specifiers import InvalidSpecifier

    project = data.get("project")
    if not isinstance(project, dict) or "requires-python" not in project:
        return None
    spec = project["requires-python"]
    try:
        if not isinstance(spec, str):
            raise InvalidSpecifier(spec)
        minor = _lowest_minor(spec)
    except InvalidSpecifier:
        raise ConfigError(
            f"invalid requires-python {spec!r} in {path} [project]: expected a PEP 440 version "
            "specifier, from which interlace lint takes the target version when "
            '[tool.interlace.lint] sets none; write e.g. requires-python = ">=3.11", or set '
            'target-version = "py311" in [tool.interlace.lint]'
        ) from None
    return None if minor is None else (3, max(minor, _OLDEST_TARGET))


def _check_interlace_table(data: Mapping[str, object], path: Path) -> dict[str, object]:
    """Return ``[tool.interlace.lint]`` (empty if absent), refusing anything else under
    ``[tool.interlace]``: a misspelt table or a lint key one level too high would otherwise be
    ignored without a word.

    Raises:
        ConfigError: naming the file, the stray key or table, and the table to use.
    """
    interlace = _interlace_table(data)
    if interlace is None:
        return {}
    if not isinstance(interlace, dict):
        raise ConfigError(
            f"invalid [tool.interlace] in {path}: {interlace!r}; expected a table, with the "
            "lint settings in [tool.interlace.lint], e.g. [tool.interlace.lint] then "
            'select = ["IL"]'
        )
    known = ", ".join(f"[tool.interlace.{name}]" for name in _TABLES)
    for key, value in interlace.items():
        if key in _TABLES:
            continue
        if key in _KEYS:
            raise ConfigError(
                f"{key!r} is set directly under [tool.interlace] in {path}; lint settings go in "
                "[tool.interlace.lint]: move it under a [tool.interlace.lint] header"
            )
        close = difflib.get_close_matches(key, _TABLES, n=1)
        fix = f"did you mean [tool.interlace.{close[0]}]?" if close else "remove it"
        what = (
            f"table [tool.interlace.{key}] in {path}"
            if isinstance(value, dict)
            else f"key {key!r} in {path} [tool.interlace]"
        )
        raise ConfigError(
            f"unknown {what}: interlace reads only {known} under [tool.interlace]; {fix}"
        )
    table = interlace.get("lint", {})
    if not isinstance(table, dict):
        raise ConfigError(
            f"invalid [tool.interlace.lint] in {path}: {table!r}; expected a table of settings, "
            'e.g. [tool.interlace.lint] then select = ["IL"]'
        )
    return table


def load_config(path: Path | None, *, root: Path | None = None) -> LintConfig:
    """Read ``[tool.interlace.lint]`` from ``path`` (``None``: the defaults, rooted at the cwd).

    ``target-version`` defaults to the lower bound of ``[project] requires-python`` when the
    table does not set it, as in ruff.

    Args:
        path: the ``pyproject.toml`` to read.
        root: the directory relative globs resolve against (default: the file's directory;
            the command line passes the working directory for ``--config``, as ruff does).

    Raises:
        ConfigError: the file cannot be read or parsed, or a key or value is invalid.
    """
    if path is None:
        return LintConfig() if root is None else LintConfig(root=root)
    where = f"in {path} [tool.interlace.lint]"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"config file {str(path)!r} is not valid TOML: {exc}; fix the syntax"
        ) from None
    table = _check_interlace_table(data, path)
    for key in table:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r} {where}; valid keys are: {', '.join(_KEYS)}")
    config = LintConfig(root=(path.parent if root is None else root).resolve(), source=path)
    changes: dict[str, object] = {}
    if "select" in table:
        changes["select"] = _codes(table["select"], "select", where)
    if "extend-select" in table:
        changes["extend_select"] = _codes(table["extend-select"], "extend-select", where)
    if "ignore" in table:
        changes["ignore"] = _codes(table["ignore"], "ignore", where)
    if "per-file-ignores" in table:
        changes["per_file_ignores"] = _per_file_ignores(table["per-file-ignores"], where)
    exclude = list(DEFAULT_EXCLUDE)
    if "exclude" in table:
        exclude = list(_globs(table["exclude"], "exclude", where))
    if "extend-exclude" in table:
        exclude += _globs(table["extend-exclude"], "extend-exclude", where)
    changes["exclude"] = tuple(exclude)
    if "target-version" in table:
        changes["target_version"] = parse_target_version(table["target-version"], where=where)
    else:
        inferred = _requires_python(data, path)
        if inferred is not None:
            changes["target_version"] = inferred
    for key, example in (
        ("shared-classes", '["ConnectionPool", "*Cache"]'),
        ("task-shared-classes", '["Agent", "*Storage"]'),
    ):
        if key in table:
            value = table[key]
            if not isinstance(value, list):
                raise ConfigError(
                    f"invalid value for {key!r} {where}: {value!r}; expected a list of "
                    f"class names or fnmatch patterns, e.g. {key} = {example}"
                )
            for position, entry in enumerate(value, 1):
                reason = class_pattern_error(entry)
                if reason is not None:
                    raise ConfigError(
                        f"invalid entry {entry!r} (item {position}) in {key!r} {where}: {reason}"
                    )
            changes[key.replace("-", "_")] = frozenset(value)
    if "sharing" in table:
        value = table["sharing"]
        if value not in SHARING:
            raise ConfigError(
                f"invalid value for 'sharing' {where}: {value!r}; expected \"inferred\" (the "
                'rules infer from the code which state is shared) or "declared" (the rules '
                "about shared state report only inside the classes listed in "
                'task-shared-classes and shared-classes), e.g. sharing = "declared"'
            )
        changes["sharing"] = value
    if "instance-primitives" in table:
        value = table["instance-primitives"]
        if value not in INSTANCE_PRIMITIVES:
            raise ConfigError(
                f"invalid value for 'instance-primitives' {where}: {value!r}; expected "
                '"evidence" (IL201 reports a per-instance asyncio primitive only when the file '
                'shows the object outliving one event loop) or "all", e.g. '
                'instance-primitives = "all"'
            )
        changes["instance_primitives"] = value
    for key in ("respect-gitignore", "force-exclude"):
        if key in table:
            value = table[key]
            if not isinstance(value, bool):
                raise ConfigError(
                    f"invalid value for {key!r} {where}: {value!r}; expected true or false, "
                    f"e.g. {key} = {'false' if key == 'respect-gitignore' else 'true'}"
                )
            changes[key.replace("-", "_")] = value
    return config.with_overrides(**changes)


def check_declared(config: LintConfig, *, where: str | None = None) -> None:
    """Refuse ``sharing = "declared"`` when no class is declared: the rules about shared state
    would silently report nothing. ``where`` names the settings' origin (default: the file).

    Raises:
        ConfigError: naming where the setting came from and what to add.
    """
    if config.sharing != "declared" or config.shared_classes or config.task_shared_classes:
        return
    if where is None:
        where = (
            f"in {config.source} [tool.interlace.lint]"
            if config.source is not None
            else "(no pyproject.toml with a [tool.interlace.lint] table was found)"
        )
    raise ConfigError(
        f'sharing = "declared" but neither task-shared-classes nor shared-classes {where} '
        "lists a class, so IL101, IL102, IL104, IL301 and IL303 could report nothing; declare "
        "the classes whose instances concurrent tasks share, e.g. "
        'task-shared-classes = ["Agent", "*Storage"], or use sharing = "inferred"'
    )


def _normal(path: Path) -> Path:
    """``path`` made absolute with ``.`` and ``..`` removed lexically, as ruff spells paths:
    symlinks are not followed, so a file takes the configuration of the directory it is
    reached through."""
    return Path(os.path.normpath(path.absolute()))


class ConfigResolver:
    """The settings of each linted file, found as ruff finds them.

    A file takes the closest ``pyproject.toml`` with a ``[tool.interlace]`` table among its
    ancestor directories, its own directory included; its settings are not merged with those of
    files further up. A file with no such ancestor takes ``base``: the configuration found from
    the working directory, or the defaults. With ``fixed`` (``--config``, or settings passed to
    :func:`~interlace.linters.lint_paths`) every file takes ``base``. ``overrides`` (the
    command line's flags) applies to every configuration as it is loaded, ``base`` included.

    Invariant: each directory's ``pyproject.toml`` is looked at once and each configuration
    file is loaded once, so :meth:`for_directory` returns one object per configuration and a
    run with a single configuration costs one ``stat`` per directory.
    """

    def __init__(
        self,
        base: LintConfig,
        *,
        fixed: bool = False,
        overrides: Callable[[LintConfig], LintConfig] | None = None,
    ) -> None:
        self._overrides = overrides
        self.fixed = fixed
        self.base = self._settle(base)
        self._closest: dict[Path, Path | None] = {}
        self._loaded: dict[Path, LintConfig] = {}
        if base.source is not None and not fixed:
            self._loaded[_normal(base.source)] = self.base

    def _settle(self, config: LintConfig) -> LintConfig:
        if self._overrides is not None:
            config = self._overrides(config)
        check_declared(config)
        return config

    def _closest_file(self, directory: Path) -> Path | None:
        walked = []
        found = None
        for candidate in (directory, *directory.parents):
            if candidate in self._closest:
                found = self._closest[candidate]
                break
            walked.append(candidate)
            found = _config_file_in(candidate)
            if found is not None:
                break
        for candidate in walked:
            self._closest[candidate] = found
        return found

    def for_directory(self, directory: Path) -> LintConfig:
        """Return the settings of the files in ``directory``.

        Raises:
            ConfigError: the configuration file that applies is invalid.
        """
        if self.fixed:
            return self.base
        source = self._closest_file(_normal(directory))
        if source is None:
            return self.base
        config = self._loaded.get(source)
        if config is None:
            config = self._loaded[source] = self._settle(load_config(source))
        return config

    def for_file(self, path: Path) -> LintConfig:
        """Return the settings of the file ``path`` (see :meth:`for_directory`)."""
        return self.for_directory(_normal(path).parent)


@dataclass(frozen=True, slots=True)
class RuleSelection:
    """One layer of rule selectors: the configuration file's, or the command line's.

    Attributes:
        select: replaces the selection of the layers below (``None``: not given, and the
            layer adjusts what the layers below selected).
        extend_select: code prefixes to enable in addition.
        ignore: code prefixes to disable.
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def resolve_selection(
    codes: Iterable[str], layers: Sequence[RuleSelection], *, opt_in: Collection[str] = ()
) -> tuple[str, ...]:
    """Return the codes enabled by layers of selectors (lowest first), as ruff resolves its
    ``rule_selections``: the configuration, then the command line.

    Within a layer the selectors apply from the least specific to the most specific (``IL``,
    then ``IL1``, ``IL10``, ``IL101``), ``select`` and ``extend-select`` before ``ignore`` at
    each level; so the most specific prefix wins and ``ignore`` wins a tie. A layer with a
    ``select`` starts a new selection from its own selectors only; a layer without one turns
    codes on and off in the selection below it. A layer with ``select = []``, no
    ``extend-select`` and some ``ignore`` passes those ignores on to the next layer (ruff's
    carry-over). A code in ``opt_in`` is enabled only by a selector that names it in full
    (ruff's ``explicit-preview-rules``): ``IL``, ``IL1`` and ``ALL`` do not reach it;
    ``ignore`` applies to it as to any code.
    """
    ordered = sorted(codes)
    enabled: set[str] = set()
    carried: tuple[str, ...] = ()
    for layer in layers:
        chosen = (*(layer.select or ()), *layer.extend_select)
        ignore = (*layer.ignore, *carried)
        carried = ()
        updates: dict[str, bool] = {}
        for length in sorted({len(s) for s in (*chosen, *ignore)}):
            for selector in (s for s in chosen if len(s) == length):
                for code in ordered:
                    reached = code == selector if code in opt_in else code.startswith(selector)
                    if reached:
                        updates[code] = True
            for selector in (s for s in ignore if len(s) == length):
                for code in ordered:
                    if code.startswith(selector):
                        updates[code] = False
        if layer.select is not None:
            enabled = {code for code, on in updates.items() if on}
            if not layer.select and not layer.extend_select and layer.ignore:
                carried = layer.ignore
        else:
            for code, on in updates.items():
                if on:
                    enabled.add(code)
                else:
                    enabled.discard(code)
    return tuple(code for code in ordered if code in enabled)


def selected_codes(
    codes: Iterable[str],
    *,
    select: Sequence[str],
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    opt_in: Collection[str] = (),
) -> tuple[str, ...]:
    """Return the codes enabled by one layer of selectors (see :func:`resolve_selection`): the
    most specific prefix wins, an ``ignore`` wins a tie with a ``select``, and a code in
    ``opt_in`` is enabled only by a selector that names it in full."""
    layer = RuleSelection(tuple(select), tuple(extend_select), tuple(ignore))
    return resolve_selection(codes, [layer], opt_in=opt_in)


def layer_selection(config: LintConfig, command_line: RuleSelection) -> LintConfig:
    """Return ``config`` with the command line's selectors layered over the file's, as ruff
    layers them (:func:`resolve_selection`): ``--ignore IL2`` drops IL201 from a file's
    ``select = ["IL101", "IL201"]``, and ``--select`` starts a new selection.

    The result's ``select`` lists the enabled codes in full, so a single-layer
    :func:`selected_codes` over it gives the layered answer.
    """
    if command_line == RuleSelection():
        return config
    from interlace.linters.rules import all_rules

    file = RuleSelection(config.select, config.extend_select, config.ignore)
    enabled = resolve_selection(
        (rule.code for rule in all_rules()), [file, command_line], opt_in=opt_in_codes()
    )
    return config.with_overrides(select=enabled, extend_select=(), ignore=())


def opt_in_codes() -> frozenset[str]:
    """Return the codes of the registered opt-in rules (see :attr:`Rule.opt_in`)."""
    from interlace.linters.rules import all_rules

    return frozenset(rule.code for rule in all_rules() if rule.opt_in)
