"""The HTML swimlane report of a :class:`~interlace.Failure`: one self-contained file.

The page holds everything it shows (inline CSS and JS, the data as JSON, the source lines the
steps point at), so it opens from disk, is attached to a CI run as is, and asks no network.
Its script builds the lanes from the JSON with ``textContent`` only: task names, reprs and
file names are user data, and none of it ever reaches the page as markup. The plain text
report is in the page too, for a reader without JS.

Everything shown is derived from what the failure already records: its steps
(``Failure.schedule`` and ``Failure.unshrunk``), the decisions in its token (to tell the
kinds of deviation apart, and the address order chosen before step 1), its deadlock
``detail`` (read into a wait-for graph) and its report (the replay lines).
"""

from __future__ import annotations

import functools
import html
import importlib.resources
import itertools
import json
import linecache
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from interlace._core.schedule import (
    ADDRESS,
    READY,
    STALL,
    THREAD,
    TIMER,
    address_order_text,
    decode_token,
)
from interlace.errors import InterlaceError

if TYPE_CHECKING:
    from interlace._core.result import Failure, StepRecord

__all__ = ("ScenarioColumns", "render_html")

MAX_STEPS = 2_000
"""Steps a schedule embeds at most: the first and last half of a longer one (a hang can
record many thousands), with the count left out shown between them."""
_CONTEXT = 2
"""Lines of source shown around a single ``file:line``."""
_RANGE_LINES = 15
"""Lines of source shown at most for a ``file:a-b`` range (a thread's run of lines)."""

_LOCATION = re.compile(r"(?P<file>[^\s:()'\"]+\.pyw?):(?P<first>\d+)(?:-(?P<last>\d+))?")

_KIND_MARKS = {READY: "latency", THREAD: "preemption", TIMER: "timer", STALL: "stall"}
_MARK_WORDS = (
    ("preempt", "preemption"),
    ("postponed", "latency"),
    ("stalled", "stall"),
    ("timer", "timer"),
    ("hashed", "address"),
)


class ScenarioColumns(Protocol):
    """A concurrent state machine's scenario, for the report's header (any object with these
    attributes: ``interlace.stateful`` passes its own, as a client of the public API).

    Attributes:
        prefix: the calls made one at a time before the branches (each as shown).
        branches: one column of calls per concurrent branch.
        suffix: the calls made one at a time after every branch finished.
    """

    @property
    def prefix(self) -> Sequence[str]: ...
    @property
    def branches(self) -> Sequence[Sequence[str]]: ...
    @property
    def suffix(self) -> Sequence[str]: ...


def render_html(
    failure: Failure, *, title: str = "", scenario: ScenarioColumns | None = None
) -> str:
    """The failure as one self-contained HTML page (see the module's docstring).

    Args:
        failure: the failure to show.
        title: what failed (a test's node id, a ``MODULE:FUNCTION``); shown as the heading.
        scenario: for a concurrent state machine, its scenario, shown above the lanes.

    Returns:
        The page, as a str (write it with ``encoding="utf-8"``).
    """
    data = report_data(failure, title=title, scenario=scenario)
    # "<" as \u003c: no value can close the script element ("</script>") or open a comment.
    payload = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")
    heading = title or f"interlace: {failure.kind}"
    parts = {
        "title": html.escape(f"interlace {failure.kind}: {heading}"),
        "heading": html.escape(heading),
        "css": _asset("html_report.css"),
        "js": _asset("html_report.js"),
        "data": payload,
        "report": html.escape(failure.report),
    }
    # One pass: a value that happens to contain "{data}" is not substituted again.
    return _SLOT.sub(lambda match: parts[match.group(1)], _PAGE)


def report_data(
    failure: Failure, *, title: str = "", scenario: ScenarioColumns | None = None
) -> dict[str, Any]:
    """The JSON the page is built from (public to the tests, which check it browser-free)."""
    marks, address = _decision_marks(failure.token)
    sources = _Sources()
    shrunk = _steps(failure.schedule, marks, sources)
    # The unshrunk run's decisions are not in the token: its marks come from its words.
    unshrunk = _steps(failure.unshrunk, {}, sources) if failure.unshrunk else None
    return {
        "title": title,
        "kind": failure.kind,
        "headline": _headline(failure),
        "label": failure.label,
        "steps": failure.steps,
        "shrunk_from": failure.shrunk_from,
        "deviations": failure.deviations,
        "address": address,
        "schedules": {"shrunk": shrunk, "unshrunk": unshrunk},
        "sources": sources.table,
        "waitfor": wait_for_graph(failure.detail) if failure.kind == "deadlock" else None,
        "detail": failure.detail,
        "replay": replay_lines(failure.report),
        "token": failure.token,
        "scenario": None
        if scenario is None
        else {
            "prefix": list(scenario.prefix),
            "branches": [list(column) for column in scenario.branches],
            "suffix": list(scenario.suffix),
        },
    }


def _decision_marks(token: str) -> tuple[dict[int, str], list[str]]:
    """Each deviating step's kind of mark, and the address orders chosen before step 1."""
    try:
        _, decisions = decode_token(token)
    except InterlaceError:
        return {}, []
    marks = {d.step: _KIND_MARKS[d.kind] for d in decisions if d.kind in _KIND_MARKS}
    address = [address_order_text(d.choice) for d in decisions if d.kind == ADDRESS]
    return marks, address


def _mark(record: StepRecord, marks: dict[int, str]) -> str:
    if not record.deviation:
        return ""
    if record.step in marks:
        return marks[record.step]
    text = record.deviation.lower()
    return next((mark for word, mark in _MARK_WORDS if word in text), "other")


def _steps(
    records: Sequence[StepRecord], marks: dict[int, str], sources: _Sources
) -> dict[str, Any]:
    shown = list(records)
    omitted = 0
    if len(shown) > MAX_STEPS:
        half = MAX_STEPS // 2
        omitted = len(shown) - MAX_STEPS
        shown = shown[:half] + shown[-half:]
    rows = []
    for record in shown:
        where = [
            sources.add(match)
            for text in (record.action, record.resumed, record.suspended)
            for match in _LOCATION.finditer(text)
        ]
        rows.append(
            {
                "n": record.step,
                "actor": record.actor,
                "action": record.action,
                "resumed": record.resumed,
                "suspended": record.suspended,
                "deviation": record.deviation,
                "mark": _mark(record, marks),
                "library": record.library is not None,
                "where": [key for key in where if key],
            }
        )
    return {"rows": rows, "omitted": omitted, "omitted_after": MAX_STEPS // 2 if omitted else 0}


class _Sources:
    """The source lines of every ``file:line`` the steps name, read with ``linecache``.

    A step names its file as the harness shows it: relative to the working directory, to
    the site-packages directory or to the standard library (``short_path``); each is tried
    in turn, then every ``sys.path`` entry. A file that cannot be read is left out (the
    step still shows its ``file:line``).
    """

    def __init__(self) -> None:
        self.table: dict[str, dict[str, Any]] = {}
        self._paths: dict[str, str | None] = {}

    def add(self, match: re.Match[str]) -> str:
        key = match.group(0)
        if key in self.table:
            return key
        path = self._resolve(match.group("file"))
        if path is None:
            return ""
        first = int(match.group("first"))
        last = int(match.group("last") or first)
        if last < first:
            return ""
        if last == first:
            start, stop = max(1, first - _CONTEXT), first + _CONTEXT
        else:
            start, stop = first, min(last, first + _RANGE_LINES - 1)
        lines = []
        for number in range(start, stop + 1):
            text = linecache.getline(path, number)
            if not text and number > first:
                break
            lines.append([number, text.rstrip("\n")])
        if not any(text for _, text in lines):
            return ""
        self.table[key] = {
            "file": match.group("file"),
            "first": first,
            "last": last,
            "lines": lines,
        }
        return key

    def _resolve(self, name: str) -> str | None:
        if name not in self._paths:
            self._paths[name] = next(
                (path for path in _candidates(name) if os.path.isfile(path)), None
            )
        return self._paths[name]


def _candidates(name: str) -> Iterator[str]:
    if os.path.isabs(name):
        yield name
        return
    yield os.path.join(os.getcwd(), name)
    stdlib = os.path.dirname(os.__file__)
    yield os.path.join(stdlib, name)
    for entry in sys.path:
        if entry:
            yield os.path.join(entry, name)


def _headline(failure: Failure) -> str:
    exception = failure.exception
    if exception is None:
        return {"deadlock": "Deadlock", "hang": "Hang"}.get(failure.kind, failure.kind)
    kind = type(exception)
    name = (
        kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    )
    message = str(exception)
    return f"{name}: {message}" if message else name


def replay_lines(report: str) -> list[str]:
    """The lines under the report's ``Replay:`` heading (what the page offers to copy)."""
    lines = report.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        if lines[index] == "Replay:":
            tail = lines[index + 1 :]
            return [line.strip() for line in _indented(tail)]
    return []


def _indented(lines: list[str]) -> Iterator[str]:
    for line in lines:
        if not line.startswith("  ") or not line.strip():
            return
        yield line


# -- the wait-for graph ------------------------------------------------------------------------

# A blocked task or thread, as both backends' deadlock reports list them: its name (a task's
# quoted), where it waits (a task's source line in parentheses), and what it waits for.
_WAITER = re.compile(
    r"^\s*(?:task '(?P<task>[^']*)'|(?P<thread>\S.*?))"
    r"(?: at (?P<at>\S+:\d+)(?: \((?P<src>.*?)\)(?= waits ))?| \(in library code\))?"
    r" (?P<waits>waits .*?)(?:; its tasks:)?$"
)
_CYCLE = re.compile(r"^\s*Wait-for cycle: (?P<names>.*)$")
_QUOTED = re.compile(r"'([^']*)'")
_HELD = re.compile(r",? held by (?P<holders>.*)$")
_JOIN = re.compile(r"^waits for thread (?P<name>.+) to finish$")


def wait_for_graph(detail: str) -> dict[str, Any] | None:
    """The deadlock report's ``detail`` as a graph: who waits (nodes, with where and on
    what) and for whom (edges, labelled with the wait); the edges of the wait-for cycle the
    report names are marked. None when no blocked task or thread can be read from it."""
    nodes: list[dict[str, str]] = []
    for line in detail.splitlines():
        match = _WAITER.match(line)
        if match is None or line.lstrip().startswith("Wait-for cycle:"):
            continue
        name = match.group("task") if match.group("task") is not None else match.group("thread")
        nodes.append(
            {
                "name": name,
                "at": match.group("at") or "",
                "src": match.group("src") or "",
                "waits": match.group("waits"),
            }
        )
    if not nodes:
        return None
    known = {node["name"] for node in nodes}
    edges: list[dict[str, Any]] = []
    for node in nodes:
        waits = node["waits"]
        held = _HELD.search(waits)
        label = waits[: held.start()] if held else waits
        if held:
            holders = held.group("holders")
            targets = _QUOTED.findall(holders) or [holders.strip()]
        elif (join := _JOIN.match(waits)) is not None:
            targets = [join.group("name")]
        else:
            targets = [name for name in _QUOTED.findall(waits) if name in known]
        for target in targets:
            if target not in known:
                known.add(target)
                nodes.append({"name": target, "at": "", "src": "", "waits": ""})
            edges.append({"from": node["name"], "to": target, "label": label, "cycle": False})
    cycle: list[str] = []
    for line in detail.splitlines():
        found = _CYCLE.match(line)
        if found is not None:
            cycle = [_unquote(part) for part in found.group("names").split(" -> ")]
    pairs = set(itertools.pairwise(cycle))
    for edge in edges:
        edge["cycle"] = (edge["from"], edge["to"]) in pairs
    return {"nodes": nodes, "edges": edges, "cycle": cycle}


@functools.cache
def _asset(name: str) -> str:
    """A file shipped beside this module (the page's CSS and JS), read once."""
    return importlib.resources.files("interlace._core").joinpath(name).read_text(encoding="utf-8")


def _unquote(part: str) -> str:
    part = part.strip()
    if part.startswith("task '") and part.endswith("'"):
        return part[len("task '") : -1]
    return part


# -- the page ------------------------------------------------------------------------------------

_SLOT = re.compile(r"\{(title|heading|css|js|data|report)\}")

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<header>
<h1 id="heading">{heading}</h1>
<p id="headline"></p>
<p id="summary"></p>
</header>
<pre id="js-errors" hidden></pre>
<section id="scenario" hidden><h2>Scenario</h2><div id="scenario-table"></div></section>
<section id="schedule">
<div id="controls"></div>
<div id="address"></div>
<div id="legend"></div>
<div id="lanes" role="table" aria-label="the failing schedule, a lane per task or thread"></div>
</section>
<section id="waitfor" hidden><h2>Wait-for graph</h2><div id="graph"></div></section>
<section id="replay"><h2>Replay</h2><div id="replay-lines"></div></section>
<aside id="panel" hidden>
<button id="panel-close" type="button">close</button><div id="panel-body"></div>
</aside>
<details id="text-report"><summary>The text report</summary><pre>{report}</pre></details>
<script type="application/json" id="interlace-data">{data}</script>
<script>{js}</script>
</body>
</html>
"""
