"""interlace: find, reproduce and prevent concurrency bugs in asyncio and threaded Python.

The public API::

    from interlace import explore, replay

    exploration = explore(my_async_test, max_schedules=1000, seed=1)
    if exploration.failure:
        print(exploration.failure.report)
        replay(my_async_test, exploration.failure.token)  # the same failure, exactly

Importing this package is cheap and patches nothing: the harness is imported on first use.
``interlace.stateful`` (Hypothesis-drawn concurrent scenarios checked for linearizability)
is a module of its own, imported explicitly; it needs Hypothesis.
"""

from __future__ import annotations

import typing
from typing import Any

from interlace import errors

__version__ = "0.1.0"

__all__ = (
    "Exploration",
    "Failure",
    "__version__",
    "errors",
    "explore",
    "replay",
)

if typing.TYPE_CHECKING:
    from interlace._core.result import Exploration, Failure
    from interlace.harness.api import explore, replay

_LAZY = {
    "Exploration": "interlace._core.result",
    "Failure": "interlace._core.result",
    "explore": "interlace.harness.api",
    "replay": "interlace.harness.api",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'interlace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
