"""IL101 and IL102: the rule classes' examples and the hard cases of the shared flow analysis."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from interlace.linters._rule import LintContext, Report, Rule
from interlace.linters.rules._flow import shared_by_tasks
from interlace.linters.rules.check_then_act import (
    FlagCheckThenActAcrossAwait,
    FlagLazyInitAcrossAwait,
    FlagUnlockedCheckThenAct,
)

RULES: tuple[type[Rule], ...] = (
    FlagCheckThenActAcrossAwait,
    FlagLazyInitAcrossAwait,
    FlagUnlockedCheckThenAct,
)


def lint(rule: type[Rule], source: str, context: LintContext | None = None) -> list[Report]:
    """Run one rule over ``source`` in a batched traversal and return its reports."""
    instance = rule(context or LintContext())
    cst.visit_batched(cst.parse_module(textwrap.dedent(source)), [instance])
    return instance.reports


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=()).code_for_node(node)


def reported(rule: type[Rule], source: str, context: LintContext | None = None) -> list[str]:
    """Return the source of each reported node."""
    return [code(r.node) for r in lint(rule, source, context)]


@pytest.mark.parametrize(
    ("rule", "sample"),
    [(rule, sample) for rule in RULES for sample in rule.VALID],
)
def test_valid_example_is_not_reported(rule: type[Rule], sample: str) -> None:
    assert lint(rule, sample) == []


@pytest.mark.parametrize(
    ("rule", "sample"),
    [(rule, sample) for rule in RULES for sample in rule.INVALID],
)
def test_invalid_example_is_reported(rule: type[Rule], sample: str) -> None:
    assert len(lint(rule, sample)) >= 1


def test_il101_reports_the_write_with_the_check_and_suspension_as_related() -> None:
    (found,) = lint(
        FlagCheckThenActAcrossAwait,
        """
        class A:
            async def get(self, k):
                if k not in self._c:
                    self._c[k] = await connect()
        """,
    )
    assert code(found.node) == "self._c[k]"
    assert [(code(r.node), r.message) for r in found.related] == [
        ("self._c", "`self._c` is checked here"),
        ("await connect()", "the task can be suspended here"),
    ]
    assert found.message.startswith("`self._c` is written after a suspension point")


def test_il104_reports_the_write_with_the_check_and_suspension_as_related() -> None:
    (found,) = lint(
        FlagLazyInitAcrossAwait,
        """
        class A:
            async def get(self):
                if self._c is None:
                    self._c = await connect()
        """,
    )
    assert code(found.node) == "self._c"
    assert [(code(r.node), r.message) for r in found.related] == [
        ("self._c", "`self._c` is checked here"),
        ("await connect()", "the task can be suspended here"),
    ]
    assert found.message.startswith("`self._c` is created or set up after a suspension point")


@pytest.mark.parametrize("rule", [FlagCheckThenActAcrossAwait, FlagLazyInitAcrossAwait])
def test_il101_and_il104_messages_have_the_three_part_shape(rule: type[Rule]) -> None:
    message = rule.message.format(state="self.x", shared=shared_by_tasks("self.x", "A"))
    assert message.count(". ") >= 2
    assert message.endswith(".")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            class A:
                async def f(self):
                    if self._c is None:
                        await self.prepare()
                        return
                    self._c = 1
            """,
            id="suspension-only-on-the-exiting-branch",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self.state != 'idle':
                        raise RuntimeError
                    self.state = 'running'
                    await self.work()
                    self.state = 'idle'
            """,
            id="later-write-depends-on-own-write",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self.x is None:
                        log('missing')
                    await self.work()
                    self.x = 1
            """,
            id="write-after-a-non-exiting-if",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    while not self.ready:
                        await self.event.wait()
                    self.ready = False
            """,
            id="while-test-re-evaluated-after-each-await",
        ),
        pytest.param(
            """
            class A:
                async def f(self, k):
                    for key in self.keys:
                        if key in self._d:
                            continue
                        self._d[key] = 1
                        await self.flush()
            """,
            id="check-inside-the-loop-is-fresh-each-iteration",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    with self._mutex:
                        if self._c is None:
                            self._c = make()
                    await self.x()
            """,
            id="sync-lock",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self._c is None:
                        async def make():
                            await g()
                        self._c = make
            """,
            id="await-in-a-nested-function",
        ),
    ],
)
def test_il101_stays_silent_on(source: str) -> None:
    assert lint(FlagCheckThenActAcrossAwait, source) == []


@pytest.mark.parametrize(
    ("source", "write"),
    [
        pytest.param(
            """
            class A:
                async def f(self):
                    if self._ready:
                        async for chunk in self.stream():
                            pass
                        self._ready = self.next_state()
            """,
            "self._ready",
            id="async-for",
        ),
        pytest.param(
            """
            class A:
                async def f(self, k):
                    async with self._lock:
                        if k in self._d:
                            return self._d[k]
                    v = await make()
                    self._d[k] = v
            """,
            "self._d[k]",
            id="check-under-lock-write-after-release",
        ),
        pytest.param(
            """
            class A:
                async def f(self, k):
                    async with self._lock:
                        if k in self._d:
                            return
                    v = await make()
                    async with self._lock:
                        self._d[k] = v
            """,
            "self._d[k]",
            id="lock-released-and-reacquired",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if (v := self.cache.get('k')) is None:
                        v = await make()
                        self.cache['k'] = v
            """,
            "self.cache['k']",
            id="walrus",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self.queue:
                        try:
                            await self.send()
                        except OSError:
                            self.queue.clear()
            """,
            "self.queue.clear()",
            id="write-in-handler-after-suspending-body",
        ),
    ],
)
def test_il101_reports(source: str, write: str) -> None:
    assert reported(FlagCheckThenActAcrossAwait, source) == [write]


def test_il104_reports_the_second_loop_iteration_after_the_await() -> None:
    source = """
        class A:
            async def f(self):
                if self._task is None:
                    for _ in range(3):
                        self._task = 1
                        await g()
        """
    assert reported(FlagLazyInitAcrossAwait, source) == ["self._task"]


@pytest.mark.parametrize(
    ("source", "code_of_finding"),
    [
        pytest.param(
            """
            class A:
                async def f(self):
                    if self._c is None:
                        self._c = await connect()
            """,
            "IL104",
            id="one-attribute-created",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self._ready:
                        return
                    await self.setup()
                    self._ready = True
            """,
            "IL104",
            id="flag-set-after-setup-guard-clause",
        ),
        pytest.param(
            """
            class A:
                async def f(self, enabled):
                    if self._c is None and enabled:
                        self._c = await connect()
            """,
            "IL104",
            id="missing-and-a-parameter",
        ),
        pytest.param(
            """
            class A:
                async def f(self, items):
                    if self._registered or not items:
                        return
                    await self.register(items)
                    self._registered = True
            """,
            "IL104",
            id="guard-clause-or-a-parameter",
        ),
        pytest.param(
            """
            class A:
                async def f(self, enabled):
                    if self._c is None or enabled:
                        self._c = await connect()
            """,
            "IL101",
            id="missing-or-a-parameter",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self._c is None or self._d is None:
                        self._c = await connect()
            """,
            "IL101",
            id="two-attributes-checked",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self._c is not None:
                        self._c = await reconnect()
            """,
            "IL101",
            id="existing-object-replaced",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if not self._c:
                        self._c = await fetch()
                def take(self):
                    return self._c.pop()
            """,
            "IL101",
            id="container-mutated-in-place-elsewhere",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if not self._started:
                        await self.connect()
                        self._handlers.append(self.on_event)
                        self._started = True
            """,
            "IL101",
            id="body-mutates-other-state",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if self.mode != "ready":
                        return
                    if self._c is None:
                        await g()
                        self.mode = "busy"
                        self._c = await connect()
            """,
            "IL101 IL101",
            id="body-writes-other-checked-state",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    if not self._n:
                        await g()
                        self._n += 1
            """,
            "IL101",
            id="augmented-assignment",
        ),
        pytest.param(
            """
            class A:
                async def f(self, k):
                    if k not in self._c:
                        self._c[k] = await connect()
            """,
            "IL101",
            id="registry-entry-created",
        ),
        pytest.param(
            """
            _client = None
            async def f():
                global _client
                if _client is None:
                    _client = await connect()
            """,
            "IL101",
            id="module-global",
        ),
    ],
)
def test_il101_and_il104_split_the_findings_by_shape(source: str, code_of_finding: str) -> None:
    rules = (FlagCheckThenActAcrossAwait, FlagLazyInitAcrossAwait)
    found = [r.code for rule in rules for r in lint(rule, source)]
    assert found == code_of_finding.split()


@pytest.mark.parametrize(
    "write",
    ["self._ws = None", "self._ws = False", "self._open.discard(self._ws)"],
)
def test_il101_leaves_resets_after_a_teardown_alone(write: str) -> None:
    source = f"""
        class A:
            async def close(self):
                if self._ws is not None:
                    await self._ws.close()
                    {write}
        """
    assert lint(FlagCheckThenActAcrossAwait, source.replace("self._open", "self._ws")) == []


def test_il101_ignores_state_of_parameters() -> None:
    source = """
        async def persist(run_state, session):
            if not run_state.saved:
                await session.save(run_state)
                run_state.saved = True
        """
    assert lint(FlagCheckThenActAcrossAwait, source) == []


@pytest.mark.parametrize(
    ("rule", "test"),
    [(FlagCheckThenActAcrossAwait, "self.x != 0"), (FlagLazyInitAcrossAwait, "self.x is None")],
)
def test_il101_and_il104_report_one_finding_per_check(rule: type[Rule], test: str) -> None:
    source = f"""
        class A:
            async def f(self):
                if {test}:
                    await g()
                    self.x = 1
                    self.x = 2
        """
    assert reported(rule, source) == ["self.x"]


def test_il102_uses_shared_classes_from_configuration() -> None:
    source = """
        class Registry:
            def get(self, k):
                if k not in self._d:
                    self._d[k] = []
                return self._d[k]
        """
    assert lint(FlagUnlockedCheckThenAct, source) == []
    context = LintContext(shared_classes=frozenset({"Registry"}))
    (found,) = lint(FlagUnlockedCheckThenAct, source, context)
    assert "the class `Registry` is declared in `shared-classes`" in found.message


def test_il102_names_the_evidence_as_a_related_location() -> None:
    (found,) = lint(
        FlagUnlockedCheckThenAct,
        """
        import threading as th

        class Service:
            def __init__(self):
                self._lock = th.RLock()

            def history(self, plan_id):
                if plan_id not in self._histories:
                    self._histories[plan_id] = []
                return self._histories[plan_id]

            def forget(self, plan_id):
                with self._lock:
                    del self._histories[plan_id]
        """,
    )
    assert code(found.node) == "self._histories[plan_id]"
    assert (
        "(the class uses `threading.RLock()` and writes `self._histories` under a lock)"
        in found.message
    )
    assert [r.message for r in found.related] == [
        "`self._histories` is checked here",
        "threading.RLock() here: shared with threads",
    ]


@pytest.mark.parametrize(
    "evidence",
    [
        "self._t = threading.Thread(target=self.run)",
        "self._pool.submit(self.get, 'k')",
        "loop.run_in_executor(None, self.get, 'k')",
        "asyncio.to_thread(self.get, 'k')",
    ],
)
def test_il102_recognizes_thread_evidence(evidence: str) -> None:
    source = f"""
        import asyncio
        import threading

        class S:
            def start(self, loop):
                {evidence}

            def get(self, k):
                if k not in self._d:
                    self._d[k] = []
        """
    assert reported(FlagUnlockedCheckThenAct, source) == ["self._d[k]"]


def test_il102_executor_evidence_covers_only_the_method_handed_over() -> None:
    source = """
        import asyncio

        class S:
            async def start(self):
                await asyncio.to_thread(self.run)

            def get(self, k):
                if k not in self._d:
                    self._d[k] = []
        """
    assert lint(FlagUnlockedCheckThenAct, source) == []


def test_il102_class_evidence_does_not_spread_to_other_classes() -> None:
    source = """
        import threading

        class Locked:
            def __init__(self):
                self._lock = threading.Lock()

        class Plain:
            def get(self, k):
                if k not in self._d:
                    self._d[k] = []
        """
    assert lint(FlagUnlockedCheckThenAct, source) == []


def test_il102_skips_init() -> None:
    source = """
        import threading

        class S:
            def __init__(self, d):
                self._lock = threading.Lock()
                if d is None:
                    self._d = {}
        """
    assert lint(FlagUnlockedCheckThenAct, source) == []


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(
    "source",
    [
        "async def f():\n    match await g():\n        case {'a': 1}:\n            return\n",
        "async def f(self):\n    while True:\n        if self.x: break\n    self.x = 1\n",
        "async def f(self):\n    try:\n        pass\n    except* ValueError:\n        self.x = 1\n",
        "def f(self):\n    global x\n    del x, self.y[0], (a, b)\n",
        "async def f(self):\n    if x := self.a: self.a = await x\n    else: pass\n",
        "lambda: (yield)\n",
        "async def f(self):\n    [x async for x in self.y if await x]\n    self.y.append(1)\n",
        "class C:\n    def f(cls):\n        with a as (b, c), d: pass\n",
    ],
)
def test_rules_do_not_raise_on_odd_code(rule: type[Rule], source: str) -> None:
    lint(rule, source)


@pytest.mark.parametrize(
    ("source", "clause"),
    [
        (
            "class Pool:\n    async def get(self):\n        if not self.conns:\n"
            "            await g()\n            self.conns.append(1)\n",
            "(assuming concurrent tasks share one `Pool`)",
        ),
        (
            "_conns = []\nasync def get():\n    if not _conns:\n"
            "        await g()\n        _conns.append(1)\n",
            "(`_conns` is module state, which every task on the event loop shares)",
        ),
    ],
)
def test_il101_message_says_why_the_state_is_taken_to_be_shared(source: str, clause: str) -> None:
    (found,) = lint(FlagCheckThenActAcrossAwait, source)
    assert f"with no lock held across both {clause}. " in found.message
