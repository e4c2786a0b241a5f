"""The reference agent: one run at a time, atomic transitions, cancellation-safe cleanup."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from interlace.reference_impl import (
    AgentBusyError,
    AgentState,
    BaseAgent,
    Memory,
    Message,
    Role,
    ToolCall,
)


class YieldingModel:
    """A model that yields to the event loop ``yields`` times, then echoes the last message."""

    def __init__(self, yields: int = 3) -> None:
        self.yields = yields
        self.calls = 0

    async def ask(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        for _ in range(self.yields):
            await asyncio.sleep(0)
        return f"echo {messages[-1].content}"


class GatedModel:
    """A model that waits until ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def ask(self, messages: Sequence[Message]) -> str:
        self.entered.set()
        await self.gate.wait()
        return "done"


class MultiStepAgent(BaseAgent):
    """Emits ``steps`` outputs, yielding twice per step."""

    def __init__(self, steps: int) -> None:
        super().__init__("multi", max_steps=steps + 1)
        self.steps = steps
        self.taken = 0
        self.returned = 0

    async def step(self) -> str | None:
        if self.taken == self.steps:
            return None
        await asyncio.sleep(0)
        self.taken += 1  # noqa: IL101 - one run drives this double: no concurrent step()
        await asyncio.sleep(0)
        self.returned += 1
        return f"out-{self.taken}"


def _state(agent: BaseAgent) -> AgentState:
    """Read the state afresh (mypy would otherwise keep an earlier narrowing)."""
    return agent.state


def test_fifty_racing_runs_exactly_one_runs_and_the_rest_are_rejected() -> None:
    async def main() -> None:
        model = YieldingModel()
        agent = BaseAgent("racer", llm=model)
        results = await asyncio.gather(
            *(agent.run(f"request {i}") for i in range(50)), return_exceptions=True
        )
        assert [r for r in results if isinstance(r, str)] == ["echo request 0"]
        rejected = [r for r in results if isinstance(r, AgentBusyError)]
        assert len(rejected) == 49
        assert model.calls == 1
        assert agent.state is AgentState.IDLE
        assert agent.last_outcome is AgentState.FINISHED
        assert [m.content for m in agent.memory.get_messages()] == [
            "request 0",
            "echo request 0",
        ]

    asyncio.run(main())


def test_a_rejected_request_does_not_touch_the_run_in_progress() -> None:
    async def main() -> None:
        model = GatedModel()
        agent = BaseAgent("busy", llm=model)
        stream = agent.stream()
        first = asyncio.create_task(agent.run("first"))
        await model.entered.wait()
        before = agent.memory.get_messages()
        with pytest.raises(AgentBusyError, match=r"agent 'busy' is busy \(state 'running'\)"):
            await agent.run("second")
        assert agent.state is AgentState.RUNNING
        assert agent.memory.get_messages() == before
        assert not agent.task_done.is_set()
        assert agent.stream() is stream
        assert not stream.closed
        model.gate.set()
        assert await first == "done"
        assert _state(agent) is AgentState.IDLE
        assert [item async for item in stream] == ["done"]

    asyncio.run(main())


@pytest.mark.parametrize("ticks", range(12))
def test_cancelling_a_run_at_any_await_leaves_the_agent_idle_and_clean(ticks: int) -> None:
    async def main() -> None:
        agent = MultiStepAgent(steps=4)
        stream = agent.stream()

        async def consume() -> list[str]:
            return [item async for item in stream]

        consumer = asyncio.create_task(consume())
        run = asyncio.create_task(agent.run("go"))
        for _ in range(ticks):
            await asyncio.sleep(0)
        run.cancel()
        outcome = await asyncio.gather(run, return_exceptions=True)
        assert agent.state is AgentState.IDLE
        assert agent.task_done.is_set()
        if agent.last_outcome is None:
            # Cancelled before its first step: the run never claimed the agent, so the stream
            # of the next run stays open for this consumer.
            assert ticks == 0
            assert not stream.closed
            consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)
            received = []
        else:
            received = await consumer
            assert stream.closed
        assert asyncio.all_tasks() == {asyncio.current_task()}
        if agent.last_outcome is None:
            assert isinstance(outcome[0], asyncio.CancelledError)
        elif isinstance(outcome[0], asyncio.CancelledError):
            assert agent.last_outcome is AgentState.ERROR
            assert received == [f"out-{i}" for i in range(1, agent.returned + 1)]
        else:
            assert list(outcome) == ["out-1\nout-2\nout-3\nout-4"]
            assert received == ["out-1", "out-2", "out-3", "out-4"]
        agent.taken = agent.returned = 0
        assert await agent.run() == "out-1\nout-2\nout-3\nout-4"

    asyncio.run(main())


def test_every_item_put_before_cancellation_reaches_the_consumer() -> None:
    async def main() -> None:
        agent = MultiStepAgent(steps=10)
        stream = agent.stream()
        run = asyncio.create_task(agent.run())
        for _ in range(9):
            await asyncio.sleep(0)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        assert agent.returned == 4
        assert [item async for item in stream] == [f"out-{i}" for i in range(1, 5)]

    asyncio.run(main())


def test_nested_state_context_is_rejected_instead_of_deadlocking() -> None:
    async def main() -> None:
        agent = BaseAgent("nested")
        async with agent.state_context(AgentState.RUNNING):
            with pytest.raises(AgentBusyError):
                async with agent.state_context(AgentState.RUNNING):
                    raise AssertionError("the nested claim must not be entered")
            assert agent.state is AgentState.RUNNING
        assert _state(agent) is AgentState.IDLE
        assert agent.last_outcome is AgentState.FINISHED

    asyncio.run(main())


@pytest.mark.parametrize("state", [AgentState.IDLE, AgentState.FINISHED, AgentState.ERROR])
def test_state_context_only_enters_running(state: AgentState) -> None:
    async def main() -> None:
        agent = BaseAgent("s")
        with pytest.raises(ValueError, match=r"can only enter .*RUNNING.*got"):
            async with agent.state_context(state):
                raise AssertionError("must not be entered")
        assert agent.state is AgentState.IDLE

    asyncio.run(main())


def test_a_failing_run_records_error_and_returns_to_idle() -> None:
    class Broken:
        async def ask(self, messages: Sequence[Message]) -> str:
            await asyncio.sleep(0)
            raise ConnectionError("model unreachable")

    async def main() -> None:
        agent = BaseAgent("broken", llm=Broken())
        stream = agent.stream()
        with pytest.raises(ConnectionError, match="model unreachable"):
            await agent.run("hi")
        assert agent.state is AgentState.IDLE
        assert agent.last_outcome is AgentState.ERROR
        assert stream.closed
        assert agent.stream() is not stream

    asyncio.run(main())


def test_an_agent_without_a_model_says_what_to_do() -> None:
    async def main() -> None:
        agent = BaseAgent("bare")
        with pytest.raises(RuntimeError, match=r"agent 'bare' has no llm: pass llm="):
            await agent.run("hi")
        assert agent.state is AgentState.IDLE

    asyncio.run(main())


def test_the_agent_can_be_reused_under_a_second_event_loop() -> None:
    agent = BaseAgent("reused", llm=YieldingModel())

    async def once(text: str) -> list[str]:
        stream = agent.stream()
        consumer = asyncio.create_task(_drain(stream))
        await asyncio.sleep(0)
        await agent.run(text)
        return await consumer

    assert asyncio.run(once("a")) == ["echo a"]
    assert asyncio.run(once("b")) == ["echo b"]


async def _drain(stream: object) -> list[str]:
    from interlace.reference_impl import OutputStream

    assert isinstance(stream, OutputStream)
    return [item async for item in stream]


def test_process_mcp_message_honours_the_callers_deadline() -> None:
    class Slow:
        async def ask(self, messages: Sequence[Message]) -> str:
            await asyncio.sleep(3600)
            return "never"

    async def main() -> None:
        agent = BaseAgent("mcp", llm=Slow())
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            await agent.process_mcp_message(
                {"text": "hello"}, "peer", {}, "mcp", deadline=loop.time() + 0.01
            )
        assert agent.state is AgentState.IDLE
        assert agent.last_outcome is AgentState.ERROR
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())


def test_process_mcp_message_propagates_caller_cancellation() -> None:
    async def main() -> None:
        model = GatedModel()
        agent = BaseAgent("mcp", llm=model)
        task = asyncio.create_task(agent.process_mcp_message("hi", "peer", {}, "mcp"))
        await model.entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert agent.state is AgentState.IDLE

    asyncio.run(main())


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ({"text": "mapped", "type": "text"}, "mapped"),
        ([{"text": "a"}, "b"], "a\nb"),
    ],
)
def test_process_mcp_message_reads_every_content_shape(content: object, text: str) -> None:
    async def main() -> str:
        agent = BaseAgent("mcp", llm=YieldingModel(0))
        return await agent.process_mcp_message(content, "peer", {}, "mcp")

    assert asyncio.run(main()) == f"echo {text}"


@pytest.mark.parametrize("content", [42, {"text": 1}, b"bytes", None])
def test_process_mcp_message_rejects_unreadable_content(content: object) -> None:
    async def main() -> None:
        agent = BaseAgent("mcp", llm=YieldingModel(0))
        with pytest.raises(TypeError, match="cannot read text from MCP content"):
            await agent.process_mcp_message(content, "peer", {}, "mcp")
        assert agent.state is AgentState.IDLE

    asyncio.run(main())


def test_add_message_builds_each_role() -> None:
    agent = BaseAgent("m")
    call = ToolCall(id="c1", name="search", arguments='{"q": "x"}')
    agent.add_message("system", "be brief")
    agent.add_message("user", "find x")
    agent.add_message("assistant", "", tool_calls=[call])
    agent.add_message("tool", "found", tool_call_id="c1", tool_name="search")
    assert agent.memory.get_messages() == [
        Message(Role.SYSTEM, "be brief"),
        Message(Role.USER, "find x"),
        Message(Role.ASSISTANT, "", tool_calls=(call,)),
        Message(Role.TOOL, "found", tool_call_id="c1", name="search"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"role": "robot", "content": "x"}, ValueError, r"unknown message role 'robot'"),
        ({"role": "user", "content": 3}, TypeError, r"content must be a str, got int"),
        (
            {"role": "user", "content": "x", "tool_calls": [ToolCall("1", "t")]},
            ValueError,
            r"only valid on assistant messages, not 'user'",
        ),
        ({"role": "tool", "content": "x"}, ValueError, r"needs tool_call_id"),
        (
            {"role": "assistant", "content": "x", "tool_call_id": "1"},
            ValueError,
            r"only valid on 'tool' messages, not 'assistant'",
        ),
    ],
)
def test_add_message_rejects_invalid_messages_without_adding(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    agent = BaseAgent("m")
    with pytest.raises(error, match=match):
        agent.add_message(**kwargs)  # type: ignore[arg-type]
    assert len(agent.memory) == 0


def test_concurrent_adds_from_threads_lose_nothing() -> None:
    agent = BaseAgent("threads", max_messages=10_000)
    barrier = threading.Barrier(8)

    def add(worker: int) -> None:
        barrier.wait()
        for i in range(200):
            agent.add_message("user", f"{worker}:{i}")

    threads = [threading.Thread(target=add, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    contents = [m.content for m in agent.memory.get_messages()]
    assert sorted(contents) == sorted(f"{w}:{i}" for w in range(8) for i in range(200))
    for worker in range(8):
        mine = [c for c in contents if c.startswith(f"{worker}:")]
        assert mine == [f"{worker}:{i}" for i in range(200)]


def test_memory_keeps_only_the_newest_messages() -> None:
    memory = Memory(max_messages=3)
    memory.add_messages(Message(Role.USER, str(i)) for i in range(5))
    assert [m.content for m in memory.get_messages()] == ["2", "3", "4"]


def test_memory_rejects_a_batch_with_a_non_message_entirely() -> None:
    memory = Memory()
    with pytest.raises(TypeError, match="memory accepts Message objects, got 'x' of type str"):
        memory.add_messages([Message(Role.USER, "ok"), "x"])  # type: ignore[list-item]
    assert len(memory) == 0


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_bounds_are_validated(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"max_messages must be an int >= 1, got {bad!r}"):
        Memory(max_messages=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=rf"max_steps must be an int >= 1, got {bad!r}"):
        BaseAgent("b", max_steps=bad)  # type: ignore[arg-type]
