"""The reference workflow executor: a DAG of async nodes, bounded concurrency, retries, breaker."""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol, runtime_checkable

__all__ = (
    "CircuitBreaker",
    "CircuitBreakerOpenError",
    "ExecutionContext",
    "NodeAgent",
    "NodeFailedError",
    "NodeFunction",
    "NodeInput",
    "WorkflowExecutor",
    "WorkflowFailedError",
    "WorkflowGraph",
    "WorkflowResult",
)


@runtime_checkable
class NodeAgent(Protocol):
    """An agent usable as a workflow node: the executor awaits ``arun(task, inputs=...)``."""

    async def arun(self, task: str, *, inputs: Mapping[str, object]) -> object:
        """Run ``task`` given the outputs of the node's predecessors and return the output."""
        ...


NodeFunction = Callable[["NodeInput"], Awaitable[object]]
"""An async function usable as a workflow node: it receives a :class:`NodeInput`."""


class CircuitBreakerOpenError(RuntimeError):
    """A node was not attempted because its circuit breaker is open."""


class NodeFailedError(Exception):
    """A node failed on its last attempt (or its breaker was open).

    Attributes:
        node: The node's name.
        attempts: How many attempts ran (0 when the breaker was open from the start).
        cause: The last attempt's exception, or the :class:`CircuitBreakerOpenError`.
    """

    def __init__(self, node: str, attempts: int, cause: BaseException) -> None:
        super().__init__(
            f"node {node!r} failed after {attempts} attempt(s): {type(cause).__name__}: {cause}"
        )
        self.node = node
        self.attempts = attempts
        self.cause = cause


class WorkflowFailedError(Exception):
    """A workflow ended because a node failed; its ``__cause__`` is the node's last error.

    Attributes:
        result: The partial :class:`WorkflowResult` (``status == "failed"``).
    """

    def __init__(self, result: WorkflowResult, failure: NodeFailedError) -> None:
        super().__init__(f"workflow {result.workflow_id!r} failed: {failure}")
        self.result = result


@dataclass(frozen=True, slots=True)
class NodeInput:
    """What a node function receives.

    Args:
        node: The node's name.
        task: The task text given to ``add_node``.
        inputs: The outputs of the node's declared predecessors, by name (read-only snapshot,
            complete before the node starts, so it never depends on the schedule).
        initial_input: The ``initial_input`` given to ``execute``.
        attempt: 1 for the first attempt, 2 for the first retry, ...
        context: The execution's shared context.
    """

    node: str
    task: str
    inputs: Mapping[str, object]
    initial_input: object
    attempt: int
    context: ExecutionContext


@dataclass(frozen=True, slots=True)
class WorkflowResult:
    """The outcome of one execution.

    Args:
        workflow_id: The execution's id.
        status: ``"completed"`` (every node succeeded) or ``"failed"``.
        outputs: The output of every node that succeeded, by name.
        failed_node: The node that failed the workflow, if any.
        messages: The messages nodes added to the context, in the order they were added.
        retries: How many retries each retried node needed.
    """

    workflow_id: str
    status: Literal["completed", "failed"]
    outputs: Mapping[str, object]
    failed_node: str | None = None
    messages: tuple[Mapping[str, object], ...] = ()
    retries: Mapping[str, int] = field(default_factory=dict)


class ExecutionContext:
    """State shared by the nodes of one execution.

    Every method is synchronous and atomic (guarded by a threading lock and never awaiting), so
    no asyncio lock is needed and none is created: an ``asyncio.Lock`` around an ``append`` with
    no await inside guards nothing.

    Args:
        workflow_id: The execution's id.
    """

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        self._lock = threading.Lock()
        self._messages: list[Mapping[str, object]] = []
        self._retries: dict[str, int] = {}

    def add_message(self, message: Mapping[str, object]) -> None:
        """Append a copy of ``message``. Not a schedule point.

        Raises:
            TypeError: ``message`` is not a mapping.
        """
        if not isinstance(message, Mapping):
            raise TypeError(
                f"add_message expects a mapping such as {{'role': ..., 'content': ...}}, "
                f"got {message!r}"
            )
        with self._lock:
            self._messages.append(MappingProxyType(dict(message)))

    @property
    def messages(self) -> tuple[Mapping[str, object], ...]:
        """A snapshot of the messages, in the order they were added."""
        with self._lock:
            return tuple(self._messages)

    def record_retry(self, node: str) -> int:
        """Count one retry of ``node`` and return its retry count so far. Not a schedule point."""
        with self._lock:
            count = self._retries.get(node, 0) + 1
            self._retries[node] = count
            return count

    @property
    def retries(self) -> Mapping[str, int]:
        """A snapshot of the retry counts by node."""
        with self._lock:
            return MappingProxyType(dict(self._retries))


@dataclass(frozen=True, slots=True)
class _Node:
    name: str
    run: NodeAgent | NodeFunction
    task: str


@dataclass(frozen=True, slots=True)
class _Plan:
    """An immutable copy of a graph. Invariant: acyclic, every edge names two nodes."""

    nodes: Mapping[str, _Node]
    predecessors: Mapping[str, tuple[str, ...]]
    successors: Mapping[str, tuple[str, ...]]


class WorkflowGraph:
    """A directed acyclic graph of named nodes, validated as it is built.

    Not thread-safe to build from several threads at once; ``execute`` works on a snapshot, so
    changing the graph later does not affect an execution in progress.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._successors: dict[str, list[str]] = {}
        self._predecessors: dict[str, list[str]] = {}

    def add_node(self, name: str, agent: NodeAgent | NodeFunction, *, task: str = "") -> None:
        """Add a node that runs ``agent``.

        Args:
            name: A unique, non-empty name.
            agent: A :class:`NodeAgent` (awaited as ``agent.arun(task, inputs=...)``) or a
                :data:`NodeFunction` (awaited with a :class:`NodeInput`). Wrap blocking code in
                ``asyncio.to_thread`` yourself.
            task: The task text.

        Raises:
            ValueError: ``name`` is empty or already used.
            TypeError: ``agent`` is neither a NodeAgent nor callable.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"node names must be non-empty strings, got {name!r}")
        if name in self._nodes:
            raise ValueError(
                f"node {name!r} already exists; node names must be unique, choose another name"
            )
        if not isinstance(agent, NodeAgent) and not callable(agent):
            raise TypeError(
                f"node {name!r}: expected an object with async arun(task, *, inputs) or an async "
                f"function taking a NodeInput, got {agent!r}"
            )
        self._nodes[name] = _Node(name, agent, task)
        self._successors[name] = []
        self._predecessors[name] = []

    def add_edge(self, source: str, target: str) -> None:
        """Declare that ``target`` runs after ``source`` and receives its output.

        Raises:
            ValueError: An endpoint is unknown, ``source == target`` (self-loop), the edge exists
                already, or it would close a cycle (the message shows the cycle).
        """
        for end in (source, target):
            if end not in self._nodes:
                raise ValueError(
                    f"unknown node {end!r} in edge {source!r} -> {target!r}; add_node() it first"
                )
        if source == target:
            raise ValueError(f"self-loops are not allowed: {source!r} -> {target!r}")
        if target in self._successors[source]:
            raise ValueError(f"edge {source!r} -> {target!r} already exists")
        path = self._path(target, source)
        if path is not None:
            cycle = " -> ".join(repr(node) for node in [source, *path])
            raise ValueError(f"edge {source!r} -> {target!r} would create the cycle {cycle}")
        self._successors[source].append(target)
        self._predecessors[target].append(source)

    @property
    def nodes(self) -> tuple[str, ...]:
        """The node names, in the order they were added."""
        return tuple(self._nodes)

    def predecessors(self, name: str) -> tuple[str, ...]:
        """The nodes with an edge into ``name``, in the order the edges were added.

        Raises:
            KeyError: Unknown node.
        """
        return tuple(self._predecessors[name])

    def validate(self) -> None:
        """Check that the graph is acyclic (``add_edge`` already guarantees it).

        Raises:
            ValueError: The graph has a cycle (the message shows it).
        """
        self._plan()

    def _path(self, start: str, goal: str) -> list[str] | None:
        """Return a path from ``start`` to ``goal`` following edges, or None."""
        parents: dict[str, str | None] = {start: None}
        frontier = [start]
        while frontier:
            node = frontier.pop()
            if node == goal:
                path = [node]
                parent = parents[node]
                while parent is not None:
                    path.append(parent)
                    parent = parents[parent]
                return path[::-1]
            for nxt in self._successors[node]:
                if nxt not in parents:
                    parents[nxt] = node
                    frontier.append(nxt)
        return None

    def _plan(self) -> _Plan:
        indegree = {name: len(preds) for name, preds in self._predecessors.items()}
        ready = [name for name, degree in indegree.items() if degree == 0]
        seen = 0
        while ready:
            node = ready.pop()
            seen += 1
            for nxt in self._successors[node]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
        if seen != len(self._nodes):
            stuck = sorted(name for name, degree in indegree.items() if degree > 0)
            raise ValueError(f"the workflow graph has a cycle through {stuck!r}")
        return _Plan(
            nodes=MappingProxyType(dict(self._nodes)),
            predecessors=MappingProxyType({n: tuple(p) for n, p in self._predecessors.items()}),
            successors=MappingProxyType({n: tuple(s) for n, s in self._successors.items()}),
        )


class CircuitBreaker:
    """Counts consecutive failures per key and opens after ``threshold`` of them.

    It lives on the executor, so it opens *across* executions. While open, calls for the key
    fail fast. With ``reset_after`` set, calls at least that many seconds (on the running event
    loop's clock) after opening are let through (half-open): a success closes the breaker, a
    failure opens it again at once. Thread-safe; never awaits.

    Args:
        threshold: Consecutive failures that open the breaker, at least 1.
        reset_after: Seconds before a half-open trial, or ``None`` to stay open until
            :meth:`reset`.

    Raises:
        ValueError: ``threshold < 1`` or ``reset_after < 0``.
    """

    def __init__(self, threshold: int = 5, *, reset_after: float | None = None) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ValueError(f"threshold must be an int >= 1, got {threshold!r}")
        if reset_after is not None and reset_after < 0:
            raise ValueError(f"reset_after must be None or >= 0 seconds, got {reset_after!r}")
        self.threshold = threshold
        self.reset_after = reset_after
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}
        self._opened_at: dict[str, float] = {}

    def is_open(self, key: str, *, now: float | None = None) -> bool:
        """Whether calls for ``key`` must fail fast at time ``now`` (default: the loop clock)."""
        with self._lock:
            opened_at = self._opened_at.get(key)
            if opened_at is None:
                return False
            if self.reset_after is None:
                return True
            current = asyncio.get_running_loop().time() if now is None else now
            return current - opened_at < self.reset_after

    def record_success(self, key: str) -> None:
        """Close the breaker for ``key`` and forget its failures."""
        with self._lock:
            self._failures.pop(key, None)
            self._opened_at.pop(key, None)

    def record_failure(self, key: str, *, now: float | None = None) -> None:
        """Count a failure for ``key``; (re)open the breaker at ``threshold`` failures."""
        with self._lock:
            count = self._failures.get(key, 0) + 1
            self._failures[key] = count
            if count >= self.threshold:
                self._opened_at[key] = _loop_time_or_zero() if now is None else now

    def reset(self, key: str | None = None) -> None:
        """Close the breaker for ``key``, or for every key when ``key`` is None."""
        with self._lock:
            if key is None:
                self._failures.clear()
                self._opened_at.clear()
            else:
                self._failures.pop(key, None)
                self._opened_at.pop(key, None)

    def failures(self, key: str) -> int:
        """The consecutive failures counted for ``key``."""
        with self._lock:
            return self._failures.get(key, 0)


def _loop_time_or_zero() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return 0.0


class WorkflowExecutor:
    """Runs a :class:`WorkflowGraph`, each node once all its predecessors have succeeded.

    Guarantees:

    * at most ``max_concurrent`` node attempts run at once per event loop, across every
      execution of this executor on that loop; the limiter is created on the running loop (one
      per loop, kept in a weak map), never in ``__init__``, so the executor can be reused under a
      second ``asyncio.run``;
    * a node's ``inputs`` are exactly the outputs of its declared predecessors, snapshotted when
      it starts; they never depend on the schedule;
    * a node that fails ``max_attempts`` times fails the workflow: the other nodes are cancelled
      and ``execute`` raises :class:`WorkflowFailedError` (a failed workflow is never reported as
      completed);
    * retry backoff sleeps *outside* the concurrency limit, so a backing-off node holds no slot;
    * the :attr:`breaker` is shared by all executions: a node that keeps failing is failed fast
      in later executions too;
    * cancelling ``execute`` cancels every node task and leaks none (``asyncio.TaskGroup``).

    Args:
        max_concurrent: Node attempts allowed at once (per event loop), at least 1.
        max_attempts: Attempts per node per execution (1 = no retries), at least 1.
        retry_base_delay: Backoff before retry ``n`` is ``retry_base_delay * 2 ** (n - 1)``
            seconds, on the loop clock (``asyncio.sleep``).
        breaker: The circuit breaker; default ``CircuitBreaker(5)``.

    Raises:
        ValueError: An argument is out of range.
    """

    def __init__(
        self,
        *,
        max_concurrent: int = 4,
        max_attempts: int = 3,
        retry_base_delay: float = 1.0,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        for label, value in (("max_concurrent", max_concurrent), ("max_attempts", max_attempts)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be an int >= 1, got {value!r}")
        if retry_base_delay < 0:
            raise ValueError(f"retry_base_delay must be >= 0 seconds, got {retry_base_delay!r}")
        self.max_concurrent = max_concurrent
        self.max_attempts = max_attempts
        self.retry_base_delay = retry_base_delay
        self.breaker = CircuitBreaker() if breaker is None else breaker
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    async def execute(
        self,
        graph: WorkflowGraph,
        *,
        initial_input: object = None,
        workflow_id: str | None = None,
    ) -> WorkflowResult:
        """Run every node of ``graph`` and return the result.

        A schedule point (it awaits the nodes).

        Args:
            graph: The workflow; a snapshot is taken before anything runs.
            initial_input: Given to every node as ``NodeInput.initial_input``.
            workflow_id: The id to use; default ``"workflow-<n>"`` counting per executor.

        Returns:
            The result, with ``status == "completed"``.

        Raises:
            WorkflowFailedError: A node failed; ``.result`` has the partial outputs.
            ValueError: The graph has a cycle.
        """
        plan = graph._plan()
        context = ExecutionContext(workflow_id or self._next_workflow_id())
        limiter = self._limiter()
        outputs: dict[str, object] = {}
        waiting = {name: len(preds) for name, preds in plan.predecessors.items()}

        async def run_node(name: str, group: asyncio.TaskGroup) -> None:
            inputs = MappingProxyType({pred: outputs[pred] for pred in plan.predecessors[name]})
            outputs[name] = await self._run_with_retries(
                plan.nodes[name], inputs, initial_input, context, limiter
            )
            for successor in plan.successors[name]:
                waiting[successor] -= 1
                if waiting[successor] == 0:
                    group.create_task(run_node(successor, group), name=f"node {successor}")

        try:
            async with asyncio.TaskGroup() as group:
                for name, count in waiting.items():
                    if count == 0:
                        group.create_task(run_node(name, group), name=f"node {name}")
        except BaseExceptionGroup as errors:
            failed, rest = errors.split(NodeFailedError)
            if failed is None or rest is not None:
                raise
            first = failed.exceptions[0]
            assert isinstance(first, NodeFailedError)
            result = WorkflowResult(
                workflow_id=context.workflow_id,
                status="failed",
                outputs=MappingProxyType(dict(outputs)),
                failed_node=first.node,
                messages=context.messages,
                retries=context.retries,
            )
            raise WorkflowFailedError(result, first) from first.cause
        return WorkflowResult(
            workflow_id=context.workflow_id,
            status="completed",
            outputs=MappingProxyType(dict(outputs)),
            messages=context.messages,
            retries=context.retries,
        )

    async def _run_with_retries(
        self,
        node: _Node,
        inputs: Mapping[str, object],
        initial_input: object,
        context: ExecutionContext,
        limiter: asyncio.Semaphore,
    ) -> object:
        for attempt in range(1, self.max_attempts + 1):
            if self.breaker.is_open(node.name):
                raise NodeFailedError(
                    node.name,
                    attempt - 1,
                    CircuitBreakerOpenError(
                        f"circuit breaker open for node {node.name!r} after "
                        f"{self.breaker.failures(node.name)} consecutive failures; fix the node "
                        "and call executor.breaker.reset(node) to close it"
                    ),
                ) from None
            async with limiter:
                try:
                    output = await _call(node, inputs, initial_input, attempt, context)
                except Exception as exc:
                    error: Exception = exc
                else:
                    self.breaker.record_success(node.name)
                    return output
            self.breaker.record_failure(node.name)
            if attempt == self.max_attempts:
                raise NodeFailedError(node.name, attempt, error) from error
            context.record_retry(node.name)
            # Outside the limiter on purpose: a node waiting to retry must not hold a slot.
            await asyncio.sleep(self.retry_base_delay * 2 ** (attempt - 1))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _limiter(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            limiter = self._limiters.get(loop)
            if limiter is None:
                limiter = asyncio.Semaphore(self.max_concurrent)
                self._limiters[loop] = limiter
            return limiter

    def _next_workflow_id(self) -> str:
        with self._lock:
            return f"workflow-{next(self._ids)}"


async def _call(
    node: _Node,
    inputs: Mapping[str, object],
    initial_input: object,
    attempt: int,
    context: ExecutionContext,
) -> object:
    if isinstance(node.run, NodeAgent):
        return await node.run.arun(node.task, inputs=inputs)
    return await node.run(NodeInput(node.name, node.task, inputs, initial_input, attempt, context))
