"""A concurrent state machine's failure drawn as an HTML report: its scenario as columns."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import stateful_machines as machines
from hypothesis import HealthCheck, Phase, settings

from interlace.stateful import NotLinearizableError

QUIET = settings(
    database=None,
    deadline=None,
    derandomize=True,
    max_examples=50,
    # As a machine's own settings: without the explain phase, whose tracer ran every
    # shrinking step (and all of interlace's code in it) under a LINE hook.
    phases=[phase for phase in Phase if phase is not Phase.explain],
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
)


def test_a_not_linearizable_error_draws_its_branches_as_the_pages_columns() -> None:
    case: Any = machines.UnlockedCounterMachine.TestCase
    case.settings = QUIET
    with pytest.raises(NotLinearizableError) as caught:
        case("runTest").runTest()
    error = caught.value
    assert error.failure is not None
    assert error.failure.token == error.token
    page = error.to_html(title="UnlockedCounterMachine")
    match = re.search(r'id="interlace-data">(.*?)</script>', page)
    assert match is not None
    scenario = json.loads(match.group(1))["scenario"]
    assert scenario["prefix"] == []
    assert scenario["suffix"] == []
    assert [[cell.split(" -> ")[0] for cell in column] for column in scenario["branches"]] == [
        ["A1 increment()"],
        ["B1 increment()"],
    ]
    assert all(" -> " in cell for column in scenario["branches"] for cell in column)


def test_the_error_raised_inside_a_run_has_no_schedule_to_draw() -> None:
    with pytest.raises(ValueError, match="raised inside one run"):
        NotLinearizableError("inside").to_html()
