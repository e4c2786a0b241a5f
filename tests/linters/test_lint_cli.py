"""``interlace lint``: exit codes, streams, flags and configuration errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lint_project import put

from interlace.linters.cli import lint_main
from interlace.linters.rules import all_rules

PRIMITIVE = "import asyncio\nLOCK = asyncio.Lock()\n"


def test_clean_tree_exits_0_with_summary_on_stderr(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", "x = 1\n")
    assert lint_main(["--no-cache"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("", "All checks passed (1 file checked).\n")


def test_findings_exit_1_on_stdout(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", "--format", "concise"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("a.py:2:8: IL201 `asyncio.Lock` is created at module level")
    assert err == "Found 1 finding (1 file checked).\n"


def test_exit_zero_turns_findings_into_success(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", "--exit-zero"]) == 0


def test_parse_error_is_a_finding_as_in_ruff_and_other_files_are_still_linted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    put(project, "b.py", "import asyncio\ndef f(:\n")
    assert lint_main(["--no-cache", "--format", "json"]) == 1
    out, err = capsys.readouterr()
    # As in ruff's JSON, the file that does not parse is listed too.
    assert [item["code"] for item in json.loads(out)] == ["IL201", "invalid-syntax"]
    assert err.splitlines() == [
        "b.py:2:7: error: cannot parse: invalid syntax",
        "Found 1 finding (2 files checked).",
        "1 error: some files were not linted completely.",
    ]


def test_missing_path_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint_main(["--no-cache", "nope.py"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == "nope.py: error: no such file or directory"


@pytest.mark.parametrize(("argv", "position"), [([""], 1), (["a.py", ""], 2)])
def test_an_empty_path_is_a_usage_error_naming_an_unset_variable_as_the_usual_cause(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], position: int
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", *argv]) == 2
    assert capsys.readouterr() == (
        "",
        f"interlace lint: error: path {position} on the command line is empty ('') and names "
        "no file or directory (in CI an unset or empty variable, as in interlace lint "
        '"$CHANGED_FILES", is the usual cause); pass the files or directories to lint, or no '
        "path at all to lint the project root\n",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--select", "E501"],
            "interlace lint: error: unknown rule selector 'E501' in --select from the command "
            "line: expected a prefix of one of {codes} (for example 'IL', 'IL1' or 'IL201')\n",
        ),
        (
            ["--target-version", "311"],
            "interlace lint: error: invalid target-version '311' from --target-version: expected "
            "one of py37, py38, py39, py310, py311, py312, py313, py314, py315 (CPython 3.7 to "
            '3.15), e.g. target-version = "py311"\n',
        ),
        (
            ["--target-version", "py399"],
            "interlace lint: error: invalid target-version 'py399' from --target-version: "
            "expected one of py37, py38, py39, py310, py311, py312, py313, py314, py315 (CPython "
            '3.7 to 3.15), e.g. target-version = "py311"\n',
        ),
        (
            ["--explain", "il201"],
            "interlace lint: error: rule code 'il201' for --explain is not upper case: rule "
            "codes are matched exactly, as in --select and ruff; write 'IL201'\n",
        ),
        (
            ["--per-file-ignores", "tests"],
            "interlace lint: error: invalid --per-file-ignores value 'tests': expected "
            "GLOB:CODES, e.g. --per-file-ignores 'tests/**:IL201,IL101'\n",
        ),
        (
            ["--config", "missing.toml"],
            "interlace lint: error: --config 'missing.toml' does not exist or is not a file; "
            "pass the path of a pyproject.toml with a [tool.interlace.lint] table\n",
        ),
        (
            ["--explain", "IL999"],
            "interlace lint: error: unknown rule code 'IL999' for --explain; known codes: "
            "{codes}\n",
        ),
    ],
)
def test_usage_errors_exit_2_with_a_message(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    codes = ", ".join(r.code for r in all_rules())
    assert lint_main(argv) == 2
    assert capsys.readouterr().err == message.replace("{codes}", codes)


def test_bad_jobs_value_is_an_argparse_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint_main(["--jobs", "0"]) == 2
    assert "invalid --jobs value '0': expected a whole number of processes >= 1" in (
        capsys.readouterr().err
    )


def test_bad_config_file_exits_2_naming_the_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nselect = "IL"\n')
    assert lint_main(["--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"interlace lint: error: invalid value for 'select' in {project / 'pyproject.toml'} "
        "[tool.interlace.lint]: 'IL'; expected a list of rule code prefixes, e.g. "
        'select = ["IL1", "IL201"]\n'
    )


def test_config_is_found_from_a_subdirectory_and_flags_win(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nignore = ["IL201"]\n')
    put(project, "pkg/a.py", PRIMITIVE)
    monkeypatch.chdir(project / "pkg")
    assert lint_main(["--no-cache", "a.py"]) == 0
    assert lint_main(["--no-cache", "--select", "IL201", "a.py"]) == 1


def test_per_file_ignores_flag(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "tests/a.py", PRIMITIVE)
    assert lint_main(["--no-cache", "--per-file-ignores", "tests/**:IL201"]) == 0


def test_exclude_from_config_and_force_exclude(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nextend-exclude = ["gen/**"]\n')
    put(project, "gen/a.py", PRIMITIVE)
    assert lint_main(["--no-cache"]) == 0
    assert lint_main(["--no-cache", "gen/a.py"]) == 1
    assert lint_main(["--no-cache", "--force-exclude", "gen/a.py"]) == 0


@pytest.mark.parametrize(("flags", "code"), [([], 0), (["--no-force-exclude"], 1)])
def test_force_exclude_in_the_configuration_applies_to_named_files_unless_the_flag_says_no(
    project: Path, flags: list[str], code: int
) -> None:
    put(
        project,
        "pyproject.toml",
        '[tool.interlace.lint]\nextend-exclude = ["gen/**"]\nforce-exclude = true\n',
    )
    put(project, "gen/a.py", PRIMITIVE)
    assert lint_main(["--no-cache", *flags, "gen/a.py"]) == code


OPT_IN_SOURCES = {
    "IL001": "x = 1  # noqa: IL999\n",
    "IL102": (
        "import threading\n_lock = threading.Lock()\n_c = None\ndef get():\n    global _c\n"
        "    if _c is None:\n        with _lock:\n            _c = object()\n    return _c\n"
    ),
    "IL104": (
        "class A:\n    async def get(self):\n        if self._c is None:\n"
        "            self._c = await f()\n"
    ),
}


@pytest.mark.parametrize("code", sorted(OPT_IN_SOURCES))
@pytest.mark.parametrize(
    ("config", "flags", "found"),
    [
        pytest.param("", [], False, id="default"),
        pytest.param("", ["--select", "IL"], False, id="select-IL"),
        pytest.param("", ["--select", "IL1"], False, id="select-IL1"),
        pytest.param("", ["--select", "ALL"], False, id="select-ALL"),
        pytest.param("", ["--select", "IL10"], False, id="select-IL10"),
        pytest.param("", ["--extend-select", "{code}"], True, id="extend-select"),
        pytest.param("", ["--select", "{code}"], True, id="select"),
        pytest.param('extend-select = ["{code}"]', [], True, id="config-extend-select"),
        pytest.param('extend-select = ["{code}"]', ["--ignore", "{code}"], False, id="ignore"),
    ],
)
def test_an_opt_in_rule_runs_only_when_named_in_full(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    code: str,
    config: str,
    flags: list[str],
    found: bool,
) -> None:
    put(project, "pyproject.toml", f"[tool.interlace.lint]\n{config.format(code=code)}\n")
    put(project, "a.py", OPT_IN_SOURCES[code])
    flags = [flag.format(code=code) for flag in flags]
    assert lint_main(["--no-cache", "--format", "json", *flags]) == (1 if found else 0)
    codes = [item["code"] for item in json.loads(capsys.readouterr().out)]
    assert codes == ([code] if found else [])


def test_help_covers_every_rule_and_names_every_opt_in_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert lint_main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    ranges = [(low, high) for low, high in re.findall(r"(IL\d{3})-(IL\d{3})", out)]
    named = set(re.findall(r"IL\d{3}", out))
    outside = [
        rule.code
        for rule in all_rules()
        if rule.code not in named and not any(low <= rule.code <= high for low, high in ranges)
    ]
    assert outside == []
    opt_in = [rule.code for rule in all_rules() if rule.opt_in]
    assert f"the opt-in rules, {', '.join(opt_in[:-1])} and {opt_in[-1]}, only" in out
    assert "the opt-in IL001 reports unused '# noqa' directives" in out


def test_explain_prints_every_documentation_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert lint_main(["--explain", "IL201"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("IL201 asyncio-primitive-in-init: ")
    headings = ("\n\nWhy: ", "\n\nBad:\n    import asyncio", "\nGood:\n", "\nWhen to suppress: ")
    assert [h for h in headings if h not in out] == []


def test_statistics_prints_counts(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "a.py", PRIMITIVE * 2)
    assert lint_main(["--no-cache", "--statistics"]) == 1
    assert capsys.readouterr().out == "    2\tIL201\tasyncio-primitive-in-init\n"


def test_statistics_in_json_have_ruffs_fields(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE * 2)
    assert lint_main(["--no-cache", "--statistics", "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out) == [
        {
            "code": "IL201",
            "name": "asyncio-primitive-in-init",
            "count": 2,
            "fixable": False,
            "fixable_count": 0,
        }
    ]


def test_github_format_prints_annotations(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".git").mkdir()  # paths are relative to the repository, else absolute
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", "--format", "github"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("::error file=a.py,line=2,col=8,endLine=2,endColumn=22,title=IL201::")


def test_warm_run_reports_the_cache_in_the_summary(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main([]) == 1
    assert lint_main([]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "Found 1 finding (1 file checked, 1 from cache)."
    )


def test_interlace_main_dispatches_to_lint(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from interlace.cli import main

    put(project, "a.py", PRIMITIVE)
    assert main(["lint", "--no-cache", "--format", "json"]) == 1
    [item] = json.loads(capsys.readouterr().out)
    assert (item["code"], item["location"]) == ("IL201", {"row": 2, "column": 8})
    assert main(["lint", "--no-cache", "--select", "IL1"]) == 0


def test_interlace_main_lint_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from interlace.cli import main

    assert main(["lint", "--format", "xml"]) == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_broken_pyproject_with_our_table_is_reported_not_skipped(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "pyproject.toml", "[tool.interlace.lint\nselect = []\n")
    assert lint_main(["--no-cache"]) == 2
    err = capsys.readouterr().err
    path = str(project / "pyproject.toml")
    assert err.startswith(f"interlace lint: error: config file {path!r} is not valid TOML: ")
    assert err.endswith("; fix the syntax\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--extend-exclude", "build\\"],
            "invalid glob 'build\\\\' in --extend-exclude from the command line: it ends with a "
            "backslash, which escapes nothing (paths take forward slashes, e.g. 'build/'); "
            "write a gitignore-style glob relative to the working directory, e.g. 'build', "
            "'tests/fixtures/**' or '*_pb2.py'",
        ),
        (
            ["--per-file-ignores", "[z-a]:IL201"],
            "invalid glob '[z-a]' in --per-file-ignores from the command line: it has an invalid "
            "character class (bad character range z-a); write a gitignore-style glob relative "
            "to the working directory, e.g. 'build', 'tests/fixtures/**' or '*_pb2.py'",
        ),
    ],
)
def test_an_invalid_glob_flag_exits_2_naming_it(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", *argv]) == 2
    assert capsys.readouterr().err == f"interlace lint: error: {message}\n"


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--select", ""], "--select"),
        (["--select", ","], "--select"),
        (["--select", "IL2,"], "--select"),
        (["--ignore", "IL2,"], "--ignore"),
        (["--extend-select", ""], "--extend-select"),
        (["--per-file-ignores", "tests/**:IL201,"], "--per-file-ignores"),
    ],
)
def test_an_empty_rule_selector_exits_2(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    codes = ", ".join(r.code for r in all_rules())
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", *argv]) == 2
    assert capsys.readouterr().err == (
        f"interlace lint: error: unknown rule selector '' in {flag} from the command line (an "
        "empty selector comes from an empty value or a stray comma, as in 'IL2,'; it would "
        f"select no rule): expected a prefix of one of {codes} (for example 'IL', 'IL1' or "
        "'IL201')\n"
    )


TWO_RULES = PRIMITIVE + (
    "class A:\n    async def get(self, key):\n        if key not in self.cache:\n"
    "            self.cache[key] = await fetch(key)\n"
)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--select", "IL2", "--select", "IL101"], ["IL101", "IL201"]),
        (["--select", "IL2", "--ignore", "IL201", "--ignore", "IL101"], []),
        (
            ["--select", "IL3", "--extend-select", "IL2", "--extend-select", "IL101"],
            ["IL101", "IL201"],
        ),
    ],
)
def test_repeated_selection_flags_accumulate(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: list[str]
) -> None:
    put(project, "a.py", TWO_RULES)
    lint_main(["--no-cache", "--format", "json", *argv])
    assert sorted(item["code"] for item in json.loads(capsys.readouterr().out)) == expected


@pytest.mark.parametrize(
    ("config", "argv", "expected"),
    [
        pytest.param('select = ["IL101", "IL201"]', ["--ignore", "IL2"], ["IL101"], id="ignore"),
        pytest.param('extend-select = ["IL102"]', ["--ignore", "IL"], [], id="ignore-opt-in"),
        pytest.param(
            'ignore = ["IL2"]', ["--extend-select", "IL201"], ["IL101", "IL201"], id="extend"
        ),
        pytest.param('ignore = ["IL201"]', ["--select", "IL2"], ["IL201"], id="select"),
    ],
)
def test_selection_flags_are_a_layer_over_the_configuration(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    config: str,
    argv: list[str],
    expected: list[str],
) -> None:
    put(project, "pyproject.toml", f"[tool.interlace.lint]\n{config}\n")
    put(project, "a.py", TWO_RULES + OPT_IN_SOURCES["IL102"])
    lint_main(["--no-cache", "--format", "json", *argv])
    assert sorted({item["code"] for item in json.loads(capsys.readouterr().out)}) == expected


def test_a_misspelt_table_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lnt]\nselect = ["IL1"]\n')
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache"]) == 2
    assert capsys.readouterr().err == (
        f"interlace lint: error: unknown table [tool.interlace.lnt] in "
        f"{project / 'pyproject.toml'}: interlace reads only [tool.interlace.lint] under "
        "[tool.interlace]; did you mean [tool.interlace.lint]?\n"
    )


def test_a_named_excluded_directory_is_linted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "build/b.py", PRIMITIVE)
    assert lint_main(["--no-cache", "build"]) == 1
    assert lint_main(["--no-cache", "--force-exclude", "build"]) == 0


def test_a_run_that_finds_no_python_file_warns_like_ruff(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "notes.txt", "not python\n")
    assert lint_main(["--no-cache"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        "interlace lint: warning: No Python files found under the given path(s)"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--select", "il101"],
            "rule selector 'il101' in --select from the command line is not upper case: rule "
            "codes are matched exactly, as in ruff; write 'IL101'",
        ),
        (
            ["--select", "IL2,all"],
            "rule selector 'all' in --select from the command line is not upper case: rule "
            "codes are matched exactly, as in ruff; write 'ALL'",
        ),
        (
            ["--extend-select", "Il1"],
            "rule selector 'Il1' in --extend-select from the command line is not upper case: "
            "rule codes are matched exactly, as in ruff; write 'IL1'",
        ),
        (
            ["--ignore", "il3"],
            "rule selector 'il3' in --ignore from the command line is not upper case: rule "
            "codes are matched exactly, as in ruff; write 'IL3'",
        ),
        (
            ["--per-file-ignores", "tests/**:il201"],
            "rule selector 'il201' in --per-file-ignores from the command line is not upper "
            "case: rule codes are matched exactly, as in ruff; write 'IL201'",
        ),
        (
            ["--select", "IL0"],
            "rule selector 'IL0' in --select from the command line enables no rule: it reaches "
            "only IL001, which is opt-in, enabled only by its full code; write 'IL001'",
        ),
        (
            ["--extend-select", "IL00"],
            "rule selector 'IL00' in --extend-select from the command line enables no rule: it "
            "reaches only IL001, which is opt-in, enabled only by its full code; write 'IL001'",
        ),
    ],
)
def test_a_selector_flag_that_selects_nothing_as_written_exits_2_naming_the_code_to_write(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache", *argv]) == 2
    assert capsys.readouterr().err == f"interlace lint: error: {message}\n"


def test_a_configured_selector_that_is_not_upper_case_exits_2_naming_the_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nselect = ["il1"]\n')
    put(project, "a.py", PRIMITIVE)
    assert lint_main(["--no-cache"]) == 2
    assert capsys.readouterr().err == (
        f"interlace lint: error: rule selector 'il1' in select in {project / 'pyproject.toml'} "
        "[tool.interlace.lint] is not upper case: rule codes are matched exactly, as in ruff; "
        "write 'IL1'\n"
    )


def monorepo(root: Path) -> None:
    """The root selects IL2 and packages/a selects IL1; packages/b has no configuration."""
    put(root, "pyproject.toml", '[tool.interlace.lint]\nselect = ["IL2"]\n')
    put(root, "packages/a/pyproject.toml", '[tool.interlace.lint]\nselect = ["IL1"]\n')
    for name in ("top.py", "packages/a/m.py", "packages/b/m.py"):
        put(root, name, TWO_RULES)


def found(out: str) -> list[tuple[str, str]]:
    return sorted({(item["filename"], item["code"]) for item in json.loads(out)})


def named(root: Path, *pairs: tuple[str, str]) -> list[tuple[str, str]]:
    return sorted((str(root / name), code) for name, code in pairs)


MONOREPO_FINDINGS = (
    ("top.py", "IL201"),
    ("packages/a/m.py", "IL101"),
    ("packages/b/m.py", "IL201"),
)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="walked-from-the-root"),
        pytest.param(
            ["--force-exclude", "top.py", "packages/a/m.py", "packages/b/m.py"],
            id="files-named-as-pre-commit-names-them",
        ),
    ],
)
def test_each_file_in_a_monorepo_takes_its_closest_configuration(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monorepo(project)
    assert lint_main(["--no-cache", "--format", "json", *argv]) == 1
    assert found(capsys.readouterr().out) == named(project, *MONOREPO_FINDINGS)


def test_a_monorepo_linted_from_a_package_directory_uses_the_same_configurations(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monorepo(project)
    monkeypatch.chdir(project / "packages")
    assert lint_main(["--no-cache", "--format", "json", "."]) == 1
    assert found(capsys.readouterr().out) == named(project, *MONOREPO_FINDINGS[1:])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["--ignore", "IL2"], [("packages/a/m.py", "IL101")], id="ignore"),
        pytest.param(
            ["--extend-select", "IL101"],
            [
                ("top.py", "IL101"),
                ("top.py", "IL201"),
                ("packages/a/m.py", "IL101"),
                ("packages/b/m.py", "IL101"),
                ("packages/b/m.py", "IL201"),
            ],
            id="extend-select",
        ),
        pytest.param(
            ["--select", "IL201"],
            [("top.py", "IL201"), ("packages/a/m.py", "IL201"), ("packages/b/m.py", "IL201")],
            id="select",
        ),
    ],
)
def test_selection_flags_are_a_layer_over_each_files_configuration(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    expected: list[tuple[str, str]],
) -> None:
    monorepo(project)
    lint_main(["--no-cache", "--format", "json", *argv])
    assert found(capsys.readouterr().out) == named(project, *expected)


def test_relative_globs_resolve_against_the_directory_of_the_configuration_that_applies(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        project,
        "pyproject.toml",
        '[tool.interlace.lint]\nper-file-ignores = { "tests/**" = ["IL2"] }\n',
    )
    put(
        project,
        "packages/a/pyproject.toml",
        '[tool.interlace.lint]\nextend-exclude = ["gen"]\n'
        'per-file-ignores = { "checks/**" = ["IL2"] }\n',
    )
    for name in ("gen", "tests", "checks"):
        put(project, f"{name}/m.py", PRIMITIVE)
        put(project, f"packages/a/{name}/m.py", PRIMITIVE)
    assert lint_main(["--no-cache", "--format", "json"]) == 1
    # Settings are not merged: the root's per-file-ignores do not reach packages/a/tests.
    assert found(capsys.readouterr().out) == named(
        project,
        ("checks/m.py", "IL201"),
        ("gen/m.py", "IL201"),
        ("packages/a/tests/m.py", "IL201"),
    )


@pytest.mark.parametrize(
    "nested",
    [
        pytest.param('[tool.interlace.lint]\ntarget-version = "py39"\n', id="target-version"),
        pytest.param(
            '[project]\nrequires-python = ">=3.9"\n[tool.interlace.lint]\n', id="requires-python"
        ),
    ],
)
def test_the_target_version_is_read_from_each_files_configuration(
    project: Path, capsys: pytest.CaptureFixture[str], nested: str
) -> None:
    source = (
        "import asyncio\nclass A:\n    def __init__(self):\n        self.lock = asyncio.Lock()\n"
    )
    put(project, "pyproject.toml", '[tool.interlace.lint]\ntarget-version = "py311"\n')
    put(project, "legacy/pyproject.toml", nested)
    put(project, "a.py", source)
    put(project, "legacy/a.py", source)
    assert lint_main(["--no-cache", "--format", "json"]) == 1
    assert found(capsys.readouterr().out) == named(project, ("legacy/a.py", "IL201"))


def test_editing_a_nested_configuration_invalidates_the_cache_of_its_files_only(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monorepo(project)
    put(project, "packages/b/n.py", TWO_RULES)
    assert lint_main([]) == 1
    capsys.readouterr()
    put(project, "packages/a/pyproject.toml", '[tool.interlace.lint]\nselect = ["IL3"]\n')
    assert lint_main(["--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert ("packages/a/m.py", "IL101") not in found(out)
    assert err.splitlines()[-1] == "Found 3 findings (4 files checked, 3 from cache)."


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '[tool.interlace.lint]\nselect = ["E501"]\n',
            "unknown rule selector 'E501' in select in {path} [tool.interlace.lint]: expected a "
            "prefix of one of {codes} (for example 'IL', 'IL1' or 'IL201')",
        ),
        (
            '[tool.interlace.lint]\nselect = ["il1"]\n',
            "rule selector 'il1' in select in {path} [tool.interlace.lint] is not upper case: "
            "rule codes are matched exactly, as in ruff; write 'IL1'",
        ),
        (
            '[tool.interlace.lnt]\nselect = ["IL1"]\n',
            "unknown table [tool.interlace.lnt] in {path}: interlace reads only "
            "[tool.interlace.lint] under [tool.interlace]; did you mean [tool.interlace.lint]?",
        ),
        (
            '[tool.interlace.lint]\nsharing = "declared"\n',
            'sharing = "declared" but neither task-shared-classes nor shared-classes in {path} '
            "[tool.interlace.lint] lists a class, so IL101, IL102, IL104, IL301 and IL303 could "
            "report nothing; declare the classes whose instances concurrent tasks share, e.g. "
            'task-shared-classes = ["Agent", "*Storage"], or use sharing = "inferred"',
        ),
    ],
)
@pytest.mark.parametrize("argv", [[], ["packages/a/m.py"]], ids=["walked", "named"])
def test_an_invalid_nested_configuration_exits_2_naming_the_file(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    body: str,
    message: str,
    argv: list[str],
) -> None:
    monorepo(project)
    put(project, "packages/a/pyproject.toml", body)
    codes = ", ".join(r.code for r in all_rules())
    assert lint_main(["--no-cache", *argv]) == 2
    path = str(project / "packages" / "a" / "pyproject.toml")
    expected = message.replace("{path}", path).replace("{codes}", codes)
    assert capsys.readouterr() == ("", f"interlace lint: error: {expected}\n")


def test_config_flag_applies_to_every_file_with_globs_relative_to_the_working_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monorepo(project)
    put(
        project,
        "pyproject.toml",
        '[tool.interlace.lint]\nselect = ["IL2"]\n'
        'per-file-ignores = { "packages/b/**" = ["IL2"] }\n',
    )
    assert lint_main(["--no-cache", "--format", "json", "--config", "pyproject.toml"]) == 1
    assert found(capsys.readouterr().out) == named(
        project, ("top.py", "IL201"), ("packages/a/m.py", "IL201")
    )
    # As in ruff, the glob is relative to the working directory: from packages/ it matches
    # nothing.
    monkeypatch.chdir(project / "packages")
    assert lint_main(["--no-cache", "--format", "json", "--config", "../pyproject.toml"]) == 1
    assert found(capsys.readouterr().out) == named(
        project, ("packages/a/m.py", "IL201"), ("packages/b/m.py", "IL201")
    )


@pytest.mark.parametrize(
    "flags",
    [["--per-file-ignores", "app/pool.py:IL201"], ["--extend-exclude", "app/pool.py"]],
)
def test_command_line_globs_are_relative_to_the_working_directory_as_in_ruff(
    project: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str]
) -> None:
    put(project, "pyproject.toml", "[tool.interlace.lint]\n")
    put(project, "src/app/pool.py", PRIMITIVE)
    monkeypatch.chdir(project / "src")
    assert lint_main(["--no-cache", *flags]) == 0
    monkeypatch.chdir(project)
    assert lint_main(["--no-cache", *flags]) == 1


def test_a_command_line_glob_reaches_into_a_package_with_its_own_configuration(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monorepo(project)
    argv = ["--no-cache", "--format", "json", "--per-file-ignores", "packages/a/m.py:IL1"]
    assert lint_main(argv) == 1
    assert found(capsys.readouterr().out) == named(
        project, ("top.py", "IL201"), ("packages/b/m.py", "IL201")
    )


def test_globs_that_start_with_dot_slash_in_the_configuration_match_as_in_ruff(
    project: Path,
) -> None:
    put(
        project,
        "pyproject.toml",
        "[tool.interlace.lint]\n"
        'per-file-ignores = { "./src/app/pool.py" = ["IL201"] }\n'
        'extend-exclude = ["./src/app/gen.py"]\n',
    )
    put(project, "src/app/pool.py", PRIMITIVE)
    put(project, "src/app/gen.py", PRIMITIVE)
    assert lint_main(["--no-cache"]) == 0


def test_respect_gitignore_is_read_from_the_base_configuration_only(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(project, ".gitignore", "ignored.py\n")
    put(project, "pkg/pyproject.toml", "[tool.interlace.lint]\nrespect-gitignore = false\n")
    put(project, "pkg/ignored.py", PRIMITIVE)
    assert lint_main(["--no-cache"]) == 0
    put(project, "pyproject.toml", "[tool.interlace.lint]\nrespect-gitignore = false\n")
    assert lint_main(["--no-cache"]) == 1
