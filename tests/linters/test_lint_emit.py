"""``interlace lint --emit-test DIR``: the written tests race the finding's calls and confirm it."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from interlace.linters._emit import emit_tests
from interlace.linters._engine import Finding, lint_source
from interlace.linters.cli import lint_main
from interlace.linters.rules import all_rules

BUGGY = textwrap.dedent(
    """\
    import asyncio


    class Agent:
        def __init__(self):
            self.state = "idle"

        async def run(self, task):
            if self.state != "idle":
                raise RuntimeError("busy")
            await asyncio.sleep(0.01)
            self.state = "running"
    """
)

FIXED = BUGGY.replace(
    '        if self.state != "idle":\n            raise RuntimeError("busy")\n'
    "        await asyncio.sleep(0.01)\n",
    '        if self.state != "idle":\n            raise RuntimeError("busy")\n'
    '        self.state = "starting"\n        await asyncio.sleep(0.01)\n',
)


def findings(path: Path, codes: tuple[str, ...] = ("IL101",)) -> list[Finding]:
    rules = [rule for rule in all_rules() if rule.code in codes]
    text = path.read_text(encoding="utf-8")
    return list(lint_source(text, rules, filename=str(path)).findings)


def test_emit_test_writes_a_runnable_interlace_test_for_a_buildable_class(tmp_path: Path) -> None:
    module = tmp_path / "agent.py"
    module.write_text(BUGGY, encoding="utf-8")
    summary = emit_tests(findings(module), tmp_path / "out")
    (written,) = summary.written
    assert (summary.runnable, summary.skipped) == (1, 0)
    text = written.read_text(encoding="utf-8")
    ast.parse(text)
    assert "@pytest.mark.interlace(max_schedules=300, seed=1)" in text
    assert "from agent import Agent" in text
    assert "    return Agent()\n" in text
    assert "EDIT: build" not in text


def test_emitted_test_fails_on_the_race_and_passes_once_the_code_is_fixed(tmp_path: Path) -> None:
    module = tmp_path / "agent.py"
    module.write_text(BUGGY, encoding="utf-8")
    (written,) = emit_tests(findings(module), tmp_path / "out").written
    command = [sys.executable, "-m", "pytest", str(written), "-q", "-p", "no:cacheprovider"]
    buggy = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert buggy.returncode == 1, buggy.stdout
    assert "matches neither order" in buggy.stdout
    module.write_text(FIXED, encoding="utf-8")
    fixed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert fixed.returncode == 0, fixed.stdout


def test_emit_test_marks_the_construction_line_when_the_class_needs_arguments(
    tmp_path: Path,
) -> None:
    module = tmp_path / "pool.py"
    module.write_text(BUGGY.replace("def __init__(self):", "def __init__(self, url):"))
    summary = emit_tests(findings(module), tmp_path / "out")
    assert summary.runnable == 0
    text = summary.written[0].read_text(encoding="utf-8")
    assert "    return None  # EDIT: build one shared instance" in text
    assert "'fill in make(): the line marked EDIT'" in text


def test_emit_test_skips_findings_outside_a_class(tmp_path: Path) -> None:
    module = tmp_path / "registry.py"
    module.write_text(
        "import asyncio\n_state = {}\nasync def get(k):\n    if k not in _state:\n"
        "        await asyncio.sleep(0)\n        _state[k] = 1\n",
        encoding="utf-8",
    )
    summary = emit_tests(findings(module), tmp_path / "out")
    assert (summary.written, summary.runnable, summary.skipped) == ((), 0, 1)


def test_lint_cli_emit_test_reports_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "agent.py"
    module.write_text(BUGGY, encoding="utf-8")
    out = tmp_path / "emitted"
    code = lint_main([str(module), "--select", "IL101", "--no-cache", "--emit-test", str(out)])
    assert code == 1
    assert [p.name for p in out.iterdir()] == ["test_il101_agent_run_line12.py"]
    err = capsys.readouterr().err
    assert f"wrote 1 test file(s) to {out} (1 run as written, 0 need the lines marked EDIT" in err
