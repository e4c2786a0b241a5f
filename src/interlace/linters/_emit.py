"""``interlace lint --emit-test DIR``: turn a finding into a harness test that confirms it.

For each IL101, IL102, IL104, IL301 or IL303 finding inside a method of a class, one pytest
file races the two calls the finding names (the method against itself; for IL303 the loop
against the method that mutates the container) under ``@pytest.mark.interlace``: asyncio tasks
for the task rules, threads for IL102. It asserts what every message says is broken: that the
two calls end as one of the two one-after-the-other orders would (the same exceptions, and the
same shape of the state the finding names: keys, lengths, types, scalar values). A lost update,
a double create, a stale restore or an iteration that raises all break it.

The object is built by the test when the class can be called with no arguments (its
``__init__`` has defaults for every parameter, or it is a dataclass whose fields all have
defaults); otherwise the file has a line marked ``EDIT`` for the user to fill in, and it fails
with a message saying so until they do. Required positional arguments of the methods are
guessed (``"a"``, the same in both calls, so that they contend) and marked ``EDIT if wrong``.

Invariant: this module writes text only; it imports neither the harness nor the linted code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from interlace.linters._engine import Finding

__all__ = ("EMITTED_CODES", "EmitSummary", "emit_tests")

EMITTED_CODES = frozenset({"IL101", "IL102", "IL104", "IL301", "IL303"})
"""The codes ``--emit-test`` writes a test for."""

_STATE = re.compile(r"^`(self|cls)\.([A-Za-z_]\w*)")


@dataclass(frozen=True, slots=True)
class EmitSummary:
    """What ``--emit-test`` wrote.

    Attributes:
        written: the test files, in finding order.
        runnable: how many of them run as written (no ``EDIT`` line left for the user).
        skipped: findings of an emitted code not inside a class method, which get no test.
    """

    written: tuple[Path, ...]
    runnable: int
    skipped: int


@dataclass(frozen=True, slots=True)
class _Target:
    cls: ast.ClassDef
    first: ast.FunctionDef | ast.AsyncFunctionDef
    second: ast.FunctionDef | ast.AsyncFunctionDef
    state: str


def emit_tests(findings: list[Finding], directory: Path) -> EmitSummary:
    """Write one test file per emitted finding into ``directory`` (created if missing)."""
    written: list[Path] = []
    runnable = skipped = 0
    trees: dict[str, ast.Module | None] = {}
    for finding in findings:
        if finding.code not in EMITTED_CODES:
            continue
        if finding.filename not in trees:
            trees[finding.filename] = _parse(finding.filename)
        tree = trees[finding.filename]
        target = _target(tree, finding) if tree is not None else None
        if target is None:
            skipped += 1
            continue
        directory.mkdir(parents=True, exist_ok=True)
        text, ready = _render(finding, target)
        name = (
            f"test_{finding.code.lower()}_{target.cls.name.lower()}_"
            f"{target.first.name.strip('_').lower()}_line{finding.row}.py"
        )
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
        runnable += ready
    return EmitSummary(tuple(written), runnable, skipped)


def _parse(filename: str) -> ast.Module | None:
    try:
        return ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def _enclosing(
    tree: ast.Module, row: int
) -> tuple[ast.ClassDef, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                item.lineno <= row <= (item.end_lineno or item.lineno)
            ):
                return node, item
    return None


def _target(tree: ast.Module, finding: Finding) -> _Target | None:
    found = _enclosing(tree, finding.row)
    match = _STATE.match(finding.message)
    if found is None or match is None:
        return None
    cls, method = found
    second = method
    if finding.code == "IL303":
        mutated = [r for r in finding.related if "mutated in place" in r.message]
        other = _enclosing(tree, mutated[0].row) if mutated else None
        if other is not None and other[0] is cls:
            second = other[1]
    return _Target(cls, method, second, match.group(2))


def _needs_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = function.args
    positional = [*args.posonlyargs, *args.args][1:]  # past self
    required = len(positional) - len(args.defaults)
    kw_required = any(d is None for d in args.kw_defaults)
    return required > 0 or kw_required


def _arguments(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, bool]:
    """Return the ``ARGS`` line of one call, and whether it can run as written.

    Required positional parameters get the same guessed value (``"a"``) in both calls, so
    that the calls contend for one key; a required keyword-only parameter is left to the
    user."""
    args = function.args
    positional = [*args.posonlyargs, *args.args][1:]  # past self
    required = len(positional) - len(args.defaults)
    if any(d is None for d in args.kw_defaults):
        return "()  # EDIT: arguments of this call (it has required keyword-only ones)", False
    if required <= 0:
        return "()", True
    values = ", ".join(['"a"'] * required) + ("," if required == 1 else "")
    names = ", ".join(p.arg for p in positional[:required])
    return f"({values})  # guessed for ({names}), the same in both calls; EDIT if wrong", True


def _buildable(cls: ast.ClassDef) -> bool:
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    if init is not None:
        return not _needs_arguments(init)
    dataclass_ = any(
        (isinstance(d, ast.Name) and d.id == "dataclass")
        or (isinstance(d, ast.Call) and _name_of(d.func) == "dataclass")
        or (isinstance(d, ast.Attribute) and d.attr == "dataclass")
        for d in cls.decorator_list
    )
    if dataclass_:
        return all(
            item.value is not None
            for item in cls.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        )
    # No __init__ of its own: buildable when it derives from nothing this file cannot see.
    return all(isinstance(b, ast.Name) and b.id == "object" for b in cls.bases)


def _name_of(expr: ast.expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    return expr.attr if isinstance(expr, ast.Attribute) else ""


def _module_import(filename: str) -> tuple[str, str]:
    """Return the directory to put on ``sys.path`` and the dotted module name of a file."""
    path = Path(filename).resolve()
    parts = [path.stem]
    parent = path.parent
    while (parent / "__init__.py").exists():
        parts.insert(0, parent.name)
        parent = parent.parent
    return str(parent), ".".join(parts)


def _render(finding: Finding, target: _Target) -> tuple[str, bool]:
    cls = target.cls.name
    first, second = target.first, target.second
    threaded = finding.code == "IL102"
    root, module = _module_import(finding.filename)
    build = _buildable(target.cls)
    args_a, known_a = _arguments(first)
    args_b, known_b = _arguments(second)
    ready = build and known_a and known_b
    make = f"{cls}()" if build else "None  # EDIT: build one shared instance, e.g. Cls(...)"
    summary = finding.message.split(". ")[0]
    lines = [
        f'"""Confirm {finding.code} at {finding.filename}:{finding.row} by running it.',
        "",
        f"{summary}.",
        "",
        f"Two {'threads' if threaded else 'tasks'} call `{cls}.{first.name}` and "
        f"`{cls}.{second.name}` on one",
        "object; the test passes when every explored schedule ends as one of the two",
        "one-after-the-other orders would (same exceptions, same shape of the state).",
        "",
        "Run it with: python -m pytest THIS_FILE (the interlace plugin is installed with it).",
        '"""',
        "",
        "import asyncio" if not threaded else "import threading",
        "import sys",
        "",
        "import pytest",
        "",
        f"sys.path.insert(0, {root!r})",
        f"from {module} import {cls}  # noqa: E402",
        "",
        f"STATE = {target.state!r}",
        f"ARGS_A = {args_a}",
        f"ARGS_B = {args_b}",
        "",
        "",
        "def make():",
        f"    return {make}",
        "",
        "",
        "def shape(value):",
        '    """What the comparison looks at: structure and scalars, not object identity."""',
        "    if value is None or isinstance(value, (bool, int, float, str, bytes)):",
        "        return value",
        "    if isinstance(value, dict):",
        "        return ('dict', tuple(sorted((repr(k), shape(v)) for k, v in value.items())))",
        "    if isinstance(value, (list, tuple, set, frozenset)):",
        "        items = [shape(v) for v in value]",
        "        if isinstance(value, (set, frozenset)):",
        "            items.sort(key=repr)",
        "        return (type(value).__name__, tuple(items))",
        "    return type(value).__name__",
        "",
        "",
        "def outcome(obj, results):",
        "    kinds = tuple(type(r).__name__ if isinstance(r, BaseException) else None",
        "                  for r in results)",
        "    return kinds, shape(getattr(obj, STATE, None))",
        "",
        "",
    ]
    a = f"obj.{first.name}(*ARGS_A)"
    b = f"obj.{second.name}(*ARGS_B)"
    if not threaded:
        lines += [
            "@pytest.mark.interlace(max_schedules=300, seed=1)",
            f"async def test_concurrent_{first.name.strip('_')}_and_{second.name.strip('_')}"
            "_end_as_one_after_the_other() -> None:",
            "    obj = make()",
            "    assert obj is not None, 'fill in make(): the line marked EDIT'",
            "    orders = []",
            "    for swap in (False, True):",
            "        obj = make()",
            f"        calls = [lambda: {a}, lambda: {b}]",
            "        results = [None, None]",
            "        for i in ((1, 0) if swap else (0, 1)):",
            "            results[i] = await _call(calls[i])",
            "        orders.append(outcome(obj, results))",
            "    obj = make()",
            "    results = await asyncio.gather(",
            f"        _call(lambda: {a}), _call(lambda: {b})",
            "    )",
            "    got = outcome(obj, results)",
            "    assert got in orders, f'{got!r} matches neither order: {orders!r}'",
            "",
            "",
            "async def _call(thunk):",
            "    try:",
            "        value = thunk()",
            "        if asyncio.iscoroutine(value):",
            "            value = await value",
            "        return value",
            "    except Exception as exc:",
            "        return exc",
        ]
        text = "\n".join(lines)
    else:
        lines += [
            "def _call(thunk, results, i):",
            "    try:",
            "        results[i] = thunk()",
            "    except Exception as exc:",
            "        results[i] = exc",
            "",
            "",
            "@pytest.mark.interlace(max_schedules=300, seed=1)",
            f"def test_concurrent_{first.name.strip('_')}_and_{second.name.strip('_')}"
            "_end_as_one_after_the_other() -> None:",
            "    assert make() is not None, 'fill in make(): the line marked EDIT'",
            "    orders = []",
            "    for swap in (False, True):",
            "        obj = make()",
            f"        calls = [lambda: {a}, lambda: {b}]",
            "        results = [None, None]",
            "        for i in ((1, 0) if swap else (0, 1)):",
            "            _call(calls[i], results, i)",
            "        orders.append(outcome(obj, results))",
            "    obj = make()",
            f"    calls = [lambda: {a}, lambda: {b}]",
            "    results = [None, None]",
            "    threads = [threading.Thread(target=_call, args=(calls[i], results, i))",
            "               for i in (0, 1)]",
            "    for thread in threads:",
            "        thread.start()",
            "    for thread in threads:",
            "        thread.join()",
            "    got = outcome(obj, results)",
            "    assert got in orders, f'{got!r} matches neither order: {orders!r}'",
        ]
        text = "\n".join(lines)
    return text + "\n", ready
