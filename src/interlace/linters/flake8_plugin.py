"""The flake8 adapter: ``flake8 --select IL,E999`` runs interlace's rules through the same engine.

Registered as the ``flake8.extension`` entry point ``IL``. flake8 applies its own
``--select``/``--ignore``/``# noqa`` to the codes. A file that does not parse reaches no plugin:
flake8 reports it as its own E999, which ``--select IL`` alone does not select, hence the
documented ``--select IL,E999`` (or ``--extend-select IL``, added to flake8's defaults).
An opt-in rule (IL102, IL104) runs only when ``--select`` or ``--extend-select`` names its
full code, as with ``interlace lint``. IL001 (unused ``# noqa`` directives) never runs here:
flake8 reads and applies the directives itself, so only it knows which ones it used.
A rule that crashes is reported as ``IL000`` on line 1 instead of aborting flake8.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from interlace.errors import ConfigError
from interlace.linters._config import (
    INSTANCE_PRIMITIVES,
    LintConfig,
    check_declared,
    parse_target_version,
)
from interlace.linters._engine import lint_source
from interlace.linters._noqa import UNUSED_NOQA
from interlace.linters._rule import LintContext, Rule
from interlace.linters._sharing import SHARING, class_pattern_error
from interlace.linters.rules import all_rules

__all__ = ("Flake8Plugin",)


class Flake8Plugin:
    """flake8 plugin: yields ``(row, col, "ILxxx message", type)`` for each finding."""

    name = "interlace"
    version: ClassVar[str] = "0"
    target_version: ClassVar[tuple[int, int]] = (3, 11)
    shared_classes: ClassVar[frozenset[str]] = frozenset()
    task_shared_classes: ClassVar[frozenset[str]] = frozenset()
    sharing: ClassVar[str] = "inferred"
    instance_primitives: ClassVar[str] = "evidence"
    rules: ClassVar[tuple[type[Rule], ...]] = tuple(r for r in all_rules() if not r.opt_in)
    """The default rules; :meth:`parse_options` adds the opt-in ones named in full."""

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        """Register ``--interlace-target-version``, ``--interlace-shared-classes``,
        ``--interlace-task-shared-classes``, ``--interlace-sharing`` and
        ``--interlace-instance-primitives``."""
        option_manager.add_option(
            "--interlace-target-version",
            default="py311",
            parse_from_config=True,
            help="oldest Python the code supports, e.g. py311 (interlace IL201)",
        )
        option_manager.add_option(
            "--interlace-shared-classes",
            default="",
            parse_from_config=True,
            comma_separated_list=True,
            help="class names or fnmatch patterns shared between threads (interlace IL102)",
        )
        option_manager.add_option(
            "--interlace-task-shared-classes",
            default="",
            parse_from_config=True,
            comma_separated_list=True,
            help="class names or fnmatch patterns shared between concurrent asyncio tasks "
            "(read with --interlace-sharing declared)",
        )
        option_manager.add_option(
            "--interlace-sharing",
            default="inferred",
            parse_from_config=True,
            choices=SHARING,
            help="declared: report IL101/IL102/IL104/IL301/IL303 only inside declared classes",
        )
        option_manager.add_option(
            "--interlace-instance-primitives",
            default="evidence",
            parse_from_config=True,
            choices=INSTANCE_PRIMITIVES,
            help="IL201 on Python 3.10+: report per-instance asyncio primitives only with "
            "evidence that the object outlives one event loop (evidence), or always (all)",
        )

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        """Read the options registered by :meth:`add_options`."""
        from interlace import __version__

        cls.version = __version__
        try:
            cls.target_version = parse_target_version(
                options.interlace_target_version, where="from --interlace-target-version"
            )
            cls.shared_classes = _patterns(options.interlace_shared_classes, "shared-classes")
            cls.task_shared_classes = _patterns(
                options.interlace_task_shared_classes, "task-shared-classes"
            )
            cls.sharing = options.interlace_sharing
            check_declared(
                LintConfig(
                    shared_classes=cls.shared_classes,
                    task_shared_classes=cls.task_shared_classes,
                    sharing=cls.sharing,
                ),
                where="(--interlace-task-shared-classes, --interlace-shared-classes)",
            )
        except ConfigError as exc:  # flake8 would print our traceback
            print(f"flake8 (interlace): error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        cls.instance_primitives = options.interlace_instance_primitives
        named = {
            code.strip().upper()
            for codes in (getattr(options, "select", None), getattr(options, "extend_select", None))
            for code in codes or ()
        }
        cls.rules = tuple(
            r for r in all_rules() if (not r.opt_in or r.code in named) and r.code != UNUSED_NOQA
        )

    def run(self) -> Iterator[tuple[int, int, str, type[Flake8Plugin]]]:
        """Lint the file and yield flake8 results (columns are 0-based in flake8)."""
        context = LintContext(
            path=self.filename,
            target_version=self.target_version,
            shared_classes=self.shared_classes,
            instance_primitives=self.instance_primitives,
            task_shared_classes=self.task_shared_classes,
            sharing=self.sharing,
        )
        result = lint_source(
            "".join(self.lines), self.rules, filename=self.filename, context=context
        )
        for finding in result.findings:
            yield finding.row, finding.column - 1, f"{finding.code} {finding.message}", type(self)
        for error in result.errors:
            if error.kind == "internal":
                yield error.row, error.column - 1, f"IL000 {error.message}", type(self)


def _patterns(values: Sequence[str], key: str) -> frozenset[str]:
    for position, entry in enumerate(values, 1):
        reason = class_pattern_error(entry) if entry else None
        if reason is not None:
            raise ConfigError(
                f"invalid entry {entry!r} (item {position}) in --interlace-{key} "
                f"{','.join(values)!r}: {reason}"
            )
    return frozenset(v for v in values if v)
