"""A read-only batched traversal of a libcst tree, ~5x cheaper than ``libcst.visit_batched``.

``libcst``'s traversal rebuilds every node it leaves (``_visit_and_replace_children`` constructs
and validates a new node even for visitors that change nothing); measured on real asyncio code
that costs about two thirds of a parse. Rules never change the tree, so this walker reads the
children straight from the node's fields and calls the same hooks in the same order:
``visit_<Node>``, then for each child field ``visit_<Node>_<field>``, the field's nodes,
``leave_<Node>_<field>``, and finally ``leave_<Node>``.

The field order of each node type is read once from libcst's own ``_visit_and_replace_children``
source (the field names it passes to ``visit_required``/``visit_sequence``/...), so it follows
whatever libcst version is installed; a test compares this walker's hook sequence with
``libcst.visit_batched`` on real code. A node type whose order cannot be read falls back to
libcst's own traversal for that subtree.

Invariant: the walker never mutates or rebuilds nodes; a rule sees the parser's node objects, so
reports can be mapped to positions with ``PositionProvider`` on the same module.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

__all__ = ("field_order", "walk_batched")

_HELPERS = frozenset(
    {
        "visit_required",
        "visit_optional",
        "visit_sentinel",
        "visit_iterable",
        "visit_sequence",
        "visit_body_iterable",
        "visit_body_sequence",
    }
)

_Hook = Callable[[cst.CSTNode], object]


@functools.cache
def field_order(node_type: type[cst.CSTNode]) -> tuple[tuple[str, bool], ...] | None:
    """Return the child fields of ``node_type`` in libcst's visiting order, each with whether
    libcst visits it only when it is not ``None`` (a conditional expression around the visit),
    or ``None`` if the order cannot be read from libcst's source."""
    for klass in node_type.__mro__:
        method = klass.__dict__.get("_visit_and_replace_children")
        if method is not None:
            break
    else:
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError):
        return None
    conditional = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.IfExp)
        for inner in ast.walk(node)
    }
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _HELPERS
    ]
    names: list[tuple[str, bool]] = []
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        if len(call.args) < 2:
            return None
        field = call.args[1]
        if not (isinstance(field, ast.Constant) and isinstance(field.value, str)):
            return None
        if names and names[-1][0] == field.value:
            continue  # the two branches of ``a if isinstance(...) else b`` visit one field
        names.append((field.value, id(call) in conditional))
    return tuple(names)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to call for one node type: its hooks and, per child field, the field hooks."""

    visit: tuple[_Hook, ...]
    leave: tuple[_Hook, ...]
    fields: tuple[tuple[str, bool, tuple[_Hook, ...], tuple[_Hook, ...]], ...] | None


class _Walker:
    """Invariant: ``plans`` caches one :class:`_Plan` per node type for this set of visitors."""

    def __init__(self, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
        self.methods: dict[str, list[_Hook]] = {}
        for visitor in visitors:
            for name, method in _hooks_of(visitor).items():
                self.methods.setdefault(name, []).append(method)
        self.visitors = visitors
        self.plans: dict[type[cst.CSTNode], _Plan] = {}

    def plan(self, node_type: type[cst.CSTNode]) -> _Plan:
        plan = self.plans.get(node_type)
        if plan is None:
            name = node_type.__name__
            order = field_order(node_type)
            fields = None
            if order is not None:
                fields = tuple(
                    (
                        field,
                        skip_none,
                        tuple(self.methods.get(f"visit_{name}_{field}", ())),
                        tuple(self.methods.get(f"leave_{name}_{field}", ())),
                    )
                    for field, skip_none in order
                )
            plan = _Plan(
                tuple(self.methods.get(f"visit_{name}", ())),
                tuple(self.methods.get(f"leave_{name}", ())),
                fields,
            )
            self.plans[node_type] = plan
        return plan

    def walk(self, node: cst.CSTNode) -> None:
        plan = self.plan(type(node))
        if plan.fields is None:
            # Unknown layout: let libcst traverse this subtree (correct, just slower).
            cst.visit_batched(node, self.visitors)
            return
        for hook in plan.visit:
            hook(node)
        walk = self.walk
        # ``isinstance(x, cst.CSTNode)`` goes through ABCMeta and dominated the walk; a dict
        # keyed by the value's exact type answers the same question.
        is_node = _IS_NODE
        for field, skip_none, enter, leave in plan.fields:
            value = getattr(node, field)
            if skip_none and value is None:
                continue
            for hook in enter:
                hook(node)
            kind = type(value)
            if is_node.get(kind) or (kind not in is_node and _learn(kind)):
                walk(value)
            elif kind is tuple or kind is list:
                for child in value:
                    kind = type(child)
                    if is_node.get(kind) or (kind not in is_node and _learn(kind)):
                        walk(child)
            for hook in leave:
                hook(node)
        for hook in plan.leave:
            hook(node)


_IS_NODE: dict[type, bool] = {}
"""Exact type -> whether it is a libcst node (filled as types are met)."""


def _learn(kind: type) -> bool:
    _IS_NODE[kind] = result = issubclass(kind, cst.CSTNode)
    return result


_HOOK_NAMES: dict[type, tuple[str, ...]] = {}
"""Visitor class -> its hook method names; ``get_visitors()`` runs ``inspect.getmembers`` on
every call, which cost more than the traversal itself on small files."""


def _hooks_of(visitor: cst.BatchableCSTVisitor) -> dict[str, _Hook]:
    kind = type(visitor)
    if kind.get_visitors is not cst.BatchableCSTVisitor.get_visitors:
        return dict(visitor.get_visitors())
    names = _HOOK_NAMES.get(kind)
    if names is None:
        names = _HOOK_NAMES[kind] = tuple(visitor.get_visitors())
    return {name: getattr(visitor, name) for name in names}


def walk_batched(node: cst.CSTNode, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
    """Run every visitor's hooks over ``node``'s tree in one read-only traversal."""
    _Walker(visitors).walk(node)
