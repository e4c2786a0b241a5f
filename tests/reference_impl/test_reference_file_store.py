"""The file-backed agent memory: atomic, crash-safe, never stale, strict about names."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import signal
import tempfile
import threading
from pathlib import Path

import _refimpl_workers as workers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlace.reference_impl import (
    AgentMemory,
    MemoryEntry,
    MemoryStoreCorruptError,
    validate_agent_id,
    validate_key,
)

SEPARATORS = ["/", "\\", "\x00", "\n", "\u2215", "\u2044", "\uff0f", "\u29f8", "\u0000", ":", " "]
TRAVERSALS = [
    "",
    ".",
    "..",
    "../x",
    "..\\x",
    "/etc/passwd",
    "a/../../b",
    "agent\n",
    "agent\x00",
    "C:\\Windows",
    "ａgent",
    "a" * 65,
]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_values_round_trip_through_json(tmp_path: Path) -> None:
    with AgentMemory(tmp_path) as memory:
        memory.save_sync(
            "agent-1", "profile", {"name": "Ada", "tags": ("a", "b")}, metadata={"v": 2}
        )
        assert memory.load_sync("agent-1", "profile") == {"name": "Ada", "tags": ["a", "b"]}
        assert memory.entries_sync("agent-1") == {
            "profile": MemoryEntry({"name": "Ada", "tags": ["a", "b"]}, {"v": 2})
        }
        assert memory.load_sync("agent-1", "missing", default="d") == "d"
        assert memory.delete_sync("agent-1", "profile") is True
        assert memory.delete_sync("agent-1", "profile") is False
        assert memory.entries_sync("agent-1") == {}


def test_loaded_values_are_copies(tmp_path: Path) -> None:
    with AgentMemory(tmp_path) as memory:
        memory.save_sync("a", "list", [1, 2])
        loaded = memory.load_sync("a", "list")
        assert isinstance(loaded, list)
        loaded.append(3)
        assert memory.load_sync("a", "list") == [1, 2]


def test_the_async_api_runs_in_worker_threads(tmp_path: Path) -> None:
    async def main() -> None:
        with AgentMemory(tmp_path) as memory:
            await asyncio.gather(*(memory.save("a", f"k{i}", i) for i in range(10)))
            assert await memory.load("a", "k3") == 3
            assert await memory.delete("a", "k3") is True
            assert sorted(await memory.entries("a")) == sorted(f"k{i}" for i in range(10) if i != 3)

    asyncio.run(main())


def test_threads_writing_different_keys_lose_none(tmp_path: Path) -> None:
    barrier = threading.Barrier(6)

    def write(worker: int) -> None:
        with AgentMemory(tmp_path) as memory:
            barrier.wait()
            for i in range(15):
                memory.save_sync("shared", f"t{worker}-{i}", i)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with AgentMemory(tmp_path) as memory:
        assert memory.entries_sync("shared").keys() == {
            f"t{w}-{i}" for w in range(6) for i in range(15)
        }


def test_processes_writing_different_keys_lose_none(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=workers.write_keys, args=(str(tmp_path), "shared", f"p{n}", 15))
        for n in range(3)
    ]
    with AgentMemory(tmp_path) as memory:
        memory.save_sync("shared", "before", 0)
        assert memory.load_sync("shared", "before") == 0
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=60)
            assert process.exitcode == 0
        assert memory.entries_sync("shared").keys() == {"before"} | {
            f"p{n}-{i}" for n in range(3) for i in range(15)
        }


def test_a_writer_killed_mid_write_leaves_the_previous_valid_file(tmp_path: Path) -> None:
    with AgentMemory(tmp_path) as memory:
        memory.save_sync("victim", "doc", "old")
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    big = "x" * 2_000_000
    child = context.Process(
        target=workers.write_and_hang_before_replace,
        args=(str(tmp_path), "victim", "doc", big, ready),
    )
    child.start()
    try:
        assert ready.wait(timeout=60)
        temps = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert len(temps) == 1
        assert (tmp_path / temps[0]).stat().st_size > 2_000_000
    finally:
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    document = json.loads((tmp_path / "victim.json").read_text())
    assert document["entries"] == {"doc": {"value": "old", "metadata": {}}}
    with AgentMemory(tmp_path) as memory:
        assert memory.load_sync("victim", "doc") == "old"
        memory.save_sync("victim", "doc", "new")
        assert memory.load_sync("victim", "doc") == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".victim.lock", "victim.json"]


def test_a_cached_value_is_never_stale_after_another_instance_saves(tmp_path: Path) -> None:
    with AgentMemory(tmp_path) as reader, AgentMemory(tmp_path) as writer:
        for i in range(100):
            value = f"v{i:04d}"
            writer.save_sync("a", "k", value)
            assert reader.load_sync("a", "k") == value


def test_a_cached_value_is_never_stale_after_another_process_saves(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    with AgentMemory(tmp_path) as memory:
        memory.save_sync("a", "w-0", "mine")
        assert memory.entries_sync("a").keys() == {"w-0"}
        child = context.Process(target=workers.write_keys, args=(str(tmp_path), "a", "w", 3))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
        assert memory.load_sync("a", "w-0") == {"writer": "w", "i": 0}
        assert memory.entries_sync("a").keys() == {"w-0", "w-1", "w-2"}


def test_the_cache_is_bounded_and_close_releases_it(tmp_path: Path) -> None:
    before = _open_fds()
    memory = AgentMemory(tmp_path, max_cache_size=2)
    for agent in ["a", "b", "c", "d"]:
        memory.save_sync(agent, "k", agent)
        assert memory.load_sync(agent, "k") == agent
    assert _open_fds() - before == 2
    memory.close()
    assert _open_fds() == before
    assert memory.load_sync("a", "k") == "a"
    memory.close()


def test_a_disabled_cache_holds_no_descriptor(tmp_path: Path) -> None:
    before = _open_fds()
    memory = AgentMemory(tmp_path, max_cache_size=0)
    memory.save_sync("a", "k", 1)
    assert memory.load_sync("a", "k") == 1
    assert _open_fds() == before


def test_non_json_values_are_refused_with_the_key_named(tmp_path: Path) -> None:
    with AgentMemory(tmp_path) as memory:
        with pytest.raises(TypeError, match=r"cannot store key 'k' of agent 'a': .*not JSON"):
            memory.save_sync("a", "k", {1, 2})
        with pytest.raises(TypeError, match=r"cannot store key 'k' of agent 'a'"):
            memory.save_sync("a", "k", float("nan"))
        assert memory.entries_sync("a") == {}


@pytest.mark.parametrize(
    "content", [b"{not json", b"[]", b'{"format": 1, "agent_id": "other", "entries": {}}']
)
def test_a_foreign_file_is_reported_not_overwritten(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "a.json").write_bytes(content)
    with AgentMemory(tmp_path) as memory:
        with pytest.raises(MemoryStoreCorruptError, match=r"a\.json'? is not"):
            memory.load_sync("a", "k")
        with pytest.raises(MemoryStoreCorruptError):
            memory.save_sync("a", "k", 1)
    assert (tmp_path / "a.json").read_bytes() == content


def test_max_cache_size_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"max_cache_size must be an int >= 0 .*got -1"):
        AgentMemory(tmp_path, max_cache_size=-1)


def _looks_like_an_id(text: str) -> bool:
    return 0 < len(text) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in text)


def _looks_like_a_key(text: str) -> bool:
    return (
        0 < len(text) <= 128
        and text.isascii()
        and text[0].isalnum()
        and all(c.isalnum() or c in "_.:-" for c in text)
    )


def _traversal_attempts() -> st.SearchStrategy[str]:
    joined = st.builds(
        lambda head, sep, tail: head + sep + tail,
        st.sampled_from(["", ".", "..", "a", "agent"]),
        st.sampled_from(SEPARATORS),
        st.sampled_from(["", ".", "..", "etc", "passwd", "x"]),
    )
    free = st.text(min_size=0, max_size=80).filter(lambda s: not _looks_like_an_id(s))
    return st.one_of(st.sampled_from(TRAVERSALS), joined, free)


@settings(max_examples=300, deadline=None)
@given(_traversal_attempts())
def test_unsafe_agent_ids_are_rejected_naming_the_value(agent_id: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"invalid agent_id {agent_id!r}:")):
        validate_agent_id(agent_id)


@settings(max_examples=300, deadline=None)
@given(_traversal_attempts().filter(lambda s: not _looks_like_a_key(s)))
def test_unsafe_keys_are_rejected_naming_the_value(key: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"invalid memory key {key!r}:")):
        validate_key(key)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abcXYZ019_-", min_size=1, max_size=64))
def test_safe_agent_ids_map_to_a_file_directly_under_the_base(agent_id: str) -> None:
    with tempfile.TemporaryDirectory() as base, AgentMemory(base) as memory:
        path = memory.path_for(agent_id)
        assert path.parent == Path(base)
        assert path.name == f"{agent_id}.json"


def test_saving_under_an_unsafe_id_touches_no_file(tmp_path: Path) -> None:
    with AgentMemory(tmp_path / "store") as memory:
        for agent_id in TRAVERSALS:
            with pytest.raises(ValueError, match="invalid agent_id"):
                memory.save_sync(agent_id, "k", 1)
    assert list(tmp_path.rglob("*")) == [tmp_path / "store"]


def test_a_non_string_id_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"agent_id must be a str, got int: 3"):
        validate_agent_id(3)
