"""The reference dependency-injection container, with thread-safe lazy singletons."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, TypeVar, overload

__all__ = (
    "Container",
    "DependencyCycleError",
    "get_container",
    "reset_container",
)

T = TypeVar("T")
ServiceKey = type | str

_MISSING: Final = object()


class DependencyCycleError(RuntimeError):
    """A singleton's factory (directly or indirectly) resolved that same singleton."""


class Container:
    """A registry of services: singletons (lazy, created once), factories and instances.

    Lazy singletons are thread-safe: the first ``resolve`` of a singleton takes the container's
    creation lock and checks again whether another thread created it meanwhile, so a singleton's
    factory is called exactly once even when many threads resolve it at the same moment; the
    instance is published only after its factory returned. Resolving an existing singleton takes
    no lock (a dict lookup is atomic). Singleton factories run one at a time per container (one
    reentrant creation lock): that serialises creation but cannot deadlock, and a factory that
    resolves its own service raises :class:`DependencyCycleError` instead of hanging. A factory
    that raises creates nothing; the next ``resolve`` calls it again.

    Calls never await; ``resolve`` of a new singleton blocks while another thread creates one.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()
        self._singletons: dict[ServiceKey, Callable[[], object]] = {}
        self._factories: dict[ServiceKey, Callable[[], object]] = {}
        self._instances: dict[ServiceKey, object] = {}

    def register_singleton(self, key: ServiceKey, factory: Callable[[], object]) -> None:
        """Register ``factory`` to create ``key``'s single instance on first resolve.

        Raises:
            ValueError: ``key`` is already registered.
        """
        self._register(key, factory, self._singletons)

    def register_factory(self, key: ServiceKey, factory: Callable[[], object]) -> None:
        """Register ``factory`` to create a new instance of ``key`` on every resolve.

        Raises:
            ValueError: ``key`` is already registered.
        """
        self._register(key, factory, self._factories)

    def register_instance(self, key: ServiceKey, instance: object) -> None:
        """Register an existing ``instance`` for ``key``.

        Raises:
            ValueError: ``key`` is already registered.
        """
        with self._lock:
            self._check_free(key)
            self._instances[key] = instance

    def is_registered(self, key: ServiceKey) -> bool:
        """Whether ``key`` has a registration of any kind."""
        with self._lock:
            return key in self._singletons or key in self._factories or key in self._instances

    @overload
    def resolve(self, key: type[T]) -> T: ...

    @overload
    def resolve(self, key: str) -> object: ...

    def resolve(self, key: ServiceKey) -> object:
        """Return the service registered for ``key``.

        Blocking only while another thread creates a singleton; never a schedule point for
        asyncio.

        Raises:
            KeyError: Nothing is registered for ``key``.
            DependencyCycleError: Creating the singleton needs the singleton itself.
        """
        instance = self._instances.get(key, _MISSING)
        if instance is not _MISSING:
            return instance
        factory = self._factories.get(key)
        if factory is not None:
            return factory()
        with self._lock:
            instance = self._instances.get(key, _MISSING)
            if instance is not _MISSING:
                return instance
            singleton = self._singletons.get(key)
            if singleton is None:
                factory = self._factories.get(key)
                if factory is not None:
                    return factory()
                raise KeyError(
                    f"no service registered for {_name(key)}; register it with "
                    "register_singleton(), register_factory() or register_instance()"
                )
            creating: list[ServiceKey] = self._local.__dict__.setdefault("creating", [])
            if key in creating:
                chain = " -> ".join(_name(item) for item in [*creating, key])
                raise DependencyCycleError(f"singleton dependency cycle: {chain}")
            creating.append(key)
            try:
                instance = singleton()
            finally:
                creating.pop()
            self._instances[key] = instance
            return instance

    def get(self, key: type[T]) -> T:
        """Typed :meth:`resolve` for class keys: also checks the instance's type.

        Raises:
            KeyError: Nothing is registered for ``key``.
            TypeError: The registered service is not an instance of ``key``.
        """
        instance = self.resolve(key)
        if not isinstance(instance, key):
            raise TypeError(
                f"service registered for {_name(key)} is {instance!r}, not an instance of it"
            )
        return instance

    def _register(
        self,
        key: ServiceKey,
        factory: Callable[[], object],
        table: dict[ServiceKey, Callable[[], object]],
    ) -> None:
        if not callable(factory):
            raise TypeError(f"factory for {_name(key)} must be callable, got {factory!r}")
        with self._lock:
            self._check_free(key)
            table[key] = factory

    def _check_free(self, key: ServiceKey) -> None:
        if key in self._singletons or key in self._factories or key in self._instances:
            raise ValueError(
                f"{_name(key)} is already registered; use a new Container to replace services"
            )


def _name(key: ServiceKey) -> str:
    return key.__qualname__ if isinstance(key, type) else repr(key)


_container: Container | None = None
_container_lock = threading.Lock()


def get_container() -> Container:
    """Return the process-wide container, creating it on first use (thread-safe).

    The check and the creation happen under one lock, so every thread gets the same instance.
    """
    global _container
    with _container_lock:
        if _container is None:
            _container = Container()
        return _container


def reset_container() -> None:
    """Forget the process-wide container (tests use this between cases); thread-safe."""
    global _container
    with _container_lock:
        _container = None
