"""``[tool.interlace.lint]``: discovery, validation messages and rule selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlace.errors import ConfigError
from interlace.linters import LintConfig, _config, find_config, load_config
from interlace.linters._config import (
    DEFAULT_EXCLUDE,
    ConfigResolver,
    RuleSelection,
    layer_selection,
    rebase_glob,
    resolve_selection,
    selected_codes,
)
from interlace.linters._files import GLOB_NO_PATTERN, GLOB_UNCLOSED_CLASS

CODES = ("IL101", "IL102", "IL201", "IL301", "IL302", "IL303")


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_load_config_reads_every_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[tool.interlace.lint]\n"
        'select = ["IL2"]\n'
        'extend-select = ["IL201"]\n'
        'ignore = ["IL201"]\n'
        'per-file-ignores = { "tests/**" = ["IL201"] }\n'
        'exclude = ["gen/**"]\n'
        'extend-exclude = ["*_pb2.py"]\n'
        'target-version = "py39"\n'
        'shared-classes = ["Pool"]\n'
        'task-shared-classes = ["Agent", "*Storage"]\n'
        'sharing = "declared"\n'
        'instance-primitives = "all"\n'
        "respect-gitignore = false\n"
        "force-exclude = true\n",
    )
    config = load_config(path)
    assert config == LintConfig(
        root=tmp_path.resolve(),
        source=path,
        select=("IL2",),
        extend_select=("IL201",),
        ignore=("IL201",),
        per_file_ignores=(("tests/**", ("IL201",)),),
        exclude=("gen/**", "*_pb2.py"),
        target_version=(3, 9),
        shared_classes=frozenset({"Pool"}),
        task_shared_classes=frozenset({"Agent", "*Storage"}),
        sharing="declared",
        instance_primitives="all",
        respect_gitignore=False,
        force_exclude=True,
    )


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            '["Pool", "pkg.Cache"]',
            "invalid entry 'pkg.Cache' (item 2) in 'shared-classes' in {path} "
            "[tool.interlace.lint]: a dotted name is not a class name: an entry is matched "
            "against a class's own name and the last dotted part of each of its base classes; "
            "write 'Cache'",
        ),
        (
            '["a b"]',
            "invalid entry 'a b' (item 1) in 'shared-classes' in {path} [tool.interlace.lint]: "
            "it has whitespace in it, which no class name has; write each class as an entry of "
            "its own: 'a', 'b'",
        ),
        (
            '["Pool", ""]',
            "invalid entry '' (item 2) in 'shared-classes' in {path} [tool.interlace.lint]: an "
            "empty string names no class; remove it",
        ),
        (
            '["[z-a]"]',
            "invalid entry '[z-a]' (item 1) in 'shared-classes' in {path} "
            "[tool.interlace.lint]: it is not a valid fnmatch pattern: a range in [...] runs "
            "backwards, so it matches no name; write the range from low to high, e.g. '[a-z]'",
        ),
        (
            '["9Lives"]',
            "invalid entry '9Lives' (item 1) in 'shared-classes' in {path} "
            "[tool.interlace.lint]: it is neither a class name (a Python identifier) nor an "
            "fnmatch pattern (with *, ? or [...]); write one, e.g. 'ConnectionPool' or '*Cache'",
        ),
        (
            "[1]",
            "invalid entry 1 (item 1) in 'shared-classes' in {path} [tool.interlace.lint]: it "
            "is int, not a string; write the class name in quotes",
        ),
    ],
)
def test_a_bad_shared_classes_entry_is_named_with_its_position_and_why(
    tmp_path: Path, entries: str, message: str
) -> None:
    path = write(tmp_path, f"[tool.interlace.lint]\nshared-classes = {entries}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == message.format(path=path)


def test_a_leading_dot_slash_is_removed_from_configured_globs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[tool.interlace.lint]\n"
        'per-file-ignores = { "./src/a.py" = ["IL201"], "!./tests/**" = ["IL101"] }\n'
        'exclude = ["./gen", "././build/"]\n',
    )
    config = load_config(path)
    assert (config.per_file_ignores, config.exclude) == (
        (("src/a.py", ("IL201",)), ("!tests/**", ("IL101",))),
        ("gen", "build/"),
    )


@pytest.mark.parametrize(
    ("glob", "start", "root", "rebased"),
    [
        ("app/pool.py", "src", ".", "src/app/pool.py"),
        ("/app/pool.py", "src", ".", "src/app/pool.py"),
        ("!app/**", "src", ".", "!src/app/**"),
        ("*_pb2.py", "src", ".", "*_pb2.py"),
        ("build/", "src", ".", "build/"),
        ("app/pool.py", ".", ".", "app/pool.py"),
        ("packages/a/m.py", ".", "packages/a", "/m.py"),
        ("packages/*/x/y.py", ".", "packages/a", "x/y.py"),
        ("**/m.py", ".", "packages/a", "**/m.py"),
        ("packages/b/m.py", ".", "packages/a", None),
        ("packages/a", ".", "packages/a", None),
        ("app/pool.py", "other", "packages/a", None),
    ],
)
def test_a_command_line_glob_is_rebased_onto_each_configuration_root(
    tmp_path: Path, glob: str, start: str, root: str, rebased: str | None
) -> None:
    for name in (start, root):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    moved = rebase_glob(glob, start=tmp_path / start, root=tmp_path / root)
    assert moved == rebased


def test_target_version_defaults_to_requires_python_lower_bound(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[project]\nrequires-python = ">=3.9,<4"\n[tool.interlace.lint]\nselect = ["IL"]\n',
    )
    assert load_config(path).target_version == (3, 9)


def test_missing_config_gives_the_defaults() -> None:
    config = load_config(None)
    assert (
        config.select,
        config.exclude,
        config.target_version,
        config.instance_primitives,
    ) == (("IL",), DEFAULT_EXCLUDE, (3, 11), "evidence")


def test_find_config_walks_up_to_the_first_pyproject_with_the_table(tmp_path: Path) -> None:
    write(tmp_path, "[tool.interlace.lint]\n")
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[tool.other]\n", encoding="utf-8")
    assert find_config(inner) == tmp_path / "pyproject.toml"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'select = "IL101"',
            "invalid value for 'select' in {path} [tool.interlace.lint]: 'IL101'; expected a "
            'list of rule code prefixes, e.g. select = ["IL1", "IL201"]',
        ),
        (
            'ignore = ["E501"]',
            "unknown rule selector 'E501' in ignore in {path} [tool.interlace.lint]: expected a "
            "prefix of one of {codes} (for example 'IL', 'IL1' or 'IL201')",
        ),
        (
            "selct = []",
            "unknown key 'selct' in {path} [tool.interlace.lint]; valid keys are: select, "
            "extend-select, ignore, per-file-ignores, exclude, extend-exclude, target-version, "
            "shared-classes, task-shared-classes, sharing, instance-primitives, "
            "respect-gitignore, force-exclude",
        ),
        (
            'target-version = "3.11"',
            "invalid target-version '3.11' in {path} [tool.interlace.lint]: expected one of "
            "py37, py38, py39, py310, py311, py312, py313, py314, py315 (CPython 3.7 to 3.15), "
            'e.g. target-version = "py311"',
        ),
        (
            'per-file-ignores = ["tests"]',
            "invalid value for 'per-file-ignores' in {path} [tool.interlace.lint]: ['tests']; "
            'expected a table of glob to code prefixes, e.g. per-file-ignores = { "tests/**" = '
            '["IL201"] }',
        ),
        (
            "exclude = [1]",
            "invalid value for 'exclude' in {path} [tool.interlace.lint]: [1]; expected a list "
            'of glob strings, e.g. exclude = ["tests/fixtures/**", "*_pb2.py"]',
        ),
        (
            'task-shared-classes = "Agent"',
            "invalid value for 'task-shared-classes' in {path} [tool.interlace.lint]: 'Agent'; "
            "expected a list of class names or fnmatch patterns, e.g. task-shared-classes = "
            '["Agent", "*Storage"]',
        ),
        (
            'sharing = "explicit"',
            "invalid value for 'sharing' in {path} [tool.interlace.lint]: 'explicit'; expected "
            '"inferred" (the rules infer from the code which state is shared) or "declared" '
            "(the rules about shared state report only inside the classes listed in "
            'task-shared-classes and shared-classes), e.g. sharing = "declared"',
        ),
        (
            "instance-primitives = true",
            "invalid value for 'instance-primitives' in {path} [tool.interlace.lint]: True; "
            'expected "evidence" (IL201 reports a per-instance asyncio primitive only when the '
            'file shows the object outliving one event loop) or "all", e.g. '
            'instance-primitives = "all"',
        ),
        (
            'respect-gitignore = "yes"',
            "invalid value for 'respect-gitignore' in {path} [tool.interlace.lint]: 'yes'; "
            "expected true or false, e.g. respect-gitignore = false",
        ),
        (
            "force-exclude = 1",
            "invalid value for 'force-exclude' in {path} [tool.interlace.lint]: 1; expected "
            "true or false, e.g. force-exclude = true",
        ),
        (
            'exclude = ["build\\\\"]',
            "invalid glob 'build\\\\' in exclude in {path} [tool.interlace.lint]: it ends with a "
            "backslash, which escapes nothing (paths take forward slashes, e.g. 'build/'); "
            "write a gitignore-style glob relative to the project root, e.g. 'build', "
            "'tests/fixtures/**' or '*_pb2.py'",
        ),
        (
            'extend-exclude = ["gen/[z-a].py"]',
            "invalid glob 'gen/[z-a].py' in extend-exclude in {path} [tool.interlace.lint]: it "
            "has an invalid character class (bad character range z-a); write a gitignore-style "
            "glob relative to the project root, e.g. 'build', 'tests/fixtures/**' or '*_pb2.py'",
        ),
        (
            'per-file-ignores = { "[z-a]" = ["IL201"] }',
            "invalid glob '[z-a]' in per-file-ignores in {path} [tool.interlace.lint]: it has an "
            "invalid character class (bad character range z-a); write a gitignore-style glob "
            "relative to the project root, e.g. 'build', 'tests/fixtures/**' or '*_pb2.py'",
        ),
        (
            'per-file-ignores = { "!" = ["IL201"] }',
            "invalid glob '!' in per-file-ignores in {path} [tool.interlace.lint]: an empty glob "
            "matches no path; write a gitignore-style glob relative to the project root, e.g. "
            "'build', 'tests/fixtures/**' or '*_pb2.py'",
        ),
        (
            'exclude = ["#gen"]',
            "invalid glob '#gen' in exclude in {path} [tool.interlace.lint]: a leading '#' makes "
            "it a comment, which matches no path (escape the '#' with a backslash for a name "
            "that starts with one); write a gitignore-style glob relative to the project root, "
            "e.g. 'build', 'tests/fixtures/**' or '*_pb2.py'",
        ),
        (
            'select = ["IL2", ""]',
            "unknown rule selector '' in select in {path} [tool.interlace.lint] (an empty "
            "selector comes from an empty value or a stray comma, as in 'IL2,'; it would select "
            "no rule): expected a prefix of one of {codes} (for example 'IL', 'IL1' or 'IL201')",
        ),
        (
            'select = ["il1"]',
            "rule selector 'il1' in select in {path} [tool.interlace.lint] is not upper case: "
            "rule codes are matched exactly, as in ruff; write 'IL1'",
        ),
        (
            'extend-select = ["all"]',
            "rule selector 'all' in extend-select in {path} [tool.interlace.lint] is not upper "
            "case: rule codes are matched exactly, as in ruff; write 'ALL'",
        ),
        (
            'ignore = ["Il201"]',
            "rule selector 'Il201' in ignore in {path} [tool.interlace.lint] is not upper case: "
            "rule codes are matched exactly, as in ruff; write 'IL201'",
        ),
        (
            'per-file-ignores = { "tests/**" = ["il2"] }',
            "rule selector 'il2' in per-file-ignores.tests/** in {path} [tool.interlace.lint] "
            "is not upper case: rule codes are matched exactly, as in ruff; write 'IL2'",
        ),
        (
            'extend-select = ["IL0"]',
            "rule selector 'IL0' in extend-select in {path} [tool.interlace.lint] enables no "
            "rule: it reaches only IL001, which is opt-in, enabled only by its full code; write "
            "'IL001'",
        ),
        (
            'select = ["e501"]',
            "unknown rule selector 'e501' in select in {path} [tool.interlace.lint]: expected a "
            "prefix of one of {codes} (for example 'IL', 'IL1' or 'IL201')",
        ),
    ],
)
def test_bad_config_values_name_key_value_file_and_fix(
    tmp_path: Path, body: str, message: str
) -> None:
    from interlace.linters.rules import all_rules

    path = write(tmp_path, f"[tool.interlace.lint]\n{body}\n")
    codes = ", ".join(r.code for r in all_rules())
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == message.replace("{path}", str(path)).replace("{codes}", codes)


@pytest.mark.parametrize(
    ("body", "key", "glob", "reason"),
    [
        ('extend-exclude = ["[unclosed"]', "extend-exclude", "[unclosed", GLOB_UNCLOSED_CLASS),
        ('exclude = ["gen/a[b]c["]', "exclude", "gen/a[b]c[", GLOB_UNCLOSED_CLASS),
        (
            'per-file-ignores = { "tests/[x" = ["IL201"] }',
            "per-file-ignores",
            "tests/[x",
            GLOB_UNCLOSED_CLASS,
        ),
        ('extend-exclude = ["/"]', "extend-exclude", "/", GLOB_NO_PATTERN),
    ],
)
def test_a_glob_that_matches_no_path_is_a_config_error_naming_key_value_and_file(
    tmp_path: Path, body: str, key: str, glob: str, reason: str
) -> None:
    path = write(tmp_path, f"[tool.interlace.lint]\n{body}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"invalid glob {glob!r} in {key} in {path} [tool.interlace.lint]: {reason}; write a "
        "gitignore-style glob relative to the project root, e.g. 'build', 'tests/fixtures/**' "
        "or '*_pb2.py'"
    )


def test_a_literal_bracket_escaped_in_a_glob_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, '[tool.interlace.lint]\nextend-exclude = ["\\\\[unclosed"]\n')
    assert load_config(path).exclude[-1] == "\\[unclosed"


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[tool.interlace.lint\n")
    with pytest.raises(ConfigError, match=r"is not valid TOML: .*; fix the syntax$"):
        load_config(path)


@pytest.mark.parametrize(
    ("select", "extend", "ignore", "expected"),
    [
        (["IL"], [], [], CODES),
        (["IL1"], [], [], ("IL101", "IL102")),
        (["IL1"], ["IL201"], [], ("IL101", "IL102", "IL201")),
        (["IL"], [], ["IL3"], ("IL101", "IL102", "IL201")),
        (["IL301"], [], ["IL3"], ("IL301",)),
        (["IL3"], [], ["IL3"], ()),
        (["IL3"], [], ["IL303"], ("IL301", "IL302")),
    ],
)
def test_the_most_specific_selector_wins_and_ignore_wins_ties(
    select: list[str], extend: list[str], ignore: list[str], expected: tuple[str, ...]
) -> None:
    assert selected_codes(CODES, select=select, extend_select=extend, ignore=ignore) == expected


@pytest.mark.parametrize(
    ("select", "extend", "ignore", "expected"),
    [
        (["IL"], [], [], ("IL101", "IL102")),
        (["IL1"], [], [], ("IL101", "IL102")),
        (["IL10"], [], [], ("IL101", "IL102")),
        (["IL"], ["IL104"], [], ("IL101", "IL102", "IL104")),
        (["IL104"], [], [], ("IL104",)),
        (["IL"], ["IL104"], ["IL1"], ("IL104",)),
        (["IL"], ["IL104"], ["IL104"], ("IL101", "IL102")),
    ],
)
def test_an_opt_in_code_is_selected_only_by_its_full_code(
    select: list[str], extend: list[str], ignore: list[str], expected: tuple[str, ...]
) -> None:
    codes = ("IL101", "IL102", "IL104")
    assert (
        selected_codes(codes, select=select, extend_select=extend, ignore=ignore, opt_in={"IL104"})
        == expected
    )


def test_a_negated_per_file_ignores_glob_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, '[tool.interlace.lint]\nper-file-ignores = { "!tests/**" = ["IL2"] }\n')
    assert load_config(path).per_file_ignores == (("!tests/**", ("IL2",)),)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '[tool.interlace.lnt]\nselect = ["IL1"]\n',
            "unknown table [tool.interlace.lnt] in {path}: interlace reads only "
            "[tool.interlace.lint] under [tool.interlace]; did you mean [tool.interlace.lint]?",
        ),
        (
            "[tool.interlace.explore]\nseed = 1\n",
            "unknown table [tool.interlace.explore] in {path}: interlace reads only "
            "[tool.interlace.lint] under [tool.interlace]; remove it",
        ),
        (
            '[tool.interlace]\nselect = ["IL1"]\n',
            "'select' is set directly under [tool.interlace] in {path}; lint settings go in "
            "[tool.interlace.lint]: move it under a [tool.interlace.lint] header",
        ),
        (
            "[tool.interlace]\nfoo = 1\n",
            "unknown key 'foo' in {path} [tool.interlace]: interlace reads only "
            "[tool.interlace.lint] under [tool.interlace]; remove it",
        ),
        (
            "[tool.interlace]\nlint = 3\n",
            "invalid [tool.interlace.lint] in {path}: 3; expected a table of settings, e.g. "
            '[tool.interlace.lint] then select = ["IL"]',
        ),
        (
            "[tool]\ninterlace = 3\n",
            "invalid [tool.interlace] in {path}: 3; expected a table, with the lint settings in "
            '[tool.interlace.lint], e.g. [tool.interlace.lint] then select = ["IL"]',
        ),
    ],
)
def test_anything_but_the_lint_table_under_tool_interlace_is_a_config_error(
    tmp_path: Path, body: str, message: str
) -> None:
    path = write(tmp_path, body)
    assert find_config(tmp_path) == path
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == message.replace("{path}", str(path))


def test_find_config_stops_at_a_misspelt_table_instead_of_using_a_parent(tmp_path: Path) -> None:
    write(tmp_path, "[tool.interlace.lint]\n")
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[tool.interlace.lnt]\n", encoding="utf-8")
    assert find_config(inner) == inner / "pyproject.toml"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (">=3.9", (3, 9)),
        ("~=3.9", (3, 9)),
        ("==3.9.*", (3, 9)),
        (">3.8", (3, 8)),
        (">=3.9,<4", (3, 9)),
        (">= 3.10.2", (3, 10)),
        (">=3.8,!=3.8.*", (3, 9)),
        (">=3.5", (3, 7)),
        ("<3.12", (3, 7)),
        (">=4", (3, 11)),
    ],
)
def test_target_version_is_the_lowest_minor_requires_python_admits(
    tmp_path: Path, spec: str, expected: tuple[int, int]
) -> None:
    path = write(tmp_path, f'[project]\nrequires-python = "{spec}"\n[tool.interlace.lint]\n')
    assert load_config(path).target_version == expected


def test_unparseable_requires_python_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, '[project]\nrequires-python = "^3.9"\n[tool.interlace.lint]\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"invalid requires-python '^3.9' in {path} [project]: expected a PEP 440 version "
        "specifier, from which interlace lint takes the target version when "
        '[tool.interlace.lint] sets none; write e.g. requires-python = ">=3.11", or set '
        'target-version = "py311" in [tool.interlace.lint]'
    )


def test_target_version_wins_over_an_unparseable_requires_python(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[project]\nrequires-python = "^3.9"\n[tool.interlace.lint]\ntarget-version = "py39"\n',
    )
    assert load_config(path).target_version == (3, 9)


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        pytest.param(
            [RuleSelection(("IL101", "IL201")), RuleSelection(ignore=("IL2",))],
            ("IL101",),
            id="a later ignore drops a code an earlier layer selected in full",
        ),
        pytest.param(
            [RuleSelection(("IL",), extend_select=("IL102",)), RuleSelection(ignore=("IL",))],
            (),
            id="a later ignore drops an opt-in code an earlier layer enabled",
        ),
        pytest.param(
            [RuleSelection(("IL",), ignore=("IL201",)), RuleSelection(("IL2",))],
            ("IL201",),
            id="a later select starts over: the earlier ignore no longer applies",
        ),
        pytest.param(
            [RuleSelection(("IL",), ignore=("IL2",)), RuleSelection(extend_select=("IL201",))],
            ("IL101", "IL201", "IL301", "IL302", "IL303"),
            id="a later extend-select re-enables a code an earlier layer ignored",
        ),
        pytest.param(
            [RuleSelection(("IL",)), RuleSelection(extend_select=("IL201",), ignore=("IL2",))],
            ("IL101", "IL201", "IL301", "IL302", "IL303"),
            id="within a layer the more specific selector wins",
        ),
        pytest.param(
            [RuleSelection(("IL",)), RuleSelection(extend_select=("IL2",), ignore=("IL201",))],
            ("IL101", "IL301", "IL302", "IL303"),
            id="within a layer a more specific ignore wins",
        ),
        pytest.param(
            [RuleSelection((), ignore=("IL3",)), RuleSelection(("IL",))],
            ("IL101", "IL201"),
            id="an empty select passes its ignores on to the next layer",
        ),
    ],
)
def test_selection_layers_resolve_as_in_ruff(
    layers: list[RuleSelection], expected: tuple[str, ...]
) -> None:
    codes = ("IL101", "IL102", "IL201", "IL301", "IL302", "IL303")
    assert resolve_selection(codes, layers, opt_in={"IL102"}) == expected


def test_layer_selection_lists_the_enabled_codes_in_full(tmp_path: Path) -> None:
    config = LintConfig(root=tmp_path, select=("IL101", "IL201"))
    layered = layer_selection(config, RuleSelection(ignore=("IL2",)))
    assert (layered.select, layered.extend_select, layered.ignore) == (("IL101",), (), ())
    assert layer_selection(config, RuleSelection()) is config


def monorepo(root: Path) -> None:
    """A root configuration, a package with its own and a package without one."""
    write(root, '[tool.interlace.lint]\nselect = ["IL2"]\n')
    for package in ("a", "b", "c"):
        (root / "packages" / package / "src").mkdir(parents=True)
    write(root / "packages" / "a", '[tool.interlace.lint]\nselect = ["IL1"]\n')
    write(root / "packages" / "c", "[tool.other]\nline-length = 99\n")


def test_each_file_takes_the_closest_pyproject_with_the_table(tmp_path: Path) -> None:
    monorepo(tmp_path)
    resolver = ConfigResolver(load_config(tmp_path / "pyproject.toml"))
    packages = tmp_path / "packages"
    assert resolver.for_file(packages / "a" / "src" / "m.py").select == ("IL1",)
    assert resolver.for_file(packages / "a" / "m.py").root == (packages / "a").resolve()
    assert resolver.for_file(packages / "b" / "src" / "m.py") is resolver.base
    assert resolver.for_file(packages / "c" / "src" / "m.py") is resolver.base
    assert resolver.for_file(tmp_path / "top.py") is resolver.base


def test_a_file_with_no_configuration_above_it_takes_the_base(tmp_path: Path) -> None:
    base = LintConfig(root=tmp_path / "project", select=("IL3",))
    (tmp_path / "elsewhere").mkdir()
    resolver = ConfigResolver(base)
    assert resolver.for_file(tmp_path / "elsewhere" / "m.py") is resolver.base
    assert resolver.base.select == ("IL3",)


def test_a_fixed_configuration_applies_to_every_file(tmp_path: Path) -> None:
    monorepo(tmp_path)
    resolver = ConfigResolver(load_config(tmp_path / "pyproject.toml"), fixed=True)
    assert resolver.for_file(tmp_path / "packages" / "a" / "m.py") is resolver.base


def test_overrides_apply_to_the_base_and_to_each_configuration_found(tmp_path: Path) -> None:
    monorepo(tmp_path)

    def overrides(config: LintConfig) -> LintConfig:
        return layer_selection(config, RuleSelection(extend_select=("IL301",)))

    resolver = ConfigResolver(load_config(tmp_path / "pyproject.toml"), overrides=overrides)
    nested = resolver.for_file(tmp_path / "packages" / "a" / "m.py")
    assert nested.select == ("IL101", "IL301")
    assert resolver.base.select == ("IL201", "IL301")


def test_each_directory_is_looked_at_once_and_each_configuration_loaded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monorepo(tmp_path)
    looked: list[Path] = []
    loaded: list[Path | None] = []
    find, load = _config._config_file_in, _config.load_config

    def counting_find(directory: Path) -> Path | None:
        looked.append(directory)
        return find(directory)

    def counting_load(path: Path | None, *, root: Path | None = None) -> LintConfig:
        loaded.append(path)
        return load(path, root=root)

    monkeypatch.setattr(_config, "_config_file_in", counting_find)
    monkeypatch.setattr(_config, "load_config", counting_load)
    resolver = ConfigResolver(load(tmp_path / "pyproject.toml"))
    packages = tmp_path / "packages"
    for _ in range(3):
        for package in ("a", "b"):
            for name in ("m.py", "src/m.py", "src/n.py"):
                resolver.for_file(packages / package / name)
    a, b = packages / "a", packages / "b"
    assert sorted(looked) == sorted([a / "src", a, b / "src", b, packages, tmp_path])
    assert loaded == [packages / "a" / "pyproject.toml"]


def test_a_broken_nested_configuration_is_reported_when_a_file_needs_it(tmp_path: Path) -> None:
    monorepo(tmp_path)
    nested = write(tmp_path / "packages" / "b", '[tool.interlace.lint]\nselect = ["E501"]\n')
    resolver = ConfigResolver(load_config(tmp_path / "pyproject.toml"))
    with pytest.raises(ConfigError, match=f"^unknown rule selector 'E501' in select in {nested} "):
        resolver.for_file(tmp_path / "packages" / "b" / "m.py")


def test_load_config_resolves_globs_against_the_root_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = write(tmp_path / "sub", '[tool.interlace.lint]\nexclude = ["gen"]\n')
    assert load_config(path).root == (tmp_path / "sub").resolve()
    assert load_config(path, root=tmp_path).root == tmp_path.resolve()
