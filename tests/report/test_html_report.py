"""The HTML swimlane report: its data and markup (browser-free), the command line's --html and
the pytest plugin's --interlace-html."""

from __future__ import annotations

import functools
import json
import re
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import html_targets
import pytest

import interlace
from interlace import Failure
from interlace._core.html_report import (
    render_html,
    replay_lines,
    report_data,
    wait_for_graph,
)
from interlace._core.result import StepRecord
from interlace._core.schedule import ADDRESS, STALL, Decision, Settings, encode_token
from interlace.harness import cli, pytest_plugin

TARGETS = (
    "async_lost_update",
    "async_deadlock",
    "thread_lost_update",
    "thread_deadlock",
    "mixed_lost_update",
    "async_hang",
)


@functools.cache
def failure_of(name: str) -> Failure:
    # The hang's run is cut at a small step budget: the report keeps its last 400 steps.
    max_steps = 3000 if name == "async_hang" else 200_000
    exploration = interlace.explore(
        getattr(html_targets, name),
        max_schedules=300,
        seed=1,
        keep_unshrunk=True,
        max_steps=max_steps,
    )
    assert exploration.failure is not None, name
    return exploration.failure


def data_of(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="interlace-data">(.*?)</script>', page)
    assert match is not None
    loaded: dict[str, Any] = json.loads(match.group(1))
    return loaded


class Tags(HTMLParser):
    """Every start tag of a page, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


@pytest.mark.parametrize("name", TARGETS)
def test_the_data_has_a_row_per_recorded_step_in_its_actors_lane(name: str) -> None:
    failure = failure_of(name)
    data = report_data(failure)
    rows = data["schedules"]["shrunk"]["rows"]
    assert [(r["n"], r["actor"], r["action"]) for r in rows] == [
        (s.step, s.actor, s.action) for s in failure.schedule
    ]
    assert data["kind"] == failure.kind
    assert data["token"] == failure.token


@pytest.mark.parametrize("name", TARGETS)
def test_the_page_is_one_file_that_asks_for_nothing_outside_it(name: str) -> None:
    page = failure_of(name).to_html(title=name)
    for tag, attrs in tags_of(page):
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        assert "src" not in attrs, (tag, attrs)
        assert "href" not in attrs, (tag, attrs)
    # The only URL is SVG's namespace name, which no browser fetches.
    assert set(re.findall(r"https?://[^\s\"')]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_a_steps_file_and_line_carry_the_source_line_they_name() -> None:
    data = report_data(failure_of("async_lost_update"))
    source = Path(html_targets.__file__).read_text().splitlines()
    keys = [key for row in data["schedules"]["shrunk"]["rows"] for key in row["where"]]
    assert keys, "no step named a readable file:line"
    for key in keys:
        entry = data["sources"][key]
        if not entry["file"].endswith("html_targets.py"):
            continue
        for number, text in entry["lines"]:
            assert text == source[number - 1]
        assert entry["first"] <= entry["last"]
    assert any(
        "await asyncio.sleep(0)" in text
        for key in keys
        for _, text in data["sources"][key]["lines"]
    )


def test_a_thread_preemption_is_marked_on_its_step() -> None:
    failure = failure_of("thread_lost_update")
    rows = report_data(failure)["schedules"]["shrunk"]["rows"]
    marked = [row for row in rows if row["mark"]]
    assert [row["mark"] for row in marked] == ["preemption"] * failure.deviations
    assert all(row["deviation"] for row in marked)


def test_a_stock_order_failure_marks_no_step() -> None:
    rows = report_data(failure_of("async_lost_update"))["schedules"]["shrunk"]["rows"]
    assert [row["mark"] for row in rows if row["mark"]] == []


def hand_made_failure(decisions: list[Decision], records: tuple[StepRecord, ...]) -> Failure:
    return Failure(
        kind="exception",
        token=encode_token(Settings(), decisions),
        exception=None,
        report="Failing schedule (3 steps):\n\nReplay:\n  interlace replay m:f TOKEN\n",
        label="made by hand",
        steps=3,
        shrunk_from=3,
        deviations=len(decisions),
        schedule=records,
    )


def test_a_loop_stall_and_an_address_order_are_marked_from_the_tokens_decisions() -> None:
    records = (
        StepRecord(1, "main", "started f", "", "m.py:3"),
        StepRecord(2, "Task-2", "started g", "", "m.py:7"),
        StepRecord(3, "Task-2", "resumed", "m.py:7", "finished", deviation="the loop was late"),
    )
    failure = hand_made_failure(
        [Decision(0, ADDRESS, 1, 0), Decision(3, STALL, 1, 30_000)], records
    )
    data = report_data(failure)
    assert [row["mark"] for row in data["schedules"]["shrunk"]["rows"]] == ["", "", "stall"]
    assert data["address"] == [
        "tasks and futures hashed in about reverse creation order (as their addresses may be "
        "on a stock run)"
    ]


def test_the_replay_lines_are_the_ones_under_the_reports_replay_heading() -> None:
    failure = failure_of("thread_deadlock")
    lines = failure.report.splitlines()
    start = lines.index("Replay:") + 1
    assert replay_lines(failure.report) == [line.strip() for line in lines[start:]]
    assert replay_lines(failure.report)[-1].startswith("interlace replay ")


def test_a_thread_deadlock_is_a_wait_for_graph_with_its_cycle_marked() -> None:
    graph = wait_for_graph(failure_of("thread_deadlock").detail)
    assert graph is not None
    edges = {(e["from"], e["to"]): (e["label"], e["cycle"]) for e in graph["edges"]}
    assert edges[("forward", "backward")] == ("waits for Lock second", True)
    assert edges[("backward", "forward")] == ("waits for Lock first", True)
    assert edges[("MainThread", "forward")] == ("waits for thread forward to finish", False)
    assert graph["cycle"] == ["forward", "backward", "forward"]


def test_an_asyncio_deadlock_is_a_wait_for_graph_with_its_cycle_marked() -> None:
    failure = failure_of("async_deadlock")
    graph = wait_for_graph(failure.detail)
    assert graph is not None
    edges = {(e["from"], e["to"]): e["cycle"] for e in graph["edges"]}
    assert edges == {
        ("Task-2", "Task-3"): True,
        ("Task-3", "Task-2"): True,
        ("main", "Task-2"): False,
        ("main", "Task-3"): False,
    }
    waiting = {node["name"]: node["at"] for node in graph["nodes"]}
    assert waiting["Task-2"].startswith("tests/report/html_targets.py:")
    assert report_data(failure)["waitfor"] == graph


def test_an_exception_has_no_wait_for_graph() -> None:
    assert report_data(failure_of("thread_lost_update"))["waitfor"] is None


def test_the_schedule_as_first_found_is_kept_when_shrinking_changed_it() -> None:
    failure = failure_of("thread_lost_update")
    assert failure.unshrunk, "shrinking changed this schedule, so the first one is recorded"
    assert failure.unshrunk != failure.schedule
    unshrunk = report_data(failure)["schedules"]["unshrunk"]
    assert [row["n"] for row in unshrunk["rows"]] == [s.step for s in failure.unshrunk]


def test_without_keep_unshrunk_the_schedule_as_first_found_is_not_recorded() -> None:
    exploration = interlace.explore(html_targets.thread_lost_update, max_schedules=300, seed=1)
    assert exploration.failure is not None
    assert exploration.failure.schedule == failure_of("thread_lost_update").schedule
    assert exploration.failure.unshrunk == ()
    assert report_data(exploration.failure)["schedules"]["unshrunk"] is None


def test_a_failure_that_shrinking_did_not_change_has_no_second_schedule() -> None:
    failure = failure_of("async_lost_update")
    assert failure.deviations == 0
    assert failure.unshrunk == ()
    assert report_data(failure)["schedules"]["unshrunk"] is None


def test_markup_in_task_names_and_messages_reaches_the_page_only_as_text() -> None:
    exploration = interlace.explore(html_targets.hostile_names, max_schedules=5, seed=1)
    assert exploration.failure is not None
    page = exploration.failure.to_html(title="<i>title</i>")
    assert "</script><script>alert(1)" not in page
    assert "<img" not in page
    assert "<b>" not in page
    assert "<i>" not in page
    assert [tag for tag, _ in tags_of(page)].count("script") == 2
    data = data_of(page)
    assert "</script><script>alert(1)</script>" in {
        row["actor"] for row in data["schedules"]["shrunk"]["rows"]
    }
    assert "<b>bold</b>" in data["headline"]
    assert data["title"] == "<i>title</i>"


@dataclass(frozen=True)
class Columns:
    prefix: tuple[str, ...]
    branches: tuple[tuple[str, ...], ...]
    suffix: tuple[str, ...]


def test_a_scenario_becomes_the_pages_columns() -> None:
    columns = Columns(
        prefix=("P1 put('k', 1)",), branches=(("A1 get('k')",), ("B1 delete('k')",)), suffix=()
    )
    data = data_of(render_html(failure_of("async_lost_update"), scenario=columns))
    assert data["scenario"] == {
        "prefix": ["P1 put('k', 1)"],
        "branches": [["A1 get('k')"], ["B1 delete('k')"]],
        "suffix": [],
    }


def test_a_long_schedule_keeps_its_first_and_last_steps_and_says_how_many_it_left_out() -> None:
    records = tuple(StepRecord(n, "main", "ran", "", "") for n in range(1, 2_501))
    rows = report_data(hand_made_failure([], records))["schedules"]["shrunk"]
    assert rows["omitted"] == 500
    assert [r["n"] for r in rows["rows"]][999:1001] == [1000, 1501]


# -- the command line ------------------------------------------------------------------------------


def test_explore_html_writes_the_report_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "report.html"
    spec = "tests/report/html_targets.py:thread_deadlock"
    code = cli.main(["explore", spec, "--seed", "1", "--html", str(path)])
    assert code == cli.EXIT_FINDINGS
    err = capsys.readouterr().err
    assert f"interlace explore: {cli.MSG_HTML_WRITTEN.format(path=path)}" in err.splitlines()
    data = data_of(path.read_text(encoding="utf-8"))
    assert data["title"] == spec
    assert data["schedules"]["unshrunk"] is not None, "--html keeps the schedule first found"


def test_explore_html_in_a_missing_directory_is_refused_before_exploring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "missing" / "report.html"
    code = cli.main(["explore", "no_such_module:f", "--html", str(path)])
    assert code == cli.EXIT_ERROR
    message = cli.MSG_HTML_NO_DIR.format(path=str(path), directory=str(path.parent))
    assert capsys.readouterr().err == f"interlace explore: error: {message}\n"


def test_replay_html_writes_the_replayed_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failure = failure_of("thread_deadlock")
    path = tmp_path / "replayed.html"
    spec = "tests/report/html_targets.py:thread_deadlock"
    assert cli.main(["replay", spec, failure.token, "--html", str(path)]) == cli.EXIT_FINDINGS
    assert cli.MSG_HTML_WRITTEN.format(path=path) in capsys.readouterr().err
    assert data_of(path.read_text(encoding="utf-8"))["token"] == failure.token


# -- the pytest plugin -----------------------------------------------------------------------------

FAILING_TEST = """
import threading
import pytest

@pytest.mark.interlace(max_schedules=200, seed=1)
def test_deadlock():
    a, b = threading.Lock(), threading.Lock()
    def one():
        with a:
            with b:
                pass
    def two():
        with b:
            with a:
                pass
    threads = [threading.Thread(target=one), threading.Thread(target=two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

@pytest.mark.interlace(max_schedules=5)
def test_passes():
    pass
"""


def test_the_file_name_is_made_from_the_node_id_and_its_checksum() -> None:
    nodeid = "tests/test_x.py::test_a[1-<2>]"
    assert pytest_plugin.html_file_name(nodeid) == (
        f"tests_test_x.py_test_a_1-_2-{zlib.crc32(nodeid.encode()):08x}.html"
    )


@pytest.mark.parametrize("how", ["option", "ini"])
def test_interlace_html_writes_one_report_per_failing_test_and_prints_its_path(
    pytester: pytest.Pytester, how: str
) -> None:
    pytester.makepyfile(test_bank=FAILING_TEST)
    if how == "ini":
        pytester.makeini("[pytest]\ninterlace_html = reports\n")
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    else:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--interlace-html=reports")
    result.assert_outcomes(failed=1, passed=1)
    written = sorted((pytester.path / "reports").iterdir())
    assert [p.name for p in written] == [
        pytest_plugin.html_file_name("test_bank.py::test_deadlock")
    ]
    result.stdout.fnmatch_lines([pytest_plugin.MSG_HTML_WRITTEN.format(path=written[0])])
    data = data_of(written[0].read_text(encoding="utf-8"))
    assert data["title"] == "test_bank.py::test_deadlock"
    assert data["kind"] == "deadlock"


def test_interlace_html_naming_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bank=FAILING_TEST)
    (pytester.path / "taken").write_text("")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--interlace-html=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*"
            + pytest_plugin.MSG_HTML_NOT_DIR.format(
                setting="--interlace-html", value="taken", source="the command line"
            )
        ]
    )


def test_a_report_that_cannot_be_written_is_said_in_place_of_its_path(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_bank=FAILING_TEST)
    name = pytest_plugin.html_file_name("test_bank.py::test_deadlock")
    blocked = pytester.path / "reports" / name
    blocked.mkdir(parents=True)  # a directory where the file would go
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--interlace-html=reports")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [f"interlace: cannot write the HTML report to {blocked}: *; give --interlace-html *"]
    )
    assert blocked.is_dir()
