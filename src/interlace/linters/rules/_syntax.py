"""Small syntax helpers every rule module shares: walking a node's children, dotted names,
import aliases and the names an assignment binds. Imports nothing of the rules, so the flow
analysis (``_flow``) and the analysis of awaits that cannot suspend (``_suspend``) both build on
it without importing each other in a circle."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

__all__ = ("ImportAliases", "bound_names", "children", "dotted")

_SKIPPED_FIELD = re.compile(
    r"^(whitespace|lpar|rpar|comma|semicolon|colon|leading_lines|lines_after_decorators|"
    r"header|footer|equal|dot|operator|asynchronous|newline|indent|star|relative|"
    r"first_line|empty_lines|trailing_whitespace|leading_whitespace)"
)
_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Yield the child nodes of ``node`` that can hold code, in field (source) order.

    Unlike ``CSTNode.children`` this does not rebuild the node, and it skips whitespace and
    punctuation tokens, which no rule looks at.
    """
    names = _FIELDS.get(type(node))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(node) if not _SKIPPED_FIELD.match(f.name))
        _FIELDS[type(node)] = names
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


def dotted(expr: cst.BaseExpression) -> str | None:
    """Return ``a.b.c`` for a chain of names and attributes, else ``None``."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


@dataclass(slots=True)
class ImportAliases:
    """Local names bound by imports, mapped to what they stand for.

    ``import asyncio as aio`` maps ``aio`` to ``asyncio``; ``from asyncio import wait as w``
    maps ``w`` to ``asyncio.wait``. Relative and star imports are ignored.
    """

    names: dict[str, str] = field(default_factory=dict)

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        """Record the names bound by one import statement."""
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.names[alias.asname.name.value] = full
                else:
                    root = full.split(".", 1)[0]
                    self.names[root] = root
            return
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = _module_name(node.module)
        if module is None:
            return
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.names[local] = f"{module}.{alias.name.value}"

    def qualify(self, expr: cst.BaseExpression) -> str | None:
        """Return the imported dotted name ``expr`` refers to, or ``None``."""
        name = dotted(expr)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        target = self.names.get(root)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target


def _module_name(expr: cst.BaseExpression) -> str | None:
    return dotted(expr)


def bound_names(target: cst.BaseExpression) -> Iterator[str]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``); attributes and
    subscripts bind none."""
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from bound_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from bound_names(target.value)
