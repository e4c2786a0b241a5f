"""Check-then-act across an await on a dict cache creates two clients (hidden).

Bug: ``ClientCache.get`` checks ``key not in self._clients``, awaits the connection, then stores
it. The second request authenticates first, so in stock order the first connection is stored
before the second request checks; when the connection handshake is slower than the
authentication (normal for TLS), both requests miss the cache and two clients are created (two
connection pools, double the rate limit budget spent).

Fix: cache the in-flight connection task, not its result: the first request stores the task
before awaiting it, and every later request awaits the same task.
"""

from __future__ import annotations

import asyncio

from ._io import io

KIND = "exception"
HIDDEN = True


class Client:
    pass


class ClientCache:
    def __init__(self) -> None:
        self.created = 0
        self._clients: dict[str, Client] = {}
        self._pending: dict[str, asyncio.Future[Client]] = {}

    async def _connect(self, key: str) -> Client:
        self.created += 1
        await io()  # TLS handshake
        return Client()

    async def get_racy(self, key: str) -> Client:
        if key not in self._clients:
            client = await self._connect(key)
            self._clients[key] = client
        return self._clients[key]

    async def get_shared(self, key: str) -> Client:
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.ensure_future(self._connect(key))
        return await pending


async def _request(cache: ClientCache, authentications: int, *, shared: bool) -> Client:
    for _ in range(authentications):
        await io()  # authenticate the caller
    return await (cache.get_shared("llm") if shared else cache.get_racy("llm"))


async def _scenario(*, shared: bool) -> None:
    cache = ClientCache()
    first, second = await asyncio.gather(
        _request(cache, 0, shared=shared), _request(cache, 1, shared=shared)
    )
    assert cache.created == 1, f"{cache.created} clients created for one key"
    assert first is second


async def buggy() -> None:
    await _scenario(shared=False)


async def fixed() -> None:
    await _scenario(shared=True)
