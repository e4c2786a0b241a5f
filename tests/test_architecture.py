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
