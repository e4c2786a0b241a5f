"""IL104 eval: lazy initialisation across a suspension point, and where IL101 keeps the rest.

IL104 is opt-in; this file runs it together with IL101 to show the split: each finding carries
``# error: IL104`` (one attribute found missing, then created or set up) or ``# error: IL101``
(every other check-then-act). Negatives are named in a comment starting with ``# ok:``.
"""

# select: IL101, IL104

import asyncio

IDLE = "idle"


async def connect(url):
    await asyncio.sleep(0)
    return object()


async def launch_browser():
    await asyncio.sleep(0)
    return object()


class Toolkit:
    def __init__(self):
        self._lock = asyncio.Lock()
        self._driver = None
        self._client = None
        self._tables_ready = False
        self._session = None
        self._sessions = {}
        self._pending = []
        self._inflight = 0
        self.max_inflight = 4
        self.state = IDLE
        self.session_id = None
        self._buffer = []
        self._commands_registered = False

    # Two first tool calls both launch a browser; the first is never closed.
    async def browser(self):
        if self._driver is None:
            self._driver = await launch_browser()  # error: IL104
        return self._driver

    async def client(self):
        if not self._client:
            self._client = await connect("https://api")  # error: IL104
        return self._client

    async def ensure_tables(self):
        if self._tables_ready:
            return
        await self.execute("CREATE TABLE IF NOT EXISTS runs (id text)")
        self._tables_ready = True  # error: IL104

    async def register_commands(self, commands):
        if self._commands_registered or not commands:
            return
        await self.execute(f"REGISTER {commands}")
        self._commands_registered = True  # error: IL104

    # IL101 keeps a test that may pass with the attribute present (`or` a parameter).
    async def client_or_forced(self, force):
        if self._client is None or force:
            self._client = await connect("https://api")  # error: IL101
        return self._client

    async def session(self):
        if self._session is not None:
            return self._session
        client = await connect("https://api")
        self._client = client
        self._session = await self.open(client)  # error: IL104
        return self._session

    # ok: the lock is held across the check and the write.
    async def browser_locked(self):
        async with self._lock:
            if self._driver is None:
                self._driver = await launch_browser()
        return self._driver

    # ok: re-checked after the last suspension point.
    async def client_rechecked(self):
        if self._client is None:
            client = await connect("https://api")
            if self._client is None:
                self._client = client
        return self._client

    # ok: nothing suspends between the check and the write.
    async def client_sync(self):
        if self._client is None:
            self._client = object()
        return await self.ping(self._client)

    # ok: a memo of plain data; a duplicate only repeats work (neither code).
    async def table_names(self):
        if self._names is None:
            rows = await self.execute("SHOW TABLES")
            self._names = sorted(r for r in rows)
        return self._names

    # IL101 keeps a registry get-or-create (dict membership).
    async def session_for(self, user):
        if user not in self._sessions:
            self._sessions[user] = await self.open(user)  # error: IL101
        return self._sessions[user]

    # IL101 keeps a state-machine guard.
    async def run(self, task):
        if self.state != IDLE:
            raise RuntimeError("busy")
        await self.load_tools()
        self.state = "running"  # error: IL101
        return await self.execute(task)

    # IL101 keeps a cap.
    async def admit(self, job):
        if self._inflight >= self.max_inflight:
            return False
        await self.reserve(job)
        self._inflight += 1  # error: IL101
        return True

    # IL101 keeps gather-then-clear.
    async def drain(self):
        if self._pending:
            await asyncio.gather(*self._pending)
            self._pending.clear()  # error: IL101

    # IL101 keeps a check of two attributes.
    async def both(self):
        if self._client is None or self._session is None:
            self._client = await connect("https://api")  # error: IL101
            self._session = await self.open(self._client)

    # IL101 keeps setup that writes state another check reads (two setups interleave).
    async def initialize(self):
        if self._tables_ready:
            return
        self.session_id = await self.new_id()
        if not self.session_id:
            self.session_id = "default"
        await self.execute("CREATE TABLE IF NOT EXISTS runs (id text)")
        self._tables_ready = True  # error: IL101

    # IL101 keeps a buffer refilled when empty: it is a container (popped below).
    async def next_item(self):
        if not self._buffer:
            self._buffer = await self.fetch_page()  # error: IL101
        return self._buffer.pop()

    # ok: a reset after a teardown is idempotent.
    async def close_browser(self):
        if self._driver is not None:
            await self.execute("close")
            self._driver = None

    # ok: acquire and release in try/finally hold the lock across both.
    async def client_manual_lock(self):
        await self._lock.acquire()
        try:
            if self._client is None:
                self._client = await connect("https://api")
        finally:
            self._lock.release()
        return self._client

    # ok: the write does not depend on the check (another attribute).
    async def warm(self):
        if self._client is None:
            return
        await self.ping(self._client)
        self._warmed = True

    # ok: a local is not shared.
    async def local_client(self):
        client = None
        if client is None:
            client = await connect("https://api")
        return client

    # ok: every caller of the helper holds the lock.
    async def tables(self):
        async with self._lock:
            await self._ensure_tables_locked()

    async def _ensure_tables_locked(self):
        if not self._tables_ready:
            await self.execute("CREATE TABLE IF NOT EXISTS runs (id text)")
            self._tables_ready = True

    # ok: the lock is held across both, with the flag tested alongside a parameter.
    async def register_locked(self, commands):
        async with self._lock:
            if self._commands_registered or not commands:
                return
            await self.execute(f"REGISTER {commands}")
            self._commands_registered = True

    # ok: a reset to False after the teardown of the registration.
    async def unregister(self):
        if self._commands_registered:
            await self.execute("UNREGISTER")
            self._commands_registered = False

    # ok: an async generator is driven by one consumer.
    async def pages(self):
        if self._session is None:
            self._session = await self.open("pages")
        yield self._session

    async def execute(self, statement):
        await asyncio.sleep(0)
        return []

    async def open(self, what):
        await asyncio.sleep(0)
        return object()

    async def ping(self, client):
        await asyncio.sleep(0)

    async def load_tools(self):
        await asyncio.sleep(0)

    async def reserve(self, job):
        await asyncio.sleep(0)

    async def new_id(self):
        await asyncio.sleep(0)
        return "id"

    async def fetch_page(self):
        await asyncio.sleep(0)
        return [1, 2]


class Runner:
    """An object that drives its own setup from its one background task."""

    def __init__(self):
        self._conn = None
        self._task = asyncio.create_task(self._loop())

    # ok: only the runner's one background task runs this, and no other method writes `_conn`.
    async def _loop(self):
        while True:
            if self._conn is None:
                self._conn = await connect("https://api")
            await asyncio.sleep(1)


ISOLATED = "isolated"


class NetworkProvider:
    """A configured mode next to the flag: the mode is configuration, set once."""

    def __init__(self, network):
        self.network = network
        self._network_ready = False
        self._lock = asyncio.Lock()

    async def _docker(self, *args):
        await asyncio.sleep(0)
        return 0

    # Not IL101: `self.network` is configuration, written only by `__init__`, like a
    # parameter; the test finds one flag missing, so this is lazy set-up, IL104's.
    async def ensure_network(self):
        if self.network != ISOLATED or self._network_ready:
            return
        await self._docker("network", "create")
        self._network_ready = True  # error: IL104

    # ok: the flag is tested again after the last await.
    async def ensure_network_rechecked(self):
        if self.network != ISOLATED or self._network_ready:
            return
        await self._docker("network", "create")
        if not self._network_ready:
            self._network_ready = True

    async def remove_network(self):
        await self._docker("network", "rm")
        self._network_ready = False


class SwitchableProvider(NetworkProvider):
    """The mode can change while the set-up is suspended: the guard reads changing state."""

    def use(self, network):
        self.network = network

    async def ensure_network(self):
        if self.network != ISOLATED or self._network_ready:
            return
        await self._docker("network", "create")
        self._network_ready = True  # error: IL101

    # ok: one lock is held across the test of the mode and flag and the write.
    async def ensure_network_locked(self):
        async with self._lock:
            if self.network != ISOLATED or self._network_ready:
                return
            await self._docker("network", "create")
            self._network_ready = True
