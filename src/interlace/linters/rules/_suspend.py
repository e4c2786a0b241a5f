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

from interlace.linters.rules._syntax import ImportAliases, bound_names, children, dotted

__all__ = ("quiet_awaits",)

_QUEUES = frozenset({"asyncio.Queue", "asyncio.LifoQueue", "asyncio.PriorityQueue"})
_HARMLESS_DECORATORS = frozenset({"staticmethod", "classmethod", "override"})

_last: tuple[cst.Module, frozenset[int]] | None = None


def quiet_awaits(module: cst.Module) -> frozenset[int]:
    """Return the ids of the ``Await`` nodes in ``module`` that cannot suspend."""
    global _last
    if _last is not None and _last[0] is module:
        return _last[1]
    quiet = _Analysis(module).run()
    _last = (module, quiet)
    return quiet


@dataclass(slots=True)
class _Class:
    node: cst.ClassDef
    bases: tuple[str, ...]
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    queues: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Function:
    """What one walk of the module saw in one function's own body (not nested scopes)."""

    awaits: list[cst.Await] = field(default_factory=list)
    other_suspension: bool = False
    has_yield: bool = False
    bindings: dict[str, list[cst.BaseExpression | None]] = field(default_factory=dict)
    """Each name the function binds, with the values (``None`` where not known)."""


@dataclass(slots=True)
class _Analysis:
    module: cst.Module
    aliases: ImportAliases = field(default_factory=ImportAliases)
    classes: dict[str, _Class] = field(default_factory=dict)
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)
    module_queues: set[str] = field(default_factory=set)
    owner: dict[int, _Class | None] = field(default_factory=dict)
    """Each coroutine's class (``None`` for a module-level or nested function)."""
    seen: dict[int, _Function] = field(default_factory=dict)
    async_functions: list[cst.FunctionDef] = field(default_factory=list)
    attributes: dict[int, dict[str, list[cst.BaseExpression]]] = field(default_factory=dict)
    """Per class (by id), what its methods assign to each ``self.X``."""
    derived: dict[tuple[int, int], bool] = field(default_factory=dict)

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
        # One walk: each node with its innermost class and function (a nested function is
        # its own scope; a method's class is the class whose body holds it).
        stack: list[tuple[cst.CSTNode, _Class | None, cst.FunctionDef | None]] = [
            (self.module, None, None)
        ]
        while stack:
            node, cls, function = stack.pop()
            record = self.seen[id(function)] if function is not None else None
            for child in children(node):
                if isinstance(child, (cst.Import, cst.ImportFrom)):
                    self.aliases.add(child)
                if isinstance(child, cst.ClassDef):
                    info = _Class(child, tuple(b for b in map(_base, child.bases) if b))
                    self.classes.setdefault(child.name.value, info)
                    stack.append((child, info, None))
                    continue
                if isinstance(child, cst.FunctionDef):
                    if record is not None:
                        record.bindings.setdefault(child.name.value, []).append(None)
                    if cls is not None and function is None and node is cls.node.body:
                        cls.methods[child.name.value] = child
                        self.owner[id(child)] = cls
                    else:
                        if node is self.module:
                            self.functions[child.name.value] = child
                        self.owner[id(child)] = None
                    own = _Function()
                    for param in (*child.params.params, *child.params.kwonly_params):
                        own.bindings.setdefault(param.name.value, []).append(None)
                    self.seen[id(child)] = own
                    if child.asynchronous is not None:
                        self.async_functions.append(child)
                    stack.append((child, cls if function is None else None, child))
                    continue
                if isinstance(child, cst.Lambda):
                    continue
                if record is not None:
                    self._note(child, record, cls, function)
                stack.append((child, cls, function))
        for name, stmt in self._module_assignments():
            if self._unbounded_queue(stmt):
                self.module_queues.add(name)
        for cls in self.classes.values():
            self._class_queues(cls)

    def _note(
        self,
        node: cst.CSTNode,
        record: _Function,
        cls: _Class | None,
        function: cst.FunctionDef | None,
    ) -> None:
        """Record one node of a function's own body."""
        if isinstance(node, cst.Await):
            record.awaits.append(node)
        elif isinstance(node, (cst.With, cst.For, cst.CompFor)) and node.asynchronous:
            record.other_suspension = True
        elif isinstance(node, cst.Yield):
            record.has_yield = True
        targets: list[cst.BaseExpression] = []
        value: cst.BaseExpression | None = None
        if isinstance(node, cst.Assign):
            targets, value = [t.target for t in node.targets], node.value
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets, value = [node.target], node.value
        elif isinstance(node, (cst.For, cst.CompFor, cst.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                record.bindings.setdefault(item.name.value, []).append(None)
        for target in targets:
            if isinstance(target, cst.Name):
                record.bindings.setdefault(target.value, []).append(value)
            elif isinstance(target, (cst.Tuple, cst.List, cst.StarredElement)):
                for name in bound_names(target):
                    record.bindings.setdefault(name, []).append(None)
            elif cls is not None and function is not None and self.owner.get(id(function)) is cls:
                attribute = _self_attr(target)
                if attribute is not None:
                    values = self.attributes.setdefault(id(cls), {})
                    values.setdefault(attribute, []).append(value or cst.Name("object"))

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
        for name, assigned in self.attributes.get(id(cls), {}).items():
            values.setdefault(name, []).extend(assigned)
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
        # An async generator is driven by `async for`, which this analysis does not follow;
        # `async with` and `async for` themselves are assumed to suspend.
        record = self.seen[id(function)]
        return not record.has_yield and not record.other_suspension

    def _suspensions(self, function: cst.FunctionDef) -> list[cst.Await]:
        return self.seen[id(function)].awaits

    def _all_awaits(self) -> Iterator[tuple[cst.FunctionDef, cst.Await]]:
        for function in self.async_functions:
            for node in self.seen[id(function)].awaits:
                yield function, node

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
            if isinstance(receiver, cst.Name):
                local = self.seen[id(function)].bindings.get(receiver.value)
                if local is None:
                    return receiver.value in self.module_queues
                return all(v is not None and self._unbounded_queue(v) for v in local)
            name = _self_attr(receiver)
            return name is not None and cls is not None and self._holds_queue(cls, name)
        target: cst.FunctionDef | None = None
        if isinstance(func, cst.Name):
            if func.value in self.seen[id(function)].bindings:
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
        key = (id(sub), id(base))
        if key not in self.derived:
            self.derived[key] = sub is not base and any(c is base for c in self._mro(sub))
        return self.derived[key]

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
