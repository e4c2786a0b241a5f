"""The output stream: exactly once, in order, fair, and leak-free under cancellation."""

from __future__ import annotations

import asyncio

import pytest

from interlace.reference_impl import OutputStream, Signal, StreamClosedError, StreamEndedError


def test_a_consumer_started_before_the_producer_gets_every_item_in_order() -> None:
    async def main() -> None:
        stream: OutputStream[int] = OutputStream()

        async def consume() -> list[int]:
            return [item async for item in stream]

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0)
        for i in range(100):
            stream.put(i)
            if i % 3 == 0:
                await asyncio.sleep(0)
        stream.close()
        assert await consumer == list(range(100))

    asyncio.run(main())


def test_items_put_before_close_are_drained_after_close() -> None:
    async def main() -> None:
        stream: OutputStream[str] = OutputStream()
        stream.put("a")
        stream.put("b")
        stream.close()
        assert [item async for item in stream] == ["a", "b"]
        with pytest.raises(StreamEndedError, match="closed and drained"):
            await stream.get()

    asyncio.run(main())


@pytest.mark.parametrize("consumers", [2, 3, 7])
def test_competing_consumers_each_item_once_in_order_and_fairly(consumers: int) -> None:
    async def main() -> None:
        stream: OutputStream[int] = OutputStream()
        received: list[list[int]] = [[] for _ in range(consumers)]

        async def consume(index: int) -> None:
            async for item in stream:
                received[index].append(item)
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(consume(i)) for i in range(consumers)]
        await asyncio.sleep(0)
        for i in range(consumers * 50):
            stream.put(i)
            await asyncio.sleep(0)
        stream.close()
        await asyncio.gather(*tasks)
        assert sorted(item for items in received for item in items) == list(range(consumers * 50))
        for items in received:
            assert items == sorted(items)
            assert len(items) == 50

    asyncio.run(main())


def test_an_item_handed_to_a_consumer_cancelled_in_the_same_step_is_not_lost() -> None:
    async def main() -> None:
        stream: OutputStream[str] = OutputStream()
        first = asyncio.create_task(stream.get())
        await asyncio.sleep(0)
        stream.put("x")
        stream.put("y")
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert first.cancelled()
        assert [stream.get_nowait(), stream.get_nowait()] == ["x", "y"]

    asyncio.run(main())


def test_a_handed_back_item_goes_to_the_next_waiting_consumer() -> None:
    async def main() -> None:
        stream: OutputStream[str] = OutputStream()
        first = asyncio.create_task(stream.get())
        second = asyncio.create_task(stream.get())
        await asyncio.sleep(0)
        stream.put("x")
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert await second == "x"
        assert len(stream) == 0

    asyncio.run(main())


def test_cancelling_a_waiting_consumer_leaks_no_task_and_no_waiter() -> None:
    async def main() -> None:
        stream: OutputStream[int] = OutputStream()
        consumer = asyncio.create_task(stream.get())
        await asyncio.sleep(0)
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)
        assert asyncio.all_tasks() == {asyncio.current_task()}
        stream.put(1)
        assert stream.get_nowait() == 1

    asyncio.run(main())


def test_close_wakes_every_waiting_consumer() -> None:
    async def main() -> None:
        stream: OutputStream[int] = OutputStream()
        tasks = [asyncio.create_task(stream.get()) for _ in range(5)]
        await asyncio.sleep(0)
        stream.close()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(result, StreamEndedError) for result in results)

    asyncio.run(main())


def test_put_after_close_is_refused_with_a_clear_error() -> None:
    stream: OutputStream[str] = OutputStream()
    stream.close()
    with pytest.raises(StreamClosedError, match=r"cannot put 'late': the output stream is closed"):
        stream.put("late")


def test_get_nowait_on_an_empty_open_stream_says_to_await() -> None:
    stream: OutputStream[str] = OutputStream()
    with pytest.raises(LookupError, match=r"await get\(\)"):
        stream.get_nowait()


def test_a_stream_and_a_signal_work_under_two_event_loops_in_turn() -> None:
    stream: OutputStream[int] = OutputStream()
    signal = Signal()

    async def wait_for_one() -> int:
        getter = asyncio.create_task(stream.get())
        waiter = asyncio.create_task(signal.wait())
        await asyncio.sleep(0)
        stream.put(7)
        signal.set()
        await waiter
        signal.clear()
        return await getter

    assert asyncio.run(wait_for_one()) == 7
    assert asyncio.run(wait_for_one()) == 7


def test_a_cancelled_signal_waiter_is_forgotten() -> None:
    async def main() -> None:
        signal = Signal()
        waiter = asyncio.create_task(signal.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert signal._waiters == []
        assert not signal.is_set()

    asyncio.run(main())
