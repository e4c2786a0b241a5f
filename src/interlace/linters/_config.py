"""``[tool.interlace.lint]`` configuration: discovery, validation and rule selection.

Keys (kebab-case, as in ruff): ``select``, ``extend-select``, ``ignore``, ``per-file-ignores``,
``exclude``, ``extend-exclude``, ``target-version``, ``shared-classes``, ``task-shared-classes``,
``sharing``, ``instance-primitives``, ``respect-gitignore``.
Every bad value raises :class:`~interlace.errors.ConfigError` naming the key, the value, the file
and what to write instead.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from interlace.errors import ConfigError
from interlace.linters._sharing import SHARING, check_class_patterns

__all__ = (
    "DEFAULT_EXCLUDE",
    "INSTANCE_PRIMITIVES",
    "LintConfig",
    "check_declared",
    "find_config",
    "load_config",
    "opt_in_codes",
    "parse_target_version",
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
)
INSTANCE_PRIMITIVES = ("evidence", "all")
"""Values of ``instance-primitives`` (IL201 on Python 3.10+): report an asyncio primitive
created per instance only with evidence in the file that the object outlives one event loop,
or always."""
_SELECTOR = re.compile(r"^(IL[0-9]{0,3}|ALL)$")
_VERSION = re.compile(r"^py3([0-9]{1,2})$")
_REQUIRES = re.compile(r">=\s*3\.([0-9]{1,2})")


@dataclass(frozen=True, slots=True)
class LintConfig:
    """The resolved lint settings.

    Attributes:
        root: the project root: the directory of the config file, else the working directory.
            Relative paths, ``exclude`` globs, ``per-file-ignores`` and the cache live here.
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

    def with_overrides(self, **changes: object) -> LintConfig:
        """Return a copy with the given fields replaced (command-line flags win over files)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def parse_target_version(value: object, *, where: str) -> tuple[int, int]:
    """Parse ``"py311"`` into ``(3, 11)``.

    Raises:
        ConfigError: ``value`` is not ``py3X`` for a Python 3.7 or newer.
    """
    match = _VERSION.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) < 7:
        raise ConfigError(
            f"invalid target-version {value!r} {where}: expected 'py3X' for Python 3.7 or "
            'newer, e.g. target-version = "py311"'
        )
    return (3, int(match.group(1)))


def find_config(start: Path) -> Path | None:
    """Return the nearest ``pyproject.toml`` with a ``[tool.interlace.lint]`` table, walking up."""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError:
                # A broken file that mentions our table is ours to report, not to skip.
                if "tool.interlace" in text:
                    return candidate
                continue
            if isinstance(data.get("tool", {}).get("interlace", {}).get("lint"), dict):
                return candidate
    return None


def _codes(value: object, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"invalid value for {key!r} {where}: {value!r}; expected a list of rule code "
            f'prefixes, e.g. {key} = ["IL1", "IL201"]'
        )
    return check_selectors(value, key=key, where=where)


def check_selectors(values: Iterable[str], *, key: str, where: str) -> tuple[str, ...]:
    """Validate code prefixes (``IL``, ``IL1``, ``IL201``, ``ALL``) and return them upper-cased.

    Raises:
        ConfigError: a prefix is malformed or matches no registered rule.
    """
    from interlace.linters.rules import all_rules

    codes = [rule.code for rule in all_rules()]
    out = []
    for raw in values:
        selector = raw.strip().upper()
        if selector == "ALL":
            out.append("IL")
            continue
        if not _SELECTOR.match(selector) or not any(c.startswith(selector) for c in codes):
            raise ConfigError(
                f"unknown rule selector {raw!r} in {key} {where}: expected a prefix of one of "
                f"{', '.join(codes)} (for example 'IL', 'IL1' or 'IL201')"
            )
        out.append(selector)
    return tuple(out)


def _globs(value: object, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"invalid value for {key!r} {where}: {value!r}; expected a list of glob strings, "
            f'e.g. {key} = ["tests/fixtures/**", "*_pb2.py"]'
        )
    return tuple(value)


def _per_file_ignores(value: object, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"invalid value for 'per-file-ignores' {where}: {value!r}; expected a table of glob "
            'to code prefixes, e.g. per-file-ignores = { "tests/**" = ["IL201"] }'
        )
    return tuple(
        (glob, _codes(codes, f"per-file-ignores.{glob}", where)) for glob, codes in value.items()
    )


def _requires_python(data: Mapping[str, object]) -> tuple[int, int] | None:
    project = data.get("project")
    if not isinstance(project, dict):
        return None
    spec = project.get("requires-python")
    if not isinstance(spec, str):
        return None
    match = _REQUIRES.search(spec)
    return (3, int(match.group(1))) if match else None


def load_config(path: Path | None) -> LintConfig:
    """Read ``[tool.interlace.lint]`` from ``path`` (``None``: the defaults, rooted at the cwd).

    ``target-version`` defaults to the lower bound of ``[project] requires-python`` when the
    table does not set it, as in ruff.

    Raises:
        ConfigError: the file cannot be read or parsed, or a key or value is invalid.
    """
    if path is None:
        return LintConfig()
    where = f"in {path} [tool.interlace.lint]"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"config file {str(path)!r} is not valid TOML: {exc}; fix the syntax"
        ) from None
    table = data.get("tool", {}).get("interlace", {}).get("lint", {})
    if not isinstance(table, dict):
        raise ConfigError(
            f"invalid [tool.interlace.lint] in {path}: {table!r}; expected a table of settings"
        )
    for key in table:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r} {where}; valid keys are: {', '.join(_KEYS)}")
    config = LintConfig(root=path.parent.resolve(), source=path)
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
        inferred = _requires_python(data)
        if inferred is not None:
            changes["target_version"] = inferred
    for key, example in (
        ("shared-classes", '["ConnectionPool", "*Cache"]'),
        ("task-shared-classes", '["Agent", "*Storage"]'),
    ):
        if key in table:
            patterns = check_class_patterns(table[key])
            if patterns is None:
                raise ConfigError(
                    f"invalid value for {key!r} {where}: {table[key]!r}; expected a list of "
                    f"class names or fnmatch patterns, e.g. {key} = {example}"
                )
            changes[key.replace("-", "_")] = patterns
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
    if "respect-gitignore" in table:
        value = table["respect-gitignore"]
        if not isinstance(value, bool):
            raise ConfigError(
                f"invalid value for 'respect-gitignore' {where}: {value!r}; expected true or "
                "false, e.g. respect-gitignore = false"
            )
        changes["respect_gitignore"] = value
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


def _longest(code: str, prefixes: Sequence[str]) -> int:
    return max((len(p) for p in prefixes if code.startswith(p)), default=-1)


def selected_codes(
    codes: Iterable[str],
    *,
    select: Sequence[str],
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    opt_in: Collection[str] = (),
) -> tuple[str, ...]:
    """Return the codes enabled by the selectors, as in ruff: the most specific prefix wins, and
    an ``ignore`` wins a tie with a ``select``. A code in ``opt_in`` is enabled only by a
    selector that names it in full (ruff's ``explicit-preview-rules``): ``IL``, ``IL1`` and
    ``ALL`` do not reach it; ``ignore`` applies to it as to any code."""
    chosen = [*select, *extend_select]
    enabled = []
    for code in sorted(codes):
        named = [p for p in chosen if p == code] if code in opt_in else chosen
        best = _longest(code, named)
        if best >= 0 and best > _longest(code, ignore):
            enabled.append(code)
    return tuple(enabled)


def opt_in_codes() -> frozenset[str]:
    """Return the codes of the registered opt-in rules (see :attr:`Rule.opt_in`)."""
    from interlace.linters.rules import all_rules

    return frozenset(rule.code for rule in all_rules() if rule.opt_in)
