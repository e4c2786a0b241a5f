"""The contract between the lint engine and the rules.

A rule is a :class:`libcst.BatchableCSTVisitor` subclass: the engine parses a file once and
runs every selected rule in one batched traversal (``libcst.visit_batched``). Rules report
*nodes*; the engine turns nodes into line/column positions afterwards, and only for files that
produced a report, because ``PositionProvider`` costs a second pass over the tree (measured in
benchmarks/). A rule that needs positions or other metadata to *decide* must say so in
``METADATA_DEPENDENCIES`` and pay for it; none of the initial rules should.

Invariant: a rule instance is used for exactly one file; ``reports`` holds that file's reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

__all__ = ("LintContext", "Related", "Report", "Rule")


@dataclass(frozen=True, slots=True)
class LintContext:
    """What a rule may know about the run besides the tree.

    Attributes:
        path: the file's path as given on the command line (for messages only).
        target_version: the oldest Python the linted code supports, as ``(3, 11)``.
        shared_classes: class names or ``fnmatch`` patterns the user declared shared between
            threads (``[tool.interlace.lint] shared-classes``), for IL102.
        task_shared_classes: class names or patterns declared shared between concurrent
            asyncio tasks (``task-shared-classes``), read when ``sharing`` is ``"declared"``.
        sharing: ``"inferred"`` (rules infer sharing from the code) or ``"declared"`` (the
            rules about shared state report only inside declared classes; see
            :mod:`interlace.linters._sharing`).
        instance_primitives: which per-instance asyncio primitives IL201 reports on Python
            3.10+: ``"evidence"`` (only when the file shows the object outliving one event
            loop) or ``"all"`` (``[tool.interlace.lint] instance-primitives``).
    """

    path: str = "<string>"
    target_version: tuple[int, int] = (3, 11)
    shared_classes: frozenset[str] = frozenset()
    instance_primitives: str = "evidence"
    task_shared_classes: frozenset[str] = frozenset()
    sharing: str = "inferred"


@dataclass(frozen=True, slots=True)
class Related:
    """A secondary location of a report: the check, the suspension point, the act."""

    node: cst.CSTNode
    message: str


@dataclass(frozen=True, slots=True)
class Report:
    """One finding of one rule, still in terms of nodes."""

    code: str
    node: cst.CSTNode
    message: str
    related: tuple[Related, ...] = ()


class Rule(cst.BatchableCSTVisitor):
    """Base class of every lint rule.

    Subclasses set the class attributes and implement ``visit_*``/``leave_*`` methods; they
    call :meth:`report`. ``VALID`` and ``INVALID`` are code samples that become tests: every
    ``VALID`` sample must produce no report of this rule, every ``INVALID`` sample at least one.
    """

    code: ClassVar[str]
    """Stable code, ``IL`` + three digits."""
    name: ClassVar[str]
    """Kebab-case name, e.g. ``check-then-act-across-await``."""
    summary: ClassVar[str]
    """One line: what the rule flags."""
    message: ClassVar[str]
    """The finding's message template: ``<what is wrong>. <why it matters>. <what to write
    instead>.`` with ``str.format`` fields the rule fills in. ``linters.messages.MESSAGES``
    is the one table of all of them, derived from the rule classes."""
    why: ClassVar[str]
    """Docs: why the pattern is a hazard, in a paragraph (``interlace lint --explain``)."""
    bad_example: ClassVar[str]
    """Docs: a short program the rule flags."""
    good_example: ClassVar[str]
    """Docs: the corrected program, which the rule does not flag."""
    suppress: ClassVar[str]
    """Docs: when a ``# noqa: <code>`` is the right answer."""
    opt_in: ClassVar[bool] = False
    """An opt-in rule runs only when a selector names its full code (``--extend-select IL104``);
    ``IL``, ``IL1`` and ``ALL`` leave it off (ruff's ``explicit-preview-rules``). For rules whose
    findings are real only some of the time, where syntax cannot tell which."""
    shares: ClassVar[str | None] = None
    """What the rule's findings assume shares the state: ``"tasks"`` or ``"threads"``. With
    ``sharing = "declared"`` such a finding is kept only inside a class declared in
    ``task-shared-classes`` or ``shared-classes`` (``"tasks"``; a class threads share is
    also entered by concurrent calls) or in ``shared-classes`` (``"threads"``). ``None``:
    the rule is not about shared state (IL201, IL302) and declarations do not filter it."""
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[str]] = ()
    TRIGGERS: ClassVar[Sequence[str]] = ("async", "await", "thread", "lock", "executor", "future")
    """The engine's cheap pre-filter: lowercase substrings of which a file's lowercased text must
    contain at least one for this rule to visit it (the file is not even parsed when no selected
    rule is triggered). Narrow it in a subclass (IL201 uses ``("asyncio",)``); ``()`` means the
    rule visits every file. Class names from ``shared-classes`` are added as triggers."""

    def __init__(self, context: LintContext) -> None:
        super().__init__()
        self.context = context
        self.reports: list[Report] = []

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        related: Sequence[Related] = (),
    ) -> None:
        """Record a finding at ``node`` with the full message and secondary locations."""
        self.reports.append(Report(self.code, node, message, tuple(related)))
