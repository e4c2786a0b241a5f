"""The one table of lint messages, code -> message template (flake8-bugbear's ``error_codes``).

Derived from the rule classes, so a message is written once, next to the rule that fills it in.
Each template reads ``<what is wrong>. <why it matters>. <what to write instead>.`` with
``str.format`` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from interlace.linters.rules import all_rules

__all__ = ("MESSAGES",)

MESSAGES: Mapping[str, str] = MappingProxyType({rule.code: rule.message for rule in all_rules()})
"""Code -> message template of every registered rule."""
