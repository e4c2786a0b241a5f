"""The HTML report rendered in a real browser: headless Chromium builds the page (its script
makes the lanes, steps, marks and wait-for graph), and the DOM it ends with is checked.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it). Where it is missing these
tests fail and say what to install; ``INTERLACE_SKIP_BROWSER=1`` (never set by CI) skips them
instead, for a machine that cannot have it. ``INTERLACE_REPORT_PNG=PATH`` also copies the
screenshot of the thread-race report there (how docs/report.png is made).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import html_targets
import pytest

import interlace
from interlace import Failure

MSG_NO_CHROMIUM = (
    "headless Chromium is needed to check the HTML report in a real browser, and neither "
    "'chromium' on PATH nor /usr/bin/chromium exists: install it with "
    "'apt-get install chromium' (Debian's package; .ci/run does this), or set "
    "INTERLACE_SKIP_BROWSER=1 to skip these tests on a machine that cannot have it"
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)
BROWSER_SECONDS = 90


def chromium() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
    )
    if found is None:
        if os.environ.get("INTERLACE_SKIP_BROWSER") == "1":
            pytest.skip("INTERLACE_SKIP_BROWSER=1: the HTML report is not checked in a browser")
        pytest.fail(MSG_NO_CHROMIUM, pytrace=False)
    return found


def run_chromium(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *arguments],
        capture_output=True,
        text=True,
        timeout=BROWSER_SECONDS,
        check=False,
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


class Element:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class Dom(HTMLParser):
    """The rendered DOM as a flat list of elements, each with the text directly inside it."""

    VOID = frozenset({"meta", "br", "img", "input", "link", "hr"})

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1].text += data

    def having(self, cls: str) -> list[Element]:
        return [e for e in self.elements if cls in e.classes]

    def by_id(self, ident: str) -> Element:
        (found,) = [e for e in self.elements if e.attrs.get("id") == ident]
        return found


def render(tmp_path: Path, failure: Failure, name: str) -> tuple[Dom, str]:
    page = tmp_path / f"{name}.html"
    page.write_text(failure.to_html(title=name), encoding="utf-8")
    done = run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr
    return Dom(done.stdout), done.stderr


def console_errors(stderr: str) -> list[str]:
    """What the page wrote to its console, as Chromium logs it (``INFO:CONSOLE:1] "Uncaught
    TypeError ..."``): the report's script writes nothing there, so every line is a fault."""
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


@pytest.mark.parametrize(
    "name",
    [
        "async_lost_update",
        "async_deadlock",
        "thread_lost_update",
        "thread_deadlock",
        "mixed_lost_update",
        "async_hang",
    ],
)
def test_chromium_builds_a_lane_per_actor_and_a_block_per_step(tmp_path: Path, name: str) -> None:
    failure = failure_of(name)
    dom, stderr = render(tmp_path, failure, name)
    body = next(e for e in dom.elements if e.tag == "body")
    assert body.attrs.get("data-rendered") == "yes", "the page's script did not finish"
    errors = dom.by_id("js-errors")
    assert errors.text == ""
    assert "hidden" in errors.attrs
    assert console_errors(stderr) == []
    actors = list(dict.fromkeys(step.actor for step in failure.schedule))
    assert [e.attrs["data-lane"] for e in dom.having("lane-head")] == actors
    steps = dom.having("step")
    assert [(e.attrs["data-step"], e.attrs["data-actor"]) for e in steps] == [
        (str(s.step), s.actor) for s in failure.schedule
    ]
    assert len([e for e in steps if "deviation" in e.classes]) == failure.deviations
    assert [e.text for e in dom.having("what")] == [s.action for s in failure.schedule]
    gaps = [e.text for e in dom.having("gap")]
    first = failure.schedule[0].step
    assert gaps == ([f"\u2026 steps 1-{first - 1} were not recorded \u2026"] if first > 1 else [])
    copies = dom.having("copy")
    assert len(copies) == len([line for line in failure.report.splitlines() if "replay" in line])


def test_chromium_marks_the_preemption_and_offers_the_schedule_as_first_found(
    tmp_path: Path,
) -> None:
    failure = failure_of("thread_lost_update")
    dom, _ = render(tmp_path, failure, "thread_lost_update")
    marked = [e for e in dom.having("step") if "deviation" in e.classes]
    assert [e.attrs["data-mark"] for e in marked] == ["preemption"] * failure.deviations
    badges = [e.text for e in dom.having("mark") if "preemption" in e.classes]
    assert badges.count("preemption") == failure.deviations + 1  # the legend has one too
    assert dom.by_id("show-unshrunk").text == f"As first found ({failure.shrunk_from} steps)"
    assert dom.by_id("lanes").attrs["data-schedule"] == "shrunk"


def test_an_address_ending_in_a_step_number_opens_that_steps_source(tmp_path: Path) -> None:
    failure = failure_of("thread_lost_update")
    page = tmp_path / "report.html"
    page.write_text(failure.to_html(), encoding="utf-8")
    deviation = next(step for step in failure.schedule if step.deviation)
    done = run_chromium(tmp_path, "--dump-dom", f"{page.as_uri()}#step-{deviation.step}")
    dom = Dom(done.stdout)
    assert "hidden" not in dom.by_id("panel").attrs
    (selected,) = dom.having("selected")
    assert selected.attrs["data-step"] == str(deviation.step)
    source = Path(html_targets.__file__).read_text().splitlines()
    shown = [e.text for e in dom.having("hl")]
    assert "        counter.value = seen + 1\n" in [line[7:] for line in shown]
    assert all(line[7:-1] in source for line in shown)


def test_chromium_draws_the_deadlocks_wait_for_graph_with_the_cycle_in_red(
    tmp_path: Path,
) -> None:
    dom, _ = render(tmp_path, failure_of("thread_deadlock"), "thread_deadlock")
    assert "hidden" not in dom.by_id("waitfor").attrs
    nodes = {e.attrs["data-node"] for e in dom.elements if e.attrs.get("class") == "node"}
    assert nodes == {"MainThread", "forward", "backward"}
    edges = {
        (e.attrs["data-from"], e.attrs["data-to"]): "cycle" in e.classes
        for e in dom.elements
        if "edge" in e.classes
    }
    assert edges == {
        ("MainThread", "forward"): False,
        ("forward", "backward"): True,
        ("backward", "forward"): True,
    }


def test_chromium_shows_markup_in_names_as_text_and_runs_no_injected_script(
    tmp_path: Path,
) -> None:
    exploration = interlace.explore(html_targets.hostile_names, max_schedules=5, seed=1)
    assert exploration.failure is not None
    dom, stderr = render(tmp_path, exploration.failure, "hostile")
    assert [e.tag for e in dom.elements].count("img") == 0
    assert "</script><script>alert(1)</script>" in [e.text for e in dom.having("lane-head")]
    assert dom.by_id("js-errors").text == ""
    assert console_errors(stderr) == []


def test_chromium_takes_a_screenshot_of_the_report(tmp_path: Path) -> None:
    failure = failure_of("thread_lost_update")
    page = tmp_path / "report.html"
    page.write_text(
        failure.to_html(title="tests/report/html_targets.py:thread_lost_update"),
        encoding="utf-8",
    )
    shot = tmp_path / "report.png"
    # The page opens the step its address names: the deviation, with its source lines.
    deviation = next(step.step for step in failure.schedule if step.deviation)
    done = run_chromium(
        tmp_path,
        "--window-size=1200,800",
        f"--screenshot={shot}",
        f"{page.as_uri()}#step-{deviation}",
    )
    assert done.returncode == 0, done.stderr
    assert console_errors(done.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    target = os.environ.get("INTERLACE_REPORT_PNG")
    if target:
        shutil.copyfile(shot, target)


def test_the_checks_see_a_script_that_fails_in_the_page_and_in_the_console(
    tmp_path: Path,
) -> None:
    page = failure_of("async_lost_update").to_html()
    broken = page.replace('"schedules": {', '"schedules": null, "was": {', 1)
    assert broken != page
    (tmp_path / "broken.html").write_text(broken, encoding="utf-8")
    done = run_chromium(tmp_path, "--dump-dom", (tmp_path / "broken.html").as_uri())
    assert "TypeError" in Dom(done.stdout).by_id("js-errors").text
    thrown = tmp_path / "thrown.html"
    thrown.write_text("<html><body><script>null.x;</script></body></html>", encoding="utf-8")
    done = run_chromium(tmp_path, "--dump-dom", thrown.as_uri())
    assert any("Uncaught TypeError" in line for line in console_errors(done.stderr))


def no_chromium(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: p != "/usr/bin/chromium" and real_exists(p))


def test_without_chromium_the_browser_tests_fail_and_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_chromium(monkeypatch)
    monkeypatch.delenv("INTERLACE_SKIP_BROWSER", raising=False)
    with pytest.raises(pytest.fail.Exception) as caught:
        chromium()
    assert str(caught.value) == MSG_NO_CHROMIUM
    assert "apt-get install chromium" in MSG_NO_CHROMIUM


def test_without_chromium_interlace_skip_browser_skips_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_chromium(monkeypatch)
    monkeypatch.setenv("INTERLACE_SKIP_BROWSER", "1")
    with pytest.raises(pytest.skip.Exception):
        chromium()
