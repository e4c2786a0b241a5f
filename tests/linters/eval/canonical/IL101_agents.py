"""IL101, IL104 and IL301 canonical shapes in agent code."""

import asyncio
import contextlib
import threading


async def fetch(url):
    await asyncio.sleep(0.01)
    return url


class Agent:
    def __init__(self):
        self.state = "idle"
        self.sessions = {}
        self.budget = 10
        self.history = []
        self.model = "small"
        self.tokens_used = 0
        self._client = None
        self._ready = False

    async def run(self, task):
        if self.state != "idle":
            raise RuntimeError("busy")
        await fetch(task)
        self.state = "running"  # expect: IL101

    async def session(self, user):
        if user not in self.sessions:
            conn = await fetch(user)
            self.sessions[user] = conn  # expect: IL101
        return self.sessions[user]

    async def spend(self, cost):
        if self.budget >= cost:
            await fetch("charge")
            self.budget -= cost  # expect: IL101

    async def with_model(self, model, prompt):
        previous = self.model
        self.model = model
        try:
            return await fetch(prompt)
        finally:
            self.model = previous  # expect: IL301

    @contextlib.asynccontextmanager
    async def temporarily(self, model):
        old = self.model
        self.model = model
        yield
        self.model = old  # expect: IL301

    async def client(self):
        if self._client is None:
            self._client = await fetch("connect")  # expect: IL104
        return self._client

    async def ready(self):
        if not self._ready:
            await fetch("setup")
            self._ready = True  # expect: IL104

    async def trim(self):
        if len(self.history) > 100:
            await fetch("summarise")
            self.history.clear()  # expect: IL101

    # ok: no suspension point between the check and the write.
    async def run_atomic(self, task):
        if self.state != "idle":
            raise RuntimeError("busy")
        self.state = "running"
        return await fetch(task)

    # ok: the write re-checks after the last await.
    async def session_rechecked(self, user):
        if user not in self.sessions:
            conn = await fetch(user)
            if user not in self.sessions:
                self.sessions[user] = conn
        return self.sessions[user]

    # ok: setdefault keeps the first one.
    async def session_setdefault(self, user):
        if user not in self.sessions:
            conn = await fetch(user)
            return self.sessions.setdefault(user, conn)
        return self.sessions[user]

    # ok: a local copy only, nothing written back.
    async def peek(self):
        model = self.model
        await fetch(model)
        return model

    # ok: the restore does not cross a suspension point.
    def swap_model_sync(self, model):
        old = self.model
        self.model = model
        self.model = old

    # ok: the client is created before the first await that could let another task in.
    async def client_eager(self):
        if self._client is None:
            self._client = object()
        return await fetch(self._client)

    # ok: a check of a local, not shared state.
    async def run_local(self, task):
        state = "idle"
        if state == "idle":
            await fetch(task)
            state = "running"
        return state

    # ok: an increment after an await reads the fresh value.
    async def count_tokens(self, prompt):
        result = await fetch(prompt)
        self.tokens_used += len(result)
        return result


class LockedAgent:
    def __init__(self):
        self.state = "idle"
        self._lock = asyncio.Lock()  # expect: IL201
        self.sessions = {}

    # ok: one lock across the check and the write.
    async def run(self, task):
        async with self._lock:
            if self.state != "idle":
                raise RuntimeError("busy")
            await fetch(task)
            self.state = "running"

    # ok: the lock covers the whole get-or-create.
    async def session(self, user):
        async with self._lock:
            if user not in self.sessions:
                self.sessions[user] = await fetch(user)
            return self.sessions[user]


_lock = asyncio.Lock()  # expect: IL201
_events = asyncio.Event()  # expect: IL201


class Holder:
    ready = asyncio.Event()  # expect: IL201

    # ok: created inside the running loop, per call.
    async def make(self):
        lock = asyncio.Lock()
        async with lock:
            return await fetch("x")


class ThreadLocked:
    def __init__(self):
        # ok: a threading lock is not bound to an event loop.
        self._lock = threading.Lock()
        self.model = "small"

    # ok: the override and the restore both happen under one lock held across the await.
    async def with_model(self, model, prompt):
        async with _lock:
            previous = self.model
            self.model = model
            result = await fetch(prompt)
            self.model = previous
        return result
