"""The read-only walker calls exactly the hooks ``libcst`` calls, in the same order."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from interlace.linters import _walk

ROOT = Path(__file__).parents[2]
SAMPLES = sorted(
    [
        *(ROOT / "tests" / "linters" / "eval").glob("*.py"),
        *(ROOT / "src" / "interlace" / "linters").rglob("*.py"),
        Path(cst.__file__).parent / "_nodes" / "expression.py",
        Path(cst.__file__).parent / "_nodes" / "statement.py",
    ]
)
EXTRA = """\
from . import (a, b)
from .m import *
x = f"{a!r:>{width}} {b=}"
async def g[T](*args, **kw) -> T:
    async with a as (b, c), d:
        async for i in aiter():
            yield [j async for j in i if await j]
    match x:
        case {"k": [1, *rest]} | Point(x=0) if rest: pass
        case _: del x
lambda *, k=1: (yield)
type Alias = list[int]
"""

Event = tuple[str, str, int]


class Recorder(cst.CSTVisitor):
    """Records every hook libcst's own traversal calls."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Event] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", type(node).__name__, id(node)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", type(original_node).__name__, id(original_node)))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("visit", f"{type(node).__name__}_{attribute}", id(node)))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        name = f"{type(original_node).__name__}_{attribute}"
        self.events.append(("leave", name, id(original_node)))


class RecordingWalker(_walk._Walker):
    """The walker with a recording hook for every node type and every field."""

    def __init__(self) -> None:
        super().__init__([])
        self.events: list[Event] = []

    def _hook(self, kind: str, name: str) -> _walk._Hook:
        return lambda node: self.events.append((kind, name, id(node)))

    def plan(self, node_type: type[cst.CSTNode]) -> _walk._Plan:
        plan = self.plans.get(node_type)
        if plan is None:
            name = node_type.__name__
            order = _walk.field_order(node_type)
            assert order is not None, name
            plan = _walk._Plan(
                (self._hook("visit", name),),
                (self._hook("leave", name),),
                tuple(
                    (
                        field,
                        skip_none,
                        (self._hook("visit", f"{name}_{field}"),),
                        (self._hook("leave", f"{name}_{field}"),),
                    )
                    for field, skip_none in order
                ),
            )
            self.plans[node_type] = plan
        return plan


def sources() -> list[tuple[str, str]]:
    return [(p.name, p.read_text(encoding="utf-8")) for p in SAMPLES] + [("extra", EXTRA)]


@pytest.mark.parametrize(("name", "source"), sources(), ids=[n for n, _ in sources()])
def test_walker_calls_the_same_hooks_as_libcst_in_the_same_order(name: str, source: str) -> None:
    module = cst.parse_module(source)
    expected = Recorder()
    module.visit(expected)
    walker = RecordingWalker()
    walker.walk(module)
    assert walker.events == expected.events


def test_every_concrete_node_type_has_a_readable_field_order() -> None:
    def subclasses(klass: type) -> set[type[cst.CSTNode]]:
        found: set[type[cst.CSTNode]] = set()
        sub: type[cst.CSTNode]
        for sub in klass.__subclasses__():
            found |= {sub, *subclasses(sub)}
        return found

    root: type = cst.CSTNode
    concrete = [t for t in subclasses(root) if not getattr(t, "__abstractmethods__", ())]
    assert [t.__name__ for t in concrete if _walk.field_order(t) is None] == []
