"""What both the conformance kit (``interlace.conformance``) and its command line
(``interlace.conformance_cli``) name: the components and the default number of examples. A
module of its own so that the command line can be built without importing Hypothesis, and the
kit without importing the command line."""

from __future__ import annotations

__all__ = ("COMPONENTS", "DEFAULT_MAX_EXAMPLES")

COMPONENTS: tuple[str, ...] = ("memory", "stream", "bus", "file_store", "container", "recovery")
"""The components the kit checks, in the order it runs them."""

DEFAULT_MAX_EXAMPLES = 50
"""Hypothesis examples per component when none are asked for."""
