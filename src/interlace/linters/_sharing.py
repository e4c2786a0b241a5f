"""Declared sharing: the classes a project says concurrent tasks or threads share.

The rules about shared state (IL101, IL104, IL301, IL303 for tasks; IL102 for threads) cannot
see from one file who shares an object: the dispatcher that runs two calls on one agent at once
usually lives in another module or in a dependency. With ``sharing = "declared"`` the user says
it instead, as RacerD's ``@ThreadSafe`` does, and those rules report only inside the classes
declared in ``task-shared-classes`` (tasks) or ``shared-classes`` (threads).

An entry is a class name or an ``fnmatch`` pattern (``"*Storage"``). A class is declared when
its name, or the last dotted part of a base class written in its ``class`` statement, matches an
entry, or when it derives from a declared class of the same file, or is a base class of one
(inherited methods run on the shared instances). A finding belongs to the innermost class whose
body contains it (a nested function belongs to its method's class).

Invariant: nothing here reads metadata; one walk of the module, only for files with reports.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

import libcst as cst

from interlace.linters._rule import Report

__all__ = (
    "SHARING",
    "ClassPatterns",
    "check_class_patterns",
    "class_pattern_error",
    "enclosing_classes",
    "keep_declared",
    "triggers",
)

SHARING = ("inferred", "declared")
"""Values of ``sharing``: rules infer who shares an object from the code, or report only
inside declared classes."""

_PATTERN = re.compile(r"[A-Za-z0-9_*?\[\]!-]+")
"""The characters of a class name or an fnmatch pattern over one (``-`` in a range)."""
_GLOB = frozenset("*?[")


def class_pattern_error(entry: object) -> str | None:
    """Return why ``entry`` is neither a class name nor an ``fnmatch`` pattern (``"Pool"``,
    ``"*Storage"``), and what to write instead; ``None`` when it is one."""
    if not isinstance(entry, str):
        return f"it is {type(entry).__name__}, not a string; write the class name in quotes"
    if not entry:
        return "an empty string names no class; remove it"
    if any(c.isspace() for c in entry):
        names = entry.split()
        fix = (
            "write each class as an entry of its own: " + ", ".join(repr(n) for n in names)
            if len(names) > 1 and all(class_pattern_error(n) is None for n in names)
            else "write the class name without it"
        )
        return f"it has whitespace in it, which no class name has; {fix}"
    if "." in entry:
        last = entry.rsplit(".", 1)[1]
        fix = (
            f"write {last!r}"
            if class_pattern_error(last) is None
            else "write the class name alone, e.g. 'Cache' for 'pkg.Cache'"
        )
        return (
            "a dotted name is not a class name: an entry is matched against a class's own "
            f"name and the last dotted part of each of its base classes; {fix}"
        )
    if _PATTERN.fullmatch(entry) is None or not (entry.isidentifier() or _GLOB & set(entry)):
        return (
            "it is neither a class name (a Python identifier) nor an fnmatch pattern (with *, "
            "? or [...]); write one, e.g. 'ConnectionPool' or '*Cache'"
        )
    if "(?!)" in fnmatch.translate(entry):
        return (
            "it is not a valid fnmatch pattern: a range in [...] runs backwards, so it matches "
            "no name; write the range from low to high, e.g. '[a-z]'"
        )
    return None


def check_class_patterns(value: object) -> frozenset[str] | None:
    """Return ``value`` as a set of class-name patterns, or ``None`` if it is not a list of
    names or ``fnmatch`` patterns (``"Pool"``, ``"*Storage"``; see
    :func:`class_pattern_error`)."""
    if not isinstance(value, list) or any(class_pattern_error(v) is not None for v in value):
        return None
    return frozenset(value)


def triggers(patterns: Iterable[str]) -> tuple[str, ...]:
    """The entries usable as the engine's text pre-filter: plain names, not patterns."""
    return tuple(p for p in patterns if not _GLOB & set(p))


def _base_name(arg: cst.Arg) -> str | None:
    value = arg.value
    if isinstance(value, cst.Subscript):  # Base[T], Generic[T]
        value = value.value
    if isinstance(value, cst.Attribute):
        return value.attr.value
    if isinstance(value, cst.Name):
        return value.value
    return None


class ClassPatterns:
    """Which classes of one module are declared by a set of patterns.

    Invariant: ``declared`` is computed once per module and holds ``id()`` of ``ClassDef``
    nodes; the module must stay alive while it is used.
    """

    def __init__(self, patterns: Collection[str]) -> None:
        self.patterns = tuple(sorted(patterns))

    def matches(self, name: str) -> bool:
        """Say whether a class or base name matches one of the entries."""
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.patterns)

    def declared(self, classes: Sequence[cst.ClassDef]) -> set[int]:
        """Return the ids of the classes (all ``ClassDef`` nodes of one module) that are
        declared: by name, by a base's name, by deriving from a declared class of the module,
        or by being a base of one (its methods run on the shared instances too); to a fixed
        point, so chains of any length within the file count."""
        if not self.patterns:
            return set()
        out: set[int] = set()
        names: set[str] = set()  # the declared classes' names
        parents: set[str] = set()  # the names of their base classes
        bases = {id(c): [n for n in map(_base_name, c.bases) if n is not None] for c in classes}

        def add(node: cst.ClassDef) -> None:
            out.add(id(node))
            names.add(node.name.value)
            parents.update(bases[id(node)])

        for node in classes:
            if self.matches(node.name.value) or any(self.matches(b) for b in bases[id(node)]):
                add(node)
        changed = True
        while changed:
            changed = False
            for node in classes:
                if id(node) not in out and (
                    node.name.value in parents or names.intersection(bases[id(node)])
                ):
                    add(node)
                    changed = True
        return out


def enclosing_classes(
    module: cst.Module, nodes: Iterable[cst.CSTNode]
) -> tuple[dict[int, cst.ClassDef | None], list[cst.ClassDef]]:
    """Map each of ``nodes`` (by ``id``) to the innermost class whose body contains it, and
    list every class of the module in source order. One iterative walk, so deep trees cannot
    overflow."""
    wanted = {id(n) for n in nodes}
    found: dict[int, cst.ClassDef | None] = {}
    classes: list[cst.ClassDef] = []
    stack: list[tuple[cst.CSTNode, cst.ClassDef | None]] = [(module, None)]
    while stack:
        node, owner = stack.pop()
        if id(node) in wanted:
            found[id(node)] = owner
        if isinstance(node, cst.ClassDef):
            classes.append(node)
            # Decorators and bases are evaluated outside the class body.
            stack.append((node.body, node))
            outside = (*node.decorators, *node.bases, *node.keywords)
            stack.extend((child, owner) for child in reversed(outside))
            continue
        stack.extend((child, owner) for child in reversed(node.children))
    return found, classes


def keep_declared(
    module: cst.Module,
    reports: Sequence[Report],
    kinds: Mapping[str, str | None],
    *,
    tasks: Collection[str],
    threads: Collection[str],
) -> list[Report]:
    """Return the reports that ``sharing = "declared"`` keeps: those of rules not about shared
    state (``kinds[code]`` is ``None``), and the others only inside a declared class: one in
    ``threads`` for a ``"threads"`` rule, one in ``tasks`` or ``threads`` for a ``"tasks"``
    rule (a class threads share is also entered by concurrent calls)."""
    filtered = [rep for rep in reports if kinds.get(rep.code) is not None]
    if not filtered:
        return list(reports)
    owners, classes = enclosing_classes(module, (rep.node for rep in filtered))
    by_threads = ClassPatterns(threads).declared(classes)
    by_tasks = by_threads | ClassPatterns(tasks).declared(classes)
    kept = []
    for rep in reports:
        kind = kinds.get(rep.code)
        owner = owners.get(id(rep.node))
        if kind is None or (
            owner is not None and id(owner) in (by_threads if kind == "threads" else by_tasks)
        ):
            kept.append(rep)
    return kept
