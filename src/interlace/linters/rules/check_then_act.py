"""Check-then-act rules: IL101 (across an ``await``) and IL102 (between threads).

Both rules share one flow analysis over a function body (:class:`CheckThenActFlow`). It walks
statements in order, keeping for each piece of shared state the *check* that currently guards
the code (an ``if``/``while`` test that reads the state, or an earlier early-exit guard) and
whether a suspension point may have run since. A write to checked state is a finding when

* IL101: a suspension point (``await``, ``async with``, ``async for``, ``yield``) lies between
  the check and the write on some path, and
* IL102: always, because a thread can be preempted anywhere,

unless one lock acquisition is held at both the check and the write (``with lock:``,
``lock.acquire()`` ... ``lock.release()``, or a ``try`` whose ``finally`` releases the lock,
however it was acquired). A write consumes the
check (later writes depend on the function's own write, not on the check), and a re-check
replaces the earlier check, which is what makes a correct double-checked lock pass.

IL101 then drops the findings no second task can cause: in a method that only one task runs,
on state that only such methods write (:mod:`._drivers`). Both rules drop the writes that
fill a memo with data, where a second task or thread that also missed the memo only repeats
work (:meth:`_Scopes.memo`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import libcst as cst

from interlace.linters._rule import LintContext, Related, Rule
from interlace.linters._sharing import ClassPatterns, enclosing_classes
from interlace.linters.rules._drivers import Drivers, drivers_of, self_member
from interlace.linters.rules._flow import (
    INIT_METHODS,
    MUTATORS,
    FactsCollector,
    FunctionFacts,
    ImportAliases,
    StateNames,
    block_body,
    children,
    dotted,
    find_suspension,
    is_lock_expr,
    mutated_state,
    render,
    shared_by_tasks,
    store_targets,
)
from interlace.linters.rules._locking import LockScope, released_by_finally

__all__ = (
    "CheckThenActFlow",
    "FlagCheckThenActAcrossAwait",
    "FlagLazyInitAcrossAwait",
    "FlagUnlockedCheckThenAct",
)


@dataclass(frozen=True, slots=True)
class _Check:
    """A check of one piece of state that guards the code being walked.

    Attributes:
        node: the expression that reads the state in the test.
        locks: the lock acquisitions held when the check ran.
        suspension: the first suspension point after the check on some path, if any.
        test: the whole ``if``/``while`` test the check is part of.
        positive: on this path the checked object exists (``if self._x:``, ``if self._x is
            not None:``) or does not (``False``); ``None`` when the test says neither.
        others: the other shared state the test reads (none in ``if self._x is None and
            enabled:``).
        outcome: the test came out true on this path (in the code it guards), or false (its
            other branch, or the code after a guard clause); ``None`` where paths on which it
            came out differently, or different checks, meet.
        reads: every sub-expression of the test that reads the same state (``k in d and
            len(d) < n`` reads ``d`` twice).
        effect: the first non-idempotent effect after the check on some path (IL102).
        pending: an idempotent write under this check (IL102), reported only if the code the
            check guards goes on to do something non-idempotent.
        reread: lock acquisitions, taken after the check, under which the state was read
            again (IL102).
        mixed: since the check, the guarded code wrote shared state other than by assigning
            a whole unchecked attribute (``self._x = ...``): it mutated a container, wrote a
            subscript, or wrote state another check reads (IL101/IL104, see
            :meth:`_Scopes.lazy`).
    """

    node: cst.CSTNode
    locks: frozenset[int]
    suspension: cst.CSTNode | None = None
    test: cst.CSTNode | None = None
    positive: bool | None = None
    others: frozenset[str] = frozenset()
    outcome: bool | None = True
    reads: tuple[cst.CSTNode, ...] = ()
    effect: cst.CSTNode | None = None
    pending: Finding | None = None
    reread: frozenset[int] = frozenset()
    mixed: bool = False


@dataclass(slots=True)
class _Guard:
    """An enclosing ``if``/``while`` test that reads shared state.

    Invariant: ``fresh`` is true while no suspension point has been walked since the test.
    """

    fresh: bool = True


_State = dict[str, _Check]


@dataclass(frozen=True, slots=True)
class Finding:
    """A dependent write the flow analysis found: the state, the write, and its check."""

    state: str
    write: cst.CSTNode
    check: _Check
    value: cst.BaseExpression | None = None


def _merge(*states: _State | None) -> _State | None:
    """Join the states of paths that meet; ``None`` is a path that ended (return, raise)."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    out = dict(live[0])
    for state in live[1:]:
        for key, check in state.items():
            known = out.get(key)
            if known is None or (known.suspension is None and check.suspension is not None):
                out[key] = check if known is None or not known.mixed else _mixed(check)
            elif check.mixed and not known.mixed:
                out[key] = _mixed(known)
            if (
                known is not None
                and known is not check
                and (known.node is not check.node or known.outcome != check.outcome)
            ):
                # What the test established differs between the paths: neither holds.
                out[key] = replace(out[key], outcome=None)
    return out


def _mixed(check: _Check) -> _Check:
    return check if check.mixed else replace(check, mixed=True)


def _suspended(state: _State, node: cst.CSTNode) -> _State:
    return {
        key: check if check.suspension is not None else replace(check, suspension=node)
        for key, check in state.items()
    }


_TERMINAL_FLAG = re.compile(
    r"(closed|exhausted|terminated|finished|done|stopped|cancelled|completed|ended)$"
)


def _is_reset(key: str, node: cst.CSTNode, value: cst.BaseExpression | None) -> bool:
    """Say whether a write resets state (``= None``, ``= False``, ``= 0``, ``.discard(x)``) or
    sets a terminal flag (``self._closed = True``).

    Both are idempotent: a second task doing the same teardown writes the same value, so the
    rule leaves these writes alone.
    """
    if isinstance(value, cst.Name):
        if value.value == "True":
            return bool(_TERMINAL_FLAG.search(key.rsplit(".", 1)[-1].lower()))
        return value.value in ("None", "False")
    if isinstance(value, cst.Integer):
        return value.value == "0"
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "discard"
    )


def _rereads(key: str, value: cst.BaseExpression | None, names: StateNames) -> bool:
    """Say whether an assigned value reads the written state again (``self._ids = [i for i in
    self._ids if ...]``): the write builds on the current value, not on the stale check."""
    if value is None:
        return False
    stack: list[cst.CSTNode] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Attribute, cst.Name)) and names.key(node) == key:
            return True
        if not isinstance(node, cst.Lambda):
            stack.extend(children(node))
    return False


def _constant(value: cst.BaseExpression | None) -> bool:
    """Say whether ``value`` is the same for every thread that evaluates it: a literal,
    ``None``/``True``/``False``, or a named constant (``DEFAULT_DIM``, ``State.IDLE``)."""
    if isinstance(value, cst.Name):
        return value.value in ("None", "True", "False") or (
            len(value.value) > 1 and value.value.isupper()
        )
    if isinstance(value, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
        return True
    if isinstance(value, cst.ConcatenatedString):
        return _constant(value.left) and _constant(value.right)
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        return _constant(value.expression)
    if isinstance(value, cst.Attribute):
        chain = dotted(value)
        if chain is None or chain.split(".", 1)[0] in ("self", "cls"):
            return False
        last = chain.rsplit(".", 1)[-1]
        return last.isupper() and len(last) > 1
    return False


def _idempotent(node: cst.CSTNode, value: cst.BaseExpression | None) -> bool:
    """Say whether a write leaves the same state however often it runs: a constant stored, or
    ``.clear()``, ``.discard(x)``, ``.pop(k, default)``. Two threads racing through such a
    write under the same check store the same thing (a benign race)."""
    if isinstance(node, cst.Call):
        func = node.func
        if not isinstance(func, cst.Attribute):
            return False
        method = func.attr.value
        return method in ("clear", "discard") or (method == "pop" and len(node.args) == 2)
    return _constant(value)


_ADDITIVE = frozenset({"append", "appendleft", "add", "extend", "extendleft", "insert", "update"})

_PURE_FUNCTIONS = frozenset(
    {
        "abs",
        "all",
        "any",
        "bool",
        "callable",
        "float",
        "frozenset",
        "getattr",
        "hasattr",
        "id",
        "int",
        "isinstance",
        "issubclass",
        "len",
        "max",
        "min",
        "print",
        "repr",
        "sorted",
        "str",
        "tuple",
        "type",
    }
)
_PURE_METHODS = frozenset(
    {
        "count",
        "endswith",
        "format",
        "get",
        "index",
        "is_set",
        "items",
        "join",
        "keys",
        "locked",
        "lower",
        "monotonic",
        "notify",
        "notify_all",
        "now",
        "perf_counter",
        "qsize",
        "set",
        "split",
        "startswith",
        "strip",
        "time",
        "upper",
        "values",
    }
)
"""Reads, formatting, clocks, and the idempotent signals (``Event.set``, ``notify_all``)."""

_LOGGER = re.compile(r"(^|_)(log|logger|logging|warnings)$", re.IGNORECASE)


def _effectful(call: cst.Call) -> bool:
    """Say whether a call may do something that running it twice would not undo: anything
    but pure builtins, reads, clocks, idempotent signals and logging. Creating an object,
    starting a thread and calling out to other code all count."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value not in _PURE_FUNCTIONS
    if isinstance(func, cst.Attribute):
        if func.attr.value in _PURE_METHODS:
            return False
        receiver = dotted(func.value)
        if receiver is not None and _LOGGER.search(receiver.rsplit(".", 1)[-1]):
            return False
    return True


def _existence(test: cst.BaseExpression, *, outcome: bool = True) -> dict[int, bool]:
    """Find the expressions a test checks for existence, with the answer on the branch where
    the test came out ``outcome``: in the code ``if self._x:`` or ``if self._x is not None:``
    guards, the object exists (``True``); under ``if not self._x:`` or ``if self._x is None:``
    it does not. ``a and b`` answers for both operands when true, ``a or b`` when false (the
    code after ``if a or b: return``).

    Returns:
        ``{id(expression): exists}`` for the expressions whose answer the outcome settles.
    """
    found: dict[int, bool] = {}
    stack: list[tuple[cst.BaseExpression, bool]] = [(test, outcome)]
    while stack:
        expr, positive = stack.pop()
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            stack.append((expr.expression, not positive))
        elif isinstance(expr, cst.BooleanOperation):
            # `a and b` holds both in the body; `not (a or b)` holds neither.
            if isinstance(expr.operator, cst.And) == positive:
                stack.extend(((expr.left, positive), (expr.right, positive)))
        elif isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            target = expr.comparisons[0]
            if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
                if isinstance(target.operator, cst.IsNot):
                    stack.append((expr.left, positive))
                elif isinstance(target.operator, cst.Is):
                    stack.append((expr.left, not positive))
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            found[id(expr)] = positive
    return found


def _negated(state: _State, test: cst.BaseExpression) -> _State:
    """The checks of ``test`` as seen on its other branch, where the test came out false."""
    answers = _existence(test, outcome=False)
    return {
        key: replace(check, positive=answers.get(id(check.node)), outcome=False)
        if check.test is test
        else check
        for key, check in state.items()
    }


def _kept(check: _Check, move: Callable[[cst.BaseExpression, set[int]], int | None]) -> bool:
    """Say whether the test that made ``check`` would still come out the same way if it ran
    again after what other tasks or threads can do to the state meanwhile.

    ``move(expr, reads)`` says how that can move ``expr``, a read of the state (``reads`` holds
    every sub-expression of the test that reads it) that is not ``not``, ``and`` or ``or``:
    ``1`` only towards true, ``-1`` only towards false, ``0`` not at all, ``None`` unknown.
    ``not`` flips a direction and ``and``/``or`` are monotone, so the outcome is kept when
    every read moves the whole test only towards the outcome it had.
    """
    test = check.test
    if not isinstance(test, cst.BaseExpression) or check.outcome is None:
        return False
    reads = {id(node) for node in check.reads}
    moves: set[int] = set()
    stack: list[tuple[cst.BaseExpression, int]] = [(test, 1)]
    while stack:
        expr, sign = stack.pop()
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            stack.append((expr.expression, -sign))
        elif isinstance(expr, cst.BooleanOperation):
            stack.extend(((expr.left, sign), (expr.right, sign)))
        elif _reads_any(expr, reads):
            direction = move(expr, reads)
            if direction is None:
                return False
            if direction:
                moves.add(direction * sign)
    return moves <= {1 if check.outcome else -1}


def _removal_move(expr: cst.BaseExpression, reads: set[int]) -> int | None:
    """How removing elements from a container moves a read of it (see :func:`_kept`):
    ``k in d``, ``d``, ``d.get(k)`` and ``len(d) > n`` can only turn false, ``k not in d``,
    ``d.get(k) is None`` and ``len(d) < n`` only true, and ``d is None`` not at all. Other
    reads (``len(d) == n``, ``d[k] > 0``) are unknown."""
    if id(expr) in reads:
        # Truthiness of the container, of `d.get(k)` or of `len(d)`: only turns false.
        return -1
    if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
        return None
    left, target = expr.left, expr.comparisons[0]
    right, operator = target.comparator, target.operator
    if id(right) in reads and isinstance(operator, (cst.In, cst.NotIn)):
        if _reads_any(left, reads) or _what_is_read(right) != "container":
            return None
        return 1 if isinstance(operator, cst.NotIn) else -1
    if id(left) in reads and not _reads_any(right, reads):
        return _comparison_move(_what_is_read(left), operator, right, mirrored=False)
    if id(right) in reads and not _reads_any(left, reads):
        return _comparison_move(_what_is_read(right), operator, left, mirrored=True)
    return None


_TASK_IDENTITY = frozenset(
    {
        "anyio.get_current_task",
        "asyncio.current_task",
        "asyncio.tasks.current_task",
        "trio.lowlevel.current_task",
    }
)
"""Calls that return the running task: inside a coroutine run by the loop, never ``None``.
anyio's returns a new ``TaskInfo`` each time, equal (``==``) to another only for the same
task, so ``owner == get_current_task()`` is an identity test too (``is`` is never true)."""
_THREAD_IDENTITY = frozenset(
    {
        "_thread.get_ident",
        "threading.current_thread",
        "threading.get_ident",
        "threading.get_native_id",
    }
)
"""Calls that return something only the running thread gets (all tasks of one event loop get
the same answer, so these say nothing about tasks)."""


def _identity_call(expr: cst.BaseExpression, calls: frozenset[str], aliases: ImportAliases) -> bool:
    return isinstance(expr, cst.Call) and not expr.args and aliases.qualify(expr.func) in calls


def _bound_only_to(
    function: cst.FunctionDef, name: str, fits: Callable[[cst.BaseExpression], bool]
) -> bool:
    """Say whether every binding of the local ``name`` in ``function`` is a plain ``name =
    value`` whose value ``fits`` (and there is one): then wherever the function reads it, it
    holds such a value. A parameter, a tuple target, a loop variable, ``global``/``nonlocal``
    (here or in a nested function, which could rebind it while this one is suspended) or any
    other binding form makes the answer no."""
    params = function.params
    every = (*params.posonly_params, *params.params, *params.kwonly_params)
    every += tuple(p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param))
    if any(p.name.value == name for p in every):
        return False
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(
            n.name.value == name for n in node.names
        ):
            return False
        stack.extend(children(node))
    found = False
    for node in _own_nodes(function.body):
        bound: cst.CSTNode | None = None
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    if len(node.targets) != 1 or not fits(node.value):
                        return False
                    found = True
                else:
                    bound = target.target
        elif isinstance(node, cst.AnnAssign):
            if isinstance(node.target, cst.Name) and node.target.value == name:
                if node.value is None or not fits(node.value):
                    return False
                found = True
        elif isinstance(node, (cst.AugAssign, cst.For, cst.NamedExpr, cst.Del)):
            bound = node.target
        elif isinstance(node, (cst.AsName, cst.MatchAs, cst.MatchStar)):
            bound = node.name
        if bound is not None and any(n.value == name for n in _names(bound)):
            return False
    return found


def _identity_move(
    mine: Callable[[cst.BaseExpression], bool],
) -> Callable[[cst.BaseExpression, set[int]], int | None]:
    """How other tasks (threads) can move a test of whether the state holds the running
    task's (thread's) own identity (see :func:`_kept`): ``state is mine`` and ``state ==
    mine`` can only turn false, ``is not``/``!=`` only true, given that every writer stores
    ``None`` or its *own* identity, never this one's (:meth:`_Scopes.task_local`)."""

    def move(expr: cst.BaseExpression, reads: set[int]) -> int | None:
        if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
            return None
        left, target = expr.left, expr.comparisons[0]
        right, operator = target.comparator, target.operator
        if id(left) in reads:
            read, other = left, right
        elif id(right) in reads:
            read, other = right, left
        else:
            return None
        if _what_is_read(read) != "container" or _reads_any(other, reads) or not mine(other):
            return None
        if isinstance(operator, (cst.Is, cst.Equal)):
            return -1
        if isinstance(operator, (cst.IsNot, cst.NotEqual)):
            return 1
        return None

    return move


def _identity_only(expr: cst.BaseExpression, reads: set[int]) -> int | None:
    """For :func:`_kept`: ``x is None`` / ``x is not None`` of the attribute itself does not
    depend on the object's contents (``0``); any other read does (unknown)."""
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if (
            isinstance(target.operator, (cst.Is, cst.IsNot))
            and id(expr.left) in reads
            and _what_is_read(expr.left) == "container"
            and isinstance(target.comparator, cst.Name)
            and target.comparator.value == "None"
        ):
            return 0
    return None


def _what_is_read(node: cst.CSTNode) -> str:
    """Which view of the container a check reads: ``size`` (``len(d)``), ``lookup``
    (``d.get(k)``), ``container`` (``d`` itself) or ``element`` (``d[k]``, anything else)."""
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value == "len":
            return "size"
        if isinstance(func, cst.Attribute) and func.attr.value == "get":
            return "lookup"
        return "element"
    return "container" if isinstance(node, (cst.Name, cst.Attribute)) else "element"


def _comparison_move(
    view: str, operator: cst.BaseCompOp, other: cst.BaseExpression, mirrored: bool
) -> int | None:
    """How removing elements moves ``<view> <operator> other`` (``other <operator> <view>``
    when ``mirrored``): ``1`` towards true, ``-1`` towards false, ``0`` not at all, ``None``
    unknown."""
    if isinstance(other, cst.Name) and other.value == "None":
        if not isinstance(operator, (cst.Is, cst.IsNot)):
            return None
        if view == "container":
            return 0
        if view == "lookup":
            return 1 if isinstance(operator, cst.Is) else -1
        return None
    if view != "size":
        return None
    below = isinstance(operator, (cst.LessThan, cst.LessThanEqual))
    above = isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual))
    if not (below or above):
        return None
    # `len(d) < n` turns true as `d` shrinks; `n < len(d)` turns false.
    return 1 if below != mirrored else -1


def _reads_any(expr: cst.CSTNode, reads: set[int]) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if id(node) in reads:
            return True
        stack.extend(children(node))
    return False


_BUILDERS = frozenset({"dict", "frozenset", "list", "set", "sorted", "tuple"})
_DISPLAYS = (
    cst.List,
    cst.Tuple,
    cst.Set,
    cst.Dict,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
)


def _fresh_data(value: cst.BaseExpression | None, local: Callable[[str], bool]) -> bool:
    """Say whether ``value`` builds a new plain container from data the function computed: a
    display or comprehension, or ``list``/``dict``/``set``/``tuple``/``frozenset``/``sorted``
    of one, that reads a local variable (``local``), with no ``await`` and no call but pure
    builtins and reads (``d.values()``, ``x.get(k)``). Nothing in it creates an object that
    owns a resource, and no task but the one that built it holds a reference. An empty or
    constant container (``[]``, ``{"started": True}``) carries no computed data: it marks
    that something was done, which is the check-then-act the rule is for."""
    if value is None:
        return False
    if not isinstance(value, _DISPLAYS) and not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value in _BUILDERS
    ):
        return False
    bound: set[str] = set()
    read: set[str] = set()
    stack: list[cst.CSTNode] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Await, cst.Yield)):
            return False
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name):
                if func.value not in _BUILDERS and func.value not in _PURE_FUNCTIONS:
                    return False
            elif not (isinstance(func, cst.Attribute) and func.attr.value in _PURE_METHODS):
                return False
        elif isinstance(node, cst.CompFor):
            stack.append(node.iter)
            if node.inner_for_in is not None:
                stack.append(node.inner_for_in)
            stack.extend(cond.test for cond in node.ifs)
            bound.update(n.value for n in _names(node.target))
            continue
        elif isinstance(node, cst.Lambda):
            stack.append(node.body)
            bound.update(n.value for n in _names(node.params))
            continue
        elif isinstance(node, cst.Name):
            read.add(node.value)
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            # Neither an attribute's name nor a keyword's is a read of a variable.
            stack.append(node.value)
            continue
        stack.extend(children(node))
    return any(local(name) for name in read - bound)


def _pure_call(call: cst.Call) -> bool:
    """Say whether a call only reads or copies: a pure builtin, a container builder, or a
    read, clock or copy method (``x.get(k)``, ``x.lower()``, ``x.copy()``)."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _PURE_FUNCTIONS or func.value in _BUILDERS
    return isinstance(func, cst.Attribute) and (
        func.attr.value in _PURE_METHODS or func.attr.value == "copy"
    )


def _computed(
    value: cst.BaseExpression, local: Callable[[str], bool], *, reads_local: bool = True
) -> bool:
    """Say whether ``value`` is computed by reads alone: no ``await``, no call but
    :func:`_pure_call` ones, and (with ``reads_local``) from the function's own data: it
    reads a local variable."""
    bound: set[str] = set()
    read: set[str] = set()
    stack: list[cst.CSTNode] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Await, cst.Yield, cst.Lambda, cst.NamedExpr)):
            return False
        if isinstance(node, cst.Call) and not _pure_call(node):
            return False
        if isinstance(node, cst.CompFor):
            bound.update(n.value for n in _names(node.target))
        elif isinstance(node, cst.Name):
            read.add(node.value)
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)  # an attribute's or a keyword's name reads nothing
            continue
        stack.extend(children(node))
    return not reads_local or any(local(name) for name in read - bound)


def _stored_names(value: cst.BaseExpression) -> Iterator[str]:
    """Yield the names whose objects ``value`` stores as they are, not a projection of them:
    the value itself, the elements of a display, either side of ``or``/``and`` and of
    ``a if c else b``, and what ``list(x)`` and the like copy. A name a comprehension binds
    holds an element of its iterable, a projection, and is not yielded."""
    stack: list[cst.BaseExpression] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            yield node.value
        elif isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            stack.extend(element.value for element in node.elements)
        elif isinstance(node, cst.Dict):
            for item in node.elements:
                if isinstance(item, cst.DictElement):
                    stack.append(item.key)
                stack.append(item.value)
        elif isinstance(node, cst.IfExp):
            stack.extend((node.body, node.orelse))
        elif isinstance(node, cst.BooleanOperation):
            stack.extend((node.left, node.right))
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value in _BUILDERS
        ):
            stack.extend(arg.value for arg in node.args)


def _bindings(function: cst.FunctionDef, name: str) -> list[cst.BaseExpression | None] | None:
    """Return the values ``function`` binds to its local ``name`` (``None`` in the list: a
    binding whose value is not one expression, such as a loop target or an unpacking), or
    ``None`` when ``name`` is a parameter, whose value the caller chose."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return None
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param) and star.name.value == name:
            return None
    found: list[cst.BaseExpression | None] = []
    for node in _own_nodes(function.body):
        if isinstance(node, cst.Assign):
            for assigned in node.targets:
                if isinstance(assigned.target, cst.Name):
                    if assigned.target.value == name:
                        found.append(node.value)
                elif any(n.value == name for n in _names(assigned.target)):
                    found.append(None)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            if isinstance(node.target, cst.Name) and node.target.value == name:
                found.append(node.value)
        elif isinstance(node, (cst.For, cst.CompFor)) and any(
            n.value == name for n in _names(node.target)
        ):
            found.append(None)
        elif isinstance(node, (cst.AsName, cst.NamedExpr)):
            bound = node.name if isinstance(node, cst.AsName) else node.target
            if any(n.value == name for n in _names(bound)):
                found.append(None)
        elif (
            isinstance(node, cst.ExceptHandler)
            and node.name is not None
            and any(n.value == name for n in _names(node.name))
        ):
            found.append(None)
    return found


def _derived_data(
    value: cst.BaseExpression | None,
    function: cst.FunctionDef,
    local: Callable[[str], bool],
    depth: int = 0,
) -> bool:
    """Say whether ``value`` is data the function derived from what it has in hand, and holds
    no object the function made or was given: it is :func:`_computed` (reads only, no
    ``await``, no call but pure ones), not a constant (a constant marks that something was
    done, which is the check-then-act the rules are for), and every local it stores as it is
    (:func:`_stored_names`) was bound only to constants or to values computed by reads
    alone in turn (a clock read counts there: ``(now, peers)`` with ``now =
    time.monotonic()``). A fetched name (``name = data.get("name")``), a count, a
    projection of a response (``result.tools``) qualify; a local bound to an ``await``, to
    any other call (``Client(...)``,
    ``await self._create_sandbox()``), or a parameter do not, since the object may own a
    resource that a duplicate would leak, or differ between the two tasks."""
    if (
        value is None
        or depth > 3
        or _constant(value)
        or not _computed(value, local, reads_local=not depth)
    ):
        return False
    for name in _stored_names(value):
        if not local(name):
            continue
        bindings = _bindings(function, name)
        if not bindings:
            return False
        for bound in bindings:
            if bound is None:
                return False
            if not _constant(bound) and not _derived_data(bound, function, local, depth + 1):
                return False
    return True


def _state_name(expr: cst.BaseExpression) -> str | None:
    """``self._x`` for ``self._x`` or ``cls._x``, ``_X`` for a module name, else ``None``."""
    name = dotted(expr)
    if name is None or name.count(".") > 1:
        return None
    if name.startswith("cls."):
        return "self." + name[4:]
    if "." in name and not name.startswith("self."):
        return None
    return name


_ELEMENT_READS = frozenset({"get", "setdefault", "pop"})
_VALUE_MUTATORS = MUTATORS | {"setdefault", "update"}


def _values_mutated(state: str, functions: Sequence[cst.FunctionDef]) -> bool:
    """Say whether any of ``functions`` changes a value held in the container ``state``
    rather than replacing it: ``state[k].append(x)``, ``state[k][j] = x``, ``state[k] += 1``,
    ``state.setdefault(k, []).append(x)``, or the same through a local or loop variable
    bound to an element (``entry = state[k]``, ``for v in state.values()``)."""
    for function in functions:
        aliases: set[str] = set()
        nodes = list(_all_nodes(function))
        for node in nodes:  # aliases first: a loop body may mutate before the next binding
            if isinstance(node, cst.Assign) and _element(node.value, state, aliases):
                for target in node.targets:
                    aliases.update(n.value for n in _names(target.target))
            elif isinstance(node, (cst.For, cst.CompFor)):
                iterated = node.iter
                if (
                    isinstance(iterated, cst.Call)
                    and isinstance(iterated.func, cst.Attribute)
                    and iterated.func.attr.value in ("values", "items")
                    and _state_name(iterated.func.value) == state
                ):
                    aliases.update(n.value for n in _names(node.target))
        for node in nodes:
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in _VALUE_MUTATORS
                and _element(node.func.value, state, aliases)
            ):
                return True
            for stored in store_targets(node):
                if isinstance(node, cst.AugAssign) and _element(stored, state, aliases):
                    return True
                if isinstance(stored, (cst.Subscript, cst.Attribute)) and _element(
                    stored.value, state, aliases
                ):
                    return True
    return False


def _element(expr: cst.BaseExpression, state: str, aliases: set[str]) -> bool:
    """Say whether ``expr`` is (part of) a value held in the container ``state``:
    ``state[k]``, ``state.get(k)``, an attribute or item of one, or a name in ``aliases``."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value in aliases
        if isinstance(expr, cst.Subscript):
            if _state_name(expr.value) == state:
                return True
            expr = expr.value
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            return expr.func.attr.value in _ELEMENT_READS and _state_name(expr.func.value) == state
        else:
            return False


def _mutated_in_place(state: str, functions: Sequence[cst.FunctionDef]) -> bool:
    """Say whether any of ``functions`` mutates the object ``state`` names in place (a
    mutating method, an item or attribute store, an augmented assignment) instead of
    rebinding it."""
    for function in functions:
        for node in _all_nodes(function):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in _VALUE_MUTATORS
                and _state_name(node.func.value) == state
            ):
                return True
            for target in store_targets(node):
                if isinstance(node, cst.AugAssign) and _state_name(target) == state:
                    return True
                while isinstance(target, (cst.Subscript, cst.Attribute)):
                    target = target.value
                    if _state_name(target) == state:
                        return True
    return False


def _sizes(test: cst.CSTNode | None, state: str) -> bool:
    """Say whether ``test`` measures the container ``state`` (``len(self._d) < n``): a store
    under it is a capacity check, which two tasks storing under different keys both pass."""
    return test is not None and any(
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "len"
        and len(node.args) == 1
        and _state_name(node.args[0].value) == state
        for node in _all_nodes(test)
    )


def _names(node: cst.CSTNode) -> Iterator[cst.Name]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        stack.extend(children(current))


def _adds_to(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _ADDITIVE
    )


def _whole_attribute(node: cst.CSTNode, value: cst.BaseExpression | None) -> bool:
    """Say whether a write assigns a value to a whole attribute of the object (``self._x =
    ...``), rather than mutating, subscripting, deleting or augmenting."""
    return (
        value is not None
        and isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value in ("self", "cls")
    )


def _always_true(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.Name):
        return test.value == "True"
    return isinstance(test, cst.Integer) and test.value not in ("0", "0x0", "0o0", "0b0")


_ITERATION_VIEWS = frozenset({"keys", "values", "items", "get", "__contains__"})


class CheckThenActFlow:
    """The flow analysis of one function body; see the module docstring.

    Args:
        names: which expressions are shared state in this function.
        threaded: report every unlocked dependent write (IL102), not only those after a
            suspension point (IL101).
        accept: which state keys may be reported (IL102 filters by the evidence it has).
        is_lock: says whether a ``with`` item or an ``acquire()`` receiver is a lock.
        quiet: ids of the ``await`` nodes that cannot suspend (``_suspend.quiet_awaits``).
    """

    def __init__(
        self,
        names: StateNames,
        *,
        threaded: bool,
        accept: Callable[[str], bool] = lambda key: True,
        is_lock: Callable[[cst.BaseExpression], bool] = is_lock_expr,
        quiet: frozenset[int] = frozenset(),
    ) -> None:
        self.names = names
        self.quiet = quiet
        self.threaded = threaded
        self.accept = accept
        self.is_lock = is_lock
        self.findings: list[Finding] = []
        self._reported: set[int] = set()
        self._held: list[int] = []
        self._manual: dict[str, int] = {}
        self._acquisitions = 0
        self._breaks: list[list[_State]] = []
        self._guards: list[_Guard] = []

    def run(self, function: cst.FunctionDef) -> list[Finding]:
        """Walk ``function``'s body and return its dependent unlocked writes."""
        self._block(block_body(function.body), {})
        return self.findings

    # -- locks -----------------------------------------------------------------------------

    def _locks(self) -> frozenset[int]:
        return frozenset(self._held) | frozenset(self._manual.values())

    def _acquire(self) -> int:
        self._acquisitions += 1
        return self._acquisitions

    def _manual_lock(self, value: cst.BaseExpression, state: _State) -> None:
        """Track ``lock.acquire()`` / ``await lock.acquire()`` and ``lock.release()``."""
        call = value.expression if isinstance(value, cst.Await) else value
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return
        receiver = call.func.value
        name = dotted(receiver)
        if name is None or not self.is_lock(receiver):
            return
        if call.func.attr.value == "acquire":
            self._manual[name] = self._acquire()
        elif call.func.attr.value == "release":
            self._manual.pop(name, None)

    # -- events ----------------------------------------------------------------------------

    def _stale(self) -> None:
        """A suspension point: no enclosing test is fresh any more."""
        for guard in self._guards:
            guard.fresh = False

    def _write(
        self,
        state: _State,
        key: str,
        node: cst.CSTNode,
        value: cst.BaseExpression | None = None,
    ) -> None:
        benign = self.threaded and _idempotent(node, value)
        if not self.threaded and state and (key in state or not _whole_attribute(node, value)):
            # Setup code assigns whole attributes; anything else makes the code the other
            # checks guard more than creating or setting up one thing.
            for other, known in list(state.items()):
                if other != key and not known.mixed:
                    state[other] = _mixed(known)
        check = state.pop(key, None)
        if check is not None:
            self._act(state, key, node, value, replace(check, pending=None), benign=benign)
        if self.threaded and not benign:
            self._effect(state, node)

    def _act(
        self,
        state: _State,
        key: str,
        node: cst.CSTNode,
        value: cst.BaseExpression | None,
        check: _Check,
        *,
        benign: bool,
    ) -> None:
        """A write to checked state: decide whether it depends on the check, and report it."""
        # IL102: an idempotent write with nothing non-idempotent since the check waits; the
        # racing threads both store the same thing unless the guarded code goes on to act.
        defer = benign and check.effect is None
        if check.suspension is None and not self.threaded:
            # A write right after its check claims the operation for this task (a flag like
            # `self._pumping = True` or `self.state = RUNNING`): every check that has not
            # seen a suspension point yet is settled by it.
            for other in [k for k, c in state.items() if c.suspension is None]:
                del state[other]
        elif check.test is not None and not defer:
            for other in [k for k, c in state.items() if c.test is check.test]:
                del state[other]
        if not self.accept(key):
            return
        if not self.threaded:
            # Only asyncio makes these idempotent: threads interleave inside the teardown too.
            if _is_reset(key, node, value) or _rereads(key, value, self.names):
                return
            if check.suspension is None:
                return
            if any(guard.fresh for guard in self._guards):
                # The write sits under a test of shared state that ran after the last
                # suspension point: the code re-validates before acting.
                return
        elif check.positive and _adds_to(node):
            # `if self._cache: self._cache.add(...)`: the check only found the object; adding
            # to it does not rely on anything a racing thread could invalidate.
            return
        if (check.locks | check.reread) & self._locks() or id(check.node) in self._reported:
            return
        if defer:
            state[key] = replace(check, pending=Finding(key, node, check))
            return
        self._report(Finding(key, node, check, value))

    def _report(self, finding: Finding) -> None:
        if id(finding.check.node) not in self._reported:
            self._reported.add(id(finding.check.node))
            self.findings.append(finding)

    def _reread(self, state: _State, node: cst.Name | cst.Attribute) -> None:
        """IL102: checked state read again under a lock taken after the check (``if
        self._inbox: with lock: batch.extend(self._inbox); self._inbox.clear()``): what the
        code does next under that lock rests on the fresh read, not on the unlocked check."""
        key = self.names.key(node)
        check = state.get(key) if key is not None else None
        if check is None or key is None:
            return
        fresh = self._locks() - check.locks
        if not fresh <= check.reread:
            state[key] = replace(check, reread=check.reread | fresh)

    def _effect(self, state: _State, node: cst.CSTNode) -> None:
        """IL102: something non-idempotent happened (a call, an append, an increment)."""
        for key, check in list(state.items()):
            if check.pending is not None:
                del state[key]
                self._report(check.pending)
            elif check.effect is None:
                state[key] = replace(check, effect=node)

    def _expr(self, node: cst.CSTNode, state: _State) -> None:
        """Apply the events of an expression in evaluation order."""
        if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            return
        if isinstance(node, cst.Await):
            self._expr(node.expression, state)
            if id(node) in self.quiet:
                return
            state.update(_suspended(state, node))
            self._stale()
            return
        if isinstance(node, cst.Yield):
            if node.value is not None:
                self._expr(node.value, state)
            state.update(_suspended(state, node))
            self._stale()
            return
        if isinstance(node, cst.NamedExpr):
            self._expr(node.value, state)
            self.names.rebind(node.target, node.value)
            return
        if isinstance(node, cst.Call):
            key = mutated_state(node, self.names)
            if key is not None:
                # The receiver is written, not read: only the arguments are evaluated.
                for arg in node.args:
                    self._expr(arg, state)
                self._write(state, key, node)
                return
        for child in children(node):
            self._expr(child, state)
        if isinstance(node, cst.Call):
            if self.threaded and _effectful(node):
                self._effect(state, node)
        elif isinstance(node, (cst.Name, cst.Attribute)):
            if self.threaded and (self._held or self._manual):
                self._reread(state, node)
        elif isinstance(node, cst.CompFor) and node.asynchronous:
            state.update(_suspended(state, node))
            self._stale()

    def _check_keys(self, test: cst.BaseExpression) -> list[tuple[str, cst.CSTNode]]:
        """Return the state a test reads, each with the sub-expression that reads it."""
        found: list[tuple[str, cst.CSTNode]] = []
        stack: list[cst.BaseExpression] = [test]
        while stack:
            expr = stack.pop()
            if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
                key = self.names.key(expr)
                if key is not None:
                    found.append((key, expr))
                    continue
            if isinstance(expr, cst.UnaryOperation):
                stack.append(expr.expression)
            elif isinstance(expr, cst.BooleanOperation):
                stack.extend((expr.right, expr.left))
            elif isinstance(expr, cst.Comparison):
                stack.extend(t.comparator for t in reversed(expr.comparisons))
                stack.append(expr.left)
            elif isinstance(expr, cst.NamedExpr):
                stack.append(expr.value)
            elif isinstance(expr, cst.Call):
                func = expr.func
                if isinstance(func, cst.Attribute) and func.attr.value in _ITERATION_VIEWS:
                    stack.append(func.value)
                elif (
                    isinstance(func, cst.Name)
                    and func.value in ("isinstance", "bool", "any", "all")
                    and expr.args
                ):
                    stack.append(expr.args[0].value)
        return found

    # -- statements ------------------------------------------------------------------------

    def _block(
        self, stmts: Sequence[cst.BaseStatement | cst.BaseSmallStatement], state: _State | None
    ) -> _State | None:
        for stmt in stmts:
            if state is None:
                return None
            if isinstance(stmt, cst.BaseSmallStatement):
                state = self._small(stmt, state)
            else:
                state = self._stmt(stmt, state)
        return state

    def _small(self, stmt: cst.BaseSmallStatement, state: _State) -> _State | None:
        names = self.names
        if isinstance(stmt, cst.Expr):
            self._expr(stmt.value, state)
            self._manual_lock(stmt.value, state)
        elif isinstance(stmt, cst.Assign):
            self._expr(stmt.value, state)
            for target in stmt.targets:
                for key, node in names.write_keys(target.target):
                    self._write(state, key, node, stmt.value)
                names.rebind(target.target, stmt.value if len(stmt.targets) == 1 else None)
        elif isinstance(stmt, cst.AugAssign):
            self._expr(stmt.value, state)
            for key, node in names.write_keys(stmt.target):
                self._write(state, key, node)
        elif isinstance(stmt, cst.AnnAssign):
            if stmt.value is not None:
                self._expr(stmt.value, state)
                for key, node in names.write_keys(stmt.target):
                    self._write(state, key, node, stmt.value)
                names.rebind(stmt.target, stmt.value)
        elif isinstance(stmt, cst.Del):
            for key, node in names.write_keys(stmt.target):
                self._write(state, key, node)
        elif isinstance(stmt, cst.Return):
            if stmt.value is not None:
                self._expr(stmt.value, state)
            return None
        elif isinstance(stmt, cst.Raise):
            if stmt.exc is not None:
                self._expr(stmt.exc, state)
            return None
        elif isinstance(stmt, cst.Break):
            if self._breaks:
                self._breaks[-1].append(dict(state))
            return None
        elif isinstance(stmt, cst.Continue):
            return None
        elif isinstance(stmt, cst.Assert):
            self._expr(stmt.test, state)
        return state

    def _stmt(self, stmt: cst.BaseStatement, state: _State) -> _State | None:
        if isinstance(stmt, cst.SimpleStatementLine):
            return self._block(stmt.body, state)
        if isinstance(stmt, cst.If):
            return self._if(stmt, state)
        if isinstance(stmt, cst.While):
            return self._while(stmt, state)
        if isinstance(stmt, cst.For):
            return self._for(stmt, state)
        if isinstance(stmt, cst.With):
            return self._with(stmt, state)
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            return self._try(stmt, state)
        if isinstance(stmt, cst.Match):
            self._expr(stmt.subject, state)
            cases = [self._block(block_body(case.body), dict(state)) for case in stmt.cases]
            return _merge(state, *cases)
        return state

    def _guarded(self, test: cst.BaseExpression, state: _State) -> tuple[_State, list[str]]:
        """Evaluate ``test`` and return the state inside the code it guards."""
        self._expr(test, state)
        keys = self._check_keys(test)
        inner = dict(state)
        locks = self._locks()
        exists = _existence(test)
        for key, node in keys:
            inner[key] = _Check(
                node,
                locks,
                test=test,
                positive=exists.get(id(node)),
                others=frozenset(k for k, _ in keys if k != key),
                reads=tuple(n for k, n in keys if k == key),
            )
        return inner, [key for key, _ in keys]

    def _if(self, stmt: cst.If, state: _State) -> _State | None:
        inner, keys = self._guarded(stmt.test, state)
        body = self._under(keys, block_body(stmt.body), dict(inner))
        other: _State | None
        if stmt.orelse is None:
            other = _negated(inner, stmt.test)
        elif isinstance(stmt.orelse, cst.If):
            self._guards.append(_Guard(fresh=bool(keys)))
            other = self._if(stmt.orelse, _negated(inner, stmt.test))
            self._guards.pop()
            if other is not None and body is not None:
                # After `if a: ... elif b: return`, the code is guarded by `a or not b`, not
                # by `b`: the elif's guard clause does not carry past the chain.
                elif_test = stmt.orelse.test
                other = {k: c for k, c in other.items() if c.test is not elif_test}
        else:
            other = self._under(keys, block_body(stmt.orelse.body), _negated(inner, stmt.test))
        out = _merge(body, other)
        if out is None or (body is None and stmt.orelse is None):
            # A guard clause (`if <test>: return`): the code after it is guarded by the test.
            return out
        for key in keys:
            new = out.pop(key, None)
            old = state.get(key)
            if old is not None:
                if new is not None and old.suspension is None and new.suspension is not None:
                    old = replace(old, suspension=new.suspension)
                if new is not None and old.effect is None and new.effect is not None:
                    old = replace(old, effect=new.effect)
                if new is not None and new.mixed:
                    old = _mixed(old)
                out[key] = old
        return out

    def _under(
        self,
        keys: list[str],
        body: Sequence[cst.BaseStatement | cst.BaseSmallStatement],
        state: _State,
    ) -> _State | None:
        """Walk the code a test guards, with the test on the guard stack."""
        self._guards.append(_Guard(fresh=bool(keys)))
        try:
            return self._block(body, state)
        finally:
            self._guards.pop()

    def _loop(
        self,
        body: Sequence[cst.BaseStatement | cst.BaseSmallStatement],
        suite: cst.BaseSuite,
        entry: _State,
        fresh: _State,
    ) -> tuple[_State | None, list[_State]]:
        """Walk a loop body; checks from before the loop see the body's suspension points on
        the next iteration, so a second pass marks them suspended."""
        self._breaks.append([])
        out = self._block(body, {**entry, **fresh})
        if any(check.suspension is None for check in entry.values()):
            suspension = find_suspension(suite, quiet=self.quiet)
            if suspension is not None:
                self._stale()
                again = self._block(body, {**_suspended(entry, suspension), **fresh})
                out = _merge(out, again)
        return out, self._breaks.pop()

    def _while(self, stmt: cst.While, state: _State) -> _State | None:
        inner, keys = self._guarded(stmt.test, state)
        fresh = {key: inner[key] for key in keys}
        self._guards.append(_Guard(fresh=bool(keys)))
        try:
            out, breaks = self._loop(block_body(stmt.body), stmt.body, state, fresh)
        finally:
            self._guards.pop()
        normal: _State | None = None
        if not _always_true(stmt.test):
            normal = _merge(state, out)
            if normal is not None:
                # The loop exits right after its test ran, so the test guards what follows.
                normal.update(_negated(fresh, stmt.test))
                if stmt.orelse is not None:
                    normal = self._block(block_body(stmt.orelse.body), normal)
        return _merge(normal, *breaks)

    def _for(self, stmt: cst.For, state: _State) -> _State | None:
        self._expr(stmt.iter, state)
        self.names.rebind(stmt.target, None)
        if stmt.asynchronous:
            state = _suspended(state, stmt)
            self._stale()
        out, breaks = self._loop(block_body(stmt.body), stmt.body, state, {})
        normal = _merge(state, out)
        if normal is not None and stmt.asynchronous:
            normal = _suspended(normal, stmt)
        if normal is not None and stmt.orelse is not None:
            normal = self._block(block_body(stmt.orelse.body), normal)
        return _merge(normal, *breaks)

    def _with(self, stmt: cst.With, state: _State) -> _State | None:
        pushed = 0
        other_async = False
        for item in stmt.items:
            self._expr(item.item, state)
            if item.asname is not None:
                self.names.rebind(item.asname.name, None)
            if stmt.asynchronous:
                state = _suspended(state, stmt)
                self._stale()
            if self.is_lock(item.item):
                self._held.append(self._acquire())
                pushed += 1
            else:
                other_async = other_async or bool(stmt.asynchronous)
        out = self._block(block_body(stmt.body), state)
        del self._held[len(self._held) - pushed :]
        if out is not None and other_async:
            out = _suspended(out, stmt)
        return out

    def _try(self, stmt: cst.Try | cst.TryStar, state: _State) -> _State | None:
        # A `finally` that releases a lock proves the lock is held in the `try` (see
        # `released_by_finally`), even when the acquire is in a helper; the walk of the
        # `finally` drops it again at the release.
        for name in released_by_finally(stmt, self.is_lock):
            self._manual.setdefault(name, self._acquire())
        entry = dict(state)
        body = self._block(block_body(stmt.body), dict(state))
        suspension = find_suspension(stmt.body, quiet=self.quiet)
        if suspension is not None:
            self._stale()
        handler_in = _merge(_suspended(entry, suspension) if suspension else entry, body) or {}
        handled: list[_State | None] = []
        for handler in stmt.handlers:
            if handler.name is not None:
                self.names.rebind(handler.name.name, None)
            handled.append(self._block(block_body(handler.body), dict(handler_in)))
        normal = body
        if stmt.orelse is not None and body is not None:
            normal = self._block(block_body(stmt.orelse.body), body)
        result = _merge(normal, *handled)
        if stmt.finalbody is None:
            return result
        final = self._block(
            block_body(stmt.finalbody.body), _merge(result, handler_in) or dict(handler_in)
        )
        return final if result is not None else None


def _stores_only(
    function: cst.FunctionDef,
    attr: str,
    mine_in: Callable[[cst.FunctionDef], Callable[[cst.BaseExpression], bool]],
) -> bool:
    """Say whether ``function`` (and every function nested in it) writes ``self.<attr>`` only
    by assigning ``None`` or a value ``mine_in(function)`` accepts, and touches it no other
    way (no subscript, attribute, in-place call, ``+=`` or ``del``)."""
    mine = mine_in(function)
    for node in _own_nodes(function.body):
        if isinstance(node, cst.FunctionDef) and not _stores_only(node, attr, mine_in):
            return False
        if isinstance(node, cst.Lambda) and any(
            isinstance(n, cst.Call)
            and isinstance(n.func, cst.Attribute)
            and _writes_self_attr(n.func.value, attr)
            for n in _all_nodes(node.body)
        ):
            return False
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and _writes_self_attr(node.func.value, attr)
        ):
            return False
        targets = store_targets(node)
        for target in targets:
            if self_member(target) == attr and isinstance(node, (cst.Assign, cst.AnnAssign)):
                value = node.value
                if value is None or not (
                    (isinstance(value, cst.Name) and value.value == "None") or mine(value)
                ):
                    return False
            elif any(_writes_self_attr(n, attr) for n in _own_nodes(target)):
                return False
    return True


def _all_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def _writes_self_attr(node: cst.CSTNode, attr: str) -> bool:
    """Say whether ``node`` is ``self.<attr>`` or reaches into it (``self.<attr>[k]``,
    ``self.<attr>.x``), as an assignment target or a method's receiver."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if self_member(node) == attr:
            return True
        node = node.value
    return False


def _related(finding: Finding, what: str) -> list[Related]:
    related = [Related(finding.check.node, f"`{finding.state}` is checked here")]
    if finding.check.suspension is not None:
        related.append(Related(finding.check.suspension, what))
    return related


def _local_of(facts: FunctionFacts) -> Callable[[str], bool]:
    """Return a test for names that hold the function's own data: its locals and parameters
    other than ``self``/``cls``."""
    own = (facts.assigned | facts.params()) - facts.declared - {"self", "cls"}
    return own.__contains__


def _own_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Return the nodes of ``node`` outside nested scopes."""
    found: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        if current is node or not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(current))
    return found


_TEARDOWN = re.compile(
    r"(a?close|cleanup|shutdown|stop|disconnect|teardown|terminate|dispose|release|finali[sz]e|"
    r"_?aexit__)",
    re.IGNORECASE,
)
"""Teardown coroutines: running one twice concurrently is idempotent in practice (both tasks
close the same resource and reset the same state), so IL101 does not look into them. Nor does
it look into ``__anext__`` or async generators: an async iterator is driven by one consumer at
a time (a second ``anext`` on a running generator raises), and triage on agent frameworks found
no real hazard among their findings."""


class _Scopes:
    """The lock scopes of one module: one per class (its methods) and one for the module's
    functions, each scanned only when a finding asks about it.

    Invariant: ``nested`` holds the function nodes defined inside other functions, which
    belong to no scope of their own (``_locking`` scans them with their parent).
    """

    def __init__(self) -> None:
        self.by_owner: dict[str | None, LockScope] = {}
        self.nested: set[int] = set()
        self.lock_names: dict[str | None, set[str]] = {}
        self._drivers: dict[str, Drivers] = {}

    def add(self, facts: FunctionFacts, *, nested: bool) -> None:
        """Record a function once its traversal has ended."""
        if nested:
            self.nested.add(id(facts.node))
            return
        self.scope(facts.class_name).functions.append(facts.node)

    def scope(self, owner: str | None) -> LockScope:
        """Return the scope of class ``owner`` (``None``: the module's functions)."""
        found = self.by_owner.get(owner)
        if found is None:
            names = self.lock_names.setdefault(owner, set())
            module = self.lock_names.setdefault(None, set())
            found = self.by_owner[owner] = LockScope(
                lambda expr: is_lock_expr(expr) or (dotted(expr) or "") in names | module
            )
        return found

    def covered(self, facts: FunctionFacts) -> bool:
        """Say whether the function always runs with a lock held by its caller."""
        if id(facts.node) in self.nested:
            return False
        return facts.node.name.value in self.scope(facts.class_name).facts().covered

    def drivers(self, facts: FunctionFacts) -> Drivers | None:
        """Return the :class:`Drivers` of the method's class (``None`` for a function that is
        not a method)."""
        owner = facts.class_name
        if owner is None or id(facts.node) in self.nested:
            return None
        drivers = self._drivers.get(owner)
        if drivers is None:
            drivers = self._drivers[owner] = drivers_of(self.scope(owner).functions)
        return drivers

    def confined(self, facts: FunctionFacts, finding: Finding) -> bool:
        """Say whether only the one task that runs the method can write the state (see
        :mod:`._drivers`): the method is driven by one task, and so is every writer. When
        the check asked only which object the attribute holds (``self._x is None``), code
        that receives the object cannot change that, so it may have escaped."""
        drivers = self.drivers(facts)
        state = finding.state
        return (
            drivers is not None
            and state.startswith("self.")
            and drivers.confined(
                facts.node.name.value,
                _state_root(state),
                contents=not _kept(finding.check, _identity_only),
            )
        )

    def shrinks(self, facts: FunctionFacts, finding: Finding) -> bool:
        """Say whether no other task can invalidate the check while the method is suspended:
        only the task that runs the method can add to the state, the others only remove from
        it (:meth:`Drivers.only_shrinks`), and the check established something removing cannot
        undo (:func:`_removal_move`: a cap not reached, a key absent)."""
        drivers = self.drivers(facts)
        return (
            drivers is not None
            and finding.state.startswith("self.")
            and drivers.only_shrinks(facts.node.name.value, _state_root(finding.state))
            and _kept(finding.check, _removal_move)
        )

    def task_local(
        self,
        facts: FunctionFacts,
        finding: Finding,
        calls: frozenset[str],
        aliases: ImportAliases,
    ) -> bool:
        """Say whether the check found that ``self._owner`` does not hold the running task's
        own identity (``if self._owner is asyncio.current_task(): ...`` on its false branch;
        ``threading.get_ident()`` for threads), and every method stores in ``self._owner``
        only ``None`` or the identity of whoever runs it. Then no other task can make the
        check true while this one is suspended: each stores its own task, never this one's
        (the re-entrant lock's owner test). The test ``mine`` accepts the identity call or a
        local bound only to it."""
        check = finding.check
        root = _state_root(finding.state)
        if (
            facts.class_name is None
            or finding.state != root
            or not isinstance(check.test, cst.BaseExpression)
        ):
            return False

        def mine_in(function: cst.FunctionDef) -> Callable[[cst.BaseExpression], bool]:
            def fits(expr: cst.BaseExpression) -> bool:
                return _identity_call(expr, calls, aliases)

            def mine(expr: cst.BaseExpression) -> bool:
                return fits(expr) or (
                    isinstance(expr, cst.Name) and _bound_only_to(function, expr.value, fits)
                )

            return mine

        if not _kept(check, _identity_move(mine_in(facts.node))):
            return False
        attr = root.split(".", 1)[1]
        for method in self.scope(facts.class_name).functions:
            if method.name.value in INIT_METHODS:
                continue
            if not _stores_only(method, attr, mine_in):
                return False
        return True

    def memo(self, facts: FunctionFacts, finding: Finding) -> bool:
        """Say whether the write fills a memo: two tasks (or threads) that both missed it both
        store what they computed, and the first store is dropped, not lost or leaked.

        That holds when the write replaces a whole attribute or module name with a container
        built fresh from data in hand (:func:`_fresh_data`) or with data derived from it
        (:func:`_derived_data`: no object the function made or was given, no constant flag),
        and nothing mutates that state in place; or when it stores such data under a key
        (``self._names[user] = name``) of a container whose values nothing mutates in place
        (:func:`_values_mutated`), so no other task's additions to an entry are lost."""
        write = finding.write
        value = finding.value
        local = _local_of(facts)
        if id(facts.node) in self.nested:
            return False
        if isinstance(write, cst.Subscript):
            state = _state_name(write.value)
            if (
                state is None
                or _sizes(finding.check.test, state)
                or not _derived_data(value, facts.node, local)
            ):
                return False
            return not _values_mutated(state, self._functions_seeing(state, facts))
        if not isinstance(write, (cst.Attribute, cst.Name)):
            return False
        state = _state_name(write)
        if state is None or not (
            _fresh_data(value, local) or _derived_data(value, facts.node, local)
        ):
            return False
        if state.startswith("self."):
            drivers = self.drivers(facts)
            return drivers is not None and _state_root(finding.state) not in drivers.in_place
        return not _mutated_in_place(state, self._functions_seeing(state, facts))

    def _functions_seeing(self, state: str, facts: FunctionFacts) -> list[cst.FunctionDef]:
        """The functions that can reach ``state``: the class's methods for ``self._x``, every
        function and method of the module for a module name."""
        if state.startswith("self."):
            return list(self.scope(facts.class_name).functions)
        return [function for scope in self.by_owner.values() for function in scope.functions]

    def lazy(self, facts: FunctionFacts, finding: Finding) -> bool:
        """Say whether the finding is lazy initialisation (IL104 rather than IL101): the check
        finds ``self._x`` missing (``self._x is None``, ``not self._x``; or, as a guard clause
        that returns, ``self._x is not None``, ``self._x``), reading it once and no other state
        that can change (``and enabled`` on a local or parameter is fine, and so is ``and
        self.mode == MODE`` on an attribute no method but ``__init__`` writes, configuration,
        and a module-level constant named in capitals, as :func:`_constant` takes them),
        the write assigns a value to that whole attribute, the code between them assigned no
        other checked state and mutated nothing in place (:attr:`_Check.mixed`), and no method
        mutates ``self._x`` in place (so ``not self._x`` tests for a handle or flag, not an
        empty container)."""
        check = finding.check
        if (
            len(check.reads) != 1
            or check.positive is not False
            or check.mixed
            or not _whole_attribute(finding.write, finding.value)
        ):
            return False
        drivers = self.drivers(facts)
        return (
            drivers is not None
            and _state_root(finding.state) not in drivers.in_place
            and all(
                drivers.configuration(other) or ("." not in other and _constant(cst.Name(other)))
                for other in check.others
            )
        )

    def written(self) -> frozenset[str]:
        """Module state written under a lock anywhere in the module."""
        out: set[str] = set()
        for scope in self.by_owner.values():
            out |= scope.facts().written
        return frozenset(out)

    def module_uses_locks(self) -> bool:
        """Say whether any function or method of the module takes a lock."""
        return any(scope.facts().uses_locks for scope in self.by_owner.values())


class FlagCheckThenActAcrossAwait(FactsCollector, Rule):
    """IL101: a check of shared state and a dependent write with a suspension point between."""

    code: ClassVar[str] = "IL101"
    shares: ClassVar[str | None] = "tasks"
    name: ClassVar[str] = "check-then-act-across-await"
    summary: ClassVar[str] = (
        "In `async def`, shared state is checked and then written after a suspension point "
        "with no lock held across both."
    )
    message: ClassVar[str] = (
        "`{state}` is written after a suspension point that follows its check, with no lock "
        "held across both ({shared}). Another task can change `{state}` while this one is "
        "suspended, so the write acts on a stale check (two callers both create, both start, "
        "or overfill). Hold one `asyncio.Lock` across the check and the write, or re-check "
        "`{state}` after the last `await`."
    )
    why: ClassVar[str] = (
        "Single-threaded asyncio makes the code between two suspension points atomic, and "
        "nothing more. When a coroutine tests shared state (`if self._client is None`, "
        "`if key not in self._cache`, `if self.state != IDLE`) and then awaits before it acts "
        "on the result, every other task may run in between: two `run()` calls both pass the "
        "idle check, two callers both miss a registry entry and both create it, a batch "
        "gathered and then cleared drops what arrived during the gather. "
        "Without a suspension point between the check and the write there is no race in "
        "asyncio, and the rule stays silent. A lock counts as held across a `try` whose "
        "`finally` releases it, however it was taken (a helper that acquires with a timeout), "
        "since releasing a lock that is not held raises. It also stays silent when no second "
        "task can be involved: in code that only one task ever runs (an async generator, which "
        "one consumer drives; a coroutine that consumes the object itself with `async for _ in "
        "self`; a private coroutine the object starts once as its own background task, keeping "
        "the handle in one attribute; private helpers only those call or await; two "
        "background tasks are two tasks) when "
        "every method that writes the state is such code too, or when every other method "
        "only removes from it (`pop`, `discard`, `clear`, `del d[k]`) and the check found "
        "something a removal cannot undo (a key absent, `len(d)` under a cap, an empty "
        "container), as long as no method hands the container out (returns it, binds it to "
        "a local, passes it to a call) where unseen code could add to it; when the check "
        "asked whether the state is this task's own "
        "(`self._owner is asyncio.current_task()`, or `== anyio.get_current_task()`, on its "
        "false branch, with every writer "
        "storing `None` or its own task), which no other task can make true; and for a memo "
        "of data, where a second task that also missed the memo only duplicates work: an "
        "attribute or module name replaced whole, or an entry stored under a key "
        "(`self._names[chat_id] = name`), with a value computed from the function's own "
        "data by reads alone (`sorted(...)`, a comprehension, `str(data.get('name'))`, "
        "`result.tools`: no await or call in it but pure builtins and reads, and no local "
        "in it bound to an await, a call or a parameter), and neither the state nor (for a "
        "keyed store) any entry of it mutated in place anywhere in the class or module. A "
        "value that comes from an `await` or a call as it is may be a resource (a client, a "
        "connection), and a second copy leaks; a constant marks that something was done; "
        "a parameter may differ between the two callers: those stay reported. Lazy "
        "initialisation of one attribute (`if self._client is None: self._client = await "
        "connect()`, `if not self._ready: await setup(); self._ready = True`) is reported as "
        "IL104 instead, an opt-in rule: its duplicate is harmless unless what it creates owns "
        "an external resource, which the syntax does not show."
    )
    bad_example: ClassVar[str] = (
        "class Agent:\n"
        "    async def run(self, task):\n"
        "        if self.state != 'idle':\n"
        "            raise RuntimeError('busy')\n"
        "        await self.load_tools()\n"
        "        self.state = 'running'\n"
        "        return await self.step(task)\n"
    )
    good_example: ClassVar[str] = (
        "class Agent:\n"
        "    async def run(self, task):\n"
        "        if self.state != 'idle':\n"
        "            raise RuntimeError('busy')\n"
        "        self.state = 'running'\n"
        "        await self.load_tools()\n"
        "        return await self.step(task)\n"
    )
    suppress: ClassVar[str] = (
        "When only one task can ever run the function at a time (it is called from one "
        "supervisor task, say) or when acting twice is harmless (idempotent cleanup); say so "
        "in a comment next to the `# noqa: IL101`."
    )
    TRIGGERS: ClassVar[Sequence[str]] = ("await", "async with", "async for")
    lazy_init: ClassVar[bool] = False
    """Which findings this rule reports: lazy initialisation (IL104) or all others (IL101)."""
    VALID: ClassVar[Sequence[str]] = (
        # No suspension point between the check and the write.
        "class A:\n"
        "    async def run(self):\n"
        "        if self.state != 'idle':\n"
        "            raise RuntimeError('busy')\n"
        "        self.state = 'running'\n"
        "        await self.work()\n",
        # One lock held across both.
        "class A:\n"
        "    async def get(self):\n"
        "        async with self._lock:\n"
        "            if self._c is None:\n"
        "                self._c = await connect()\n"
        "        return self._c\n",
        # dict.setdefault is the atomic get-or-insert.
        "class A:\n"
        "    async def get(self, k):\n"
        "        await self.ready()\n"
        "        return self._d.setdefault(k, [])\n",
        # Locals are not shared.
        "async def f():\n"
        "    c = None\n"
        "    if c is None:\n"
        "        c = await connect()\n"
        "    return c\n",
        # Double-checked: re-checked under the lock after the suspension point.
        "class A:\n"
        "    async def get(self):\n"
        "        if self._c is None:\n"
        "            async with self._lock:\n"
        "                if self._c is None:\n"
        "                    self._c = await connect()\n"
        "        return self._c\n",
        # The write does not depend on the check.
        "class A:\n"
        "    async def f(self):\n"
        "        if self.closed:\n"
        "            return\n"
        "        await self.flush()\n"
        "        self.sent += 1\n",
        # Seed 002's lazy semaphore: no await inside.
        "class E:\n"
        "    async def _ensure_semaphore(self):\n"
        "        if self._semaphore is None:\n"
        "            self._semaphore = asyncio.Semaphore(self.max_concurrent)\n"
        "        return self._semaphore\n",
        # Only the object's own background task runs the loop and writes `self.tasks`.
        "class R:\n"
        "    def __init__(self):\n"
        "        self._task = asyncio.create_task(self._loop())\n"
        "    async def _loop(self):\n"
        "        while True:\n"
        "            job = await self._q.get()\n"
        "            if job not in self.tasks:\n"
        "                await self.announce(job)\n"
        "                self.tasks[job] = job\n",
        # Other tasks only remove from `self.tasks`, which cannot put `job` back.
        "class R:\n"
        "    def __init__(self):\n"
        "        self._task = asyncio.create_task(self._loop())\n"
        "    async def _loop(self):\n"
        "        while True:\n"
        "            job = await self._q.get()\n"
        "            if job not in self.tasks:\n"
        "                await self.announce(job)\n"
        "                self.tasks[job] = job\n"
        "    async def forget(self, job):\n"
        "        self.tasks.pop(job, None)\n",
        # The owner test of a re-entrant lock: no other task can make this task the owner.
        "import asyncio\n"
        "class L:\n"
        "    async def acquire(self):\n"
        "        task = asyncio.current_task()\n"
        "        if self._owner is task:\n"
        "            return\n"
        "        await self._lock.acquire()\n"
        "        self._owner = task\n"
        "    def release(self):\n"
        "        self._owner = None\n"
        "        self._lock.release()\n",
        # A memo of plain data: a duplicate only repeats work.
        "class C:\n"
        "    async def names(self):\n"
        "        if self._names is None:\n"
        "            tools = await self.fetch()\n"
        "            self._names = sorted(t.name for t in tools)\n"
        "        return self._names\n",
    )
    INVALID: ClassVar[Sequence[str]] = (
        # More than setup under the flag: a second start registers the listener twice.
        "class A:\n"
        "    async def start(self):\n"
        "        if not self._started:\n"
        "            await self.connect()\n"
        "            self._listeners.append(self.on_event)\n"
        "            self._started = True\n",
        "class A:\n"
        "    async def run(self):\n"
        "        if self.state != 'idle':\n"
        "            raise RuntimeError('busy')\n"
        "        await self.prepare()\n"
        "        self.state = 'running'\n",
        "class A:\n"
        "    async def get(self, k):\n"
        "        if k in self._cache:\n"
        "            return self._cache[k]\n"
        "        value = await self.fetch(k)\n"
        "        self._cache[k] = value\n"
        "        return value\n",
        # The background loop's state is also added to by a public method.
        "class R:\n"
        "    def __init__(self):\n"
        "        self._task = asyncio.create_task(self._loop())\n"
        "    async def _loop(self):\n"
        "        while True:\n"
        "            job = await self._q.get()\n"
        "            if job not in self.tasks:\n"
        "                await self.announce(job)\n"
        "                self.tasks[job] = job\n"
        "    async def adopt(self, job, task):\n"
        "        self.tasks[job] = task\n",
    )

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.init_facts()
        self._scopes = _Scopes()
        self._found: list[tuple[FunctionFacts, list[Finding]]] = []

    def function_done(self, facts: FunctionFacts) -> None:
        self._scopes.add(facts, nested=bool(self.facts_stack))
        node = facts.node
        if node.asynchronous is None or _TEARDOWN.match(node.name.value.lstrip("_")):
            return
        if node.name.value == "__anext__" or find_suspension(node.body, quiet=self.quiet) is None:
            return
        if any(isinstance(n, cst.Yield) for n in _own_nodes(node.body)):
            return
        names = StateNames.of(facts, self.module_names, include_params=False)
        findings = CheckThenActFlow(names, threaded=False, quiet=self.quiet).run(node)
        if findings:
            self._found.append((facts, findings))

    def leave_Module(self, original_node: cst.Module) -> None:
        # Reported at the end of the module: whether every caller of a helper holds a lock
        # is known only once all of the class has been seen.
        for facts, findings in self._found:
            if self._scopes.covered(facts):
                continue
            for finding in findings:
                if (
                    self._scopes.confined(facts, finding)
                    or self._scopes.shrinks(facts, finding)
                    or self._scopes.task_local(facts, finding, _TASK_IDENTITY, self.aliases)
                    or self._scopes.memo(facts, finding)
                ):
                    # Only the task that is suspended writes the state (or adds to it, and
                    # the check survives removals), no other task can make the check true
                    # (it asked whether the state is this task's own), or the write replaces
                    # a memo of plain data: no other task's work is lost.
                    continue
                if self._scopes.lazy(facts, finding) is not self.lazy_init:
                    continue
                self.report(
                    finding.write,
                    self.message.format(
                        state=finding.state,
                        shared=shared_by_tasks(
                            finding.state,
                            facts.class_name,
                            declared=self.context.sharing == "declared",
                        ),
                    ),
                    related=_related(finding, "the task can be suspended here"),
                )


class FlagLazyInitAcrossAwait(FlagCheckThenActAcrossAwait):
    """IL104 (opt-in): lazy initialisation of one attribute across a suspension point."""

    code: ClassVar[str] = "IL104"
    name: ClassVar[str] = "lazy-init-across-await"
    opt_in: ClassVar[bool] = True
    lazy_init: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "In `async def`, an attribute found missing (`is None`, falsy) is created or set up "
        "after a suspension point with no lock held across both (opt-in: select `IL104` by "
        "its full code)."
    )
    message: ClassVar[str] = (
        "`{state}` is created or set up after a suspension point that follows the check that "
        "found it missing, with no lock held across both ({shared}). Two tasks that both find "
        "it missing both create it: the second replaces the first, which leaks if it owns an "
        "external resource (a process, a browser, a billed sandbox). If it owns such a "
        "resource, hold one `asyncio.Lock` across the check and the write, or share one "
        "creating task."
    )
    why: ClassVar[str] = (
        "This is IL101's check-then-act in its most common shape, lazy initialisation: one "
        "test that one attribute is missing (`self._x is None`, `not self._x`, or the guard "
        "clause `if self._x is not None: return self._x`; other parts of the test may read "
        "locals and parameters, as in `and enabled`, and configuration: attributes no method "
        "but `__init__` writes, and module constants named in capitals), then, after an "
        "`await`, an "
        "assignment of that whole attribute, with nothing but setup between them (no other "
        "checked state written, nothing mutated in place) and no method that mutates the "
        "attribute in place (so the test is for a handle or a flag, not an empty container). "
        "Two tasks that both find it missing both run the setup. Whether that matters depends "
        "on what the awaited code does, which the syntax does not show: a second client "
        "object, a cached name or an idempotent `CREATE ... IF NOT EXISTS` is harmless, a "
        "second browser process or cloud sandbox is leaked, and setup that writes several "
        "attributes can interleave into a mixed state. On agent frameworks most of these "
        "findings were the harmless kind (docs/lint-studies/in-sample.md), so the rule is opt-in, "
        "as ruff keeps rules of that kind out of its defaults and ESLint dropped "
        "`require-atomic-updates` from its recommended set: `IL`, `IL1` and `ALL` do not "
        "select it; name it in full (`--extend-select IL104`, or `extend-select = "
        '["IL104"]`). Everything else IL101 reports (state-machine guards, counters and '
        "caps, registry get-or-create, gather-then-clear) stays IL101. The same exemptions "
        "apply: a lock held across both, a re-check after the last `await`, code only one "
        "task runs, memos of plain data."
    )
    bad_example: ClassVar[str] = (
        "class Browser:\n"
        "    async def page(self):\n"
        "        if self._driver is None:\n"
        "            self._driver = await launch_browser()\n"
        "        return await self._driver.new_page()\n"
    )
    good_example: ClassVar[str] = (
        "class Browser:\n"
        "    async def page(self):\n"
        "        async with self._lock:\n"
        "            if self._driver is None:\n"
        "                self._driver = await launch_browser()\n"
        "        return await self._driver.new_page()\n"
    )
    suppress: ClassVar[str] = (
        "When a duplicate is harmless (the created object holds no external resource and is "
        "simply dropped, or the setup is idempotent) or only one task can reach the code; say "
        "which in a comment next to the `# noqa: IL104`."
    )
    VALID: ClassVar[Sequence[str]] = (
        # One lock held across both.
        "class A:\n"
        "    async def get(self):\n"
        "        async with self._lock:\n"
        "            if self._c is None:\n"
        "                self._c = await connect()\n"
        "        return self._c\n",
        # Double-checked: re-checked under the lock after the suspension point.
        "class A:\n"
        "    async def get(self):\n"
        "        if self._c is None:\n"
        "            async with self._lock:\n"
        "                if self._c is None:\n"
        "                    self._c = await connect()\n"
        "        return self._c\n",
        # No suspension point between the check and the write.
        "class A:\n"
        "    async def get(self):\n"
        "        if self._c is None:\n"
        "            self._c = Client()\n"
        "        return await self._c.ready()\n",
        # A registry get-or-create is IL101's, not lazy initialisation of one attribute.
        "class A:\n"
        "    async def get(self, k):\n"
        "        if k not in self._d:\n"
        "            self._d[k] = await connect()\n"
        "        return self._d[k]\n",
        # An empty buffer refilled: the attribute is mutated in place, so IL101's.
        "class A:\n"
        "    async def next(self):\n"
        "        if not self._buf:\n"
        "            self._buf = await self.fetch()\n"
        "        return self._buf.pop()\n",
    )
    INVALID: ClassVar[Sequence[str]] = (
        "class A:\n"
        "    async def get(self):\n"
        "        if self._c is None:\n"
        "            self._c = await connect()\n"
        "        return self._c\n",
        "class A:\n"
        "    async def ensure(self):\n"
        "        if self._ready:\n"
        "            return\n"
        "        await self.create_tables()\n"
        "        self._ready = True\n",
        "class A:\n"
        "    async def session(self):\n"
        "        if not self._session:\n"
        "            client = await connect()\n"
        "            self._client = client\n"
        "            self._session = await client.open()\n"
        "        return self._session\n",
    )


_THREAD_APIS = {
    "threading.Lock": "threading.Lock()",
    "threading.RLock": "threading.RLock()",
    "threading.Condition": "threading.Condition()",
    "threading.Semaphore": "threading.Semaphore()",
    "threading.BoundedSemaphore": "threading.BoundedSemaphore()",
    "threading.Thread": "threading.Thread()",
    "threading.Timer": "threading.Timer()",
    "_thread.allocate_lock": "_thread.allocate_lock()",
    "_thread.start_new_thread": "_thread.start_new_thread()",
    "concurrent.futures.ThreadPoolExecutor": "ThreadPoolExecutor()",
    "concurrent.futures.thread.ThreadPoolExecutor": "ThreadPoolExecutor()",
    "multiprocessing.pool.ThreadPool": "ThreadPool()",
    "asyncio.to_thread": "asyncio.to_thread()",
    "anyio.to_thread.run_sync": "anyio.to_thread.run_sync()",
}
_THREAD_LOCKS = frozenset(
    {
        "threading.Lock",
        "threading.RLock",
        "threading.Condition",
        "threading.Semaphore",
        "threading.BoundedSemaphore",
        "_thread.allocate_lock",
    }
)


_CLASS_WIDE = _THREAD_LOCKS | {"threading.Thread", "threading.Timer", "_thread.start_new_thread"}


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What shows code is shared between threads; ``lock`` when it is a threading lock."""

    node: cst.CSTNode
    what: str
    lock: bool = False


class FlagUnlockedCheckThenAct(FactsCollector, Rule):
    """IL102: an unlocked check-then-act in a class or module shared between threads."""

    code: ClassVar[str] = "IL102"
    shares: ClassVar[str | None] = "threads"
    name: ClassVar[str] = "unlocked-check-then-act"
    opt_in: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "In code shared between threads, shared state is checked and then written without a "
        "lock held across both (lazy singletons, get-or-create, double-checked locking "
        "without the re-check; opt-in: select `IL102` by its full code)."
    )
    message: ClassVar[str] = (
        "`{state}` is checked and then written with no lock held across both, in code shared "
        "between threads ({evidence}). Another thread can run between the check and the "
        "write, so two threads act on the same check and one update is lost. Hold one "
        "`threading.Lock` across the check and the write (re-check inside the lock when "
        "double-checking), or use an atomic call such as `dict.setdefault`."
    )
    why: ClassVar[str] = (
        "A thread can be preempted between any two bytecodes, so `if key not in self._d: "
        "self._d[key] = make()` lets two threads both see the key missing and both insert; "
        "the second insert replaces the object the first thread already handed out, and "
        "whatever it recorded there is lost (seed 003's error histories). The rule only looks "
        "at code with evidence that it is shared between threads: the class or module uses a "
        "threading lock, starts threads, hands work to an executor or `to_thread`, or the "
        "class is named in `shared-classes`. In code that has or takes locks, the locks also "
        "say *what* is shared (as in RacerD): only state that some function writes under a "
        "lock (assigns, deletes or mutates in place), directly or in a helper called with "
        "the lock held, is reported, since state the code never writes under a lock is "
        "usually confined to one thread (code that takes its lock for every read as well "
        "shows nothing by a read). Two exceptions: a method the class hands to a thread or an "
        "executor (`self._pool.submit(self.refresh)`, `pool.map(self.visit, urls)`) is "
        "reported whatever its class locks, and a lazy module singleton (`if _client is None: "
        "_client = ...`) is reported in a module that creates another singleton under a lock. "
        "A memo of data is left alone as IL101 leaves it. A "
        "private helper whose "
        "every caller in the class holds a lock, or one named `*_locked`/`*_unlocked` or "
        "asserting `lock.locked()`, runs under its caller's lock and is not reported. A lock "
        "counts as held across a `try` whose `finally` releases it, however it was taken "
        "(`if not self._acquire_before(self._lock, deadline): return`), since releasing a "
        "lock that is not held raises. A check that only this thread can make true is not "
        "stale either: a re-entrant lock's `if self._owner == threading.get_ident()` on its "
        "false branch, when every writer stores `None` or its own thread's identity. Benign "
        "races are left alone: a write that stores a constant (`self._started = True`, `= "
        "None`) or clears (`.clear()`, `.discard()`) is reported only if the guarded code also "
        "does something a second thread must not repeat (calls out, starts a thread, appends, "
        "increments), and adding to an object the check only found present (`if self._cache: "
        "self._cache.add(...)`) is not a check-then-act. Double-checked locking is fine only "
        "with the re-check inside the lock."
    )
    bad_example: ClassVar[str] = (
        "import threading\n"
        "_lock = threading.Lock()\n"
        "_container = None\n"
        "def get_container():\n"
        "    global _container\n"
        "    if _container is None:\n"
        "        with _lock:\n"
        "            _container = Container()\n"
        "    return _container\n"
    )
    good_example: ClassVar[str] = (
        "import threading\n"
        "_lock = threading.Lock()\n"
        "_container = None\n"
        "def get_container():\n"
        "    global _container\n"
        "    if _container is None:\n"
        "        with _lock:\n"
        "            if _container is None:\n"
        "                _container = Container()\n"
        "    return _container\n"
    )
    suppress: ClassVar[str] = (
        "When the class is shared between threads but this method only ever runs on one of "
        "them (say, a worker thread's own loop), or when both threads writing is harmless; "
        "say which in a comment next to the `# noqa: IL102`."
    )
    TRIGGERS: ClassVar[Sequence[str]] = (
        "thread",
        "lock",
        "executor",
        "to_thread",
        "threadpool",
    )
    VALID: ClassVar[Sequence[str]] = (
        # Correct double-checked locking.
        "import threading\n"
        "_lock = threading.Lock()\n"
        "_c = None\n"
        "def get():\n"
        "    global _c\n"
        "    if _c is None:\n"
        "        with _lock:\n"
        "            if _c is None:\n"
        "                _c = object()\n"
        "    return _c\n",
        # dict.setdefault.
        "import threading\n"
        "class S:\n"
        "    def __init__(self):\n"
        "        self._lock = threading.Lock()\n"
        "    def get(self, k):\n"
        "        return self._d.setdefault(k, [])\n"
        "    def reset(self):\n"
        "        with self._lock:\n"
        "            self._d.clear()\n",
        # No evidence of threads.
        "_c = None\n"
        "def get():\n"
        "    global _c\n"
        "    if _c is None:\n"
        "        _c = object()\n"
        "    return _c\n",
        # Check and write inside one lock.
        "import threading\n"
        "class S:\n"
        "    def __init__(self):\n"
        "        self._lock = threading.Lock()\n"
        "    def get(self, k):\n"
        "        with self._lock:\n"
        "            if k not in self._d:\n"
        "                self._d[k] = []\n"
        "            return self._d[k]\n",
        # Locals.
        "import threading\n"
        "def f():\n"
        "    threading.Thread(target=print).start()\n"
        "    d = {}\n"
        "    if 'k' not in d:\n"
        "        d['k'] = 1\n",
        # The lock guards `_n` only; `_d` is never touched under it, so it is not shared.
        "import threading\n"
        "class S:\n"
        "    def __init__(self):\n"
        "        self._lock = threading.Lock()\n"
        "    def count(self):\n"
        "        with self._lock:\n"
        "            self._n += 1\n"
        "    def get(self, k):\n"
        "        if k not in self._d:\n"
        "            self._d[k] = []\n"
        "        return self._d[k]\n",
        # Every caller of the helper holds the lock.
        "import threading\n"
        "class S:\n"
        "    def __init__(self):\n"
        "        self._lock = threading.Lock()\n"
        "    def get(self, k):\n"
        "        with self._lock:\n"
        "            return self._get_or_create(k)\n"
        "    def _get_or_create(self, k):\n"
        "        if k not in self._d:\n"
        "            self._d[k] = []\n"
        "        return self._d[k]\n",
        # A benign race: both threads store the same constant and do nothing else.
        "import threading\n"
        "class S:\n"
        "    def __init__(self):\n"
        "        self._lock = threading.Lock()\n"
        "    def wait(self):\n"
        "        with self._lock:\n"
        "            return self._warned\n"
        "    def warn_once(self):\n"
        "        if not self._warned:\n"
        "            self._warned = True\n",
    )
    INVALID: ClassVar[Sequence[str]] = (
        "import threading\n"
        "class S:\n"
        "    def __init__(self):\n"
        "        self._lock = threading.Lock()\n"
        "    def get(self, k):\n"
        "        if k not in self._d:\n"
        "            self._d[k] = []\n"
        "        return self._d[k]\n"
        "    def drop(self, k):\n"
        "        with self._lock:\n"
        "            self._d.pop(k, None)\n",
        "import threading\n"
        "_lock = threading.Lock()\n"
        "_c = None\n"
        "def get():\n"
        "    global _c\n"
        "    if _c is None:\n"
        "        with _lock:\n"
        "            _c = object()\n"
        "    return _c\n",
        "import threading\n"
        "_registry_lock = threading.RLock()\n"
        "_registry = {}\n"
        "def register(name, factory):\n"
        "    if name not in _registry:\n"
        "        _registry[name] = factory()\n"
        "def unregister(name):\n"
        "    with _registry_lock:\n"
        "        _registry.pop(name, None)\n",
        # A constant store is a race once the guarded code starts a thread.
        "import threading\n"
        "class W:\n"
        "    def start(self):\n"
        "        if not self._started:\n"
        "            self._started = True\n"
        "            threading.Thread(target=self.run).start()\n",
        # One caller of the helper does not hold the lock.
        "import threading\n"
        "class S:\n"
        "    def __init__(self):\n"
        "        self._lock = threading.Lock()\n"
        "    def get(self, k):\n"
        "        with self._lock:\n"
        "            return self._get_or_create(k)\n"
        "    def peek(self, k):\n"
        "        return self._get_or_create(k)\n"
        "    def _get_or_create(self, k):\n"
        "        if k not in self._d:\n"
        "            self._d[k] = []\n"
        "        return self._d[k]\n",
    )

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.init_facts()
        self._candidates: list[FunctionFacts] = []
        self._calls: list[tuple[cst.Call, str | None]] = []
        self._with_names: list[tuple[cst.BaseExpression, str | None]] = []
        self._module_locks: dict[str, cst.CSTNode] = {}
        self._scopes = _Scopes()

    def function_done(self, facts: FunctionFacts) -> None:
        self._scopes.add(facts, nested=bool(self.facts_stack))
        if facts.node.asynchronous is None and facts.node.name.value not in INIT_METHODS:
            self._candidates.append(facts)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._note_lock(node.value, [target.target for target in node.targets])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        super().visit_AnnAssign(node)
        if node.value is not None:
            self._note_lock(node.value, [node.target])

    def _note_lock(self, value: cst.BaseExpression, targets: list[cst.BaseExpression]) -> None:
        """Remember the names that hold threading locks (``self._drained = Condition()``), so
        ``with self._drained:`` counts as holding a lock whatever the name says."""
        if not (isinstance(value, cst.Call) and self.aliases.qualify(value.func) in _THREAD_LOCKS):
            return
        owner = self._owner()
        in_body = not self.facts_stack
        names = self._scopes.lock_names.setdefault(owner if owner else None, set())
        for target in targets:
            name = dotted(target)
            if name is None:
                continue
            names.add(name)
            if owner is not None and in_body:
                # A class attribute, reached as `self._lock` or `cls._lock` in methods.
                names.update((f"self.{name}", f"cls.{name}", f"{owner}.{name}"))

    def _owner(self) -> str | None:
        return self.class_stack[-1] if self.class_stack else None

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append((node, self._owner()))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        self._with_names.append((node.item, self._owner()))

    def leave_Module(self, original_node: cst.Module) -> None:
        by_class, by_method, module = self._evidence(original_node)
        if not self._candidates or (
            not by_class and not by_method and module is None and not self._shared()
        ):
            return
        declared = self._declared(original_node)
        for facts in self._candidates:
            owner = facts.class_name
            evidence: dict[str, _Evidence | None] = {}
            method = (owner, facts.node.name.value)
            if owner is not None and owner in declared:
                evidence["self"] = evidence["cls"] = None
            elif owner is not None and owner in by_class:
                evidence["self"] = evidence["cls"] = by_class[owner]
            elif owner is not None and method in by_method:
                evidence["self"] = evidence["cls"] = by_method[method]
            if module is not None:
                evidence[""] = module
            if not evidence:
                continue
            scope = self._scopes.scope(owner)
            names = StateNames.of(facts, self.module_names, include_params=False)
            flow = CheckThenActFlow(
                names, threaded=True, accept=_accepting(evidence), is_lock=scope.is_lock
            )
            findings = flow.run(facts.node)
            if not findings or self._scopes.covered(facts):
                # A helper whose every caller holds the lock runs under that lock.
                continue
            for finding in findings:
                if self._scopes.task_local(facts, finding, _THREAD_IDENTITY, self.aliases):
                    # The check asked whether this thread owns the state; no other thread
                    # can make that true.
                    continue
                if self._scopes.memo(facts, finding):
                    # A memo of data: a second thread that also missed it stores its own
                    # copy; nothing is lost or leaked.
                    continue
                root = _root(finding.state, evidence)
                found = evidence[root]
                guarded = self._guarded_by_lock(finding.state, root, owner, found)
                sibling = None
                if guarded is False and root != "" and method in by_method:
                    # The class locks other state, and this very method runs on a pool or
                    # thread: the unlocked state is shared whatever the lock guards.
                    found = by_method[method]
                    guarded = None
                if guarded is False:
                    sibling = self._locked_sibling(finding, root)
                    if sibling is None:
                        continue
                related = _related(finding, "")
                if found is None:
                    what = f"the class `{owner}` is declared in `shared-classes`"
                else:
                    where = "class" if root != "" else "module"
                    what = f"the {where} uses `{found.what}`"
                    if guarded:
                        what += f" and writes `{_state_root(finding.state)}` under a lock"
                    elif sibling is not None:
                        what += f" and creates its other singleton `{sibling}` under a lock"
                    related.append(Related(found.node, f"{found.what} here: shared with threads"))
                self.report(
                    finding.write,
                    self.message.format(state=finding.state, evidence=what),
                    related=[r for r in related if r.message],
                )

    def _guarded_by_lock(
        self, state: str, root: str, owner: str | None, found: _Evidence | None
    ) -> bool | None:
        """RacerD's test: in code that has or takes locks, is ``state`` one of the things it
        takes them for (written under a lock somewhere)? ``None`` when the evidence is not a
        lock and the scope takes none (a class that only starts threads), or the user
        declared the class shared: then the question narrows nothing."""
        if found is None:
            return None
        if root == "":
            if not (found.lock or self._scopes.module_uses_locks()):
                return None
            return _state_root(state) in self._scopes.written()
        facts = self._scopes.scope(owner).facts()
        if not (found.lock or facts.uses_locks):
            return None
        return _state_root(state) in facts.written

    def _locked_sibling(self, finding: Finding, root: str) -> str | None:
        """Return another module singleton written under a lock, when the finding is a lazy
        module singleton (``if _client is None: _client = ...``) that is not.

        The RacerD test (is the state written under a lock anywhere?) reads an unlocked
        singleton as one the module never meant to share; but a module that locks the
        creation of one singleton and not of its neighbour has forgotten the second lock
        (issue 36's canonical case), so the neighbour is reported."""
        if root != "" or not isinstance(finding.write, cst.Name):
            return None
        if finding.check.positive is None or "." in finding.state:
            return None
        others = sorted(self._scopes.written() - {finding.state} & self.module_names)
        return others[0] if others else None

    def _shared(self) -> bool:
        return bool(self.context.shared_classes)

    def _declared(self, module: cst.Module) -> frozenset[str]:
        """The names of the module's classes that ``shared-classes`` declares (by name, by a
        base's name, or through a declared base class of the module)."""
        if not self.context.shared_classes:
            return frozenset()
        _, classes = enclosing_classes(module, ())
        ids = ClassPatterns(self.context.shared_classes).declared(classes)
        return frozenset(c.name.value for c in classes if id(c) in ids)

    def _evidence(
        self, module: cst.Module
    ) -> tuple[dict[str, _Evidence], dict[tuple[str, str], _Evidence], _Evidence | None]:
        """Find what shows a class, one method, or the module is shared between threads.

        A threading lock or a thread started on a bound method makes the whole class (or
        module) shared: the code defends itself against threads, or runs concurrently with its
        own object. Handing a bound method to an executor or ``to_thread`` makes only that
        method shared: the rest of the class may well run on the event loop thread alone.
        """
        by_class: dict[str, _Evidence] = {}
        by_method: dict[tuple[str, str], _Evidence] = {}
        first: _Evidence | None = None
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if (
                        isinstance(small, cst.Assign)
                        and isinstance(small.value, cst.Call)
                        and self.aliases.qualify(small.value.func) in _THREAD_LOCKS
                    ):
                        for target in small.targets:
                            name = dotted(target.target)
                            if name is not None:
                                self._module_locks[name] = small.value
        for call, owner in self._calls:
            what = self._thread_api(call)
            if what is None:
                continue
            found = _Evidence(call, what, self.aliases.qualify(call.func) in _THREAD_LOCKS)
            if self.aliases.qualify(call.func) in _CLASS_WIDE:
                if first is None:
                    first = found
                if owner is not None:
                    by_class.setdefault(owner, found)
            elif owner is not None:
                for arg in call.args:
                    if _bound_method(arg.value):
                        assert isinstance(arg.value, cst.Attribute)
                        by_method.setdefault((owner, arg.value.attr.value), found)
        for item, owner in self._with_names:
            name = dotted(item)
            if owner is not None and name in self._module_locks:
                by_class.setdefault(owner, _Evidence(item, f"with {name}", lock=True))
        return by_class, by_method, first

    def _thread_api(self, call: cst.Call) -> str | None:
        """Say what ``call`` shows about threads: a threading lock (the code defends itself
        against threads), or a bound method ``self.x`` handed to a thread or an executor."""
        qualified = self.aliases.qualify(call.func)
        if qualified in _THREAD_LOCKS:
            return _THREAD_APIS[qualified]
        if not any(_bound_method(arg.value) for arg in call.args):
            # Handing *some* callable to a thread says little about this class's own state.
            return None
        if qualified is not None and qualified in _THREAD_APIS:
            return _THREAD_APIS[qualified]
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        if method == "run_in_executor":
            return f"{render(func)}()"
        if method in ("submit", "map"):
            receiver = dotted(func.value) or ""
            last = receiver.rsplit(".", 1)[-1].lower()
            if "executor" in last or "pool" in last:
                return f"{receiver}.{method}()"
        return None


def _bound_method(expr: cst.BaseExpression) -> bool:
    """Say whether ``expr`` is ``self.<name>`` (a bound method handed to another thread)."""
    return (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value in ("self", "cls")
    )


def _state_root(state: str) -> str:
    """``self._d`` for ``self._d.x`` or ``cls._d``; ``_registry`` for ``_registry.x``: the
    names :mod:`._locking` records accesses under."""
    parts = state.split(".")
    if parts[0] in ("self", "cls") and len(parts) > 1:
        return f"self.{parts[1]}"
    return parts[0]


def _accepting(evidence: dict[str, _Evidence | None]) -> Callable[[str], bool]:
    """Return a filter that keeps the state keys the evidence covers."""
    return lambda key: _root(key, evidence) in evidence


def _root(key: str, evidence: dict[str, _Evidence | None]) -> str:
    root = key.split(".", 1)[0]
    return root if root in ("self", "cls") else ""
