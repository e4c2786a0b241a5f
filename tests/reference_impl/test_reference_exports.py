"""reference_impl's public surface: exact exports, docstrings, and no imports from interlace."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import interlace.reference_impl as reference_impl

PACKAGE = Path(reference_impl.__file__).parent


def test_all_lists_exactly_the_public_names() -> None:
    # pytest's assertion rewriting may add "@py_builtins"-style globals (it rewrites every
    # module of a distribution that ships a pytest plugin): those are not names at all.
    public = {
        name for name in vars(reference_impl) if name.isidentifier() and not name.startswith("_")
    }
    public -= {"annotations"}
    assert isinstance(reference_impl.__all__, tuple)
    assert sorted(reference_impl.__all__) == sorted(public)


@pytest.mark.parametrize("name", reference_impl.__all__)
def test_every_public_object_has_a_docstring(name: str) -> None:
    value = getattr(reference_impl, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert (value.__doc__ or "").strip(), name
        if inspect.isclass(value):
            for attribute, member in vars(value).items():
                if not attribute.startswith("_") and inspect.isfunction(member):
                    assert (member.__doc__ or "").strip(), f"{name}.{attribute}"


@pytest.mark.parametrize("module", sorted(PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_no_module_imports_the_rest_of_interlace(module: Path) -> None:
    tree = ast.parse(module.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module.name}: use absolute imports"
            names = [node.module or ""]
        else:
            continue
        for imported in names:
            if imported == "interlace" or imported.startswith("interlace."):
                assert imported.startswith("interlace.reference_impl"), (
                    f"{module.name} imports {imported}"
                )
