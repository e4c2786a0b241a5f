"""Positions of reported nodes from partial code generation equal ``PositionProvider``'s."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from interlace.linters._positions import node_positions
from interlace.linters._walk import walk_batched

ROOT = Path(__file__).parents[2]
TRICKY = """\
# header comment

import asyncio; import os  # two statements on one line


@decorator  # comment
# comment between decorators
@other(
    arg,
)
async def f(a,
            b):
    x = '''multi
line''' ; y = a \\
        + b
    return await g(x, y)


class Outer(Base, metaclass=Meta):
    \"\"\"Doc.\"\"\"

    # leading comment
    lock = asyncio.Lock()

    @property
    def value(self):
        return self._v

    class Inner:
        def m(self):
            return 1

def tabbed():
\tif x:
\t\treturn 1

if True:
    def h(): pass
"""
SOURCES = [
    ("tricky", TRICKY),
    ("tricky-crlf", TRICKY.replace("\n", "\r\n")),
    *[
        (p.name, p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "tests" / "linters" / "eval").glob("*.py"))
    ],
    *[
        (p.name, p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "src" / "interlace" / "linters").glob("_[ew]*.py"))
    ],
]


class Everything(cst.BatchableCSTVisitor):
    """Collects the node kinds rules report on."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True

    def visit_Name(self, node: cst.Name) -> None:
        self.nodes.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.nodes.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.nodes.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.nodes.append(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.nodes.append(node)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.nodes.append(node)

    def visit_Await(self, node: cst.Await) -> None:
        self.nodes.append(node)


@pytest.mark.parametrize(("name", "source"), SOURCES, ids=[n for n, _ in SOURCES])
def test_partial_positions_equal_position_provider(name: str, source: str) -> None:
    data = source.encode("utf-8")
    module = cst.parse_module(data)
    collector = Everything()
    walk_batched(module, [collector])
    full = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    # One node at a time, so every statement is regenerated on its own at least once.
    mismatches = []
    for node in collector.nodes[:: max(1, len(collector.nodes) // 40)]:
        fast = node_positions(module, data, [node])
        if fast[node] != full[node]:
            mismatches.append((type(node).__name__, full[node], fast[node]))
    assert mismatches == []


def test_unparsable_by_ast_falls_back_to_the_whole_module() -> None:
    data = b"type Alias = int\nx = f(1)\n"  # libcst parses 3.12 syntax on any Python
    module = cst.parse_module(data)
    line = module.body[1]
    assert isinstance(line, cst.SimpleStatementLine)
    assign = line.body[0]
    assert isinstance(assign, cst.Assign)
    call = assign.value
    positions = node_positions(module, data, [call])
    assert (positions[call].start.line, positions[call].start.column) == (2, 4)
