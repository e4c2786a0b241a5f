"""Footprints of steps, and which earlier steps each step depends on.

A backend that can observe what a step touches describes it as a :class:`Footprint`: the
resource keys it read and the keys it wrote. A key is a tuple that names a resource from
the general to the particular, e.g. ``("attr", "balance", 140231)`` (attribute ``balance``
of object 140231). A shorter key stands for everything it is a prefix of:
``("attr", "balance")`` is attribute ``balance`` of any object, ``("attr",)`` any attribute,
used when the backend cannot tell which one was touched. ``None`` instead of a footprint
means the step may have touched anything.

Two steps are *dependent* when one writes a key the other reads or writes and one of the
two keys is a prefix of the other, or either footprint is ``None``. Footprints must
over-approximate: when in doubt, a backend reports more, never less. Two runs that execute
the same steps with every dependent pair in the same order end in the same state, which is
what partial-order reduction relies on.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

__all__ = ("Footprint", "dependent", "predecessors")

Key = tuple[Hashable, ...]
_ROOT: Key = ()


@dataclass(frozen=True, slots=True)
class Footprint:
    """What one step read and wrote (see the module docstring for keys and prefixes)."""

    reads: frozenset[Key]
    writes: frozenset[Key]


_EVERYTHING = Footprint(frozenset(), frozenset({_ROOT}))


def predecessors(footprints: Sequence[Footprint | None]) -> list[tuple[int, ...]]:
    """For each step, earlier steps it depends on, enough to order every dependent pair.

    If another sequence of the same steps runs every step after all of its predecessors
    listed here, then every pair of dependent steps runs in the same order as in
    ``footprints``: each such pair is linked by a chain of listed edges. The lists may hold
    more than the immediate predecessors, which only makes a reordering check stricter.

    Per key it keeps the last write and the reads since, exactly at that key and below it
    (under a longer key it prefixes). A write at a key supersedes what was below it: any
    later access that conflicts with those also conflicts with the write, so the chain
    passes through it.
    """
    last_write: dict[Key, int] = {}
    reads_at: dict[Key, list[int]] = {}
    writes_below: dict[Key, list[int]] = {}
    reads_below: dict[Key, list[int]] = {}
    # The root key (everything) is kept apart: a step that touches everything depends on
    # every step since the last such step, and every step depends on the last one.
    last_everything = -1
    since_everything: list[int] = []
    writes_since_everything: list[int] = []
    result: list[tuple[int, ...]] = []
    for index, footprint in enumerate(footprints):
        if footprint is None or _ROOT in footprint.writes:
            before = set(since_everything)
            if last_everything >= 0:
                before.add(last_everything)
            last_everything = index
            since_everything = []
            writes_since_everything = []
            last_write.clear()
            reads_at.clear()
            writes_below.clear()
            reads_below.clear()
            result.append(tuple(sorted(before)))
            continue
        before = {last_everything} if last_everything >= 0 else set()
        since_everything.append(index)
        for key in footprint.reads:
            for size in range(1, len(key) + 1):
                writer = last_write.get(key[:size])
                if writer is not None:
                    before.add(writer)
            below = writes_since_everything if key == _ROOT else writes_below.get(key)
            if below:
                before.update(below)
        for key in footprint.writes:
            before.update(reads_at.get(_ROOT, ()))
            for size in range(1, len(key) + 1):
                prefix = key[:size]
                writer = last_write.get(prefix)
                if writer is not None:
                    before.add(writer)
                readers = reads_at.get(prefix)
                if readers:
                    before.update(readers)
            below = writes_below.get(key)
            if below:
                before.update(below)
            below = reads_below.get(key)
            if below:
                before.update(below)
        for key in footprint.reads:
            reads_at.setdefault(key, []).append(index)
            for size in range(1, len(key)):
                reads_below.setdefault(key[:size], []).append(index)
        if footprint.writes:
            writes_since_everything.append(index)
        for key in footprint.writes:
            last_write[key] = index
            reads_at[key] = []
            writes_below[key] = []
            reads_below[key] = []
            for size in range(1, len(key)):
                writes_below.setdefault(key[:size], []).append(index)
        before.discard(index)
        result.append(tuple(sorted(before)))
    return result


def dependent(first: Footprint | None, second: Footprint | None) -> bool:
    """Whether two steps with these footprints are dependent (for tests and reports)."""
    if first is None or second is None:
        return True
    return _conflict(first.writes, second.reads | second.writes) or _conflict(
        second.writes, first.reads
    )


def _conflict(writes: frozenset[Key], touched: frozenset[Key]) -> bool:
    for key in writes:
        for other in touched:
            size = min(len(key), len(other))
            if key[:size] == other[:size]:
                return True
    return False
