"""IL301, IL302, IL303: the rule classes' examples and the hard cases."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from interlace.linters._rule import LintContext, Report, Rule
from interlace.linters.rules.suspension import (
    FlagIterateSharedWhileAwaiting,
    FlagPendingTasksNotCancelled,
    FlagStaleRestoreAcrossAwait,
)

RULES: tuple[type[Rule], ...] = (
    FlagStaleRestoreAcrossAwait,
    FlagPendingTasksNotCancelled,
    FlagIterateSharedWhileAwaiting,
)


def lint(rule: type[Rule], source: str, context: LintContext | None = None) -> list[Report]:
    """Run one rule over ``source`` in a batched traversal and return its reports."""
    instance = rule(context or LintContext())
    cst.visit_batched(cst.parse_module(textwrap.dedent(source)), [instance])
    return instance.reports


def code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module(body=()).code_for_node(node).split())


def reported(rule: type[Rule], source: str) -> list[str]:
    """Return the source of each reported node."""
    return [code(r.node) for r in lint(rule, source)]


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


SEED_000_STATE_CONTEXT = """
    class BaseAgent:
        @asynccontextmanager
        async def state_context(self, new_state):
            old_state = self.state
            self.state = new_state
            try:
                yield
            except Exception as e:
                self.state = AgentState.ERROR
                raise e
            finally:
                self.state = old_state
    """


def test_il301_reports_seed_000_state_context_restore_with_save_and_yield() -> None:
    (found,) = lint(FlagStaleRestoreAcrossAwait, SEED_000_STATE_CONTEXT)
    assert code(found.node) == "self.state = old_state"
    assert [(code(r.node), r.message) for r in found.related] == [
        ("old_state = self.state", "`self.state` is saved to `old_state` here"),
        ("yield", "another task can write it while this one is suspended"),
    ]
    assert found.message.startswith(
        "`self.state` is restored from the copy saved in `old_state` after a suspension point "
        "(assuming concurrent tasks share one `BaseAgent`)."
    )


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            class A:
                async def f(self):
                    old = self.x
                    await g()
                    self.x = 1
                    self.x = old
            """,
            id="suspension-before-the-overwrite-only",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    old = self.x
                    self.y = 1
                    await g()
                    self.y = old
            """,
            id="restored-into-a-different-attribute",
        ),
        pytest.param(
            """
            class A:
                def f(self):
                    old = self.x
                    self.x = 1
                    g()
                    self.x = old
            """,
            id="synchronous-function",
        ),
    ],
)
def test_il301_stays_silent_on(source: str) -> None:
    assert lint(FlagStaleRestoreAcrossAwait, source) == []


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            class A:
                async def f(self):
                    old = self.x
                    self.x = 1
                    async for _ in self.stream():
                        pass
                    self.x = old
            """,
            id="async-for",
        ),
        pytest.param(
            """
            class A:
                async def f(self):
                    old = self.x
                    self.x = 1
                    async with self.session():
                        pass
                    self.x = old
            """,
            id="async-with-that-is-not-a-lock",
        ),
    ],
)
def test_il301_reports(source: str) -> None:
    assert reported(FlagStaleRestoreAcrossAwait, source) == ["self.x = old"]


SEED_000_STREAM = """
    import asyncio

    class BaseAgent:
        async def stream(self):
            while not (self.task_done.is_set() or self.output_queue.empty()):
                queue_task = asyncio.create_task(self.output_queue.get())
                task_done_task = asyncio.create_task(self.task_done.wait())
                done, pending = await asyncio.wait(
                    [queue_task, task_done_task], return_when=asyncio.FIRST_COMPLETED
                )
                if queue_task in done:
                    yield queue_task.result()
    """


def test_il302_reports_seed_000_stream_at_the_wait_call() -> None:
    (found,) = lint(FlagPendingTasksNotCancelled, SEED_000_STREAM)
    assert code(found.node).startswith("asyncio.wait(")
    assert found.message.endswith("`for task in pending: task.cancel()`.")


def wait_then(after: str, *, imports: str = "import asyncio") -> str:
    """A coroutine that waits on two tasks with FIRST_COMPLETED, then runs ``after``."""
    body = textwrap.indent(textwrap.dedent(after), "    ")
    return (
        f"{imports}\n"
        "async def f(q, e):\n"
        "    a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())\n"
        "    done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)\n"
        f"{body}"
    )


@pytest.mark.parametrize(
    "after",
    [
        pytest.param("for t in pending:\n    t.cancel()\nreturn done\n", id="cancel-loop"),
        pytest.param("a.cancel()\nb.cancel()\n", id="cancel-by-task-name"),
        pytest.param("await cancel_and_wait(pending)\n", id="helper-named-cancel"),
        pytest.param("self._pending = pending\n", id="stored-for-later"),
        pytest.param("await asyncio.gather(*pending)\n", id="awaited"),
        pytest.param(
            "try:\n    x = done.pop().result()\n"
            "finally:\n    for t in pending:\n        t.cancel()\n",
            id="later-try-finally",
        ),
        pytest.param(
            "if a in done:\n    for t in pending:\n        t.cancel()\n    return 1\n"
            "for t in pending:\n    t.cancel()\n",
            id="cancelled-on-both-branches",
        ),
    ],
)
def test_il302_stays_silent_when_every_path_cancels(after: str) -> None:
    assert lint(FlagPendingTasksNotCancelled, wait_then(after)) == []


@pytest.mark.parametrize(
    "after",
    [
        pytest.param("return done\n", id="nothing-cancels"),
        pytest.param(
            "if a in done:\n    raise ValueError\nfor t in pending:\n    t.cancel()\n",
            id="raise-before-cancel",
        ),
        pytest.param("print(len(pending))\n", id="only-inspected"),
        pytest.param("c.cancel()\n", id="cancels-a-task-not-in-the-wait"),
    ],
)
def test_il302_reports_when_a_path_leaks(after: str) -> None:
    assert len(lint(FlagPendingTasksNotCancelled, wait_then(after))) == 1


def test_il302_ignores_a_single_task_without_timeout() -> None:
    source = """
        import asyncio
        async def f(call):
            task = asyncio.create_task(call())
            done, _ = await asyncio.wait({task}, return_when=asyncio.FIRST_COMPLETED)
            return done.pop().result()
        """
    assert lint(FlagPendingTasksNotCancelled, source) == []
    with_timeout = source.replace("FIRST_COMPLETED)", "FIRST_COMPLETED, timeout=1)")
    assert len(lint(FlagPendingTasksNotCancelled, with_timeout)) == 1


def test_il302_follows_the_else_block_of_the_try_around_the_wait() -> None:
    source = """
        import asyncio
        async def f(q, e):
            a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())
            try:
                await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:
                raise
            else:
                await cancel_and_drain(a, b)
        """
    assert lint(FlagPendingTasksNotCancelled, source) == []


def test_il302_reports_a_loop_iteration_that_leaks() -> None:
    source = """
        import asyncio
        async def f(q, stop):
            while True:
                get = asyncio.create_task(q.get())
                done, pending = await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    get.cancel()
                    break
        """
    assert len(lint(FlagPendingTasksNotCancelled, source)) == 1


@pytest.mark.parametrize(
    "imports",
    [
        "from asyncio import wait as w, FIRST_COMPLETED as F",
        "import asyncio as aio\nw = aio.wait\nF = aio.FIRST_COMPLETED",
    ],
)
def test_il302_resolves_import_aliases(imports: str) -> None:
    source = (
        f"{imports}\nasync def f(tg, q):\n"
        "    a, b = tg.create_task(q.get()), tg.create_task(q.get())\n"
        "    done, pending = await w({a, b}, return_when=F)\n"
    )
    expected = 1 if imports.startswith("from") else 0
    assert len(lint(FlagPendingTasksNotCancelled, source)) == expected


@pytest.mark.parametrize(
    ("waited", "target", "expected"),
    [
        # Futures or tasks some other object returned: not this function's to cancel.
        ("[state.wait_for_position(), assignment.unassign_future]", (3, 11), 0),
        ("[fut, closing]", (3, 12), 0),
        # Before 3.11 a coroutine call in the list is wrapped into a new task.
        ("[state.wait_for_position(), assignment.unassign_future]", (3, 10), 1),
        ("[fut, closing]", (3, 10), 1),
        # Tasks it starts, inline, bound to a local (after a `None`), or with `:=`.
        ("[asyncio.ensure_future(q.get()), closing]", (3, 11), 1),
        ("[task, closing]", (3, 11), 1),
        ("[started, closing]", (3, 11), 1),
    ],
)
def test_il302_counts_only_tasks_the_function_starts_on_311_and_later(
    waited: str, target: tuple[int, int], expected: int
) -> None:
    source = f"""
        import asyncio
        async def f(state, assignment, closing, q, loop):
            fut = state.reset()
            task = None
            task = asyncio.create_task(q.get())
            if (started := loop.create_task(q.get())) is None:
                return
            await asyncio.wait({waited}, timeout=1, return_when=asyncio.FIRST_COMPLETED)
        """
    context = LintContext(target_version=target)
    assert len(lint(FlagPendingTasksNotCancelled, source, context)) == expected


def test_il303_reports_the_iterable_with_suspension_and_mutation_as_related() -> None:
    (found,) = lint(
        FlagIterateSharedWhileAwaiting,
        """
        class Bus:
            def unsubscribe(self, cb):
                self._subs.remove(cb)
            async def publish(self, e):
                for cb in self._subs:
                    await cb(e)
        """,
    )
    assert code(found.node) == "self._subs"
    assert [(code(r.node), r.message) for r in found.related] == [
        ("await cb(e)", "the loop body suspends here"),
        ("self._subs.remove(cb)", "`self._subs` is mutated in place here"),
    ]


@pytest.mark.parametrize(
    "loop",
    [
        pytest.param("for cb in list(self._subs):", id="list"),
        pytest.param("for cb in tuple(self._subs):", id="tuple"),
        pytest.param("for cb in self._subs.copy():", id="copy"),
        pytest.param("for cb in self._subs[:]:", id="slice"),
        pytest.param("for cb in sorted(self._subs):", id="sorted"),
    ],
)
def test_il303_stays_silent_on_a_snapshot(loop: str) -> None:
    source = f"""
        class Bus:
            def unsubscribe(self, cb):
                self._subs.remove(cb)
            async def publish(self, e):
                {loop}
                    await cb(e)
        """
    assert lint(FlagIterateSharedWhileAwaiting, source) == []


def test_il303_keys_containers_by_class() -> None:
    source = """
        class A:
            def drop(self, cb):
                self._subs.remove(cb)
        class B:
            async def publish(self, e):
                for cb in self._subs:
                    await cb(e)
        """
    assert lint(FlagIterateSharedWhileAwaiting, source) == []


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(
    "source",
    [
        "async def f():\n    match await g():\n        case {'a': 1}:\n            return\n",
        "async def f(self):\n    done, (p, q) = await asyncio.wait(x, return_when=1)\n",
        "async def f(self):\n    await asyncio.wait(return_when=FIRST_COMPLETED)\n",
        "async def f(self):\n    for self.x in self.y: await z\n",
        "async def f(self):\n    try:\n        pass\n    except* ValueError:\n        self.x = 1\n",
        "lambda: (yield)\n",
        "async def f(self):\n    x = y = self.a\n    self.a = 1\n    await g\n    self.a = x\n",
    ],
)
def test_rules_do_not_raise_on_odd_code(rule: type[Rule], source: str) -> None:
    lint(rule, source)
