"""Line/column positions of a few reported nodes without regenerating the whole module.

``PositionProvider`` regenerates the code of the entire module to learn where each node is,
which costs about twice a parse. A finding needs positions only for its own few nodes, so this
module regenerates only the statements that contain them: CPython's ``ast`` (about five times
faster than libcst's parser) tells on which line each top-level statement, and each statement of
a top-level class body, starts; libcst's own position-recording code generator then runs on just
that statement, starting at that line with the enclosing indentation.

Invariant: the result equals ``PositionProvider``'s for every node it returns; when the two trees
cannot be matched (a syntax CPython's ``ast`` does not accept, a statement count that differs) it
falls back to ``PositionProvider`` over the whole module. A test compares both on real code.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from interlace.linters._walk import field_order

__all__ = ("LINE_BREAK", "node_positions")

LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""What ends a physical line for Python's tokenizer and libcst, hence for a finding's row.
``str.splitlines`` also splits at form feeds, U+2028 and other characters that Python treats as
ordinary text, which would shift every later row."""


class _Sink:
    """Stands in for the provider the codegen state writes positions into."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


def _contains(root: cst.CSTNode, wanted: set[int]) -> bool:
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        if id(node) in wanted:
            return True
        order = field_order(type(node))
        if order is None:
            stack.extend(node.children)
            continue
        for field, _ in order:
            value = getattr(node, field)
            if isinstance(value, cst.CSTNode):
                stack.append(value)
            elif isinstance(value, (tuple, list)):
                stack.extend(v for v in value if isinstance(v, cst.CSTNode))
    return False


def _ast_counts(stmt: cst.BaseStatement) -> int:
    """How many ``ast`` statements one libcst statement is (``a; b`` is one line, two stmts)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return len(stmt.body)
    return 1


def _first_line(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def _leading(stmt: cst.BaseStatement) -> int:
    """Lines a statement's code emits before the line ``ast`` reports for it."""
    lines = len(getattr(stmt, "leading_lines", ()))
    decorators = getattr(stmt, "decorators", ())
    if decorators:
        lines += len(decorators[0].leading_lines)
    return lines


def _starts(body: Sequence[cst.BaseStatement], nodes: Sequence[ast.stmt]) -> list[int] | None:
    """The line where each libcst statement's code (after its leading lines) starts."""
    starts = []
    index = 0
    for stmt in body:
        if index >= len(nodes):
            return None
        starts.append(_first_line(nodes[index]) - _leading(stmt))
        index += _ast_counts(stmt)
    return starts if index == len(nodes) else None


def _generate(
    stmt: cst.BaseStatement, module: cst.Module, line: int, indents: list[str], sink: _Sink
) -> None:
    state = PositionProvidingCodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        provider=sink,  # type: ignore[arg-type]
    )
    state.line = line
    state.indent_tokens = list(indents)
    stmt._codegen(state)


def _whole(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def node_positions(
    module: cst.Module, source: bytes, nodes: Iterable[cst.CSTNode]
) -> Mapping[cst.CSTNode, CodeRange]:
    """Return positions (as ``PositionProvider`` defines them) that cover at least ``nodes``."""
    wanted = {id(n) for n in nodes}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return _whole(module)
    starts = _starts(module.body, tree.body)
    if starts is None:
        return _whole(module)
    sink = _Sink()
    firsts = _ast_statements(module.body, tree.body)
    for stmt, start, node in zip(module.body, starts, firsts, strict=True):
        if not _contains(stmt, wanted):
            continue
        if not (
            isinstance(stmt, cst.ClassDef)
            and isinstance(node, ast.ClassDef)
            and _class_members(stmt, node, module, wanted, sink)
        ):
            _generate(stmt, module, start, [], sink)
    if wanted - _ids(sink):
        return _whole(module)
    return sink._computed


def _ids(sink: _Sink) -> set[int]:
    return {id(n) for n in sink._computed}


def _ast_statements(body: Sequence[cst.BaseStatement], nodes: Sequence[ast.stmt]) -> list[ast.stmt]:
    """The first ``ast`` statement of each libcst statement."""
    out = []
    index = 0
    for stmt in body:
        out.append(nodes[index])
        index += _ast_counts(stmt)
    return out


def _class_members(
    klass: cst.ClassDef,
    node: ast.ClassDef,
    module: cst.Module,
    wanted: set[int],
    sink: _Sink,
) -> bool:
    """Regenerate only the members of a top-level class that hold wanted nodes.

    Returns False when the class header itself (decorators, bases, name) holds one, or the body
    is not an indented block, so the caller regenerates the whole class.
    """
    block = klass.body
    if not isinstance(block, cst.IndentedBlock):
        return False
    header = [*klass.decorators, klass.name, *klass.bases, *klass.keywords]
    if any(_contains(part, wanted) for part in header):
        return False
    starts = _starts(block.body, node.body)
    if starts is None:
        return False
    indent = block.indent if block.indent is not None else module.default_indent
    for stmt, line in zip(block.body, starts, strict=True):
        if _contains(stmt, wanted):
            _generate(stmt, module, line, [indent], sink)
    return True
