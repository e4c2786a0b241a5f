"""``[tool.interlace.lint]``: discovery, validation messages and rule selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlace.errors import ConfigError
from interlace.linters import LintConfig, find_config, load_config
from interlace.linters._config import DEFAULT_EXCLUDE, selected_codes

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
        'ignore = ["il201"]\n'
        'per-file-ignores = { "tests/**" = ["IL201"] }\n'
        'exclude = ["gen/**"]\n'
        'extend-exclude = ["*_pb2.py"]\n'
        'target-version = "py39"\n'
        'shared-classes = ["Pool"]\n'
        'task-shared-classes = ["Agent", "*Storage"]\n'
        'sharing = "declared"\n'
        'instance-primitives = "all"\n'
        "respect-gitignore = false\n",
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
    )


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
            "respect-gitignore",
        ),
        (
            'target-version = "3.11"',
            "invalid target-version '3.11' in {path} [tool.interlace.lint]: expected 'py3X' for "
            'Python 3.7 or newer, e.g. target-version = "py311"',
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
            'shared-classes = ["not a name"]',
            "invalid value for 'shared-classes' in {path} [tool.interlace.lint]: ['not a name']; "
            "expected a list of class names or fnmatch patterns, e.g. shared-classes = "
            '["ConnectionPool", "*Cache"]',
        ),
        (
            'task-shared-classes = "Agent"',
            "invalid value for 'task-shared-classes' in {path} [tool.interlace.lint]: 'Agent'; "
            "expected a list of class names or fnmatch patterns, e.g. task-shared-classes = "
            '["Agent", "*Storage"]',
        ),
        (
            'task-shared-classes = ["pkg.Agent"]',
            "invalid value for 'task-shared-classes' in {path} [tool.interlace.lint]: "
            "['pkg.Agent']; expected a list of class names or fnmatch patterns, e.g. "
            'task-shared-classes = ["Agent", "*Storage"]',
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
