"""Small failing programs whose failures the HTML report tests draw: one per backend."""

from __future__ import annotations

import asyncio
import threading


class Counter:
    def __init__(self) -> None:
        self.value = 0


async def async_lost_update() -> None:
    counter = Counter()

    async def bump() -> None:
        seen = counter.value
        await asyncio.sleep(0)
        counter.value = seen + 1

    await asyncio.gather(bump(), bump())
    assert counter.value == 2, counter.value


async def async_deadlock() -> None:
    first, second = asyncio.Lock(), asyncio.Lock()

    async def forward() -> None:
        async with first:
            await asyncio.sleep(0)
            async with second:
                pass

    async def backward() -> None:
        async with second:
            await asyncio.sleep(0)
            async with first:
                pass

    await asyncio.gather(forward(), backward())


def thread_lost_update() -> None:
    counter = Counter()

    def bump() -> None:
        seen = counter.value
        counter.value = seen + 1

    threads = [threading.Thread(target=bump, name=f"bump-{i}") for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.value == 2, counter.value


def thread_deadlock() -> None:
    first, second = threading.Lock(), threading.Lock()

    def forward() -> None:
        with first, second:
            pass

    def backward() -> None:
        with second, first:
            pass

    threads = [
        threading.Thread(target=forward, name="forward"),
        threading.Thread(target=backward, name="backward"),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


async def mixed_lost_update() -> None:
    counter = Counter()

    def bump() -> None:
        seen = counter.value
        counter.value = seen + 1

    await asyncio.gather(asyncio.to_thread(bump), asyncio.to_thread(bump))
    assert counter.value == 2, counter.value


async def hostile_names() -> None:
    """A task and a message made of markup: the report must show them as text."""

    async def worker() -> None:
        await asyncio.sleep(0)
        raise ValueError("<b>bold</b> & </script><img src=x onerror=alert(1)>")

    await asyncio.create_task(worker(), name="</script><script>alert(1)</script>")


async def async_hang() -> None:
    """A consumer that never gets its item: the run is still going after its step budget."""
    ready = asyncio.Event()

    async def spin() -> None:
        # A spin-wait on purpose: the hang the report draws.
        while not ready.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0)

    await spin()
