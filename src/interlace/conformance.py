"""The conformance kit: check your own runtime's components against interlace.reference_impl.

For each component of the reference runtime there is a :class:`~interlace.stateful.
ConcurrentStateMachine` whose rules race the component's operations and whose ``model`` is the
reference component, used one call at a time. You point the kit at your implementation with an
*adapter*: any object (a module, a class, a ``types.SimpleNamespace``) with one attribute per
component you want checked, each a factory of an object with the component's operations:

========== ============================== ==================================================
attribute  called as                      the object it returns has
========== ============================== ==================================================
memory     ``memory(max_messages)``       ``add(role, content)``, ``contents()`` -> a list
                                          of ``(role, content)`` pairs, oldest first
stream     ``stream()``                   ``put(item)``, ``close()``, ``async get()`` -> the
                                          next item (waiting for one), or None once the
                                          stream is closed and drained
bus        ``bus()``                      ``subscribe(callback) -> handle``,
                                          ``unsubscribe(handle)``, ``async publish(payload)``;
                                          ``await callback(payload)`` delivers one event
file_store ``file_store(directory)``      ``save(key, value)``, ``load(key)`` -> the value or
                                          None (blocking calls, from several threads)
container  ``container()``                ``get_container()`` -> the process-wide container
                                          (the factory resets it: each call starts afresh)
recovery   ``recovery()``                 ``record_error(plan_id, message)``,
                                          ``error_count(plan_id)`` -> int
========== ============================== ==================================================

Any method may be ``async def`` where the table shows a plain one (the kit awaits what it gets
back) for the asyncio components (stream, bus); the thread components (memory, file_store,
container, recovery) run their calls in threads and must be plain. :data:`REFERENCE` is the
adapter of interlace.reference_impl itself, and the source of every model.

Use it under pytest (``TestMemory = conformance.machine(adapter, "memory").TestCase``) or all at
once with :func:`check` (what ``interlace conform MODULE:ADAPTER`` runs). docs/stateful.md has a
worked example.

This module needs Hypothesis; ``import interlace.reference_impl`` does not import it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import dataclasses
import inspect
import itertools
import shutil
import tempfile
import threading
import time
import types
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, given, seed
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from interlace import reference_impl as ref
from interlace._conformance_names import COMPONENTS, DEFAULT_MAX_EXAMPLES
from interlace.stateful import (
    ConcurrentStateMachine,
    NotLinearizableError,
    Scenario,
    initialize,
    rule,
)

__all__ = (
    "COMPONENTS",
    "DEFAULT_MAX_EXAMPLES",
    "REFERENCE",
    "ComponentVerdict",
    "check",
    "components",
    "machine",
)


_MSG_UNKNOWN_COMPONENT = (
    "{component!r} is not a component of the conformance kit: use one of {names}"
)
_MSG_NOT_ADAPTED = (
    "adapter {adapter!r} has no attribute {component!r}: give it a factory of your {component} "
    "(see interlace.conformance for what the factory is called with and returns)"
)
_MSG_NOT_CALLABLE = (
    "{component} of adapter {adapter!r} is {value!r}, which is not callable: it must be a factory "
    "(a class or function) that returns a new {component} each time it is called"
)
_MSG_NOTHING_ADAPTED = (
    "adapter {adapter!r} has none of the kit's components as an attribute: give it one or "
    "more of {names}, each a factory of your implementation of that component"
)

_DELIVERIES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "interlace_conformance_deliveries", default=None
)
# A thread bug needs a preemption at one line of the user's code: more schedules per scenario
# than an asyncio one, whose switch points are its awaits.
_THREAD_SCHEDULES = 150
_MEMORY_BOUND = 2
_AGENT_ID = "agent-1"
_STREAM_END = None
_TIMED_OUT = "timed out"


async def _resolved(value: Any) -> Any:
    """``value``, awaited when a user's method returned an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


class _ComponentMachine(ConcurrentStateMachine):
    """What every component machine shares: the factory of the implementation under test."""

    component: ClassVar[str] = ""
    implementation: ClassVar[Callable[..., Any]]


# Settings chosen so that each kit machine finds every replica bug the catalog reproduces within
# DEFAULT_MAX_EXAMPLES examples (tests/stateful/test_conformance.py checks it): small branches,
# few argument values, more schedules for the thread components.


class MemoryMachine(
    _ComponentMachine, max_schedules=_THREAD_SCHEDULES, max_prefix_calls=2, max_branch_calls=2
):
    """Agent memory bounded at two messages, filled from two threads."""

    component = "memory"

    def __init__(self) -> None:
        self.subject = type(self).implementation(_MEMORY_BOUND)

    @rule(role=st.sampled_from(["user", "assistant"]), content=st.sampled_from(["a", "b", "c"]))
    def add(self, role: str, content: str) -> None:
        self.subject.add(role, content)

    @rule()
    def contents(self) -> list[tuple[str, str]]:
        return [(str(role), str(content)) for role, content in self.subject.contents()]


class StreamMachine(_ComponentMachine, max_prefix_calls=2, max_branch_calls=2):
    """An output stream with a producer and consumers on the event loop.

    A ``get`` that has waited a (virtual) second for an item returns ``"timed out"``: a
    sequential order may put a consumer before the producer it waits for, and the reference
    then waits too, where a stream that ends early or hands out nothing does not.
    """

    component = "stream"

    def __init__(self) -> None:
        self.subject = type(self).implementation()
        self.closed = False

    # put and close are drawn only while the stream is open: what a put after close does is
    # not part of the contract (the reference raises StreamClosedError).
    @precondition(lambda self: not self.closed)
    @rule(item=st.sampled_from(["x", "y", "z"]))
    async def put(self, item: str) -> None:
        await _resolved(self.subject.put(item))

    @precondition(lambda self: not self.closed)
    @rule()
    async def close(self) -> None:
        self.closed = True
        await _resolved(self.subject.close())

    @rule()
    async def get(self) -> str | None:
        try:
            item: str | None = await asyncio.wait_for(_resolved(self.subject.get()), 1.0)
        except TimeoutError:
            return _TIMED_OUT
        return item


class BusMachine(_ComponentMachine, max_prefix_calls=1, max_branch_calls=2):
    """A message bus with two subscribers, whose callbacks take a loop turn each.

    ``unsubscribe`` returns how many events the subscriber had received when it returned, so a
    delivery that starts after an unsubscribe has returned shows in the results.
    """

    component = "bus"
    NAMES: ClassVar[tuple[str, ...]] = ("s1", "s2")

    def __init__(self) -> None:
        self.subject = type(self).implementation()
        self.handles: dict[str, Any] = {}
        self.received: dict[str, list[str]] = {name: [] for name in self.NAMES}

    def _callback(self, name: str) -> Callable[[Any], Any]:
        async def deliver(payload: Any) -> None:
            self.received[name].append(str(payload))
            deliveries = _DELIVERIES.get()
            if deliveries is not None:
                deliveries.append(name)
            # A callback that does work: the next delivery of the same publish comes later.
            await asyncio.sleep(0)

        return deliver

    async def _subscribe(self, name: str) -> bool:
        # Only the initializer calls this, one name after another, before any branch runs:
        # no other task can be between the check and the write.
        if name in self.handles:
            return False
        handle = await _resolved(self.subject.subscribe(self._callback(name)))
        self.handles[name] = handle  # noqa: IL101
        return True

    @initialize()
    async def subscribe_both(self) -> None:
        for name in self.NAMES:
            await self._subscribe(name)

    @rule(name=st.sampled_from(NAMES))
    async def unsubscribe(self, name: str) -> int | None:
        handle = self.handles.pop(name, None)
        if handle is None:
            return None
        await _resolved(self.subject.unsubscribe(handle))
        return len(self.received[name])

    @rule(payload=st.sampled_from(["p", "q"]))
    async def publish(self, payload: str) -> list[str]:
        """The subscribers this publish delivered to (its callbacks see this call's list
        through a context variable, also when the bus runs them in tasks of its own)."""
        delivered: list[str] = []
        token = _DELIVERIES.set(delivered)
        try:
            await _resolved(self.subject.publish(payload))
        finally:
            _DELIVERIES.reset(token)
        return sorted(delivered)

    @rule(name=st.sampled_from(NAMES))
    async def received_by(self, name: str) -> list[str]:
        return list(self.received[name])


def _remove(directory: Path, subject: Any) -> None:
    close = getattr(subject, "close", None)
    if callable(close):
        close()
    shutil.rmtree(directory, ignore_errors=True)


_ROOT: list[Path] = []


def _directory() -> Path:
    """A new empty directory for one file store, under one root per process."""
    if not _ROOT:
        root = Path(tempfile.mkdtemp(prefix="interlace-conform-"))
        atexit.register(shutil.rmtree, root, True)
        _ROOT.append(root)
    return Path(tempfile.mkdtemp(dir=_ROOT[0]))


class FileStoreMachine(
    _ComponentMachine, max_schedules=_THREAD_SCHEDULES, max_prefix_calls=1, max_branch_calls=2
):
    """A file-backed store of one agent, written and read from two threads."""

    component = "file_store"

    def __init__(self) -> None:
        directory = _directory()
        self.subject = type(self).implementation(directory)
        weakref.finalize(self, _remove, directory, self.subject)

    @rule(key=st.sampled_from(["k1", "k2"]), value=st.sampled_from(["v1", "v2"]))
    def save(self, key: str, value: str) -> None:
        self.subject.save(key, value)

    @rule(key=st.sampled_from(["k1", "k2"]))
    def load(self, key: str) -> object:
        return self.subject.load(key)


class ContainerMachine(
    _ComponentMachine, max_schedules=_THREAD_SCHEDULES, max_prefix_calls=1, max_branch_calls=1
):
    """The process-wide container, fetched from two threads: every call gets the same one."""

    component = "container"

    def __init__(self) -> None:
        self.subject = type(self).implementation()
        self.seen: list[object] = []
        self.lock = threading.Lock()

    @rule()
    def get_container(self) -> int:
        """Which container the call got: 0 for the first one any call got, 1 for a second..."""
        container = self.subject.get_container()
        with self.lock:
            for index, seen in enumerate(self.seen):
                if seen is container:
                    return index
            self.seen.append(container)
            return len(self.seen) - 1


class RecoveryMachine(
    _ComponentMachine, max_schedules=_THREAD_SCHEDULES, max_prefix_calls=0, max_branch_calls=2
):
    """Error-recovery histories per plan, recorded from two threads."""

    component = "recovery"

    def __init__(self) -> None:
        self.subject = type(self).implementation()

    @rule(plan_id=st.sampled_from(["plan-1", "plan-2"]), message=st.sampled_from(["e1", "e2"]))
    def record_error(self, plan_id: str, message: str) -> None:
        self.subject.record_error(plan_id, message)

    @rule(plan_id=st.sampled_from(["plan-1", "plan-2"]))
    def error_count(self, plan_id: str) -> int:
        return int(self.subject.error_count(plan_id))


_MACHINES: dict[str, type[_ComponentMachine]] = {
    m.component: m
    for m in (
        MemoryMachine,
        StreamMachine,
        BusMachine,
        FileStoreMachine,
        ContainerMachine,
        RecoveryMachine,
    )
}


# The reference's own adapter: the kit's operations on interlace.reference_impl.


class _ReferenceMemory:
    def __init__(self, max_messages: int) -> None:
        self.memory = ref.Memory(max_messages=max_messages)

    def add(self, role: str, content: str) -> None:
        self.memory.add_message(ref.Message(role=ref.Role(role), content=content))

    def contents(self) -> list[tuple[str, str]]:
        return [(m.role.value, m.content) for m in self.memory.get_messages()]


class _ReferenceStream:
    def __init__(self) -> None:
        self.stream: ref.OutputStream[str] = ref.OutputStream()

    def put(self, item: str) -> None:
        self.stream.put(item)

    def close(self) -> None:
        self.stream.close()

    async def get(self) -> str | None:
        try:
            return await self.stream.get()
        except ref.StreamEndedError:
            return _STREAM_END


class _ReferenceBus:
    TOPIC = "topic"

    def __init__(self) -> None:
        self.bus = ref.MessageBus()

    def subscribe(self, callback: Callable[[Any], Any]) -> ref.Subscription:
        async def deliver(event: ref.Event) -> None:
            await callback(event.payload["value"])

        return self.bus.subscribe(self.TOPIC, deliver)

    def unsubscribe(self, handle: ref.Subscription) -> None:
        self.bus.unsubscribe(handle)

    async def publish(self, payload: object) -> None:
        await self.bus.publish(ref.Event(self.TOPIC, {"value": payload}))


class _ReferenceFileStore:
    def __init__(self, directory: Path) -> None:
        self.memory = ref.AgentMemory(directory)

    def save(self, key: str, value: object) -> None:
        self.memory.save_sync(_AGENT_ID, key, value)

    def load(self, key: str) -> object:
        return self.memory.load_sync(_AGENT_ID, key)

    def close(self) -> None:
        self.memory.close()


class _ReferenceContainer:
    def __init__(self) -> None:
        ref.reset_container()

    def get_container(self) -> object:
        return ref.get_container()


class _ReferenceRecovery:
    def __init__(self) -> None:
        self.service = ref.ErrorRecoveryService()

    def record_error(self, plan_id: str, message: str) -> None:
        self.service.record_error(plan_id, message)

    def error_count(self, plan_id: str) -> int:
        return self.service.error_count(plan_id)


REFERENCE = types.SimpleNamespace(
    memory=_ReferenceMemory,
    stream=_ReferenceStream,
    bus=_ReferenceBus,
    file_store=_ReferenceFileStore,
    container=_ReferenceContainer,
    recovery=_ReferenceRecovery,
)
"""The adapter of interlace.reference_impl: every component, and every model of the kit."""


def _models() -> dict[str, type[_ComponentMachine]]:
    models: dict[str, type[_ComponentMachine]] = {}
    for component, base in _MACHINES.items():
        # The model is the same machine on the reference: its rules, called one at a time,
        # are the specification, normalised exactly as the implementation's results are.
        models[component] = type(
            f"Reference{base.__name__}",
            (base,),
            {"implementation": staticmethod(getattr(REFERENCE, component)), "__module__": __name__},
        )
    return models


_REFERENCE_MODELS = _models()


def components(adapter: object) -> tuple[str, ...]:
    """The kit's components that ``adapter`` has a factory for, in :data:`COMPONENTS` order."""
    return tuple(name for name in COMPONENTS if getattr(adapter, name, None) is not None)


def _instrumented(factory: Callable[..., Any]) -> tuple[str, ...]:
    # The user's code is where the factory was written; threads get schedule points only in
    # code interlace instruments, and installed code outside the machine's package has none.
    # The kit's own factories (REFERENCE's) are written here, in code interlace runs as its
    # engine, which gets no points and must not be named.
    module = getattr(factory, "__module__", None)
    return (module,) if isinstance(module, str) and module not in ("builtins", __name__) else ()


def machine(
    adapter: object, component: str, *, name: str | None = None
) -> type[ConcurrentStateMachine]:
    """The concurrent state machine that checks ``adapter``'s ``component`` against the
    reference: its ``TestCase`` is a pytest/unittest test, as for any machine.

    Args:
        adapter: an object with a factory attribute per component (see the module docstring).
        component: one of :data:`COMPONENTS`.
        name: the machine class's name (default ``Conform<Component>``); Hypothesis keys its
            example database by it, so give adapters of different runtimes different names.

    Returns:
        A subclass of the component's machine whose implementation is ``adapter``'s factory
        and whose model is the reference.

    Raises:
        ValueError: ``component`` is not a component, ``adapter`` has no factory for it, or
            the factory is not callable.
    """
    if component not in _MACHINES:
        raise ValueError(
            _MSG_UNKNOWN_COMPONENT.format(component=component, names=", ".join(COMPONENTS))
        )
    factory = getattr(adapter, component, None)
    if factory is None:
        raise ValueError(_MSG_NOT_ADAPTED.format(adapter=adapter, component=component))
    if not callable(factory):
        raise ValueError(
            _MSG_NOT_CALLABLE.format(adapter=adapter, component=component, value=factory)
        )
    base = _MACHINES[component]
    title = "".join(part.capitalize() for part in component.split("_"))
    namespace = {
        "implementation": staticmethod(factory),
        "__module__": getattr(adapter, "__name__", None) or __name__,
    }
    cls: type[_ComponentMachine] = type(name or f"Conform{title}", (base,), namespace)
    cls.model = _REFERENCE_MODELS[component]
    cls.instrument = _instrumented(factory)
    return cls


@dataclasses.dataclass(frozen=True)
class ComponentVerdict:
    """What :func:`check` found for one component.

    Attributes:
        component: the component's name.
        conforms: True when no run of any example disagreed with the reference; False when one
            did; None when the adapter has no factory for it (not checked).
        examples: Hypothesis examples run, counting the shrinking ones.
        seconds: wall time for the component, shrinking included.
        scenario: the shrunk failing scenario, or None.
        report: the failure's report (the scenario in columns, the results, why no order of
            the reference explains them, the schedule and its replay token), or "".
    """

    component: str
    conforms: bool | None
    examples: int = 0
    seconds: float = 0.0
    scenario: Scenario | None = None
    report: str = ""

    def line(self) -> str:
        """The verdict as one line, as ``interlace conform`` prints it."""
        if self.conforms is None:
            return f"{self.component}: not checked (the adapter has no {self.component!r})"
        if self.conforms:
            return f"{self.component}: conforms ({self.examples} examples, {self.seconds:.1f} s)"
        calls = len(list(self.scenario.calls())) if self.scenario is not None else 0
        return (
            f"{self.component}: DOES NOT CONFORM (shrunk to {calls} calls; {self.examples} "
            f"examples, {self.seconds:.1f} s)"
        )


def _run(
    cls: type[ConcurrentStateMachine], settings: hypothesis_settings, random_seed: int
) -> tuple[int, NotLinearizableError | None]:
    """Run ``cls`` under ``settings``: the examples run, and the shrunk failure or None."""
    counter = itertools.count()

    @seed(random_seed)
    @settings
    @given(scenario=cls.scenarios())
    def run_machine(scenario: Scenario) -> None:
        next(counter)
        cls.check_scenario(scenario)

    try:
        run_machine()
    except NotLinearizableError as error:
        return next(counter), error
    return next(counter), None


def check(
    adapter: object,
    *,
    only: Sequence[str] | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    random_seed: int = 0,
    progress: Callable[[ComponentVerdict], None] | None = None,
) -> list[ComponentVerdict]:
    """Check every component ``adapter`` has a factory for against the reference.

    Each component runs its machine for ``max_examples`` Hypothesis examples (no example
    database, a fixed seed: the same verdicts every run), and a failing one is shrunk.

    Args:
        adapter: an object with a factory attribute per component (see the module docstring).
        only: the components to check (default: all of :data:`COMPONENTS`).
        max_examples: Hypothesis examples per component.
        random_seed: Hypothesis's seed.
        progress: called with each verdict as soon as it is known.

    Returns:
        One verdict per component, in :data:`COMPONENTS` order; those the adapter has no
        factory for say so (``conforms is None``).

    Raises:
        ValueError: ``only`` names an unknown component, or ``adapter`` has none of them.
    """
    names = tuple(only) if only is not None else COMPONENTS
    for name in names:
        if name not in _MACHINES:
            raise ValueError(
                _MSG_UNKNOWN_COMPONENT.format(component=name, names=", ".join(COMPONENTS))
            )
    adapted = components(adapter)
    if not any(name in adapted for name in names):
        raise ValueError(_MSG_NOTHING_ADAPTED.format(adapter=adapter, names=", ".join(names)))
    settings = hypothesis_settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=tuple(phase for phase in Phase if phase is not Phase.explain),
        print_blob=False,
    )
    verdicts: list[ComponentVerdict] = []
    for name in names:
        if name not in adapted:
            verdict = ComponentVerdict(name, None)
        else:
            start = time.perf_counter()
            examples, error = _run(machine(adapter, name), settings, random_seed)
            seconds = time.perf_counter() - start
            verdict = ComponentVerdict(
                name,
                error is None,
                examples,
                seconds,
                scenario=None if error is None else error.scenario,
                report="" if error is None else str(error),
            )
        verdicts.append(verdict)
        if progress is not None:
            progress(verdict)
    return verdicts
