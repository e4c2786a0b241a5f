"""Rules about what other tasks do while this one is suspended: IL301, IL302, IL303.

* IL301 stale-restore-across-await: ``old = self.x; self.x = new; <suspend>; self.x = old``.
* IL302 pending-tasks-not-cancelled: ``asyncio.wait(..., return_when=FIRST_COMPLETED)`` whose
  pending tasks are not cancelled on every path.
* IL303 iterate-shared-while-awaiting: ``for x in self._subs: await ...`` over a container
  that the module mutates in place elsewhere.

All three decide from the tree alone (no metadata providers); see ``_flow``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

import libcst as cst

from interlace.linters._rule import LintContext, Related, Rule
from interlace.linters.rules._drivers import Drivers, drivers_of
from interlace.linters.rules._flow import (
    INIT_METHODS,
    MUTATORS,
    FactsCollector,
    FunctionFacts,
    StateNames,
    block_body,
    children,
    dotted,
    find_suspension,
    is_lock_expr,
    keyword,
    shared_by_tasks,
)

__all__ = (
    "FlagIterateSharedWhileAwaiting",
    "FlagPendingTasksNotCancelled",
    "FlagStaleRestoreAcrossAwait",
)

_Stmt = cst.BaseStatement | cst.BaseSmallStatement


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Yield ``node`` and its descendants in source order, not entering nested scopes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(list(children(current))))


# -- IL301 ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Save:
    state: str
    node: cst.CSTNode
    locks: frozenset[int]


@dataclass(slots=True)
class _RestoreScan:
    """A walk over one ``async def`` in source order looking for stale restores.

    Invariant: ``windows`` maps each saved state that the function has overwritten since the
    save to the first suspension point after that overwrite (``None`` while there is none).
    """

    names: StateNames
    quiet: frozenset[int] = frozenset()
    saves: dict[str, _Save] = field(default_factory=dict)
    windows: dict[str, cst.CSTNode | None] = field(default_factory=dict)
    held: list[int] = field(default_factory=list)
    guards: list[frozenset[str]] = field(default_factory=list)
    found: list[tuple[cst.CSTNode, str, str, _Save, cst.CSTNode]] = field(default_factory=list)
    acquisitions: int = 0
    in_handler: int = 0

    def block(self, stmts: Sequence[_Stmt]) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def suspend(self, node: cst.CSTNode | None) -> None:
        if node is None:
            return
        for state, suspension in self.windows.items():
            if suspension is None:
                self.windows[state] = node

    def events(self, node: cst.CSTNode | None) -> None:
        if node is not None:
            self.suspend(find_suspension(node, quiet=self.quiet))

    def stmt(self, stmt: _Stmt) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            self.block(stmt.body)
        elif isinstance(stmt, cst.Assign):
            self.assign(stmt)
        elif isinstance(stmt, cst.BaseSmallStatement):
            self.events(stmt)
        elif isinstance(stmt, (cst.If, cst.While)):
            self.events(stmt.test)
            self.guards.append(frozenset(self._reads(stmt.test)))
            self.block(block_body(stmt.body))
            self.guards.pop()
            if isinstance(stmt.orelse, cst.If):
                self.stmt(stmt.orelse)
            elif stmt.orelse is not None:
                self.block(block_body(stmt.orelse.body))
        elif isinstance(stmt, cst.For):
            self.events(stmt.iter)
            if stmt.asynchronous:
                self.suspend(stmt)
            self.block(block_body(stmt.body))
            if stmt.orelse is not None:
                self.block(block_body(stmt.orelse.body))
        elif isinstance(stmt, cst.With):
            pushed = 0
            for item in stmt.items:
                self.events(item.item)
                if stmt.asynchronous:
                    self.suspend(stmt)
                if is_lock_expr(item.item):
                    self.acquisitions += 1
                    self.held.append(self.acquisitions)
                    pushed += 1
            self.block(block_body(stmt.body))
            del self.held[len(self.held) - pushed :]
            if stmt.asynchronous and pushed < len(stmt.items):
                self.suspend(stmt)
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            self.block(block_body(stmt.body))
            for handler in stmt.handlers:
                self.in_handler += 1
                self.block(block_body(handler.body))
                self.in_handler -= 1
            if stmt.orelse is not None:
                self.block(block_body(stmt.orelse.body))
            if stmt.finalbody is not None:
                self.block(block_body(stmt.finalbody.body))
        elif isinstance(stmt, cst.Match):
            self.events(stmt.subject)
            for case in stmt.cases:
                self.block(block_body(case.body))

    def _reads(self, test: cst.BaseExpression) -> Iterator[str]:
        for node in _walk(test):
            if isinstance(node, (cst.Attribute, cst.Name)):
                key = self._state(node)
                if key is not None:
                    yield key

    def _state(self, expr: cst.BaseExpression) -> str | None:
        if isinstance(expr, cst.Attribute) or (
            isinstance(expr, cst.Name) and expr.value in self.names.declared
        ):
            return self.names.key(expr)
        return None

    def assign(self, stmt: cst.Assign) -> None:
        self.events(stmt.value)
        value = stmt.value
        for target in stmt.targets:
            node = target.target
            if isinstance(node, cst.Name) and node.value not in self.names.declared:
                self.saves.pop(node.value, None)
                read = self._state(value) if len(stmt.targets) == 1 else None
                if read is not None:
                    self.saves[node.value] = _Save(read, stmt, frozenset(self.held))
                    self.windows.pop(read, None)
                continue
            state = self._state(node)
            if state is None:
                continue
            save = self.saves.get(value.value) if isinstance(value, cst.Name) else None
            if save is not None and save.state == state:
                suspension = self.windows.pop(state, None)
                guarded = any(state in keys for keys in self.guards)
                # A restore in an `except` block is a rollback of a failed operation, a
                # different idiom from the temporary override this rule is about.
                rollback = self.in_handler > 0
                if (
                    suspension is not None
                    and not guarded
                    and not rollback
                    and not (save.locks & set(self.held))
                ):
                    assert isinstance(value, cst.Name)
                    self.found.append((stmt, state, value.value, save, suspension))
            elif any(s.state == state for s in self.saves.values()):
                self.windows.setdefault(state, None)


class FlagStaleRestoreAcrossAwait(FactsCollector, Rule):
    """IL301: an attribute saved, overwritten, then restored after a suspension point."""

    code: ClassVar[str] = "IL301"
    shares: ClassVar[str | None] = "tasks"
    name: ClassVar[str] = "stale-restore-across-await"
    summary: ClassVar[str] = (
        "An attribute is saved to a local, overwritten, and restored from the saved copy after "
        "a suspension point (including `yield` in an async context manager)."
    )
    message: ClassVar[str] = (
        "`{state}` is restored from the copy saved in `{saved}` after a suspension point "
        "({shared}). A "
        "value another task set while this one was suspended is overwritten with the stale "
        "copy. Keep per-task values in a `contextvars.ContextVar` (`token = var.set(new)` ... "
        "`var.reset(token)`), or restore only if `{state}` still holds the value this task set."
    )
    why: ClassVar[str] = (
        "The save/overwrite/restore idiom (`old = self.state; self.state = new; try: yield "
        "finally: self.state = old`) assumes nobody else touches the attribute in between. "
        "Across an `await` or a `yield` in an `@asynccontextmanager`, other tasks run: if one "
        "of them sets the attribute, the restore silently replaces its value with a stale "
        "one, and with two overlapping users the attribute ends in a state neither intended "
        "(seed 000's `state_context`)."
    )
    bad_example: ClassVar[str] = (
        "@asynccontextmanager\n"
        "async def state_context(self, new_state):\n"
        "    old_state = self.state\n"
        "    self.state = new_state\n"
        "    try:\n"
        "        yield\n"
        "    finally:\n"
        "        self.state = old_state\n"
    )
    good_example: ClassVar[str] = (
        "_state = contextvars.ContextVar('state', default=IDLE)\n"
        "@asynccontextmanager\n"
        "async def state_context(new_state):\n"
        "    token = _state.set(new_state)\n"
        "    try:\n"
        "        yield\n"
        "    finally:\n"
        "        _state.reset(token)\n"
    )
    suppress: ClassVar[str] = (
        "When the object is owned by one task for the whole save/restore (a per-request "
        "object), so no other task can write the attribute meanwhile."
    )
    TRIGGERS: ClassVar[Sequence[str]] = ("async def",)
    VALID: ClassVar[Sequence[str]] = (
        # No suspension point between overwrite and restore.
        "class A:\n"
        "    async def f(self):\n"
        "        old = self.x\n"
        "        self.x = 1\n"
        "        self.compute()\n"
        "        self.x = old\n"
        "        await self.flush()\n",
        # A contextvar instead of an attribute.
        "async def f():\n"
        "    token = var.set(1)\n"
        "    try:\n"
        "        await g()\n"
        "    finally:\n"
        "        var.reset(token)\n",
        # Compare-and-restore.
        "class A:\n"
        "    async def f(self, new):\n"
        "        old = self.x\n"
        "        self.x = new\n"
        "        await g()\n"
        "        if self.x is new:\n"
        "            self.x = old\n",
        # A lock held across the save and the restore.
        "class A:\n"
        "    async def f(self):\n"
        "        async with self._lock:\n"
        "            old = self.x\n"
        "            self.x = 1\n"
        "            await g()\n"
        "            self.x = old\n",
    )
    INVALID: ClassVar[Sequence[str]] = (
        "class A:\n"
        "    @asynccontextmanager\n"
        "    async def state_context(self, new):\n"
        "        old = self.state\n"
        "        self.state = new\n"
        "        try:\n"
        "            yield\n"
        "        finally:\n"
        "            self.state = old\n",
        "class A:\n"
        "    async def f(self):\n"
        "        old = self.x\n"
        "        self.x = 1\n"
        "        await g()\n"
        "        self.x = old\n",
    )

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.init_facts()

    def function_done(self, facts: FunctionFacts) -> None:
        node = facts.node
        if node.asynchronous is None:
            return
        names = StateNames.of(facts, self.module_names, include_params=False)
        scan = _RestoreScan(names, quiet=self.quiet)
        scan.block(block_body(node.body))
        for restore, state, saved, save, suspension in scan.found:
            self.report(
                restore,
                self.message.format(
                    state=state,
                    saved=saved,
                    shared=shared_by_tasks(
                        state, facts.class_name, declared=self.context.sharing == "declared"
                    ),
                ),
                related=[
                    Related(save.node, f"`{state}` is saved to `{saved}` here"),
                    Related(suspension, "another task can write it while this one is suspended"),
                ],
            )


# -- IL302 ---------------------------------------------------------------------------------


class _Path(Enum):
    """What every path through a piece of code does with the pending tasks."""

    HANDLED = "handled"
    FALLS_THROUGH = "falls through"
    LEAKS = "leaks"


@dataclass(frozen=True, slots=True)
class _Flow:
    """Where the paths through a piece of code leave the pending tasks.

    Attributes:
        path: whether every path handles the tasks, some path leaks them, or they fall through.
        finished: when they fall through, the tasks that every path reaching the end has seen
            finish (``if task in done:``), so that they need no cancelling.
    """

    path: _Path
    finished: frozenset[str] = frozenset()


_ALL = "*"  # what the pending set, or a collection built from it, holds
_HANDLED = _Flow(_Path.HANDLED)
_LEAKS = _Flow(_Path.LEAKS)
_WAIT = frozenset({"asyncio.wait", "asyncio.tasks.wait"})
_QUIET_CALLS = frozenset({"len", "bool", "print", "repr", "str", "debug", "info", "warning"})
_COPIES = frozenset({"list", "tuple", "set", "frozenset", "sorted"})


@dataclass(slots=True)
class _Pending:
    """How the code after an ``asyncio.wait`` can reach the pending tasks.

    A path is handled once it cancels, awaits or hands off the pending set or one of the
    tasks, directly or through a collection built from them (a path that cancels one task
    shows the code managing them; which of the others can still be pending there often
    depends on logic the rule cannot follow), or once it has seen every task this function
    created finish (``if task in done:``, ``if task.done():``): what is still pending then
    belongs to someone else.

    Attributes:
        pending: the name bound to the pending set (``done, pending = ...``), if any.
        done: the name bound to the done set, if any.
        tasks: the names of the tasks this function created and passed to ``asyncio.wait``.
        anonymous: whether the wait also holds tasks created inline, which only the pending
            set reaches.
        wait: the ``asyncio.wait`` call itself.
        aliases: local collections built from the tasks (``tasks = [a, b]``,
            ``live = [t for t in (a, b) if t is not None]``), each mapped to the tasks that
            every binding of it holds.
    """

    pending: str | None
    done: str | None
    tasks: frozenset[str]
    anonymous: bool
    wait: cst.Call
    aliases: dict[str, frozenset[str]] = field(default_factory=dict)
    closures: dict[str, frozenset[str]] = field(default_factory=dict)
    """Functions defined inside this one, each mapped to the tasks its body cancels or awaits
    through the enclosing scope (``def _abandon(): task.cancel()``): calling one handles them."""

    def collect_closures(self, body: cst.BaseSuite) -> None:
        """Record the nested functions that cancel or await the tasks they close over."""
        for node in _walk(body):
            if not isinstance(node, cst.FunctionDef):
                continue
            own = _local_names(node)
            held: set[str] = set()
            for inner in _walk(node.body):
                if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute):
                    if inner.func.attr.value != "cancel":
                        continue
                    target = inner.func.value
                elif isinstance(inner, cst.Await):
                    target = inner.expression
                else:
                    continue
                if isinstance(target, cst.Name) and target.value in self.tasks - own:
                    held.add(target.value)
            name = node.name.value
            found = frozenset(held)
            self.closures[name] = self.closures[name] & found if name in self.closures else found

    def complete(self, finished: frozenset[str]) -> bool:
        """Say whether every task this function created is among ``finished``."""
        return not self.anonymous and self.tasks <= finished

    def covers(self, expr: cst.BaseExpression) -> frozenset[str]:
        """Return the tasks ``expr`` holds: a task, the pending set, or a collection of them."""
        if isinstance(expr, cst.Name):
            if expr.value == self.pending:
                return frozenset({_ALL})
            if expr.value in self.tasks:
                return frozenset({expr.value})
            return self.aliases.get(expr.value, frozenset())
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return frozenset().union(*(self.covers(e.value) for e in expr.elements))
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return self._comprehension(expr)
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Name)
            and expr.func.value in _COPIES
            and len(expr.args) == 1
            and expr.args[0].keyword is None
            and not expr.args[0].star
        ):
            return self.covers(expr.args[0].value)
        if isinstance(expr, cst.BinaryOperation) and isinstance(
            expr.operator, (cst.Add, cst.BitOr)
        ):
            return self.covers(expr.left) | self.covers(expr.right)
        return frozenset()

    def _comprehension(self, expr: cst.ListComp | cst.SetComp | cst.GeneratorExp) -> frozenset[str]:
        # `[t for t in (a, b) if t is not None and not t.done()]` holds every task that may
        # still be pending; a filter of any other shape may drop one.
        loop = expr.for_in
        if (
            loop.inner_for_in is not None
            or loop.asynchronous is not None
            or not isinstance(loop.target, cst.Name)
            or not isinstance(expr.elt, cst.Name)
            or expr.elt.value != loop.target.value
            or not all(_keeps_live(i.test, loop.target.value) for i in loop.ifs)
        ):
            return frozenset()
        return self.covers(loop.iter)

    def collect_aliases(self, body: cst.BaseSuite) -> None:
        """Record the local collections built from the tasks, in source order.

        A name bound more than once holds only what every binding holds; a binding the model
        does not read (a loop target, an unpacking) or a removal from the collection leaves
        it holding nothing.
        """
        own = {self.pending, self.done, *self.tasks}
        seen: set[str] = set()

        def bind(name: str, held: frozenset[str]) -> None:
            if name in own:
                return
            self.aliases[name] = self.aliases[name] & held if name in seen else held
            seen.add(name)

        for node in _walk(body):
            if isinstance(node, cst.Assign):
                held = self.covers(node.value)
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        bind(target.target.value, held)
                    else:
                        for name in _bound(target.target):
                            bind(name, frozenset())
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                if isinstance(node.target, cst.Name):
                    bind(node.target.value, self.covers(node.value))
            elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
                name = node.target.value
                grows = isinstance(node.operator, (cst.AddAssign, cst.BitOrAssign))
                added = self.covers(node.value) if grows else frozenset()
                if name not in own:
                    self.aliases[name] = (
                        (self.aliases.get(name, frozenset()) | added) if grows else added
                    )
            elif isinstance(node, cst.For):
                for name in _bound(node.target):
                    bind(name, frozenset())
            elif isinstance(node, cst.AsName):
                for name in _bound(node.name):
                    bind(name, frozenset())
            elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
                bind(node.target.value, self.covers(node.value))
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.attr.value in MUTATORS
                and node.func.attr.value not in _GROWING
            ):
                bind(node.func.value.value, frozenset())

    def _cancels(self, call: cst.Call) -> frozenset[str]:
        if call is self.wait:
            return frozenset()
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cancel":
            return self.covers(func.value)
        callee = dotted(func)
        last = callee.rsplit(".", 1)[-1] if callee is not None else ""
        # A canceller, or any other call handed a task or the set (it awaits, stores or
        # cancels it), takes the tasks over.
        if last in _QUIET_CALLS:
            return frozenset()
        closed = self.closures.get(func.value, frozenset()) if isinstance(func, cst.Name) else None
        return frozenset().union(closed or frozenset(), *(self.covers(a.value) for a in call.args))

    def handled_by(self, stmt: _Stmt) -> frozenset[str]:
        """Return the tasks ``stmt`` itself cancels, awaits or hands off."""
        if isinstance(stmt, (cst.For, cst.While)):
            # `for t in pending`, `for t in live`, and any header that names the set or a
            # task (`for t in sorted(pending, key=...)`, `while pending:`).
            scanned = stmt.iter if isinstance(stmt, cst.For) else stmt.test
            header = self.covers(scanned) or frozenset(
                n.value
                for n in _walk(scanned)
                if isinstance(n, cst.Name) and (n.value == self.pending or n.value in self.tasks)
            )
            # The loop variable holds each task in turn: `for t in (a, b): await cancel(t)`.
            each = (
                stmt.target.value
                if isinstance(stmt, cst.For) and isinstance(stmt.target, cst.Name)
                else None
            )
            if header and any(self._handles_each(n, each) for n in _walk(stmt.body)):
                return header
            return frozenset()
        if not isinstance(stmt, cst.SimpleStatementLine):
            return frozenset()
        held: set[str] = set()
        for node in _walk(stmt):
            if isinstance(node, cst.Call):
                held |= self._cancels(node)
            elif isinstance(node, cst.Await):
                held |= self.covers(node.expression)
            elif isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
                if _is_cancel_call(node.elt):
                    held |= self.covers(node.for_in.iter)
            # Returning or storing the tasks hands them to someone else.
            elif (isinstance(node, cst.Return) and node.value is not None) or (
                isinstance(node, cst.Assign)
                and any(isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in node.targets)
            ):
                assert node.value is not None
                held |= self.covers(node.value)
        return frozenset(held)

    def _handles_each(self, node: cst.CSTNode, each: str | None) -> bool:
        """Say whether ``node``, in a loop over the tasks, cancels, awaits or hands off one."""

        def is_each(expr: cst.BaseExpression) -> bool:
            return isinstance(expr, cst.Name) and expr.value == each

        if isinstance(node, cst.Await):
            return is_each(node.expression)
        if not isinstance(node, cst.Call):
            return False
        if _is_cancel_call(node) or any(self.covers(a.value) for a in node.args):
            return True
        callee = dotted(node.func)
        quiet = callee is not None and callee.rsplit(".", 1)[-1] in _QUIET_CALLS
        return not quiet and any(is_each(a.value) for a in node.args)

    def finished(self, test: cst.BaseExpression, *, holds: bool) -> frozenset[str]:
        """Return the tasks known to be done where ``test`` evaluates to ``holds``.

        ``task in done`` and ``task.done()`` say the task finished; ``not`` flips them, and
        ``and`` (when true) or ``or`` (when false) joins what each side says.
        """
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self.finished(test.expression, holds=not holds)
        if isinstance(test, cst.BooleanOperation):
            joins = (
                isinstance(test.operator, cst.And) if holds else isinstance(test.operator, cst.Or)
            )
            if not joins:
                return frozenset()
            return self.finished(test.left, holds=holds) | self.finished(test.right, holds=holds)
        if (
            isinstance(test, cst.Call)
            and not test.args
            and isinstance(test.func, cst.Attribute)
            and test.func.attr.value == "done"
            and isinstance(test.func.value, cst.Name)
            and test.func.value.value in self.tasks
        ):
            return frozenset({test.func.value.value}) if holds else frozenset()
        if (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.left, cst.Name)
            and test.left.value in self.tasks
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == self.done
        ):
            operator = test.comparisons[0].operator
            if isinstance(operator, cst.In if holds else cst.NotIn):
                return frozenset({test.left.value})
        return frozenset()

    def anywhere(self, suite: cst.BaseSuite) -> frozenset[str]:
        """Return the tasks any statement of ``suite`` handles, even conditionally.

        Used for ``finally`` blocks, whose guards are typically ``if not task.done():``.
        """
        return frozenset().union(
            *(
                self.handled_by(n)
                for n in _walk(suite)
                if isinstance(n, (cst.SimpleStatementLine, cst.For, cst.While))
            )
        )

    def block(self, stmts: Sequence[_Stmt], finished: frozenset[str]) -> _Flow:
        for stmt in stmts:
            result = self.stmt(stmt, finished)
            if result.path is not _Path.FALLS_THROUGH:
                return result
            finished = result.finished
        if self.complete(finished):
            return _HANDLED
        return _Flow(_Path.FALLS_THROUGH, finished)

    def stmt(self, stmt: _Stmt, finished: frozenset[str]) -> _Flow:
        if self.complete(finished) or self.handled_by(stmt):
            return _HANDLED
        if isinstance(stmt, cst.SimpleStatementLine):
            return self.block(stmt.body, finished)
        if isinstance(stmt, (cst.Return, cst.Raise, cst.Break, cst.Continue)):
            return _LEAKS
        if isinstance(stmt, cst.If):
            taken = self.block(
                block_body(stmt.body), finished | self.finished(stmt.test, holds=True)
            )
            finished |= self.finished(stmt.test, holds=False)
            if isinstance(stmt.orelse, cst.If):
                other = self.stmt(stmt.orelse, finished)
            elif stmt.orelse is not None:
                other = self.block(block_body(stmt.orelse.body), finished)
            else:
                other = _Flow(_Path.FALLS_THROUGH, finished)
            if taken.path is _Path.HANDLED and self._unless_done(stmt.test):
                # `if not task.done(): task.cancel()`: a finished task needs no cancelling.
                return _HANDLED
            return _join(taken, other)
        if isinstance(stmt, (cst.For, cst.While)):
            # A loop after the wait may run zero times; only a return or raise in it leaks.
            if _leaves_function(stmt.body):
                return _LEAKS
            return _Flow(_Path.FALLS_THROUGH, finished)
        if isinstance(stmt, cst.With):
            return self.block(block_body(stmt.body), finished)
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            # Every way out of the `try` runs the `finally`.
            if stmt.finalbody is not None and self.anywhere(stmt.finalbody.body):
                return _HANDLED
            body = list(block_body(stmt.body))
            if stmt.orelse is not None:
                body.extend(block_body(stmt.orelse.body))
            results = [self.block(body, finished)]
            results.extend(self.block(block_body(h.body), finished) for h in stmt.handlers)
            return _join(*results)
        if isinstance(stmt, cst.Match):
            cases = (self.block(block_body(c.body), finished) for c in stmt.cases)
            return _join(_Flow(_Path.FALLS_THROUGH, finished), *cases)
        return _Flow(_Path.FALLS_THROUGH, finished)

    def _unless_done(self, test: cst.BaseExpression) -> bool:
        """Say whether ``test`` is ``not <task>.done()`` for one of the tasks."""
        return (
            isinstance(test, cst.UnaryOperation)
            and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Call)
            and isinstance(test.expression.func, cst.Attribute)
            and test.expression.func.attr.value == "done"
            and bool(self.covers(test.expression.func.value))
        )


def _join(*results: _Flow) -> _Flow:
    if any(r.path is _Path.LEAKS for r in results):
        return _LEAKS
    through = [r.finished for r in results if r.path is _Path.FALLS_THROUGH]
    if not through:
        return _HANDLED
    return _Flow(_Path.FALLS_THROUGH, frozenset.intersection(*through))


def _keeps_live(test: cst.BaseExpression, name: str) -> bool:
    """Say whether the filter ``test`` on ``name`` drops only what needs no cancelling.

    ``t``, ``t is not None``, ``not t.done()``, ``not t.cancelled()`` and their ``and``.
    """
    if isinstance(test, cst.Name):
        return test.value == name
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _keeps_live(test.left, name) and _keeps_live(test.right, name)
    if isinstance(test, cst.Comparison):
        return (
            isinstance(test.left, cst.Name)
            and test.left.value == name
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.IsNot)
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"
        )
    return (
        isinstance(test, cst.UnaryOperation)
        and isinstance(test.operator, cst.Not)
        and isinstance(test.expression, cst.Call)
        and not test.expression.args
        and isinstance(test.expression.func, cst.Attribute)
        and test.expression.func.attr.value in ("done", "cancelled")
        and isinstance(test.expression.func.value, cst.Name)
        and test.expression.func.value.value == name
    )


def _bound(target: cst.BaseExpression) -> Iterator[str]:
    for node in _walk(target):
        if isinstance(node, cst.Name):
            yield node.value


def _local_names(function: cst.FunctionDef) -> set[str]:
    """The names ``function`` binds itself (parameters, assignments), which shadow the
    enclosing scope's; a ``nonlocal`` name is the enclosing one."""
    params = function.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    shared: set[str] = set()
    for node in _walk(function.body):
        if isinstance(node, cst.Nonlocal):
            shared.update(n.name.value for n in node.names)
        elif isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
            names.update(_bound(node.target))
    return names - shared


def _is_cancel_call(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "cancel"
    )


def _leaves_function(body: cst.BaseSuite) -> bool:
    return any(isinstance(n, (cst.Return, cst.Raise)) for n in _walk(body))


@dataclass(frozen=True, slots=True)
class _Level:
    """One enclosing block of the statement that calls ``asyncio.wait``."""

    stmts: tuple[_Stmt, ...]
    index: int
    owner: cst.CSTNode | None
    role: str


def _blocks(stmt: cst.BaseStatement) -> Iterator[tuple[tuple[_Stmt, ...], str]]:
    if isinstance(stmt, cst.If):
        yield block_body(stmt.body), "body"
        if isinstance(stmt.orelse, cst.If):
            yield (stmt.orelse,), "orelse"
        elif stmt.orelse is not None:
            yield block_body(stmt.orelse.body), "orelse"
    elif isinstance(stmt, (cst.For, cst.While)):
        yield block_body(stmt.body), "loop"
        if stmt.orelse is not None:
            yield block_body(stmt.orelse.body), "orelse"
    elif isinstance(stmt, cst.With):
        yield block_body(stmt.body), "body"
    elif isinstance(stmt, (cst.Try, cst.TryStar)):
        yield block_body(stmt.body), "try"
        for handler in stmt.handlers:
            yield block_body(handler.body), "handler"
        if stmt.orelse is not None:
            yield block_body(stmt.orelse.body), "orelse"
        if stmt.finalbody is not None:
            yield block_body(stmt.finalbody.body), "finally"
    elif isinstance(stmt, cst.Match):
        for case in stmt.cases:
            yield block_body(case.body), "body"


def _path_to(
    stmts: tuple[_Stmt, ...], target: cst.CSTNode, owner: cst.CSTNode | None, role: str
) -> list[_Level] | None:
    for index, stmt in enumerate(stmts):
        if not any(n is target for n in _walk(stmt)):
            continue
        level = _Level(stmts, index, owner, role)
        if isinstance(stmt, cst.BaseCompoundStatement):
            for inner, inner_role in _blocks(stmt):
                found = _path_to(inner, target, stmt, inner_role)
                if found is not None:
                    return [level, *found]
        return [level]
    return None


def _first_completed(value: cst.BaseExpression | None, qualified: str | None) -> bool:
    if value is None:
        return False
    if isinstance(value, cst.SimpleString):
        return "FIRST_COMPLETED" in value.value
    name = qualified or dotted(value) or ""
    return name.rsplit(".", 1)[-1] == "FIRST_COMPLETED"


class FlagPendingTasksNotCancelled(FactsCollector, Rule):
    """IL302: pending tasks of ``asyncio.wait(FIRST_COMPLETED)`` not cancelled on every path."""

    code: ClassVar[str] = "IL302"
    name: ClassVar[str] = "pending-tasks-not-cancelled"
    summary: ClassVar[str] = (
        "`asyncio.wait(..., return_when=FIRST_COMPLETED)` whose pending tasks are not "
        "cancelled on every path."
    )
    message: ClassVar[str] = (
        "The pending tasks of `asyncio.wait(..., return_when=FIRST_COMPLETED)` are not "
        "cancelled on every path. A leaked task keeps running: a pending `queue.get()` later "
        "takes an item that no consumer sees, and a pending `event.wait()` piles up each "
        "round. Cancel them in a `finally` block: `for task in {pending}: task.cancel()`."
    )
    why: ClassVar[str] = (
        "`asyncio.wait` with `FIRST_COMPLETED` returns as soon as one task finishes and leaves "
        "the others running. Tasks wrapping `queue.get()` are the classic trap: the leaked "
        "getter still completes later and the item it took is dropped with its result "
        "(seed 000's `stream()`). Every path out of the code after the wait, early returns, "
        "`break`, exceptions and loop iterations included, must cancel what is pending. "
        "Only tasks the function started count: `create_task`, `ensure_future` or "
        "`asyncio.Task` inline in the list or bound to its own locals, or a local list or set "
        "whose every binding holds tasks it started (`tasks = [create_task(ask(p)) for p in "
        "providers]`, or an empty list grown by `tasks.append(create_task(...))`); a "
        "collection passed in, kept on `self` or rebound by the wait itself "
        "(`done, pending = await asyncio.wait(pending, ...)` in a draining loop) is not. "
        "A future another "
        "object returned (`conn.wait_ready()`) is not its to cancel; for targets before "
        "3.11 every call counts, since a coroutine in the list is wrapped into a new task. "
        "Cancelling, awaiting or handing off the pending set or one of those tasks handles "
        "them, also through a list, tuple, set or comprehension built from them "
        "(`live = [t for t in (a, b) if t is not None]`, then `for t in live: t.cancel()` or "
        "`gather(*live)`), and so does calling a function defined inside this one that "
        "cancels or awaits a task it closes over (`def abandon(): task.cancel()`); a path on "
        "which every task the function created has finished "
        "(`if task in done:`) leaks nothing of its own, even if a task it was handed is "
        "still pending."
    )
    bad_example: ClassVar[str] = (
        "import asyncio\n"
        "async def next_item(queue, done_event):\n"
        "    get = asyncio.create_task(queue.get())\n"
        "    stop = asyncio.create_task(done_event.wait())\n"
        "    done, pending = await asyncio.wait({get, stop}, "
        "return_when=asyncio.FIRST_COMPLETED)\n"
        "    return get.result() if get in done else None\n"
    )
    good_example: ClassVar[str] = (
        "import asyncio\n"
        "async def next_item(queue, done_event):\n"
        "    get = asyncio.create_task(queue.get())\n"
        "    stop = asyncio.create_task(done_event.wait())\n"
        "    try:\n"
        "        done, pending = await asyncio.wait({get, stop}, "
        "return_when=asyncio.FIRST_COMPLETED)\n"
        "    finally:\n"
        "        for task in (get, stop):\n"
        "            task.cancel()\n"
        "    return get.result() if get in done else None\n"
    )
    suppress: ClassVar[str] = (
        "When the pending tasks are deliberately kept (stored elsewhere and awaited later) in "
        "a way the rule cannot see."
    )
    TRIGGERS: ClassVar[Sequence[str]] = ("first_completed",)
    VALID: ClassVar[Sequence[str]] = (
        # Cancelled in finally.
        "import asyncio\n"
        "async def f(q, e):\n"
        "    a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())\n"
        "    try:\n"
        "        done, pending = await asyncio.wait({a, b}, "
        "return_when=asyncio.FIRST_COMPLETED)\n"
        "    finally:\n"
        "        for t in (a, b):\n"
        "            t.cancel()\n",
        # Cancelled by a loop right after the wait.
        "import asyncio\n"
        "async def f(q, e):\n"
        "    a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())\n"
        "    done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)\n"
        "    for t in pending:\n"
        "        t.cancel()\n"
        "    return done\n",
        # Handed to a same-file helper that cancels them.
        "from asyncio import create_task, wait, FIRST_COMPLETED\n"
        "def _cancel_all(tasks):\n"
        "    for t in tasks:\n"
        "        t.cancel()\n"
        "async def f(q, e):\n"
        "    a, b = create_task(q.get()), create_task(e.wait())\n"
        "    done, pending = await wait({a, b}, return_when=FIRST_COMPLETED)\n"
        "    _cancel_all(pending)\n",
        # Cancelled by a function defined here that closes over the task.
        "import asyncio\n"
        "async def f(lock):\n"
        "    t = asyncio.create_task(lock.acquire())\n"
        "    def abandon():\n"
        "        t.cancel()\n"
        "    done, _ = await asyncio.wait({t}, timeout=1, return_when=asyncio.FIRST_COMPLETED)\n"
        "    if t not in done:\n"
        "        abandon()\n",
        # Cancelled in finally through a list built from the tasks.
        "import asyncio\n"
        "async def f(q, e):\n"
        "    a = b = None\n"
        "    try:\n"
        "        a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())\n"
        "        await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)\n"
        "    finally:\n"
        "        live = [t for t in (a, b) if t is not None]\n"
        "        for t in live:\n"
        "            t.cancel()\n",
        # The one task it created is done; the other is the caller's.
        "import asyncio\n"
        "async def f(coro, background):\n"
        "    call = asyncio.ensure_future(coro)\n"
        "    done, _ = await asyncio.wait([call, background], "
        "return_when=asyncio.FIRST_COMPLETED)\n"
        "    if call in done:\n"
        "        return call.result()\n"
        "    call.cancel()\n",
        # ALL_COMPLETED leaves nothing pending.
        "import asyncio\n"
        "async def f(q, e):\n"
        "    a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())\n"
        "    done, _ = await asyncio.wait({a, b})\n",
        # The tasks belong to the caller (parameters), not to this function.
        "import asyncio\n"
        "async def f(a, b):\n"
        "    done, _ = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)\n"
        "    return done\n",
    )
    INVALID: ClassVar[Sequence[str]] = (
        "import asyncio\n"
        "async def f(q, e):\n"
        "    a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())\n"
        "    done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)\n"
        "    return done\n",
        "import asyncio as aio\n"
        "async def f(q, e):\n"
        "    a, b = aio.create_task(q.get()), aio.create_task(e.wait())\n"
        "    done, pending = await aio.wait({a, b}, return_when=aio.FIRST_COMPLETED)\n"
        "    if a in done:\n"
        "        return a.result()\n"
        "    for t in pending:\n"
        "        t.cancel()\n",
    )

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.init_facts()
        self._waits: list[tuple[cst.Call, FunctionFacts]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not self.facts_stack:
            return
        func = node.func
        if dotted(func) is not None and keyword(node, "return_when") is not None:
            self._waits.append((node, self.facts_stack[-1]))

    def leave_Module(self, original_node: cst.Module) -> None:
        for call, facts in self._waits:
            if self.aliases.qualify(call.func) not in _WAIT:
                continue
            when = keyword(call, "return_when")
            if not _first_completed(when, self.aliases.qualify(when) if when else None):
                continue
            leak = self._leak(call, facts)
            if leak is not None:
                self.report(
                    call,
                    self.message.format(pending=leak or "pending"),
                    related=[],
                )

    def _literal_tasks(
        self, first: cst.BaseExpression | None, call: cst.Call, facts: FunctionFacts
    ) -> tuple[set[str], bool] | None:
        """Return the tasks a literal first argument holds (named ones, and whether some are
        started inline), or ``None`` when it holds none this function started."""
        if not isinstance(first, (cst.List, cst.Tuple, cst.Set)):
            return None
        tasks = {
            e.value.value
            for e in first.elements
            if isinstance(e.value, cst.Name) and e.value.value in facts.assigned
        }
        anonymous = any(isinstance(e.value, cst.Call) for e in first.elements)
        if self.context.target_version >= (3, 11):
            # Since 3.11 `asyncio.wait` refuses coroutines, so an object made by a call of
            # unknown kind is a future or task that call returned: a connection's "position
            # ready" future, another object's task. Only a task this function started can
            # leak from it, and that is what the rule keeps (before 3.11 a bare coroutine
            # call in the list is wrapped into a new task, so every call counts there).
            tasks &= _started_tasks(facts.node)
            anonymous = any(_starts_task(e.value) for e in first.elements)
        if not tasks and not anonymous:
            return None
        if len(first.elements) == 1 and keyword(call, "timeout") is None:
            return None  # one task and no timeout: the wait returns only when it is done
        return tasks, anonymous

    def _leak(self, call: cst.Call, facts: FunctionFacts) -> str | None:
        """Return the pending set's name (``""`` if unnamed) when some path leaks it."""
        path = _path_to(block_body(facts.node.body), call, None, "function")
        if path is None:
            return None
        stmt = path[-1].stmts[path[-1].index]
        done, pending = _wait_names(stmt, call)
        # Only tasks this function created can leak from it: the wait's first argument must be
        # a literal holding a task created inline or bound to a local of this function, or a
        # local collection of tasks it started (`_task_collection`). Another collection
        # (`self._pending`, a parameter, one rebound by the wait) stays someone else's.
        first = call.args[0].value if call.args else None
        if isinstance(first, cst.Name) and _task_collection(facts.node, first.value):
            # `tasks = [create_task(ask(p)) for p in providers]`: a local collection every
            # binding of which holds tasks this function started; the collection stands for
            # them, and cancelling through it (`for t in tasks: t.cancel()`) handles them.
            model = _Pending(pending, done, frozenset({first.value}), True, call)
        else:
            found = self._literal_tasks(first, call, facts)
            if found is None:
                return None
            model = _Pending(pending, done, frozenset(found[0]), found[1], call)
        model.collect_aliases(facts.node.body)
        model.collect_closures(facts.node.body)
        if model.handled_by(stmt):
            return None
        for level in reversed(path):
            owner = level.owner
            if (
                isinstance(owner, (cst.Try, cst.TryStar))
                and level.role != "finally"
                and owner.finalbody is not None
                and model.anywhere(owner.finalbody.body)
            ):
                return None
        finished: frozenset[str] = frozenset()
        for level in reversed(path):
            after = level.stmts[level.index + 1 :]
            if level.role == "try":
                owner = level.owner
                assert isinstance(owner, (cst.Try, cst.TryStar))
                if owner.orelse is not None:
                    after = (*after, *block_body(owner.orelse.body))
            result = model.block(after, finished)
            if result.path is _Path.HANDLED:
                return None
            if result.path is _Path.LEAKS or level.role == "loop":
                return pending or ""
            finished = result.finished
        return pending or ""


_STARTS_TASK = frozenset({"create_task", "ensure_future", "Task"})


def _task_collection(function: cst.FunctionDef, name: str) -> bool:
    """Say whether every binding of the local ``name`` in ``function`` is a collection of
    tasks it starts: a comprehension or display of started tasks, or an empty list or set
    that only ``append``/``add`` of started tasks grow. A parameter, a loop target or an
    unpacking (``done, pending = await asyncio.wait(pending)``) makes it someone else's."""
    if any(p.name.value == name for p in (*function.params.params, *function.params.kwonly_params)):
        return False
    built = grown = False
    for node in _walk(function.body):
        value: cst.BaseExpression | None = None
        if isinstance(node, cst.Assign):
            for assigned in node.targets:
                if isinstance(assigned.target, cst.Name) and assigned.target.value == name:
                    value = node.value
                elif name in _bound(assigned.target):
                    return False
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)):
            if name in _bound(node.target):
                return False
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            receiver = node.func.value
            if (
                isinstance(receiver, cst.Name)
                and receiver.value == name
                and node.func.attr.value in ("append", "add")
                and len(node.args) == 1
            ):
                if not _starts_task(node.args[0].value):
                    return False
                grown = True
        if value is None:
            continue
        if isinstance(value, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            if not _starts_task(value.elt):
                return False
            built = True
        elif isinstance(value, (cst.List, cst.Set, cst.Tuple)) and value.elements:
            if not all(_starts_task(e.value) for e in value.elements):
                return False
            built = True
        elif _empty_collection(value):
            continue
        else:
            return False
    return built or grown


def _empty_collection(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.List, cst.Tuple)):
        return not value.elements
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value in ("list", "set")
        and not value.args
    )


def _starts_task(expr: cst.BaseExpression | None) -> bool:
    """Say whether ``expr`` starts a task: ``asyncio.create_task(...)``, ``loop.create_task``,
    a task group's ``create_task``, ``ensure_future(...)`` or ``asyncio.Task(...)``."""
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    name = func.attr.value if isinstance(func, cst.Attribute) else dotted(func)
    return name in _STARTS_TASK


def _started_tasks(function: cst.FunctionDef) -> set[str]:
    """The local names ``function`` binds to a task it starts (:func:`_starts_task`) in at
    least one assignment, also element by element (``a, b = create_task(x), create_task(y)``)
    and with ``:=``; other bindings of the name (``task = None`` first) do not matter."""
    out: set[str] = set()

    def bind(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name) and _starts_task(value):
            out.add(target.value)
        elif (
            isinstance(target, (cst.Tuple, cst.List))
            and isinstance(value, (cst.Tuple, cst.List))
            and len(target.elements) == len(value.elements)
        ):
            for t, v in zip(target.elements, value.elements, strict=True):
                bind(t.value, v.value)

    for node in _walk(function.body):
        if isinstance(node, cst.Assign):
            for assigned in node.targets:
                bind(assigned.target, node.value)
        elif isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
            bind(node.target, node.value)
    return out


def _wait_names(stmt: _Stmt, call: cst.Call) -> tuple[str | None, str | None]:
    """Return the names bound to the done and the pending set by ``done, pending = wait(...)``."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None, None
    for small in stmt.body:
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        value = small.value.expression if isinstance(small.value, cst.Await) else small.value
        target = small.targets[0].target
        if (
            value is call
            and isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == 2
        ):
            names = [
                e.value.value if isinstance(e.value, cst.Name) and e.value.value != "_" else None
                for e in target.elements
            ]
            return names[0], names[1]
    return None, None


# -- IL303 ---------------------------------------------------------------------------------

_GROWING = frozenset({"append", "appendleft", "add", "extend", "extendleft", "insert", "update"})
_SNAPSHOTS = frozenset({"list", "tuple", "sorted", "set", "frozenset", "dict", "copy", "deepcopy"})
_PASS_THROUGH = frozenset({"enumerate", "reversed", "zip", "iter"})
_VIEWS = frozenset({"items", "values", "keys"})


def _container(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """Return the container a ``for`` iterates over directly, or ``None`` for a snapshot."""
    while True:
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name) and func.value in _PASS_THROUGH and expr.args:
                expr = expr.args[0].value
                continue
            if isinstance(func, cst.Attribute) and func.attr.value in _VIEWS:
                expr = func.value
                continue
            if isinstance(func, cst.Attribute) and func.attr.value == "get":
                return expr
            return None
        if isinstance(expr, cst.Subscript):
            if any(isinstance(e.slice, cst.Slice) for e in expr.slice):
                return None
            return expr
        if isinstance(expr, (cst.Attribute, cst.Name)):
            return expr
        return None


def _base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """Strip element access: ``self._subs[t]``, ``self._subs.get(t)``, ``.setdefault(t, [])``."""
    return _split(expr)[0]


def _split(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, int]:
    """Return the container under element access and how many elements deep ``expr`` is.

    ``self._subs`` and ``self._subs.values()`` are the container itself (depth 0);
    ``self._subs[t]``, ``.get(t)`` and ``.setdefault(t, [])`` an element of it (depth 1).
    """
    depth = 0
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
            depth += 1
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("get", "setdefault", *_VIEWS)
        ):
            depth += expr.func.attr.value not in _VIEWS
            expr = expr.func.value
        else:
            return expr, depth


class FlagIterateSharedWhileAwaiting(FactsCollector, Rule):
    """IL303: a loop over a shared mutable container whose body suspends."""

    code: ClassVar[str] = "IL303"
    shares: ClassVar[str | None] = "tasks"
    name: ClassVar[str] = "iterate-shared-while-awaiting"
    summary: ClassVar[str] = (
        "Iterating a shared mutable container attribute directly with a suspension point in "
        "the loop body."
    )
    message: ClassVar[str] = (
        "`{state}` is iterated directly while the loop body suspends, and the module mutates "
        "it in place elsewhere ({shared}). Another task can add or remove elements during the "
        "`await`, which raises `RuntimeError` for a dict or set and skips or repeats list "
        "elements. Iterate over a snapshot taken before the loop, such as `list({state})`."
    )
    why: ClassVar[str] = (
        "While a loop body awaits, other tasks run, and one of them may subscribe, "
        "unsubscribe or drop an entry from the very container being iterated. A dict or set "
        "then raises `RuntimeError: changed size during iteration`; a list silently skips "
        "or repeats elements. Iterating `list(...)`, `tuple(...)`, `.copy()`, a slice or "
        "`sorted(...)` is immune (seed 002's message bus fix). The rule only flags containers "
        "that the same module mutates in place outside `__init__`, and not a loop in code "
        "that only one task ever runs (an async generator, which one consumer drives; a "
        "coroutine that consumes the object itself with `async for _ in self`; a private "
        "coroutine the object starts once as its own background task; private helpers only "
        "those call or await) when every method that writes the container is such code "
        "too, from the same task, and no method hands the container out (returns it, binds "
        "it to a local, passes it to a call): then nothing else can change it while the loop "
        "is suspended. A mutation counts "
        "only at the depth the loop walks: `self._subs[t].remove(cb)` against a loop over "
        "`self._subs[t]`, `del self._subs[t]` against a loop over `self._subs` (or its "
        "views). A loop over a local that the attribute stopped naming before it "
        "(`subs = self._subs; self._subs = []; for s in subs:`, on every path) walks a "
        "detached container and is not flagged either, nor is a list (a list display, "
        "comprehension, `list()` or `list[...]` annotation at every binding, in the class and "
        "in its base classes and subclasses in the module) that other code "
        "only appends to, extends or replaces items of: its iterator walks to the new end, "
        "and nothing raises, is skipped or repeated (a deque raises on any change, and "
        "`insert` shifts the elements under the loop). A store at the key the loop is "
        "visiting (`for k, v in self._d.items(): self._d[k] = await f(v)`) replaces a value "
        "and changes no size, so it is no evidence either. Nor is a loop that leaves "
        "(`return`, `raise`, `break`) on every path after each suspension in its body, with "
        "no `continue` of the loop between: it never advances its iterator once another task "
        "has run. Nor is a loop that holds a lock throughout (`async with self._lock:` around "
        "it, with no `wait()` or `release()` of that lock inside) when every mutation in the "
        "module holds the same lock: none can run while the loop waits. The lock must be "
        "named plainly (`self._lock`, not `self._locks[key]`), admit one holder (not a "
        "semaphore), and for module state be a module-level lock, not one per instance. "
        "Growing a dict or set from synchronous code is taken for setup-time registration "
        "and is no evidence, unless what it adds is a task started right there "
        "(`self._tasks[name] = asyncio.create_task(...)`, `self._bg.add(ensure_future(c))`): "
        "that is work spawned at run time, typically by another task while the loop waits."
    )
    bad_example: ClassVar[str] = (
        "class Bus:\n"
        "    def unsubscribe(self, cb):\n"
        "        self._subscribers.remove(cb)\n"
        "    async def publish(self, event):\n"
        "        for cb in self._subscribers:\n"
        "            await cb(event)\n"
    )
    good_example: ClassVar[str] = (
        "class Bus:\n"
        "    def unsubscribe(self, cb):\n"
        "        self._subscribers.remove(cb)\n"
        "    async def publish(self, event):\n"
        "        for cb in list(self._subscribers):\n"
        "            await cb(event)\n"
    )
    suppress: ClassVar[str] = (
        "When every mutation of the container happens in the same task as the loop, or under "
        "a lock that the loop also holds."
    )
    TRIGGERS: ClassVar[Sequence[str]] = ("await", "async with", "async for")
    VALID: ClassVar[Sequence[str]] = (
        "class Bus:\n"
        "    def unsubscribe(self, cb):\n"
        "        self._subs.remove(cb)\n"
        "    async def publish(self, e):\n"
        "        for cb in list(self._subs):\n"
        "            await cb(e)\n",
        "class Bus:\n"
        "    def unsubscribe(self, t, cb):\n"
        "        self._subs[t].remove(cb)\n"
        "    async def publish(self, e):\n"
        "        subs = self._subs.get(e.type, []).copy()\n"
        "        for cb in subs:\n"
        "            await cb(e)\n",
        # Never mutated in place outside __init__.
        "class Bus:\n"
        "    def __init__(self, subs):\n"
        "        self._subs = []\n"
        "        self._subs.extend(subs)\n"
        "    async def publish(self, e):\n"
        "        for cb in self._subs:\n"
        "            await cb(e)\n",
        # Only the stream's async generator, driven by one consumer, touches `_open`.
        "class Stream:\n"
        "    async def events(self, source):\n"
        "        async for e in source:\n"
        "            self._open[e.id] = e\n"
        "            yield e\n"
        "        for key in self._open:\n"
        "            await self.close(key)\n",
    )
    INVALID: ClassVar[Sequence[str]] = (
        "class Bus:\n"
        "    def unsubscribe(self, cb):\n"
        "        self._subs.remove(cb)\n"
        "    async def publish(self, e):\n"
        "        for cb in self._subs:\n"
        "            await cb(e)\n",
        "class Bus:\n"
        "    def unsubscribe(self, t, cb):\n"
        "        self._subs[t].remove(cb)\n"
        "    async def publish(self, e):\n"
        "        for cb in self._subs[e.type]:\n"
        "            await cb(e)\n",
    )

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.init_facts()
        self._loops: list[tuple[cst.For, tuple[str, int], cst.CSTNode, FunctionFacts]]
        self._loops = []
        # Keyed by the container and the depth of what is mutated: `self._subs[t].remove(cb)`
        # changes the list a loop over `self._subs[t]` walks, and cannot break a loop over
        # `self._subs` (whose size it leaves alone); `del self._subs[t]` is the other way round.
        self._mutated: dict[tuple[str, int], cst.CSTNode] = {}
        # The mutations that can make a loop over a *list* skip or repeat an element: growing
        # it at the end (`append`, `extend`, `+=`) or replacing an item cannot.
        self._reorders: dict[tuple[str, int], cst.CSTNode] = {}
        # The locks held at every mutation of each of those (their intersection), and at
        # each loop: a loop that holds a lock every mutation holds too cannot be broken.
        self._mutated_under: dict[tuple[str, int], frozenset[str]] = {}
        self._reorders_under: dict[tuple[str, int], frozenset[str]] = {}
        self._loop_locks: dict[int, frozenset[str]] = {}
        self._held: list[tuple[int, str]] = []
        # Names bound to a semaphore somewhere in the module, whatever they are called.
        self._semaphores: set[str] = set()
        # What each container is bound to: "list" for a list display, comprehension, `list()`
        # or a `list[...]` annotation, "other" for anything else.
        self._kinds: dict[str, set[str]] = {}
        # The base classes (by name) of each class in the module, for `_kinds_of`.
        self._bases: dict[str, set[str]] = {}
        self._for_stack: list[tuple[int, cst.For]] = []
        self._methods: dict[str, list[cst.FunctionDef]] = {}
        self._nested: set[int] = set()
        self._drivers: dict[str, Drivers] = {}
        # The value of the assignment being visited, for its subscript targets.
        self._assigned: cst.BaseExpression | None = None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        super().visit_ClassDef(node)
        bases = self._bases.setdefault(node.name.value, set())
        for arg in node.bases:
            value = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
            name = dotted(value)
            if name is not None:
                bases.add(name.rsplit(".", 1)[-1])

    def _kinds_of(self, key: str) -> set[str]:
        """Return how ``key`` is bound anywhere in its class's family within the module.

        The family is the class and every class of this module linked to it by inheritance
        (its bases, its subclasses, and theirs): a binding in any of them may be the one a loop
        sees, so a `list` binding in a base class and a `deque` in a subclass both count for a
        loop in either. A sibling's binding counts too, which can only keep a finding.
        """
        owner, state = key.split(":", 1)
        if not owner:
            return self._kinds.get(key, set())
        family = {owner}
        changed = True
        while changed:
            changed = False
            for name, bases in self._bases.items():
                if name in family:
                    new = bases & self._bases.keys() - family
                elif bases & family:
                    new = {name}
                else:
                    continue
                if new:
                    family |= new
                    changed = True
        kinds: set[str] = set()
        for name in family:
            kinds |= self._kinds.get(f"{name}:{state}", set())
        return kinds

    def _owner_key(self, expr: cst.BaseExpression) -> str | None:
        """Return ``Class:self._subs`` / ``:_registry`` for a container, keyed by its owner."""
        if not self.facts_stack:
            return None
        facts = self.facts_stack[-1]
        names = StateNames.of(facts, self.module_names, include_params=False)
        base = _base(expr)
        if not isinstance(base, (cst.Attribute, cst.Name)):
            return None
        key = names.key(base) if isinstance(base, cst.Attribute) else None
        if isinstance(base, cst.Name) and (
            base.value in facts.declared
            or (base.value in self.module_names and base.value not in facts.assigned)
        ):
            key = base.value
        if key is None:
            return None
        owner = (facts.class_name or "") if key.split(".", 1)[0] in ("self", "cls") else ""
        return f"{owner}:{key}"

    def _mutation(
        self,
        target: cst.BaseExpression,
        node: cst.CSTNode,
        *,
        grows: bool,
        appends: bool = False,
        task: bool = False,
    ) -> None:
        """Record an in-place mutation that can break a concurrent loop over ``target``.

        Growing a container from synchronous code is mostly registration at setup time
        (``add_sink``, ``register``), and a list loop simply sees the new element; so only
        removals and reorderings anywhere, and any mutation inside an ``async def`` (which runs
        interleaved with other tasks), count as evidence. ``appends`` marks a mutation that
        cannot break a loop over a list (``append``, ``extend``, ``+=``, an item replaced), which
        only sees the new element. ``task`` marks a task started and stored by the mutation
        (``self._tasks[name] = asyncio.create_task(...)``): that is not setup-time
        registration but work spawned at run time, often by another task while a loop over
        the container waits on an earlier one, so it counts from synchronous code too.
        """
        if not self.facts_stack:
            return
        facts = self.facts_stack[-1]
        if facts.node.name.value in INIT_METHODS:
            return
        if grows and facts.node.asynchronous is None and not task:
            return
        key = self._owner_key(target)
        if key is not None:
            at = (key, _split(target)[1])
            held = self._locks_held()
            self._mutated.setdefault(at, node)
            self._mutated_under[at] = self._mutated_under.get(at, held) & held
            if not appends:
                self._reorders.setdefault(at, node)
                self._reorders_under[at] = self._reorders_under.get(at, held) & held

    def _locks_held(self) -> frozenset[str]:
        """Return the locks the innermost function holds here by a ``with``/``async with``."""
        depth = len(self.facts_stack)
        return frozenset(name for at, name in self._held if at == depth)

    def visit_With(self, node: cst.With) -> None:
        depth = len(self.facts_stack)
        self._held.extend((depth, name) for name in _exclusive_locks(node))

    def leave_With(self, original_node: cst.With) -> None:
        del self._held[len(self._held) - len(_exclusive_locks(original_node)) :]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in MUTATORS:
            method = func.attr.value
            self._mutation(
                func.value,
                node,
                grows=method in _GROWING,
                appends=method in _LIST_APPENDS,
                task=any(_starts_task(a.value) for a in node.args),
            )

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        super().visit_AssignTarget(node)
        if isinstance(node.target, cst.Subscript) and not self._at_current_key(node.target):
            replaces = not any(isinstance(e.slice, cst.Slice) for e in node.target.slice)
            self._mutation(
                node.target.value,
                node,
                grows=True,
                appends=replaces,
                task=_starts_task(self._assigned),
            )

    def visit_For(self, node: cst.For) -> None:
        super().visit_For(node)
        self._for_stack.append((len(self.facts_stack), node))
        held = self._locks_held()
        if held:
            self._loop_locks[id(node)] = held - _released_in(node.body, held)

    def leave_For(self, original_node: cst.For) -> None:
        self._for_stack.pop()

    def _at_current_key(self, target: cst.Subscript) -> bool:
        """Say whether ``target`` stores at the key a loop over the same dict is visiting.

        ``for name, c in self._d.items(): self._d[name] = await embed(c)`` replaces the value
        of a key the dict holds, which changes neither its size nor its order, so it breaks
        no loop over it (neither the loop variable nor the container may be rebound inside
        the loop).
        """
        if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
            return False
        key = target.slice[0].slice.value
        if not isinstance(key, cst.Name):
            return False
        for depth, loop in reversed(self._for_stack):
            if depth != len(self.facts_stack):
                return False
            iterated: cst.BaseExpression = loop.iter
            held: cst.BaseExpression = loop.target
            if isinstance(iterated, cst.Call):
                func = iterated.func
                if iterated.args or not isinstance(func, cst.Attribute):
                    continue
                if func.attr.value == "items":
                    if not (isinstance(held, cst.Tuple) and len(held.elements) == 2):
                        continue
                    held = held.elements[0].value
                elif func.attr.value != "keys":
                    continue
                iterated = func.value
            if (
                loop.asynchronous is None
                and isinstance(held, cst.Name)
                and held.value == key.value
                and iterated.deep_equals(target.value)
                and not _rebinds(loop.body, key.value)
                and not any(
                    isinstance(n, cst.AssignTarget) and n.target.deep_equals(iterated)
                    for n in _walk(loop.body)
                )
            ):
                return True
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assigned = node.value
        self._note_semaphore([t.target for t in node.targets], node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Tuple | cst.List):
                # `self._a, self._b = ...`: what each gets is not shown.
                for element in _targets(target.target):
                    self._bound(element, "other")
            else:
                self._bound(target.target, _list_kind(node.value, None))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        super().visit_AnnAssign(node)
        self._note_semaphore([node.target], node.value)
        self._bound(node.target, _list_kind(node.value, node.annotation.annotation))

    def _note_semaphore(
        self, targets: Sequence[cst.BaseExpression], value: cst.BaseExpression | None
    ) -> None:
        """Remember names bound to ``Semaphore(...)`` (``self._io_lock = Semaphore(4)``)."""
        if isinstance(value, cst.Call) and _NOT_EXCLUSIVE.search(dotted(value.func) or ""):
            self._semaphores.update(n for n in map(dotted, targets) if n is not None)

    def _bound(self, target: cst.BaseExpression, kind: str) -> None:
        """Record what ``target`` (a container attribute or module name) is bound to."""
        if self.facts_stack:
            if not isinstance(target, (cst.Attribute, cst.Name)):
                return
            key = self._owner_key(target)
            if key is None or _split(target)[1]:
                return
        elif self.class_stack and isinstance(target, cst.Name):
            # A class-body annotation (`_subs: list[Callback] = field(default_factory=list)`).
            key = f"{self.class_stack[-1]}:self.{target.value}"
        elif not self.class_stack and isinstance(target, cst.Name):
            key = f":{target.value}"
        else:
            return
        self._kinds.setdefault(key, set()).add(kind)

    def visit_Del(self, node: cst.Del) -> None:
        for target in _targets(node.target):
            if isinstance(target, cst.Subscript):
                self._mutation(target.value, node, grows=False)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        super().visit_AugAssign(node)
        if isinstance(node.target, (cst.Attribute, cst.Subscript)):
            extends = isinstance(node.operator, cst.AddAssign)
            self._mutation(node.target, node, grows=True, appends=extends)

    def function_done(self, facts: FunctionFacts) -> None:
        node = facts.node
        if self.facts_stack:
            self._nested.add(id(node))
        elif facts.class_name is not None:
            self._methods.setdefault(facts.class_name, []).append(node)
        if (
            node.asynchronous is None
            or find_suspension(node.body, include_yield=False, quiet=self.quiet) is None
        ):
            return
        self.facts_stack.append(facts)
        try:
            aliases: dict[str, tuple[cst.BaseExpression, cst.Assign]] = {}
            for current in _walk(node.body):
                if isinstance(current, cst.Assign) and len(current.targets) == 1:
                    target = current.targets[0].target
                    if isinstance(target, cst.Name):
                        aliases.pop(target.value, None)
                        direct = _container(current.value)
                        if direct is not None:
                            aliases[target.value] = (direct, current)
                elif isinstance(current, cst.For) and not current.asynchronous:
                    self._loop(current, aliases)
        finally:
            self.facts_stack.pop()

    def _loop(
        self, loop: cst.For, aliases: dict[str, tuple[cst.BaseExpression, cst.Assign]]
    ) -> None:
        container = _container(loop.iter)
        if isinstance(container, cst.Name) and container.value in aliases:
            container, binding = aliases[container.value]
            key = self._owner_key(container)
            if key is not None and self._swapped(loop, binding, key):
                return
        if container is None:
            return
        key = self._owner_key(container)
        if key is None:
            return
        # `yield` is left out: a consumer that mutates the container between items is a
        # plain iteration bug, not a concurrency one.
        suspension = find_suspension(loop.body, include_yield=False, quiet=self.quiet)
        if suspension is not None and not _leaves_after_each_suspension(block_body(loop.body)):
            depth = _split(container)[1]
            self._loops.append((loop, (key, depth), suspension, self.facts_stack[-1]))

    def _swapped(self, loop: cst.For, binding: cst.Assign, key: str) -> bool:
        """Say whether the container is replaced between ``binding`` and ``loop`` on every path.

        ``subs = self._subs; self._subs = []; for s in subs: await s()``: the loop walks a
        container that the attribute no longer names, so the mutations elsewhere, which go
        through the attribute, cannot reach it. Only statements that run before the loop
        whenever it runs count: earlier statements of the blocks that enclose it.
        """
        path = _path_to(block_body(self.facts_stack[-1].node.body), loop, None, "function")
        seen = False
        for level in path or ():
            for stmt in level.stmts[: level.index]:
                if not isinstance(stmt, cst.SimpleStatementLine):
                    continue
                for small in stmt.body:
                    if small is binding:
                        seen = True
                    elif seen and isinstance(small, cst.Assign):
                        targets = (t.target for t in small.targets)
                        if any(
                            isinstance(t, (cst.Attribute, cst.Name)) and self._owner_key(t) == key
                            for t in targets
                        ):
                            return True
        return False

    def _confined(self, facts: FunctionFacts, state: str) -> bool:
        """Say whether only the one task that runs the looping method can mutate ``state``
        (see :mod:`._drivers`): the method is driven by one task, and so is every writer."""
        owner = facts.class_name
        if owner is None or id(facts.node) in self._nested or not state.startswith("self."):
            return False
        drivers = self._drivers.get(owner)
        if drivers is None:
            drivers = self._drivers[owner] = drivers_of(self._methods.get(owner, ()))
        root = ".".join(state.split(".", 2)[:2])
        return drivers.confined(facts.node.name.value, root)

    def leave_Module(self, original_node: cst.Module) -> None:
        for loop, (key, depth), suspension, facts in self._loops:
            # A list that other code only grows at the end (or whose items it replaces) is
            # walked to its new end: nothing raises, nothing is skipped or repeated.
            is_list = depth == 0 and self._kinds_of(key) == {"list"}
            mutation = (self._reorders if is_list else self._mutated).get((key, depth))
            if mutation is None:
                continue
            # Every mutation holds a lock the loop holds throughout: none runs while it waits.
            under = (self._reorders_under if is_list else self._mutated_under)[(key, depth)]
            if key.startswith(":"):
                # Module state: `self._lock` is one lock per instance, and excludes nothing.
                under = frozenset(n for n in under if n.split(".", 1)[0] not in ("self", "cls"))
            if under & self._loop_locks.get(id(loop), frozenset()) - self._semaphores:
                continue
            state = key.split(":", 1)[1]
            if self._confined(facts, state):
                continue
            self.report(
                loop.iter,
                self.message.format(
                    state=state,
                    shared=shared_by_tasks(
                        state, facts.class_name, declared=self.context.sharing == "declared"
                    ),
                ),
                related=[
                    Related(suspension, "the loop body suspends here"),
                    Related(mutation, f"`{state}` is mutated in place here"),
                ],
            )


_NOT_EXCLUSIVE = re.compile(r"sem(aphore)?$|CapacityLimiter$", re.IGNORECASE)


def _exclusive_locks(node: cst.With) -> list[str]:
    """Return the locks a ``with`` statement holds that admit one holder at a time.

    Only a lock named by a plain dotted name counts (``self._lock``, ``_pool_lock``): under
    ``self._locks[key]`` two keys are two locks, and a call may return a new one each time.
    A semaphore admits several holders, so it excludes nothing (one bound under a lock's
    name is left out later, see ``_semaphores``).
    """
    names = []
    for item in node.items:
        name = dotted(item.item)
        if name is not None and is_lock_expr(item.item) and not _NOT_EXCLUSIVE.search(name):
            names.append(name)
    return names


def _released_in(body: cst.BaseSuite, held: frozenset[str]) -> frozenset[str]:
    """Return the locks of ``held`` that ``body`` lets go of: ``cond.wait()``, ``release()``."""
    released = set()
    for node in _walk(body):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("wait", "wait_for", "release")
        ):
            name = dotted(node.func.value)
            if name in held:
                released.add(name)
    return frozenset(released)


def _leaves_after_each_suspension(stmts: Sequence[_Stmt]) -> bool:
    """Say whether the loop leaves, on every path, after each suspension in its body.

    A loop that returns, raises or breaks right after every ``await`` in its body never
    advances its iterator once another task has run, so nothing that task does to the
    container can break it (``for s in self._sessions.values(): if s.id == key: await
    s.close(); return``). Between the suspension and the exit may stand anything that falls
    through or leaves: simple statements, and compound ones (``if entry not in self._cache:
    return None``) without a ``continue`` of this loop. The suspension itself may sit in an
    ``if`` of the body; inside a ``try`` (whose handler may resume the loop) it needs the exit
    after the whole statement.
    """
    flat = _flatten(stmts)
    for index, stmt in enumerate(flat):
        if find_suspension(stmt, include_yield=False) is None:
            continue
        if isinstance(stmt, cst.BaseSmallStatement):
            if _exits(flat[index:]):
                continue
            return False
        if (
            isinstance(stmt, cst.If)
            and find_suspension(stmt.test, include_yield=False) is None
            and _leaves_after_each_suspension(block_body(stmt.body))
            and (stmt.orelse is None or _leaves_after_each_suspension(_branch(stmt.orelse)))
        ):
            continue
        if not _continues(stmt) and _exits(flat[index + 1 :]):
            continue
        return False
    return True


def _flatten(stmts: Sequence[_Stmt]) -> list[_Stmt]:
    """Return the statements with each simple line split into its small statements."""
    flat: list[_Stmt] = []
    for stmt in stmts:
        flat.extend(stmt.body if isinstance(stmt, cst.SimpleStatementLine) else (stmt,))
    return flat


def _branch(orelse: cst.If | cst.Else) -> Sequence[_Stmt]:
    """Return the statements of an ``elif`` (as a one-statement block) or of an ``else``."""
    return (orelse,) if isinstance(orelse, cst.If) else block_body(orelse.body)


def _exits(flat: Sequence[_Stmt]) -> bool:
    """Say whether the statements leave the loop on every path without advancing it.

    They must end in a ``return``, ``raise`` or ``break`` of their own block; a compound
    statement on the way may leave earlier or fall through to it (``if entry not in
    self._cache: return None``), but must not hold a ``continue`` of the loop.
    """
    for stmt in flat:
        if isinstance(stmt, (cst.Return, cst.Raise, cst.Break)):
            return True
        if _continues(stmt):
            return False
    return False


def _continues(node: cst.CSTNode) -> bool:
    """Say whether ``node`` holds a ``continue`` of the enclosing loop (not of a nested one)."""
    if isinstance(node, cst.Continue):
        return True
    if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return False
    return any(_continues(child) for child in children(node))


def _rebinds(body: cst.BaseSuite, name: str) -> bool:
    """Say whether ``body`` binds ``name`` (an assignment, a loop or ``with`` target, ``:=``)."""
    for node in _walk(body):
        bound: cst.BaseExpression
        if isinstance(node, cst.AssignTarget | cst.For | cst.AugAssign | cst.AnnAssign):
            bound = node.target
        elif isinstance(node, cst.AsName | cst.NamedExpr):
            bound = node.name if isinstance(node, cst.AsName) else node.target
        else:
            continue
        if name in _names_bound(bound):
            return True
    return False


def _names_bound(target: cst.BaseExpression) -> set[str]:
    """Return the names a binding target binds: ``a``, ``a, (b, *c)``; not ``d[a]`` or ``o.a``."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Tuple | cst.List):
        return set().union(*(_names_bound(e.value) for e in target.elements))
    return set()


_LIST_APPENDS = frozenset({"append", "extend"})
_LIST_TYPES = frozenset({"list", "List", "typing.List"})


def _list_kind(value: cst.BaseExpression | None, annotation: cst.BaseExpression | None) -> str:
    """Say whether a binding makes its target a list: ``"list"`` or ``"other"``.

    A list display or comprehension, ``list(...)`` and ``field(default_factory=list)`` build a
    list, and so does a ``list[...]`` annotation. A deque, a set or a dict (whose
    iterators raise on any change of size) or anything the syntax does not show is "other".
    """
    if annotation is not None:
        base = annotation.value if isinstance(annotation, cst.Subscript) else annotation
        if dotted(base) in _LIST_TYPES:
            return "list"
    if value is None:
        return "other"
    if isinstance(value, (cst.List, cst.ListComp)):
        return "list"
    if isinstance(value, cst.Call):
        callee = dotted(value.func)
        if callee == "list":
            return "list"
        if callee in ("field", "dataclasses.field") and any(
            a.keyword is not None
            and a.keyword.value == "default_factory"
            and isinstance(a.value, cst.Name)
            and a.value.value == "list"
            for a in value.args
        ):
            return "list"
    return "other"


def _targets(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(expr, (cst.Tuple, cst.List)):
        for element in expr.elements:
            yield from _targets(element.value)
    else:
        yield expr
