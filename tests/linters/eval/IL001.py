"""IL001 eval: `# noqa` directives whose interlace codes suppress nothing on their line.

IL001 is opt-in; this file runs it with the default rules, so the directives for the opt-in
IL102 and IL104 are never reported here (whether they are used is unknown). A line whose
directive suppresses nothing carries ``# error: IL001`` after the directive (a second comment
ends the list of codes, so the expectation is not read as a code). Negatives are named in a
comment starting with ``# ok:``.
"""

# select: IL001, IL101, IL201, IL301, IL302, IL303

import asyncio
import threading

# ok: the directive suppresses this line's IL201 finding
LOCK = asyncio.Lock()  # noqa: IL201
# ok: a prefix is used when it suppressed any finding
LIMIT = asyncio.Semaphore(2)  # noqa: IL2
# ok: a reason after the codes is not a code
READY = asyncio.Event()  # noqa: IL201 one loop per process, created before main()
# ok: the finding starts on the directive's line, the first line of the statement
EVENTS = asyncio.Queue(  # noqa: IL201
    maxsize=10,
)

# A threading lock is not an asyncio primitive: IL201 never reported this line.
THREAD_LOCK = threading.Lock()  # noqa: IL201  # error: IL001
# One code used, one not: the directive is reported for the unused one only.
CONDITION = asyncio.Condition()  # noqa: IL201, IL301  # error: IL001
# A directive on the last line of a statement suppresses nothing: findings start on the first.
DONE = asyncio.Event(  # error: IL201
)  # noqa: IL201  # error: IL001
# A code no rule has (a typo of IL301).
RETRIES = 3  # noqa: IL310  # error: IL001
# A prefix whose every rule ran and found nothing here.
TIMEOUT = 5.0  # noqa: IL3  # error: IL001
# The directive after another comment is the one read, and any case of `noqa` is.
BACKOFF = 0.5  # tuned by hand  # NOQA: IL303  # error: IL001
# Other tools' codes are left alone; the interlace code is reported.
VERY_LONG_NAME_FOR_A_SETTING = "x" * 3  # noqa: E501, IL201  # error: IL001

# ok: a bare directive may be for any tool
SETTING = 1  # noqa
# ok: only other tools' codes
OTHER = 2  # noqa: E501, ASYNC100
# ok: the opt-in IL102 is not selected in this file, so its directive may be used elsewhere
CACHE = {}  # noqa: IL102
# ok: IL1 also covers the opt-in IL102 and IL104, which did not run
PENDING = []  # noqa: IL1
# ok: listing IL001 keeps a directive on purpose, unknown codes included
KEPT = 3  # noqa: IL001, IL101, IL999
# ok: IL0 covers IL001, so the directive suppresses its own IL001 finding
ALSO_KEPT = 4  # noqa: IL0, IL201
# ok: the flake8 plugin's code for a crashed rule is not ours to judge
CRASHED = 5  # noqa: IL000
# ok: an invalid directive (lower-case code) suppresses nothing already
LOWER = 6  # noqa: il101
# ok: an invalid directive (a code glued to a word)
GLUED = 7  # noqa: IL101x
# ok: not a directive at all
NOQANYTHING = 8  # noqanything: IL101
# ok: text in a string is not a comment
TEXT = "# noqa: IL101"
# ok: nor is text in a docstring line
DOC = """
x = 1  # noqa: IL101
"""


class Agent:
    def __init__(self):
        self.state = "idle"
        self._subs = []

    async def run(self, task):
        if self.state != "idle":
            raise RuntimeError("busy")
        # Fixed: the write moved before the await; the directive stayed behind.
        self.state = "running"  # noqa: IL101  # error: IL001
        await self.load_tools()
        return await self.step(task)

    async def resume(self, task):
        if self.state != "paused":
            raise RuntimeError("not paused")
        await self.load_tools()
        # ok: the directive suppresses this line's IL101 finding
        self.state = "running"  # noqa: IL101

    async def publish(self, event):
        if self.state == "idle":
            # ok: both codes suppress a finding on this line
            for cb in self._subs: self.state = await cb(event)  # noqa: IL101, IL303

    async def drain(self, event):
        if self.state == "idle":
            # One finding of two is suppressed; IL301 suppresses nothing.
            for cb in self._subs: self.state = await cb(event)  # noqa: IL101, IL301  # error: IL001, IL303

    def drop(self, cb):
        self._subs.remove(cb)

    async def load_tools(self):
        await asyncio.sleep(0)

    async def step(self, task):
        await asyncio.sleep(0)
        return task
