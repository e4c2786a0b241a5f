"""Static concurrency rules on libcst, run as ``interlace lint``.

The Python API::

    from interlace.linters import lint_paths

    result = lint_paths(["src"])
    for finding in result.findings:
        print(finding.filename, finding.row, finding.code, finding.message)

Rules live in :mod:`interlace.linters.rules`, one module per family; the command line is
:mod:`interlace.linters.cli`; the settings are ``[tool.interlace.lint]`` (docs/lint.md).
"""

from __future__ import annotations

from interlace.linters._config import LintConfig, find_config, load_config
from interlace.linters._engine import FileError, FileResult, Finding, RelatedLocation, lint_source
from interlace.linters._rule import LintContext, Related, Report, Rule
from interlace.linters._run import LintResult, lint_paths

__all__ = (
    "FileError",
    "FileResult",
    "Finding",
    "LintConfig",
    "LintContext",
    "LintResult",
    "Related",
    "RelatedLocation",
    "Report",
    "Rule",
    "find_config",
    "lint_paths",
    "lint_source",
    "load_config",
)
