"""The reference file-backed agent memory: one JSON file per agent, thread and process safe."""

from __future__ import annotations

import asyncio
import copy
import fcntl
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Final

__all__ = (
    "AgentMemory",
    "MemoryEntry",
    "MemoryStoreCorruptError",
    "validate_agent_id",
    "validate_key",
)

_AGENT_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)
_KEY: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}", re.ASCII)
_FORMAT: Final = 1


class MemoryStoreCorruptError(ValueError):
    """An agent's memory file exists but is not a file this store wrote (bad JSON or shape)."""


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One stored value and its metadata.

    Args:
        value: The value, as JSON gives it back (tuples become lists, and so on).
        metadata: Free-form JSON metadata.
    """

    value: object
    metadata: Mapping[str, object] = field(default_factory=dict)


def validate_agent_id(agent_id: object) -> str:
    """Return ``agent_id`` if it is a safe file-name stem, else raise.

    Accepted: 1 to 64 characters from ``A-Z a-z 0-9 _ -``, matched against the *whole* string
    (``re.fullmatch``: ``re.match`` with ``$`` would accept a trailing newline).

    Raises:
        TypeError: ``agent_id`` is not a str.
        ValueError: ``agent_id`` has another character or length (separators, ``..``, NUL,
            non-ASCII, empty...); the message names the value.
    """
    if not isinstance(agent_id, str):
        raise TypeError(f"agent_id must be a str, got {type(agent_id).__name__}: {agent_id!r}")
    if _AGENT_ID.fullmatch(agent_id) is None:
        raise ValueError(
            f"invalid agent_id {agent_id!r}: agent ids name files, so they must be 1-64 "
            "characters from A-Z, a-z, 0-9, '_' and '-'; map other identifiers to a safe id "
            "(for example a hex digest) before using them"
        )
    return agent_id


def validate_key(key: object) -> str:
    """Return ``key`` if it is a valid memory key, else raise.

    Accepted: 1 to 128 characters from ``A-Z a-z 0-9 _ . : -``, starting with a letter or digit.

    Raises:
        TypeError: ``key`` is not a str.
        ValueError: ``key`` does not match; the message names the value.
    """
    if not isinstance(key, str):
        raise TypeError(f"memory key must be a str, got {type(key).__name__}: {key!r}")
    if _KEY.fullmatch(key) is None:
        raise ValueError(
            f"invalid memory key {key!r}: keys must be 1-128 characters from A-Z, a-z, 0-9, "
            "'_', '.', ':' and '-', starting with a letter or digit"
        )
    return key


@dataclass(frozen=True, slots=True)
class _Cached:
    """A parsed agent file. Invariant: ``fd`` stays open on the inode ``(dev, ino)`` while cached,
    so that inode number cannot be reused by a later file; files are never modified in place, so
    the path still naming ``(dev, ino)`` proves ``entries`` is current."""

    fd: int
    dev: int
    ino: int
    entries: Mapping[str, MemoryEntry]


class AgentMemory:
    """Key-value memory per agent, one JSON file per agent under ``base_path``.

    Guarantees:

    * **Read-modify-write is exclusive across threads and processes**: writers of one agent hold
      ``fcntl.flock(LOCK_EX)`` on ``.<agent_id>.lock`` for the whole read-modify-write.
    * **Crash-safe**: the new contents go to a temporary file in the same directory, which is
      flushed and fsynced, then ``os.replace``\\ d over the agent's file, and the directory is
      fsynced. A writer killed at any point leaves the previous valid file (plus, at worst, an
      orphan temporary file that the next writer of that agent removes).
    * **The cache is never stale**: a cached file is reused only while the path still names the
      same inode, and the cache keeps that inode open so its number cannot be recycled; a save
      by any process replaces the inode, so the next load re-reads the file.
    * **Bounded**: at most ``max_cache_size`` agent files are cached (least recently used
      evicted); each cached file holds one file descriptor until evicted or :meth:`close`.
    * **Strict names**: see :func:`validate_agent_id` and :func:`validate_key`.

    The ``*_sync`` methods block (file I/O, lock waits) and are safe to call from any thread.
    The async methods run them in a worker thread (``asyncio.to_thread``): they are schedule
    points, and cancelling one does not cancel the file operation, which completes or not at all.

    Args:
        base_path: The directory; created if missing.
        max_cache_size: Agent files to cache, 0 to disable caching.
        before_replace: Test hook called as ``before_replace(temp_path, target_path)`` after the
            temporary file is written and fsynced and before it replaces the target, with the
            agent's lock held (used to kill a writer mid-write deterministically).

    Raises:
        ValueError: ``max_cache_size`` is negative.
    """

    def __init__(
        self,
        base_path: str | os.PathLike[str],
        *,
        max_cache_size: int = 64,
        before_replace: Callable[[Path, Path], None] | None = None,
    ) -> None:
        if (
            isinstance(max_cache_size, bool)
            or not isinstance(max_cache_size, int)
            or max_cache_size < 0
        ):
            raise ValueError(
                f"max_cache_size must be an int >= 0 (0 disables the cache), got {max_cache_size!r}"
            )
        self.base_path = Path(base_path)
        self.base_path.mkdir(parents=True, exist_ok=True)
        self.max_cache_size = max_cache_size
        self._before_replace = before_replace
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[str, _Cached] = OrderedDict()

    def path_for(self, agent_id: str) -> Path:
        """Return the file that stores ``agent_id``'s memory.

        Raises:
            ValueError, TypeError: ``agent_id`` is invalid (see :func:`validate_agent_id`).
        """
        return self.base_path / f"{validate_agent_id(agent_id)}.json"

    def save_sync(
        self,
        agent_id: str,
        key: str,
        value: object,
        *,
        metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Store ``value`` under ``key`` for ``agent_id``, atomically and durably. Blocking.

        Raises:
            ValueError: Invalid ``agent_id`` or ``key``.
            TypeError: ``value`` or ``metadata`` is not JSON-serializable.
            MemoryStoreCorruptError: The existing file is not one this store wrote.
        """
        path = self.path_for(agent_id)
        validate_key(key)
        entry = _round_trip(agent_id, key, value, metadata)
        with self._agent_lock(agent_id):
            entries = dict(self._read(agent_id, path))
            entries[key] = entry
            self._write(agent_id, path, entries)

    def delete_sync(self, agent_id: str, key: str) -> bool:
        """Remove ``key`` for ``agent_id``; return whether it existed. Blocking.

        Raises:
            ValueError: Invalid ``agent_id`` or ``key``.
            MemoryStoreCorruptError: The existing file is not one this store wrote.
        """
        path = self.path_for(agent_id)
        validate_key(key)
        with self._agent_lock(agent_id):
            entries = dict(self._read(agent_id, path))
            if entries.pop(key, None) is None:
                return False
            self._write(agent_id, path, entries)
            return True

    def load_sync(self, agent_id: str, key: str, default: object = None) -> object:
        """Return a copy of the value stored under ``key``, or ``default``. Blocking (file I/O).

        Raises:
            ValueError: Invalid ``agent_id`` or ``key``.
            MemoryStoreCorruptError: The file is not one this store wrote.
        """
        path = self.path_for(agent_id)
        validate_key(key)
        entry = self._read(agent_id, path).get(key)
        return default if entry is None else copy.deepcopy(entry.value)

    def entries_sync(self, agent_id: str) -> dict[str, MemoryEntry]:
        """Return a copy of every entry of ``agent_id``, by key. Blocking (file I/O).

        Raises:
            ValueError: Invalid ``agent_id``.
            MemoryStoreCorruptError: The file is not one this store wrote.
        """
        return {
            key: MemoryEntry(copy.deepcopy(entry.value), copy.deepcopy(dict(entry.metadata)))
            for key, entry in self._read(agent_id, self.path_for(agent_id)).items()
        }

    async def save(
        self,
        agent_id: str,
        key: str,
        value: object,
        *,
        metadata: Mapping[str, object] | None = None,
    ) -> None:
        """:meth:`save_sync` in a worker thread. A schedule point."""
        await asyncio.to_thread(self.save_sync, agent_id, key, value, metadata=metadata)

    async def load(self, agent_id: str, key: str, default: object = None) -> object:
        """:meth:`load_sync` in a worker thread. A schedule point."""
        return await asyncio.to_thread(self.load_sync, agent_id, key, default)

    async def delete(self, agent_id: str, key: str) -> bool:
        """:meth:`delete_sync` in a worker thread. A schedule point."""
        return await asyncio.to_thread(self.delete_sync, agent_id, key)

    async def entries(self, agent_id: str) -> dict[str, MemoryEntry]:
        """:meth:`entries_sync` in a worker thread. A schedule point."""
        return await asyncio.to_thread(self.entries_sync, agent_id)

    def close(self) -> None:
        """Drop the cache and close its file descriptors; the store stays usable."""
        with self._cache_lock:
            cached = list(self._cache.values())
            self._cache.clear()
        for item in cached:
            os.close(item.fd)

    def __enter__(self) -> AgentMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _agent_lock(self, agent_id: str) -> Iterator[None]:
        # flock locks belong to the open file description, so each holder opens the lock file
        # itself: this excludes other threads of this process as well as other processes. The
        # lock file is never deleted (deleting it would let two writers lock different inodes).
        fd = os.open(self.base_path / f".{agent_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._remove_orphans(agent_id)
            yield
        finally:
            os.close(fd)

    def _remove_orphans(self, agent_id: str) -> None:
        # Only a writer holding the agent's lock creates its temporary files, so under the lock
        # every one left over belongs to a writer that died.
        prefix = f".{agent_id}."
        with os.scandir(self.base_path) as scan:
            for item in scan:
                if item.name.startswith(prefix) and item.name.endswith(".tmp"):
                    with suppress(FileNotFoundError):
                        os.unlink(item.path)

    def _read(self, agent_id: str, path: Path) -> Mapping[str, MemoryEntry]:
        try:
            status = os.stat(path)
        except FileNotFoundError:
            self._evict(agent_id)
            return MappingProxyType({})
        with self._cache_lock:
            cached = self._cache.get(agent_id)
            if cached is not None and (cached.dev, cached.ino) == (status.st_dev, status.st_ino):
                self._cache.move_to_end(agent_id)
                return cached.entries
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return MappingProxyType({})
        try:
            opened = os.fstat(fd)
            with os.fdopen(os.dup(fd), "rb") as stream:
                raw = stream.read()
            entries = _parse(path, agent_id, raw)
        except BaseException:
            os.close(fd)
            raise
        self._install(agent_id, _Cached(fd, opened.st_dev, opened.st_ino, entries))
        return entries

    def _write(self, agent_id: str, path: Path, entries: Mapping[str, MemoryEntry]) -> None:
        document = {
            "format": _FORMAT,
            "agent_id": agent_id,
            "entries": {
                key: {"value": entry.value, "metadata": dict(entry.metadata)}
                for key, entry in sorted(entries.items())
            },
        }
        data = json.dumps(document, ensure_ascii=False, indent=1).encode()
        fd, temp_name = tempfile.mkstemp(prefix=f".{agent_id}.", suffix=".tmp", dir=self.base_path)
        temp = Path(temp_name)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
            if self._before_replace is not None:
                self._before_replace(temp, path)
            os.replace(temp, path)
        except BaseException:
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        try:
            directory = os.open(self.base_path, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
            opened = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        self._install(
            agent_id, _Cached(fd, opened.st_dev, opened.st_ino, MappingProxyType(dict(entries)))
        )

    def _install(self, agent_id: str, item: _Cached) -> None:
        closing: list[int] = []
        with self._cache_lock:
            if self.max_cache_size == 0:
                closing.append(item.fd)
            else:
                old = self._cache.pop(agent_id, None)
                if old is not None:
                    closing.append(old.fd)
                self._cache[agent_id] = item
                while len(self._cache) > self.max_cache_size:
                    closing.append(self._cache.popitem(last=False)[1].fd)
        for fd in closing:
            os.close(fd)

    def _evict(self, agent_id: str) -> None:
        with self._cache_lock:
            old = self._cache.pop(agent_id, None)
        if old is not None:
            os.close(old.fd)


def _round_trip(
    agent_id: str, key: str, value: object, metadata: Mapping[str, object] | None
) -> MemoryEntry:
    try:
        text = json.dumps({"value": value, "metadata": dict(metadata or {})}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"cannot store key {key!r} of agent {agent_id!r}: the value or metadata is not "
            f"JSON-serializable ({exc}); store str, int, float, bool, None, lists and dicts "
            "with str keys"
        ) from exc
    loaded = json.loads(text)
    return MemoryEntry(loaded["value"], MappingProxyType(loaded["metadata"]))


def _parse(path: Path, agent_id: str, raw: bytes) -> Mapping[str, MemoryEntry]:
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MemoryStoreCorruptError(
            f"{str(path)!r} is not valid JSON ({exc}); this store never leaves a partial file, "
            "so another program wrote it: restore it from a backup or delete it"
        ) from exc
    entries = document.get("entries") if isinstance(document, dict) else None
    if (
        not isinstance(entries, dict)
        or document.get("format") != _FORMAT
        or document.get("agent_id") != agent_id
        or not all(isinstance(item, dict) and "value" in item for item in entries.values())
    ):
        raise MemoryStoreCorruptError(
            f"{str(path)!r} is not a memory file of agent {agent_id!r} in format {_FORMAT}; "
            "restore it from a backup or delete it"
        )
    return MappingProxyType(
        {
            key: MemoryEntry(item["value"], MappingProxyType(dict(item.get("metadata") or {})))
            for key, item in entries.items()
        }
    )
