"""Concurrent state machines: Hypothesis draws the calls, interlace races them, and every run
is checked for linearizability.

Write a machine as you would a Hypothesis ``RuleBasedStateMachine``, with ``rule``,
``initialize``, ``precondition``, ``invariant`` and ``Bundle`` from ``hypothesis.stateful``::

    from hypothesis import strategies as st
    from hypothesis.stateful import rule
    from interlace.stateful import ConcurrentStateMachine

    class CounterMachine(ConcurrentStateMachine):
        def __init__(self) -> None:
            self.counter = Counter()

        @rule()
        async def increment(self) -> int:
            return await self.counter.increment()

    TestCounter = CounterMachine.TestCase

Each Hypothesis example is a :class:`Scenario`: a sequential prefix of rule calls, then
``branches`` sequences of calls that run concurrently (as tasks on interlace's controlled
event loop when a rule is ``async def``, else as threads under its controlled scheduler), then
a sequential suffix. interlace explores up to ``max_schedules`` interleavings of each scenario.
A run passes when some *linearization* explains it: an order of the concurrent calls that keeps
each branch's own order and the real-time order of the run (a call that returned before
another began comes first), in which the calls, replayed one at a time on a fresh machine
(or on a fresh ``model``), return what the run saw (the same values, or exceptions of the same
types) with every invariant holding. Otherwise the test fails with
:class:`NotLinearizableError`: Hypothesis shrinks the scenario, interlace shrinks the schedule,
and the report shows the scenario in columns, the observed results, the closest orders and
where each disagrees, and the schedule with its replay token.

This module needs Hypothesis (``pip install 'interlace[stateful]'``). docs/stateful.md is the
guide.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import itertools
import threading
import types
import unittest
import zlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

try:
    from hypothesis import HealthCheck, Phase, given
    from hypothesis import settings as hypothesis_settings
    from hypothesis import stateful as hypothesis_stateful
    from hypothesis import strategies as st
    from hypothesis.stateful import Bundle
except ImportError as error:  # pragma: no cover - the test extra installs Hypothesis
    raise ImportError(
        "interlace.stateful needs Hypothesis, which is not installed: "
        "pip install 'interlace[stateful]' (or pip install hypothesis)"
    ) from error

import interlace
from interlace.errors import ConfigError

__all__ = (
    "Call",
    "ConcurrentStateMachine",
    "NotLinearizableError",
    "Scenario",
    "initialize",
    "rule",
)

_F = TypeVar("_F", bound=Callable[..., Any])

# The markers hypothesis.stateful's decorators set on the functions they wrap (its own
# RuleBasedStateMachine reads the same attributes).
_RULE_MARKER = "hypothesis_stateful_rule"
_INITIALIZE_MARKER = "hypothesis_stateful_initialize_rule"
_INVARIANT_MARKER = "hypothesis_stateful_invariant"

_DEFAULT_BRANCHES = 2
_DEFAULT_MAX_BRANCH_CALLS = 3
_DEFAULT_MAX_PREFIX_CALLS = 2
_DEFAULT_MAX_SUFFIX_CALLS = 1
_DEFAULT_MAX_SCHEDULES = 50
_DEFAULT_MAX_EXAMPLES = 50
_MAX_ORDERS = 20_000
_CLOSEST = 3

_MSG_NO_LINEARIZATION = "no linearization explains the results of this run"
_MSG_NO_RULES = (
    "{machine} defines no rules: decorate its methods with hypothesis.stateful.rule() "
    "(an async def rule runs as an asyncio task, a plain one in a thread)"
)
_MSG_BAD_SETTING = (
    "{name}={value!r} ({source}) is not valid: use an int >= {low} (it bounds {what})"
)
_MSG_TOO_MANY_ORDERS = (
    "{machine}: {count} orders of the concurrent calls would have to be checked "
    "(branches={branches}, max_branch_calls={calls}; the limit is {limit}): lower one of them"
)
_MSG_MODEL_MISSING = (
    "model {model!r} of {machine} has no method {rule!r}: a model needs a method for every "
    "rule, with the rule's parameters (passed positionally, in the rule's order)"
)
_MSG_TRANSFORMED_BUNDLE = (
    "rule {rule!r} of {machine} draws argument {argument!r} from a Bundle with .map() or "
    ".filter(), which interlace.stateful does not support: draw from the Bundle itself and "
    "transform the value in the rule"
)
_MSG_REPLAY = (
    "\nReplay: run the test again (Hypothesis tries the failing example first, and the "
    "scenario's seed finds this schedule again), or replay just this schedule:\n"
    "  {machine}.replay(error.scenario, {token!r})  # error: the NotLinearizableError"
)
_MSG_SCHEDULE_FAILURE = (
    "a concurrent run of this scenario failed with a {kind} before its results could be checked"
)

_SETTINGS: dict[str, tuple[int, str]] = {
    "branches": (1, "how many sequences of calls run concurrently"),
    "max_branch_calls": (1, "the calls in each concurrent branch"),
    "max_prefix_calls": (0, "the calls before the branches"),
    "max_suffix_calls": (0, "the calls after the branches"),
    "max_schedules": (1, "the interleavings interlace explores per scenario"),
}


def rule(
    *,
    targets: Sequence[Bundle[Any]] = (),
    target: Bundle[Any] | None = None,
    **arguments: st.SearchStrategy[Any],
) -> Callable[[_F], _F]:
    """``hypothesis.stateful.rule``, typed for rules that return a result.

    The same decorator at run time; Hypothesis's own hints expect a rule without a target to
    return None, where a concurrent machine's rules return what it checks. Either works.

    Args:
        targets: bundles the rule's result is added to.
        target: one bundle the result is added to.
        arguments: a strategy (or a ``Bundle``, or ``consumes(bundle)``) per parameter.

    Returns:
        The decorator.
    """
    if target is not None:
        targets = (*targets, target)
    # Hypothesis's overloads type a rule without a target as returning None.
    hypothesis_rule: Any = hypothesis_stateful.rule
    decorator: Callable[[_F], _F] = hypothesis_rule(targets=targets, **arguments)
    return decorator


def initialize(
    *,
    targets: Sequence[Bundle[Any]] = (),
    target: Bundle[Any] | None = None,
    **arguments: st.SearchStrategy[Any],
) -> Callable[[_F], _F]:
    """``hypothesis.stateful.initialize``, typed as :func:`rule` is: a rule that runs once,
    first, before the prefix.

    Args:
        targets: bundles the result is added to.
        target: one bundle the result is added to.
        arguments: a strategy (or a ``Bundle``) per parameter.

    Returns:
        The decorator.
    """
    if target is not None:
        targets = (*targets, target)
    hypothesis_initialize: Any = hypothesis_stateful.initialize
    decorator: Callable[[_F], _F] = hypothesis_initialize(targets=targets, **arguments)
    return decorator


class NotLinearizableError(AssertionError):
    """A concurrent run of a scenario returned results that no sequential order explains.

    The message is the report: the scenario with one column per branch, what each call
    returned or raised, the closest sequential orders and where each disagrees, and the
    failing schedule with its replay token.

    Attributes:
        scenario: the failing :class:`Scenario` (None on the error raised inside a run).
        token: the failing schedule's replay token ("" on the error raised inside a run).
        failure: the failing schedule (None on the error raised inside a run).
    """

    scenario: Scenario | None = None
    token: str = ""
    failure: interlace.Failure | None = None
    _results: dict[str, str] | None = None

    def to_html(self, *, title: str = "") -> str:
        """The failing schedule as a self-contained HTML swimlane report, the scenario's
        branches as columns above the lanes, each call with what it returned.

        Args:
            title: the page's heading (the machine's name when empty).

        Raises:
            ValueError: the error was raised inside a run and has no schedule yet.
        """
        if self.failure is None or self.scenario is None:
            raise ValueError(
                "this NotLinearizableError was raised inside one run and has no failing "
                "schedule to draw; call to_html() on the error check_scenario raises"
            )
        scenario, results = self.scenario, self._results

        def cell(call: Call) -> str:
            text = f"{call.label} {call}"
            return f"{text} -> {results[call.label]}" if results and call.label in results else text

        columns = _Columns(
            prefix=tuple(cell(call) for call in scenario.prefix),
            branches=tuple(tuple(cell(call) for call in branch) for branch in scenario.branches),
            suffix=tuple(cell(call) for call in scenario.suffix),
        )
        return self.failure.to_html(title=title, scenario=columns)


@dataclasses.dataclass(frozen=True, slots=True)
class _Columns:
    """A scenario as the HTML report's header shows it: each call as text, with its result."""

    prefix: tuple[str, ...]
    branches: tuple[tuple[str, ...], ...]
    suffix: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Var:
    """A value a rule added to a bundle, named as Hypothesis names them (``v1``)."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """One rule call of a scenario.

    Attributes:
        label: where it sits: ``P1`` (prefix), ``A1``/``B2`` (branches A, B), ``S1`` (suffix).
        rule: the rule's method name.
        arguments: (parameter, value) pairs in the rule's order; a bundle value is a
            reference printed as its variable name.
        var: the variable the result is stored under when the rule targets bundles.
    """

    label: str
    rule: str
    arguments: tuple[tuple[str, Any], ...]
    var: str | None = None

    def __str__(self) -> str:
        text = f"{self.rule}({', '.join(f'{k}={v!r}' for k, v in self.arguments)})"
        return f"{self.var} = {text}" if self.var else text


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """What one Hypothesis example runs: initializers and a prefix one at a time, then the
    branches concurrently, then the suffix one at a time.

    Attributes:
        prefix: the ``initialize`` calls and the sequential calls before the branches.
        branches: one sequence of calls per concurrent branch (A, B, ...).
        suffix: the sequential calls after every branch has finished.
    """

    prefix: tuple[Call, ...]
    branches: tuple[tuple[Call, ...], ...]
    suffix: tuple[Call, ...]

    def calls(self) -> Iterator[Call]:
        """Every call: prefix, then the branches in turn, then the suffix."""
        yield from self.prefix
        for branch in self.branches:
            yield from branch
        yield from self.suffix

    def columns(self, results: dict[str, str] | None = None) -> str:
        """The scenario as text, the branches side by side, each call followed by its
        result from ``results`` (label -> text) when given."""

        def cell(call: Call) -> str:
            text = f"{call.label} {call}"
            return f"{text} -> {results[call.label]}" if results else text

        lines = [cell(call) for call in self.prefix]
        cells = [[cell(call) for call in branch] for branch in self.branches]
        widths = [max((len(c) for c in column), default=0) for column in cells]
        header = [f"branch {chr(65 + i)}" for i in range(len(cells))]
        widths = [max(w, len(h)) for w, h in zip(widths, header, strict=True)]
        lines.append(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
        lines.append("-+-".join("-" * w for w in widths))
        for row in itertools.zip_longest(*cells, fillvalue=""):
            lines.append(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        lines.extend(cell(call) for call in self.suffix)
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints a falsifying example with its pretty printer, which would spell
        # out every field of the dataclasses; the one-line form reads as the report does.
        printer.text(repr(self))

    def __repr__(self) -> str:
        def seq(calls: Sequence[Call]) -> str:
            return "[" + "; ".join(str(c) for c in calls) + "]"

        return (
            f"Scenario(prefix={seq(self.prefix)}, "
            f"branches=[{', '.join(seq(b) for b in self.branches)}], suffix={seq(self.suffix)})"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Result:
    """What one call did: returned ``value``, raised ``exception``, was ``skipped`` (an
    argument came from a rule call that raised), or is ``unmodelled`` (an initializer the
    model has no method for, which any result matches)."""

    value: Any = None
    exception: BaseException | None = None
    skipped: bool = False
    unmodelled: bool = False

    def verb(self, show: Callable[[Any], str] = repr) -> str:
        """The result as a phrase: ``returned 1``, ``raised KeyError('a')``."""
        if self.skipped or self.unmodelled or self.exception is not None:
            return self.text(show)
        return f"returned {show(self.value)}"

    def text(self, show: Callable[[Any], str] = repr) -> str:
        """The result as a column shows it, values written by ``show``."""
        if self.unmodelled:
            return "(not in the model)"
        if self.skipped:
            return "skipped (an argument's rule raised)"
        if self.exception is not None:
            return f"raised {type(self.exception).__name__}({_short(self.exception)})"
        return show(self.value)

    def __str__(self) -> str:
        return self.text()


def _short(exception: BaseException) -> str:
    return ", ".join(repr(a) for a in exception.args)


@dataclasses.dataclass(frozen=True, slots=True)
class _Rule:
    """A rule (or initializer) as the runner uses it. Invariant: ``parameters`` is the
    function's parameter order after ``self``."""

    name: str
    function: Callable[..., Any]
    arguments: dict[str, Any]
    targets: tuple[str, ...]
    preconditions: tuple[Callable[[Any], bool], ...]
    parameters: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Invariant:
    name: str
    function: Callable[[Any], Any]
    preconditions: tuple[Callable[[Any], bool], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Definition:
    """A machine class's rules, read once. Invariant: ``rules`` is not empty."""

    machine: str
    rules: tuple[_Rule, ...]
    initializers: tuple[_Rule, ...]
    invariants: tuple[_Invariant, ...]
    asynchronous: bool
    executes_to_draw: bool
    by_name: dict[str, _Rule]


def _read_rule(machine: type, name: str, rule: Any) -> _Rule:
    function = rule.function
    parameters = tuple(inspect.signature(function).parameters)[1:]
    arguments = dict(rule.arguments)
    for argument, strategy in arguments.items():
        if isinstance(strategy, Bundle) and strategy._transformations:
            raise ConfigError(
                _MSG_TRANSFORMED_BUNDLE.format(
                    rule=name, machine=machine.__qualname__, argument=argument
                )
            )
    ordered = [p for p in parameters if p in arguments]
    return _Rule(
        name=name,
        function=function,
        arguments={p: arguments[p] for p in ordered},
        targets=tuple(t if isinstance(t, str) else t.name for t in rule.targets),
        preconditions=tuple(rule.preconditions),
        parameters=tuple(ordered),
    )


def _definition(machine: type[ConcurrentStateMachine]) -> _Definition:
    cached = machine.__dict__.get("_interlace_definition")
    if isinstance(cached, _Definition):
        return cached
    rules, initializers, invariants = [], [], []
    for name in sorted(dir(machine)):
        attribute = inspect.getattr_static(machine, name, None)
        if attribute is None:
            continue
        if (rule := getattr(attribute, _RULE_MARKER, None)) is not None:
            rules.append(_read_rule(machine, name, rule))
        elif (initializer := getattr(attribute, _INITIALIZE_MARKER, None)) is not None:
            initializers.append(_read_rule(machine, name, initializer))
        elif (invariant := getattr(attribute, _INVARIANT_MARKER, None)) is not None:
            invariants.append(_Invariant(name, invariant.function, tuple(invariant.preconditions)))
    if not rules:
        raise ConfigError(_MSG_NO_RULES.format(machine=machine.__qualname__))
    every = (*rules, *initializers)
    definition = _Definition(
        machine=machine.__qualname__,
        rules=tuple(rules),
        initializers=tuple(initializers),
        invariants=tuple(invariants),
        asynchronous=any(inspect.iscoroutinefunction(r.function) for r in every),
        executes_to_draw=any(r.preconditions for r in rules),
        by_name={r.name: r for r in every},
    )
    type.__setattr__(machine, "_interlace_definition", definition)
    return definition


class _Drawer:
    """Draws a scenario. When a rule has a precondition, the calls also run, one at a time,
    on a machine of their own (prefix, branch A, branch B, ..., suffix), and a rule is drawn
    only where its preconditions hold in that order; the concurrent runs do not re-check
    them (a precondition read mid-race would be a race of its own)."""

    def __init__(self, machine: type[ConcurrentStateMachine], draw: Callable[..., Any]) -> None:
        self.machine = machine
        self.definition = _definition(machine)
        self.draw = draw
        self.names = itertools.count(1)
        self.instance: Any = None
        self.runner: asyncio.Runner | None = None
        self.env: dict[str, Any] = {}

    def _execute(self, rule: _Rule, call: Call) -> None:
        if self.instance is None:
            return
        # A rule that raises is a result like any other, here as in the runs: the draw goes
        # on (a value it would have added to a bundle is missing, and its users are skipped).
        try:
            value = _invoke(self.instance, rule, call, self.env, model=False)
            if inspect.isawaitable(value):
                assert self.runner is not None
                value = self.runner.run(_awaited(value))
        except Exception:
            return
        if call.var is not None and value is not _SKIPPED:
            self.env[call.var] = value

    def _calls(
        self, prefix: str, minimum: int, maximum: int, scope: dict[str, list[str]]
    ) -> tuple[Call, ...]:
        # Each call is one draw of its own (a span to the shrinker) that starts with a "one
        # more?" choice, as in Hypothesis's own stateful runner, rather than a length drawn
        # up front: the shrinker can then delete any call, choices and arguments together,
        # and the calls after it keep their meaning. The choice is drawn, and ignored, for a
        # call the minimum requires and once past the maximum too, so that after a deletion
        # the next choice still lands on a "one more?" (deleting from a full branch would
        # otherwise shift the next branch's choices by one).
        calls: list[Call] = []
        for index in range(1, maximum + 2):
            call = self.draw(
                self._one(f"{prefix}{index}", index <= minimum, index > maximum, scope)
            )
            if call is None:
                break
            calls.append(call)
        return tuple(calls)

    def _one(
        self, label: str, required: bool, beyond: bool, scope: dict[str, list[str]]
    ) -> st.SearchStrategy[Call | None]:
        @st.composite
        def one(draw: st.DrawFn) -> Call | None:
            more = draw(st.booleans())
            if beyond or not (more or required):
                return None
            enabled = [
                rule
                for rule in self.definition.rules
                if all(scope.get(s.name) for s in rule.arguments.values() if isinstance(s, Bundle))
                and (self.instance is None or all(p(self.instance) for p in rule.preconditions))
            ]
            if not enabled:
                return None
            return self._call(draw(st.sampled_from(enabled)), label, scope, draw)

        return one()

    def _call(
        self, rule: _Rule, label: str, scope: dict[str, list[str]], draw: Callable[..., Any]
    ) -> Call:
        arguments = []
        for parameter, strategy in rule.arguments.items():
            if isinstance(strategy, Bundle):
                names = scope[strategy.name]
                name = draw(st.sampled_from(names))
                if strategy.consume:
                    names.remove(name)
                arguments.append((parameter, _Var(name)))
            else:
                arguments.append((parameter, draw(strategy)))
        var = None
        if rule.targets:
            var = f"v{next(self.names)}"
            for target in rule.targets:
                scope.setdefault(target, []).append(var)
        call = Call(label, rule.name, tuple(arguments), var)
        self._execute(rule, call)
        return call

    def scenario(self) -> Scenario:
        machine = self.machine
        if self.definition.executes_to_draw:
            self.instance = machine()
            if self.definition.asynchronous:
                self.runner = asyncio.Runner()
        try:
            scope: dict[str, list[str]] = {}
            prefix = [
                self._call(rule, f"I{i}", scope, self.draw)
                for i, rule in enumerate(self.definition.initializers, 1)
            ]
            prefix += self._calls("P", 0, machine.max_prefix_calls, scope)
            branches = []
            after = {name: list(names) for name, names in scope.items()}
            for branch in range(machine.branches):
                own = {name: list(names) for name, names in scope.items()}
                branches.append(self._calls(chr(65 + branch), 1, machine.max_branch_calls, own))
                for name, names in own.items():
                    after.setdefault(name, [])
                    after[name].extend(n for n in names if n not in after[name])
            suffix = self._calls("S", 0, machine.max_suffix_calls, after)
        finally:
            if self.runner is not None:
                self.runner.close()
        return Scenario(tuple(prefix), tuple(b for b in branches if b), suffix)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


_MISSING = object()


def _invoke(instance: Any, rule: _Rule, call: Call, env: dict[str, Any], *, model: bool) -> Any:
    """Start ``call`` on ``instance`` (a machine, or a model when ``model``): its result, an
    awaitable of it, or ``_SKIPPED`` when an argument's rule call raised."""
    values = []
    for _, value in call.arguments:
        if isinstance(value, _Var):
            if value.name not in env:
                return _SKIPPED
            value = env[value.name]
        values.append(value)
    if model:
        return getattr(instance, rule.name)(*values)
    return rule.function(instance, **dict(zip(rule.parameters, values, strict=True)))


_SKIPPED = _Result(skipped=True)
_UNMODELLED = _Result(unmodelled=True)


class _Run:
    """Runs calls on one instance and records what each did. Invariant: ``results`` and
    ``spans`` are keyed by call label; a span is (begin, end) on the run's logical clock."""

    def __init__(self, definition: _Definition, instance: Any, *, model: bool) -> None:
        self.definition = definition
        self.instance = instance
        self.model = model
        self.env: dict[str, Any] = {}
        self.results: dict[str, _Result] = {}
        self.spans: dict[str, tuple[int, int]] = {}
        self.clock = itertools.count()
        self.broken: str | None = None

    def _start(self, call: Call) -> Any:
        rule = self.definition.by_name[call.rule]
        if self.model and not hasattr(self.instance, call.rule):
            if rule in self.definition.initializers:
                return _UNMODELLED
            raise ConfigError(
                _MSG_MODEL_MISSING.format(
                    model=type(self.instance).__qualname__,
                    machine=self.definition.machine,
                    rule=call.rule,
                )
            )
        return _invoke(self.instance, rule, call, self.env, model=self.model)

    def _finish(self, call: Call, value: Any, begin: int) -> None:
        if value is _SKIPPED or value is _UNMODELLED:
            result = value
        else:
            result = _Result(value=value)
            if call.var is not None:
                self.env[call.var] = value
        self.results[call.label] = result
        self.spans[call.label] = (begin, next(self.clock))

    def _failed(self, call: Call, exception: Exception, begin: int) -> None:
        self.results[call.label] = _Result(exception=exception)
        self.spans[call.label] = (begin, next(self.clock))

    def run_sync(self, call: Call) -> None:
        begin = next(self.clock)
        try:
            value = self._start(call)
        except ConfigError:
            raise
        except Exception as exception:
            self._failed(call, exception, begin)
        else:
            self._finish(call, value, begin)

    async def run_async(self, call: Call) -> None:
        begin = next(self.clock)
        try:
            value = self._start(call)
            if inspect.isawaitable(value):
                value = await value
        except ConfigError:
            raise
        except Exception as exception:
            self._failed(call, exception, begin)
        else:
            self._finish(call, value, begin)

    def _invariants(self) -> Iterator[_Invariant]:
        if self.model:
            return
        for invariant in self.definition.invariants:
            if all(p(self.instance) for p in invariant.preconditions):
                yield invariant

    def invariants_sync(self, after: str) -> None:
        """Check every invariant; record the first that fails (``broken``) and re-raise."""
        for invariant in self._invariants():
            try:
                invariant.function(self.instance)
            except Exception as exception:
                self.broken = f"invariant {invariant.name} raised {exception!r} after {after}"
                raise

    async def invariants_async(self, after: str) -> None:
        """As ``invariants_sync``, awaiting ``async def`` invariants."""
        for invariant in self._invariants():
            try:
                outcome = invariant.function(self.instance)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exception:
                self.broken = f"invariant {invariant.name} raised {exception!r} after {after}"
                raise


def _interleavings(branches: Sequence[Sequence[str]]) -> Iterator[tuple[str, ...]]:
    """Every merge of the branches that keeps each branch's own order."""
    heads = [0] * len(branches)
    total = sum(len(b) for b in branches)
    order: list[str] = []

    def walk() -> Iterator[tuple[str, ...]]:
        if len(order) == total:
            yield tuple(order)
            return
        for index, branch in enumerate(branches):
            if heads[index] < len(branch):
                order.append(branch[heads[index]])
                heads[index] += 1
                yield from walk()
                heads[index] -= 1
                order.pop()

    yield from walk()


def _count_orders(lengths: Sequence[int]) -> int:
    count, total = 1, 0
    for length in lengths:
        for i in range(1, length + 1):
            total += 1
            count = count * total // i
    return count


@dataclasses.dataclass(slots=True)
class _Replay:
    """One sequential order's results, run on a fresh machine or model."""

    order: tuple[str, ...]
    results: dict[str, _Result]
    broken: str | None


def _same_value(a: Any, b: Any, forward: dict[int, int], backward: dict[int, int]) -> bool:
    """Whether a value seen in the run matches one seen in a replay: equal values, and for
    objects compared by identity, the same object wherever the other has the same object
    (the replay's objects are others, so only the pattern of identities can match)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(
            _same_value(x, y, forward, backward) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_value(a[k], b[k], forward, backward) for k in a)
    if _by_identity(a):
        mapped, back = forward.get(id(a)), backward.get(id(b))
        if mapped is None and back is None:
            forward[id(a)], backward[id(b)] = id(b), id(a)
            return True
        return mapped == id(b) and back == id(a)
    try:
        return bool(a == b)
    except Exception:
        return False


_SHARED = (type(None), type(...), type(NotImplemented), enum.Enum, type, types.FunctionType)


def _by_identity(value: Any) -> bool:
    """Whether ``value`` is an object compared by identity that a run creates (a replay has
    its own): not None, an enum member, a class or a function, which every run shares."""
    eq: object = type(value).__eq__
    return eq is object.__eq__ and not isinstance(value, _SHARED)


class _Names:
    """Names for the objects compared by identity, ``<object #1>``, in the order a run's
    results show them: their addresses would say nothing, and a replay's objects are others.
    Invariant: ``names`` maps id() of an object to its name, each name used once."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def show(self, value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(self.show(v) for v in value) + "]"
        if isinstance(value, tuple):
            inner = ", ".join(self.show(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k!r}: {self.show(v)}" for k, v in value.items()) + "}"
        if _by_identity(value):
            name = self.names.get(id(value))
            if name is None:
                name = f"<{type(value).__name__} #{len(self.names) + 1}>"
                self.names[id(value)] = name
            return name
        return repr(value)


def _same_result(a: _Result, b: _Result, forward: dict[int, int], backward: dict[int, int]) -> bool:
    if a.unmodelled or b.unmodelled:
        return True
    if a.skipped or b.skipped:
        return a.skipped == b.skipped
    if a.exception is not None or b.exception is not None:
        return type(a.exception) is type(b.exception)
    return _same_value(a.value, b.value, forward, backward)


class _Checker:
    """Decides whether a run's results are linearizable, from every order's sequential
    results, computed once per scenario."""

    def __init__(self, scenario: Scenario, replays: list[_Replay]) -> None:
        self.scenario = scenario
        self.replays = replays
        self.calls = {call.label: call for call in scenario.calls()}

    def _sequence(self, replay: _Replay) -> Iterator[str]:
        yield from (c.label for c in self.scenario.prefix)
        yield from replay.order
        yield from (c.label for c in self.scenario.suffix)

    def _disagreement(
        self, results: dict[str, _Result], replay: _Replay, names: _Names
    ) -> tuple[int, str] | None:
        """None when ``replay`` explains ``results``; else how many calls agree before the
        first that does not, and what that call did in each (``names`` names the run's
        objects; a replay's object is named as the run's object it stood for so far)."""
        forward: dict[int, int] = {}
        backward: dict[int, int] = {}
        agreed = 0
        for label in self._sequence(replay):
            observed, expected = results[label], replay.results[label]
            if not _same_result(observed, expected, forward, backward):

                def show_expected(value: Any) -> str:
                    if _by_identity(value) and not isinstance(value, list | tuple | dict):
                        if id(value) in backward:
                            return names.names.get(backward[id(value)], "<an object>")
                        return f"<a {type(value).__name__} the run never returned>"
                    return repr(value)

                return agreed, (
                    f"{label} {self.calls[label]} {observed.verb(names.show)} in the run, "
                    f"{expected.verb(show_expected)} in this order"
                )
            agreed += 1
        if replay.broken is not None:
            return agreed, f"this order breaks an invariant: {replay.broken}"
        return None

    def check(self, results: dict[str, _Result], spans: dict[str, tuple[int, int]]) -> str | None:
        """None when some order explains the run; else why none does."""
        allowed, ruled_out = [], 0
        for replay in self.replays:
            if _respects(replay.order, spans):
                allowed.append(replay)
            else:
                ruled_out += 1
        names = _Names()
        for call in self.scenario.calls():
            if call.label in results:
                results[call.label].text(names.show)
        misses = []
        for replay in allowed:
            miss = self._disagreement(results, replay, names)
            if miss is None:
                return None
            misses.append((miss, replay))
        misses.sort(key=lambda m: -m[0][0])
        lines = [
            f"{_MSG_NO_LINEARIZATION}: {len(allowed)} order(s) of the concurrent calls keep "
            f"each branch's order and the run's real-time order ({ruled_out} more are ruled "
            "out because a call in them returned before another began), and none returns "
            "what the run saw. The closest:"
        ]
        for (_agreed, why), replay in misses[:_CLOSEST]:
            lines.append(f"  {' '.join(replay.order)}: {why}")
        return "\n".join(lines)


def _respects(order: Sequence[str], spans: dict[str, tuple[int, int]]) -> bool:
    """Whether no call in ``order`` comes after one that began after it had returned."""
    for later_index, later in enumerate(order):
        for earlier in order[:later_index]:
            if spans[later][1] < spans[earlier][0]:
                return False
    return True


def _explained_results(scenario: Scenario, results: dict[str, _Result]) -> dict[str, str]:
    """Each call's result as the columns show it, objects named as in the explanation."""
    names = _Names()
    return {
        call.label: results[call.label].text(names.show)
        for call in scenario.calls()
        if call.label in results
    }


class ConcurrentStateMachine:
    """A Hypothesis-style rule-based state machine whose calls interlace runs concurrently.

    Subclass it, give it an ``__init__`` without arguments that builds the object under test,
    and decorate methods with ``hypothesis.stateful``'s ``rule``, ``initialize``,
    ``precondition`` and ``invariant``; ``Bundle`` and ``consumes`` work as in Hypothesis
    (a branch draws from the values of the prefix and of its own earlier calls). ``async def``
    rules run as tasks on interlace's controlled event loop, plain rules in threads. Run it
    under pytest or unittest with ``TestX = X.TestCase``; set Hypothesis settings with
    ``TestX.settings = hypothesis.settings(...)`` and ``@hypothesis.seed(n)`` on the class.

    Settings are class attributes, also accepted as class keywords
    (``class M(ConcurrentStateMachine, branches=3, model=MyModel)``):

    Attributes:
        branches: how many sequences of calls run concurrently (default 2).
        max_branch_calls: the most calls in one branch (default 3; each branch has >= 1).
        max_prefix_calls: the most calls before the branches (default 2).
        max_suffix_calls: the most calls after the branches (default 1).
        max_schedules: interleavings explored per scenario (default 50).
        instrument: modules (``"mylib"``) or paths whose code also gets schedule points in
            the branches' threads, as ``interlace.explore``'s ``instrument``: installed code
            outside the machine's own package gets none by default (default ``()``).
        model: None to check the runs against the machine itself, replayed one call at a
            time; or a class (any zero-argument factory) of sequential objects with a
            method per rule, taking the rule's parameters positionally in its order (a
            model may lack the ``initialize`` methods). Invariants are checked on the
            concurrent runs either way.
    """

    branches: ClassVar[int] = _DEFAULT_BRANCHES
    max_branch_calls: ClassVar[int] = _DEFAULT_MAX_BRANCH_CALLS
    max_prefix_calls: ClassVar[int] = _DEFAULT_MAX_PREFIX_CALLS
    max_suffix_calls: ClassVar[int] = _DEFAULT_MAX_SUFFIX_CALLS
    max_schedules: ClassVar[int] = _DEFAULT_MAX_SCHEDULES
    instrument: ClassVar[tuple[str, ...]] = ()
    model: ClassVar[Callable[[], Any] | None] = None

    def __init_subclass__(cls, **options: Any) -> None:
        if "instrument" in options:
            cls.instrument = options.pop("instrument")
        model = options.pop("model", _MISSING)
        if model is not _MISSING:
            if model is not None and not callable(model):
                raise ConfigError(
                    f"model={model!r} (class keyword of {cls.__qualname__}) is not a class or "
                    "factory: pass a class whose instances have a method per rule, or None"
                )
            cls.model = model
        for name, value in options.items():
            if name not in _SETTINGS:
                raise ConfigError(
                    f"{name}={value!r} (class keyword of {cls.__qualname__}) is not a setting "
                    f"of ConcurrentStateMachine: use one of "
                    f"{', '.join(['instrument', 'model', *_SETTINGS])}"
                )
            setattr(cls, name, value)
        super().__init_subclass__()

    @classmethod
    def _check_settings(cls) -> None:
        for name, (low, what) in _SETTINGS.items():
            value = getattr(cls, name)
            if type(value) is not int or value < low:
                raise ConfigError(
                    _MSG_BAD_SETTING.format(
                        name=name,
                        value=value,
                        source=f"attribute of {cls.__qualname__}",
                        low=low,
                        what=what,
                    )
                )
        count = _count_orders([cls.max_branch_calls] * cls.branches)
        if count > _MAX_ORDERS:
            raise ConfigError(
                _MSG_TOO_MANY_ORDERS.format(
                    machine=cls.__qualname__,
                    count=count,
                    branches=cls.branches,
                    calls=cls.max_branch_calls,
                    limit=_MAX_ORDERS,
                )
            )

    @classmethod
    def scenarios(cls) -> st.SearchStrategy[Scenario]:
        """The Hypothesis strategy of this machine's scenarios."""
        cls._check_settings()
        _definition(cls)

        @st.composite
        def scenarios(draw: st.DrawFn) -> Scenario:
            return _Drawer(cls, draw).scenario()

        return scenarios()

    @classmethod
    def check_scenario(cls, scenario: Scenario) -> None:
        """Explore ``scenario``'s interleavings; raise on the first that fails.

        The exploration's seed comes from the machine's name, so a scenario always explores
        the same schedules (Hypothesis's replay of a stored example finds the same failure),
        and the smaller scenarios Hypothesis tries while it shrinks get the same walk.

        Args:
            scenario: a scenario of this machine (drawn from :meth:`scenarios`).

        Raises:
            NotLinearizableError: a run's results have no linearization; the message is the
                report, and the error's ``scenario`` and ``token`` replay it (:meth:`replay`).
            Exception: an invariant failed on a concurrent run (the invariant's exception),
                or a schedule deadlocked or hung (``AssertionError``); the report is a note.
        """
        definition = _definition(cls)
        target = _target(cls, definition, scenario, cls._checker(definition, scenario))
        seed = zlib.crc32(cls.__qualname__.encode())
        exploration = interlace.explore(
            target, max_schedules=cls.max_schedules, seed=seed, instrument=cls.instrument
        )
        if exploration.failure is not None:
            head = (
                f"{cls.__qualname__}: a scenario of {len(list(scenario.calls()))} calls in "
                f"{len(scenario.branches)} branches failed on schedule "
                f"{exploration.schedules} of at most {cls.max_schedules} (seed {seed})"
            )
            cls._raise(scenario, exploration.failure, head)

    @classmethod
    def replay(cls, scenario: Scenario, token: str) -> None:
        """Re-run one schedule of ``scenario``: the one in ``token``, from a failure's report.

        Args:
            scenario: the failing scenario (``NotLinearizableError.scenario``).
            token: the replay token from the same report (``NotLinearizableError.token``).

        Raises:
            NotLinearizableError: the schedule fails again (as :meth:`check_scenario`).
            ReplayDivergedError: the machine no longer offers the schedule's decisions.
        """
        definition = _definition(cls)
        target = _target(cls, definition, scenario, cls._checker(definition, scenario))
        failure = interlace.replay(target, token, instrument=cls.instrument)
        if failure is not None:
            cls._raise(scenario, failure, f"{cls.__qualname__}: the replayed schedule failed")

    @classmethod
    def _checker(cls, definition: _Definition, scenario: Scenario) -> _Checker:
        return _Checker(scenario, cls._replays(definition, scenario))

    @classmethod
    def _raise(cls, scenario: Scenario, failure: interlace.Failure, head: str) -> None:
        # The explored function is a closure over the scenario: the report's own replay
        # lines could not import it, so they give way to ones that rebuild it.
        report = failure.report
        cut = report.rfind("\nReplay:")
        if cut != -1:
            report = report[:cut]
        report += _MSG_REPLAY.format(machine=cls.__qualname__, token=failure.token)
        exception = failure.exception
        if isinstance(exception, NotLinearizableError):
            results = getattr(exception, "_interlace_results", {})
            explained = _explained_results(scenario, results)
            columns = scenario.columns(explained)
            why = getattr(exception, "_interlace_why", _MSG_NO_LINEARIZATION)
            error = NotLinearizableError(f"{head}\n\n{columns}\n\n{why}\n\n{report}")
            error.scenario = scenario
            error.token = failure.token
            error.failure = failure
            error._results = explained
            raise error
        if exception is not None:
            exception.add_note(f"{head}\n\n{scenario.columns()}\n\n{report}")
            raise exception
        raise AssertionError(
            f"{head}: {_MSG_SCHEDULE_FAILURE.format(kind=failure.kind)}\n\n"
            f"{scenario.columns()}\n\n{report}"
        )

    @classmethod
    def _replays(cls, definition: _Definition, scenario: Scenario) -> list[_Replay]:
        """Every order's sequential results, computed in one run of interlace's stock order
        (for its virtual clock: a rule's sleeps take no time)."""
        branches = [[c.label for c in branch] for branch in scenario.branches]
        calls = {c.label: c for c in scenario.calls()}
        factory = cls.model if cls.model is not None else cls
        model = cls.model is not None
        replays: list[_Replay] = []

        def sequence(order: tuple[str, ...]) -> Iterator[Call]:
            yield from scenario.prefix
            yield from (calls[label] for label in order)
            yield from scenario.suffix

        if definition.asynchronous:

            async def compute_async() -> None:
                for order in _interleavings(branches):
                    run = _Run(definition, factory(), model=model)
                    try:
                        for call in sequence(order):
                            await run.run_async(call)
                            await run.invariants_async(f"{call.label}")
                    except ConfigError:
                        raise
                    except Exception:
                        pass
                    replays.append(_Replay(order, run.results, run.broken))

            target: Callable[[], Any] = compute_async
        else:

            def compute_sync() -> None:
                for order in _interleavings(branches):
                    run = _Run(definition, factory(), model=model)
                    try:
                        for call in sequence(order):
                            run.run_sync(call)
                            run.invariants_sync(f"{call.label}")
                    except ConfigError:
                        raise
                    except Exception:
                        pass
                    replays.append(_Replay(order, run.results, run.broken))

            target = compute_sync
        exploration = interlace.explore(target, max_schedules=1, seed=0, instrument=cls.instrument)
        if exploration.failure is not None:
            exception = exploration.failure.exception
            if exception is not None:
                raise exception
            raise AssertionError(
                f"{cls.__qualname__}: the sequential runs of a scenario failed with a "
                f"{exploration.failure.kind}: a rule must not block or loop forever when it "
                f"runs alone\n\n{scenario.columns()}\n\n{exploration.failure.report}"
            )
        return replays

    class _TestCaseProperty:
        def __get__(self, instance: object, owner: type[ConcurrentStateMachine]) -> type:
            return owner._test_case()

    TestCase: ClassVar[Any] = _TestCaseProperty()
    """A ``unittest.TestCase`` class (one per machine class) that runs the machine under
    Hypothesis; assign it to a ``Test*`` name for pytest or unittest to collect."""

    @classmethod
    def _test_case(cls) -> type[unittest.TestCase]:
        cached = cls.__dict__.get("_interlace_test_case")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        machine = cls

        class MachineTestCase(unittest.TestCase):
            # No explain phase: the lines it would name as run only by failing examples are
            # interlace's own (the explorer's failure path), never the machine's.
            settings = hypothesis_settings(
                max_examples=_DEFAULT_MAX_EXAMPLES,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                phases=tuple(phase for phase in Phase if phase is not Phase.explain),
            )

            def runTest(self) -> None:
                test = _hypothesis_test(machine, self.settings)
                test()

        MachineTestCase.__name__ = cls.__name__ + ".TestCase"
        MachineTestCase.__qualname__ = cls.__qualname__ + ".TestCase"
        MachineTestCase.__module__ = cls.__module__
        type.__setattr__(cls, "_interlace_test_case", MachineTestCase)
        return MachineTestCase


def _hypothesis_test(
    machine: type[ConcurrentStateMachine], settings: hypothesis_settings
) -> Callable[[], None]:
    @settings
    @given(scenario=machine.scenarios())
    def run_machine(scenario: Scenario) -> None:
        machine.check_scenario(scenario)

    # As hypothesis.stateful does for its machines: tell examples of different machines
    # apart in the example database (the test function's source is the same for all), and
    # honour @seed and @reproduce_failure on the machine class.
    inner = run_machine.hypothesis.inner_test  # type: ignore[attr-defined]
    inner._hypothesis_internal_add_digest = f"{machine.__module__}.{machine.__qualname__}".encode()
    for attribute in (
        "_hypothesis_internal_use_seed",
        "_hypothesis_internal_use_reproduce_failure",
    ):
        setattr(run_machine, attribute, getattr(machine, attribute, None))
    return run_machine


def _target(
    machine: type[ConcurrentStateMachine],
    definition: _Definition,
    scenario: Scenario,
    checker: _Checker,
) -> Callable[[], Any]:
    """The function interlace explores: one concurrent run of ``scenario``, checked."""

    def verdict(run: _Run) -> None:
        why = checker.check(run.results, run.spans)
        if why is not None:
            # One line for the schedule's report (it shows the message at its last step and
            # again below it); the whole explanation goes to the report check_scenario builds.
            error = NotLinearizableError(_MSG_NO_LINEARIZATION)
            error._interlace_results = dict(run.results)  # type: ignore[attr-defined]
            error._interlace_why = why  # type: ignore[attr-defined]
            raise error

    if definition.asynchronous:

        async def run_async() -> None:
            run = _Run(definition, machine(), model=False)
            for call in scenario.prefix:
                await run.run_async(call)
                await run.invariants_async(call.label)

            async def branch(calls: Sequence[Call]) -> None:
                for call in calls:
                    await run.run_async(call)

            await asyncio.gather(
                *(
                    asyncio.create_task(branch(calls), name=f"branch {chr(65 + i)}")
                    for i, calls in enumerate(scenario.branches)
                )
            )
            await run.invariants_async("the branches")
            for call in scenario.suffix:
                await run.run_async(call)
                await run.invariants_async(call.label)
            verdict(run)

        return run_async

    def run_threads() -> None:
        run = _Run(definition, machine(), model=False)
        for call in scenario.prefix:
            run.run_sync(call)
            run.invariants_sync(call.label)
        errors: list[BaseException] = []

        def branch(calls: Sequence[Call]) -> None:
            try:
                for call in calls:
                    run.run_sync(call)
            except BaseException as error:  # a ConfigError or interrupt: the main thread's
                errors.append(error)

        threads = [
            threading.Thread(target=branch, args=(calls,), name=f"branch {chr(65 + i)}")
            for i, calls in enumerate(scenario.branches)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        run.invariants_sync("the branches")
        for call in scenario.suffix:
            run.run_sync(call)
            run.invariants_sync(call.label)
        verdict(run)

    return run_threads
