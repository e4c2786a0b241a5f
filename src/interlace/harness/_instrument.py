"""Schedule points inside the code under test: where a controlled thread may be preempted.

A thread may be preempted before every line of the code under test, and inside a line before
a write to shared state (an attribute, a subscript, a global, a closure cell) that follows a
read in the same line, so that ``self.count += 1`` can lose an update. Lock acquisitions the
scheduler must see before they happen (``with lock:`` and ``lock.acquire(...)`` on the C
locks of ``_thread``) are found in the bytecode and their lock is read back from the frame.

Code under test is every Python file outside the standard library, site-packages and
interlace's own engine, plus the top-level package of the explored function wherever it is
installed (``package_of_target``); ``instrument`` widens it by module or path prefix. Installed
code a controlled thread runs without points is named (``uninstrumented_module``), so that a
run that ran any never counts toward an exhausted space. On Python 3.12+
the points are ``sys.monitoring`` events enabled per code object (code outside the test pays
nothing); on 3.11 they come from ``sys.settrace``, with opcode events only on lines that need
a point inside the line.

Everything here is mechanism; what a point *does* belongs to the controller (``_threads``).
"""

from __future__ import annotations

import _weakrefset
import contextlib
import dis
import functools
import inspect
import itertools
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = (
    "UNKNOWN",
    "CallSite",
    "Plan",
    "Unknown",
    "check_instrument",
    "evaluate",
    "is_engine_file",
    "is_under_test",
    "package_of_target",
    "plan_for",
    "reader",
    "split_instrument",
    "uninstrumentable",
    "uninstrumented_module",
)

_STDLIB = os.path.normcase(os.path.realpath(sysconfig.get_paths()["stdlib"])) + os.sep
_PLATSTDLIB = os.path.normcase(os.path.realpath(sysconfig.get_paths()["platstdlib"])) + os.sep
_INTERLACE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_ENGINE_PACKAGES = ("harness", "_core", "linters")
# interlace.stateful runs the calls of a concurrent state machine: its bookkeeping (the
# results, the logical clock) is no code under test, and a point in it would only add steps.
# The conformance kit's machines are the same bookkeeping around the user's calls (its file
# store's cleanup included, which the garbage collector may run anywhere, the scheduler too).
_ENGINE_MODULES = (
    "errors",
    "__init__",
    "__main__",
    "cli",
    "stateful",
    "conformance",
    "conformance_cli",
    "_conformance_names",
)
ENGINE = tuple(
    os.path.normcase(os.path.join(_INTERLACE, part)) + os.sep for part in _ENGINE_PACKAGES
)
_ENGINE_FILES = tuple(
    os.path.normcase(os.path.join(_INTERLACE, name + ".py")) for name in _ENGINE_MODULES
)
"""interlace's own top-level modules (its lazy ``__getattr__`` runs inside explored steps)."""

_THREADING = (
    "{module} is {what} interlace's controlled threads are built on: its code runs inside "
    "interlace's scheduler (the primitives, a thread's start), where a schedule point would "
    "switch threads in the middle of interlace's own bookkeeping; its locks, conditions, "
    "events, semaphores and threads are controlled already: for a lock that a library takes, "
    "instrument that library instead (the module a report names)"
)
_SCHEDULER = (
    "{module}'s code runs inside interlace's scheduler (suppress(), contextmanager), where a "
    "schedule point would switch threads in the middle of interlace's own bookkeeping; leave "
    "it out: the context managers your code defines with it get schedule points already"
)
_ENGINE_REASON = (
    "{module} is interlace's own engine, which runs the schedule: a schedule point in it "
    "would switch threads in the middle of a scheduling decision; leave it out: the code it "
    "explores gets schedule points already"
)
_UNINSTRUMENTABLE = {
    "threading": _THREADING.replace("{what}", "what"),
    "_thread": _THREADING.replace("{what}", "part of threading, which"),
    # threading's set of threads: its callbacks run when a thread is collected, anywhere.
    "_weakrefset": _THREADING.replace("{what}", "part of threading, which"),
    "contextlib": _SCHEDULER,
}
"""The modules whose code runs inside the scheduler itself: never code under test.

``queue``, ``selectors`` and ``concurrent.futures`` are patched too, but their code runs in
the threads it serves, not inside the scheduler: instrumenting them works."""
_NEVER_UNDER_TEST = frozenset(
    os.path.normcase(os.path.realpath(module.__file__))
    for module in (threading, _weakrefset, contextlib)
    if module.__file__ is not None
)


# The ``instrument`` messages, shared by every source (marker, pytest option, environment,
# ini file, ``interlace explore``/``replay --instrument``) so that one value is accepted or
# refused the same way wherever it is written.
MSG_NOT_MODULES = (
    "{setting}={value!r} from {source} is not a list of module names or paths: write e.g. {example}"
)
MSG_NOT_INSTRUMENTABLE = (
    "{setting}={value!r} from {source} names {name!r}, which cannot be instrumented: {reason}"
)
TEXT_MODULES_EXAMPLE = "'mypackage,src/vendored/'"


def is_path(name: str) -> bool:
    """Whether the ``instrument`` value ``name`` is a path rather than a module name."""
    return "/" in name or os.sep in name or name.endswith(".py")


def is_module_or_path(name: str) -> bool:
    """A dotted module name, a path (``src/vendored/``, ``lib.py``) or a ``<string>`` name."""
    if is_path(name) or (name.startswith("<") and name.endswith(">")):
        return True
    return all(part.isidentifier() for part in name.split("."))


def split_instrument(text: str) -> list[str]:
    """The names in an ``instrument`` text: separated by commas or newlines, blanks dropped."""
    return [name.strip() for name in text.replace("\n", ",").split(",") if name.strip()]


def check_instrument(
    setting: str, value: object, source: str, names: object, *, example: str
) -> str | None:
    """What is wrong with the ``instrument`` names ``names`` (parsed from ``value``, which
    ``setting`` from ``source`` gave), as the message to show, or None when they are usable.

    ``example`` is what to write instead, in the syntax of the source.
    """
    if not isinstance(names, (list, tuple)) or not all(
        isinstance(name, str) and is_module_or_path(name) for name in names
    ):
        return MSG_NOT_MODULES.format(setting=setting, value=value, source=source, example=example)
    for name in names:
        reason = uninstrumentable(name)
        if reason is not None:
            return MSG_NOT_INSTRUMENTABLE.format(
                setting=setting, value=value, source=source, name=name, reason=reason
            )
    return None


def uninstrumentable(name: str) -> str | None:
    """Why the ``instrument`` value ``name`` (a module or a path) cannot be instrumented, or
    None when it can. The reason ends with what to do instead.

    The scheduler is built on these modules and runs their code itself, so they are never
    code under test (``is_under_test``): naming one would instrument nothing. Every source
    of ``instrument`` refuses them with this reason.
    """
    if os.sep in name or "/" in name or name.endswith(".py"):
        path = os.path.normcase(os.path.realpath(name))
        if path + os.sep in ENGINE or path.startswith(ENGINE) or path in _ENGINE_FILES:
            return _ENGINE_REASON.format(module=repr(name))
        if path in _NEVER_UNDER_TEST:
            module = os.path.splitext(os.path.basename(path))[0]
            return _UNINSTRUMENTABLE[module].format(module=module)
        return None
    parts = name.split(".")
    if parts[0] == "interlace" and (
        len(parts) == 1 or parts[1] in (*_ENGINE_PACKAGES, *_ENGINE_MODULES)
    ):
        return _ENGINE_REASON.format(module=".".join(parts[:2]))
    reason = _UNINSTRUMENTABLE.get(parts[0])
    return reason.format(module=parts[0]) if reason is not None else None


# Writes to state another thread may read: a point before them when the same line read first.
_WRITES = frozenset(
    {
        "STORE_ATTR",
        "STORE_SUBSCR",
        "STORE_SLICE",
        "STORE_GLOBAL",
        "STORE_DEREF",
        "STORE_NAME",
        "DELETE_ATTR",
        "DELETE_SUBSCR",
        "DELETE_GLOBAL",
        "DELETE_DEREF",
        "DELETE_NAME",
    }
)
# Instructions that touch only the frame's own locals and stack: no point is needed after them.
_LOCAL_ONLY = frozenset(
    {
        "CACHE",
        "COPY",
        "EXTENDED_ARG",
        "LOAD_CONST",
        "LOAD_FAST",
        "LOAD_FAST_CHECK",
        "LOAD_FAST_AND_CLEAR",
        "LOAD_FAST_LOAD_FAST",
        "LOAD_SMALL_INT",
        "NOP",
        "POP_TOP",
        "PUSH_NULL",
        "RESUME",
        "STORE_FAST",
        "STORE_FAST_LOAD_FAST",
        "STORE_FAST_STORE_FAST",
        "SWAP",
        "KW_NAMES",
        "PRECALL",
        "NOT_TAKEN",
    }
)
# Instructions after which control may go on elsewhere than the next instruction, other than
# by an exception: jumps, and leaving the frame (yield, await, return).
_LEAVES = frozenset(
    {*dis.hasjrel, *dis.hasjabs}
    | {
        dis.opmap[name]
        for name in ("YIELD_VALUE", "SEND", "RETURN_VALUE", "RETURN_CONST", "RETURN_GENERATOR")
        if name in dis.opmap
    }
)
_BASE_LOADS = frozenset(
    {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_CLOSURE"}
)
_SIMPLE_ARGS = frozenset(
    {"LOAD_CONST", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME"}
)
# Methods of the C locks whose call the controller must see before it happens.
LOCK_METHODS = frozenset({"acquire", "acquire_lock", "release", "release_lock", "__enter__"})


class Unknown(Exception):
    """A recipe could not be evaluated without side effects."""


UNKNOWN = Unknown()

Recipe = tuple[tuple[str, Any], ...]
"""A side-effect-free way to recompute a value from a frame: a base load, then attributes
(``("attr", name)``), or a bound lock method's receiver (``("self", method)``)."""


@dataclass(frozen=True, slots=True)
class CallSite:
    """A call of a lock method: ``receiver.method(args)``, readable back from the frame."""

    receiver: Recipe | None
    method: str
    args: tuple[Recipe, ...] | None
    """Positional then keyword argument recipes, or None when an argument is not simple."""
    kwnames: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """What the controller needs to know about one code object of the code under test.

    Attributes:
        inline: offsets of points inside a line (before a write that follows a read).
        withs: ``BEFORE_WITH`` offsets and the recipe of their context manager.
        calls: offsets of lock-method calls and how to read receiver and arguments.
        opcode_lines: lines holding any of the above (3.11 traces opcodes only there).
        offsets: every offset above. Invariant: ``inline | withs.keys() | calls.keys()``;
            stored, not computed, because every instruction event tests membership in it.
        line_last: the last of those offsets on each line of ``opcode_lines``; 3.11 traces
            a line's opcodes only from where the line is entered up to that offset.
        finals: the offsets that are some line's last (opcode tracing stops after them).
        with_readers: for each offset of ``withs``, its recipe made a reader
            (``reader``): evaluated at every ``with``, so made once.
        with_locals: the offsets of ``withs`` whose recipe is a plain local (``with
            lock:``, the usual case) and that local's name, to read with no call.
        lazy: for each line whose one point is an ``inline`` one reached through
            straight-line code (no jump, yield or return between where the line starts and
            the point), the line's first offset and the point: 3.11 counts such a point
            without tracing the line's opcodes while it needs no decision (``_threads``,
            ``_trace_local``).
        eager: for each line whose one point is a ``with`` of a plain local and that loads
            nothing else before it, the line's first offset and the point: 3.11 runs that
            point's work at the line's event (nothing can change in between) instead of
            tracing opcodes up to it.
    """

    inline: frozenset[int]
    withs: dict[int, Recipe]
    calls: dict[int, CallSite]
    opcode_lines: frozenset[int]
    offsets: frozenset[int]
    line_last: dict[int, int]
    finals: frozenset[int]
    with_readers: dict[int, Callable[[types.FrameType], Any]]
    with_locals: dict[int, str]
    lazy: dict[int, tuple[int, int]]
    eager: dict[int, tuple[int, int]]


def _plan(
    inline: frozenset[int],
    withs: dict[int, Recipe],
    calls: dict[int, CallSite],
    line_last: dict[int, int],
    lazy: dict[int, tuple[int, int]] | None = None,
    eager: dict[int, tuple[int, int]] | None = None,
) -> Plan:
    offsets = frozenset(inline | withs.keys() | calls.keys())
    lines = frozenset(line_last)
    finals = frozenset(line_last.values())
    readers = {offset: reader(recipe) for offset, recipe in withs.items()}
    plain = {
        offset: str(recipe[0][1])
        for offset, recipe in withs.items()
        if len(recipe) == 1 and recipe[0][0] == "local"
    }
    return Plan(
        inline,
        withs,
        calls,
        lines,
        offsets,
        line_last,
        finals,
        readers,
        plain,
        lazy or {},
        eager or {},
    )


_NO_PLAN = _plan(frozenset(), {}, {}, {})
_under_test: dict[str, bool] = {}
_plans: dict[int, tuple[types.CodeType, Plan | None]] = {}
"""Every code object's plan, once asked for, by ``id(code)`` with the code itself (which keeps
the id from being reused). By identity, not by value: code objects compare by their bytecode,
not their file, so the same function in two files (a module loaded twice, a vendored copy in
site-packages) would otherwise share one answer to "is this code under test"."""
_widen: tuple[str, ...] = ()
_outside: dict[str, str] = {}
"""Each file's ``uninstrumented_module`` answer, once asked for."""
_known: dict[
    tuple[str, ...],
    tuple[dict[str, bool], dict[int, tuple[types.CodeType, Plan | None]], dict[str, str]],
] = {(): (_under_test, _plans, _outside)}
"""The three caches above for each set of ``set_instrumented`` prefixes used so far: they
depend on it, and a process that alternates between sets (the conformance kit instruments
each adapter's own module) would otherwise plan every loaded code object again per session."""
_TEST_RUNNERS = frozenset(
    {
        "_pytest",
        "pytest",
        "pluggy",
        "hypothesis",
        "_hypothesis_globals",
        "_hypothesis_pytestplugin",
        "coverage",
        "pytest_timeout",
        "xdist",
        "execnet",
    }
)
"""Installed packages whose code runs inside a test without being the program's: what a test
calls to check it (``pytest.raises``, ``pytest.approx``), and what test tools run in whatever
thread is current (Hypothesis's garbage-collector callback, which times every collection;
coverage's and pytest-timeout's hooks). Their state is the test's, never the program's
shared state."""


def set_instrumented(prefixes: Sequence[str]) -> None:
    """Also place points in modules (``pkg``, ``pkg.sub``) or paths starting with these."""
    global _widen, _under_test, _plans, _outside
    normalized = tuple(sorted(set(prefixes)))
    if normalized != _widen:
        _widen = normalized
        caches = _known.get(normalized)
        if caches is None:
            caches = _known[normalized] = ({}, {}, {})
        _under_test, _plans, _outside = caches


def uninstrumented_module(filename: str) -> str:
    """The dotted name of the installed module in ``filename`` when its code gets no schedule
    points (``is_under_test`` is False) though it may be the program's: a module of
    site-packages (or dist-packages), neither the standard library, nor interlace's engine,
    nor a test runner's (``_TEST_RUNNERS``). "" for every other file.

    A controlled thread that runs such code runs it without schedule points, so the
    interleavings inside it go unexplored; naming the module tells the user what to add to
    ``instrument``. Cached: the 3.11 tracer asks at every call into a new code object, the
    3.12+ one at every call of such code.
    """
    known = _outside.get(filename)
    if known is None:
        known = "" if is_under_test(filename) else _installed_module(filename)
        _outside[filename] = known
    return known


def _installed_module(filename: str) -> str:
    """The dotted module name of a file of site-packages (or dist-packages) that is neither
    interlace's engine nor a test runner's, whatever ``instrument`` says; else ""."""
    if filename.startswith("<"):
        return ""
    path = os.path.normcase(os.path.realpath(filename))
    if path.startswith(ENGINE) or path in _ENGINE_FILES or path in _NEVER_UNDER_TEST:
        return ""
    parts = path.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker not in parts[:-1]:
            continue
        names = parts[len(parts) - parts[::-1].index(marker) :]
        names[-1] = os.path.splitext(names[-1])[0]
        if names[-1] == "__init__":
            names.pop()
        if names and names[0] not in _TEST_RUNNERS and all(n.isidentifier() for n in names):
            return ".".join(names)
        return ""
    return ""


def package_of_target(target: Any) -> str:
    """The top-level package of the module that defines ``target`` (through
    ``functools.partial``, bound methods and ``functools.wraps``) when that module is
    installed code without schedule points (``uninstrumented_module``); else "".

    The explored function's own package is the code under test, wherever pip put it: a
    ``pip install .`` (non-editable) of the project must explore what ``pip install -e .``
    does. The whole top-level package, not the one module: a scenario module drives code
    of its package's other modules, where the races are.
    """
    function = target
    for _ in range(100):  # a chain of wrappers, never a cycle
        if isinstance(function, functools.partial):
            function = function.func
        elif isinstance(function, types.MethodType):
            function = function.__func__
        elif getattr(function, "__wrapped__", None) is not None and not isinstance(function, type):
            function = function.__wrapped__
        else:
            break
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType):
        call = inspect.getattr_static(type(function), "__call__", None)  # a callable object
        code = getattr(call, "__code__", None)
        function = call
    module = getattr(function, "__module__", None)
    if not isinstance(code, types.CodeType) or not isinstance(module, str) or not module:
        return ""
    # Whatever the last session's ``instrument`` was: the answer must not depend on it.
    if not _installed_module(code.co_filename):
        return ""
    return module.split(".")[0]


def _widened(path: str) -> bool:
    for prefix in _widen:
        if os.sep in prefix or prefix.endswith(".py"):
            if path.startswith(os.path.normcase(os.path.realpath(prefix))):
                return True
            continue
        parts = prefix.split(".")
        needle = os.sep + os.sep.join(parts)
        if needle + os.sep in path or path.endswith(needle + ".py"):
            return True
    return False


@functools.cache
def is_engine_file(filename: str) -> bool:
    """True for the files of interlace's engine (``harness``, ``_core``, the linters and the
    top-level modules): never code under test, nor the program's."""
    path = os.path.normcase(os.path.realpath(filename))
    return path.startswith(ENGINE) or path in _ENGINE_FILES


def is_under_test(filename: str) -> bool:
    """True for files whose code gets schedule points (see the module docstring)."""
    known = _under_test.get(filename)
    if known is not None:
        return known
    if filename.startswith("<"):
        # Frozen modules, and code compiled from strings: dataclass and namedtuple methods
        # among it, which run inside the scheduler itself. Opt in with instrument=["<string>"].
        result = filename in _widen
    else:
        path = os.path.normcase(os.path.realpath(filename))
        # interlace's engine and the modules the scheduler runs are never code under test,
        # whatever ``instrument`` says (a package of the program named ``harness`` would
        # otherwise widen to interlace's own, by the path match of ``_widened``).
        never = path.startswith(ENGINE) or path in _ENGINE_FILES or path in _NEVER_UNDER_TEST
        library = (
            path.startswith((_STDLIB, _PLATSTDLIB))
            or "site-packages" in path.split(os.sep)
            or "dist-packages" in path.split(os.sep)
        )
        result = not never and (not library or _widened(path))
    _under_test[filename] = result
    return result


def plan_for(code: types.CodeType) -> Plan | None:
    """The code object's plan, or None when it is not code under test."""
    entry = _plans.get(id(code))
    if entry is not None:
        return entry[1]
    plan: Plan | None = None
    if is_under_test(code.co_filename):
        try:
            plan = make_plan(code)
        except Exception:  # never let our bytecode reading break the user's code
            plan = _NO_PLAN
    _plans[id(code)] = (code, plan)
    return plan


def _is_method_load(instr: dis.Instruction) -> bool:
    if instr.opname == "LOAD_METHOD":
        return True
    return (
        instr.opname == "LOAD_ATTR"
        and sys.version_info >= (3, 12)
        and instr.arg is not None
        and bool(instr.arg & 1)
    )


def _base(instr: dis.Instruction) -> tuple[str, Any] | None:
    if instr.opname not in _BASE_LOADS:
        return None
    name = instr.argval
    if instr.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
        return ("global" if instr.opname == "LOAD_GLOBAL" else "name", name)
    return ("local", name)


def _chain_ending_at(instrs: list[dis.Instruction], end: int) -> tuple[Recipe, int] | None:
    """The recipe of a ``name.attr.attr`` load chain whose last instruction is ``end``."""
    attrs: list[str] = []
    index = end
    while index >= 0 and instrs[index].opname == "LOAD_ATTR" and not _is_method_load(instrs[index]):
        attrs.append(str(instrs[index].argval))
        index -= 1
    if index < 0:
        return None
    base = _base(instrs[index])
    if base is None:
        base, index = _type_of(instrs, index)
        if base is None:
            return None
    return (base, *(("attr", a) for a in reversed(attrs))), index


def _type_of(instrs: list[dis.Instruction], call: int) -> tuple[tuple[str, Any] | None, int]:
    """``type(name)`` ending at ``call`` (``with type(self)._lock:``): its base and start."""
    if instrs[call].opname != "CALL" or instrs[call].arg != 1 or call < 2:
        return None, call
    j = call - 1
    if instrs[j].opname == "PRECALL":  # 3.11
        j -= 1
    inner = _base(instrs[j])
    callee = instrs[j - 1] if j >= 1 else None
    if (
        inner is None
        or callee is None
        or callee.opname not in ("LOAD_GLOBAL", "LOAD_NAME")
        or callee.argval != "type"
    ):
        return None, call
    return ("type", inner), j - 1


def _arg_recipe(instr: dis.Instruction) -> list[Recipe] | None:
    if instr.opname == "LOAD_CONST":
        return [(("const", instr.argval),)]
    if instr.opname == "LOAD_SMALL_INT":
        return [(("const", instr.argval),)]
    if instr.opname == "LOAD_FAST_LOAD_FAST":
        first, second = instr.argval
        return [(("local", first),), (("local", second),)]
    base = _base(instr)
    return [(base,)] if base is not None and instr.opname in _SIMPLE_ARGS else None


def _kwnames(code: types.CodeType, instr: dis.Instruction) -> tuple[str, ...]:
    value = instr.argval
    if not isinstance(value, tuple) and instr.arg is not None:
        value = code.co_consts[instr.arg]  # 3.11's dis leaves KW_NAMES unresolved
    return tuple(str(name) for name in value)


_STORES_FIRST = frozenset(
    {"STORE_FAST", "STORE_DEREF", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"}
)
"""Stores of a local, alone or fused with what follows (3.13), the local named first."""


def _callee_local(instr: dis.Instruction) -> tuple[str, Any] | None:
    """The local that ``instr`` loads last, as the callable of the call after it: a plain
    load, or the second half of one fused with the instruction before (3.13)."""
    if instr.opname in ("STORE_FAST_LOAD_FAST", "LOAD_FAST_LOAD_FAST"):
        return ("local", instr.argval[1])
    base = _base(instr)
    return base if base is not None and base[0] == "local" else None


def _bound_lock_methods(instrs: list[dis.Instruction]) -> dict[str, str]:
    """Locals assigned a lock method's bound form (``acquire = lock.acquire``, as pytest's
    assertion rewriting does for ``assert lock.acquire(timeout=1)``), with that method: each
    local whose every such assignment names the same method."""
    found: dict[str, set[str]] = {}
    for load, store in itertools.pairwise(instrs):
        if (
            load.opname == "LOAD_ATTR"
            and not _is_method_load(load)
            and load.argval in LOCK_METHODS
            and store.opname in _STORES_FIRST
        ):
            name = store.argval[0] if isinstance(store.argval, tuple) else store.argval
            found.setdefault(str(name), set()).add(str(load.argval))
    return {name: next(iter(methods)) for name, methods in found.items() if len(methods) == 1}


def _call_site(
    code: types.CodeType, instrs: list[dis.Instruction], index: int, bound: dict[str, str]
) -> CallSite | None:
    """Read ``receiver.method(args)`` backwards from the CALL at ``index``, if it is one, or
    a call of a local in ``bound`` (``_bound_lock_methods``), whose receiver is then read
    from the bound method itself."""
    call = instrs[index]
    argc = call.arg or 0
    kwnames: tuple[str, ...] = ()
    j = index - 1
    if call.opname == "CALL_KW" and j >= 0 and instrs[j].opname == "LOAD_CONST":
        kwnames = _kwnames(code, instrs[j])
        j -= 1
    while j >= 0 and instrs[j].opname in ("PRECALL", "KW_NAMES"):
        if instrs[j].opname == "KW_NAMES":
            kwnames = _kwnames(code, instrs[j])
        j -= 1
    args: list[Recipe] | None = []
    count = 0
    while count < argc and j >= 0:
        recipes = _arg_recipe(instrs[j])
        if recipes is None:
            args = None
            break
        assert args is not None
        args[:0] = recipes
        count += len(recipes)
        j -= 1
    if args is None:
        # Skip the arguments we cannot read to find the method load (a simple scan back).
        while j >= 0 and not _is_method_load(instrs[j]):
            if instrs[j].opname in ("CALL", "CALL_KW", "BEFORE_WITH") or instrs[j].starts_line:
                return None
            j -= 1
    if bound and args is not None:
        callee = j - 1 if j >= 1 and instrs[j].opname == "PUSH_NULL" else j  # 3.13: after it
        base = _callee_local(instrs[callee]) if callee >= 0 else None
        if base is not None and base[1] in bound:
            method = bound[base[1]]
            through: Recipe = (base, ("self", method))
            return CallSite(through, method, tuple(args), kwnames)
    if j < 0 or not _is_method_load(instrs[j]):
        return None
    method = str(instrs[j].argval)
    if method not in LOCK_METHODS:
        return None
    chain = _chain_ending_at(instrs, j - 1) if j >= 1 else None
    receiver = chain[0] if chain is not None else None
    return CallSite(receiver, method, tuple(args) if args is not None else None, kwnames)


def make_plan(code: types.CodeType) -> Plan:
    try:
        instrs = list(dis.get_instructions(code))
    except Exception:  # a code object dis cannot read: lines only
        return _NO_PLAN
    bound = _bound_lock_methods(instrs)
    inline: set[int] = set()
    withs: dict[int, Recipe] = {}
    calls: dict[int, CallSite] = {}
    line_last: dict[int, int] = {}
    points_on: dict[int, list[int]] = {}
    straight: dict[int, int] = {}  # an inline point's offset -> where its straight run starts
    read_in_line = False
    line = code.co_firstlineno
    plain_withs: dict[int, int] = {}  # a with's offset -> where its line's run starts
    run_start = 0  # where the current line's instructions start
    jumped = False  # whether control can leave them before the current instruction
    loads_only = True  # whether they only load locals (no call, no other read) so far
    for index, instr in enumerate(instrs):
        if instr.starts_line is not None and instr.starts_line is not False:
            read_in_line = False
            run_start, jumped, loads_only = instr.offset, False, True
            if sys.version_info >= (3, 13):
                line = instr.line_number or line
            else:
                line = int(instr.starts_line)
        name = instr.opname
        if name in _WRITES and read_in_line:
            inline.add(instr.offset)
            line_last[line] = instr.offset
            points_on.setdefault(line, []).append(instr.offset)
            if not jumped:
                straight[instr.offset] = run_start
        elif name == "BEFORE_WITH":
            chain = _chain_ending_at(instrs, index - 1) if index else None
            if chain is not None:
                withs[instr.offset] = chain[0]
                line_last[line] = instr.offset
                points_on.setdefault(line, []).append(instr.offset)
                if loads_only and len(chain[0]) == 1 and chain[0][0][0] == "local":
                    plain_withs[instr.offset] = run_start
        elif name in ("CALL", "CALL_KW"):
            site = _call_site(code, instrs, index, bound)
            if site is not None:
                calls[instr.offset] = site
                line_last[line] = instr.offset
                points_on.setdefault(line, []).append(instr.offset)
        if name not in _LOCAL_ONLY and name not in _WRITES:
            read_in_line = True
        if instr.opcode in _LEAVES:
            jumped = True
        if name not in _LOCAL_ONLY and name != "LOAD_DEREF":
            loads_only = False
    if not (inline or withs or calls):
        return _NO_PLAN
    lazy = {
        line: (straight[points[0]], points[0])
        for line, points in points_on.items()
        if len(points) == 1 and points[0] in straight
    }
    eager = {
        line: (plain_withs[points[0]], points[0])
        for line, points in points_on.items()
        if len(points) == 1 and points[0] in plain_withs
    }
    return _plan(frozenset(inline), withs, calls, line_last, lazy, eager)


_OBJECT_CLASS = vars(object)["__class__"]


def static_attr(obj: Any, name: str) -> Any:
    """``getattr`` without running user code: instance dict, slots, plain class attributes."""
    if isinstance(obj, types.ModuleType):
        try:
            return vars(obj)[name]
        except KeyError:
            raise UNKNOWN from None
    try:
        instance_dict = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        instance_dict = None
    mro = obj.__mro__ if isinstance(obj, type) else type(obj).__mro__
    found: Any = UNKNOWN
    for klass in mro:
        if name in vars(klass):
            found = vars(klass)[name]
            break
    if found is _OBJECT_CLASS:
        return type(obj)  # ``self.__class__``, unless a class redefines it (mocks do)
    if isinstance(obj, type):
        if found is UNKNOWN or hasattr(type(found), "__get__"):
            # Class attributes through descriptors (classmethod, property) may run code.
            if isinstance(found, (types.FunctionType, types.BuiltinFunctionType)):
                return found
            raise UNKNOWN
        return found
    descriptor = type(found)
    data_descriptor = found is not UNKNOWN and hasattr(descriptor, "__set__")
    if isinstance(instance_dict, dict) and name in instance_dict and not data_descriptor:
        return instance_dict[name]
    if found is UNKNOWN:
        raise UNKNOWN
    if isinstance(
        found,
        (types.MemberDescriptorType, types.MethodDescriptorType, types.FunctionType),
    ):
        return found.__get__(obj, type(obj))
    if hasattr(descriptor, "__get__"):
        raise UNKNOWN  # a property or custom descriptor: reading it may run code
    return found


def evaluate(recipe: Recipe, frame: types.FrameType) -> Any:
    """Recompute a recipe's value in ``frame`` without side effects, or raise ``Unknown``."""
    kind, name = recipe[0]
    value: Any
    if kind == "type":
        if frame.f_globals.get("type", type) is not type:
            raise UNKNOWN  # a module's own ``type``: calling it may run code
        value = type(evaluate((name,), frame))
    elif kind == "const":
        value = name
    elif kind == "local":
        local_vars = frame.f_locals
        if name not in local_vars:
            raise UNKNOWN
        value = local_vars[name]
    else:
        if name in frame.f_globals:
            value = frame.f_globals[name]
        elif kind == "name" and name in frame.f_locals:
            value = frame.f_locals[name]
        else:
            builtins = frame.f_builtins
            if name not in builtins:
                raise UNKNOWN
            value = builtins[name]
    for kind, attr in recipe[1:]:
        if kind == "self":
            # A lock's bound method (``_bound_lock_methods``): its ``__self__``, which
            # runs no code; anything else held in that local is no lock call.
            if type(value) is not types.BuiltinMethodType or value.__name__ != attr:
                raise UNKNOWN
            value = value.__self__
        else:
            value = static_attr(value, attr)
    return value


def reader(recipe: Recipe) -> Callable[[types.FrameType], Any]:
    """``evaluate`` for one recipe, made once: a plain local (``with lock:``) is read with
    no more than the frame's locals lookup, since every ``with`` in code under test pays it.
    """
    if len(recipe) == 1 and recipe[0][0] == "local":
        name = recipe[0][1]

        def read_local(frame: types.FrameType) -> Any:
            try:
                return frame.f_locals[name]
            except KeyError:
                raise UNKNOWN from None

        return read_local
    return lambda frame: evaluate(recipe, frame)


def user_frame(frame: types.FrameType | None) -> types.FrameType | None:
    """The innermost frame of code under test at or above ``frame``."""
    while frame is not None and not is_under_test(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


Callback = Callable[..., Any]
