"""Integrations: the flake8 plugin and the pre-commit hook definition."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from interlace.linters import lint_source
from interlace.linters.cli import lint_main
from interlace.linters.flake8_plugin import Flake8Plugin
from interlace.linters.rules import all_rules

ROOT = Path(__file__).parents[2]
SOURCE = "import asyncio\nLOCK = asyncio.Lock()\nOK = asyncio.Event()  # noqa: IL201\n"


def expected_lines(filename: str) -> list[str]:
    result = lint_source(SOURCE, all_rules(), filename=filename)
    return [f"{filename}:{f.row}:{f.column}: {f.code} {f.message}" for f in result.findings]


def test_plugin_yields_the_engine_findings_with_zero_based_columns() -> None:
    lines = SOURCE.splitlines(keepends=True)
    plugin = Flake8Plugin(ast.parse(SOURCE), "a.py", lines)
    [(row, col, text, kind)] = list(plugin.run())
    assert (row, col, kind) == (2, 7, Flake8Plugin)
    assert text.startswith("IL201 `asyncio.Lock` is created at module level")


def flake8(
    tmp_path: Path, *args: str, source: str = SOURCE, select: str = "IL"
) -> subprocess.CompletedProcess[str]:
    """Run flake8 with the plugin over ``source`` written to ``a.py`` in ``tmp_path``."""
    (tmp_path / "a.py").write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", select, *args, "a.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_flake8_runs_the_plugin_through_its_entry_point(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    proc = flake8(tmp_path)
    assert (proc.returncode, proc.stdout.splitlines()) == (1, expected_lines("a.py"))


@pytest.mark.parametrize(
    ("code", "source"),
    [
        (
            "IL102",
            "import threading\n_lock = threading.Lock()\n_c = None\ndef get():\n"
            "    global _c\n    if _c is None:\n        with _lock:\n            _c = object()\n",
        ),
        (
            "IL104",
            "class A:\n    async def get(self):\n        if self._c is None:\n"
            "            self._c = await f()\n",
        ),
    ],
    ids=["IL102", "IL104"],
)
def test_flake8_runs_an_opt_in_rule_only_when_named_in_full(
    tmp_path: Path, code: str, source: str
) -> None:
    pytest.importorskip("flake8")
    (tmp_path / "c.py").write_text(source, encoding="utf-8")
    codes = []
    for selection in (["--select", "IL"], ["--select", "IL", "--extend-select", code]):
        proc = subprocess.run(
            [sys.executable, "-m", "flake8", "--isolated", *selection, "c.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        codes.append([line.split()[1] for line in proc.stdout.splitlines()])
    assert codes == [[], [code]]


def test_flake8_leaves_unused_directives_to_interlace_lint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("flake8")
    proc = flake8(tmp_path, source="x = 1  # noqa: IL999\n", select="IL,IL001")
    assert (proc.returncode, proc.stdout) == (0, "")
    monkeypatch.chdir(tmp_path)
    assert lint_main(["--no-cache", "--format", "concise", "--select", "IL001", "a.py"]) == 1
    assert capsys.readouterr().out.startswith("a.py:1:8: IL001 unused `noqa` directive: IL999")


def test_the_documented_flake8_commands_report_a_file_that_does_not_parse(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    docs = (ROOT / "docs" / "lint.md").read_text(encoding="utf-8")
    section = docs.split("\n## flake8\n", 1)[1].split("\n## ", 1)[0]
    commands = [line.split() for line in section.split("```\n")[1].splitlines()]
    (tmp_path / "broken.py").write_text("def f(:\n", encoding="utf-8")
    assert len(commands) == 3
    for command in commands:
        assert (command[0], command[-1]) == ("flake8", "src/")
        proc = subprocess.run(
            [sys.executable, "-m", "flake8", "--isolated", *command[1:-1], "broken.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (proc.returncode, proc.stdout.split()[1]) == (1, "E999"), command


def test_flake8_bad_target_version_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    proc = flake8(tmp_path, "--interlace-target-version", "39")
    assert proc.returncode == 2
    assert proc.stderr == (
        "flake8 (interlace): error: invalid target-version '39' from "
        "--interlace-target-version: expected one of py37, py38, py39, py310, py311, py312, "
        'py313, py314, py315 (CPython 3.7 to 3.15), e.g. target-version = "py311"\n'
    )


def test_flake8_instance_primitives_option_reaches_il201(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    source = "import asyncio\nclass C:\n    def __init__(self):\n        self.q = asyncio.Queue()\n"
    default = flake8(tmp_path, source=source)
    everything = flake8(tmp_path, "--interlace-instance-primitives", "all", source=source)
    assert (default.returncode, default.stdout) == (0, "")
    assert everything.returncode == 1
    assert everything.stdout.startswith("a.py:4:18: IL201 `asyncio.Queue` is created in `__init__`")


def test_pre_commit_hook_runs_interlace_lint_with_force_exclude() -> None:
    text = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert "- id: interlace-lint\n" in text
    assert "  entry: interlace lint --force-exclude\n" in text
    assert "  language: python\n" in text


def test_flake8_declared_sharing_options(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    source = "class Agent:\n    async def step(self):\n        if self.n < 3:\n"
    source += "            await g()\n            self.n += 1\n"
    runs = {}
    for name, extra in (
        ("inferred", []),
        ("other", ["--interlace-sharing", "declared", "--interlace-task-shared-classes", "Bot"]),
        ("agent", ["--interlace-sharing=declared", "--interlace-task-shared-classes=Bot,*Agent"]),
        ("none", ["--interlace-sharing", "declared"]),
        ("bad", ["--interlace-task-shared-classes", "pkg.Agent"]),
    ):
        runs[name] = flake8(tmp_path, *extra, source=source)
    assert [line.split()[1] for line in runs["inferred"].stdout.splitlines()] == ["IL101"]
    assert (runs["other"].returncode, runs["other"].stdout) == (0, "")
    # The finding is the same; its clause says why the rule takes `Agent` to be shared.
    assumed = "assuming concurrent tasks share one `Agent`"
    declared = "`Agent` is declared in `task-shared-classes`"
    assert assumed in runs["inferred"].stdout
    assert runs["agent"].stdout == runs["inferred"].stdout.replace(assumed, declared)
    assert runs["none"].returncode == 2
    assert runs["none"].stderr.startswith(
        'flake8 (interlace): error: sharing = "declared" but neither task-shared-classes nor '
        "shared-classes (--interlace-task-shared-classes, --interlace-shared-classes) lists"
    )
    assert (runs["bad"].returncode, runs["bad"].stderr) == (
        2,
        "flake8 (interlace): error: invalid entry 'pkg.Agent' (item 1) in "
        "--interlace-task-shared-classes 'pkg.Agent': a dotted name is not a class name: an "
        "entry is matched against a class's own name and the last dotted part of each of its "
        "base classes; write 'Agent'\n",
    )
