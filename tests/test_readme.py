"""Every command the README shows runs, and does what the README says it does.

The README's Python blocks marked ``<!-- readme-file: NAME -->`` are written to a fresh
directory as the files they are named after (and the bank example also as ``src/bank.py``, the
tree the lint commands read); every line of its ``sh`` blocks is then run there with this
interpreter's interlace and pytest. The quick start's two commands are checked against what
``.ci/run`` installs and runs, which CI runs on a fresh clone.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

FILES = dict(re.findall(r"<!-- readme-file: (\S+) -->\n```python\n(.*?)```", README, re.S))
BLOCKS = re.findall(r"```sh\n(.*?)```", README, re.S)


def _commands(block: str) -> list[str]:
    lines = (line.split("  #")[0].strip() for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


QUICK_START = _commands(BLOCKS[0])
COMMANDS = [command for block in BLOCKS[1:] for command in _commands(block)]

INTERLACE = [sys.executable, "-m", "interlace"]
WHOLE_RUN = ["--seed", "1", "--format", "json"]

Check = Callable[[subprocess.CompletedProcess[str], Path], None]


def _says(*fragments: str) -> Check:
    def check(result: subprocess.CompletedProcess[str], directory: Path) -> None:
        output = result.stdout + result.stderr
        for fragment in fragments:
            assert fragment in output, output

    return check


def _html(result: subprocess.CompletedProcess[str], directory: Path) -> None:
    pages = list((directory / "reports").glob("*.html"))
    assert len(pages) == 1, result.stdout
    assert str(pages[0]) in result.stdout.replace("\n", "")
    assert "test_no_overdraft" in pages[0].read_text(encoding="utf-8")


def _merged(result: subprocess.CompletedProcess[str], directory: Path) -> None:
    # The shards together report the failure one exploration of the same seed reports.
    whole = subprocess.run(
        [*INTERLACE, "explore", "registry:two_threads_get_one_client", *WHOLE_RUN],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    token = json.loads(whole.stdout)["failure"]["token"]
    assert f"token {token}" in result.stdout, (result.stdout, token)


def _sarif(result: subprocess.CompletedProcess[str], directory: Path) -> None:
    log = json.loads((directory / "interlace.sarif").read_text(encoding="utf-8"))
    rules = {r["ruleId"] for run in log["runs"] for r in run["results"]}
    assert "IL101" in rules, log


EXPECTED: dict[str, tuple[int, Check]] = {
    "pytest test_bank.py": (1, _says("interlace: failing schedule", "--interlace-replay=il2.")),
    "interlace explore registry:two_threads_get_one_client --seed 1": (
        1,
        _says("needs thread preemption", "interlace replay registry:two_threads_get_one_client"),
    ),
    "pytest test_counter.py": (1, _says("NotLinearizableError", "branch A")),
    "pytest test_bank.py --interlace-html=reports/": (1, _html),
    "interlace explore registry:two_threads_get_one_client --seed 1 --workers 2": (
        1,
        _says("needs thread preemption"),
    ),
    "interlace explore registry:two_threads_get_one_client --seed 1 --shard 1/2 "
    "--report-dir shards": (1, _says("needs thread preemption")),
    "interlace explore registry:two_threads_get_one_client --seed 1 --shard 2/2 "
    "--report-dir shards": (1, _says("needs thread preemption")),
    "interlace merge shards": (1, _merged),
    "interlace conform interlace.fixtures.conformance:REPORTED -c container": (
        1,
        _says("container"),
    ),
    "interlace lint src/": (1, _says("src/bank.py", "IL101")),
    "interlace lint --format sarif -o interlace.sarif src/": (1, _sarif),
    "interlace lint --explain IL101": (0, _says("check-then-act-across-await")),
    "interlace reproduce S000-19": (0, _says("S000-19  reproduced")),
}
"""Each README command, its exit code, and what its output must say."""


def test_the_readme_shows_the_commands_this_test_runs() -> None:
    # A command added to the README without a line here fails this, not silently untested.
    assert sorted(COMMANDS) == sorted(EXPECTED)


def test_the_quick_start_is_two_commands_that_ci_runs() -> None:
    assert QUICK_START == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/interlace reproduce",
        '.venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest',
    ]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install --quiet -e "$root[test]"' in ci
    assert "-m pytest" in ci


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("readme")
    assert set(FILES) == {"test_bank.py", "registry.py", "test_counter.py"}
    for name, code in FILES.items():
        (directory / name).write_text(code, encoding="utf-8")
    (directory / "src").mkdir()
    (directory / "src" / "bank.py").write_text(FILES["test_bank.py"], encoding="utf-8")
    return directory


@pytest.mark.parametrize("command", sorted(EXPECTED))
def test_each_readme_command_does_what_the_readme_says(command: str, project: Path) -> None:
    words = shlex.split(command)
    program = {
        "pytest": [sys.executable, "-m", "pytest"],
        "interlace": [sys.executable, "-m", "interlace"],
    }
    argv = program[words[0]] + words[1:]
    result = subprocess.run(
        argv, cwd=project, capture_output=True, text=True, timeout=300, check=False
    )
    code, check = EXPECTED[command]
    assert result.returncode == code, result.stdout + result.stderr
    check(result, project)
