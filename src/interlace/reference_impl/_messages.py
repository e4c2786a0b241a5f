"""Plain data types shared by the reference components: roles, states, messages, records."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = (
    "AgentState",
    "ErrorRecord",
    "Event",
    "Message",
    "Role",
    "ToolCall",
)


def _frozen_mapping(value: Mapping[str, object] | None) -> Mapping[str, object]:
    return MappingProxyType(dict(value or {}))


class Role(enum.StrEnum):
    """The author of a :class:`Message`."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class AgentState(enum.StrEnum):
    """The states of an agent's run state machine.

    ``BaseAgent.state`` is only ever ``IDLE`` or ``RUNNING``: a run claims the agent
    (``IDLE -> RUNNING``) and, when it ends, records its outcome (``FINISHED`` or ``ERROR``) in
    ``BaseAgent.last_outcome`` and returns the agent to ``IDLE`` in one atomic step.
    """

    IDLE = "idle"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation requested by an assistant message.

    Args:
        id: The call id a later ``tool`` message answers with ``tool_call_id``.
        name: The tool's name.
        arguments: The arguments, usually a JSON object in text form.
    """

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class Message:
    """One immutable entry of an agent's conversation memory.

    Args:
        role: Who wrote it.
        content: The text.
        tool_calls: Tool calls requested by an assistant message.
        tool_call_id: For a ``tool`` message, the id of the call it answers.
        name: For a ``tool`` message, the tool's name.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """An immutable message published on a :class:`MessageBus`.

    Args:
        event_type: The topic subscribers select on.
        payload: The event's data; copied into a read-only mapping.
        source: Who published it (free text).
    """

    event_type: str
    payload: Mapping[str, object] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "payload", _frozen_mapping(self.payload))


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    """One error recorded by an :class:`ErrorRecoveryService`.

    Args:
        plan_id: The plan the error belongs to.
        sequence: Position in the service's global recording order (0, 1, 2, ...); unique.
        error_type: The exception's class name, or ``"str"`` for an error given as text.
        message: The error text.
        step_id: The failing step, when known.
        context: Extra data, copied into a read-only mapping.
    """

    plan_id: str
    sequence: int
    error_type: str
    message: str
    step_id: str | None = None
    context: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "context", _frozen_mapping(self.context))
