"""Decisions, and the versioned replay token that carries them.

A schedule is stored sparsely: the backend takes the *stock* choice (index 0, what the stock
interpreter would run next) at every schedule point except the ones listed. Each listed
:class:`Decision` says at which step, of which kind, which option was taken, and which actor
that option was (so a replay can say precisely where it diverged).
"""

from __future__ import annotations

import base64
import binascii
import functools
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

from interlace.errors import ReplayTokenError

__all__ = (
    "ADDRESS",
    "READY",
    "STALL",
    "THREAD",
    "TIMER",
    "Decision",
    "DecisionLog",
    "Settings",
    "decode_token",
    "encode_token",
)

READY = 0
"""Decision kind: which ready task/callback runs next (option ``n`` = advance the clock)."""
TIMER = 1
"""Decision kind: which of the timers due within the jitter window (``max_stall``) fires first."""
THREAD = 2
"""Decision kind, in an ``async def`` run whose tasks started threads: which thread runs next
at a schedule point of the event loop's thread or of one of those threads (option 0 = the
running thread goes on). A plain-function run records its thread choices as ``READY``."""
STALL = 3
"""Decision kind: where the event loop would wait for its next timer, how late it wakes up
(option ``j`` = as late as the ``j``-th later deadline, so every timer due by then fires in
that one iteration). The decision's ``actor`` is the stall in microseconds (for the label)."""
ADDRESS = 4
"""Decision kind, at step 0: which order of object addresses the run's tasks and futures hash
in (option 0 = their creation order; see ``ControlledEventLoop.address_order``)."""

TOKEN_PREFIX = "il2."
"""Token format version 2 (loop stalls and address orders). Bump when the meaning of a
decision changes."""

_OLD_PREFIXES = {
    "il1.": (
        "it was made by an earlier interlace, whose model had a timer-jitter window but no "
        "loop stalls or address orders, so this version would misread its decisions"
    ),
}


class Decision(NamedTuple):
    """One non-stock choice: at ``step``, of ``kind``, option ``choice`` (actor ``actor``).

    A named tuple rather than a dataclass: a random walk deviates at most steps, and a
    backend can build a decision from a plain tuple with ``tuple.__new__(Decision, t)``.
    """

    step: int
    kind: int
    choice: int
    actor: int


_make_decision = functools.partial(tuple.__new__, Decision)


class DecisionLog(Sequence[Decision]):
    """A run's decisions, kept as the flat ints a backend recorded them in (step, kind,
    choice, actor, step, ...) and built into :class:`Decision` tuples only when first read.

    A random walk deviates at most of its thousands of steps, and most runs pass: nothing
    reads their decisions, so building them would be work (and garbage) for nothing. Equal
    to, and hashed like, the tuple of its decisions.

    Invariant: ``flat`` is not changed once the log is made (the run has ended).
    """

    __slots__ = ("_built", "_flat")

    def __init__(self, flat: Sequence[int]) -> None:
        self._flat = flat
        self._built: tuple[Decision, ...] | None = None

    def _decisions(self) -> tuple[Decision, ...]:
        built = self._built
        if built is None:
            fields = iter(self._flat)
            quads = zip(fields, fields, fields, fields, strict=True)
            built = self._built = tuple([_make_decision(quad) for quad in quads])
        return built

    def __len__(self) -> int:
        return len(self._flat) // 4

    @overload
    def __getitem__(self, index: int) -> Decision: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Decision, ...]: ...
    def __getitem__(self, index: int | slice) -> Decision | tuple[Decision, ...]:
        return self._decisions()[index]

    def __iter__(self) -> Iterator[Decision]:
        return iter(self._decisions())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DecisionLog):
            other = other._decisions()
        if isinstance(other, tuple):
            return self._decisions() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._decisions())

    def __repr__(self) -> str:
        return f"DecisionLog({self._decisions()!r})"


@dataclass(frozen=True, slots=True)
class Settings:
    """The model parameters that change which options exist at a schedule point.

    They travel inside the token, so a replay offers exactly the options the run had.

    Attributes:
        backend: ``"asyncio"`` or ``"threads"``.
        window: how many ready entries a decision may look past (bounds per-step cost).
        fairness: how many times in a row an entry may be postponed.
        stall_us: how long, in microseconds, the event loop may stall in one run, all stalls
            together (``max_stall``): where it would wait for its next timer it may wake up
            that much later, so timers due within the stall fire in one iteration. Also the
            timer-jitter window: a timer created earlier may fire before one created later
            whose deadline is within this of its own (0 disables both).
        time_slice: steps without clock movement after which the clock moves by as many
            microseconds (busy work takes time); in threads, also the switch interval.
        max_steps: the step budget (a run still going after it is a hang).
        max_time_us: the virtual-time budget in microseconds.
    """

    backend: str = "asyncio"
    window: int = 8
    fairness: int = 8
    stall_us: int = 50_000
    time_slice: int = 1_000
    max_steps: int = 200_000
    max_time_us: int = 3_600_000_000


_BACKENDS = ("asyncio", "threads")


def _put_varint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(value)
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _get_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(data):
            raise IndexError(pos)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def encode_token(settings: Settings, decisions: Sequence[Decision]) -> str:
    """Encode a schedule as a compact, copy-pasteable, versioned token."""
    out = bytearray()
    for number in (
        _BACKENDS.index(settings.backend),
        settings.window,
        settings.fairness,
        settings.stall_us,
        settings.time_slice,
        settings.max_steps,
        settings.max_time_us,
        len(decisions),
    ):
        _put_varint(out, number)
    previous = 0
    for decision in decisions:
        _put_varint(out, decision.step - previous)  # steps ascend: store gaps
        previous = decision.step
        _put_varint(out, decision.kind)
        _put_varint(out, decision.choice)
        _put_varint(out, decision.actor)
    packed = zlib.compress(bytes(out), 9)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode_token(token: str) -> tuple[Settings, tuple[Decision, ...]]:
    """Decode a token made by :func:`encode_token`.

    Raises:
        ReplayTokenError: the token is not a string, has another version, or is damaged.
    """
    if not isinstance(token, str):
        raise ReplayTokenError(
            f"a replay token is a str like '{TOKEN_PREFIX}eJ...', got "
            f"{type(token).__name__} {token!r}; copy the token from the failure report"
        )
    text = token.strip()
    for old, why in _OLD_PREFIXES.items():
        if text.startswith(old):
            raise ReplayTokenError(
                f"replay token {token!r} is a version-{old[2:-1]} token: {why}. Re-run the "
                "exploration with this version of interlace to get a new token"
            )
    if not text.startswith(TOKEN_PREFIX):
        version = text.split(".", 1)[0] if "." in text else text[:8]
        raise ReplayTokenError(
            f"replay token {token!r} does not start with {TOKEN_PREFIX!r} (found {version!r}): "
            "it was made by another version of interlace or is not a replay token; "
            "re-run the exploration with this version to get a new token"
        )
    body = text[len(TOKEN_PREFIX) :]
    problem = _text_problem(body)
    if problem is not None:
        raise ReplayTokenError(_damaged(token, problem))
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (ValueError, binascii.Error):
        raise ReplayTokenError(
            _damaged(token, "no token has its length: a character is missing or left over")
        ) from None
    try:
        data = zlib.decompress(packed)
    except zlib.error as exc:
        what = (
            "it ends too early: characters are missing at its end"
            if "incomplete" in str(exc) or "truncated" in str(exc)
            else "its characters do not unpack to a schedule: some were changed or left out"
        )
        raise ReplayTokenError(_damaged(token, what)) from None
    try:
        numbers: list[int] = []
        pos = 0
        for _ in range(8):
            value, pos = _get_varint(data, pos)
            numbers.append(value)
        backend, window, fairness, stall, time_slice, max_steps, max_time, count = numbers
        if backend >= len(_BACKENDS):
            raise ValueError("it names no backend this version knows")
        settings = Settings(
            _BACKENDS[backend], window, fairness, stall, time_slice, max_steps, max_time
        )
        decisions = []
        step = 0
        for _ in range(count):
            gap, pos = _get_varint(data, pos)
            kind, pos = _get_varint(data, pos)
            choice, pos = _get_varint(data, pos)
            actor, pos = _get_varint(data, pos)
            step += gap
            decisions.append(Decision(step, kind, choice, actor))
        if pos != len(data):
            raise ValueError("its schedule has data past its end")
    except IndexError:
        raise ReplayTokenError(_damaged(token, "its schedule stops in the middle")) from None
    except ValueError as exc:
        raise ReplayTokenError(_damaged(token, str(exc))) from None
    return settings, tuple(decisions)


_TOKEN_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _text_problem(body: str) -> str | None:
    """What is wrong with the characters after the prefix, if something visibly is."""
    if not body:
        return f"nothing follows {TOKEN_PREFIX!r}"
    for char in body:
        if char in _TOKEN_ALPHABET:
            continue
        if char.isspace():
            return "it contains whitespace: it was wrapped across lines when copied"
        return (
            f"it contains {char!r}, which no token contains (a token has letters, digits, "
            "'-' and '_' only)"
        )
    return None


def _damaged(token: str, problem: str) -> str:
    return (
        f"replay token {token!r} is damaged: {problem}. Copy the whole token, on one line, "
        "from the failure report"
    )


def address_order_text(order: int) -> str:
    """How a report names address order ``order`` (the harness's ``address_hash``)."""
    which = "about reverse creation order" if order == 1 else f"address order #{order}"
    return f"tasks and futures hashed in {which} (as their addresses may be on a stock run)"
