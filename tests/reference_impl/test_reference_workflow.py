"""The workflow executor: per-loop limit, schedule-independent inputs, honest failures."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping

import pytest

from interlace.reference_impl import (
    CircuitBreaker,
    CircuitBreakerOpenError,
    NodeInput,
    WorkflowExecutor,
    WorkflowFailedError,
    WorkflowGraph,
)


class Gauge:
    """Counts node attempts running at once."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0

    async def node(self, node_input: NodeInput) -> str:
        self.running += 1
        self.peak = max(self.peak, self.running)
        for _ in range(3):
            await asyncio.sleep(0)
        self.running -= 1
        return node_input.node


def _wide_graph(gauge: Gauge, width: int) -> WorkflowGraph:
    graph = WorkflowGraph()
    for i in range(width):
        graph.add_node(f"n{i}", gauge.node)
    return graph


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_the_concurrency_limit_holds_and_is_reached(limit: int) -> None:
    gauge = Gauge()
    executor = WorkflowExecutor(max_concurrent=limit)
    result = asyncio.run(executor.execute(_wide_graph(gauge, 8)))
    assert result.status == "completed"
    assert gauge.peak == limit


def test_the_executor_works_when_reused_under_a_second_event_loop() -> None:
    executor = WorkflowExecutor(max_concurrent=2)
    for run in range(2):
        gauge = Gauge()
        result = asyncio.run(executor.execute(_wide_graph(gauge, 6)))
        assert result.workflow_id == f"workflow-{run + 1}"
        assert dict(result.outputs) == {f"n{i}": f"n{i}" for i in range(6)}
        assert gauge.peak == 2


def test_the_limit_is_shared_by_concurrent_executions_on_one_loop() -> None:
    gauge = Gauge()
    executor = WorkflowExecutor(max_concurrent=3)

    async def main() -> None:
        await asyncio.gather(*(executor.execute(_wide_graph(gauge, 4)) for _ in range(3)))

    asyncio.run(main())
    assert gauge.peak == 3


@pytest.mark.parametrize("seed", range(6))
def test_node_inputs_are_the_outputs_of_declared_predecessors_whatever_the_schedule(
    seed: int,
) -> None:
    rng = random.Random(seed)
    seen: dict[str, Mapping[str, object]] = {}

    async def node(node_input: NodeInput) -> str:
        for _ in range(rng.randrange(5)):
            await asyncio.sleep(0)
        seen[node_input.node] = dict(node_input.inputs)
        return f"{node_input.node}({','.join(sorted(map(str, node_input.inputs.values())))})"

    graph = WorkflowGraph()
    for name in ["a", "b", "c", "d", "e"]:
        graph.add_node(name, node)
    for source, target in [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "e")]:
        graph.add_edge(source, target)
    result = asyncio.run(WorkflowExecutor(max_concurrent=2).execute(graph))
    assert seen == {
        "a": {},
        "b": {"a": "a()"},
        "c": {"a": "a()"},
        "d": {"b": "b(a())", "c": "c(a())"},
        "e": {"a": "a()"},
    }
    assert result.outputs["d"] == "d(b(a()),c(a()))"


def test_a_failed_node_fails_the_workflow_and_its_successors_never_run() -> None:
    ran: list[str] = []

    async def ok(node_input: NodeInput) -> str:
        ran.append(node_input.node)
        return node_input.node

    async def broken(node_input: NodeInput) -> str:
        ran.append(node_input.node)
        raise ValueError(f"bad input on attempt {node_input.attempt}")

    graph = WorkflowGraph()
    graph.add_node("fetch", ok)
    graph.add_node("parse", broken)
    graph.add_node("store", ok)
    graph.add_edge("fetch", "parse")
    graph.add_edge("parse", "store")
    executor = WorkflowExecutor(max_attempts=2, retry_base_delay=0)
    with pytest.raises(WorkflowFailedError, match=r"node 'parse' failed after 2 attempt") as info:
        asyncio.run(executor.execute(graph))
    result = info.value.result
    assert result.status == "failed"
    assert result.failed_node == "parse"
    assert dict(result.outputs) == {"fetch": "fetch"}
    assert dict(result.retries) == {"parse": 1}
    assert isinstance(info.value.__cause__, ValueError)
    assert str(info.value.__cause__) == "bad input on attempt 2"
    assert ran == ["fetch", "parse", "parse"]


def test_a_failure_cancels_the_running_siblings_and_leaks_no_task() -> None:
    cancelled: list[str] = []

    async def slow(node_input: NodeInput) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(node_input.node)
            raise

    async def broken(node_input: NodeInput) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    async def main() -> None:
        graph = WorkflowGraph()
        graph.add_node("slow", slow)
        graph.add_node("broken", broken)
        with pytest.raises(WorkflowFailedError):
            await WorkflowExecutor(max_attempts=1).execute(graph)
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert cancelled == ["slow"]


def test_cancelling_an_execution_cancels_every_node() -> None:
    async def slow(node_input: NodeInput) -> None:
        await asyncio.sleep(3600)

    async def main() -> None:
        graph = WorkflowGraph()
        graph.add_node("a", slow)
        graph.add_node("b", slow)
        task = asyncio.create_task(WorkflowExecutor().execute(graph))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())


def test_retry_backoff_does_not_hold_a_concurrency_slot() -> None:
    events: list[str] = []

    async def flaky(node_input: NodeInput) -> str:
        events.append(f"flaky attempt {node_input.attempt}")
        if node_input.attempt == 1:
            raise ConnectionError("transient")
        return "flaky"

    async def other(node_input: NodeInput) -> str:
        events.append("other")
        await asyncio.sleep(0)
        return "other"

    graph = WorkflowGraph()
    graph.add_node("flaky", flaky)
    graph.add_node("other", other)
    executor = WorkflowExecutor(max_concurrent=1, max_attempts=2, retry_base_delay=0.05)
    result = asyncio.run(executor.execute(graph))
    assert result.status == "completed"
    assert events == ["flaky attempt 1", "other", "flaky attempt 2"]
    assert dict(result.retries) == {"flaky": 1}


def test_the_circuit_breaker_opens_across_executions() -> None:
    calls: list[int] = []

    async def broken(node_input: NodeInput) -> None:
        calls.append(node_input.attempt)
        raise OSError("down")

    graph = WorkflowGraph()
    graph.add_node("api", broken)
    executor = WorkflowExecutor(max_attempts=1, breaker=CircuitBreaker(2))
    for _ in range(2):
        with pytest.raises(WorkflowFailedError) as info:
            asyncio.run(executor.execute(graph))
        assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(WorkflowFailedError, match=r"after 0 attempt") as info:
        asyncio.run(executor.execute(graph))
    assert isinstance(info.value.__cause__, CircuitBreakerOpenError)
    assert "breaker.reset" in str(info.value.__cause__)
    assert calls == [1, 1]
    executor.breaker.reset("api")
    with pytest.raises(WorkflowFailedError):
        asyncio.run(executor.execute(graph))
    assert calls == [1, 1, 1]


def test_a_half_open_breaker_closes_on_success_and_reopens_on_failure() -> None:
    breaker = CircuitBreaker(1, reset_after=10.0)
    breaker.record_failure("k", now=100.0)
    assert breaker.is_open("k", now=109.9)
    assert not breaker.is_open("k", now=110.0)
    breaker.record_failure("k", now=110.0)
    assert breaker.is_open("k", now=115.0)
    breaker.record_success("k")
    assert not breaker.is_open("k", now=115.0)
    assert breaker.failures("k") == 0


def test_node_agents_receive_their_task_and_inputs() -> None:
    class Upper:
        async def arun(self, task: str, *, inputs: Mapping[str, object]) -> object:
            await asyncio.sleep(0)
            return task.upper() + "".join(str(v) for v in inputs.values())

    graph = WorkflowGraph()
    graph.add_node("first", Upper(), task="hello")
    graph.add_node("second", Upper(), task="then ")
    graph.add_edge("first", "second")
    result = asyncio.run(WorkflowExecutor().execute(graph))
    assert dict(result.outputs) == {"first": "HELLO", "second": "THEN HELLO"}


def test_messages_added_by_nodes_are_all_kept() -> None:
    async def talk(node_input: NodeInput) -> None:
        for i in range(20):
            node_input.context.add_message({"node": node_input.node, "i": i})
            await asyncio.sleep(0)

    graph = WorkflowGraph()
    for name in "abcd":
        graph.add_node(name, talk)
    result = asyncio.run(WorkflowExecutor(max_concurrent=4).execute(graph, initial_input=None))
    assert sorted((m["node"], m["i"]) for m in result.messages) == sorted(
        (name, i) for name in "abcd" for i in range(20)
    )


def _chain(*names: str) -> WorkflowGraph:
    async def node(node_input: NodeInput) -> None:
        return None

    graph = WorkflowGraph()
    for name in names:
        graph.add_node(name, node)
    return graph


def test_duplicate_nodes_are_rejected() -> None:
    graph = _chain("a")
    with pytest.raises(ValueError, match=r"node 'a' already exists"):
        graph.add_node("a", _noop)


def test_empty_node_names_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"node names must be non-empty strings, got ''"):
        WorkflowGraph().add_node("", _noop)


def test_non_callable_nodes_are_rejected() -> None:
    with pytest.raises(TypeError, match=r"node 'x': expected an object with async arun"):
        WorkflowGraph().add_node("x", 42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("edges", "bad", "match"),
    [
        ([], ("a", "a"), r"self-loops are not allowed: 'a' -> 'a'"),
        ([], ("a", "zz"), r"unknown node 'zz' in edge 'a' -> 'zz'; add_node\(\) it first"),
        ([("a", "b")], ("a", "b"), r"edge 'a' -> 'b' already exists"),
        ([("a", "b")], ("b", "a"), r"edge 'b' -> 'a' would create the cycle 'b' -> 'a' -> 'b'"),
        (
            [("a", "b"), ("b", "c")],
            ("c", "a"),
            r"edge 'c' -> 'a' would create the cycle 'c' -> 'a' -> 'b' -> 'c'",
        ),
    ],
)
def test_invalid_edges_are_rejected_and_leave_the_graph_unchanged(
    edges: list[tuple[str, str]], bad: tuple[str, str], match: str
) -> None:
    graph = _chain("a", "b", "c")
    for source, target in edges:
        graph.add_edge(source, target)
    with pytest.raises(ValueError, match=match):
        graph.add_edge(*bad)
    graph.validate()
    assert {name: graph.predecessors(name) for name in graph.nodes} == {
        name: tuple(s for s, t in edges if t == name) for name in "abc"
    }


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_concurrent": 0}, r"max_concurrent must be an int >= 1, got 0"),
        ({"max_attempts": 0}, r"max_attempts must be an int >= 1, got 0"),
        ({"retry_base_delay": -1.0}, r"retry_base_delay must be >= 0 seconds, got -1.0"),
    ],
)
def test_executor_arguments_are_validated(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WorkflowExecutor(**kwargs)  # type: ignore[arg-type]


async def _noop(node_input: NodeInput) -> None:
    return None


def test_validate_reports_a_cycle_in_a_graph_built_around_add_edge() -> None:
    graph = _chain("a", "b")
    graph.add_edge("a", "b")
    # add_edge refuses cycles, so build one behind its back to check the second line of defence.
    graph._successors["b"].append("a")
    graph._predecessors["a"].append("b")
    with pytest.raises(ValueError, match=r"the workflow graph has a cycle through \['a', 'b'\]"):
        graph.validate()
