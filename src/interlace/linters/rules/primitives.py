"""IL201: asyncio synchronization primitives created outside the event loop that uses them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from interlace.linters._rule import LintContext, Related, Rule
from interlace.linters.rules._flow import children, find_suspension, module_level_names

__all__ = ("AvoidAsyncioPrimitiveInInit",)

_PRIMITIVES = frozenset(
    {
        "Lock",
        "Event",
        "Condition",
        "Semaphore",
        "BoundedSemaphore",
        "Queue",
        "PriorityQueue",
        "LifoQueue",
        "Barrier",
    }
)
_PRIMITIVE_MODULES = frozenset({"asyncio", "asyncio.locks", "asyncio.queues"})
_MUTEXES = frozenset({"Lock", "Semaphore", "BoundedSemaphore"})
"""Primitives that make a task wait only when another task holds them: an ``acquire()`` of a
free one returns at once, and since 3.10 it does not bind the primitive to any loop."""
_THREAD_WORDS = frozenset(
    {
        "threading",
        "Thread",
        "ThreadPoolExecutor",
        "to_thread",
        "run_in_executor",
        "run_coroutine_threadsafe",
        "call_soon_threadsafe",
    }
)
"""Names that show a module running code in other threads, each of which may hold the
primitive while another thread's loop tries to take it."""
_FACTORY_KEYWORDS = frozenset({"default_factory", "factory"})


@dataclass(frozen=True, slots=True)
class _Frame:
    """One scope on the rule's stack.

    ``kind`` is ``module``, ``main`` (the body of ``if __name__ == "__main__":``), ``class``,
    ``function`` or ``lambda``; ``node`` is the scope's node.
    """

    kind: str
    node: cst.CSTNode
    name: str = ""
    is_async: bool = False
    outlives: str = ""
    """For a function whose result outlives one event loop (a cached factory, a wide-scoped
    pytest fixture): how to say so, e.g. ``returned by a `functools.cache` factory``."""


def _dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either order, either quote)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = [test.left, target.comparator]
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


_CACHES = frozenset({"cache", "lru_cache", "cached"})
_WIDE_SCOPES = frozenset({"session", "package", "module", "class"})


def _outlives(decorators: Sequence[cst.Decorator]) -> str:
    """How a function's result outlives one event loop, judged from its decorators, or ``""``.

    ``@functools.cache``/``@lru_cache(...)`` keep the result across ``asyncio.run()`` calls;
    ``@pytest.fixture(scope="session")`` (and pytest-asyncio's) share it across tests, which
    get a fresh loop each by default.
    """
    for decorator in decorators:
        expr = decorator.decorator
        call = expr if isinstance(expr, cst.Call) else None
        name = (_dotted(call.func if call else expr) or "").rpartition(".")[2]
        if name in _CACHES:
            return f"returned by a `{name}`-decorated factory"
        if name == "fixture" and call is not None:
            for arg in call.args:
                if (
                    arg.keyword is not None
                    and arg.keyword.value == "scope"
                    and isinstance(arg.value, cst.SimpleString)
                    and arg.value.evaluated_value in _WIDE_SCOPES
                ):
                    return f"built by a pytest fixture with scope={arg.value.value}"
    return ""


def _module_name(node: cst.Attribute | cst.Name) -> str:
    dotted = _dotted(node)
    return dotted or ""


class AvoidAsyncioPrimitiveInInit(Rule):
    """Flag asyncio primitives built in ``__init__``, a ``default_factory``, a class body or at
    module level, where no event loop is running yet."""

    code = "IL201"
    name = "asyncio-primitive-in-init"
    summary = (
        "An asyncio Lock/Event/Condition/Semaphore/BoundedSemaphore/Queue/Barrier is created at "
        "module level or in a class body, or per instance (`__init__`, `__post_init__`, a "
        "dataclass `default_factory`) of an object that outlives one event loop."
    )
    message = "{primitive} is created {place}, outside any running event loop. {hazard}. {instead}."
    why = (
        "An asyncio primitive belongs to one event loop. Before Python 3.10 it bound at "
        "construction to `asyncio.get_event_loop()`, which outside a running loop is not the loop "
        "that `asyncio.run()` later creates, so awaiting it raised `RuntimeError` ('attached to a "
        "different loop'). Since 3.10 it binds lazily to the first loop that makes it *wait* (a "
        "contended `acquire()`, `Event.wait()`, `Queue.get()` on an empty queue), and fails with "
        "`RuntimeError` ('is bound to a different event loop') only when it must wait under a "
        "second loop. That happens to objects that outlive one loop: module-level singletons and "
        "class attributes (shared by everything that imports them), objects cached across "
        "`asyncio.run()` calls, pytest-asyncio fixtures whose scope is wider than the test's loop, "
        "and threads that each run their own loop. The failure is intermittent because it needs "
        "contention, which is why it survives testing. So a Lock (or a Semaphore that starts "
        "with a positive literal value) that nothing can make wait is not reported on 3.10+: a "
        "private name (`_lock`, `self._lock`) whose every use in the file is `async with` over a "
        "body with no suspension point (or `.locked()`), in a module that shows no sign of "
        "threads. No task can hold such a lock while another runs, so no acquire ever waits and "
        "it never binds to a loop (a lock that guards nothing across an `await` is also not "
        "needed). Other module-level and class-body primitives are always reported. A primitive "
        "created per instance is reported on Python 3.10+ only when "
        "the same file shows the object outliving one loop: the class instantiated at module "
        "level, stored in a `global` or a module-level cache (`_CLIENTS[key] = Client()`, "
        "`.setdefault`), kept in a class attribute (a singleton), returned by a "
        "`functools.cache`/`lru_cache` factory, or built by a pytest fixture with a session, "
        "package, module or class scope; the finding says which and points there. Most objects "
        "that create primitives in `__init__` live inside one loop, so without such evidence the "
        'finding would usually be a false alarm; set `instance-primitives = "all"` in '
        "`[tool.interlace.lint]` to report them all (for example in a library whose users keep "
        "its objects across `asyncio.run()` calls). For targets before 3.10 every per-instance "
        "primitive is reported."
    )
    bad_example = (
        "import asyncio\n"
        "\n"
        "class Client:\n"
        "    def __init__(self) -> None:\n"
        "        self._lock = asyncio.Lock()\n"
        "\n"
        "    async def send(self, data: bytes) -> None:\n"
        "        async with self._lock:  # held across an await: other senders wait\n"
        "            await self._write(data)\n"
        "\n"
        "client = Client()  # cached and reused by every asyncio.run() call\n"
    )
    good_example = (
        "import asyncio\n"
        "import weakref\n"
        "\n"
        "class Client:\n"
        "    def __init__(self) -> None:\n"
        "        # One lock per event loop: a lock belongs to the first loop that waits on it.\n"
        "        # (A lock created lazily but kept on the object would still outlive its loop.)\n"
        "        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]\n"
        "        self._locks = weakref.WeakKeyDictionary()\n"
        "\n"
        "    def _lock(self) -> asyncio.Lock:\n"
        "        loop = asyncio.get_running_loop()\n"
        "        if loop not in self._locks:\n"
        "            self._locks[loop] = asyncio.Lock()\n"
        "        return self._locks[loop]\n"
        "\n"
        "    async def send(self, data: bytes) -> None:\n"
        "        async with self._lock():\n"
        "            await self._write(data)\n"
        "\n"
        "client = Client()  # safe to reuse across asyncio.run() calls\n"
    )
    suppress = (
        "On Python 3.10 and later, when the object provably lives and dies inside one event loop "
        "even though the file keeps it (a module-level instance that only one `asyncio.run()` "
        "ever uses, say), creating the primitive in `__init__` is safe: write `# noqa: IL201` on "
        "that line. Module-level and class-body primitives are shared by every user of the module "
        "or class and are rarely safe."
    )
    VALID = (
        "import asyncio\nasync def main():\n    lock = asyncio.Lock()\n",
        "import asyncio\nclass C:\n    async def start(self):\n        self.q = asyncio.Queue()\n",
        "import asyncio\nclass C:\n    def __init__(self):\n"
        "        self.lock: asyncio.Lock | None = None\n",
        "import threading\nclass C:\n    def __init__(self):\n"
        "        self.lock = threading.Lock()\n",
        "from threading import Lock\nLOCK = Lock()\n",
        "import asyncio\nclass C:\n    lock: asyncio.Lock\n",
        "import asyncio\ndef make():\n    return asyncio.Lock()\n",
        # Python 3.10+: nothing in the file keeps an instance beyond one event loop.
        "import asyncio\nclass C:\n    def __init__(self):\n        self.lock = asyncio.Lock()\n"
        "async def main():\n    c = C()\n",
        "import asyncio\nclass C:\n    def __init__(self):\n        self.lock = asyncio.Lock()\n"
        "def make():\n    return C()\n",
        # Python 3.10+: no critical section suspends, so the lock never makes anyone wait.
        "import asyncio\n_LOCK = asyncio.Lock()\n_SEEN = set()\n"
        "async def first(key):\n    async with _LOCK:\n        if key in _SEEN:\n"
        "            return False\n        _SEEN.add(key)\n        return True\n",
    )
    INVALID = (
        "import asyncio\nclass C:\n    def __init__(self):\n        self.lock = asyncio.Lock()\n"
        "C_INSTANCE = C()\n",
        "import asyncio as aio\nimport functools\nclass C:\n    def __init__(self):\n"
        "        self.q = aio.Queue()\n@functools.cache\ndef get():\n    return C()\n",
        "from asyncio import Semaphore\nLIMIT = Semaphore(10)\n",
        "import asyncio\n_LOCK = asyncio.Lock()\nasync def f():\n    async with _LOCK:\n"
        "        await asyncio.sleep(0)\n",
        "import asyncio\nclass C:\n    lock = asyncio.Lock()\n",
        "import asyncio\nfrom dataclasses import dataclass, field\n@dataclass\nclass C:\n"
        "    ev: asyncio.Event = field(default_factory=asyncio.Event)\n"
        "_CLIENTS = {}\ndef client(key):\n    return _CLIENTS.setdefault(key, C())\n",
        "import asyncio\nfrom dataclasses import dataclass\n@dataclass\nclass C:\n"
        "    _instance = None\n"
        "    def __post_init__(self):\n        self.cond = asyncio.Condition()\n"
        "    @classmethod\n    def get(cls):\n        if cls._instance is None:\n"
        "            cls._instance = cls()\n        return cls._instance\n",
    )
    TRIGGERS = ("asyncio",)

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self._frames: list[_Frame] = []
        # local name -> module it refers to (``import asyncio as aio`` -> aio: asyncio)
        self._modules: dict[str, str] = {}
        # local name -> qualified object (``from asyncio import Lock as L`` -> L: asyncio.Lock)
        self._names: dict[str, str] = {}
        # the attribute an assignment in progress binds (``self.lock = ...`` -> ``self.lock``)
        self._target: str | None = None
        # per-instance findings, reported at the end of the module (see leave_Module)
        self._pending: list[
            tuple[cst.CSTNode, str, str, str, str, list[Related], tuple[bool, str] | None]
        ] = []
        # module-level and class-body Locks and Semaphores, reported at the end of the module
        # unless nothing in it ever makes them wait (see _Uses.never_wait)
        self._shared_mutexes: list[
            tuple[cst.CSTNode, str, str, str, str, list[Related], tuple[bool, str]]
        ] = []
        # class name -> (first call that makes an instance outlive one loop, how it does)
        self._evidence: dict[str, tuple[cst.Call, str]] = {}
        # names bound at module level, and the names each enclosing function declares global
        self._module_names: frozenset[str] = frozenset()
        self._globals: list[set[str]] = []

    # -- imports ------------------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _module_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
                self._modules[local] = full
            else:
                local = full.split(".")[0]
                self._modules[local] = local
            self._names.pop(local, None)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = _module_name(node.module)
        for alias in node.names:
            imported = _dotted(alias.name)
            if imported is None:
                continue
            local = imported
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            qualified = f"{module}.{imported}"
            self._names[local] = qualified
            if qualified in _PRIMITIVE_MODULES:
                self._modules[local] = qualified
            else:
                self._modules.pop(local, None)

    def _primitive(self, node: cst.BaseExpression) -> str | None:
        """Return the primitive's class name if ``node`` names an asyncio primitive class."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if not rest:
            qualified = self._names.get(head)
        elif head in self._modules:
            qualified = f"{self._modules[head]}.{rest}"
        else:
            qualified = self._names.get(head)
            qualified = f"{qualified}.{rest}" if qualified else None
        if qualified is None:
            return None
        module, _, cls = qualified.rpartition(".")
        if module in _PRIMITIVE_MODULES and cls in _PRIMITIVES:
            return cls
        return None

    # -- scopes -------------------------------------------------------------------------------
    # Frames are pushed on the *body* so decorators, bases, parameter defaults and annotations
    # belong to the enclosing scope, where Python evaluates them.

    def visit_Module(self, node: cst.Module) -> None:
        self._frames.append(_Frame("module", node))
        self._module_names = module_level_names(node)

    def visit_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._frames.append(_Frame("class", node, node.name.value))

    def leave_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._frames.pop()

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._frames.append(
            _Frame(
                "function",
                node,
                node.name.value,
                is_async=node.asynchronous is not None,
                outlives=_outlives(node.decorators),
            )
        )
        self._globals.append(set())

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._frames.pop()
        self._globals.pop()

    def visit_If_body(self, node: cst.If) -> None:
        if self._frames and self._frames[-1].kind == "module" and _is_main_guard(node.test):
            self._frames.append(_Frame("main", node))

    def leave_If_body(self, node: cst.If) -> None:
        if self._frames and self._frames[-1].kind == "main" and self._frames[-1].node is node:
            self._frames.pop()

    def visit_Lambda_body(self, node: cst.Lambda) -> None:
        self._frames.append(_Frame("lambda", node))

    def leave_Lambda_body(self, node: cst.Lambda) -> None:
        self._frames.pop()

    def _place(self) -> tuple[str, str, list[Related]] | None:
        """Where code at the current position runs: (kind, description, related) or None."""
        if not self._frames:
            return None
        top = self._frames[-1]
        if top.kind == "module":
            return "module", "at module level", []
        if top.kind == "main":
            # A script's own `__main__` block usually hands the primitive to one
            # `asyncio.run()`, which is safe since 3.10 (binding is lazy); before 3.10 it binds
            # at construction to a loop that `asyncio.run()` does not use.
            if self.context.target_version < (3, 10):
                return "module", "in the `__main__` block", []
            return None
        if top.kind == "class":
            assert isinstance(top.node, cst.ClassDef)
            return (
                "class",
                f"in the body of class `{top.name}`",
                [Related(top.node.name, f"every instance of `{top.name}` shares it")],
            )
        if (
            top.kind == "function"
            and not top.is_async
            and top.name in ("__init__", "__post_init__")
            and len(self._frames) >= 2
            and self._frames[-2].kind == "class"
        ):
            assert isinstance(top.node, cst.FunctionDef)
            return (
                "instance",
                f"in `{top.name}`",
                [
                    Related(
                        top.node.name,
                        f"`{top.name}` runs wherever the object is built, usually before a loop "
                        "runs",
                    )
                ],
            )
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        self._target = _dotted(node.targets[0].target) if len(node.targets) == 1 else None
        for target in node.targets:
            self._note_stored(target.target, node.value)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._target = None

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target = _dotted(node.target)
        if node.value is not None:
            self._note_stored(node.target, node.value)

    def visit_Global(self, node: cst.Global) -> None:
        if self._globals:
            self._globals[-1].update(name.name.value for name in node.names)

    def _instance_of(self, value: cst.BaseExpression | None) -> tuple[str, cst.Call] | None:
        """The class ``value`` instantiates (``Client()``, ``cls()``, ``super().__new__(cls)``),
        with the call, or ``None``."""
        if isinstance(value, cst.Await):
            value = value.expression
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        owner = next((f.name for f in reversed(self._frames) if f.kind == "class"), None)
        if isinstance(func, cst.Name):
            if func.value == "cls":
                return (owner, value) if owner else None
            return func.value, value
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "__new__"
            and owner is not None
            and value.args
            and isinstance(value.args[0].value, cst.Name)
            and value.args[0].value.value == "cls"
        ):
            return owner, value
        return None

    def _note_stored(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """Inside a function, an instance stored where it outlives the call: a ``global``, an
        entry of a module-level cache, or a class attribute (a singleton)."""
        if not self._frames or self._frames[-1].kind != "function":
            return
        made = self._instance_of(value)
        if made is None:
            return
        owner, call = made
        how = self._long_lived_place(target)
        if how:
            self._evidence.setdefault(owner, (call, how))

    def _long_lived_place(self, target: cst.BaseExpression) -> str:
        if isinstance(target, cst.Name) and self._globals and target.value in self._globals[-1]:
            return f"stored in the module-level `{target.value}`"
        if isinstance(target, cst.Subscript):
            root = _dotted(target.value)
            if root is not None and root.split(".", 1)[0] in self._module_names:
                return f"cached in the module-level `{root}`"
        if isinstance(target, cst.Attribute):
            base = _dotted(target.value)
            classes = {f.name for f in self._frames if f.kind == "class"}
            if base is not None and (base == "cls" or base in classes):
                return f"kept in the class attribute `{_dotted(target) or ''}`"
        return ""

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        self._target = None

    # -- findings -----------------------------------------------------------------------------
    # Per-instance findings wait for the end of the module: an instantiation of the class at
    # module level, anywhere in the file, is evidence that the object outlives one event loop
    # and becomes a related location and a stronger message.

    def visit_Call(self, node: cst.Call) -> None:
        kind = self._primitive(node.func)
        if kind is not None:
            place = self._place()
            if place is not None:
                self._flag(node, kind, *place)
                return
        self._note_module_instance(node)
        self._note_cached(node)
        self._check_factory(node)

    def _note_cached(self, node: cst.Call) -> None:
        """``_CLIENTS.setdefault(key, Client())`` inside a function."""
        func = node.func
        if not (
            isinstance(func, cst.Attribute)
            and func.attr.value == "setdefault"
            and len(node.args) == 2
            and self._frames
            and self._frames[-1].kind == "function"
        ):
            return
        root = _dotted(func.value)
        made = self._instance_of(node.args[1].value)
        if root is not None and made is not None and root.split(".", 1)[0] in self._module_names:
            self._evidence.setdefault(made[0], (made[1], f"cached in the module-level `{root}`"))

    def _note_module_instance(self, node: cst.Call) -> None:
        if self._frames and self._frames[-1].kind == "module" and isinstance(node.func, cst.Name):
            self._evidence.setdefault(node.func.value, (node, "instantiated at module level"))

    def visit_Return(self, node: cst.Return) -> None:
        self._note_factory_result(node.value)

    def visit_Yield(self, node: cst.Yield) -> None:
        value = node.value
        if isinstance(value, cst.BaseExpression):
            self._note_factory_result(value)

    def _note_factory_result(self, value: cst.BaseExpression | None) -> None:
        """``return Client()`` in a cached factory or a wide-scoped fixture."""
        if isinstance(value, cst.Await):
            value = value.expression
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return
        frame = next((f for f in reversed(self._frames) if f.kind != "lambda"), None)
        if frame is not None and frame.outlives:
            self._evidence.setdefault(value.func.value, (value, frame.outlives))

    def leave_Module(self, original_node: cst.Module) -> None:
        self._frames.pop()
        mutexes = [p[-1] for p in self._pending if p[-1]] + [m[-1] for m in self._shared_mutexes]
        uses = _Uses(original_node) if mutexes else None
        for node, kind, scope, place, target, related, mutex in self._shared_mutexes:
            if uses is not None and uses.never_wait(*mutex):
                continue
            self.report(
                node, self._message(kind, scope, place, target, evidence=None), related=related
            )
        self._shared_mutexes.clear()
        for node, kind, owner, place, target, related, use in self._pending:
            if use is not None and uses is not None and uses.never_wait(*use):
                continue
            found = self._evidence.get(owner)
            how = found[1] if found else None
            if (
                found is None
                and self.context.target_version >= (3, 10)
                and self.context.instance_primitives != "all"
            ):
                # Since 3.10 the primitive binds to the first loop that makes it wait, so it
                # fails only if the object outlives that loop; nothing in the file says so.
                continue
            if found is not None:
                related = [
                    *related,
                    Related(
                        found[0],
                        f"`{owner}` is {how} here, so its {kind} outlives any one event loop",
                    ),
                ]
            self.report(
                node,
                self._message(kind, "instance", place, target, evidence=how),
                related=related,
            )
        self._pending.clear()

    def _check_factory(self, node: cst.Call) -> None:
        """``field(default_factory=asyncio.Lock)``, ``Factory(asyncio.Lock)`` in a class body."""
        if not self._frames or self._frames[-1].kind != "class":
            return
        candidates: list[cst.BaseExpression] = [
            arg.value
            for arg in node.args
            if arg.keyword is not None and arg.keyword.value in _FACTORY_KEYWORDS
        ]
        func = _dotted(node.func) or ""
        if func.rpartition(".")[2] == "Factory" and node.args and node.args[0].keyword is None:
            candidates.append(node.args[0].value)
        top = self._frames[-1]
        assert isinstance(top.node, cst.ClassDef)
        for value in candidates:
            kind = self._factory_primitive(value)
            if kind is not None:
                self._flag(
                    value,
                    kind,
                    "instance",
                    "by a `default_factory`",
                    [Related(top.node.name, f"runs whenever `{top.name}` is instantiated")],
                )

    def _factory_primitive(self, value: cst.BaseExpression) -> str | None:
        if isinstance(value, cst.Lambda) and isinstance(value.body, cst.Call):
            return self._primitive(value.body.func)
        if isinstance(value, cst.Call):
            func = _dotted(value.func) or ""
            if func.rpartition(".")[2] == "partial" and value.args:
                return self._primitive(value.args[0].value)
            return None
        return self._primitive(value)

    def _flag(
        self,
        node: cst.CSTNode,
        kind: str,
        scope: str,
        place: str,
        related: list[Related],
    ) -> None:
        target = self._target if self._target and self._target.startswith("self.") else None
        target = target or "self._" + kind.lower()
        use = self._use_of(node, kind, scope)
        if scope == "instance":
            owner = next((f.name for f in reversed(self._frames) if f.kind == "class"), "")
            self._pending.append((node, kind, owner, place, target, related, use))
            return
        if use is not None:
            self._shared_mutexes.append((node, kind, scope, place, target, related, use))
            return
        message = self._message(kind, scope, place, target, evidence=None)
        self.report(node, message, related=related)

    def _use_of(self, node: cst.CSTNode, kind: str, scope: str) -> tuple[bool, str] | None:
        """How code refers to a Lock or Semaphore the rule may find is never made to wait:
        ``(True, name)`` for an attribute (``self._lock``), ``(False, name)`` for a module-level
        name, or ``None`` when the exemption cannot apply.

        Only private names qualify (other modules may take a public one and hold it across an
        ``await``), and only a Semaphore that starts with a positive literal value.
        """
        if kind not in _MUTEXES or self.context.target_version < (3, 10):
            return None
        if not isinstance(node, cst.Call) or not _starts_free(node, kind):
            return None
        target = self._target or ""
        if scope == "module" and target.startswith("_") and "." not in target:
            return False, target
        if scope == "class" and target.startswith("_") and "." not in target:
            return True, target
        attribute = target.removeprefix("self.")
        if scope == "instance" and target.startswith("self._") and "." not in attribute:
            return True, attribute
        return None

    def _message(
        self, kind: str, scope: str, place: str, target: str, *, evidence: str | None
    ) -> str:
        old = self.context.target_version < (3, 10)
        shared = scope in ("module", "class")
        if old:
            hazard = (
                "Before Python 3.10 it binds at construction to `asyncio.get_event_loop()`, "
                "which outside a running loop is not the loop that `asyncio.run()` creates, so "
                "awaiting it raises RuntimeError ('attached to a different loop')"
            )
            if shared:
                hazard += (
                    ", for every "
                    + ("importer of this module" if scope == "module" else "instance")
                    + " alike"
                )
        elif shared:
            who = "importer of this module" if scope == "module" else "instance of the class"
            hazard = (
                f"One object is shared by every {who} and binds to the first event loop that "
                "makes it wait; any other loop (a second `asyncio.run()`, one loop per test, a "
                "thread running its own loop) then gets RuntimeError ('is bound to a different "
                "event loop') as soon as it must wait on it"
            )
        elif evidence:
            hazard = (
                f"The object is also {evidence} in this file, so it outlives any one event "
                "loop: the first loop that makes it wait owns it, and a second `asyncio.run()` "
                "(or one loop per test) gets RuntimeError ('is bound to a different event "
                "loop') as soon as it must wait on it"
            )
        else:
            hazard = (
                "Since Python 3.10 it binds to the first event loop that makes it wait and fails "
                "with RuntimeError ('is bound to a different event loop') only if this object is "
                "later used from a second loop: an instance cached across `asyncio.run()` calls, "
                "held by a module-level singleton, or built by a pytest-asyncio fixture with a "
                "wider scope than the test's loop"
            )
        if shared or evidence or not old:
            # Created lazily but kept as long as this object is, it would still outlive the
            # loop that first waited on it; lazy creation only helps before 3.10, where the
            # primitive binds at construction.
            instead = (
                "Keep one per event loop instead (look it up by `asyncio.get_running_loop()`), "
                "or create it in code that lives inside one loop (an async function, an object "
                "each `asyncio.run()` builds afresh)"
            )
            if not shared:
                instead += ", or make sure each object lives on one loop and suppress with "
                instead += "`# noqa: IL201`"
        else:
            instead = (
                f"Create it lazily from async code (e.g. `if {target} is None: {target} = "
                f"asyncio.{kind}()` in an async method), or make sure each object lives on one "
                "loop and suppress with `# noqa: IL201`"
            )
        return self.message.format(
            primitive=f"`asyncio.{kind}`", place=place, hazard=hazard, instead=instead
        )


def _starts_free(call: cst.Call, kind: str) -> bool:
    """Whether the Lock or Semaphore ``call`` builds starts free: a Lock always, a Semaphore
    with no value or a positive integer literal (``Semaphore(0)`` makes the first taker wait)."""
    if kind == "Lock" or not call.args:
        return True
    [arg, *rest] = call.args
    if rest or (arg.keyword is not None and arg.keyword.value != "value"):
        return False
    return isinstance(arg.value, cst.Integer) and int(arg.value.value, 0) >= 1


class _Uses:
    """Every use of a name or attribute in one module, to decide whether a Lock or Semaphore
    can ever make a task wait.

    A free Lock makes a task wait only while another task holds it, and a task can hold it
    across a switch only by suspending inside its critical section. So a Lock whose every use
    is ``async with lock:`` over a body with no suspension point (or ``lock.locked()``) is
    never contended in one thread, never waits, and never binds to an event loop; the IL201
    hazard does not exist. Threads change that (one thread may hold it while another's loop
    waits), so a module that shows any sign of threads gets no exemption.
    """

    def __init__(self, module: cst.Module) -> None:
        self._safe: set[int] = set()
        self._names: dict[str, list[cst.CSTNode]] = {}
        self._attributes: dict[str, list[cst.CSTNode]] = {}
        self._stores: set[int] = set()
        self.threads = False
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            self._note(node)
            stack.extend(children(node))

    def _note(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.With):
            if node.asynchronous is not None and find_suspension(node.body) is None:
                self._safe.update(id(item.item) for item in node.items)
        elif isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "locked" and not node.args:
                self._safe.add(id(func.value))
        elif isinstance(node, (cst.Assign, cst.AnnAssign)):
            value = node.value
            if (
                isinstance(value, cst.Call)
                and (_dotted(value.func) or "").rpartition(".")[2] in _MUTEXES
            ):
                targets = (
                    [t.target for t in node.targets]
                    if isinstance(node, cst.Assign)
                    else [node.target]
                )
                self._stores.update(id(t) for t in targets)
        elif isinstance(node, cst.Name):
            self._names.setdefault(node.value, []).append(node)
            self.threads = self.threads or node.value in _THREAD_WORDS
        elif isinstance(node, cst.Attribute):
            self._attributes.setdefault(node.attr.value, []).append(node)
            self.threads = self.threads or node.attr.value in _THREAD_WORDS

    def never_wait(self, attribute: bool, name: str) -> bool:
        """Whether the primitive bound to ``name`` can never make a task wait: every use is a
        non-suspending ``async with`` or ``.locked()``, apart from stores of new Locks and
        Semaphores."""
        if self.threads:
            return False
        uses = (self._attributes if attribute else self._names).get(name, [])
        return all(id(use) in self._safe or id(use) in self._stores for use in uses)
