"""The interlace pytest plugin: ``@pytest.mark.interlace`` runs a test under
:func:`interlace.explore`.

An ``async def`` test runs on the controlled event loop; a plain test function runs with every
thread it starts under control (the threads backend). Either way the test body is the target,
called once per schedule with the fixture values pytest resolved once for the test.

Opt-in: only tests carrying the marker are touched, and loading the plugin imports nothing
beyond pytest and the standard library (the harness is imported inside the hooks, on first use).

Settings, one name per knob (STYLE.md): marker keyword ``max_schedules``, option
``--interlace-max-schedules``, environment variable ``INTERLACE_MAX_SCHEDULES``, ini key
``interlace_max_schedules`` (likewise ``strategy``, ``seed``, ``max_seconds``,
``stall_timeout``, ``instrument`` and ``unfold``). Precedence: marker > command line >
environment > ini file. Every value is validated with its source named; a bad value from the
command line, the environment or the ini file is a usage error of the whole run, a bad marker
argument an error of that test.
``instrument`` is a list of module names or paths (comma-separated in the text sources); a
relative path is made absolute from where it was written: the invocation directory (command
line, environment), the ini file's directory, or the rootdir (marker).

``--interlace-replay=TOKEN`` replays one schedule for the selected marked tests instead of
exploring; the report of every failure prints the exact ``pytest '<nodeid>'
--interlace-replay=<token>`` line (its path relative to the directory pytest ran in).

Coexistence: the ``pytest_pyfunc_call`` hook runs first for marked tests and returns True, so
pytest-asyncio (auto or strict mode) and anyio's plugin do not run them a second time; their
unmarked tests are untouched. Ctrl-C, ``pytest.exit``, ``pytest.skip`` and ``pytest.xfail``
inside an explored test (in any of its threads, for a plain test) end it as they would
anywhere; a pytest-timeout alarm (signal method) ends the exploration wherever it lands and
fails the test with the timeout (``_interrupt``). anyio's variants of a marked test on a
backend other than asyncio are skipped.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shlex
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, TracebackType
from typing import TYPE_CHECKING, Any

import pytest

# Standard library only, like the plugin: the instrument messages every source shares.
from interlace.harness import _instrument as _instrument_messages

if TYPE_CHECKING:
    from interlace._core.explorer import ReplayHints
    from interlace._core.result import Exploration, Failure

__all__ = ("pytest_addoption", "pytest_configure")

MARKER_NAME = "interlace"
RUNNER_NAME = "interlace-runner"

MARKER_HELP = (
    "interlace(max_schedules=..., strategy=..., seed=..., max_steps=..., max_time=..., "
    "max_stall=..., bound=..., depth=..., max_seconds=..., stall_timeout=..., instrument=[...], "
    "unfold=...): "
    "run this test under interlace.explore, many deterministic schedules: an async def test "
    "on a controlled event loop, a plain test with every thread it starts under control; a "
    "failure shows the shrunk schedule and the command line that replays it"
)

# Where a value came from, as the messages name it.
SOURCE_MARKER = "the @pytest.mark.interlace marker"
SOURCE_COMMAND_LINE = "the command line"
SOURCE_ENVIRONMENT = "the environment"
SOURCE_INI = "the ini file"

# User-facing messages; the tests format these same constants and match the output.
MSG_NOT_WHOLE = "{setting}={value!r} from {source} is not a whole number >= {minimum}"
MSG_NOT_SHARD = (
    "{setting}={value!r} from {source} is not a shard: expected {example}, two whole numbers "
    "with 1 <= K <= N (the K-th of N parts), e.g. {example_value}"
)
MSG_REPORT_DIR = "{setting}={value!r} from {source}: cannot write the shard report there: {error}"
MSG_WORKERS = "; {workers} worker processes"
MSG_NOT_NUMBER = "{setting}={value!r} from {source} is not a number >= {minimum}"
MSG_NOT_TIMEOUT = "{setting}={value!r} from {source} is not a number of seconds > {minimum:g}"
MSG_NOT_STRATEGY = "{setting}={value!r} from {source} is not a strategy: use one of {choices}"
MSG_NOT_FLAG = "{setting}={value!r} from {source} is not a yes/no value: write {example}"
# Shared with ``interlace explore --instrument``, which refuses the same values the same way.
MSG_NOT_MODULES = _instrument_messages.MSG_NOT_MODULES
MSG_NOT_INSTRUMENTABLE = _instrument_messages.MSG_NOT_INSTRUMENTABLE
MSG_MARKER_POSITIONAL = (
    "@pytest.mark.interlace takes keyword arguments only, got {args!r}: write e.g. "
    "@pytest.mark.interlace(max_schedules=200)"
)
MSG_MARKER_UNKNOWN = "@pytest.mark.interlace got an unknown argument {name!r}: use one of {choices}"
MSG_MARKER_RENAMED = (
    "@pytest.mark.interlace got {name}={value!r}, which was replaced by {new}: write "
    "{new}={value!r} ({why})"
)
_RENAMED_KNOBS = {
    "jitter": (
        "max_stall",
        "the timer-jitter window is now part of the loop-stall model: seconds the event loop "
        "may stall in a schedule",
    )
}
MSG_BAD_TOKEN = "--interlace-replay={token!r} from the command line is not usable: {reason}"
MSG_ANYIO_BACKEND = (
    "{nodeid} is marked @pytest.mark.interlace but runs on the anyio backend {backend!r}: "
    "interlace explores the asyncio backend only; parametrize anyio_backend with 'asyncio' "
    "for this test"
)
MSG_ANYIO_VARIANT = (
    "interlace explores anyio's asyncio backend only, not {backend!r}: this variant is not "
    "run (parametrize anyio_backend with 'asyncio' alone to leave it out)"
)
MSG_HARNESS_ERROR = "interlace could not run {nodeid}: {error}"
MSG_REPLAY_DIVERGED = (
    "interlace could not replay the schedule for {nodeid}: {error} Or the token is from a "
    "different test: replay the line printed in the report of {nodeid} itself."
)
MSG_FOUND = "interlace found {article} {kind} in {nodeid} after {schedules} (seed {seed}):"
MSG_REPLAY_STILL_FAILS = "interlace: the replayed schedule still fails with {article} {kind}:"
MSG_EXPLORED = (
    "{nodeid}: {outcome} in {schedules} (seed {seed}, strategy {strategy}{exhausted}, "
    "{elapsed:.2f} s)"
)
MSG_EXHAUSTED = ", bounded space exhausted"
MSG_SPACE = "{line}\n  exhausted: {space}"
MSG_EXPLORED_OPAQUE = "{line}; {opaque}"
MSG_REPLAY_PASSED = (
    "{nodeid}: the schedule in --interlace-replay no longer fails (the test ran to completion "
    "under it). If the token is from this test's own report on this code, the failure is "
    "fixed; a token from a different test or from older code can pass too.{cause}"
)
MSG_REPLAY_PASSED_FIXTURES = (
    " So can a failure that needed what earlier schedules left in the test's fixtures "
    "({names}): an exploration sets them up once for all its schedules."
)
MSG_TIMEOUT = (
    "interlace: the timeout stopped the exploration after {runs} of the test; it is not a "
    "failure of a schedule, so none is reported. If nothing in the test blocks for real, the "
    "exploration needs more time than the timeout: lower max_schedules or set max_seconds."
)
MSG_TIMEOUT_IN_ENGINE = (
    " The alarm came while interlace's engine ran, not the test's code: no line of the test "
    "is shown."
)
MSG_REPLAY_FAILED = "{nodeid}: the schedule in --interlace-replay still fails ({kind})"
MSG_REPLAY_UNUSED = (
    "--interlace-replay was given but no selected test is marked @pytest.mark.interlace; "
    "select the test from the report's replay line"
)
MSG_GIVEN_FOUND = (
    "interlace found {article} {kind} in an example of {nodeid} after {schedules} (seed {seed}):"
)
MSG_GIVEN_EXPLORED = (
    "{nodeid}: {examples} explored, {schedules} in all (seed {seed}, each example's "
    "exploration the same walk); {outcome}"
)
MSG_GIVEN_REPLAY = (
    "{nodeid}: the schedule in --interlace-replay ran on {examples}; {diverged} of them "
    "diverged from it (the token is another example's) and ran no further. Hypothesis tries "
    "the failing example first when its database has it."
)
SECTION = "interlace"
MSG_HTML_WRITTEN = "interlace: HTML report of this failing schedule: {path}"
MSG_HTML_FAILED = (
    "interlace: cannot write the HTML report to {path}: {error}; give --interlace-html "
    "(or INTERLACE_HTML, or the ini key interlace_html) a directory you can write"
)
MSG_HTML_NOT_DIR = (
    "interlace: {setting}={value!r} (from {source}) is not a directory: it names the "
    "directory where each failing test's HTML report goes; give a directory (it is created "
    "when missing)"
)
WORKER_OUTPUT_KEY = "interlace"
"""The key of a pytest-xdist worker's ``workeroutput`` that carries its summary to the
controller."""

# knob -> (kind, minimum, example); kinds: "whole", "number" (>= minimum), "timeout"
# (> minimum), "strategy", "modules", "flag" (True or False).
_MARKER_KNOBS: dict[str, tuple[str, float, str]] = {
    "max_schedules": ("whole", 1, "500"),
    "strategy": ("strategy", 0, "'auto'"),
    "seed": ("whole", 0, "12345"),
    "max_steps": ("whole", 1, "200000"),
    "max_time": ("number", 0.0, "3600.0"),
    "max_stall": ("number", 0.0, "0.05"),
    "bound": ("whole", 0, "2"),
    "depth": ("whole", 1, "3"),
    "max_seconds": ("number", 0.0, "60.0"),
    "stall_timeout": ("timeout", 0.0, "60.0"),
    "instrument": ("modules", 0, "['mypackage', 'src/vendored/']"),
    "unfold": ("flag", 0, "True"),
    "workers": ("whole", 1, "2"),
    "shard": ("shard", 0, "(1, 3)"),
}
# The knobs that can also come from the command line, the environment and the ini file.
_CONFIG_KNOBS = (
    "max_schedules",
    "strategy",
    "seed",
    "max_seconds",
    "max_stall",
    "stall_timeout",
    "instrument",
    "unfold",
    "workers",
    "shard",
)
_TEXT_MODULES_EXAMPLE = _instrument_messages.TEXT_MODULES_EXAMPLE
_FLAG_TRUE = ("1", "true", "yes", "on")
_FLAG_FALSE = ("0", "false", "no", "off")
_TEXT_FLAG_EXAMPLE = "1, true, yes or on; 0, false, no or off"


class _Invalid(Exception):
    """A setting failed validation; the message is the user-facing text."""


def _option(knob: str) -> str:
    return "--interlace-" + knob.replace("_", "-")


def _env(knob: str) -> str:
    return "INTERLACE_" + knob.upper()


def _ini(knob: str) -> str:
    return "interlace_" + knob


def _strategies() -> tuple[str, ...]:
    from interlace._core.strategy import STRATEGIES

    return tuple(STRATEGIES)


def _is_path(name: str) -> bool:
    return _instrument_messages.is_path(name)


def _check_modules(setting: str, value: object, source: str, text: str | None) -> list[str]:
    names: object
    if text is not None:
        names = _instrument_messages.split_instrument(text)
        example = _TEXT_MODULES_EXAMPLE
        if not names:  # an empty text is unset; a text of only commas is a mistake
            raise _Invalid(
                MSG_NOT_MODULES.format(setting=setting, value=value, source=source, example=example)
            )
    else:
        # The marker may say instrument=[] to instrument nothing more for this test.
        names = value
        example = "instrument=" + _MARKER_KNOBS["instrument"][2]
    problem = _instrument_messages.check_instrument(setting, value, source, names, example=example)
    if problem is not None:
        raise _Invalid(problem)
    assert isinstance(names, (list, tuple))  # check_instrument refuses anything else
    return [str(name) for name in names]


def _check(knob: str, setting: str, value: object, source: str) -> object:
    """Validate one value: a string from the config sources, any object from the marker."""
    kind, minimum, _ = _MARKER_KNOBS[knob]
    # Config sources give text to parse; the marker gives Python values to check as they are.
    text = value.strip() if isinstance(value, str) and source != SOURCE_MARKER else None
    if kind == "modules":
        return _check_modules(setting, value, source, text)
    if kind == "flag":
        # The command-line flag gives True itself; the environment and the ini file text.
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _FLAG_TRUE + _FLAG_FALSE:
            return text.lower() in _FLAG_TRUE
        example = (
            f"{setting}=True or {setting}=False" if source == SOURCE_MARKER else _TEXT_FLAG_EXAMPLE
        )
        raise _Invalid(
            MSG_NOT_FLAG.format(setting=setting, value=value, source=source, example=example)
        )
    if kind == "shard":
        from interlace.errors import ConfigError
        from interlace.harness.api import check_shard

        try:
            return check_shard(text if text is not None else value, source)
        except ConfigError:
            marker = source == SOURCE_MARKER
            raise _Invalid(
                MSG_NOT_SHARD.format(
                    setting=setting,
                    value=value,
                    source=source,
                    example="(K, N)" if marker else "K/N",
                    example_value="shard=(1, 3)" if marker else "1/3",
                )
            ) from None
    if kind == "strategy":
        choices = _strategies()
        name = text if text is not None else value
        if not isinstance(name, str) or name not in choices:
            raise _Invalid(
                MSG_NOT_STRATEGY.format(
                    setting=setting,
                    value=value,
                    source=source,
                    choices=", ".join(repr(c) for c in choices),
                )
            )
        return name
    if kind == "whole":
        number: object = value
        if text is not None:
            try:
                number = int(text, 10)
            except ValueError:
                number = None
        if isinstance(number, bool) or not isinstance(number, int) or number < minimum:
            raise _Invalid(
                MSG_NOT_WHOLE.format(
                    setting=setting, value=value, source=source, minimum=int(minimum)
                )
            )
        return number
    real: object = value
    if text is not None:
        try:
            real = float(text)
        except ValueError:
            real = None
    if (
        isinstance(real, bool)
        or not isinstance(real, (int, float))
        or not minimum <= real < float("inf")
        or (kind == "timeout" and real == minimum)
    ):
        template = MSG_NOT_TIMEOUT if kind == "timeout" else MSG_NOT_NUMBER
        raise _Invalid(
            template.format(setting=setting, value=value, source=source, minimum=minimum)
        )
    return float(real)


def _anchored(names: list[str], base: Path) -> tuple[str, ...]:
    """Relative paths made absolute from ``base``; module names as they are."""
    return tuple(
        os.path.join(base, name) if _is_path(name) and not os.path.isabs(name) else name
        for name in names
    )


def _config_settings(config: pytest.Config) -> tuple[dict[str, object], str]:
    """The command line > environment > ini file value of each config knob that is set.

    Returns:
        The settings, and the ``--interlace-instrument`` option a replay line must repeat
        (when ``instrument`` came from the command line or the environment), or "".
    """
    settings: dict[str, object] = {}
    replay_option = ""
    option = config.getoption(_ini("instrument"))
    invocation = Path(config.invocation_params.dir)
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
    for knob in _CONFIG_KNOBS:
        from_option = config.getoption(_ini(knob))
        if knob == "instrument" and option is not None:
            from_option = ",".join(option)  # the option may be given several times
        candidates: list[tuple[str, object, str, Path]] = [
            (_option(knob), from_option, SOURCE_COMMAND_LINE, invocation),
            (_env(knob), os.environ.get(_env(knob)), SOURCE_ENVIRONMENT, invocation),
            (_ini(knob), config.getini(_ini(knob)), SOURCE_INI, ini_dir),
        ]
        for setting, value, source, base in candidates:
            if value is None or (isinstance(value, str) and not value.strip()):
                continue
            checked = _check(knob, setting, value, source)
            if knob == "instrument":
                assert isinstance(checked, list)
                checked = _anchored(checked, base)
                if source != SOURCE_INI:
                    replay_option = shlex.quote(f"{_option(knob)}={value}")
            settings[knob] = checked
            break
    return settings, replay_option


def _marker_settings(item: pytest.Item) -> dict[str, object]:
    """Validate the closest ``interlace`` marker's arguments."""
    marker = item.get_closest_marker(MARKER_NAME)
    assert marker is not None
    if marker.args:
        raise _Invalid(MSG_MARKER_POSITIONAL.format(args=marker.args))
    settings: dict[str, object] = {}
    for name, value in marker.kwargs.items():
        if name in _RENAMED_KNOBS:
            new, why = _RENAMED_KNOBS[name]
            raise _Invalid(MSG_MARKER_RENAMED.format(name=name, value=value, new=new, why=why))
        if name not in _MARKER_KNOBS:
            raise _Invalid(MSG_MARKER_UNKNOWN.format(name=name, choices=", ".join(_MARKER_KNOBS)))
        checked = _check(name, name, value, SOURCE_MARKER)
        if name == "instrument":
            assert isinstance(checked, list)
            checked = _anchored(checked, item.config.rootpath)
        settings[name] = checked
    return settings


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ``--interlace-*`` options and the ``interlace_*`` ini keys."""
    group = parser.getgroup("interlace", "interlace: explore schedules of marked tests")
    group.addoption(
        _option("max_schedules"),
        dest=_ini("max_schedules"),
        metavar="N",
        default=None,
        help="the most schedules to run per @pytest.mark.interlace test (default 1000; the "
        "marker's max_schedules wins). Env: INTERLACE_MAX_SCHEDULES; ini: "
        "interlace_max_schedules",
    )
    group.addoption(
        _option("strategy"),
        dest=_ini("strategy"),
        metavar="NAME",
        default=None,
        help="how schedules are chosen: auto (default), random, pct, delay or exhaustive. "
        "Env: INTERLACE_STRATEGY; ini: interlace_strategy",
    )
    group.addoption(
        _option("seed"),
        dest=_ini("seed"),
        metavar="N",
        default=None,
        help="a seed (whole number >= 0) that makes every exploration repeatable (default: a "
        "fresh seed per test, shown in its report). Env: INTERLACE_SEED; ini: interlace_seed",
    )
    group.addoption(
        _option("max_seconds"),
        dest=_ini("max_seconds"),
        metavar="SECONDS",
        default=None,
        help="a wall-clock budget per @pytest.mark.interlace test: no schedule starts after "
        "it is spent, but the first (stock order) always runs (default: none; the marker's "
        "max_seconds wins). Env: INTERLACE_MAX_SECONDS; ini: interlace_max_seconds",
    )
    group.addoption(
        _option("max_stall"),
        dest=_ini("max_stall"),
        metavar="SECONDS",
        default=None,
        help="seconds the event loop may stall in one schedule of an async def test, all "
        "stalls together (a blocking call on the loop, a GC pause): the timers due by then "
        "fire in one iteration, and timers due within it of each other may fire out of order "
        "(default 0.05; 0 explores neither; the marker's max_stall wins). "
        "Env: INTERLACE_MAX_STALL; ini: interlace_max_stall",
    )
    group.addoption(
        _option("stall_timeout"),
        dest=_ini("stall_timeout"),
        metavar="SECONDS",
        default=None,
        help="real seconds one step of a @pytest.mark.interlace test may run without reaching "
        "a schedule point (a task that never awaits, a thread blocked or busy in a library or "
        "C call) before the test errors as stuck (default 20; the marker's stall_timeout wins). "
        "Env: INTERLACE_STALL_TIMEOUT; ini: interlace_stall_timeout",
    )
    group.addoption(
        _option("instrument"),
        dest=_ini("instrument"),
        metavar="NAMES",
        action="append",
        default=None,
        help="for plain (threaded) tests: modules or paths, comma-separated, whose code also "
        "gets schedule points (by default only code outside the standard library and "
        "site-packages does), e.g. httpx,src/vendored/. May be repeated. Env: "
        "INTERLACE_INSTRUMENT; ini: interlace_instrument",
    )
    group.addoption(
        _option("unfold"),
        dest=_ini("unfold"),
        action="store_true",
        default=None,
        help="show every recorded step of a failing schedule on a line of its own (by default "
        "four or more steps in a row in library code the test did not call, and four or more "
        "identical steps, read as one line each; the marker's unfold wins). Env: "
        "INTERLACE_UNFOLD; ini: interlace_unfold",
    )
    group.addoption(
        _option("workers"),
        dest=_ini("workers"),
        metavar="N",
        default=None,
        help="processes that run each marked test's schedules (default 1; the marker's "
        "workers wins); under pytest-xdist at most the cores divided among its workers "
        "(docs/scaling.md). Env: INTERLACE_WORKERS; ini: interlace_workers",
    )
    group.addoption(
        _option("shard"),
        dest=_ini("shard"),
        metavar="K/N",
        default=None,
        help="run only the K-th of N disjoint parts of each marked test's schedule space "
        "(one CI job of N; without a seed every shard uses seed 0); combine the shards' "
        "--interlace-report-dir with interlace merge. Env: INTERLACE_SHARD; ini: "
        "interlace_shard",
    )
    group.addoption(
        "--interlace-report-dir",
        dest="interlace_report_dir",
        metavar="DIR",
        default=None,
        help="write each marked test's exploration result as JSON in DIR, for interlace "
        "merge. Env: INTERLACE_REPORT_DIR; ini: interlace_report_dir",
    )
    group.addoption(
        "--interlace-replay",
        dest="interlace_replay",
        metavar="TOKEN",
        default=None,
        help="replay exactly this schedule (a token from a failure report) for the selected "
        "marked tests instead of exploring; a schedule that no longer fails passes",
    )
    group.addoption(
        "--interlace-html",
        dest="interlace_html",
        metavar="DIR",
        default=None,
        help="write each failing marked test's schedule as a self-contained HTML swimlane "
        "report into DIR (created when missing), one file named after the test's node id; the "
        "failure report gives its path. Env: INTERLACE_HTML; ini: interlace_html",
    )
    parser.addini(
        "interlace_html",
        "interlace: the directory for the HTML reports of failing marked tests",
        default="",
    )
    parser.addini(
        _ini("max_schedules"), "interlace: the most schedules per marked test", default=""
    )
    parser.addini(_ini("strategy"), "interlace: the exploration strategy", default="")
    parser.addini(_ini("seed"), "interlace: a seed that makes explorations repeatable", default="")
    parser.addini(_ini("max_seconds"), "interlace: a wall-clock budget per marked test", default="")
    parser.addini(
        _ini("max_stall"),
        "interlace: seconds the event loop may stall in one schedule of a marked test",
        default="",
    )
    parser.addini(
        _ini("stall_timeout"),
        "interlace: real seconds one step of a marked test may run without a schedule point",
        default="",
    )
    parser.addini(
        _ini("instrument"),
        "interlace: modules or paths (comma- or line-separated, paths relative to this file) "
        "whose code also gets schedule points in plain (threaded) tests",
        default="",
    )
    parser.addini(
        _ini("unfold"),
        "interlace: show every recorded step of a failing schedule (true or false)",
        default="",
    )
    parser.addini(
        _ini("workers"), "interlace: processes that run each marked test's schedules", default=""
    )
    parser.addini(
        _ini("shard"), "interlace: K/N, the part of each schedule space to run", default=""
    )
    parser.addini(
        "interlace_report_dir",
        "interlace: a directory for each marked test's result as JSON (interlace merge)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, validate the settings and install the runner."""
    config.addinivalue_line("markers", MARKER_HELP)
    try:
        settings, replay_option = _config_settings(config)
    except _Invalid as exc:
        raise pytest.UsageError(str(exc)) from None
    token = config.getoption("interlace_replay")
    if token is not None:
        from interlace._core.schedule import decode_token
        from interlace.errors import ReplayTokenError

        try:
            decode_token(token)
        except ReplayTokenError as exc:
            raise pytest.UsageError(MSG_BAD_TOKEN.format(token=token, reason=exc)) from None
    if not config.pluginmanager.has_plugin(RUNNER_NAME):
        # Registered now, after every entry-point plugin: among tryfirst pytest_pyfunc_call
        # hooks the last registered runs first, so anyio's (also tryfirst) comes after ours.
        runner = _Runner(settings, token, replay_option, html_dir=_html_dir(config))
        runner.report_dir, runner.report_dir_source = _report_dir(config)
        config.pluginmanager.register(runner, RUNNER_NAME)


def _html_dir(config: pytest.Config) -> Path | None:
    """Where the HTML reports go: ``--interlace-html`` > ``INTERLACE_HTML`` > the ini key
    ``interlace_html`` (relative to the invocation directory, or to the ini file's)."""
    invocation = Path(config.invocation_params.dir)
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
    candidates = [
        ("--interlace-html", config.getoption("interlace_html"), SOURCE_COMMAND_LINE, invocation),
        ("INTERLACE_HTML", os.environ.get("INTERLACE_HTML"), SOURCE_ENVIRONMENT, invocation),
        ("interlace_html", config.getini("interlace_html"), SOURCE_INI, ini_dir),
    ]
    for setting, value, source, base in candidates:
        if not isinstance(value, str) or not value.strip():
            continue
        path = base / value.strip()
        if path.exists() and not path.is_dir():
            raise pytest.UsageError(
                MSG_HTML_NOT_DIR.format(setting=setting, value=value, source=source)
            )
        return path
    return None


def html_file_name(nodeid: str) -> str:
    """The HTML report's file name for a test: its node id with every character that is not
    a letter, digit, ``.``, ``-`` or ``_`` made ``_`` (shortened when long), and a checksum
    of the whole node id, so two tests never share a file."""
    import zlib

    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("._") or "test"
    return f"{stem[:120]}-{zlib.crc32(nodeid.encode()):08x}.html"


def _report_dir(config: pytest.Config) -> tuple[Path | None, tuple[str, str, str]]:
    """``--interlace-report-dir`` > ``INTERLACE_REPORT_DIR`` > ``interlace_report_dir``
    (relative to the ini file), with where it came from."""
    invocation = Path(config.invocation_params.dir)
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
    candidates = (
        (
            "--interlace-report-dir",
            config.getoption("interlace_report_dir"),
            SOURCE_COMMAND_LINE,
            invocation,
        ),
        (
            "INTERLACE_REPORT_DIR",
            os.environ.get("INTERLACE_REPORT_DIR"),
            SOURCE_ENVIRONMENT,
            invocation,
        ),
        ("interlace_report_dir", config.getini("interlace_report_dir"), SOURCE_INI, ini_dir),
    )
    for setting, value, source, base in candidates:
        if isinstance(value, str) and value.strip():
            return base / value.strip(), (setting, value, source)
    return None, ("", "", "")


def effective_workers(requested: int, cores: int, xdist_workers: int) -> int:
    """How many worker processes a marked test's exploration gets: what was asked, but at
    most the cores divided among pytest-xdist's workers (each of which explores its own
    tests), and at least 1. Outside xdist, ``xdist_workers`` is 1."""
    return max(1, min(requested, cores // max(1, xdist_workers)))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def _scale_settings(
    settings: Mapping[str, object], function: Callable[..., Any], arguments: Mapping[str, object]
) -> dict[str, object]:
    """``settings`` with ``workers`` as the test gets it (``effective_workers``; 1 for a test
    that takes fixtures, whose values live in this process, or that workers cannot import),
    and the function the workers import."""
    scaled = dict(settings)
    requested = int(settings.get("workers", 1))  # type: ignore[call-overload]
    xdist = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    workers = effective_workers(requested, _cores(), xdist)
    if workers > 1:
        from interlace.harness import _workers

        name, _ = _workers.importable_name(function)
        if arguments or not name:
            workers = 1
        else:
            scaled["worker_target"] = name
    scaled["workers"] = workers
    return scaled


_settings_key = pytest.StashKey[dict[str, object]]()


class _EndedEarly(BaseException):
    """Raised by every run after the test asked pytest to end it; never seen by users."""


class _OutcomeGuard:
    """Ends an exploration at once when the test skips itself, and tells a timeout apart.

    ``pytest.skip`` reaches the engine as if the schedule had failed (its ``Skipped`` class
    reports its module as ``builtins``), and the engine would shrink and re-run the test. A
    timeout by alarm (pytest-timeout's signal method) is ended by the engine itself
    (``_interrupt``); the guard counts the runs and keeps the traceback the alarm's
    exception had when it came out of the test body, to show where the test was.

    Invariant: ``fired`` is None until the test skips; from then on every run of the target
    raises :class:`_EndedEarly` at once, so the rest of the exploration takes no time, and
    the plugin re-raises ``fired`` after the engine returns (without any note the engine
    added to it meanwhile).

    Attributes:
        test_code: the test function's code (set once the plugin knows it): a re-raised
            exception's traceback ends in the test's own code where it called into
            interlace's engine (a controlled ``Thread.join``, lock or sleep the alarm
            interrupted), not in the scheduler.
        runs: how many times the engine ran the test body.
    """

    def __init__(self) -> None:
        self.fired: BaseException | None = None
        self.test_code: CodeType | None = None
        self.runs = 0
        self._notes = 0
        self._alarm_traceback: TracebackType | None = None

    def check(self) -> None:
        self.runs += 1
        if self.fired is not None:
            raise _EndedEarly

    def observe(self, exc: BaseException) -> None:
        from interlace.harness import _interrupt

        alarm = _interrupt.alarm()
        if alarm is not None and exc is alarm.exception:
            if self._alarm_traceback is None:
                self._alarm_traceback = exc.__traceback__
            return
        if self.fired is None and isinstance(exc, pytest.skip.Exception):
            self.fired = exc
            self._notes = len(getattr(exc, "__notes__", ()))

    def reraise(self) -> None:
        __tracebackhide__ = True
        fired = self.fired
        if fired is None:
            return
        notes = getattr(fired, "__notes__", None)
        if notes is not None:
            del notes[self._notes :]
        _cut_engine_tail(fired.__traceback__, self.test_code)
        raise fired

    def reraise_timeout(self, exc: BaseException) -> None:
        """Raise ``exc`` as the timeout it is if an alarm ended the exploration with it.

        Its traceback shows where the test was: the one it came out of the test body with,
        else the stack the signal interrupted, from the test's code on; or nothing, when the
        alarm came while only interlace's engine or a library ran.
        """
        __tracebackhide__ = True
        from interlace.harness import _interrupt

        alarm = _interrupt.alarm()
        if alarm is None or exc is not alarm.exception:
            return
        where = _blocked_at(self._alarm_traceback, self.test_code, tasks=False)
        if where is None:
            where = _blocked_at(alarm.stack, self.test_code, tasks=True)
        note = MSG_TIMEOUT.format(runs=_plural(self.runs, "run"))
        exc.add_note(note + (MSG_TIMEOUT_IN_ENGINE if where is None else ""))
        raise exc.with_traceback(where)


_ENGINE_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), part) + os.sep
    for part in ("harness", "_core")
)


def _cut_engine_tail(tb: TracebackType | None, test_code: CodeType | None) -> None:
    """End ``tb`` at the first frame of interlace's engine below the test's own frame."""
    entered = False
    previous: TracebackType | None = None
    while tb is not None:
        if entered and tb.tb_frame.f_code.co_filename.startswith(_ENGINE_DIRS):
            if previous is not None:
                previous.tb_next = None
            return
        entered = entered or tb.tb_frame.f_code is test_code
        previous = tb
        tb = tb.tb_next


def _in_engine(tb: TracebackType) -> bool:
    return tb.tb_frame.f_code.co_filename.startswith(_ENGINE_DIRS)


def _blocked_at(
    tb: TracebackType | None, test_code: CodeType | None, *, tasks: bool
) -> TracebackType | None:
    """The part of a stack that shows where the test was, or None if it shows no test code.

    From the test's own frame if it is there (the test body, or the main task), else, with
    ``tasks``, from the first frame outside interlace and the libraries below the engine's
    last frame (a task the scheduler stepped); up to the engine's next frame.
    """
    from interlace.harness._introspect import is_library_file

    entries: list[TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = next((i for i, e in enumerate(entries) if e.tb_frame.f_code is test_code), None)
    if start is None and tasks:
        after = max((i + 1 for i, e in enumerate(entries) if _in_engine(e)), default=0)
        start = next(
            (
                i
                for i in range(after, len(entries))
                if not is_library_file(entries[i].tb_frame.f_code.co_filename)
            ),
            None,
        )
    if start is None:
        return None
    for i in range(start + 1, len(entries)):
        if _in_engine(entries[i]):
            entries[i - 1].tb_next = None
            break
    return entries[start]


@contextlib.contextmanager
def _engine_hidden_from_explain() -> Iterator[None]:
    """Keep interlace's own files out of Hypothesis's explain phase for a ``@given`` test.

    That phase names the lines run by every failing example and by no passing one. With each
    example explored by interlace, the explorer's failure path is such a line in every failure,
    so the explanation listed interlace's files before (or instead of) the test's own lines.
    Hypothesis has no public hook for which files its tracer follows; this wraps its
    ``should_trace_file`` for the run, and if a Hypothesis version lacks it, the explanation
    is simply Hypothesis's unchanged.
    """
    try:
        from hypothesis.internal import scrutineer
    except ImportError:  # pragma: no cover - a Hypothesis without the explain phase
        yield
        return
    original = getattr(scrutineer, "should_trace_file", None)
    if not callable(original):
        yield
        return

    def should_trace_file(filename: str) -> bool:
        return bool(original(filename)) and not _instrument_messages.is_engine_file(filename)

    scrutineer.should_trace_file = should_trace_file  # type: ignore[assignment]
    try:
        yield
    finally:
        scrutineer.should_trace_file = original


def _coroutine_function(obj: object) -> Callable[..., Coroutine[Any, Any, Any]] | None:
    """The test's ``async def`` function, looking through sync wrappers (pytest-asyncio's)."""
    seen = 0
    while obj is not None and seen < 20:
        if inspect.iscoroutinefunction(obj):
            return obj
        obj = getattr(obj, "__wrapped__", None)
        seen += 1
    return None


def _fixture_arguments(
    function: Callable[..., Any], funcargs: Mapping[str, object]
) -> dict[str, object]:
    """The arguments pytest would pass: the function's parameters without defaults."""
    arguments: dict[str, object] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.default is parameter.empty and parameter.name in funcargs:
            arguments[parameter.name] = funcargs[parameter.name]
    return arguments


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


@dataclass(eq=False)  # hashable by identity: pytest keeps plugins in sets
class _Runner:
    """Runs marked tests under the harness and keeps one summary line per test.

    Attributes:
        settings: the validated command line > environment > ini settings.
        token: the ``--interlace-replay`` token, or None to explore.
        replay_option: the ``--interlace-instrument`` option the pytest replay line repeats.
        lines: (always shown, text) per test, for the terminal summary.
        replayed: how many tests replayed the token.
        html_dir: where each failing test's HTML report goes (``--interlace-html``), or None.
    """

    settings: dict[str, object]
    token: str | None
    replay_option: str = ""
    lines: list[tuple[bool, str]] = field(default_factory=list)
    replayed: int = 0
    html_dir: Path | None = None
    report_dir: Path | None = None
    """Where each explored test's result goes as JSON (``--interlace-report-dir``)."""
    report_dir_source: tuple[str, str, str] = ("", "", "")
    """(setting, value, source) the report directory came from, for its error message."""

    def _write_report(
        self, item: pytest.Item, exploration: Exploration, settings: Mapping[str, object]
    ) -> None:
        from interlace.harness import _shards
        from interlace.harness.api import DEFAULT_MAX_SCHEDULES

        assert self.report_dir is not None
        budget = settings.get("max_schedules", DEFAULT_MAX_SCHEDULES)
        payload = _shards.report_payload(item.nodeid, exploration, int(budget))  # type: ignore[call-overload]
        _shards.write_report(self.report_dir, payload)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.get_closest_marker(MARKER_NAME) is None:
            return
        try:
            marker = _marker_settings(item)
        except _Invalid as exc:
            problem = str(exc)
        else:
            item.stash[_settings_key] = {**self.settings, **marker}
            return
        # Outside the except block: pytest would print the _Invalid as well, "During
        # handling of the above exception, another exception occurred".
        pytest.fail(problem, pytrace=False)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # anyio's plugin parametrizes anyio_backend over every installed backend: the trio
        # variant of a marked test cannot run on interlace's asyncio loop, so it is skipped
        # (with the item's location, as a skip marker gives it).
        for item in items:
            callspec = getattr(item, "callspec", None)
            if callspec is None or item.get_closest_marker(MARKER_NAME) is None:
                continue
            backend = callspec.params.get("anyio_backend")
            backend_name = backend[0] if isinstance(backend, tuple) else backend
            if (
                isinstance(backend_name, str)
                and backend_name != "asyncio"
                and _coroutine_function(getattr(item, "obj", None)) is not None
            ):
                item.add_marker(
                    pytest.mark.skip(reason=MSG_ANYIO_VARIANT.format(backend=backend_name))
                )

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        if pyfuncitem.get_closest_marker(MARKER_NAME) is None:
            return None
        __tracebackhide__ = True
        guard = _OutcomeGuard()
        try:
            self._run(pyfuncitem, guard)
        except BaseException as exc:
            # Here, not in _run: the traceback it gets starts at a frame pytest hides.
            guard.reraise_timeout(exc)
            raise
        return True

    def _hints(
        self,
        item: pytest.Function,
        function: Callable[..., Any],
        arguments: Mapping[str, object],
        instrument: tuple[str, ...],
    ) -> ReplayHints:
        from interlace._core.explorer import ReplayHints

        marker = item.get_closest_marker(MARKER_NAME)
        # The pytest line repeats --interlace-instrument only when the value came from it or
        # from the environment; the marker's (which wins anyway) and the ini file's are read
        # again by the replay.
        from_config = marker is None or "instrument" not in marker.kwargs

        module = getattr(function, "__module__", None) or item.module.__name__
        qualname = getattr(function, "__qualname__", item.name)
        plain = not arguments and "." not in qualname and "<" not in qualname
        api = cli = ""
        if plain:
            # A method or a test with fixtures has no function to name that a user could
            # pass to interlace.replay or `interlace replay`: only the pytest line is printed.
            api = f"{module}.{qualname}"
            relative = os.path.relpath(item.path, item.config.invocation_params.dir)
            cli = f"{relative}:{qualname}" if not relative.startswith("..") else ""
        return ReplayHints(
            api=api,
            cli=cli,
            pytest=_invoked_nodeid(item),
            instrument=instrument,
            pytest_options=self.replay_option if instrument and from_config else "",
            path=_pythonpath(item.config) if cli else (),
        )

    def _run(self, item: pytest.Function, guard: _OutcomeGuard) -> None:
        if getattr(item.obj, "is_hypothesis_test", False):
            self._run_given(item, guard)
            return
        nodeid = item.nodeid
        coroutine_function = _coroutine_function(item.obj)
        function: Callable[..., Any] = item.obj
        if coroutine_function is not None:
            function = coroutine_function
            backend = item.funcargs.get("anyio_backend")
            backend_name = backend[0] if isinstance(backend, tuple) else backend
            if backend_name is not None and backend_name != "asyncio":
                pytest.fail(
                    MSG_ANYIO_BACKEND.format(nodeid=nodeid, backend=backend_name), pytrace=False
                )
        # Otherwise a plain test function (pytest itself refuses generator tests).
        arguments = _fixture_arguments(function, item.funcargs)
        guard.test_code = getattr(getattr(function, "__func__", function), "__code__", None)
        scenario: Callable[[], Any]

        if coroutine_function is not None:

            async def scenario() -> None:
                __tracebackhide__ = True
                guard.check()
                try:
                    await function(**arguments)
                except BaseException as exc:
                    guard.observe(exc)
                    raise

        else:
            # A plain test: explore() runs it with its threads under control. This wrapper
            # lives in interlace's engine, which gets no schedule points; the test body does.
            def scenario() -> object:
                __tracebackhide__ = True
                guard.check()
                try:
                    return function(**arguments)
                except BaseException as exc:
                    guard.observe(exc)
                    raise

        # The report names the main task's coroutine (or the explored function) after the
        # test, not this wrapper. No functools.wraps: a __wrapped__ would make the wrapper
        # look like it takes arguments.
        scenario.__qualname__ = function.__qualname__
        scenario.__name__ = function.__name__
        scenario.__module__ = function.__module__

        from interlace.errors import InterlaceError, ReplayDivergedError
        from interlace.harness.api import (
            DEFAULT_STALL_TIMEOUT,
            explain,
            explain_opaque,
            explain_replay_pass,
            explain_uninstrumented,
            explore,
            replay,
        )

        settings = item.stash.get(_settings_key, self.settings)
        instrument: tuple[str, ...] = settings.get("instrument", ())  # type: ignore[assignment]
        stall_timeout: float = settings.get(  # type: ignore[assignment]
            "stall_timeout", DEFAULT_STALL_TIMEOUT
        )
        unfold = bool(settings.get("unfold", False))
        hints = self._hints(item, function, arguments, instrument)
        # pytest.fail is called outside the except blocks: inside one, pytest would print
        # the harness's exception as well ("During handling of the above exception ...").
        problem = ""
        if self.token is not None:
            self.replayed += 1
            try:
                failure = replay(
                    scenario,
                    self.token,
                    hints=hints,
                    instrument=instrument,
                    stall_timeout=stall_timeout,
                    unfold=unfold,
                )
            except ReplayDivergedError as exc:
                problem = MSG_REPLAY_DIVERGED.format(nodeid=nodeid, error=exc)
            except InterlaceError as exc:
                problem = MSG_HARNESS_ERROR.format(nodeid=nodeid, error=exc)
            if problem:
                pytest.fail(problem, pytrace=False)
            guard.reraise()
            if failure is None:
                cause = explain_replay_pass(self.token, fixtures=tuple(arguments))
                if cause:
                    cause = " " + cause
                elif arguments:
                    cause = MSG_REPLAY_PASSED_FIXTURES.format(names=", ".join(arguments))
                self._record(item, True, MSG_REPLAY_PASSED.format(nodeid=nodeid, cause=cause))
                return
            header = MSG_REPLAY_STILL_FAILS.format(
                article=_article(failure.kind), kind=failure.kind
            )
            line = MSG_REPLAY_FAILED.format(nodeid=nodeid, kind=failure.kind)
            self._record(item, True, line, failure)
            self._fail(failure, header, self._html(item, failure))
        progress = _terminal_progress(item.config, settings)
        try:
            scale = _scale_settings(settings, function, arguments)
            exploration = explore(
                scenario,
                hints=hints,
                progress=progress,
                keep_unshrunk=self.html_dir is not None,
                **scale,  # type: ignore[arg-type]
            )
            if self.report_dir is not None:
                self._write_report(item, exploration, settings)
        except InterlaceError as exc:
            problem = MSG_HARNESS_ERROR.format(nodeid=nodeid, error=exc)
        except OSError as exc:
            setting, value, source = self.report_dir_source
            problem = MSG_REPORT_DIR.format(setting=setting, value=value, source=source, error=exc)
        finally:
            if progress is not None:
                progress.finish()
        if problem:
            pytest.fail(problem, pytrace=False)
        guard.reraise()
        failure = exploration.failure
        line = _explored_line(nodeid, exploration)
        covered = (
            explain_opaque(exploration, test=True),
            explain_uninstrumented(exploration, test=True),
        )
        opaque = "; ".join(note for note in covered if note)
        if opaque and failure is None:
            # Shown without -v: the pass covers less than it says.
            self._record(item, True, MSG_EXPLORED_OPAQUE.format(line=line, opaque=opaque))
        else:
            self._record(item, False, line, failure)
        if failure is not None:
            header = MSG_FOUND.format(
                article=_article(failure.kind),
                kind=failure.kind,
                nodeid=nodeid,
                schedules=_plural(exploration.schedules, "schedule"),
                seed=exploration.seed,
            )
            notes = explain(
                failure,
                schedules=exploration.schedules,
                strategy=str(settings.get("strategy", "auto")),
                fixtures=tuple(arguments),
            )
            self._fail(failure, header, [*notes, *self._html(item, failure)])

    def _run_given(self, item: pytest.Function, guard: _OutcomeGuard) -> None:
        """A ``@given`` test: Hypothesis runs as usual, outside the explorer, and each example
        it tries is explored on its own (or replays ``--interlace-replay``).

        Hypothesis calls ``hypothesis.inner_test`` once per example, the hook it documents
        for running a test its own way; this replaces it for the run. A failing schedule is
        raised from the example (the user's exception with the schedule as a note, or the
        report of a deadlock or hang as an AssertionError), so Hypothesis shrinks the example
        (each smaller one explored again), stores it in its database and reports it. Every
        example explores with the same seed, so a rerun finds the same schedule. Whatever
        Hypothesis itself raises (invalid arguments, health checks, flakiness) comes out of
        the test as Hypothesis's own error.
        """
        __tracebackhide__ = True
        import zlib

        from interlace.errors import InterlaceError, ReplayDivergedError
        from interlace.harness.api import explain, explore, replay

        nodeid = item.nodeid
        given_test = item.obj
        hypothesis = given_test.hypothesis
        inner = hypothesis.inner_test
        coroutine_function = _coroutine_function(inner)
        function: Callable[..., Any] = coroutine_function or inner
        arguments = _fixture_arguments(given_test, item.funcargs)
        guard.test_code = getattr(function, "__code__", None)
        chosen: dict[str, object] = item.stash.get(_settings_key, self.settings)
        settings = dict(chosen)
        if settings.get("seed") is None:
            # A fixed seed: Hypothesis runs a failing example again (to shrink it, and once
            # more to report it) and must see the same outcome each time.
            settings["seed"] = zlib.crc32(nodeid.encode())
        instrument: tuple[str, ...] = settings.get("instrument", ())  # type: ignore[assignment]
        # As for a test with fixtures: the example's arguments are no function a user could
        # name to interlace.replay, so the report's replay line is the pytest one alone.
        hints = self._hints(item, function, {"example": None}, instrument)
        counts = {"examples": 0, "schedules": 0, "diverged": 0}

        def example(*args: Any, **kwargs: Any) -> None:
            __tracebackhide__ = True
            counts["examples"] += 1
            scenario: Callable[[], Any]
            if coroutine_function is not None:

                async def scenario() -> None:
                    guard.check()
                    try:
                        await function(*args, **kwargs)
                    except BaseException as exc:
                        guard.observe(exc)
                        raise

            else:

                def scenario() -> object:
                    guard.check()
                    try:
                        return function(*args, **kwargs)
                    except BaseException as exc:
                        guard.observe(exc)
                        raise

            scenario.__qualname__ = function.__qualname__
            scenario.__name__ = function.__name__
            scenario.__module__ = function.__module__
            problem = ""
            try:
                if self.token is not None:
                    try:
                        failure = replay(scenario, self.token, hints=hints, instrument=instrument)
                    except ReplayDivergedError:
                        counts["diverged"] += 1
                        return
                    schedules = 1
                else:
                    # Each example's arguments live in this process: no workers.
                    single = {**settings, "workers": 1}
                    exploration = explore(
                        scenario,
                        hints=hints,
                        keep_unshrunk=self.html_dir is not None,
                        **single,  # type: ignore[arg-type]
                    )
                    failure, schedules = exploration.failure, exploration.schedules
            except InterlaceError as exc:
                problem = MSG_HARNESS_ERROR.format(nodeid=nodeid, error=exc)
            if problem:
                pytest.fail(problem, pytrace=False)
            guard.reraise()
            counts["schedules"] += schedules
            if failure is None:
                return
            header = MSG_GIVEN_FOUND.format(
                article=_article(failure.kind),
                kind=failure.kind,
                nodeid=nodeid,
                schedules=_plural(schedules, "schedule"),
                seed=settings["seed"],
            )
            notes = explain(
                failure,
                schedules=schedules,
                strategy=str(settings.get("strategy", "auto")),
                fixtures=tuple(arguments),
            )
            notes.extend(self._html(item, failure))
            if failure.kind == "exception" and failure.exception is not None:
                for note in notes:
                    failure.exception.add_note(note)
                raise failure.exception
            # Not pytest.fail: Hypothesis shrinks and reports ordinary exceptions only.
            raise AssertionError("\n".join([header, failure.report, *notes]))

        # Hypothesis names the falsifying example after the function it calls.
        example.__name__ = function.__name__
        example.__qualname__ = function.__qualname__
        hypothesis.inner_test = example
        failed = False
        try:
            with _engine_hidden_from_explain():
                given_test(**arguments)
        except BaseException:
            failed = True
            raise
        finally:
            hypothesis.inner_test = inner
            if self.token is not None:
                self.replayed += 1
                line = MSG_GIVEN_REPLAY.format(
                    nodeid=nodeid,
                    examples=_plural(counts["examples"], "example"),
                    diverged=counts["diverged"],
                )
            else:
                line = MSG_GIVEN_EXPLORED.format(
                    nodeid=nodeid,
                    examples=_plural(counts["examples"], "example"),
                    schedules=_plural(counts["schedules"], "schedule"),
                    seed=settings["seed"],
                    outcome="failed" if failed else "passed",
                )
            self._record(item, False, line)

    def _record(
        self, item: pytest.Item, always: bool, line: str, failure: Failure | None = None
    ) -> None:
        """Keep the summary line; the test's report section gets it (and the schedule)."""
        self.lines.append((always, line))
        text = line
        if failure is not None and failure.kind == "exception":
            # The failure itself is the user's exception, so the numbered schedule goes here.
            text += "\n\n" + failure.report
        item.add_report_section("call", SECTION, text)

    def _html(self, item: pytest.Item, failure: Failure) -> list[str]:
        """Write the failure's HTML report when ``--interlace-html`` asks; the note that
        says where (or why it could not be written), for the failure report."""
        if self.html_dir is None:
            return []
        path = self.html_dir / html_file_name(item.nodeid)
        try:
            self.html_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(failure.to_html(title=item.nodeid), encoding="utf-8")
        except OSError as exc:
            return [MSG_HTML_FAILED.format(path=path, error=exc)]
        return [MSG_HTML_WRITTEN.format(path=path)]

    @staticmethod
    def _fail(failure: Failure, header: str, notes: list[str]) -> None:
        if failure.kind == "exception" and failure.exception is not None:
            # The user's own exception, with the engine's note (schedule and replay lines).
            __tracebackhide__ = True
            for note in notes:
                failure.exception.add_note(note)
            raise failure.exception
        # No __tracebackhide__ here: with every frame hidden pytest adds a "hidden frames" line.
        pytest.fail("\n".join([header, failure.report, *notes]), pytrace=False)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Under pytest-xdist a worker ran the tests but the controller prints the summary:
        # hand it what this worker kept, through the channel xdist documents for it.
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_OUTPUT_KEY] = {
                "lines": [[always, line] for always, line in self.lines],
                "replayed": self.replayed,
            }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist's controller: take in a finished worker's summary lines and count."""
        kept = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY)
        if not kept:
            return
        self.lines.extend((bool(always), str(line)) for always, line in kept["lines"])
        self.replayed += int(kept["replayed"])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        verbose = terminalreporter.config.get_verbosity() > 0
        shown = [line for always, line in self.lines if always or verbose]
        if self.token is not None and not self.replayed:
            shown.append(MSG_REPLAY_UNUSED)
        if shown:
            terminalreporter.section(SECTION)
            for line in shown:
                terminalreporter.line(line)


def _pythonpath(config: pytest.Config) -> tuple[str, ...]:
    """pytest's ``pythonpath`` setting relative to where pytest was run, for the
    ``interlace replay --path`` line: the test file's imports resolve as they did in pytest
    (``src`` in a src-layout project)."""
    entries: list[str] = []
    for entry in config.getini("pythonpath"):
        try:
            relative = os.path.relpath(entry, config.invocation_params.dir)
        except ValueError:  # another drive, on Windows
            relative = str(entry)
        entries.append(Path(relative).as_posix())
    return tuple(entries)


PROGRESS_DRAW = "\x1b7  {text}\x1b[K\x1b8"
"""A progress frame after what pytest wrote on the line (a file name and its dots, or the
test's id with ``-v``): the cursor is saved and restored around it (DEC's ESC 7 and ESC 8),
so pytest's own next write lands where it would have."""
PROGRESS_ERASE = "\x1b[K"


def _terminal_progress(config: pytest.Config, settings: Mapping[str, object]) -> Any:
    """A progress line on the terminal reporter's stream, or None where it would not be seen
    or would garble the output: not a terminal, ``-q``, or a pytest-xdist worker (whose
    output the controller collects)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if (
        reporter is None
        or capture is None
        # pytest 9's TerminalReporter.isatty is a callable bool, pytest 8's a bool.
        or not bool(getattr(reporter, "isatty", False))
        or not hasattr(reporter, "write_raw")
        or config.get_verbosity() < 0
        or hasattr(config, "workerinput")
    ):
        return None
    from interlace.harness._progress import ProgressLine

    def write(text: str) -> None:
        # The test's output is being captured (on file descriptor 1 by default): the frame
        # goes to the terminal the way pytest's live logging does, with capture paused.
        with capture.global_and_fixture_disabled():
            reporter.write_raw(text, flush=True)

    max_seconds = settings.get("max_seconds")
    return ProgressLine(
        "interlace",
        lambda text: write(PROGRESS_DRAW.format(text=text)),
        lambda: write(PROGRESS_ERASE),
        max_seconds=float(max_seconds) if isinstance(max_seconds, int | float) else None,
    )


def _invoked_nodeid(item: pytest.Item) -> str:
    """The test's node id with its file relative to where pytest was run, not the rootdir,
    so that the printed replay line works when pasted in the same directory."""
    _, separator, rest = item.nodeid.partition("::")
    try:
        relative = os.path.relpath(item.path, item.config.invocation_params.dir)
    except ValueError:  # another drive, on Windows
        return item.nodeid
    return Path(relative).as_posix() + separator + rest


def _explored_line(nodeid: str, exploration: Exploration) -> str:
    failure = exploration.failure
    outcome = "no failure" if failure is None else f"{_article(failure.kind)} {failure.kind} found"
    line = MSG_EXPLORED.format(
        nodeid=nodeid,
        outcome=outcome,
        schedules=_plural(exploration.schedules, "schedule"),
        seed=exploration.seed,
        strategy=exploration.strategy,
        exhausted=MSG_EXHAUSTED if exploration.exhausted else "",
        elapsed=exploration.elapsed,
    )
    if exploration.workers > 1:
        line += MSG_WORKERS.format(workers=exploration.workers)
    if exploration.space:
        line = MSG_SPACE.format(line=line, space=exploration.space)
    return line
