"""Message bus, DI container and error-recovery service under concurrent threads and tasks."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from interlace.reference_impl import (
    BusClosedError,
    Container,
    DependencyCycleError,
    ErrorHistory,
    ErrorRecord,
    ErrorRecoveryService,
    Event,
    MessageBus,
    SubscriptionClosedError,
    get_container,
    reset_container,
)


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Make the interpreter switch threads as often as it can, to provoke races."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _run_threads(count: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# --- message bus -------------------------------------------------------------------------


def test_receivers_get_every_event_once_in_publish_order() -> None:
    async def main() -> None:
        bus = MessageBus()
        first, second = bus.subscribe("tick"), bus.subscribe("tick")
        other = bus.subscribe("tock")
        for i in range(50):
            assert await bus.publish(Event("tick", {"i": i})) == 2
        bus.close()
        for subscription in (first, second):
            assert [event.payload["i"] async for event in subscription] == list(range(50))
        assert [event async for event in other] == []

    asyncio.run(main())


def test_a_subscriber_removed_before_publish_gets_nothing() -> None:
    async def main() -> None:
        bus = MessageBus()
        got: list[str] = []

        async def record(event: Event) -> None:
            got.append(event.event_type)

        subscription = bus.subscribe("x", record)
        assert subscription.unsubscribe() is True
        assert subscription.unsubscribe() is False
        assert await bus.publish(Event("x")) == 0
        assert got == []

    asyncio.run(main())


def test_a_subscriber_removed_during_delivery_gets_nothing_and_one_added_gets_nothing() -> None:
    async def main() -> None:
        bus = MessageBus()
        got: list[str] = []

        async def later(event: Event) -> None:
            got.append(f"later:{event.payload['n']}")

        async def first(event: Event) -> None:
            got.append(f"first:{event.payload['n']}")
            if event.payload["n"] == 0:
                victim.unsubscribe()
                bus.subscribe("x", later)

        async def second(event: Event) -> None:
            got.append(f"second:{event.payload['n']}")

        bus.subscribe("x", first)
        victim = bus.subscribe("x", second)
        assert await bus.publish(Event("x", {"n": 0})) == 1
        assert await bus.publish(Event("x", {"n": 1})) == 2
        assert got == ["first:0", "first:1", "later:1"]

    asyncio.run(main())


def test_a_failing_callback_does_not_stop_delivery_to_the_others() -> None:
    async def main() -> None:
        bus = MessageBus()
        got: list[int] = []

        async def broken(event: Event) -> None:
            raise KeyError("nope")

        async def fine(event: Event) -> None:
            got.append(1)

        bus.subscribe("x", broken)
        bus.subscribe("x", fine)
        with pytest.raises(ExceptionGroup, match=r"1 subscriber callback\(s\) failed") as info:
            await bus.publish(Event("x"))
        assert [type(e) for e in info.value.exceptions] == [KeyError]
        assert got == [1]

    asyncio.run(main())


def test_history_is_bounded_and_ordered() -> None:
    async def main() -> None:
        bus = MessageBus(max_history=5)
        for i in range(12):
            await bus.publish(Event("a" if i % 2 else "b", {"i": i}))
        assert [event.payload["i"] for event in bus.history()] == [7, 8, 9, 10, 11]
        assert [event.payload["i"] for event in bus.history("a")] == [7, 9, 11]

    asyncio.run(main())


def test_close_wakes_every_waiting_receiver_after_they_drain() -> None:
    async def main() -> None:
        bus = MessageBus()
        subscriptions = [bus.subscribe("x") for _ in range(10)]

        async def drain(index: int) -> list[int]:
            return [int(str(event.payload["n"])) async for event in subscriptions[index]]

        tasks = [asyncio.create_task(drain(i)) for i in range(10)]
        await asyncio.sleep(0)
        await bus.publish(Event("x", {"n": 1}))
        bus.close()
        assert await asyncio.gather(*tasks) == [[1]] * 10
        with pytest.raises(BusClosedError, match=r"cannot publish 'x': the message bus is closed"):
            await bus.publish(Event("x"))
        with pytest.raises(BusClosedError, match=r"cannot subscribe to 'y'"):
            bus.subscribe("y")

    asyncio.run(main())


def test_close_from_another_thread_wakes_waiting_receivers() -> None:
    async def main() -> None:
        bus = MessageBus()
        subscription = bus.subscribe("x")
        receivers = [asyncio.create_task(subscription.receive()) for _ in range(3)]
        await asyncio.sleep(0)
        closer = threading.Thread(target=bus.close)
        closer.start()
        results = await asyncio.wait_for(asyncio.gather(*receivers, return_exceptions=True), 10)
        closer.join()
        assert all(isinstance(result, SubscriptionClosedError) for result in results)

    asyncio.run(main())


def test_a_cancelled_receiver_passes_its_wake_up_on() -> None:
    async def main() -> None:
        bus = MessageBus()
        subscription = bus.subscribe("x")
        first = asyncio.create_task(subscription.receive())
        second = asyncio.create_task(subscription.receive())
        await asyncio.sleep(0)
        await bus.publish(Event("x", {"n": 1}))
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert (await second).payload == {"n": 1}

    asyncio.run(main())


def test_threads_subscribing_and_unsubscribing_during_publishing(fast_switching: None) -> None:
    bus = MessageBus(max_history=10)
    delivered: list[int] = []

    def churn(index: int) -> None:
        for _ in range(200):
            bus.subscribe("x").unsubscribe()

    async def publish() -> None:
        stable = bus.subscribe("x")
        for i in range(300):
            delivered.append(await bus.publish(Event("x", {"i": i})))
            if i % 10 == 0:
                await asyncio.sleep(0)
        assert stable.pending == 300

    worker = threading.Thread(target=_run_threads, args=(6, churn))
    worker.start()
    asyncio.run(publish())
    worker.join()
    assert bus.subscriber_count("x") == 1
    assert min(delivered) >= 1
    assert len(bus.history()) == 10


def test_receive_on_a_callback_subscription_says_what_to_do() -> None:
    async def callback(event: Event) -> None:
        return None

    async def main() -> None:
        subscription = MessageBus().subscribe("x", callback)
        with pytest.raises(TypeError, match="subscribe without a callback to receive"):
            await subscription.receive()

    asyncio.run(main())


def test_bus_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match=r"max_history must be an int >= 0, got -1"):
        MessageBus(max_history=-1)
    with pytest.raises(TypeError, match=r"callback must be an async function or None, got 3"):
        MessageBus().subscribe("x", 3)  # type: ignore[arg-type]


# --- DI container --------------------------------------------------------------------------


def test_a_lazy_singleton_factory_runs_exactly_once_under_racing_threads(
    fast_switching: None,
) -> None:
    container = Container()
    calls: list[int] = []
    barrier = threading.Barrier(16)
    seen: list[object] = []

    def factory() -> object:
        calls.append(1)
        time.sleep(0.01)
        return object()

    container.register_singleton("service", factory)

    def resolve(index: int) -> None:
        barrier.wait()
        seen.append(container.resolve("service"))

    _run_threads(16, resolve)
    assert len(calls) == 1
    assert len(seen) == 16
    assert all(item is seen[0] for item in seen)


def test_get_container_returns_one_instance_under_racing_threads(fast_switching: None) -> None:
    reset_container()
    barrier = threading.Barrier(16)
    seen: list[Container] = []

    def get(index: int) -> None:
        barrier.wait()
        seen.append(get_container())

    try:
        _run_threads(16, get)
        assert len(seen) == 16
        assert all(item is seen[0] for item in seen)
    finally:
        reset_container()


def test_a_singleton_depending_on_another_is_created_once_each() -> None:
    class Config:
        pass

    class Service:
        def __init__(self, config: Config) -> None:
            self.config = config

    container = Container()
    container.register_singleton(Config, Config)
    container.register_singleton(Service, lambda: Service(container.get(Config)))
    service = container.get(Service)
    assert container.get(Service) is service
    assert service.config is container.get(Config)


def test_a_dependency_cycle_raises_instead_of_hanging() -> None:
    container = Container()
    container.register_singleton("a", lambda: container.resolve("b"))
    container.register_singleton("b", lambda: container.resolve("a"))
    with pytest.raises(DependencyCycleError, match=r"'a' -> 'b' -> 'a'"):
        container.resolve("a")


def test_a_failing_factory_creates_nothing_and_is_retried() -> None:
    container = Container()
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("not yet")
        return "ready"

    container.register_singleton("db", flaky)
    with pytest.raises(ConnectionError):
        container.resolve("db")
    assert container.resolve("db") == "ready"
    assert container.resolve("db") == "ready"
    assert len(attempts) == 2


def test_factories_and_instances_resolve_as_registered() -> None:
    container = Container()
    container.register_factory("fresh", list)
    instance = {"k": 1}
    container.register_instance("fixed", instance)
    assert container.resolve("fresh") is not container.resolve("fresh")
    assert container.resolve("fixed") is instance
    assert container.is_registered("fresh")
    assert not container.is_registered("absent")


def test_container_mistakes_get_clear_errors() -> None:
    container = Container()
    container.register_instance(int, 3)
    container.register_instance("text", 3)
    with pytest.raises(ValueError, match=r"int is already registered"):
        container.register_singleton(int, int)
    with pytest.raises(KeyError, match=r"no service registered for 'missing'"):
        container.resolve("missing")
    with pytest.raises(TypeError, match=r"factory for 'f' must be callable, got 3"):
        container.register_factory("f", 3)  # type: ignore[arg-type]
    container2 = Container()
    container2.register_instance(str, 3)
    with pytest.raises(TypeError, match=r"service registered for str is 3, not an instance"):
        container2.get(str)


# --- error recovery ------------------------------------------------------------------------


def test_eight_threads_recording_on_one_new_plan_lose_no_record(fast_switching: None) -> None:
    service = ErrorRecoveryService()
    barrier = threading.Barrier(8)

    def record(worker: int) -> None:
        barrier.wait()
        for i in range(200):
            service.record_error("plan-1", ValueError(f"{worker}:{i}"), step_id=f"s{worker}")

    _run_threads(8, record)
    history = service.get_history("plan-1")
    assert history is not None
    records = history.records
    assert len(records) == 1600
    assert [record.sequence for record in records] == list(range(1600))
    assert sorted(record.message for record in records) == sorted(
        f"{w}:{i}" for w in range(8) for i in range(200)
    )
    for worker in range(8):
        mine = [r.message for r in records if r.step_id == f"s{worker}"]
        assert mine == [f"{worker}:{i}" for i in range(200)]


def test_threads_recording_on_many_new_plans_lose_no_record(fast_switching: None) -> None:
    service = ErrorRecoveryService()
    barrier = threading.Barrier(8)

    def record(worker: int) -> None:
        barrier.wait()
        for i in range(100):
            service.record_error(f"plan-{i % 10}", f"{worker}:{i}")

    _run_threads(8, record)
    assert sorted(service.plan_ids()) == sorted(f"plan-{n}" for n in range(10))
    assert [service.error_count(f"plan-{n}") for n in range(10)] == [80] * 10


def test_records_describe_the_error() -> None:
    service = ErrorRecoveryService(max_records_per_plan=2)
    first = service.record_error("p", TimeoutError("slow"), step_id="fetch", context={"try": 1})
    assert first == ErrorRecord("p", 0, "TimeoutError", "slow", "fetch", {"try": 1})
    service.record_error("p", "second")
    service.record_error("p", "third")
    history = service.get_history("p")
    assert history is not None
    assert [r.message for r in history.records] == ["second", "third"]
    assert service.clear("p") is True
    assert service.get_history("p") is None
    assert service.error_count("p") == 0


@pytest.mark.parametrize(
    ("plan_id", "error", "kind", "match"),
    [
        ("", "e", ValueError, r"plan_id must be a non-empty string"),
        (7, "e", TypeError, r"plan_id must be a str, got int: 7"),
        ("p", 7, TypeError, r"error must be an exception or a str, got int: 7"),
    ],
)
def test_record_error_rejects_bad_arguments(
    plan_id: object, error: object, kind: type[Exception], match: str
) -> None:
    service = ErrorRecoveryService()
    with pytest.raises(kind, match=match):
        service.record_error(plan_id, error)  # type: ignore[arg-type]
    assert service.plan_ids() == []


def test_a_history_refuses_another_plans_record() -> None:
    history = ErrorHistory("mine")
    with pytest.raises(ValueError, match=r"record for plan 'other' cannot go into .*'mine'"):
        history.add(ErrorRecord("other", 0, "str", "x"))
    assert len(history) == 0
