"""The virtual clock runs timers as a stock loop on a real clock does, and never faster.

Every scenario that asserts what it observed also runs under ``asyncio.run`` in the same test,
so the expectation is stock asyncio's own behaviour, not interlace's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import pickle
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import date as Date
from datetime import datetime as DateTime
from typing import Any

import pytest

import interlace
from interlace._core.schedule import Settings
from interlace._core.strategy import Chooser
from interlace.harness._loop import EPOCH, ControlledEventLoop

REAL_DATETIME, REAL_DATE = datetime.datetime, datetime.date

SEED = 11
Observed = Callable[[], Awaitable[list[str]]]


def _stock_order(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``scenario`` on the controlled loop in stock order (option 0 at every point)."""
    loop = ControlledEventLoop(Chooser(), Settings())
    try:
        return loop.run_until_complete(scenario())
    finally:
        loop.close()


# -- timers with equal deadlines fire in creation order -------------------------------------------


async def call_later_ties() -> list[str]:
    loop = asyncio.get_running_loop()
    order: list[str] = []
    loop.call_later(0.05, order.append, "first")
    loop.call_later(0.05, order.append, "second")
    loop.call_at(loop.time() + 0.05, order.append, "third")
    await asyncio.sleep(0.1)
    return order


async def sleeps_of_the_same_length() -> list[str]:
    done: list[str] = []

    async def request(name: str) -> None:
        await asyncio.sleep(0.2)
        done.append(name)

    await asyncio.gather(*(request(name) for name in "abcd"))
    return done


async def wait_for_with_the_sleeps_length() -> list[str]:
    # The timeout's timer is created before the sleep's: on a real clock its deadline is the
    # earlier one.
    try:
        await asyncio.wait_for(asyncio.sleep(0.05), 0.05)
    except TimeoutError:
        return ["timed out"]
    return ["finished"]


async def timeout_with_the_sleeps_length() -> list[str]:
    try:
        async with asyncio.timeout(0.05):
            await asyncio.sleep(0.05)
    except TimeoutError:
        return ["timed out"]
    return ["finished"]


async def a_deadline_met_from_another_step() -> list[str]:
    # Timer "early" is set for start + 0.1 at the start; timer "late" is set 0.05 later for
    # 0.05 more: equal virtual deadlines, but on a real clock the second call read a later
    # clock, so "early" fires first.
    loop = asyncio.get_running_loop()
    order: list[str] = []
    loop.call_at(loop.time() + 0.1, order.append, "early")
    await asyncio.sleep(0.05)
    loop.call_later(0.05, order.append, "late")
    await asyncio.sleep(0.1)
    return order


TIES: list[Observed] = [
    call_later_ties,
    sleeps_of_the_same_length,
    wait_for_with_the_sleeps_length,
    timeout_with_the_sleeps_length,
    a_deadline_met_from_another_step,
]


@pytest.mark.parametrize("scenario", TIES, ids=lambda s: s.__name__)
def test_stock_order_fires_equal_deadlines_as_stock_asyncio_does(scenario: Observed) -> None:
    assert _stock_order(scenario) == asyncio.run(scenario())  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
@pytest.mark.parametrize("scenario", TIES, ids=lambda s: s.__name__)
def test_no_schedule_fires_timers_in_an_order_stock_asyncio_never_does(
    scenario: Observed, strategy: str
) -> None:
    expected: list[str] = asyncio.run(scenario())  # type: ignore[arg-type]

    async def target() -> None:
        assert await scenario() == expected

    exploration = interlace.explore(target, strategy=strategy, max_schedules=200, seed=SEED)
    assert exploration.failure is None, exploration.failure.report


async def _jitter_overtake() -> None:
    # Created first with the later deadline (within max_stall): it may fire first, when the
    # code between the two calls took a tenth of a millisecond.
    loop = asyncio.get_running_loop()
    order: list[str] = []
    loop.call_later(0.0051, order.append, "created first")
    loop.call_later(0.005, order.append, "created second")
    await asyncio.sleep(0.01)
    assert order == ["created second", "created first"]


def test_a_timer_created_earlier_may_still_overtake_within_the_stall_bound() -> None:
    failure = interlace.explore(_jitter_overtake, max_schedules=50, seed=SEED).failure
    assert failure is not None
    assert failure.label == (
        "needs the loop to stall 0.1 ms (a blocking call of that length on the loop)"
    )


# -- busy work takes a microsecond a step, never a jump to a far timer ----------------------------


async def busy_under_a_far_timeout() -> None:
    async with asyncio.timeout(60):
        for _ in range(1200):
            await asyncio.sleep(0)


async def fan_out_under_a_far_timeout() -> None:
    async def tool(i: int) -> int:
        await asyncio.sleep(0)
        return i

    async with asyncio.timeout(30):
        results = await asyncio.gather(*(tool(i) for i in range(600)))
    assert results == list(range(600))


async def stream_under_a_far_timeout() -> None:
    tokens: asyncio.Queue[int | None] = asyncio.Queue()

    async def produce() -> None:
        for i in range(1500):
            await tokens.put(i)
            await asyncio.sleep(0)
        await tokens.put(None)

    async def consume() -> int:
        got = 0
        while await tokens.get() is not None:
            got += 1
        return got

    async with asyncio.timeout(60):
        _, got = await asyncio.gather(produce(), consume())
    assert got == 1500


BUSY = [busy_under_a_far_timeout, fan_out_under_a_far_timeout, stream_under_a_far_timeout]


@pytest.mark.parametrize("scenario", BUSY, ids=lambda s: s.__name__)
def test_busy_work_never_reaches_a_far_timeout(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]
    exploration = interlace.explore(scenario, max_schedules=5, seed=SEED)
    assert exploration.failure is None, exploration.failure.report


async def _busy_for(steps: int) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(steps):
        await asyncio.sleep(0)
    return loop.time() - start


def test_busy_work_moves_the_clock_a_millisecond_per_time_slice() -> None:
    # 5,000 steps of the one task (and its first step): five slices of 1,000 steps.
    assert _stock_order(lambda: _busy_for(5000)) == pytest.approx(0.005)


async def _spin_on(delay: float) -> None:
    flag: list[bool] = []

    async def setter() -> None:
        await asyncio.sleep(delay)
        flag.append(True)

    task = asyncio.create_task(setter())
    while not flag:  # noqa: ASYNC110 - the spin-wait is what this scenario tests
        await asyncio.sleep(0)
    await task


async def _spin_on_a_far_timer() -> None:
    await _spin_on(0.5)


def test_a_spin_wait_on_a_timer_past_the_step_budget_is_no_hang() -> None:
    # 0.5 s of spinning is 500,000 steps at a microsecond a step: past the budget of 20,000,
    # the run goes on in overtime, where the clock moves on to the timer.
    asyncio.run(_spin_on_a_far_timer())
    exploration = interlace.explore(
        _spin_on_a_far_timer, max_schedules=3, seed=SEED, max_steps=20_000
    )
    assert exploration.failure is None, exploration.failure.report


async def _spin_on_a_far_timer_after_a_thread() -> None:
    await asyncio.to_thread(lambda: None)  # the loop's thread is under the thread scheduler
    await _spin_on(0.5)


def test_a_spin_wait_past_the_step_budget_is_no_hang_in_a_run_with_threads() -> None:
    # The thread scheduler's schedule points in the spinning task reach the budget first.
    exploration = interlace.explore(
        _spin_on_a_far_timer_after_a_thread, max_schedules=3, seed=SEED, max_steps=20_000
    )
    assert exploration.failure is None, exploration.failure.report


async def _long_busy_work_under_a_timeout() -> None:
    async with asyncio.timeout(60):
        for _ in range(30_000):
            await asyncio.sleep(0)


def test_busy_work_past_the_step_budget_is_a_hang_that_names_the_pending_timer() -> None:
    asyncio.run(_long_busy_work_under_a_timeout())  # stock: a fraction of a second, no timeout
    failure = interlace.explore(
        _long_busy_work_under_a_timeout, max_schedules=1, seed=SEED, max_steps=20_000
    ).failure
    assert failure is not None
    assert failure.kind == "hang"
    assert failure.exception is None
    assert failure.detail == (
        "Still running: the run took more than 20000 steps (virtual time 0.019 s).\n"
        "Not necessarily a hang: a timer is pending, due at virtual time 60 s (it is the "
        "timeout of task 'main'). Busy work moves the clock by 1 us a step, so this run "
        "reaches that timer after about 59,981,000 more steps; if the tasks are busy-waiting "
        "for it, a stock loop gets there. Pass max_steps=60002000 or more to let the run get "
        "there too. Continued past the budget with the clock moving on to each pending timer "
        "(as if the busy work took that long), the run then raised TimeoutError."
    )


async def _spin_beside_a_heartbeat() -> None:
    async def heartbeat() -> None:
        while True:  # noqa: ASYNC110 - a heartbeat, not a wait for a condition
            await asyncio.sleep(1)

    beat = asyncio.create_task(heartbeat())
    flag: list[bool] = []
    while not flag:  # noqa: ASYNC110 - the spin-wait is what this scenario tests
        await asyncio.sleep(0)
    beat.cancel()


def test_a_spin_that_timers_never_end_is_still_a_hang_after_overtime() -> None:
    failure = interlace.explore(
        _spin_beside_a_heartbeat, max_schedules=1, seed=SEED, max_steps=5_000
    ).failure
    assert failure is not None
    assert failure.kind == "hang"
    assert failure.detail.startswith(
        "Still running: the run took more than 5000 steps (virtual time 5 s).\n"
        "Not necessarily a hang: a timer is pending, due at virtual time 1 s (it ends the "
        "sleep of task 'Task-2' at tests/harness/test_virtual_clock.py:"
    )
    assert "the run was still going 5000 steps later.\n" in failure.detail


async def _hopeless_spin() -> None:
    flag: list[bool] = []
    while not flag:  # noqa: ASYNC110 - the spin-wait is what this scenario tests
        await asyncio.sleep(0)


def test_a_spin_with_no_timer_pending_is_a_hang_that_says_so() -> None:
    failure = interlace.explore(_hopeless_spin, max_schedules=1, seed=SEED, max_steps=5_000).failure
    assert failure is not None
    assert failure.kind == "hang"
    assert failure.detail.startswith(
        "Still running: the run took more than 5000 steps (virtual time 0.004 s).\n"
        "No timer is pending: only the tasks that kept running can change what they see.\n"
    )


# -- the clock always moves when the loop wakes for a timer ---------------------------------------


class TokenBucket:
    """Sleeps exactly its deficit: float rounding can make that a sleep of 1e-18 s."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.updated = asyncio.get_running_loop().time()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)


async def _token_bucket() -> None:
    bucket = TokenBucket(rate=100, capacity=2)
    await asyncio.gather(*(bucket.acquire() for _ in range(5)))


def test_a_sleep_shorter_than_the_clock_grain_still_moves_the_clock() -> None:
    asyncio.run(_token_bucket())
    exploration = interlace.explore(_token_bucket, max_schedules=3, seed=SEED, max_steps=20_000)
    assert exploration.failure is None, exploration.failure.report


async def _clock_after_a_due_timer() -> list[bool]:
    loop = asyncio.get_running_loop()
    await asyncio.sleep(1)
    before = loop.time()
    await asyncio.sleep(1e-18)  # a deadline of before + 1e-18, which is before
    return [loop.time() > before]


def test_waking_for_a_timer_that_is_already_due_moves_the_clock_as_on_stock() -> None:
    assert _stock_order(_clock_after_a_due_timer) == asyncio.run(_clock_after_a_due_timer())


async def _waits_while_a_heartbeat_sleeps() -> None:
    ready = asyncio.Event()

    async def heartbeat() -> None:
        while True:  # noqa: ASYNC110 - a heartbeat, not a wait for a condition
            await asyncio.sleep(10)

    beat = asyncio.create_task(heartbeat())
    await ready.wait()
    beat.cancel()


def test_a_hang_report_says_until_when_a_task_sleeps() -> None:
    failure = interlace.explore(
        _waits_while_a_heartbeat_sleeps, max_schedules=1, seed=SEED, max_time=60
    ).failure
    assert failure is not None
    assert failure.kind == "hang"
    # Each wake-up takes a microsecond: the sixth beat is due a little past 60 s.
    assert "Still running: virtual time passed the budget of 60 seconds (virtual time 50 s)." in (
        failure.detail
    )
    assert "sleeps until virtual time 60 s" in failure.detail


# -- where the clock starts, and time.monotonic() ------------------------------------------------


class Throttle:
    """Lets a call through at most once per ``interval``; 0.0 stands for "never called"."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last_call = 0.0

    async def call(self) -> None:
        loop = asyncio.get_running_loop()
        wait = self.interval - (loop.time() - self.last_call)
        if wait > 0:
            await asyncio.sleep(wait)
        self.last_call = loop.time()


async def _first_call_goes_through() -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    await Throttle(interval=60).call()
    assert loop.time() - start < 1


def test_the_clock_starts_where_a_booted_machines_clock_would() -> None:
    asyncio.run(_first_call_goes_through())
    exploration = interlace.explore(_first_call_goes_through, max_schedules=3, seed=SEED)
    assert exploration.failure is None, exploration.failure.report


def test_the_clock_starts_at_the_same_instant_in_every_run() -> None:
    starts: list[float] = []

    async def scenario() -> None:
        starts.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0)

    interlace.explore(scenario, max_schedules=5, seed=SEED)
    assert starts == [EPOCH] * len(starts)
    assert len(starts) >= 2


async def _ttl_cache() -> None:
    fetched: dict[str, float] = {}

    def fresh(key: str) -> bool:
        return key in fetched and time.monotonic() - fetched[key] < 0.5

    fetched["a"] = time.monotonic()
    assert fresh("a")
    await asyncio.sleep(1.0)
    assert not fresh("a"), "the entry outlived its time to live"


def test_time_monotonic_reads_the_virtual_clock_in_an_async_target() -> None:
    asyncio.run(_ttl_cache())
    exploration = interlace.explore(_ttl_cache, max_schedules=3, seed=SEED)
    assert exploration.failure is None, exploration.failure.report


def test_the_time_module_reads_the_loops_clock_during_a_run() -> None:
    seen: list[float] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        wall, counter, ns = time.time(), time.perf_counter(), time.monotonic_ns()
        assert time.monotonic() == loop.time()
        await asyncio.sleep(2.5)
        assert time.monotonic() == loop.time()
        seen.extend([time.time() - wall, time.perf_counter() - counter, time.monotonic_ns() - ns])

    exploration = interlace.explore(scenario, max_schedules=1, seed=SEED)
    assert exploration.failure is None, exploration.failure.report
    # The wake-up takes a microsecond; time.time() reads it to a float of about 1.8e9.
    assert seen == [pytest.approx(2.500001, abs=5e-7), pytest.approx(2.500001), 2_500_001_000]
    assert time.monotonic() == pytest.approx(time.clock_gettime(time.CLOCK_MONOTONIC), abs=1)


class _StampedCache:
    """Entries stamped with ``datetime.now()``, as agent code stamps its messages."""

    def __init__(self, ttl: float) -> None:
        self.ttl = datetime.timedelta(seconds=ttl)
        self.entries: dict[str, datetime.datetime] = {}

    def put(self, key: str) -> None:
        self.entries[key] = datetime.datetime.now(datetime.UTC)

    def fresh(self, key: str) -> bool:
        now = datetime.datetime.now(datetime.UTC)
        return now - self.entries[key] <= self.ttl


async def _calendar_cache() -> None:
    cache = _StampedCache(ttl=0.5)
    cache.put("a")
    assert cache.fresh("a")
    await asyncio.sleep(1.0)
    assert not cache.fresh("a"), "the entry outlived its time to live"
    # A deadline from time.time() checked against the calendar: the same clock.
    expires = DateTime.fromtimestamp(time.time() + 3600, datetime.UTC)
    assert DateTime.now(datetime.UTC) < expires, f"expired at birth: {expires}"


def test_the_calendar_reads_the_virtual_clock_in_the_code_under_test() -> None:
    # datetime.now() reads the real clock from C: before, the entry never expired under
    # interlace (the sleep takes no real time) and the deadline lay years in the past.
    asyncio.run(_calendar_cache())
    exploration = interlace.explore(_calendar_cache, max_schedules=3, seed=SEED)
    assert exploration.failure is None, exploration.failure.report


def test_the_calendar_follows_a_controlled_threads_sleep() -> None:
    seen: list[float] = []

    def scenario() -> None:
        start = DateTime.now()
        worker = threading.Thread(target=time.sleep, args=(3.0,))
        worker.start()
        worker.join()
        seen.append((DateTime.now() - start).total_seconds())
        seen.append(time.mktime(time.localtime()) - time.mktime(time.localtime(time.time())))
        seen.append(float(Date.today() == DateTime.fromtimestamp(time.time()).date()))

    exploration = interlace.explore(scenario, max_schedules=1, seed=SEED)
    assert exploration.failure is None, exploration.failure.report
    assert seen == [3.000001, 0.0, 1.0]  # a wait ends a microsecond past its deadline


def test_the_calendar_keeps_the_real_types() -> None:
    # The calendar once gave the code under test look-alike classes: a pydantic model with a
    # ``datetime`` field declared in a run had no schema (pydantic asks ``is datetime``).
    found: list[object] = []

    class Stamp(DateTime):
        pass

    async def scenario() -> None:
        now = DateTime.now()
        made = DateTime(2024, 5, 1, 12)
        found.extend([type(now), type(made), type(Date.today()), type(Stamp.now())])
        found.extend([DateTime, Date, datetime.datetime, datetime.date])
        assert type(now) is datetime.datetime
        assert pickle.loads(pickle.dumps(now)) == now
        assert DateTime.fromisoformat("2024-05-01T12:00:00") == made
        assert str(made) == "2024-05-01 12:00:00"

    exploration = interlace.explore(scenario, max_schedules=1, seed=SEED)
    assert exploration.failure is None, exploration.failure.report
    made_types = [REAL_DATETIME, REAL_DATETIME, REAL_DATE, Stamp]
    assert found == [*made_types, *[REAL_DATETIME, REAL_DATE] * 2]
    # Put back after the exploration: the real clock, and the C methods themselves.
    assert abs(DateTime.now().timestamp() - time.time()) < 60
    assert type(REAL_DATETIME.__dict__["now"]).__name__ == "classmethod_descriptor"
    assert type(REAL_DATE.__dict__["today"]).__name__ == "classmethod_descriptor"


def test_library_code_reads_the_same_calendar() -> None:
    # email.utils.localtime() calls datetime.datetime.now() in the standard library, outside
    # the code under test: it reads the clock the code under test reads.
    import email.utils

    seen: list[float] = []

    async def scenario() -> None:
        start = DateTime.now(datetime.UTC)
        await asyncio.sleep(30)
        seen.append((email.utils.localtime() - start).total_seconds())
        seen.append(email.utils.localtime().timestamp() - time.time())

    exploration = interlace.explore(scenario, max_schedules=1, seed=SEED)
    assert exploration.failure is None, exploration.failure.report
    assert seen[0] == pytest.approx(30, abs=1e-3)
    assert seen[1] == pytest.approx(0, abs=1e-3)


def test_utcnow_still_warns_where_stock_python_does() -> None:
    import sys
    import warnings

    caught: list[list[warnings.WarningMessage]] = []

    async def scenario() -> None:
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always")
            DateTime.utcnow()
        caught.append(log)

    with warnings.catch_warnings(record=True) as stock:
        warnings.simplefilter("always")
        DateTime.utcnow()
    exploration = interlace.explore(scenario, max_schedules=1, seed=SEED)
    assert exploration.failure is None, exploration.failure.report
    assert [(w.category, str(w.message)) for w in caught[0]] == [
        (w.category, str(w.message)) for w in stock
    ]
    assert len(stock) == (sys.version_info >= (3, 12))
    if stock:  # and it points at the caller, as the stock warning does
        assert caught[0][0].filename == stock[0].filename == __file__


def _blocking_sleep(seconds: float) -> Callable[[], Awaitable[list[str]]]:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        order: list[str] = []
        start = loop.time()
        loop.call_later(0.1, order.append, "timer")
        time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is what this tests
        order.append(f"slept {loop.time() - start >= seconds}")
        await asyncio.sleep(0)
        order.append("next step")
        await asyncio.sleep(0)
        return order

    return scenario


def test_time_sleep_in_the_loops_thread_moves_the_virtual_clock() -> None:
    stock: list[str] = asyncio.run(_blocking_sleep(0.2)())  # type: ignore[arg-type]
    assert stock == ["slept True", "next step", "timer"]
    seen: list[list[str]] = []

    async def target() -> None:
        seen.append(await _blocking_sleep(0.2)())

    exploration = interlace.explore(target, strategy="exhaustive", max_schedules=1, seed=SEED)
    assert exploration.failure is None, exploration.failure.report
    assert seen == [stock]


def test_a_blocking_wait_with_a_timeout_in_the_loops_thread_still_times_out() -> None:
    async def scenario() -> None:
        with pytest.raises(queue.Empty):
            queue.Queue().get(timeout=0.01)  # waits for real, so its deadline is real too

    exploration = interlace.explore(scenario, max_schedules=1, seed=SEED)
    assert exploration.failure is None, exploration.failure.report


def test_loop_time_and_time_monotonic_stay_one_clock_once_a_thread_starts() -> None:
    async def scenario() -> None:
        await asyncio.to_thread(lambda: None)
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        await asyncio.sleep(10)
        assert time.monotonic() - start == pytest.approx(10)
        assert time.monotonic() == pytest.approx(loop.time(), abs=1e-6)

    exploration = interlace.explore(scenario, max_schedules=3, seed=SEED)
    assert exploration.failure is None, exploration.failure.report


async def _measures_its_sleeps() -> None:
    loop = asyncio.get_running_loop()
    for delay in (0.3, 0.1, 1.1, 0.7):
        start, clock = loop.time(), time.monotonic()
        await asyncio.sleep(delay)
        assert loop.time() - start >= delay, (loop.time() - start, delay)
        assert time.monotonic() - clock >= delay
    start = loop.time()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.Event().wait(), 0.3)
    assert loop.time() - start >= 0.3


def test_a_task_that_measures_its_sleep_sees_at_least_the_delay() -> None:
    # 1000.3 - 1000.0 == 0.29999999999995453: a wake-up exactly at the deadline measured less
    # than the delay, which no stock loop does (its wake-ups come after the deadline).
    asyncio.run(_measures_its_sleeps())
    exploration = interlace.explore(_measures_its_sleeps, max_schedules=20, seed=SEED)
    assert exploration.failure is None, exploration.failure and exploration.failure.report
