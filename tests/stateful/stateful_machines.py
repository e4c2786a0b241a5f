"""Concurrent objects, correct and buggy, and the machines that test them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, invariant, precondition

from interlace.stateful import ConcurrentStateMachine, initialize, rule


class AsyncCounter:
    """A counter whose increment reads, awaits, then writes: two increments can lose one."""

    def __init__(self, *, locked: bool) -> None:
        self.value = 0
        self.lock: asyncio.Lock | None = asyncio.Lock() if locked else None

    async def _increment(self) -> int:
        value = self.value
        await asyncio.sleep(0)
        self.value = value + 1
        return self.value

    async def increment(self) -> int:
        if self.lock is None:
            return await self._increment()
        async with self.lock:
            return await self._increment()


class UnlockedCounterMachine(ConcurrentStateMachine):
    def __init__(self) -> None:
        self.counter = AsyncCounter(locked=False)

    @rule()
    async def get(self) -> int:
        return self.counter.value

    @rule()
    async def increment(self) -> int:
        return await self.counter.increment()


class LockedCounterMachine(UnlockedCounterMachine):
    def __init__(self) -> None:
        self.counter = AsyncCounter(locked=True)


class CountedIncrementsMachine(UnlockedCounterMachine):
    """The unlocked counter with an invariant: the count is the number of increments."""

    def __init__(self) -> None:
        super().__init__()
        self.increments = 0

    @rule()
    async def increment(self) -> int:
        self.increments += 1
        return await self.counter.increment()

    @invariant()
    def counts_every_increment(self) -> None:
        assert self.counter.value == self.increments, (self.counter.value, self.increments)


class Cache:
    """A get-or-create cache; without its lock two threads can both create the value."""

    def __init__(self, *, locked: bool) -> None:
        self.items: dict[str, object] = {}
        self.lock: contextlib.AbstractContextManager[Any] = (
            threading.Lock() if locked else contextlib.nullcontext()
        )

    def get_or_create(self, key: str) -> object:
        with self.lock:
            if key not in self.items:
                self.items[key] = object()
            return self.items[key]


class UnlockedCacheMachine(ConcurrentStateMachine):
    def __init__(self) -> None:
        self.cache = Cache(locked=False)

    @rule(key=st.sampled_from(["a", "b"]))
    def get_or_create(self, key: str) -> object:
        return self.cache.get_or_create(key)


class LockedCacheMachine(UnlockedCacheMachine):
    def __init__(self) -> None:
        self.cache = Cache(locked=True)


class AsyncMap:
    """A map with an async ``setdefault`` that checks, awaits (a store round trip), then
    writes: without the lock two setdefaults of one key both write."""

    def __init__(self, *, locked: bool) -> None:
        self.items: dict[str, int] = {}
        self.lock = asyncio.Lock() if locked else None

    async def _setdefault(self, key: str, value: int) -> int:
        if key not in self.items:
            await asyncio.sleep(0)
            self.items[key] = value  # noqa: IL101 - the race these tests must find
        return self.items[key]

    async def setdefault(self, key: str, value: int) -> int:
        if self.lock is None:
            return await self._setdefault(key, value)
        async with self.lock:
            return await self._setdefault(key, value)

    async def get(self, key: str) -> int | None:
        return self.items.get(key)


KEYS = st.sampled_from(["k"])


class UnlockedMapMachine(ConcurrentStateMachine, model=dict):
    def __init__(self) -> None:
        self.map = AsyncMap(locked=False)

    @rule(key=KEYS)
    async def get(self, key: str) -> int | None:
        return await self.map.get(key)

    @rule(key=KEYS, value=st.integers(0, 3))
    async def setdefault(self, key: str, value: int) -> int:
        return await self.map.setdefault(key, value)


class LockedMapMachine(UnlockedMapMachine):
    def __init__(self) -> None:
        self.map = AsyncMap(locked=True)


class OffByOneMapMachine(LockedMapMachine):
    """Disagrees with its model even one call at a time: ``get`` of a missing key is 0."""

    @rule(key=KEYS)
    async def get(self, key: str) -> int | None:
        value = await self.map.get(key)
        return 0 if value is None else value


class RegistryMachine(ConcurrentStateMachine):
    """Bundles: handles made by one rule and used by another (a locked registry)."""

    handles = Bundle("handles")

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.lock = threading.Lock()

    @rule(target=handles, name=st.sampled_from(["x", "y"]))
    def register(self, name: str) -> int:
        with self.lock:
            handle = len(self.names)
            self.names[handle] = name
            return handle

    @rule(handle=handles)
    def lookup(self, handle: int) -> str:
        with self.lock:
            return self.names[handle]


class StockMachine(ConcurrentStateMachine):
    """A precondition: ``take`` is drawn only while the stock (in the drawing order) is
    positive."""

    def __init__(self) -> None:
        self.stock = 0
        self.lock = threading.Lock()

    @rule()
    def add(self) -> int:
        with self.lock:
            self.stock += 1
            return self.stock

    @precondition(lambda self: self.stock > 0)
    @rule()
    def take(self) -> int:
        with self.lock:
            self.stock -= 1
            return self.stock


class StackMachine(ConcurrentStateMachine):
    """Preconditions that read the draw's own machine, bundles whose values it used, and a
    rule that raises while the scenario is drawn (``pop`` of an empty stack)."""

    items = Bundle("items")

    def __init__(self) -> None:
        self.stack: list[int] = []
        self.lock = threading.Lock()

    @rule(target=items, value=st.integers(0, 3))
    def push(self, value: int) -> int:
        with self.lock:
            self.stack.append(value)
            return value

    @rule()
    def pop(self) -> int:
        with self.lock:
            return self.stack.pop()

    @precondition(lambda self: len(self.stack) > 0)
    @rule(item=items)
    def contains(self, item: int) -> bool:
        with self.lock:
            return item in self.stack


class TwoLocksMachine(ConcurrentStateMachine):
    """Two rules that take two locks in opposite orders: concurrently they can deadlock."""

    def __init__(self) -> None:
        self.first = threading.Lock()
        self.second = threading.Lock()

    @rule()
    def forward(self) -> None:
        with self.first, self.second:
            pass

    @rule()
    def backward(self) -> None:
        with self.second, self.first:
            pass


class Account:
    def __init__(self) -> None:
        self.balance = 0
        self.lock = threading.Lock()

    def deposit(self, amount: int) -> int:
        with self.lock:
            self.balance += amount
            return self.balance


class BalanceModel:
    """A model without the machine's initializer: it starts where the initializer leaves
    the machine's account."""

    def __init__(self) -> None:
        self.balance = 10

    def deposit(self, amount: int) -> int:
        self.balance += amount
        return self.balance


class AccountMachine(ConcurrentStateMachine, model=BalanceModel):
    def __init__(self) -> None:
        self.account = Account()

    @initialize()
    def open_with_ten(self) -> int:
        return self.account.deposit(10)

    @rule(amount=st.integers(1, 3))
    def deposit(self, amount: int) -> int:
        return self.account.deposit(amount)
