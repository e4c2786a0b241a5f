"""Which methods of a class only ever run in one task: the evidence IL101 and IL303 take from
how an object drives its own coroutines.

A check-then-act across an ``await`` (IL101), or a loop over a container whose body awaits
(IL303), is a race only if a *second* task can change the state while the first one is
suspended. Some methods never have that company, and the class says so in its own text:

* an async generator's body, and ``__anext__``: an async iterator is driven by one consumer
  at a time (IL101 has always left them alone for that reason). A coroutine that iterates the
  object itself (``async for _ in self``) is that consumer, so it counts too;
* a private coroutine the object starts as its own background task, keeping the one handle
  (``self._task = asyncio.create_task(self._run())``) and referring to it nowhere else: one
  object, one task. Workers kept in a collection (``self._workers.append(create_task(...))``)
  are many tasks and do not count;
* a private method every reference to which, in a method that already runs in one task, is
  a direct call (a plain method) or ``await self._m(...)`` (a coroutine). A reference from a
  nested function or a lambda, or any other use (a callback, ``gather(self._m())``,
  ``create_task(self._m())`` kept nowhere) may run the method in another task, so it does
  not count.

State that only such *driven* methods write (``__init__`` aside), all driven from the same
task, cannot change while one of them is suspended: every writer runs in the one task that is
suspended (:meth:`Drivers.confined`). Two background coroutines are two tasks, and neither is
the task that consumes the object's streams. State that only driven methods *grow*, while
other code only removes from it (``pop``, ``discard``, ``remove``, ``clear``, ``del d[k]``: a
done callback, ``stop()``), can only shrink while one of them is suspended
(:meth:`Drivers.only_shrinks`). Either holds only while the state stays in the class's hands
(:attr:`Drivers.escaping`): a container bound to a local, passed to a call or returned may be
written by code the class does not show.
Private means the class's own: a method whose name starts with ``_`` but not ``__``, the same
convention :mod:`._locking` relies on for helpers called with a lock held.

The module name starts with ``_`` so rule discovery skips it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst

from interlace.linters.rules._flow import INIT_METHODS, MUTATORS, children

__all__ = ("Drivers", "drivers_of")

_TASK_STARTERS = frozenset({"create_task", "ensure_future"})
_WRITING_METHODS = MUTATORS | {"setdefault"}
_REMOVING_METHODS = frozenset({"clear", "discard", "pop", "popitem", "popleft", "remove"})
"""Methods that only take elements out of a list, dict, set or deque."""
_READING_METHODS = frozenset(
    {"copy", "count", "get", "index", "items", "keys", "values", "__contains__", "__len__"}
)
"""Methods that read a container and hand out nothing that can add to it."""
_COPYING_FUNCTIONS = frozenset(
    {
        "all",
        "any",
        "bool",
        "dict",
        "enumerate",
        "frozenset",
        "isinstance",
        "iter",
        "len",
        "list",
        "max",
        "min",
        "reversed",
        "set",
        "sorted",
        "sum",
        "tuple",
    }
)
"""Builtins that read their argument (or copy it) without keeping a reference to it."""
_NESTED = ""
_CONSUMER = "__aiter__"
"""The one consumer that drives the object's async generators and its own iteration
(``__anext__``, ``async for _ in self``): the premise the generator exemption has always
rested on (a stream object is consumed by one task)."""
"""The writer recorded for a write inside a nested function or lambda: never a driven method."""


@dataclass(slots=True)
class _Method:
    """What one method does with ``self``, gathered by :func:`_scan`.

    Invariant: ``refs`` holds one ``(name, how)`` per reference to ``self.<name>``, where
    ``how`` is ``"await"`` (``await self.m()`` in the method's own body), ``"call"`` (any other
    direct call there), ``"task"`` (a call handed to ``create_task``/``ensure_future`` whose
    result is stored in one attribute) or ``"other"``.
    """

    name: str
    asynchronous: bool
    generator: bool
    consumes: bool = False
    refs: list[tuple[str, str]] = field(default_factory=list)
    writes: set[str] = field(default_factory=set)
    nested_writes: set[str] = field(default_factory=set)
    grows: set[str] = field(default_factory=set)
    nested_grows: set[str] = field(default_factory=set)
    in_place: set[str] = field(default_factory=set)
    escapes: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Drivers:
    """The driven methods of one class and the writers of its state.

    Attributes:
        driven: names of methods that only ever run in one task (see the module docstring).
        writers: for each ``self.<attr>``, the methods that write it outside ``__init__``
            (``""`` for a write in a nested function or lambda).
        growers: the same, counting only writes that may add to the state: anything but the
            removing methods (``pop``, ``discard``, ...) and ``del x[k]``.
        in_place: the ``self.<attr>`` that some method other than ``__init__`` mutates in
            place (``.append()``, ``[k] = v``, ``+=``, ``del x[k]``) rather than replaces.
        roots: for each driven method, the tasks that may run it, named by the method they
            start from (a background coroutine; ``__aiter__`` for the object's one consumer).
        escaping: the ``self.<attr>`` that some method (``__init__`` included) lets out of
            the class's hands: binds to a local, passes to a call, returns, stores elsewhere,
            or calls a method on that is neither a known read nor a known mutation. Code the
            class does not show may then add to it.
    """

    driven: frozenset[str]
    writers: dict[str, frozenset[str]]
    growers: dict[str, frozenset[str]]
    in_place: frozenset[str]
    roots: dict[str, frozenset[str]] = field(default_factory=dict)
    escaping: frozenset[str] = frozenset()

    def confined(self, method: str, state: str, *, contents: bool = True) -> bool:
        """Say whether ``state`` (``self._x``), checked and written in ``method``, can only be
        changed by the task that runs ``method``: the method is driven, and so is every
        method that writes the state, all from the same one task, and, when what matters is
        the object's ``contents`` (not only which object the attribute holds), no method
        lets it out where code the class does not show could change them
        (:attr:`escaping`)."""
        return not (contents and state in self.escaping) and self._one_task(
            method, self.writers.get(state, frozenset())
        )

    def _one_task(self, method: str, others: frozenset[str]) -> bool:
        """Say whether ``method`` and ``others`` are all driven, and by one and the same task:
        two background loops (``self._a = create_task(self._loop_a())`` and another for
        ``_loop_b``) are two tasks, and neither is the object's consumer."""
        names = {method, *others}
        if not names <= self.driven:
            return False
        return len(frozenset[str]().union(*(self.roots.get(name, {name}) for name in names))) == 1

    def configuration(self, state: str) -> bool:
        """Say whether ``state`` (``self.mode``, ``self.cfg.x``) is configuration: an attribute
        of the object that no method but ``__init__`` writes or mutates, so it holds what the
        constructor gave it for the object's whole life."""
        if not state.startswith("self."):
            return False
        root = ".".join(state.split(".", 2)[:2])
        return root not in self.writers and root not in self.in_place

    def only_shrinks(self, method: str, state: str) -> bool:
        """Say whether, while ``method`` is suspended, ``state`` can only lose elements: the
        method is driven, and so is every method that may add to the state, from the same
        task; the others only remove from it, and no method lets it out where code the class
        does not show could add to it (:attr:`escaping`)."""
        return state not in self.escaping and self._one_task(
            method, self.growers.get(state, frozenset())
        )


def _self_root(expr: cst.BaseExpression) -> str | None:
    """``self._d`` for ``self._d``, ``self._d[k]``, ``self._d.x[k]``; else ``None``."""
    attr: str | None = None
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
        expr = expr.value
    if isinstance(expr, cst.Name) and expr.value in ("self", "cls") and attr is not None:
        return f"self.{attr}"
    return None


def self_member(expr: cst.CSTNode) -> str | None:
    """``m`` for ``self.m`` / ``cls.m`` (an attribute or a method), else ``None``."""
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value in ("self", "cls")
    ):
        return expr.attr.value
    return None


def _started_task(value: cst.BaseExpression) -> cst.Call | None:
    """The ``self._m()`` call in ``create_task(self._m(), ...)``, else ``None``."""
    if not isinstance(value, cst.Call) or not value.args:
        return None
    func = value.func
    name = func.attr.value if isinstance(func, cst.Attribute) else None
    if isinstance(func, cst.Name):
        name = func.value
    if name not in _TASK_STARTERS:
        return None
    first = value.args[0]
    if first.keyword is not None or first.star:
        return None
    inner = first.value
    if isinstance(inner, cst.Call) and self_member(inner.func) is not None:
        return inner
    return None


def _targets(target: cst.BaseExpression) -> Iterable[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _targets(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _targets(target.value)
    else:
        yield target


def _is_generator(function: cst.FunctionDef) -> bool:
    if function.asynchronous is None:
        return False
    if function.name.value == "__anext__":
        return True
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Yield):
            return True
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(node))
    return False


def _scan(function: cst.FunctionDef) -> _Method:
    method = _Method(
        function.name.value, function.asynchronous is not None, _is_generator(function)
    )
    consumed: set[int] = set()
    kept: set[int] = set()
    stack: list[tuple[cst.CSTNode, bool]] = [(function.body, False)]
    while stack:
        node, nested = stack.pop()
        if isinstance(node, cst.ClassDef):
            continue
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            stack.extend((child, True) for child in children(node))
            continue
        kept.update(_kept_inside(node))
        if (
            isinstance(node, cst.Attribute)
            and id(node) not in kept
            and isinstance(node.value, cst.Name)
            and node.value.value in ("self", "cls")
        ):
            method.escapes.add(f"self.{node.attr.value}")
        writes = method.nested_writes if nested else method.writes
        grows = method.nested_grows if nested else method.grows
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.Assign):
            targets = [t for target in node.targets for t in _targets(target.target)]
            task = _started_task(node.value)
            if (
                task is not None
                and not nested
                and len(targets) == 1
                and _self_root(targets[0]) is not None
                and isinstance(targets[0], cst.Attribute)
            ):
                name = self_member(task.func)
                assert name is not None
                method.refs.append((name, "task"))
                consumed.add(id(task.func))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets = [node.target]
        elif isinstance(node, cst.Del):
            targets = list(_targets(node.target))
        elif isinstance(node, cst.For) and node.asynchronous is not None and not nested:
            method.consumes = method.consumes or (
                isinstance(node.iter, cst.Name) and node.iter.value == "self"
            )
        elif isinstance(node, cst.Await) and isinstance(node.expression, cst.Call):
            func = node.expression.func
            name = self_member(func)
            if name is not None and id(func) not in consumed:
                method.refs.append((name, "other" if nested else "await"))
                consumed.add(id(func))
        if isinstance(node, cst.Call):
            func = node.func
            name = self_member(func)
            if name is not None and id(func) not in consumed:
                method.refs.append((name, "other" if nested else "call"))
                consumed.add(id(func))
            if isinstance(func, cst.Attribute) and func.attr.value in _WRITING_METHODS:
                root = _self_root(func.value)
                if root is not None:
                    writes.add(root)
                    method.in_place.add(root)
                    if func.attr.value not in _REMOVING_METHODS:
                        grows.add(root)
        elif isinstance(node, cst.Attribute) and id(node) not in consumed:
            name = self_member(node)
            if name is not None:
                method.refs.append((name, "other"))
        for target in targets:
            root = _self_root(target)
            if root is not None:
                writes.add(root)
                if not (isinstance(node, cst.Del) and isinstance(target, cst.Subscript)):
                    grows.add(root)
                if isinstance(node, cst.AugAssign) or not (
                    isinstance(target, cst.Attribute) and self_member(target) is not None
                ):
                    method.in_place.add(root)
        stack.extend((child, nested) for child in children(node))
    return method


def _kept_inside(node: cst.CSTNode) -> Iterable[int]:
    """Yield the ids of the children of ``node`` that it uses without letting them out: the
    receiver of a known read or mutation, a subscripted container, an operand of a
    comparison or of a test, an argument of a builtin that only reads or copies it, an
    unpacked argument, the iterable of a loop, and an assignment or ``del`` target."""
    if isinstance(node, cst.Attribute):
        if node.attr.value in _WRITING_METHODS | _READING_METHODS:
            yield id(node.value)
    elif isinstance(node, cst.Subscript):
        yield id(node.value)
    elif isinstance(node, cst.Comparison):
        yield id(node.left)
        yield from (id(target.comparator) for target in node.comparisons)
    elif isinstance(node, (cst.If, cst.While, cst.IfExp, cst.Assert, cst.CompIf)):
        yield from _tested(node.test)
    elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        yield from _tested(node.expression)
    elif isinstance(node, cst.Call):
        if isinstance(node.func, cst.Name) and node.func.value in _COPYING_FUNCTIONS:
            yield from (id(arg.value) for arg in node.args)
        yield from (id(arg.value) for arg in node.args if arg.star)
    elif isinstance(node, (cst.For, cst.CompFor)):
        yield id(node.iter)
    elif isinstance(node, cst.Assign):
        for target in node.targets:
            yield from (id(t) for t in _targets(target.target))
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        yield id(node.target)
    elif isinstance(node, cst.Del):
        yield from (id(t) for t in _targets(node.target))


def _tested(expr: cst.BaseExpression) -> Iterable[int]:
    """The ids of what a test reads for its truth (``not``, ``and``, ``or`` look through)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        yield from _tested(expr.expression)
    elif isinstance(expr, cst.BooleanOperation):
        yield from _tested(expr.left)
        yield from _tested(expr.right)
    else:
        yield id(expr)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def drivers_of(functions: Iterable[cst.FunctionDef]) -> Drivers:
    """Compute the :class:`Drivers` of a class from its methods (not their nested functions)."""
    methods = [_scan(function) for function in functions]
    by_name: dict[str, list[_Method]] = {}
    for method in methods:
        by_name.setdefault(method.name, []).append(method)
    references: dict[str, list[tuple[str, str]]] = {name: [] for name in by_name}
    for method in methods:
        for name, how in method.refs:
            if name in references:
                references[name].append((method.name, how))
    asynchronous = {name for name, defs in by_name.items() if any(d.asynchronous for d in defs)}
    # Each driven method maps to the tasks that may run it, named by where they start: the
    # object's one consumer (its async generators, `__anext__`, `async for _ in self`) or a
    # background task's coroutine.
    roots: dict[str, frozenset[str]] = {}
    for name, defs in by_name.items():
        if all(d.generator or d.consumes for d in defs):
            roots[name] = frozenset({_CONSUMER})
    for name, refs in references.items():
        if _private(name) and len(refs) == 1 and refs[0][1] == "task":
            roots[name] = frozenset({name})
    changed = True
    while changed:
        changed = False
        for name, refs in references.items():
            if name in roots or not _private(name) or not refs:
                continue
            # A coroutine runs in its caller's task only when awaited there: a coroutine
            # object handed on (`gather(self._a(), self._b())`) runs in tasks of its own.
            direct = ("await",) if name in asynchronous else ("await", "call")
            if all(how in direct and caller in roots for caller, how in refs):
                roots[name] = frozenset[str]().union(*(roots[caller] for caller, _ in refs))
                changed = True
    writers: dict[str, set[str]] = {}
    growers: dict[str, set[str]] = {}
    in_place: set[str] = set()
    escaping: set[str] = set()
    for method in methods:
        escaping |= method.escapes
        if method.name in INIT_METHODS:
            continue
        in_place |= method.in_place
        for state in method.writes:
            writers.setdefault(state, set()).add(method.name)
        for state in method.nested_writes:
            writers.setdefault(state, set()).add(_NESTED)
        for state in method.grows:
            growers.setdefault(state, set()).add(method.name)
        for state in method.nested_grows:
            growers.setdefault(state, set()).add(_NESTED)
    return Drivers(
        driven=frozenset(roots),
        writers={state: frozenset(names) for state, names in writers.items()},
        growers={state: frozenset(names) for state, names in growers.items()},
        in_place=frozenset(in_place),
        roots=roots,
        escaping=frozenset(escaping),
    )
