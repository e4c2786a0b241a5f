"""Every example in docs/stateful.md runs, and fails or passes as its comments say."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import sys
import unittest
from types import ModuleType
from typing import Any

import pytest
from hypothesis import settings

from interlace.stateful import NotLinearizableError

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "stateful.md"
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
EXPECTATION = re.compile(
    r"^(Test\w+) = \w+\.TestCase  # (passes|fails: NotLinearizableError)$", re.M
)


def blocks(language: str) -> list[str]:
    return [
        code for lang, code in BLOCK.findall(DOC.read_text(encoding="utf-8")) if lang == language
    ]


EXAMPLES = [code for code in blocks("python") if EXPECTATION.search(code)]


def load(code: str, directory: pathlib.Path, name: str) -> ModuleType:
    # A module of its own, as a user's test file: Hypothesis keys its database by module.
    path = directory / f"{name}.py"
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run(case: Any) -> None:
    case.settings = settings(case.settings, database=None, derandomize=True)
    case("runTest").runTest()


def test_the_doc_has_an_example_per_use() -> None:
    assert len(EXAMPLES) == 4


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_each_example_fails_or_passes_as_it_says(index: int, tmp_path: pathlib.Path) -> None:
    code = EXAMPLES[index]
    module = load(code, tmp_path, f"stateful_doc_example_{index}")
    for name, expected in EXPECTATION.findall(code):
        case = getattr(module, name)
        assert issubclass(case, unittest.TestCase)
        if expected == "passes":
            run(case)
        else:
            with pytest.raises(NotLinearizableError):
                run(case)


def test_the_report_shown_is_the_report_the_first_example_gives(tmp_path: pathlib.Path) -> None:
    module = load(EXAMPLES[0], tmp_path, "stateful_doc_report")
    with pytest.raises(NotLinearizableError) as caught:
        run(module.TestCounter)
    shown = blocks("text")[0]
    assert shown in str(caught.value)


def test_the_model_example_shrinks_to_what_the_doc_says(tmp_path: pathlib.Path) -> None:
    module = load(EXAMPLES[2], tmp_path, "stateful_doc_model")
    with pytest.raises(NotLinearizableError) as caught:
        run(module.TestTracker)
    error = caught.value
    assert error.scenario is not None
    calls = list(error.scenario.calls())
    records = [call.label for call in calls if call.rule == "record_error"]
    assert records == ["A1", "B1"]
    assert [call.rule for call in calls if call.label not in records] == ["error_count"]
    assert len({dict(call.arguments)["plan_id"] for call in calls}) == 1
    assert "returned 1 in the run, returned 2 in this order" in str(error)
