"""A correct agent runtime to compare your own against (interlace.reference_impl).

Every component is shaped like the system in the bug reports that started interlace, so the same
scenario can run against a user's runtime and against this one, and is correct under every
interleaving the harness can produce:

* :class:`BaseAgent` with :class:`Memory` and :class:`OutputStream`: one run at a time, atomic
  state transitions, cancellation-safe cleanup, no built-in timeout;
* :class:`WorkflowExecutor` over a :class:`WorkflowGraph`: per-loop concurrency limit, schedule
  independent node inputs, failing workflows that say so, retries outside the limit, a circuit
  breaker across executions;
* :class:`AgentMemory`: JSON files, safe across threads and processes and crash-safe;
* :class:`MessageBus`, :class:`Container` / :func:`get_container`, :class:`ErrorRecoveryService`:
  thread-safe.

This package imports nothing else from interlace. See docs/reference_impl.md.
"""

from __future__ import annotations

from interlace.reference_impl._agent import AgentBusyError, BaseAgent, ChatModel, Memory
from interlace.reference_impl._bus import (
    BusClosedError,
    EventCallback,
    MessageBus,
    Subscription,
    SubscriptionClosedError,
)
from interlace.reference_impl._container import (
    Container,
    DependencyCycleError,
    get_container,
    reset_container,
)
from interlace.reference_impl._file_store import (
    AgentMemory,
    MemoryEntry,
    MemoryStoreCorruptError,
    validate_agent_id,
    validate_key,
)
from interlace.reference_impl._messages import (
    AgentState,
    ErrorRecord,
    Event,
    Message,
    Role,
    ToolCall,
)
from interlace.reference_impl._recovery import ErrorHistory, ErrorRecoveryService
from interlace.reference_impl._stream import (
    OutputStream,
    Signal,
    StreamClosedError,
    StreamEndedError,
)
from interlace.reference_impl._workflow import (
    CircuitBreaker,
    CircuitBreakerOpenError,
    ExecutionContext,
    NodeAgent,
    NodeFailedError,
    NodeFunction,
    NodeInput,
    WorkflowExecutor,
    WorkflowFailedError,
    WorkflowGraph,
    WorkflowResult,
)

__all__ = (
    "AgentBusyError",
    "AgentMemory",
    "AgentState",
    "BaseAgent",
    "BusClosedError",
    "ChatModel",
    "CircuitBreaker",
    "CircuitBreakerOpenError",
    "Container",
    "DependencyCycleError",
    "ErrorHistory",
    "ErrorRecord",
    "ErrorRecoveryService",
    "Event",
    "EventCallback",
    "ExecutionContext",
    "Memory",
    "MemoryEntry",
    "MemoryStoreCorruptError",
    "Message",
    "MessageBus",
    "NodeAgent",
    "NodeFailedError",
    "NodeFunction",
    "NodeInput",
    "OutputStream",
    "Role",
    "Signal",
    "StreamClosedError",
    "StreamEndedError",
    "Subscription",
    "SubscriptionClosedError",
    "ToolCall",
    "WorkflowExecutor",
    "WorkflowFailedError",
    "WorkflowGraph",
    "WorkflowResult",
    "get_container",
    "reset_container",
    "validate_agent_id",
    "validate_key",
)
