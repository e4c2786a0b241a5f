"""Which ``await`` expressions of a module cannot suspend.

A rule that says "a suspension point between the check and the write" must name one that can
suspend. Two kinds of ``await`` never hand control to the event loop, and both are common in
agent code:

- ``await q.put(item)`` on an ``asyncio.Queue`` built without a bound (``Queue()``,
  ``Queue(0)``, ``Queue(maxsize=-1)``): ``Queue.put`` waits only while the queue is full, and
  an unbounded queue never is, so it returns without yielding (``asyncio/queues.py`` of
  CPython 3.11 to 3.13).
- ``await self.helper()`` or ``await helper()`` where the coroutine is defined in the same
  module and every ``await`` in its body is itself one of these: a coroutine that never
  suspends runs to completion inside the caller's step.

Everything else is assumed to suspend, including ``await asyncio.sleep(0)`` (it yields once by
design), ``async with``/``async for`` (their ``__aenter__``/``__anext__`` are not followed), a
call through ``super()``, a decorated or abstract coroutine, a stub body (``...``, ``pass``,
``raise NotImplementedError``) that subclasses elsewhere override, and any name the module does
not define. The table is in docs/rules.md.

Invariant: the answer is computed once per module object (the rules share one traversal, so
each asks for the same module) and holds the ``id`` of each quiet ``Await`` node; nodes live as
long as the module does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from interlace.linters.rules._flow import ImportAliases, children, dotted

__all__ = ("quiet_awaits",)

_QUEUES = frozenset({"asyncio.Queue", "asyncio.LifoQueue", "asyncio.PriorityQueue"})
_HARMLESS_DECORATORS = frozenset({"staticmethod", "classmethod", "override"})
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)

_last: tuple[cst.Module, frozenset[int]] | None = None


def quiet_awaits(module: cst.Module) -> frozenset[int]:
    """Return the ids of the ``Await`` nodes in ``module`` that cannot suspend."""
    global _last
    if _last is not None and _last[0] is module:
        return _last[1]
    quiet = _Analysis(module).run()
    _last = (module, quiet)
    return quiet


def _own(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Yield the nodes of ``node``'s body, not descending into nested scopes."""
    stack = list(children(node))
    while stack:
        current = stack.pop()
        yield current
        if not isinstance(current, _SCOPES):
            stack.extend(children(current))


@dataclass(slots=True)
class _Class:
    node: cst.ClassDef
    bases: tuple[str, ...]
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    queues: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Analysis:
    module: cst.Module
    aliases: ImportAliases = field(default_factory=ImportAliases)
    classes: dict[str, _Class] = field(default_factory=dict)
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)
    module_queues: set[str] = field(default_factory=set)
    owner: dict[int, _Class | None] = field(default_factory=dict)
    """Each coroutine's class (``None`` for a module-level or nested function)."""

    def run(self) -> frozenset[int]:
        self._collect()
        candidates = [f for f in self._coroutines() if self._may_be_quiet(f)]
        quiet_functions = {id(f) for f in candidates}
        # Greatest fixpoint: assume every candidate quiet, drop the ones with an await that
        # is not; coroutines that only await each other stay quiet, as they are at run time.
        while True:
            dropped = {
                id(f)
                for f in candidates
                if id(f) in quiet_functions
                and not all(self._quiet(a, f, quiet_functions) for a in self._suspensions(f))
            }
            if not dropped:
                break
            quiet_functions -= dropped
        quiet: set[int] = set()
        for function, await_node in self._all_awaits():
            if self._quiet(await_node, function, quiet_functions):
                quiet.add(id(await_node))
        return frozenset(quiet)

    # -- collection ------------------------------------------------------------------------

    def _collect(self) -> None:
        stack: list[tuple[cst.CSTNode, _Class | None]] = [(self.module, None)]
        while stack:
            node, cls = stack.pop()
            for child in children(node):
                if isinstance(child, (cst.Import, cst.ImportFrom)):
                    self.aliases.add(child)
                if isinstance(child, cst.ClassDef):
                    info = _Class(child, tuple(b for b in map(_base, child.bases) if b))
                    self.classes.setdefault(child.name.value, info)
                    stack.append((child, info))
                    continue
                if isinstance(child, cst.FunctionDef):
                    if cls is not None and node is cls.node.body:
                        cls.methods[child.name.value] = child
                        self.owner[id(child)] = cls
                    elif node is self.module:
                        self.functions[child.name.value] = child
                        self.owner[id(child)] = None
                    else:
                        self.owner.setdefault(id(child), None)
                    stack.append((child, cls))
                    continue
                stack.append((child, cls))
        for name, stmt in self._module_assignments():
            if self._unbounded_queue(stmt):
                self.module_queues.add(name)
        for cls in self.classes.values():
            self._class_queues(cls)

    def _module_assignments(self) -> Iterator[tuple[str, cst.BaseExpression]]:
        for stmt in self.module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and small.value is not None:
                        for target in small.targets:
                            if isinstance(target.target, cst.Name):
                                yield target.target.value, small.value
                    elif (
                        isinstance(small, cst.AnnAssign)
                        and small.value is not None
                        and isinstance(small.target, cst.Name)
                    ):
                        yield small.target.value, small.value

    def _class_queues(self, cls: _Class) -> None:
        """Record ``self.X`` attributes that only ever hold an unbounded queue (or ``None``)."""
        values: dict[str, list[cst.BaseExpression]] = {}
        for stmt in cls.node.body.body:
            # A dataclass field: `inbox: asyncio.Queue = field(default_factory=asyncio.Queue)`.
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if (
                        isinstance(small, cst.AnnAssign)
                        and isinstance(small.target, cst.Name)
                        and small.value is not None
                    ):
                        values.setdefault(small.target.value, []).append(small.value)
        for method in cls.methods.values():
            for node in _own(method):
                targets: list[cst.BaseExpression] = []
                value: cst.BaseExpression | None = None
                if isinstance(node, cst.Assign):
                    targets = [t.target for t in node.targets]
                    value = node.value
                elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                    targets = [node.target]
                    value = node.value
                for target in targets:
                    name = _self_attr(target)
                    if name is not None:
                        values.setdefault(name, []).append(value or cst.Name("object"))
        for name, assigned in values.items():
            built = [v for v in assigned if not (isinstance(v, cst.Name) and v.value == "None")]
            if built and all(self._unbounded_queue(v) for v in built):
                cls.queues.add(name)

    def _unbounded_queue(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        if self._qualified(value.func) == "dataclasses.field" or dotted(value.func) == "field":
            factory = next(
                (a.value for a in value.args if a.keyword and a.keyword.value == "default_factory"),
                None,
            )
            return factory is not None and self._qualified(factory) in _QUEUES
        if self._qualified(value.func) not in _QUEUES:
            return False
        size: cst.BaseExpression | None = None
        for arg in value.args:
            positional = arg.keyword is None and arg.star == ""
            if not (positional or (arg.keyword is not None and arg.keyword.value == "maxsize")):
                return False
            size = arg.value
        return size is None or _non_positive(size)

    def _qualified(self, expr: cst.BaseExpression) -> str | None:
        return self.aliases.qualify(expr) or dotted(expr)

    # -- coroutines ------------------------------------------------------------------------

    def _coroutines(self) -> Iterator[cst.FunctionDef]:
        yield from (f for f in self.functions.values() if f.asynchronous is not None)
        for cls in self.classes.values():
            yield from (f for f in cls.methods.values() if f.asynchronous is not None)

    def _may_be_quiet(self, function: cst.FunctionDef) -> bool:
        for decorator in function.decorators:
            name = dotted(decorator.decorator)
            if name is None or name.rsplit(".", 1)[-1] not in _HARMLESS_DECORATORS:
                return False
        if _is_stub(function):
            return False
        # An async generator is driven by `async for`, which this analysis does not follow.
        return not any(isinstance(n, cst.Yield) for n in _own(function.body))

    def _suspensions(self, function: cst.FunctionDef) -> Iterator[cst.CSTNode]:
        for node in _own(function.body):
            asynchronous = isinstance(node, (cst.With, cst.For, cst.CompFor)) and node.asynchronous
            if isinstance(node, cst.Await) or asynchronous:
                yield node

    def _all_awaits(self) -> Iterator[tuple[cst.FunctionDef, cst.Await]]:
        for function in self._every_function():
            for node in _own(function.body):
                if isinstance(node, cst.Await):
                    yield function, node

    def _every_function(self) -> Iterator[cst.FunctionDef]:
        stack: list[cst.CSTNode] = [self.module]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.FunctionDef) and node.asynchronous is not None:
                yield node
            stack.extend(children(node))

    def _quiet(self, node: cst.CSTNode, function: cst.FunctionDef, quiet: set[int]) -> bool:
        """Say whether one suspension-point candidate cannot suspend."""
        if not isinstance(node, cst.Await):
            return False
        call = node.expression
        if not isinstance(call, cst.Call):
            return False
        func = call.func
        cls = self.owner.get(id(function))
        if isinstance(func, cst.Attribute) and func.attr.value == "put":
            receiver = func.value
            if isinstance(receiver, cst.Name) and receiver.value in self.module_queues:
                return not _rebound_locally(function, receiver.value)
            if isinstance(receiver, cst.Name) and _local_queue(function, receiver.value, self):
                return True
            name = _self_attr(receiver)
            return name is not None and cls is not None and self._holds_queue(cls, name)
        target: cst.FunctionDef | None = None
        if isinstance(func, cst.Name):
            if _rebound_locally(function, func.value):
                return False
            target = self.functions.get(func.value)
        else:
            name = _self_attr(func)
            if name is not None and cls is not None:
                target = self._method(cls, name)
                # A subclass in this module may override it with one that suspends.
                for sub in self.classes.values():
                    override = sub.methods.get(name)
                    if (
                        override is not None
                        and override is not target
                        and self._derives(sub, cls)
                        and id(override) not in quiet
                    ):
                        return False
        return target is not None and id(target) in quiet

    def _derives(self, sub: _Class, base: _Class) -> bool:
        return any(c is base for c in self._mro(sub)) and sub is not base

    def _mro(self, cls: _Class) -> Iterator[_Class]:
        seen: set[str] = set()
        todo = [cls]
        while todo:
            current = todo.pop(0)
            if current.node.name.value in seen:
                continue
            seen.add(current.node.name.value)
            yield current
            todo.extend(self.classes[b] for b in current.bases if b in self.classes)

    def _method(self, cls: _Class, name: str) -> cst.FunctionDef | None:
        for current in self._mro(cls):
            if name in current.methods:
                return current.methods[name]
        return None

    def _holds_queue(self, cls: _Class, name: str) -> bool:
        return any(name in current.queues for current in self._mro(cls))


def _base(arg: cst.Arg) -> str | None:
    if arg.keyword is not None:
        return None
    name = dotted(arg.value)
    return name.rsplit(".", 1)[-1] if name else None


def _self_attr(expr: cst.BaseExpression) -> str | None:
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value in ("self", "cls")
    ):
        return expr.attr.value
    return None


def _non_positive(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0) == 0
    return (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
    )


def _is_stub(function: cst.FunctionDef) -> bool:
    """Say whether the body only documents, passes or raises: a method meant to be overridden."""
    body = function.body
    stmts = body.body if isinstance(body, cst.IndentedBlock) else (body,)
    for stmt in stmts:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Pass | cst.Raise):
                continue
            if isinstance(small, cst.Expr) and isinstance(
                small.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)
            ):
                continue
            return False
    return True


def _binds(target: cst.CSTNode, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(element.value, name) for element in target.elements)
    return isinstance(target, cst.StarredElement) and _binds(target.value, name)


def _assigned_values(function: cst.FunctionDef, name: str) -> list[cst.BaseExpression | None]:
    """Return what ``function`` binds ``name`` to (``None`` where the value is unknown)."""
    values: list[cst.BaseExpression | None] = []
    for param in (*function.params.params, *function.params.kwonly_params):
        if param.name.value == name:
            values.append(None)
    for node in _own(function.body):
        if isinstance(node, cst.Assign):
            for assign_target in node.targets:
                if isinstance(assign_target.target, cst.Name):
                    if assign_target.target.value == name:
                        values.append(node.value)
                elif _binds(assign_target.target, name):
                    values.append(None)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            if _binds(node.target, name):
                values.append(node.value)
        elif isinstance(node, (cst.For, cst.CompFor, cst.NamedExpr)):
            if _binds(node.target, name):
                values.append(None)
        elif isinstance(node, cst.AsName):
            if _binds(node.name, name):
                values.append(None)
        elif isinstance(node, (cst.Global, cst.Nonlocal)) and any(
            n.name.value == name for n in node.names
        ):
            values.append(None)
    return values


def _rebound_locally(function: cst.FunctionDef, name: str) -> bool:
    return bool(_assigned_values(function, name))


def _local_queue(function: cst.FunctionDef, name: str, analysis: _Analysis) -> bool:
    values = _assigned_values(function, name)
    return bool(values) and all(v is not None and analysis._unbounded_queue(v) for v in values)
