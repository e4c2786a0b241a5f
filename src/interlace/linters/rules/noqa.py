"""Rules about the ``# noqa`` directives themselves: IL001.

* IL001 unused-noqa: ``# noqa: IL101`` on a line where no IL101 finding is left to suppress.

IL001 is not a visitor: the engine runs it after the other rules (``_engine``), over the
file's directives and the findings of every rule before suppression, because only then is it
known what a directive suppressed. The class holds its code, its selection and its
documentation, as every rule's class does. Its findings are the only fixable ones: the engine
gives each the edit that removes its unused codes (``Finding.fix``), which ``--fix`` applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from interlace.linters._noqa import UNUSED_NOQA
from interlace.linters._rule import Rule

__all__ = ("FlagUnusedNoqa",)


class FlagUnusedNoqa(Rule):
    """IL001 (opt-in): a ``# noqa`` directive's interlace code that suppressed nothing."""

    code: ClassVar[str] = UNUSED_NOQA
    name: ClassVar[str] = "unused-noqa"
    opt_in: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "A `# noqa: CODES` directive lists interlace codes (`IL...`) that suppressed no finding "
        "on its line (opt-in: select `IL001` by its full code)."
    )
    message: ClassVar[str] = (
        "unused `noqa` directive: {codes} {verb} nothing on this line. A directive that "
        "suppresses nothing still hides the next finding of its codes on this line, unreviewed, "
        "and tells readers of a hazard that is not there. Remove the unused codes (the whole "
        "directive when none is left), or list `IL001` in it to keep it on purpose."
    )
    why: ClassVar[str] = (
        "Directives outlive the findings they were written for: the code gets fixed, the rule gets "
        "narrower, the target version changes, and `# noqa: IL101` stays behind. ruff's `RUF100` "
        "reports unused directives, but not the codes of other tools such as interlace's (declared "
        "with `lint.external`), so nothing else reports these. A stale directive costs twice: a "
        "reader takes it as a known hazard, and a new finding of the same code on that line is "
        "suppressed before anyone sees it. IL001 reports a directive at its `#` when it lists an "
        "`IL` code that suppressed no finding on its line in this run; it names every such code, "
        "and says `unknown code` for one no rule has (a typo such as `IL310`, or a code that never "
        "existed). A listed prefix (`# noqa: IL1`) is used when it suppressed any finding. It says "
        "nothing it cannot know: a code whose rule is not enabled for the file (not selected, "
        "ignored, or in `per-file-ignores`; a prefix, when any rule it covers is not) or whose "
        "rule failed on the file is left alone, as are the codes of other tools (`E501`, "
        "`ASYNC100`), the flake8 plugin's `IL000`, a bare `# noqa` (it may be for another tool) "
        "and an invalid directive (which suppresses nothing already). A directive that lists "
        "`IL001` (or `IL0`, `IL00`) is never reported: IL001 is reported on the directive's own "
        "line, so that directive suppresses it like any code. Used means used in this run, with "
        "its configuration: a directive for a finding that only another `target-version` or "
        "`sharing` reports is unused in this one. `interlace lint --fix` removes the unused "
        "codes, and the whole directive when none is left, as ruff's fix of `RUF100` does."
    )
    bad_example: ClassVar[str] = (
        "class Agent:\n"
        "    async def run(self, task):\n"
        "        if self.state != 'idle':\n"
        "            raise RuntimeError('busy')\n"
        "        # Fixed: the write now comes before the await; the directive stayed behind.\n"
        "        self.state = 'running'  # noqa: IL101\n"
        "        await self.load_tools()\n"
        "        return await self.step(task)  # noqa: IL310 (no such rule)\n"
    )
    good_example: ClassVar[str] = (
        "import asyncio\n"
        "\n"
        "class Agent:\n"
        "    def __init__(self):\n"
        "        # IL201 reports this only for targets before 3.10, and CI lints for both.\n"
        "        self._lock = asyncio.Lock()  # noqa: IL001, IL201\n"
        "\n"
        "    async def run(self, task):\n"
        "        if self.state != 'idle':\n"
        "            raise RuntimeError('busy')\n"
        "        self.state = 'running'\n"
        "        await self.load_tools()\n"
        "        return await self.step(task)\n"
    )
    suppress: ClassVar[str] = (
        "When a directive is needed in some runs and not others (the project is linted for "
        'several target versions, or with and without `sharing = "declared"`): add `IL001` '
        "to that directive (`# noqa: IL001, IL201`), which keeps it as it is. `--add-noqa` "
        "never does this for you."
    )
    VALID: ClassVar[Sequence[str]] = (
        "x = 1\n",
        # The rule of the listed code is not enabled here: whether it is used is unknown.
        "x = 1  # noqa: IL101\n",
        "x = 1  # noqa\n",
        "x = 1  # noqa: E501, ASYNC100\n",
        "x = 1  # noqa: IL001, IL999\n",
        "x = 1  # noqa: IL000\n",
        "x = 1  # noqa: IL\n",
        's = "# noqa: IL999"\n',
    )
    INVALID: ClassVar[Sequence[str]] = (
        "x = 1  # noqa: IL999\n",
        "x = 1  # noqa: E501, IL4  # IL4 is a prefix of no rule\n",
        "async def f():\n    await g()  # why  # noqa: IL990\n",
    )
    TRIGGERS: ClassVar[Sequence[str]] = ("noqa",)
    """A file without the text ``noqa`` has no directive, so the engine does not look."""
