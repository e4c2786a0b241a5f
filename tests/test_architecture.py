"""The layout's promises: import directions, public names, a cheap import that patches nothing."""

from __future__ import annotations

import ast
import importlib
import pathlib
import subprocess
import sys

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "interlace"


def _modules(package: str) -> list[pathlib.Path]:
    module = SRC / f"{package}.py"
    if module.is_file():
        return [module]
    return sorted((SRC / package).rglob("*.py"))


def _imported_interlace_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("interlace"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("interlace"):
                found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.add("<relative>")
    return found


# package -> the interlace modules it may import (STYLE.md, "Dependency direction"). A name
# ending in ".*" allows the package and everything below it; "interlace" alone is the cheap
# top-level module (its version and the lazy public API), never a subpackage.
# interlace._processes is a leaf like interlace.errors: the process pool and --jobs argument
# that `interlace lint` and `interlace reproduce` share; it imports nothing of interlace.
# interlace.stateful is a client of the public API (explore, replay, Failure) like a user's
# test: never the harness or the engine behind it.
ALLOWED = {
    "_core": ("interlace._core.*", "interlace.errors"),
    "stateful": ("interlace", "interlace.errors"),
    "linters": ("interlace.linters.*", "interlace.errors", "interlace._processes", "interlace"),
    "reference_impl": ("interlace.reference_impl.*",),
    "harness": ("interlace.harness.*", "interlace._core.*", "interlace.errors", "interlace"),
    "fixtures": (
        "interlace.fixtures.*",
        "interlace.reference_impl.*",
        "interlace.errors",
        "interlace._processes",
        "interlace",
    ),
}


def test_the_shared_leaf_modules_import_nothing_of_interlace() -> None:
    for name in ("errors.py", "_processes.py"):
        assert _imported_interlace_modules(SRC / name) == set()


def _allowed(module: str, allowed: tuple[str, ...]) -> bool:
    for entry in allowed:
        if entry.endswith(".*"):
            base = entry[:-2]
            if module == base or module.startswith(base + "."):
                return True
        elif module == entry:
            return True
    return False


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_in_the_allowed_direction(package: str) -> None:
    allowed = ALLOWED[package]
    violations = []
    for path in _modules(package):
        for module in _imported_interlace_modules(path):
            if module == "<relative>" or not _allowed(module, allowed):
                violations.append(f"{path.relative_to(SRC)} imports {module}")
    assert violations == []


def test_the_linter_never_imports_the_harness_or_an_event_loop_runner() -> None:
    code = (
        "import sys, interlace.linters.cli, interlace.linters.rules;"
        "print(sorted(m for m in sys.modules if m.startswith('interlace.harness')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_interlace_is_cheap_and_patches_nothing() -> None:
    code = (
        "import asyncio, sys; lock = asyncio.Lock.acquire; import interlace;"
        "assert asyncio.Lock.acquire is lock;"
        "print(sorted(m for m in sys.modules if m.startswith('interlace')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['interlace', 'interlace.errors']"


PUBLIC_MODULES = ["interlace", "interlace.errors", "interlace.stateful"]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_modules_list_exactly_their_public_names(name: str) -> None:
    module = importlib.import_module(name)
    assert isinstance(module.__all__, tuple)
    public = {
        attribute
        for attribute in dir(module)
        if attribute.isidentifier()
        and not attribute.startswith("_")
        and getattr(getattr(module, attribute), "__module__", name).startswith(name)
        and not isinstance(getattr(module, attribute), type(sys))
    }
    declared = {n for n in module.__all__ if n != "__version__"}
    assert public <= declared | {"annotations"}
    for attribute in module.__all__:
        assert getattr(module, attribute) is not None


def test_the_top_level_api_resolves_lazily_to_the_harness() -> None:
    import interlace
    from interlace._core.result import Exploration, Failure
    from interlace.harness.api import explore, replay

    assert (interlace.explore, interlace.replay) == (explore, replay)
    assert (interlace.Exploration, interlace.Failure) == (Exploration, Failure)
    with pytest.raises(AttributeError, match="module 'interlace' has no attribute 'nope'"):
        interlace.nope  # noqa: B018


def test_every_error_derives_from_interlace_error() -> None:
    from interlace import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.InterlaceError)


# The import graph of src/interlace, read with ast. An edge runs from a module to every
# interlace module it imports, at module level or inside a function (a deferred import still
# couples the two modules; deferring it only hides the cycle from the interpreter). Imports
# under `if TYPE_CHECKING:` are left out of the graph: they never run, and a type named in an
# annotation is the cheapest way for two modules to refer to each other without executing
# each other. Their private names still count (a type is still another module's private).


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> tuple[list[ast.AST], list[ast.AST]]:
    """Every node of the tree, split into (runs, under `if TYPE_CHECKING:` only)."""
    runs: list[ast.AST] = []
    typing_only: list[ast.AST] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        (typing_only if guarded else runs).append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                visit(statement, True)
            for statement in node.orelse:
                visit(statement, guarded)
            visit(node.test, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return runs, typing_only


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _owner(module: str) -> str:
    """The package inside which `module` may be imported: the parent of its deepest private part.

    `interlace.harness._threads` is private to `interlace.harness`; `interlace._core.result`
    is private to `interlace` (the arrows test says which parts of interlace may use it);
    a module with no private part in its name belongs to everyone.
    """
    parts = module.split(".")
    owner = ""
    for index, part in enumerate(parts):
        if _is_private(part):
            owner = ".".join(parts[:index])
    return owner


def _inside(module: str, package: str) -> bool:
    return package == "" or module == package or module.startswith(package + ".")


def _resolve(module: str, level: int, current: str) -> str:
    if level == 0:
        return module
    package = current.split(".")
    if MODULES[current].name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


class _Imports:
    """What one module imports: edges to other modules, and private names it takes from them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.edges: set[str] = set()
        self.private_uses: list[str] = []
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        runs, typing_only = _runtime_nodes(tree)
        bound: dict[str, str] = {}
        for node in runs:
            self._import(node, bound, edge=True)
        for node in typing_only:
            self._import(node, bound, edge=False)
        for node in runs + typing_only:
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = bound.get(node.value.id)
                if module is not None:
                    self._use(module, node.attr, node.lineno)

    def _use(self, module: str, attribute: str, line: int) -> None:
        """`module.attribute` (or `from module import attribute`) appears at `line`."""
        submodule = f"{module}.{attribute}"
        if submodule in MODULES:
            if not _inside(self.name, _owner(submodule)):
                self.private_uses.append(f"{self.name}:{line} imports {submodule}")
        elif _is_private(attribute) and module != self.name:
            self.private_uses.append(f"{self.name}:{line} uses {module}.{attribute}")

    def _import(self, node: ast.AST, bound: dict[str, str], *, edge: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "interlace":
                    continue
                if edge:
                    self.edges.add(alias.name)
                if not _inside(self.name, _owner(alias.name)):
                    self.private_uses.append(f"{self.name}:{node.lineno} imports {alias.name}")
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node.module or "", node.level, self.name)
            if module.split(".")[0] != "interlace":
                return
            if not _inside(self.name, _owner(module)):
                self.private_uses.append(f"{self.name}:{node.lineno} imports {module}")
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                if edge:
                    self.edges.add(submodule if submodule in MODULES else module)
                if submodule in MODULES:
                    bound[alias.asname or alias.name] = submodule
                self._use(module, alias.name, node.lineno)


IMPORTS = {name: _Imports(name) for name in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def import_cycles() -> list[list[str]]:
    """Every set of interlace modules that import each other, directly or round a longer loop."""
    graph = {name: {e for e in imports.edges if e in MODULES} for name, imports in IMPORTS.items()}
    return _cycles(graph)


def private_imports() -> list[str]:
    """Every use of another module's private name, or of a private module outside its package."""
    return [use for imports in IMPORTS.values() for use in imports.private_uses]


def test_the_cycle_finder_finds_a_loop_of_three_and_ignores_a_chain() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c"], ["e"]]
    assert _cycles({"a": {"b"}, "b": {"c"}}) == []


def test_a_private_name_is_private_to_its_module_and_a_private_module_to_its_package() -> None:
    assert _owner("interlace.harness._threads") == "interlace.harness"
    assert _owner("interlace._core.result") == "interlace"
    assert _owner("interlace.harness.api") == ""
    assert _is_private("_Abort")
    assert not _is_private("__version__")


# The harness from the top down (docs/architecture.md): a module imports only modules of the
# rows below its own.
HARNESS_LAYERS = (
    ("cli", "pytest_plugin"),
    ("api",),
    ("_workers", "_shards"),
    ("_asyncio_backend",),
    ("_mixed",),
    ("_por",),
    ("_threads",),
    ("_pools",),
    ("_loop",),
    ("_fault", "_interrupt", "_introspect", "_virtual_clock"),
    ("_runtime", "_instrument", "_footprint", "_clock", "_affinity", "_kernel", "_progress"),
)


def layer_violations() -> list[str]:
    """Every import of a harness module from its own row of HARNESS_LAYERS or a row below."""
    row = {
        f"interlace.harness.{name}": index
        for index, names in enumerate(HARNESS_LAYERS)
        for name in names
    }
    found = []
    for module, index in row.items():
        if module not in IMPORTS:
            continue  # a row naming a module that is gone: the test of the rows says so
        for target in sorted(IMPORTS[module].edges):
            if target in row and row[target] <= index:
                found.append(f"{module} imports {target}, which is not in a row below it")
    return found


def test_every_harness_module_has_a_layer() -> None:
    placed = {f"interlace.harness.{name}" for names in HARNESS_LAYERS for name in names}
    modules = {name for name in MODULES if name.startswith("interlace.harness.")}
    assert modules == placed


def test_harness_modules_import_only_the_layers_below_them() -> None:
    assert layer_violations() == []


def test_no_interlace_modules_import_each_other_in_a_cycle() -> None:
    assert import_cycles() == []


def test_no_module_uses_another_modules_private_names() -> None:
    assert private_imports() == []
