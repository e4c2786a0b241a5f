"""The rule modules, one per rule family, and their discovery.

Every module in this package is imported on discovery and every :class:`~interlace.linters.Rule`
subclass defined in it with a ``code`` becomes a registered rule, so adding a rule family means
adding a module here and nothing else.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

from interlace.linters._rule import Rule

__all__ = ("all_rules", "rules_by_code")


@functools.cache
def all_rules() -> tuple[type[Rule], ...]:
    """Return every registered rule class, sorted by code.

    Raises:
        RuntimeError: two rule classes claim the same code (a bug in interlace, not user input).
    """
    found: dict[str, type[Rule]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, Rule)
                and obj is not Rule
                and obj.__module__ == module.__name__
                and isinstance(getattr(obj, "code", None), str)
            ):
                other = found.setdefault(obj.code, obj)
                if other is not obj:
                    raise RuntimeError(
                        f"rule code {obj.code!r} is claimed by both {other.__qualname__} and "
                        f"{obj.__qualname__}; give one of them a new code"
                    )
    return tuple(found[code] for code in sorted(found))


def rules_by_code() -> dict[str, type[Rule]]:
    """Return the registered rule classes keyed by code."""
    return {rule.code: rule for rule in all_rules()}
