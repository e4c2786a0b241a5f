"""What each step of a run reads and writes, recorded with ``sys.monitoring`` (3.12+).

Only the exhaustive search asks for footprints (partial-order reduction); every other run
pays nothing. The recording over-approximates, so two steps it calls independent really
commute:

* Python code (the target, libraries, asyncio's own Python code; not interlace and not the
  event loop's plumbing in ``asyncio.events``/``asyncio.base_events``, whose effects the loop
  records itself) is summarized per line from its bytecode, and a step gets the summary of
  every line it executes: attributes read and written (keyed by name, whatever the object),
  globals and closure variables (by name), and container operations. A subscript store or
  an in-place operator resolves its container from the frame when the operand is a plain
  variable or ``variable.attribute`` (keyed by the object's identity, nothing for an
  immutable value), else it counts as a write to every container. Reading a container's
  contents in C (comparisons, truth tests, ``in``, iteration, unpacking, formatting,
  arithmetic) counts as a read of every container.
* Calls into C are seen at the call: methods of builtin containers read or write their
  receiver; future and task methods, locks and context variables likewise; builtins and
  known module functions as they behave; any other C callable, and any opcode the summary
  does not know, touches everything.

What this does not see, and assumes: C code reached without a call instruction other than
through the dunder methods of builtin containers (a C extension type's ``__eq__`` with side
effects), iterating an iterator object shared between tasks, finalizers, and C attribute
getters with side effects.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import dis
import functools
import inspect
import os
import sys
import threading
import types
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

__all__ = ("AVAILABLE", "StepAccess", "Tracer", "classify_call")

_MONITORING: Any = getattr(sys, "monitoring", None)  # 3.12+
AVAILABLE = _MONITORING is not None
"""Footprints need ``sys.monitoring``: on 3.11 the exhaustive search runs unreduced."""

Key = tuple[Hashable, ...]
WILD_OBJ: Key = ("obj",)
WILD_ATTR: Key = ("attr",)
WILD_FUTURE: Key = ("fut",)
IO: Key = ("io",)

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ASYNCIO = os.path.dirname(os.path.abspath(asyncio.__file__))
_EXCLUDED_FILES = (
    os.path.join(_ASYNCIO, "events.py"),
    os.path.join(_ASYNCIO, "base_events.py"),
)


def _excluded(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_HERE + os.sep) or path in _EXCLUDED_FILES


class StepAccess:
    """The keys one step read and wrote so far; ``everything`` once it may touch anything.

    ``keep`` holds the objects whose identities were recorded, so that no identity is
    reused by another object while the run goes on.
    """

    __slots__ = ("everything", "keep", "reads", "writes")

    def __init__(self) -> None:
        self.reads: set[Key] = set()
        self.writes: set[Key] = set()
        self.everything = False
        self.keep: list[object] = []

    def read_obj(self, obj: object) -> None:
        self.keep.append(obj)
        self.reads.add(("obj", id(obj)))

    def write_obj(self, obj: object) -> None:
        self.keep.append(obj)
        self.writes.add(("obj", id(obj)))

    def read_future(self, future: object) -> None:
        self.keep.append(future)
        self.reads.add(("fut", id(future)))

    def write_future(self, future: object) -> None:
        self.keep.append(future)
        self.writes.add(("fut", id(future)))


# -- calls into C ------------------------------------------------------------------------

_IMMUTABLE = frozenset(
    {int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range, type}
)
_CONTAINERS = (list, dict, set, bytearray, collections.deque)
_CONTAINER_READS = frozenset(
    {
        "get", "keys", "values", "items", "copy", "index", "count", "__len__", "__getitem__",
        "__contains__", "__iter__", "__reversed__", "issubset", "issuperset", "isdisjoint",
        "union", "intersection", "difference", "symmetric_difference", "__eq__", "__ne__",
        "__lt__", "__le__", "__gt__", "__ge__", "__repr__", "__sizeof__", "fromkeys",
        "__or__", "__and__", "__sub__", "__xor__", "__add__", "__mul__", "__format__",
        "__reduce__", "__reduce_ex__", "__hash__", "__bool__", "__getattribute__", "hex",
        "decode", "startswith", "endswith", "find", "rfind",
    }
)  # fmt: skip
_ELEMENT_READS = frozenset(
    {
        "index", "count", "remove", "__contains__", "extend", "update", "sort", "__eq__",
        "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__repr__", "__format__", "union",
        "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
        "isdisjoint", "difference_update", "intersection_update", "symmetric_difference_update",
        "__iadd__", "__ior__", "__iand__", "__isub__", "__ixor__", "__add__", "__or__",
        "__and__", "__sub__", "__xor__", "join", "format", "format_map", "__init__",
    }
)  # fmt: skip
"""Methods that read their arguments' contents or compare elements (which may be
containers themselves): they read every container."""
_FUTURE_READS = frozenset(
    {
        "done", "cancelled", "result", "exception", "get_loop", "get_name", "get_coro",
        "get_context", "cancelling", "get_stack", "print_stack", "__repr__", "__hash__",
        "__eq__", "__ne__", "__getattribute__",
    }
)  # fmt: skip
_NO_ACCESS_BUILTINS = frozenset(
    {
        "isinstance", "issubclass", "id", "callable", "hash", "chr", "ord", "abs", "round",
        "divmod", "pow", "bin", "oct", "hex", "globals", "locals", "__build_class__",
        "__import__", "compile",
    }
)  # fmt: skip
_READ_ARG_BUILTINS = frozenset({"len", "iter", "aiter"})
"""Builtins that read their first argument's own state and nothing inside it."""
_READ_BUILTINS = frozenset(
    {"repr", "ascii", "format", "min", "max", "sum", "sorted", "any", "all", "vars", "dir"}
)
_MODULE_FUNCTIONS: dict[str, str] = {
    "math": "none",
    "cmath": "none",
    "time": "none",
    "_operator": "read",
    "_heapq": "write-arg",
    "_bisect": "write-arg",
    "_contextvars": "none",
    "_thread": "none",
    "_functools": "read",
    "_weakref": "none",
    "_abc": "none",
    "sys": "none",
    "_warnings": "none",
}
"""C module -> how its functions behave: ``none`` (no shared state), ``read`` (read their
arguments' contents), ``write-arg`` (may mutate their first argument, read the others)."""
_ASYNCIO_NONE = frozenset(
    {"current_task", "get_running_loop", "_get_running_loop", "get_event_loop"}
)
_ASYNCIO_C_MODULES = frozenset({"_asyncio"})
_LOCK_TYPES: tuple[type, ...] = (type(threading.Lock()), type(threading.RLock()))


def classify_call(access: StepAccess, callable_: Any, arg0: Any) -> None:
    """Add to ``access`` what calling ``callable_`` (with first argument ``arg0``) touches.

    Python functions and classes record nothing here: their code is traced line by line.
    """
    kind = type(callable_)
    if kind is types.FunctionType or kind is types.MethodType:
        return
    if kind is types.BuiltinFunctionType or kind.__name__ == "builtin_method":
        owner = getattr(callable_, "__self__", None)
        name = callable_.__name__
        if owner is None or isinstance(owner, types.ModuleType):
            _module_function(access, owner, name, arg0)
        else:
            _method(access, owner, name, arg0, bound=True)
        return
    if kind in (
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        types.ClassMethodDescriptorType,
    ):
        _method(access, arg0, callable_.__name__, None, bound=False)
        return
    if kind is types.MethodWrapperType:
        _method(access, callable_.__self__, callable_.__name__, arg0, bound=True)
        return
    if isinstance(callable_, type):
        if not _python_constructed(callable_):
            access.reads.add(WILD_OBJ)  # a C constructor reads its arguments
        return
    if kind is functools.partial:
        classify_call(access, callable_.func, callable_.args[0] if callable_.args else arg0)
        return
    if python_call(kind):
        return  # an instance with a Python __call__: traced
    access.everything = True


def python_call(cls: type) -> bool:
    """Instances of ``cls`` are called through a Python ``__call__``."""
    for klass in cls.__mro__:
        call = klass.__dict__.get("__call__")
        if call is not None:
            return isinstance(call, types.FunctionType)
    return False


@functools.lru_cache(maxsize=1024)
def _python_constructed(cls: type) -> bool:
    """A class whose construction runs Python code for every part that is not object's."""
    for klass in cls.__mro__:
        if klass is object:
            return True
        init = klass.__dict__.get("__init__")
        new = klass.__dict__.get("__new__")
        if init is not None and not isinstance(init, types.FunctionType):
            return False
        if new is not None and not isinstance(new, (types.FunctionType, staticmethod)):
            return False
        if init is not None:
            return True
    return True


def _module_function(access: StepAccess, owner: Any, name: str, arg0: Any) -> None:
    module = getattr(owner, "__name__", "builtins") if owner is not None else "builtins"
    if module == "builtins":
        if name in _NO_ACCESS_BUILTINS:
            return
        if name in _READ_ARG_BUILTINS:
            if type(arg0) not in _IMMUTABLE:
                access.read_obj(arg0)
            return
        if name in _READ_BUILTINS:
            access.reads.add(WILD_OBJ)
            access.reads.add(WILD_FUTURE)  # repr() and format() show a future's state
            return
        if name in ("getattr", "hasattr"):
            access.reads.add(WILD_ATTR)
            return
        if name in ("setattr", "delattr"):
            access.writes.add(WILD_ATTR)
            return
        if name in ("next", "anext"):
            access.write_obj(arg0)
            access.reads.add(WILD_OBJ)
            return
        if name == "print":
            access.writes.add(IO)
            access.reads.add(WILD_OBJ)
            return
        access.everything = True
        return
    if module in _ASYNCIO_C_MODULES or module == "asyncio":
        if name not in _ASYNCIO_NONE:
            access.everything = True
        return
    behaviour = _MODULE_FUNCTIONS.get(module)
    if behaviour == "none":
        return
    if behaviour == "read":
        access.reads.add(WILD_OBJ)
        return
    if behaviour == "write-arg":
        access.write_obj(arg0)
        access.reads.add(WILD_OBJ)
        return
    access.everything = True


def _method(access: StepAccess, receiver: Any, name: str, first: Any, *, bound: bool) -> None:
    kind = type(receiver)
    if kind in _IMMUTABLE:
        if name in _ELEMENT_READS:
            access.reads.add(WILD_OBJ)
        return
    if isinstance(receiver, _CONTAINERS):
        if name in _CONTAINER_READS:
            access.read_obj(receiver)
        else:
            access.write_obj(receiver)
        if name in _ELEMENT_READS:
            access.reads.add(WILD_OBJ)
        return
    if isinstance(receiver, asyncio.Future):
        if name in _FUTURE_READS:
            access.read_future(receiver)
            if isinstance(receiver, asyncio.Task) and name in ("get_coro", "get_stack"):
                access.reads.add(("task", id(receiver)))
            return
        access.write_future(receiver)
        if isinstance(receiver, asyncio.Task):
            access.writes.add(("task", id(receiver)))  # cancel() is seen by its next step
        if name == "cancel":
            waiter = getattr(receiver, "_fut_waiter", None)
            if waiter is not None:
                access.write_future(waiter)  # a task's cancel() cancels what it waits on
        return
    if isinstance(receiver, _LOCK_TYPES):
        access.write_obj(receiver)
        return
    if isinstance(receiver, contextvars_types()):
        if name in ("get", "run", "copy", "keys", "values", "items", "__getitem__", "__contains__"):
            access.read_obj(receiver)
        else:
            access.write_obj(receiver)
        return
    access.everything = True


@functools.cache
def contextvars_types() -> tuple[type, ...]:
    import contextvars

    return (contextvars.ContextVar, contextvars.Context, contextvars.Token)


# -- Python code, per line ------------------------------------------------------------------

_LOCAL_OPS = frozenset(
    {
        "NOP", "RESUME", "CACHE", "POP_TOP", "PUSH_NULL", "COPY", "SWAP", "LOAD_CONST",
        "LOAD_SMALL_INT", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
        "LOAD_FAST_LOAD_FAST", "STORE_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
        "STORE_FAST_MAYBE_NULL", "DELETE_FAST", "RETURN_VALUE", "RETURN_CONST",
        "RETURN_GENERATOR", "JUMP", "JUMP_FORWARD", "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_NO_INTERRUPT", "POP_JUMP_IF_NONE",
        "POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
        "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "BUILD_TUPLE",
        "BUILD_LIST", "BUILD_SET", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "BUILD_SLICE",
        "BUILD_STRING", "LIST_APPEND", "SET_ADD", "MAP_ADD", "IS_OP", "MAKE_FUNCTION",
        "SET_FUNCTION_ATTRIBUTE", "MAKE_CELL", "COPY_FREE_VARS", "LOAD_CLOSURE", "KW_NAMES",
        "PRECALL", "CALL", "CALL_KW", "CALL_FUNCTION_EX", "SEND",
        "YIELD_VALUE", "END_SEND", "CLEANUP_THROW", "POP_EXCEPT", "PUSH_EXC_INFO",
        "CHECK_EXC_MATCH", "CHECK_EG_MATCH", "RERAISE", "RAISE_VARARGS", "END_FOR",
        "END_ASYNC_FOR", "LOAD_ASSERTION_ERROR", "EXTENDED_ARG", "EXIT_INIT_CHECK",
        "INTERPRETER_EXIT", "ASYNC_GEN_WRAP", "GET_ANEXT", "GET_AITER", "LOAD_BUILD_CLASS",
        "LOAD_LOCALS", "SETUP_ANNOTATIONS", "POP_ITER", "NOT_TAKEN", "CALL_INTRINSIC_1",
        "CALL_INTRINSIC_2", "WITH_EXCEPT_START",
    }
)  # fmt: skip
"""Opcodes that touch no shared state themselves (calls are seen as calls or traced)."""
_READ_OPS = frozenset(
    {
        "BINARY_SUBSCR", "BINARY_SLICE", "CONTAINS_OP", "COMPARE_OP", "GET_ITER",
        "FOR_ITER", "UNPACK_SEQUENCE", "UNPACK_EX", "LIST_EXTEND",
        "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE", "FORMAT_VALUE", "FORMAT_SIMPLE",
        "FORMAT_WITH_SPEC", "CONVERT_VALUE", "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS",
        "MATCH_CLASS", "GET_LEN", "TO_BOOL", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE",
        "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
        "POP_JUMP_BACKWARD_IF_FALSE", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP",
        "UNARY_NOT", "UNARY_NEGATIVE", "UNARY_INVERT", "UNARY_POSITIVE", "COPY_DICT_WITHOUT_KEYS",
        "LIST_TO_TUPLE", "PRINT_EXPR",
    }
)  # fmt: skip
"""Opcodes that may read a container's contents in C: they read every container."""
_ATTR_READS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR"})
_ATTR_WRITES = frozenset({"STORE_ATTR", "DELETE_ATTR"})
_GLOBAL_READS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
_GLOBAL_WRITES = frozenset({"STORE_GLOBAL", "STORE_NAME", "DELETE_GLOBAL", "DELETE_NAME"})
_CELL_READS = frozenset({"LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"})
_CELL_WRITES = frozenset({"STORE_DEREF", "DELETE_DEREF"})
_SUBSCR_WRITES = frozenset({"STORE_SUBSCR", "DELETE_SUBSCR", "STORE_SLICE"})
_WITH_OPS = frozenset({"BEFORE_WITH", "BEFORE_ASYNC_WITH", "LOAD_SPECIAL"})
_TRUTH_OPS = frozenset(
    {
        "TO_BOOL", "UNARY_NOT", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE",
        "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
        "POP_JUMP_BACKWARD_IF_FALSE",
    }
)  # fmt: skip
"""Truth tests: they read their operand's own state (a container's length)."""
_CONTAINER_READ_DEPTH = {
    "BINARY_SUBSCR": 2,
    "BINARY_SLICE": 3,
    "CONTAINS_OP": 1,
    "GET_ITER": 1,
    "UNPACK_SEQUENCE": 1,
    "UNPACK_EX": 1,
}
"""Opcodes that read one container's own contents, and where that container is."""
_BOOL_RESULTS = frozenset({"COMPARE_OP", "IS_OP", "CONTAINS_OP", "TO_BOOL", "UNARY_NOT"})
_INPLACE = frozenset(
    i for i, (name, _) in enumerate(getattr(dis, "_nb_ops", ())) if name.startswith("NB_INPLACE")
)
_CLOBBERS = frozenset({"CALL", "CALL_KW", "CALL_FUNCTION_EX", "SEND", "YIELD_VALUE"})
"""Opcodes after which a global, closure variable or attribute may hold another object."""

Source = tuple[Any, ...]
"""Where an operand comes from: ("local"|"global"|"cell", name) or ("attr", source, name)."""


@dataclass(frozen=True, slots=True)
class _Dynamic:
    """An access whose key depends on the value of an operand, looked up in the frame.

    ``kind`` is ``"store"`` (a subscript store on the container ``source``), ``"inplace"``
    (an in-place operator whose left operand is ``source``) or ``"with"`` (entering the
    context manager ``source``). The lookup is valid only if no instruction between the
    event's offset and ``offset`` may rebind the source (``clobbers``).
    """

    kind: str
    source: Source | None
    offset: int
    clobbers: tuple[int, ...]
    loops: bool
    """The line jumps backward: a clobber anywhere in it may come before the access."""
    name: str = ""
    """For attribute accesses: the attribute."""


@dataclass(frozen=True, slots=True)
class _Line:
    reads: frozenset[Key]
    writes: frozenset[Key]
    everything: bool
    dynamic: tuple[_Dynamic, ...]
    start: int


_EMPTY_LINE = _Line(frozenset(), frozenset(), False, (), 0)


class _Code:
    """The per-line summary of one code object."""

    __slots__ = ("lines", "offsets")

    def __init__(self, lines: dict[int, _Line], offsets: list[tuple[int, int]]) -> None:
        self.lines = lines
        self.offsets = offsets  # (offset, line), ascending

    def line_at(self, offset: int) -> _Line:
        line = None
        for start, number in self.offsets:
            if start > offset:
                break
            line = number
        return self.lines.get(line, _EMPTY_LINE) if line is not None else _EMPTY_LINE


_PUSH_LOCAL = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"})
_CALLEES = frozenset({"callee", "attr", "global", "local", "cell"})
_POP = {
    "POP_TOP": 1, "STORE_FAST": 1, "STORE_DEREF": 1, "STORE_GLOBAL": 1, "STORE_NAME": 1,
    "STORE_ATTR": 2, "DELETE_ATTR": 1, "STORE_SUBSCR": 3, "DELETE_SUBSCR": 2,
    "STORE_SLICE": 4, "POP_JUMP_IF_TRUE": 1, "POP_JUMP_IF_FALSE": 1, "POP_JUMP_IF_NONE": 1,
    "POP_JUMP_IF_NOT_NONE": 1, "POP_JUMP_FORWARD_IF_TRUE": 1, "POP_JUMP_FORWARD_IF_FALSE": 1,
    "POP_JUMP_FORWARD_IF_NONE": 1, "POP_JUMP_FORWARD_IF_NOT_NONE": 1,
    "POP_JUMP_BACKWARD_IF_TRUE": 1, "POP_JUMP_BACKWARD_IF_FALSE": 1,
    "POP_JUMP_BACKWARD_IF_NONE": 1, "POP_JUMP_BACKWARD_IF_NOT_NONE": 1,
    "STORE_FAST_STORE_FAST": 2, "RETURN_VALUE": 1,
}  # fmt: skip
"""Opcodes that only pop (how many)."""
_NO_STACK = frozenset(
    {"NOP", "RESUME", "CACHE", "EXTENDED_ARG", "KW_NAMES", "PRECALL", "NOT_TAKEN"}
)
_JUMPS = frozenset(dis.opname[op] for op in set(dis.hasjrel) | set(dis.hasjabs))
_PLAIN_JUMPS = frozenset(
    name
    for name in _JUMPS
    if name.startswith(("POP_JUMP", "JUMP_FORWARD", "JUMP_BACKWARD")) or name == "JUMP"
)
"""Jumps whose target sees the stack as it is after the jump (the popped operand gone)."""


def _stacks(group: list[dis.Instruction]) -> list[tuple[Source | None, ...]]:
    """Where each stack slot came from, before each instruction of a line.

    A slot is a :data:`Source` when plain instructions of the line pushed it, else None.
    The stack at the start of the line, and after any instruction this does not model, is
    unknown: it is cut to nothing, so deeper slots read as unknown.
    """
    stack: list[Source | None] | None = []
    before = []
    loops = any(instr.opname == "JUMP_BACKWARD" for instr in group)
    incoming: dict[int, list[list[Source | None]]] = {}
    for instr in group:
        if instr.is_jump_target or instr.offset in incoming:
            # Control flow joins here: a slot is known if every way in agrees (or is one of
            # the sources the ways in bring); a loop or an exception handler leaves nothing
            # known.
            ways = incoming.pop(instr.offset, [])
            if stack is not None:
                ways.append(stack)
            stack = _merge(ways) if ways and not loops else []
        if stack is None:
            stack = []
        before.append(tuple(stack))
        name = instr.opname
        arg = instr.arg or 0
        if name in _JUMPS:
            target = instr.argval
            conditional = "IF" in name
            if name in _POP and conditional:
                del stack[max(0, len(stack) - _POP[name]) :]
            if isinstance(target, int) and target > instr.offset and name in _PLAIN_JUMPS:
                incoming.setdefault(target, []).append(list(stack))
            elif isinstance(target, int) and target > instr.offset:
                incoming.setdefault(target, []).append([])
            if not conditional:
                stack = None  # nothing falls through an unconditional jump
            continue
        if name in _NO_STACK:
            continue
        if name in _PUSH_LOCAL:
            stack.append(("local", instr.argval))
        elif name == "LOAD_FAST_LOAD_FAST":
            stack.extend(("local", n) for n in instr.argval)
        elif name == "STORE_FAST_LOAD_FAST":
            if stack:
                stack.pop()
            stack.append(("local", instr.argval[1]))
        elif name in ("LOAD_CONST", "LOAD_SMALL_INT"):
            stack.append(("const",))
        elif name == "LOAD_DEREF":
            stack.append(("cell", instr.argval))
        elif name == "LOAD_GLOBAL":
            if arg & 1:  # a call target, and NULL: before it up to 3.12, after it since
                pair: tuple[Source | None, ...] = (None, ("global", instr.argval))
                stack.extend(pair if sys.version_info < (3, 13) else pair[::-1])
            else:
                stack.append(("global", instr.argval))
        elif name == "LOAD_ATTR" and not (sys.version_info >= (3, 12) and arg & 1):
            base = stack.pop() if stack else None
            plain = base is not None and base[0] in ("local", "cell", "global")
            stack.append(("attr", base, instr.argval) if plain else None)
        elif name in ("LOAD_ATTR", "LOAD_METHOD"):  # method form: method and self (or NULL)
            base = stack.pop() if stack else None
            plain = base is not None and base[0] in ("local", "cell", "global")
            stack.extend((("callee", base, instr.argval) if plain else None, None))
        elif name in ("CALL", "CALL_KW") and sys.version_info >= (3, 11):
            popped = arg + (3 if name == "CALL_KW" else 2)
            callee = next(
                (slot for slot in stack[-popped:][:2] if slot is not None and slot[0] in _CALLEES),
                None,
            )
            del stack[max(0, len(stack) - popped) :]
            stack.append(("result", callee, instr.offset) if callee is not None else None)
        elif name == "COPY":
            stack.append(stack[-arg] if 0 < arg <= len(stack) else None)
        elif name == "SWAP":
            if 0 < arg <= len(stack):
                stack[-1], stack[-arg] = stack[-arg], stack[-1]
            else:
                stack = []
        elif name == "PUSH_NULL":
            stack.append(None)
        elif name in _POP:
            del stack[max(0, len(stack) - _POP[name]) :]
        elif name == "BINARY_OP":
            right = stack.pop() if stack else None
            left = stack.pop() if stack else None
            plain = left is not None and right is not None and arg not in _INPLACE
            stack.append(("derived", left, right) if plain else None)
        elif name in ("COMPARE_OP", "IS_OP", "CONTAINS_OP"):
            del stack[max(0, len(stack) - 2) :]
            stack.append(("const",))
        elif name in ("TO_BOOL", "UNARY_NOT"):
            if stack:
                stack.pop()
            stack.append(("const",))
        elif name == "BINARY_SUBSCR":
            del stack[max(0, len(stack) - 2) :]
            stack.append(None)
        else:
            stack = []  # not modelled: nothing below is known any more
    return before


def _merge(ways: list[list[Source | None]]) -> list[Source | None]:
    depth = min(len(way) for way in ways)
    merged: list[Source | None] = []
    for slots in zip(*(way[len(way) - depth :] for way in ways), strict=True):
        first = slots[0]
        if all(slot == first for slot in slots):
            merged.append(first)
        elif all(slot is not None for slot in slots):
            merged.append(("either", *dict.fromkeys(slots)))
        else:
            merged.append(None)
    return merged


def _source_of(stacks: list[tuple[Source | None, ...]], index: int, depth: int) -> Source | None:
    """The source of the operand at ``depth`` (1 = top) before instruction ``index``."""
    stack = stacks[index]
    return stack[-depth] if depth <= len(stack) else None


def _clobbers(instructions: list[dis.Instruction], source: Source | None) -> tuple[int, ...]:
    if source is None or source[0] == "const":
        return ()
    if source[0] in ("derived", "either"):
        return tuple(c for part in source[1:] for c in _clobbers(instructions, part))
    if source[0] == "result":  # what matters is the callee, up to the call that used it
        callee = source[1]
        if callee[0] == "callee":
            callee = ("attr", callee[1], callee[2])
        return tuple(c for c in _clobbers(instructions, callee) if c < source[2])
    root = source[1] if source[0] == "attr" else source
    offsets = []
    for instr in instructions:
        name = instr.opname
        if name in _CLOBBERS and (root[0] != "local" or source[0] == "attr"):
            offsets.append(instr.offset)
        elif name.startswith("STORE_") or name.startswith("DELETE_"):
            value = instr.argval
            names = value if isinstance(value, tuple) else (value,)
            if root[1] in names or (source[0] == "attr" and source[2] in names):
                offsets.append(instr.offset)
    return tuple(offsets)


@functools.lru_cache(maxsize=4096)
def summarize(code: types.CodeType) -> _Code:
    """The per-line accesses of ``code`` (see the module docstring)."""
    instructions = list(dis.get_instructions(code))
    grouped: dict[int, list[dis.Instruction]] = {}
    offsets: list[tuple[int, int]] = []
    current = code.co_firstlineno
    for instr in instructions:
        number = instr.positions.lineno if instr.positions is not None else None
        if number is None:
            number = current
        if number != current or not offsets:
            offsets.append((instr.offset, number))
        current = number
        grouped.setdefault(number, []).append(instr)
    lines = {}
    for number, group in grouped.items():
        lines[number] = _summarize_line(group)
    return _Code(lines, offsets)


def _summarize_line(group: list[dis.Instruction]) -> _Line:
    stacks = _stacks(group)
    reads: set[Key] = set()
    writes: set[Key] = set()
    everything = False
    dynamic: list[_Dynamic] = []
    # An await's own loop (JUMP_BACKWARD_NO_INTERRUPT back to SEND) re-runs no earlier
    # instruction of the line; a real loop does.
    loops = any(instr.opname == "JUMP_BACKWARD" for instr in group)
    for index, instr in enumerate(group):
        name = instr.opname
        if name in _LOCAL_OPS:
            continue
        if name in _ATTR_READS or name in _ATTR_WRITES:
            # Attribute ``name`` of the object below it on the stack: keyed by that object
            # when the frame can tell which it is, else of any object.
            source = _source_of(stacks, index, 1)
            mode = "attr-write" if name in _ATTR_WRITES else "attr-read"
            dynamic.append(
                _Dynamic(mode, source, instr.offset, _clobbers(group, source), loops, instr.argval)
            )
        elif name in _GLOBAL_READS or name in _GLOBAL_WRITES:
            # A global is an attribute of its module: keyed by the module's namespace, so
            # that ``module.name`` elsewhere is the same resource.
            mode = "global-write" if name in _GLOBAL_WRITES else "global-read"
            dynamic.append(_Dynamic(mode, None, instr.offset, (), loops, instr.argval))
        elif name in _CELL_READS:
            reads.add(("cell", instr.argval))
        elif name in _CELL_WRITES:
            writes.add(("cell", instr.argval))
        elif name in _TRUTH_OPS:
            source = _source_of(stacks, index, 1)
            dynamic.append(_Dynamic("truth", source, instr.offset, _clobbers(group, source), loops))
        elif name == "COMPARE_OP" or (name == "BINARY_OP" and instr.arg not in _INPLACE):
            left = _source_of(stacks, index, 2)
            right = _source_of(stacks, index, 1)
            for source in (left, right):
                dynamic.append(
                    _Dynamic("operand", source, instr.offset, _clobbers(group, source), loops)
                )
        elif name in _CONTAINER_READ_DEPTH:
            # Reads the container itself (not what it holds): keyed by the container when
            # the frame can tell which it is. ``x in c`` also compares ``x`` with elements.
            source = _source_of(stacks, index, _CONTAINER_READ_DEPTH[name])
            dynamic.append(_Dynamic("read", source, instr.offset, _clobbers(group, source), loops))
            if name == "CONTAINS_OP":
                item = _source_of(stacks, index, 2)
                dynamic.append(
                    _Dynamic("operand", item, instr.offset, _clobbers(group, item), loops)
                )
        elif name in _READ_OPS:
            reads.add(WILD_OBJ)
            if name.startswith(("FORMAT", "CONVERT")):
                reads.add(WILD_FUTURE)
        elif name in _SUBSCR_WRITES:
            depth = 3 if name == "STORE_SLICE" else 2
            source = _source_of(stacks, index, depth if name != "DELETE_SUBSCR" else 2)
            dynamic.append(_Dynamic("store", source, instr.offset, _clobbers(group, source), loops))
        elif name == "BINARY_OP":  # in place
            if instr.arg in _INPLACE:
                source = _source_of(stacks, index, 2)  # the value updated in place
                dynamic.append(
                    _Dynamic("inplace", source, instr.offset, _clobbers(group, source), loops)
                )
        elif name in ("GET_AWAITABLE", "GET_YIELD_FROM_ITER"):
            # Awaiting a future that is done reads it in C (no call to see): the task goes
            # on at once, or waits and adds a callback (which the loop records).
            source = _source_of(stacks, index, 1)
            dynamic.append(_Dynamic("await", source, instr.offset, _clobbers(group, source), loops))
        elif name in ("IMPORT_NAME", "IMPORT_FROM"):
            # An import of a loaded module reads sys.modules; a first import runs the
            # module's code, which is traced like any other.
            reads.add(("module",))
        elif name in _WITH_OPS:
            source = _source_of(stacks, index, 1)
            dynamic.append(_Dynamic("with", source, instr.offset, _clobbers(group, source), loops))
        else:
            everything = True  # an opcode this summary does not know (imports, ...)
    start = group[0].offset
    return _Line(frozenset(reads), frozenset(writes), everything, tuple(dynamic), start)


_MISSING = object()
_FRESH_COROUTINE = object()
_LOCALS: Source = ("locals",)


class _Either(tuple[Any, ...]):
    """The values an operand may have: one per way control flow reached it."""


_COROUTINE = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE


def _lookup(frame: types.FrameType, source: Source, cache: dict[Source, Any]) -> Any:
    found = cache.get(source, _MISSING)
    if found is not _MISSING:
        return found
    kind = source[0]
    value: Any = _MISSING
    if kind in ("local", "cell"):
        names = cache.get(_LOCALS)
        if names is None:
            names = cache[_LOCALS] = frame.f_locals  # a snapshot on 3.12: take it once
        value = names.get(source[1], _MISSING)
    elif kind == "global":
        value = frame.f_globals.get(source[1], _MISSING)
        if value is _MISSING:
            value = builtins.__dict__.get(source[1], _MISSING)
    elif kind == "attr":
        base = _lookup(frame, source[1], cache)
        if base is not _MISSING:
            value = _static_attribute(base, source[2])
    elif kind == "const":
        value = None
    elif kind == "result":
        # The value a call returned: known only to be a fresh coroutine, when the callee
        # is a coroutine function.
        callee = source[1]
        if callee[0] == "callee":  # a method: look it up on its object's type
            owner = _lookup(frame, callee[1], cache)
            function = _MISSING if owner is _MISSING else _static_attribute(owner, callee[2])
        else:
            function = _lookup(frame, callee, cache)
        if isinstance(function, (staticmethod, classmethod)):
            function = function.__func__
        if isinstance(function, types.FunctionType) and function.__code__.co_flags & _COROUTINE:
            value = _FRESH_COROUTINE
    elif kind == "either":
        value = _Either(_lookup(frame, part, cache) for part in source[1:])
    elif kind == "derived":
        left = _lookup(frame, source[1], cache)
        right = _lookup(frame, source[2], cache)
        if type(left) in _IMMUTABLE and type(right) in _IMMUTABLE:
            value = 0  # arithmetic on immutable values makes an immutable value
    cache[source] = value
    return value


def _static_attribute(obj: Any, name: str) -> Any:
    """``obj.name`` when no Python code would run to compute it, else ``_MISSING``."""
    cls = type(obj)
    for klass in cls.__mro__:
        attribute = klass.__dict__.get(name, _MISSING)
        if attribute is _MISSING:
            continue
        if isinstance(attribute, types.MemberDescriptorType):  # __slots__
            try:
                return attribute.__get__(obj, cls)
            except AttributeError:
                return _MISSING
        if hasattr(type(attribute), "__set__") or hasattr(type(attribute), "__delete__"):
            return _MISSING  # a property or another data descriptor
        break
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        namespace = None
    if type(namespace) is dict and name in namespace:
        return namespace[name]
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


def _python_context_manager(value: Any) -> bool:
    cls = type(value)
    for enter, exit_ in (("__aenter__", "__aexit__"), ("__enter__", "__exit__")):
        found_enter = found_exit = None
        for klass in cls.__mro__:
            found_enter = found_enter or klass.__dict__.get(enter)
            found_exit = found_exit or klass.__dict__.get(exit_)
        if (found_enter is not None or found_exit is not None) and not (
            isinstance(found_enter, types.FunctionType)
            and isinstance(found_exit, types.FunctionType)
        ):
            return False
    return True


def _apply_line(access: StepAccess, line: _Line, frame: types.FrameType, offset: int) -> None:
    if line.everything:
        access.everything = True
        return
    access.reads.update(line.reads)
    access.writes.update(line.writes)
    if not line.dynamic:
        return
    cache: dict[Source, Any] = {}
    for item in line.dynamic:
        value: Any = _MISSING
        if item.source is not None and item.source[0] != "const":
            if item.loops:
                stale = bool(item.clobbers)
            else:
                stale = any(offset <= clobber < item.offset for clobber in item.clobbers)
            if not stale:
                value = _lookup(frame, item.source, cache)
        if item.source is not None and item.source[0] == "const" and item.kind in _CONSTANT_OK:
            continue
        if item.kind in ("global-read", "global-write"):
            key = ("attr", item.name, id(frame.f_globals))
            if item.kind == "global-read":
                access.reads.add(key)
            else:
                access.writes.add(key)
            continue
        for one in value if type(value) is _Either else (value,):
            if type(one) is _Either:  # nested alternatives: give up on precision
                one = _MISSING
            _apply_value(access, item, one)


_CONSTANT_OK = frozenset({"truth", "read", "operand", "store", "inplace"})
"""Access kinds that touch nothing when their operand is a constant."""


def _apply_value(access: StepAccess, item: _Dynamic, value: Any) -> None:
    if item.kind == "attr-read" or item.kind == "attr-write":
        access.keep.append(value)
        key = _attribute_key(value, item.name, write=item.kind == "attr-write")
        if item.kind == "attr-read":
            access.reads.add(key)
        else:
            access.writes.add(key)
    elif item.kind == "with":
        if isinstance(value, _LOCK_TYPES):
            access.write_obj(value)  # a thread lock's C __enter__ and __exit__
        elif value is _MISSING or not _python_context_manager(value):
            access.everything = True
    elif item.kind == "await":
        if value is _MISSING:
            access.reads.add(WILD_FUTURE)
        elif isinstance(value, asyncio.Future):
            access.read_future(value)
    elif item.kind == "truth" or item.kind == "read":
        if value is _MISSING:
            access.reads.add(WILD_OBJ)
        elif type(value) not in _IMMUTABLE:
            access.read_obj(value)
    elif item.kind == "operand":
        # Comparing or combining a mutable value may read what it holds, and what that
        # holds in turn.
        if value is _MISSING or type(value) not in _IMMUTABLE:
            access.reads.add(WILD_OBJ)
    elif value is _MISSING:
        access.reads.add(WILD_OBJ)
        access.writes.add(WILD_OBJ)
    elif type(value) not in _IMMUTABLE:
        if item.kind == "inplace":
            access.reads.add(WILD_OBJ)  # list += other reads other
        access.write_obj(value)


def _attribute_key(value: Any, name: str, *, write: bool) -> Key:
    """The resource ``value.name`` is.

    A module's attribute is keyed by its namespace (what its code reads as a global). An
    instance's attribute is keyed by the instance when its own ``__dict__`` holds it (or it
    is written); a read that may fall through to the class, a ``__slots__`` member or
    ``__getattr__`` is keyed by the name alone, which any object's attribute of that name
    overlaps.
    """
    if value is _MISSING:
        return ("attr", name)
    if isinstance(value, types.ModuleType):
        return ("attr", name, id(value.__dict__))
    if write:
        return ("attr", name, id(value))
    try:
        namespace = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return ("attr", name)
    if type(namespace) is dict and name in namespace:
        return ("attr", name, id(value))
    return ("attr", name)


# -- the tracer ------------------------------------------------------------------------------


class Tracer:
    """Records into ``current`` (a :class:`StepAccess`) what the running step touches.

    ``start()`` and ``stop()`` bracket one run; events of other threads are ignored.
    """

    def __init__(self) -> None:
        self.current: StepAccess | None = None
        self._thread = threading.get_ident()
        self._tool: int | None = None
        # By id with the code (kept alive): equal code objects of two files each need their
        # own local events, and one file may be excluded where the other is not.
        self._codes: dict[int, tuple[types.CodeType, _Code | None]] = {}
        self._busy = False

    def start(self) -> bool:
        """Begin monitoring; False if no ``sys.monitoring`` tool id is free."""
        mon = _MONITORING
        for candidate in (4, 3, 5, 2):
            if mon.get_tool(candidate) is None:
                mon.use_tool_id(candidate, "interlace footprints")
                self._tool = candidate
                break
        else:
            return False
        events = mon.events
        mon.register_callback(self._tool, events.PY_START, self._on_start)
        mon.register_callback(self._tool, events.PY_RESUME, self._on_resume)
        mon.register_callback(self._tool, events.LINE, self._on_line)
        mon.register_callback(self._tool, events.CALL, self._on_call)
        mon.set_events(self._tool, events.PY_START | events.PY_RESUME)
        return True

    def stop(self) -> None:
        """End monitoring (again is harmless)."""
        self.current = None
        tool = self._tool
        if tool is None:
            return
        mon = _MONITORING
        mon.set_events(tool, 0)
        for code, summary in self._codes.values():
            if summary is not None:
                mon.set_local_events(tool, code, 0)
        events = mon.events
        for event in (events.PY_START, events.PY_RESUME, events.LINE, events.CALL):
            mon.register_callback(tool, event, None)
        mon.free_tool_id(tool)
        self._tool = None
        self._codes.clear()

    def _summary(self, code: types.CodeType) -> _Code | None:
        found = self._codes.get(id(code))
        if found is not None:
            return found[1]
        summary: _Code | None = None
        if not _excluded(code.co_filename):
            summary = summarize(code)
            assert self._tool is not None
            events = _MONITORING.events
            _MONITORING.set_local_events(self._tool, code, events.LINE | events.CALL)
        self._codes[id(code)] = (code, summary)
        return summary

    def _active(self) -> StepAccess | None:
        access = self.current
        if access is None or self._busy or threading.get_ident() != self._thread:
            return None
        return access

    def _on_start(self, code: types.CodeType, offset: int) -> None:
        if self._active() is None:
            return
        self._busy = True
        try:
            self._summary(code)
        finally:
            self._busy = False

    def _on_resume(self, code: types.CodeType, offset: int) -> None:
        access = self._active()
        if access is None:
            return
        self._busy = True
        try:
            summary = self._summary(code)
            if summary is not None:
                _apply_line(access, summary.line_at(offset), sys._getframe(1), offset)
        finally:
            self._busy = False

    def _on_line(self, code: types.CodeType, line: int) -> None:
        access = self._active()
        if access is None:
            return
        self._busy = True
        try:
            summary = self._summary(code)
            if summary is not None:
                entry = summary.lines.get(line, _EMPTY_LINE)
                _apply_line(access, entry, sys._getframe(1), entry.start)
        finally:
            self._busy = False

    def _on_call(self, code: types.CodeType, offset: int, callable_: Any, arg0: Any) -> None:
        access = self._active()
        if access is None:
            return
        self._busy = True
        try:
            classify_call(access, callable_, arg0)
        finally:
            self._busy = False
