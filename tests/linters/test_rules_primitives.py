"""IL201 asyncio-primitive-in-init: the message states the hazard for the target Python."""

from __future__ import annotations

import pytest

from interlace.linters import LintContext, lint_source
from interlace.linters.rules.primitives import AvoidAsyncioPrimitiveInInit

IN_INIT = """\
import asyncio
class Client:
    def __init__(self):
        self.gate = asyncio.Event()
"""


def messages(
    source: str, version: tuple[int, int] = (3, 11), *, instance_primitives: str = "evidence"
) -> list[str]:
    context = LintContext(target_version=version, instance_primitives=instance_primitives)
    result = lint_source(source, [AvoidAsyncioPrimitiveInInit], context=context)
    return [f.message for f in result.findings]


@pytest.mark.parametrize(
    ("source", "version", "phrase"),
    [
        (IN_INIT, (3, 9), "Before Python 3.10 it binds at construction"),
        ("import asyncio\nL = asyncio.Lock()\n", (3, 12), "shared by every importer of this"),
        ("import asyncio\nclass C:\n    q = asyncio.Queue()\n", (3, 11), "every instance of the"),
        (IN_INIT + "CLIENT = Client()\n", (3, 11), "also instantiated at module level"),
    ],
)
def test_message_states_the_hazard_for_the_place_and_target(
    source: str, version: tuple[int, int], phrase: str
) -> None:
    [message] = messages(source, version)
    assert phrase in message


def test_fix_hint_names_the_assigned_attribute() -> None:
    [message] = messages(IN_INIT, (3, 9))
    assert "`if self.gate is None: self.gate = asyncio.Event()`" in message


@pytest.mark.parametrize("version", [(3, 10), (3, 11), (3, 13)])
def test_per_instance_primitives_without_evidence_are_not_reported_since_3_10(
    version: tuple[int, int],
) -> None:
    assert messages(IN_INIT, version) == []


@pytest.mark.parametrize("version", [(3, 7), (3, 9)])
def test_per_instance_primitives_are_always_reported_before_3_10(
    version: tuple[int, int],
) -> None:
    [message] = messages(IN_INIT, version)
    assert "Before Python 3.10 it binds at construction" in message


def test_instance_primitives_all_reports_them_without_evidence() -> None:
    [message] = messages(IN_INIT, instance_primitives="all")
    assert "Since Python 3.10 it binds to the first event loop that makes it wait" in message
    assert "only if this object is later used from a second loop" in message


def test_module_level_instantiation_is_a_related_location() -> None:
    result = lint_source(IN_INIT + "CLIENT = Client()\n", [AvoidAsyncioPrimitiveInInit])
    [finding] = result.findings
    assert [(r.row, r.column, r.message) for r in finding.related] == [
        (3, 9, "`__init__` runs wherever the object is built, usually before a loop runs"),
        (
            5,
            10,
            "`Client` is instantiated at module level here, so its Event outlives any one "
            "event loop",
        ),
    ]


@pytest.mark.parametrize(
    "source",
    [
        "from asyncio import Lock\nfrom threading import Lock\nL = Lock()\n",
        "import asyncio\nx: asyncio.Lock\ndef f(l: asyncio.Lock = None) -> asyncio.Event: ...\n",
        "import asyncio\nclass C:\n    def __init__(self):\n"
        "        self.f = lambda: asyncio.Lock()\n",
        "import asyncio\nclass C:\n    def setup(self):\n        self.l = asyncio.Lock()\n",
    ],
)
def test_no_finding_for_rebound_names_annotations_lambdas_and_other_methods(source: str) -> None:
    assert messages(source) == []


@pytest.mark.parametrize(("version", "count"), [((3, 9), 1), ((3, 10), 0), ((3, 12), 0)])
def test_main_block_primitives_are_flagged_only_before_3_10(
    version: tuple[int, int], count: int
) -> None:
    source = 'import asyncio\nif __name__ == "__main__":\n    Q = asyncio.Queue()\n'
    assert len(messages(source, version)) == count


@pytest.mark.parametrize(
    ("factory", "how"),
    [
        ("@functools.cache\ndef get():\n    return Client()\n", "returned by a `cache`-decorated"),
        ("@lru_cache(maxsize=1)\ndef get():\n    return Client()\n", "returned by a `lru_cache`-"),
        (
            '@pytest.fixture(scope="session")\ndef client():\n    yield Client()\n',
            'built by a pytest fixture with scope="session"',
        ),
        (
            '@pytest_asyncio.fixture(scope="module")\nasync def client():\n    return Client()\n',
            'built by a pytest fixture with scope="module"',
        ),
    ],
)
def test_long_lived_factories_are_evidence(factory: str, how: str) -> None:
    result = lint_source(IN_INIT + factory, [AvoidAsyncioPrimitiveInInit])
    [finding] = result.findings
    assert f"The object is also {how}" in finding.message
    assert how in finding.related[-1].message


@pytest.mark.parametrize(
    "factory",
    [
        "def get():\n    return Client()\n",
        "@pytest.fixture\ndef client():\n    return Client()\n",
        '@pytest.fixture(scope="function")\ndef client():\n    return Client()\n',
    ],
)
def test_plain_functions_and_function_scoped_fixtures_are_not_evidence(factory: str) -> None:
    assert messages(IN_INIT + factory) == []
    [message] = messages(IN_INIT + factory, instance_primitives="all")
    assert "Since Python 3.10 it binds to the first event loop" in message


@pytest.mark.parametrize(
    ("keeper", "how"),
    [
        (
            "_client = None\ndef get():\n    global _client\n    _client = Client()\n",
            "stored in the module-level `_client`",
        ),
        (
            "_CLIENTS = {}\ndef get(key):\n    _CLIENTS[key] = Client()\n",
            "cached in the module-level `_CLIENTS`",
        ),
        (
            "_CLIENTS = {}\ndef get(key):\n    return _CLIENTS.setdefault(key, Client())\n",
            "cached in the module-level `_CLIENTS`",
        ),
        (
            "class Holder:\n    @classmethod\n    def get(cls):\n        cls.client = Client()\n",
            "kept in the class attribute `cls.client`",
        ),
    ],
)
def test_instances_kept_beyond_one_call_are_evidence(keeper: str, how: str) -> None:
    [message] = messages(IN_INIT + keeper)
    assert f"The object is also {how} in this file" in message


@pytest.mark.parametrize(
    "singleton",
    [
        "    _instance = None\n    @classmethod\n    def get(cls):\n"
        "        if cls._instance is None:\n            cls._instance = cls()\n"
        "        return cls._instance\n",
        "    _instance = None\n    def __new__(cls):\n"
        "        if cls._instance is None:\n"
        "            cls._instance = super().__new__(cls)\n        return cls._instance\n",
    ],
)
def test_a_class_level_singleton_is_evidence_for_its_own_class(singleton: str) -> None:
    [message] = messages(IN_INIT + singleton)
    assert "kept in the class attribute `cls._instance`" in message


@pytest.mark.parametrize(
    "keeper",
    [
        "def get():\n    client = Client()\n    return client\n",
        "def get(cache):\n    cache['k'] = Client()\n",
        "def get(self):\n    self.client = Client()\n",
    ],
)
def test_locals_parameters_and_instance_attributes_are_not_evidence(keeper: str) -> None:
    assert messages(IN_INIT + keeper) == []


UNCONTENDED = """\
import asyncio
_LOCK = asyncio.Lock()
_SEEN = set()
async def first(key):
    async with _LOCK:
        if key in _SEEN:
            return False
        _SEEN.add(key)
        return True
"""


@pytest.mark.parametrize("version", [(3, 10), (3, 11), (3, 13)])
def test_a_lock_no_critical_section_suspends_in_is_not_reported_since_3_10(
    version: tuple[int, int],
) -> None:
    assert messages(UNCONTENDED, version) == []


def test_an_uncontended_lock_is_still_reported_before_3_10() -> None:
    # Before 3.10 it binds at construction; the exemption rests on 3.10's lazy binding.
    [message] = messages(UNCONTENDED, (3, 9))
    assert "Before Python 3.10 it binds at construction" in message


@pytest.mark.parametrize(
    "threads",
    [
        "import threading\n",
        "async def off():\n    await asyncio.to_thread(print)\n",
        "def off(loop):\n    loop.run_in_executor(None, print)\n",
        "def off(coro, loop):\n    asyncio.run_coroutine_threadsafe(coro, loop)\n",
    ],
)
def test_a_module_that_shows_threads_gets_no_exemption(threads: str) -> None:
    # One thread may hold the lock while another thread's loop waits on it.
    [message] = messages(UNCONTENDED + threads)
    assert "shared by every importer of this module" in message


@pytest.mark.parametrize(
    "use",
    [
        "async def f():\n    async with _LOCK:\n        await asyncio.sleep(0)\n",
        "async def f():\n    await _LOCK.acquire()\n",
        "def f():\n    return asyncio.Condition(_LOCK)\n",
        "async def f():\n    async with _LOCK:\n        async for _ in g():\n            pass\n",
        "async def f():\n    async with _LOCK:\n        yield\n",
        "def f():\n    global _LOCK\n    _LOCK = other_lock\n",
    ],
)
def test_any_use_that_can_make_it_wait_keeps_the_finding(use: str) -> None:
    assert len(messages(UNCONTENDED + use)) == 1


def test_a_public_lock_is_reported_because_importers_may_hold_it_across_an_await() -> None:
    assert len(messages(UNCONTENDED.replace("_LOCK", "LOCK"))) == 1


def test_an_uncontended_instance_lock_kept_at_module_level_is_not_reported() -> None:
    source = (
        "import asyncio\nclass C:\n    def __init__(self):\n        self._lock = asyncio.Lock()\n"
        "        self._n = 0\n    async def bump(self):\n        async with self._lock:\n"
        "            self._n += 1\nC_INSTANCE = C()\n"
    )
    assert messages(source) == []
    waiting = source.replace("self._n += 1", "await asyncio.sleep(self._n)")
    [message] = messages(waiting)
    assert "Keep one per event loop instead (look it up by `asyncio.get_running_loop()`)" in message


def test_fix_hint_before_3_10_is_lazy_creation_and_since_3_10_one_per_loop() -> None:
    # Lazy creation helps only where the primitive binds at construction; since 3.10 an object
    # that outlives its loop still carries a lazily created lock into the next loop.
    [old] = messages(IN_INIT, (3, 9))
    [new] = messages(IN_INIT, instance_primitives="all")
    assert "Create it lazily from async code" in old
    assert "Keep one per event loop instead" in new
