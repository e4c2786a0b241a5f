"""The conformance kit: the reference conforms, the replicas fail where the catalog says they
are buggy, and ``interlace conform`` reports it with its exit status."""

from __future__ import annotations

import types

import pytest
from hypothesis import settings

from interlace import conformance
from interlace.cli import main
from interlace.fixtures import conformance as replicas
from interlace.stateful import NotLinearizableError

# Few examples where a component must conform (each costs its full budget); the failing ones
# stop at their first failure and shrink it.
PASSING_EXAMPLES = 8


def test_the_reference_conforms_in_every_component() -> None:
    verdicts = conformance.check(conformance.REFERENCE, max_examples=PASSING_EXAMPLES)
    assert [(v.component, v.conforms) for v in verdicts] == [
        (name, True) for name in conformance.COMPONENTS
    ]


# (adapter, component, catalog entry reproduced on that replica)
BUGGY = [
    ("REPORTED", "stream", "S000-07"),
    ("FIXED", "bus", "S002-19"),
    ("REPORTED", "file_store", "S002-06"),
    ("REPORTED", "container", "S002-12"),
    ("REPORTED", "recovery", "S003-01"),
]


@pytest.mark.parametrize(("adapter", "component", "entry"), BUGGY)
def test_a_replica_the_catalog_finds_buggy_does_not_conform(
    adapter: str, component: str, entry: str
) -> None:
    (verdict,) = conformance.check(getattr(replicas, adapter), only=[component])
    assert verdict.conforms is False, f"{entry}: {verdict.line()}"
    assert verdict.scenario is not None
    assert "no linearization explains" in verdict.report
    assert verdict.line().startswith(f"{component}: DOES NOT CONFORM (shrunk to ")


def test_the_fixed_container_replica_conforms_as_the_catalog_says() -> None:
    (verdict,) = conformance.check(replicas.FIXED, only=["container"], max_examples=20)
    assert verdict.conforms is True, verdict.report


def test_a_component_the_adapter_lacks_is_reported_not_checked() -> None:
    adapter = types.SimpleNamespace(container=conformance.REFERENCE.container)
    verdicts = conformance.check(adapter, only=["container", "memory"], max_examples=3)
    assert [(v.component, v.conforms) for v in verdicts] == [("container", True), ("memory", None)]
    assert verdicts[1].line() == "memory: not checked (the adapter has no 'memory')"


def test_an_adapter_with_no_component_is_refused_with_the_names_it_needs() -> None:
    with pytest.raises(ValueError, match="has none of the kit's components") as caught:
        conformance.check(types.SimpleNamespace(other=list))
    assert "memory, stream, bus, file_store, container, recovery" in str(caught.value)


def test_a_factory_that_is_not_callable_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"container of adapter .* is 3, which is not callable"):
        conformance.machine(types.SimpleNamespace(container=3), "container")


def test_an_unknown_component_is_refused_naming_the_components() -> None:
    with pytest.raises(ValueError, match="'cache' is not a component"):
        conformance.machine(conformance.REFERENCE, "cache")


def test_a_kit_machine_runs_as_a_test_case_and_fails_with_the_report() -> None:
    case = conformance.machine(replicas.REPORTED, "container").TestCase
    case.settings = settings(case.settings, database=None, derandomize=True)
    with pytest.raises(NotLinearizableError, match="get_container"):
        case("runTest").runTest()


def test_conform_exits_0_with_a_verdict_line_when_every_component_conforms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = "interlace.conformance:REFERENCE"
    assert main(["conform", spec, "-c", "container", "--max-examples", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("container: conforms (")
    assert "1 of 1 component(s) conform; 0 do not; 0 not checked" in err


def test_conform_exits_1_and_prints_the_report_when_a_component_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["conform", "interlace.fixtures.conformance:REPORTED", "-c", "container"]) == 1
    out, _ = capsys.readouterr()
    assert out.startswith("container: DOES NOT CONFORM (shrunk to 2 calls;")
    assert "== container ==" in out
    assert "no linearization explains" in out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:ADAPTER", "cannot import module 'no_such_module_xyz'"),
        ("interlace.fixtures.conformance:NOPE", "has no attribute 'NOPE'"),
        ("interlace.fixtures.conformance:", "is not MODULE or MODULE:ADAPTER"),
        ("os", "has none of the kit's components"),
    ],
)
def test_conform_exits_2_with_a_clear_message_for_a_bad_adapter(
    spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conform", spec]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("interlace conform: error: ")
    assert message in err


def test_conform_help_explains_the_adapter_and_the_exit_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["conform", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "memory(max_messages)" in out
    assert "0 all checked components conform, 1 some do not, 2 usage error" in out
