"""Which code runs with a lock held: the evidence the check-then-act rules take from locks.

RacerD's lesson (Blackshear et al., OOPSLA 2018) is that the locks a programmer takes say which
state they consider shared: in a class that uses locks, the attributes read or written under a
lock somewhere are the shared ones, and the attributes it never touches under a lock are
usually confined to one thread (or one task). This module computes, for the methods of one
class (or the functions of a module), without metadata:

* which state each function touches, and which of it while a lock is held (``with lock:``,
  ``lock.acquire()`` ... ``lock.release()``, ``if lock.acquire(...):``, and the body of a
  ``try`` whose ``finally`` releases a lock: see :func:`released_by_finally`);
* the calls each function makes to functions of the same scope (``self.m()``, ``f()``), and
  whether a lock is held at the call;
* from those, one call level at a time until nothing changes: which private helpers run with
  the lock held by *every* caller (``covered``), and which state is written under a lock
  anywhere, directly or in a helper called with the lock held (``written``).

A helper named ``*_locked``/``*_unlocked`` (the convention for "the caller holds the lock"), or
one that starts by asserting ``lock.locked()`` or ``lock._is_owned()``, counts as covered
whatever its callers do, since its callers may live in other modules.

The module name starts with ``_`` so rule discovery skips it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from interlace.linters.rules._flow import (
    MUTATORS,
    block_body,
    children,
    dotted,
    is_lock_expr,
    store_targets,
)

__all__ = ("LockFacts", "LockScope", "lock_facts", "lock_operation", "released_by_finally")

_HELD_BY_CALLER = re.compile(r"_(un)?locked$")
"""Helpers that by name expect the caller to hold the lock (``_refresh_locked``)."""

_OWNERSHIP_TESTS = frozenset({"locked", "_is_owned"})


@dataclass(slots=True)
class _Usage:
    """What one function does with state and locks.

    Invariant: ``written_locked`` is a subset of ``written``; state is named
    ``self.<attr>`` for attributes of ``self``/``cls`` and by its root name for everything
    else.
    """

    name: str
    nested: bool
    written: set[str] = field(default_factory=set)
    written_locked: set[str] = field(default_factory=set)
    calls: list[tuple[str, bool]] = field(default_factory=list)
    asserted: bool = False
    holds_locks: bool = False


@dataclass(frozen=True, slots=True)
class LockFacts:
    """The lock evidence of one scope (a class's methods, or a module's functions).

    Attributes:
        covered: names of functions that always run with a lock held by the caller.
        written: state written (assigned, deleted, mutated in place) under a lock somewhere
            (``self._d``, ``_registry``). Reads do not count: code that takes its lock for
            every read shows nothing by one.
        uses_locks: some function of the scope takes a lock.
    """

    covered: frozenset[str]
    written: frozenset[str]
    uses_locks: bool


@dataclass(slots=True)
class LockScope:
    """The functions of one scope, collected during the traversal, scanned on demand.

    Args:
        is_lock: says whether a ``with`` item or an ``acquire`` receiver is a lock.
    """

    is_lock: Callable[[cst.BaseExpression], bool]
    functions: list[cst.FunctionDef] = field(default_factory=list)
    _facts: LockFacts | None = None

    def facts(self) -> LockFacts:
        """Scan the scope's functions (once) and return its :class:`LockFacts`."""
        if self._facts is None:
            self._facts = lock_facts(self.functions, self.is_lock)
        return self._facts


def lock_operation(
    expr: cst.BaseExpression, is_lock: Callable[[cst.BaseExpression], bool] = is_lock_expr
) -> str | None:
    """Return ``"acquire"`` or ``"release"`` for ``lock.acquire()``/``await lock.acquire()``/
    ``lock.release()``, else ``None``."""
    if isinstance(expr, cst.Await):
        expr = expr.expression
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in ("acquire", "release")
        and is_lock(expr.func.value)
    ):
        return expr.func.attr.value
    return None


def _statement_operation(
    stmt: cst.CSTNode, is_lock: Callable[[cst.BaseExpression], bool]
) -> str | None:
    """What a statement does to a lock for the statements after it: ``lock.acquire()``,
    ``await asyncio.wait_for(lock.acquire(), timeout)`` (the acquire-with-timeout idiom: the
    acquire call is an argument), ``lock.release()``, or an ``if``/``else`` that acquires on
    both branches."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Expr):
            value = small.value
            direct = lock_operation(value, is_lock)
            if direct is not None:
                return direct
            if isinstance(value, cst.Await):
                value = value.expression
            if isinstance(value, cst.Call) and any(
                lock_operation(arg.value, is_lock) == "acquire" for arg in value.args
            ):
                return "acquire"
        return None
    if isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.Else):
        branches = (block_body(stmt.body), block_body(stmt.orelse.body))
        if all(
            any(_statement_operation(s, is_lock) == "acquire" for s in branch)
            for branch in branches
        ):
            return "acquire"
    return None


def released_by_finally(
    stmt: cst.Try | cst.TryStar, is_lock: Callable[[cst.BaseExpression], bool] = is_lock_expr
) -> list[str]:
    """The locks (dotted names) that a statement of ``stmt``'s ``finally`` block releases
    unconditionally.

    Such a ``try`` body runs with the lock held, however it was acquired: releasing a lock that
    is not held raises (``RuntimeError`` for ``threading.Lock``/``RLock``, ``asyncio.Lock`` and
    ``_thread`` locks alike), and the ``finally`` releases on every way out of the body,
    normal completion included. So code written this way holds the lock from the first
    statement of the ``try`` on, whether it took it with ``lock.acquire()`` or through a helper
    the rule cannot see (``if not self._acquire_before(self._lock, deadline): return``). A
    release under an ``if`` in the ``finally`` proves nothing and does not count.
    """
    if stmt.finalbody is None:
        return []
    names: list[str] = []
    for line in block_body(stmt.finalbody.body):
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
            small = line.body[0]
            if isinstance(small, cst.Expr) and lock_operation(small.value, is_lock) == "release":
                call = small.value.expression if isinstance(small.value, cst.Await) else small.value
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
                    name = dotted(call.func.value)
                    if name is not None:
                        names.append(name)
    return names


def _asserts_ownership(
    stmts: Sequence[cst.BaseStatement | cst.BaseSmallStatement],
    is_lock: Callable[[cst.BaseExpression], bool],
) -> bool:
    """``assert self._lock.locked()`` among the first statements (after a docstring)."""
    for stmt in stmts[:3]:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Assert):
                test = small.test
                if (
                    isinstance(test, cst.Call)
                    and isinstance(test.func, cst.Attribute)
                    and test.func.attr.value in _OWNERSHIP_TESTS
                    and is_lock(test.func.value)
                ):
                    return True
    return False


def _state_name(node: cst.Attribute | cst.Name) -> str | None:
    chain = dotted(node)
    if chain is None:
        return None
    parts = chain.split(".")
    if parts[0] in ("self", "cls"):
        return f"self.{parts[1]}" if len(parts) > 1 else None
    return parts[0]


def _written(node: cst.CSTNode) -> Iterator[str]:
    """Yield the state a statement or call writes: assignment and ``del`` targets (``self._d``
    for ``self._d[k] = v``), and the receiver of a mutating method (``self._d.pop(k)``)."""
    stack = store_targets(node)
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _WRITERS
    ):
        stack.append(node.func.value)
    while stack:
        target = stack.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            stack.extend(element.value for element in target.elements)
            continue
        while isinstance(target, cst.Subscript) or (
            isinstance(target, cst.Attribute) and dotted(target) is None
        ):
            target = target.value
        if isinstance(target, (cst.Attribute, cst.Name)):
            name = _state_name(target)
            if name is not None:
                yield name


_WRITERS = MUTATORS | {"setdefault", "update"}


def _callee(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Name):
        return func.value
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value in ("self", "cls")
    ):
        return func.attr.value
    return None


def _scan(function: cst.FunctionDef, is_lock: Callable[[cst.BaseExpression], bool]) -> list[_Usage]:
    """Scan one function and the functions nested in it (each a usage of its own)."""
    usages: list[_Usage] = []
    todo: list[tuple[cst.FunctionDef, bool]] = [(function, False)]
    while todo:
        func, nested = todo.pop()
        usage = _Usage(func.name.value, nested)
        usages.append(usage)
        usage.asserted = _asserts_ownership(block_body(func.body), is_lock)
        stack: list[tuple[cst.CSTNode, int]] = [(func.body, 1 if usage.asserted else 0)]
        while stack:
            node, held = stack.pop()
            if isinstance(node, cst.FunctionDef):
                todo.append((node, True))
                continue
            if isinstance(node, cst.ClassDef):
                continue
            if isinstance(node, cst.With):
                inner = held
                for item in node.items:
                    stack.append((item.item, held))
                    if is_lock(item.item):
                        inner += 1
                        usage.holds_locks = True
                stack.append((node.body, inner))
                continue
            if isinstance(node, (cst.Try, cst.TryStar)) and released_by_finally(node, is_lock):
                usage.holds_locks = True
                stack.append((node.body, held + 1))
                stack.extend((handler, held + 1) for handler in node.handlers)
                if node.orelse is not None:
                    stack.append((node.orelse, held + 1))
                if node.finalbody is not None:
                    stack.append((node.finalbody, held))
                continue
            if isinstance(node, cst.If) and lock_operation(node.test, is_lock) == "acquire":
                usage.holds_locks = True
                stack.append((node.test, held))
                stack.append((node.body, held + 1))
                if node.orelse is not None:
                    stack.append((node.orelse, held))
                continue
            if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                current = held
                for stmt in node.body:
                    stack.append((stmt, current))
                    operation = _statement_operation(stmt, is_lock)
                    if operation == "acquire":
                        current += 1
                        usage.holds_locks = True
                    elif operation == "release" and current > held:
                        current -= 1
                continue
            for name in _written(node):
                usage.written.add(name)
                if held:
                    usage.written_locked.add(name)
            if isinstance(node, (cst.Attribute, cst.Name)):
                if _state_name(node) is not None:
                    continue
            elif isinstance(node, cst.Call):
                callee = _callee(node.func)
                if callee is not None:
                    usage.calls.append((callee, held > 0))
            stack.extend((child, held) for child in children(node))
    return usages


def _private(usage: _Usage) -> bool:
    """Functions whose callers are all in view: private methods and nested functions."""
    name = usage.name
    return usage.nested or (name.startswith("_") and not name.endswith("__"))


def lock_facts(
    functions: Iterable[cst.FunctionDef], is_lock: Callable[[cst.BaseExpression], bool]
) -> LockFacts:
    """Compute the :class:`LockFacts` of the functions of one scope."""
    usages = [usage for function in functions for usage in _scan(function, is_lock)]
    names = {usage.name for usage in usages}
    sites: dict[str, list[tuple[str, bool]]] = {name: [] for name in names}
    for usage in usages:
        for callee, held in usage.calls:
            if callee in sites and callee != usage.name:
                sites[callee].append((usage.name, held))
    private = {usage.name for usage in usages if _private(usage)}
    covered = {
        usage.name for usage in usages if usage.asserted or _HELD_BY_CALLER.search(usage.name)
    }
    reached = set(covered)
    changed = True
    while changed:
        changed = False
        for name in names - reached:
            if any(held or caller in reached for caller, held in sites[name]):
                reached.add(name)
                changed = True
        for name in (names & private) - covered:
            calls = sites[name]
            if calls and all(held or caller in covered for caller, held in calls):
                covered.add(name)
                changed = True
    written: set[str] = set()
    for usage in usages:
        written |= usage.written if usage.name in reached else usage.written_locked
    return LockFacts(
        covered=frozenset(covered),
        written=frozenset(written),
        uses_locks=any(usage.holds_locks or usage.asserted for usage in usages),
    )
