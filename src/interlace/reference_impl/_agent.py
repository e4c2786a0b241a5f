"""The reference agent: a run state machine, bounded memory, output stream and MCP entry point."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Literal, Protocol

from interlace.reference_impl._messages import AgentState, Message, Role, ToolCall
from interlace.reference_impl._stream import OutputStream, Signal

__all__ = (
    "AgentBusyError",
    "BaseAgent",
    "ChatModel",
    "Memory",
)

_ROLES: Mapping[str, Role] = {role.value: role for role in Role}


class AgentBusyError(RuntimeError):
    """``run()`` (or ``state_context()``) was called while the agent already had a run.

    The rejected call changed nothing: the run in progress keeps its state, memory and stream.
    """


class ChatModel(Protocol):
    """What :class:`BaseAgent`'s default :meth:`~BaseAgent.step` needs from a language model."""

    async def ask(self, messages: Sequence[Message]) -> str:
        """Return the model's reply to the conversation ``messages``."""
        ...


class Memory:
    """A bounded, thread-safe conversation memory.

    Holds at most ``max_messages`` messages; adding beyond that drops the oldest. Every add
    (including a batch from :meth:`add_messages`) is atomic with respect to other threads and
    tasks: readers never see a partially applied batch.

    Args:
        max_messages: The bound, at least 1.

    Raises:
        ValueError: ``max_messages`` is less than 1.
    """

    def __init__(self, *, max_messages: int = 100) -> None:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise ValueError(
                f"max_messages must be an int >= 1, got {max_messages!r}; "
                "pass the number of messages to keep, e.g. max_messages=100"
            )
        self.max_messages = max_messages
        self._lock = threading.Lock()
        self._messages: deque[Message] = deque(maxlen=max_messages)

    def add_message(self, message: Message) -> None:
        """Append one message atomically. Not a schedule point; never blocks for long.

        Raises:
            TypeError: ``message`` is not a :class:`Message`.
        """
        self.add_messages((message,))

    def add_messages(self, messages: Iterable[Message]) -> None:
        """Append several messages as one atomic step, in order.

        Raises:
            TypeError: An item is not a :class:`Message` (nothing is added then).
        """
        batch = tuple(messages)
        for item in batch:
            if not isinstance(item, Message):
                raise TypeError(
                    f"memory accepts Message objects, got {item!r} of type {type(item).__name__}; "
                    "build one with Message(role=Role.USER, content=...)"
                )
        with self._lock:
            self._messages.extend(batch)

    def get_messages(self) -> list[Message]:
        """Return a snapshot of the messages, oldest first."""
        with self._lock:
            return list(self._messages)

    def clear(self) -> None:
        """Remove every message."""
        with self._lock:
            self._messages.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._messages)


class BaseAgent:
    """An agent that runs one request at a time, correct under every interleaving.

    State machine (see :class:`AgentState`): ``run()`` atomically claims the agent
    (``IDLE -> RUNNING``) before its first schedule point, or raises :class:`AgentBusyError`
    without touching anything. When the run ends its outcome, ``FINISHED`` (success) or ``ERROR``
    (exception or cancellation), is recorded in :attr:`last_outcome` and the agent is ``IDLE``
    again before ``run()`` returns or raises, in one atomic step. No state is saved and restored
    across an await, and ``state`` has no setter, so no transition can be lost or overwritten by
    a stale value.

    There is no built-in timeout: a healthy run is never killed. Callers bound a run with
    ``asyncio.timeout()`` / ``anyio.fail_after()`` (or ``deadline=`` on
    :meth:`process_mcp_message`); cancellation at any await leaves the agent idle, its run's
    stream closed and :attr:`task_done` set. The agent creates no tasks.

    The agent may be used under several event loops one after the other (it creates no asyncio
    object until it has to wait), but a run and its consumers must share one loop.

    Args:
        name: The agent's name, used in error messages.
        llm: The model the default :meth:`step` asks; optional if a subclass overrides ``step``.
        max_steps: The most steps one run takes, at least 1.
        max_messages: The memory bound, at least 1.

    Raises:
        ValueError: ``max_steps`` or ``max_messages`` is less than 1.
    """

    def __init__(
        self,
        name: str,
        *,
        llm: ChatModel | None = None,
        max_steps: int = 10,
        max_messages: int = 100,
    ) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(
                f"max_steps must be an int >= 1, got {max_steps!r}; "
                "pass the most steps one run may take, e.g. max_steps=10"
            )
        self.name = name
        self.llm = llm
        self.max_steps = max_steps
        self.memory = Memory(max_messages=max_messages)
        self._state_lock = threading.Lock()
        self._state = AgentState.IDLE
        self._last_outcome: AgentState | None = None
        self._run_id = 0
        self._active_run: int | None = None
        self._stream: OutputStream[str] = OutputStream()
        self._task_done = Signal(is_set=True)

    @property
    def state(self) -> AgentState:
        """The current state; read-only (transitions belong to the run that owns the agent)."""
        return self._state

    @property
    def last_outcome(self) -> AgentState | None:
        """``FINISHED`` or ``ERROR`` for the most recent finished run, ``None`` before any run."""
        return self._last_outcome

    @property
    def output_queue(self) -> OutputStream[str]:
        """The stream of the run in progress, or of the next run when the agent is idle.

        When a run ends its stream is closed (consumers drain it and stop) and a fresh stream is
        installed for the next run.
        """
        return self._stream

    @property
    def task_done(self) -> Signal:
        """Set while no run is in progress; cleared when a run claims the agent."""
        return self._task_done

    def stream(self) -> OutputStream[str]:
        """Return the stream to iterate for the current (or, if idle, the next) run's outputs.

        The stream is chosen when ``stream()`` is called, so a consumer may start before the
        producer: ``async for item in agent.stream()`` ends once that run has ended and every
        item has been delivered.
        """
        return self._stream

    def add_message(
        self,
        role: Literal["system", "user", "assistant", "tool"],
        content: str,
        *,
        tool_calls: Sequence[ToolCall] = (),
        tool_call_id: str | None = None,
        tool_name: str | None = None,
    ) -> Message:
        """Validate, build and append one message to :attr:`memory` atomically.

        The message is built completely before it is added, so concurrent adders (tasks or
        threads) never observe a half-built message. Not a schedule point.

        Args:
            role: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.
            content: The text.
            tool_calls: For ``"assistant"`` only: the tool calls it requests.
            tool_call_id: Required for ``"tool"``: the call it answers.
            tool_name: For ``"tool"`` only: the tool's name.

        Returns:
            The message added.

        Raises:
            ValueError: Unknown role, or fields that do not fit the role.
            TypeError: ``content`` is not a str.
        """
        resolved = _ROLES.get(role) if isinstance(role, str) else None
        if resolved is None:
            raise ValueError(f"unknown message role {role!r}; use one of {sorted(_ROLES)!r}")
        if not isinstance(content, str):
            raise TypeError(
                f"message content must be a str, got {type(content).__name__}; "
                "serialize structured content (e.g. json.dumps) before adding it"
            )
        calls = tuple(tool_calls)
        if calls and resolved is not Role.ASSISTANT:
            raise ValueError(f"tool_calls are only valid on assistant messages, not {role!r}")
        if resolved is Role.TOOL and not tool_call_id:
            raise ValueError(
                "a 'tool' message needs tool_call_id naming the assistant tool call it answers"
            )
        if resolved is not Role.TOOL and (tool_call_id is not None or tool_name is not None):
            raise ValueError(
                f"tool_call_id and tool_name are only valid on 'tool' messages, not {role!r}"
            )
        message = Message(
            role=resolved,
            content=content,
            tool_calls=calls,
            tool_call_id=tool_call_id,
            name=tool_name,
        )
        self.memory.add_message(message)
        return message

    @asynccontextmanager
    async def state_context(
        self, new_state: AgentState = AgentState.RUNNING
    ) -> AsyncIterator[OutputStream[str]]:
        """Own the agent for the duration of the block: ``IDLE -> RUNNING``, then back to idle.

        The claim happens before the first schedule point and is atomic (also across threads).
        On exit the outcome, ``FINISHED`` (normal exit) or ``ERROR`` (exception or
        cancellation), is kept in :attr:`last_outcome`, the run's stream is closed, a fresh
        stream is installed and the state becomes ``IDLE``; none of this awaits. The
        state is never restored from a value saved before an await.

        Args:
            new_state: Must be ``AgentState.RUNNING``; the other states are entered only by the
                runtime itself.

        Yields:
            The output stream of this run.

        Raises:
            ValueError: ``new_state`` is not ``AgentState.RUNNING``.
            AgentBusyError: Another run owns the agent (nothing was changed).
        """
        if new_state is not AgentState.RUNNING:
            raise ValueError(
                f"state_context() can only enter {AgentState.RUNNING!r}, got {new_state!r}; "
                "FINISHED, ERROR and IDLE are entered by the runtime when the block exits"
            )
        run_id, stream = self._claim()
        outcome = AgentState.ERROR
        try:
            yield stream
            outcome = AgentState.FINISHED
        finally:
            self._release(run_id, outcome)

    async def run(self, request: str | None = None) -> str:
        """Run the agent on ``request`` until :meth:`step` reports completion or ``max_steps``.

        Each step's output is put on the run's output stream and collected. Schedule points:
        those of :meth:`step` (the default step awaits the model once).

        Args:
            request: A user message added to memory first; ``None`` runs on memory as it is.

        Returns:
            The outputs of the steps, joined with newlines.

        Raises:
            AgentBusyError: Another run is in progress (raised before any schedule point; the
                run in progress is untouched).
        """
        async with self.state_context(AgentState.RUNNING) as stream:
            if request is not None:
                self.add_message("user", request)
            outputs: list[str] = []
            for _ in range(self.max_steps):
                output = await self.step()
                if output is None:
                    break
                outputs.append(output)
                stream.put(output)
            return "\n".join(outputs)

    async def step(self) -> str | None:
        """Take one step and return its output, or ``None`` when the run is complete.

        The default asks :attr:`llm` for a reply to the memory when the last message is not
        already the assistant's, and adds the reply to memory. Override it for tool loops.

        Raises:
            RuntimeError: No ``llm`` was given and the method is not overridden.
        """
        messages = self.memory.get_messages()
        if not messages or messages[-1].role is Role.ASSISTANT:
            return None
        if self.llm is None:
            raise RuntimeError(
                f"agent {self.name!r} has no llm: pass llm=... to BaseAgent or override step()"
            )
        reply = await self.llm.ask(messages)
        self.add_message("assistant", reply)
        return reply

    async def process_mcp_message(
        self,
        content: object,
        sender: str,
        message: Mapping[str, object],
        agent_id: str,
        *,
        deadline: float | None = None,
    ) -> str:
        """Run the agent on an incoming MCP message, under a deadline the caller chooses.

        Cancellation of the caller propagates into the run (which leaves the agent idle). There
        is no default deadline: a slow but healthy run is never killed unless the caller asks.

        Args:
            content: A str, a mapping with a str ``"text"`` item, or a sequence of those
                (the texts are joined with newlines).
            sender: Who sent it (kept for the caller's logs; not interpreted).
            message: The raw MCP message (not interpreted).
            agent_id: The addressed agent's id (not interpreted).
            deadline: The event loop time (``loop.time()``) at which the run is cancelled and
                ``TimeoutError`` raised; ``None`` for no deadline. For a relative bound, wrap
                the call in ``asyncio.timeout(seconds)`` instead.

        Returns:
            What :meth:`run` returned.

        Raises:
            TypeError: ``content`` has none of the accepted shapes.
            TimeoutError: The deadline passed (the agent is idle again).
            AgentBusyError: The agent is already running.
        """
        text = _content_text(content)
        async with asyncio.timeout_at(deadline):
            return await self.run(text)

    def _claim(self) -> tuple[int, OutputStream[str]]:
        with self._state_lock:
            if self._active_run is not None:
                raise AgentBusyError(
                    f"agent {self.name!r} is busy (state {self._state.value!r}) and runs one "
                    "request at a time; this request was rejected without changing anything. "
                    "Await agent.task_done.wait() and retry, or use another agent instance"
                )
            self._run_id += 1
            self._active_run = self._run_id
            self._state = AgentState.RUNNING
            self._task_done.clear()
            return self._run_id, self._stream

    def _release(self, run_id: int, outcome: AgentState) -> None:
        with self._state_lock:
            if self._active_run != run_id:
                raise AssertionError(
                    f"run {run_id} released agent {self.name!r} owned by run {self._active_run}"
                )
            self._last_outcome = outcome
            finished_stream, self._stream = self._stream, OutputStream()
            self._state = AgentState.IDLE
            self._active_run = None
        finished_stream.close()
        self._task_done.set()


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        text = content.get("text")
        if isinstance(text, str):
            return text
    elif isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        return "\n".join(_content_text(part) for part in content)
    raise TypeError(
        f"cannot read text from MCP content {content!r} of type {type(content).__name__}; "
        "pass a str, a mapping with a str 'text' item, or a list of those"
    )
