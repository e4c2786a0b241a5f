"""Declared sharing (``sharing = "declared"``): the rules about shared state report only inside
the classes a project declares in ``task-shared-classes`` or ``shared-classes``."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import libcst as cst
import pytest

from interlace.errors import ConfigError
from interlace.linters import lint_source
from interlace.linters._config import LintConfig, load_config
from interlace.linters._rule import LintContext
from interlace.linters._run import lint_paths
from interlace.linters._sharing import ClassPatterns, enclosing_classes
from interlace.linters.cli import lint_main
from interlace.linters.rules import all_rules

# One finding per rule, each in its own class or at module level. Rows are asserted below.
SOURCE = dedent(
    """\
    import asyncio
    import threading
    import pkg

    LOCK = asyncio.Lock()


    class Cache:
        async def get(self, key):
            if key not in self.entries:
                value = await fetch(key)
                self.entries[key] = value
            return self.entries[key]


    class Agent(Cache):
        async def step(self):
            if self.turns < 3:
                await asyncio.sleep(0)
                self.turns += 1


    class Worker(pkg.BaseAgent):
        async def step(self):
            if self.turns < 3:
                await asyncio.sleep(0)
                self.turns += 1


    class SqlStorage:
        def close(self):
            self.rows.remove(None)

        async def flush(self):
            for row in self.rows:
                await write(row)


    class Registry:
        def __init__(self):
            self._lock = threading.Lock()

        def get(self, k):
            if k not in self._d:
                self._d[k] = []
            return self._d[k]

        def drop(self, k):
            with self._lock:
                self._d.pop(k, None)


    async def first(q, e):
        a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())
        done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)
        return done


    async def tick():
        global COUNT
        if COUNT < 3:
            await asyncio.sleep(0)
            COUNT += 1
    """
)
ROWS = {
    "IL201 LOCK": 5,
    "IL101 Cache": 12,
    "IL101 Agent": 20,
    "IL101 Worker": 27,
    "IL303 SqlStorage": 35,
    "IL102 Registry": 45,
    "IL302 first": 55,
    "IL101 tick": 63,
}


def found(**context: object) -> set[str]:
    result = lint_source(SOURCE, all_rules(), context=LintContext(**context))  # type: ignore[arg-type]
    by_row = {row: name for name, row in ROWS.items()}
    assert not result.errors
    assert {f.row for f in result.findings} <= set(by_row), result.findings
    return {by_row[f.row] for f in result.findings if by_row[f.row].startswith(f.code)}


def test_inferred_sharing_reports_everything_and_ignores_task_shared_classes() -> None:
    assert found() == set(ROWS)
    assert found(task_shared_classes=frozenset({"Agent"})) == set(ROWS)


def test_declared_sharing_keeps_only_findings_inside_declared_classes() -> None:
    kept = found(sharing="declared", task_shared_classes=frozenset({"Worker"}))
    # IL201 and IL302 are not about shared state and stay; module-level state is not declared.
    assert kept == {"IL201 LOCK", "IL302 first", "IL101 Worker"}


def test_a_declared_class_brings_its_base_classes_of_the_same_file() -> None:
    # Agent's instances run Cache.get too, so Cache's state is shared through them.
    kept = found(sharing="declared", task_shared_classes=frozenset({"Agent"}))
    assert kept == {"IL201 LOCK", "IL302 first", "IL101 Agent", "IL101 Cache"}


def test_a_declared_base_brings_its_subclasses_and_dotted_bases_match_their_last_part() -> None:
    kept = found(sharing="declared", task_shared_classes=frozenset({"Cache", "BaseAgent"}))
    assert kept == {"IL201 LOCK", "IL302 first", "IL101 Agent", "IL101 Cache", "IL101 Worker"}


def test_entries_may_be_fnmatch_patterns() -> None:
    kept = found(sharing="declared", task_shared_classes=frozenset({"*Storage"}))
    assert kept == {"IL201 LOCK", "IL302 first", "IL303 SqlStorage"}


def test_thread_rules_need_shared_classes_and_task_rules_accept_either_list() -> None:
    tasks_only = found(sharing="declared", task_shared_classes=frozenset({"Registry"}))
    assert "IL102 Registry" not in tasks_only
    threads = found(sharing="declared", shared_classes=frozenset({"Registry", "SqlStorage"}))
    assert threads == {"IL201 LOCK", "IL302 first", "IL102 Registry", "IL303 SqlStorage"}


def test_il102_reads_patterns_and_base_classes_in_shared_classes() -> None:
    source = dedent(
        """\
        class Pool(base.ThreadedPool):
            def get(self, k):
                if k not in self._d:
                    self._d[k] = []
                return self._d[k]
        """
    )
    rules = [r for r in all_rules() if r.code == "IL102"]
    assert lint_source(source, rules).findings == ()
    for declared in ({"ThreadedPool"}, {"*Pool"}):
        context = LintContext(shared_classes=frozenset(declared))
        (finding,) = lint_source(source, rules, context=context).findings
        assert "the class `Pool` is declared in `shared-classes`" in finding.message


def test_a_finding_belongs_to_the_innermost_class_and_not_to_a_class_it_names() -> None:
    module = cst.parse_module(
        dedent(
            """\
            @deco(Shared)
            class Outer(Shared):
                def method(self):
                    def helper():
                        x = 1
                    class Inner:
                        y = 2
            z = 3
            """
        )
    )
    outer = module.body[0]
    assert isinstance(outer, cst.ClassDef)
    names = [n for n in _all(module) if isinstance(n, cst.Name)]
    x, y, z = (next(n for n in names if n.value == v) for v in "xyz")
    decorator_arg = next(n for n in names if n.value == "Shared")
    owners, classes = enclosing_classes(module, [x, y, z, decorator_arg])
    assert [c.name.value for c in classes] == ["Outer", "Inner"]
    assert owners[id(x)] is outer
    assert owners[id(y)] is classes[1]
    assert owners[id(z)] is None
    assert owners[id(decorator_arg)] is None


def _all(node: cst.CSTNode) -> list[cst.CSTNode]:
    out = [node]
    for child in node.children:
        out.extend(_all(child))
    return out


def test_declared_closure_follows_chains_both_ways_within_a_file() -> None:
    module = cst.parse_module(
        "class A: pass\nclass B(A): pass\nclass C(B): pass\nclass D(C): pass\nclass E: pass\n"
    )
    _, classes = enclosing_classes(module, ())
    ids = ClassPatterns({"C"}).declared(classes)
    assert [c.name.value for c in classes if id(c) in ids] == ["A", "B", "C", "D"]
    assert ClassPatterns(()).declared(classes) == set()


def test_declared_without_any_class_is_a_config_error(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.interlace.lint]\nsharing = "declared"\n', encoding="utf-8"
    )
    config = load_config(project / "pyproject.toml")
    with pytest.raises(ConfigError) as info:
        lint_paths([], config=config, use_cache=False)
    assert str(info.value) == (
        f'sharing = "declared" but neither task-shared-classes nor shared-classes in '
        f"{project / 'pyproject.toml'} [tool.interlace.lint] lists a class, so IL101, IL102, "
        "IL104, IL301 and IL303 could report nothing; declare the classes whose instances "
        'concurrent tasks share, e.g. task-shared-classes = ["Agent", "*Storage"], or use '
        'sharing = "inferred"'
    )
    assert lint_paths([], config=LintConfig(root=project), use_cache=False).errors == []


def test_cli_sharing_flag_overrides_the_file_and_reaches_the_cache_key(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.interlace.lint]\ntask-shared-classes = ["Worker"]\n', encoding="utf-8"
    )
    (project / "a.py").write_text(SOURCE, encoding="utf-8")

    def rows(*flags: str) -> list[int]:
        assert lint_main(["--format", "json", "--extend-select", "IL102", *flags]) == 1
        return [f["location"]["row"] for f in json.loads(capsys.readouterr().out)]

    everything = rows()
    assert len(everything) == len(ROWS)
    # Same file, warm cache: the declared run must not be answered with the inferred results.
    assert rows("--sharing", "declared") == sorted(
        ROWS[k] for k in ("IL201 LOCK", "IL101 Worker", "IL302 first")
    )
    assert rows() == everything


def test_cli_declared_without_classes_exits_2_with_the_message(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "a.py").write_text(SOURCE, encoding="utf-8")
    assert lint_main(["--no-cache", "--sharing", "declared"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith('interlace lint: error: sharing = "declared" but neither')
    assert "task-shared-classes" in err


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        (["Agent", "*Storage", "Base?", "Ag[ae]nt", "[A-Z]*Pool"], True),
        (["Foo-Bar"], False),
        (["pkg.Agent"], False),
        (["*Agent\n"], False),
        ([""], False),
        (["not a name"], False),
        ("Agent", False),
        ([1], False),
    ],
)
def test_class_patterns_are_names_or_fnmatch_patterns(value: object, accepted: bool) -> None:
    from interlace.linters._sharing import check_class_patterns

    assert (check_class_patterns(value) is not None) is accepted
