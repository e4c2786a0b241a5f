"""Light syntactic helpers shared by the check-then-act and suspension rule families.

Nothing here uses libcst metadata: the rules decide from the tree alone (scope and qualified-name
providers cost an order of magnitude in throughput, see issue 3), so names are resolved with the
bookkeeping below: a map of import aliases, the parameters and assigned names of one function,
and the names bound at module level.

The module name starts with ``_`` so rule discovery skips it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set
from dataclasses import dataclass, field

import libcst as cst

from interlace.linters.rules._suspend import quiet_awaits
from interlace.linters.rules._syntax import ImportAliases, bound_names, children, dotted

__all__ = (
    "INIT_METHODS",
    "MUTATORS",
    "FactsCollector",
    "FunctionFacts",
    "ImportAliases",
    "StateNames",
    "block_body",
    "children",
    "dotted",
    "find_suspension",
    "is_lock_expr",
    "keyword",
    "module_level_names",
    "mutated_state",
    "render",
    "shared_by_tasks",
    "store_targets",
)

MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "add",
        "clear",
        "difference_update",
        "discard",
        "extend",
        "extendleft",
        "insert",
        "intersection_update",
        "move_to_end",
        "pop",
        "popitem",
        "popleft",
        "remove",
        "reverse",
        "rotate",
        "sort",
        "symmetric_difference_update",
        "update",
    }
)
"""Methods that mutate a list, dict, set or deque in place. ``setdefault`` is left out on
purpose: it is the atomic get-or-insert that the rules recommend."""

INIT_METHODS = frozenset({"__init__", "__new__", "__post_init__", "__init_subclass__"})
"""Methods that run before an object can be shared, so their writes are not races."""

_LOCK_WORD = re.compile(r"lock|mutex|semaphore|(^|_)(sem|cond|condition|cv|guard)$", re.IGNORECASE)
_SCOPE_BOUNDARY = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def store_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """Return the targets a statement stores to or deletes (``x = ...``, ``x += ...``,
    ``x: T = ...``, ``del x``); not loop, ``with`` or comprehension targets."""
    if isinstance(node, cst.Assign):
        return [target.target for target in node.targets]
    if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.Del)):
        return [node.target]
    return []


_EMPTY_MODULE = cst.Module(body=())


def render(node: cst.CSTNode) -> str:
    """Return the source text of ``node`` on one line, for messages."""
    return " ".join(_EMPTY_MODULE.code_for_node(node).split())


def shared_by_tasks(state: str, class_name: str | None, *, declared: bool = False) -> str:
    """Return the clause a task-sharing finding gives for thinking ``state`` is shared.

    Module state is shared by every task of the loop; for an attribute the rules cannot see
    the callers that would share the object, so the clause says that it is assumed, unless
    the class was declared in ``task-shared-classes``.
    """
    root = state.split(".", 1)[0]
    if root not in ("self", "cls"):
        return f"`{root}` is module state, which every task on the event loop shares"
    owner = f"`{class_name}`" if class_name else "this object"
    if declared:
        return f"{owner} is declared in `task-shared-classes`"
    return f"assuming concurrent tasks share one {owner}"


def find_suspension(
    node: cst.CSTNode, *, include_yield: bool = True, quiet: Set[int] = frozenset()
) -> cst.CSTNode | None:
    """Return the first suspension point inside ``node`` (not in nested scopes), or ``None``.

    Suspension points are ``await``, ``async with``, ``async for``, async comprehensions and,
    with ``include_yield``, ``yield`` (inside an ``async def`` it hands control to the consumer,
    which may run other tasks before it resumes the generator). An ``await`` whose id is in
    ``quiet`` cannot suspend (see ``_suspend.quiet_awaits``) and is skipped.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Await) and id(current) not in quiet:
            return current
        if isinstance(current, (cst.With, cst.For, cst.CompFor)) and current.asynchronous:
            return current
        if include_yield and isinstance(current, cst.Yield):
            return current
        if current is not node and isinstance(current, _SCOPE_BOUNDARY):
            continue
        stack.extend(reversed(list(children(current))))
    return None


def is_lock_expr(expr: cst.BaseExpression) -> bool:
    """Say whether a ``with``/``async with`` item looks like acquiring a lock.

    Matches by name, since the rules have no types: ``self._lock``, ``lock``, ``self._locks[k]``,
    ``_mutex``, ``self._sem``, ``self._cond``, and calls such as ``self._lock_for(key)`` or
    ``lock.acquire_timeout()``.
    """
    if isinstance(expr, cst.Call):
        expr = expr.func
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Attribute):
        last = expr.attr.value
    elif isinstance(expr, cst.Name):
        last = expr.value
    else:
        return False
    return bool(_LOCK_WORD.search(last))


def module_level_names(module: cst.Module) -> frozenset[str]:
    """Return the names a module binds by assignment at its top level (not imports or defs)."""
    names: set[str] = set()
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    names.update(bound_names(target.target))
            elif isinstance(small, cst.AnnAssign):
                names.update(bound_names(small.target))
    return frozenset(names)


@dataclass(slots=True)
class FunctionFacts:
    """What one function binds, gathered during the batched traversal.

    Invariant: ``assigned`` holds every name the function body binds (not its nested scopes)
    and its ``nonlocal`` names, ``declared`` every name it declares ``global``.
    """

    node: cst.FunctionDef
    class_name: str | None
    assigned: set[str] = field(default_factory=set)
    declared: set[str] = field(default_factory=set)

    def bind(self, target: cst.BaseExpression) -> None:
        """Record the names bound by an assignment target."""
        self.assigned.update(bound_names(target))

    def params(self) -> frozenset[str]:
        """Return the names of every parameter of the function."""
        p = self.node.params
        names = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param):
                names.append(star.name.value)
        return frozenset(names)


class FactsCollector:
    """Mixin for rules: keeps a stack of :class:`FunctionFacts` during the traversal.

    Subclasses get ``self.facts_stack`` (innermost function last), ``self.class_stack``,
    ``self.aliases``, ``self.module_names`` and ``self.quiet`` (the ``await`` nodes that cannot
    suspend); they override :meth:`function_done`, called when
    a function's traversal ends and its facts are complete.
    """

    def init_facts(self) -> None:
        """Reset the bookkeeping; call from ``__init__``."""
        self.facts_stack: list[FunctionFacts] = []
        self.class_stack: list[str] = []
        self.aliases = ImportAliases()
        self.module_names: frozenset[str] = frozenset()
        self.quiet: frozenset[int] = frozenset()

    def visit_Module(self, node: cst.Module) -> None:
        self.module_names = module_level_names(node)
        self.quiet = quiet_awaits(node)

    def visit_Import(self, node: cst.Import) -> None:
        self.aliases.add(node)
        if self.facts_stack:
            for alias in node.names:
                bound: cst.BaseExpression = (
                    alias.asname.name if alias.asname is not None else alias.name
                )
                while isinstance(bound, cst.Attribute):
                    bound = bound.value
                self.facts_stack[-1].bind(bound)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.aliases.add(node)
        if self.facts_stack and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                self.facts_stack[-1].bind(bound)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.class_stack.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.class_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.facts_stack:
            self.facts_stack[-1].assigned.add(node.name.value)
        # A function nested in a function is not a method even inside a class body.
        in_class = bool(self.class_stack) and (
            not self.facts_stack or self.facts_stack[-1].class_name != self.class_stack[-1]
        )
        self.facts_stack.append(FunctionFacts(node, self.class_stack[-1] if in_class else None))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.function_done(self.facts_stack.pop())

    def function_done(self, facts: FunctionFacts) -> None:
        """Hook: one function's traversal has ended."""

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self.facts_stack:
            self.facts_stack[-1].bind(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.facts_stack:
            self.facts_stack[-1].bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.facts_stack:
            self.facts_stack[-1].bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        if self.facts_stack:
            self.facts_stack[-1].bind(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        if self.facts_stack:
            self.facts_stack[-1].bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        if self.facts_stack:
            self.facts_stack[-1].bind(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self.facts_stack:
            self.facts_stack[-1].bind(node.target)

    def visit_Global(self, node: cst.Global) -> None:
        if self.facts_stack:
            self.facts_stack[-1].declared.update(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        # A closure's `nonlocal` state is shared only by the closures of one call, which the
        # rules treat like locals.
        if self.facts_stack:
            self.facts_stack[-1].assigned.update(n.name.value for n in node.names)


@dataclass(slots=True)
class StateNames:
    """Decides which expressions denote *shared* state inside one function.

    Shared: attribute chains rooted at ``self``/``cls``, at a parameter (``include_params``), at
    a name declared ``global``, or at a module-level variable the function does not rebind; bare
    names only when declared ``global`` or (as containers) module-level.
    Locals are never shared. ``aliases`` maps a local to the state it was read from
    (``h = self._d.get(k)``), so a check of the local is a check of that state.
    """

    params: frozenset[str]
    assigned: frozenset[str]
    declared: frozenset[str]
    module_names: frozenset[str]
    include_params: bool = True
    aliases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, facts: FunctionFacts, module_names: frozenset[str], *, include_params: bool = True
    ) -> StateNames:
        """Build the naming context of the function ``facts`` describes."""
        params = facts.params()
        return cls(
            params=params,
            assigned=frozenset(facts.assigned - facts.declared),
            declared=frozenset(facts.declared),
            module_names=module_names,
            include_params=include_params,
        )

    def _shared_root(self, root: str) -> bool:
        if root in self.declared:
            return True
        if root in self.params:
            return root in ("self", "cls") or self.include_params
        if root in self.assigned:
            return False
        return root in self.module_names

    def key(self, expr: cst.BaseExpression) -> str | None:
        """Return the state ``expr`` reads (``self._d`` for ``self._d[k]``, ``self._d.get(k)``,
        ``len(self._d)``), or ``None`` when it is not shared state."""
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in self.aliases:
                return self.aliases[name]
            if name in self.declared or (
                name not in self.assigned and name not in self.params and name in self.module_names
            ):
                return name
            return None
        if isinstance(expr, cst.Attribute):
            chain = dotted(expr)
            if chain is None:
                return None
            return chain if self._shared_root(chain.split(".", 1)[0]) else None
        if isinstance(expr, cst.Subscript):
            return self.key(expr.value)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "get":
                return self.key(func.value)
            if isinstance(func, cst.Name) and func.value == "len" and len(expr.args) == 1:
                return self.key(expr.args[0].value)
        return None

    def write_keys(self, target: cst.BaseExpression) -> Iterator[tuple[str, cst.CSTNode]]:
        """Yield the state written by an assignment or ``del`` target, with the target node."""
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                yield from self.write_keys(element.value)
        elif isinstance(target, cst.StarredElement):
            yield from self.write_keys(target.value)
        elif isinstance(target, cst.Name):
            if target.value in self.declared:
                yield target.value, target
        elif isinstance(target, (cst.Attribute, cst.Subscript)):
            key = self.key(target)
            if key is not None:
                yield key, target

    def rebind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """Update the local aliases for ``target = value``. A tuple target binds each of its
        names to the matching element of a tuple value of the same length (``event, loop =
        self._wake, self._loop``, all values read before any name is bound), else to a value
        that is not shared state."""
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]] = []
        _pair_up(target, value, pairs)
        keys = [self._alias_key(item) for _, item in pairs]
        for (name, _), key in zip(pairs, keys, strict=True):
            if not isinstance(name, cst.Name) or name.value in self.declared:
                continue
            self.aliases.pop(name.value, None)
            if key is not None:
                self.aliases[name.value] = key

    def _alias_key(self, value: cst.BaseExpression | None) -> str | None:
        if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            return self.key(value)
        return None


def _pair_up(
    target: cst.BaseExpression,
    value: cst.BaseExpression | None,
    pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]],
) -> None:
    """Match the names of an assignment target with the values they receive (``None``: not
    known from the syntax)."""
    if isinstance(target, cst.StarredElement):
        _pair_up(target.value, None, pairs)
    elif isinstance(target, (cst.Tuple, cst.List)):
        items: list[cst.BaseExpression | None] = [None] * len(target.elements)
        if (
            isinstance(value, (cst.Tuple, cst.List))
            and len(value.elements) == len(target.elements)
            and not any(isinstance(e, cst.StarredElement) for e in value.elements)
            and not any(isinstance(e, cst.StarredElement) for e in target.elements)
        ):
            items = [element.value for element in value.elements]
        for element, item in zip(target.elements, items, strict=True):
            _pair_up(element.value, item, pairs)
    else:
        pairs.append((target, value))


def mutated_state(call: cst.Call, names: StateNames) -> str | None:
    """Return the state an in-place mutating method call writes (``self._q.append(x)``)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in MUTATORS:
        receiver = func.value
        if isinstance(receiver, (cst.Name, cst.Attribute, cst.Subscript)):
            return names.key(receiver) if not isinstance(receiver, cst.Subscript) else None
    return None


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    """Return the value of keyword argument ``name`` of ``call``, or ``None``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def block_body(
    suite: cst.BaseSuite,
) -> tuple[cst.BaseStatement | cst.BaseSmallStatement, ...]:
    """Return the statements of an indented block or of a one-line suite."""
    return tuple(suite.body)
