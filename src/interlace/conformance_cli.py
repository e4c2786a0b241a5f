"""``interlace conform MODULE[:ADAPTER] [--component NAME ...] [--max-examples N] [--seed N]``.

Checks a user's runtime against interlace.reference_impl with the conformance kit
(:mod:`interlace.conformance`): one verdict line per component on stdout, the
report of each component that does not conform after the verdicts. Exit status: 0 when every
checked component conforms, 1 when one or more do not, 2 for a usage error (an adapter that
cannot be imported or found, or that adapts none of the components).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

__all__ = ("COMPONENTS", "DEFAULT_MAX_EXAMPLES", "add_parser", "load_adapter", "run_conform")

from interlace._conformance_names import COMPONENTS, DEFAULT_MAX_EXAMPLES

EXIT_CONFORMS = 0
EXIT_DOES_NOT_CONFORM = 1
EXIT_ERROR = 2

MSG_ERROR = "interlace conform: error: {error}"
MSG_BAD_SPEC = (
    "{spec!r} is not MODULE or MODULE:ADAPTER: give an importable module and, after a colon, "
    "the name of the adapter in it (e.g. myruntime.conformance:ADAPTER)"
)
MSG_NO_MODULE = (
    "cannot import module {module!r} (from {spec!r}): {error}. Run from the directory that "
    "holds it, or install the package (the current directory is on the import path)"
)
MSG_NO_ADAPTER = (
    "module {module!r} has no attribute {name!r} (from {spec!r}): name the object whose "
    "attributes are your component factories"
)
MSG_SUMMARY = "{conform} of {checked} component(s) conform; {failed} do not; {skipped} not checked"

_HELP = (
    "Check your own runtime against interlace.reference_impl. ADAPTER (MODULE:NAME, or MODULE "
    "to use the module itself) is an object with one attribute per component you implement, "
    "each a factory of an object with the kit's operations: memory(max_messages) -> add(role, "
    "content), contents(); stream() -> put(item), close(), async get(); bus() -> "
    "subscribe(callback), unsubscribe(handle), async publish(payload); file_store(directory) "
    "-> save(key, value), load(key); container() -> get_container(); recovery() -> "
    "record_error(plan_id, message), error_count(plan_id). For each component, Hypothesis "
    "draws scenarios of these calls, interlace runs them concurrently under many schedules, "
    "and every run must be explained by the reference component used one call at a time. "
    "Prints one verdict line per component, then the report of each that does not conform "
    "(the shrunk scenario, the results, why no order of the reference explains them, the "
    "schedule). Exit status: 0 all checked components conform, 1 some do not, 2 usage error. "
    "See docs/stateful.md."
)


class AdapterError(ValueError):
    """MODULE:ADAPTER could not be resolved to an adapter."""


def load_adapter(spec: str) -> Any:
    """The adapter ``spec`` names: ``MODULE`` (the module itself) or ``MODULE:NAME`` (a
    dotted attribute path in it).

    Raises:
        AdapterError: the spec is malformed, the module cannot be imported, or the name is
            not in it.
    """
    module_name, _, name = spec.partition(":")
    if not module_name or (":" in spec and not name) or ":" in name:
        raise AdapterError(MSG_BAD_SPEC.format(spec=spec))
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise AdapterError(
            MSG_NO_MODULE.format(module=module_name, spec=spec, error=error)
        ) from error
    adapter: Any = module
    for part in name.split(".") if name else ():
        try:
            adapter = getattr(adapter, part)
        except AttributeError:
            raise AdapterError(
                MSG_NO_ADAPTER.format(module=module_name, name=name, spec=spec)
            ) from None
    return adapter


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``conform`` subcommand to ``interlace``'s argparse subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "conform",
        help="check your runtime's components against interlace.reference_impl",
        description=_HELP,
    )
    parser.add_argument(
        "adapter",
        metavar="MODULE[:ADAPTER]",
        help="the adapter: an importable module, and the name of the adapter object in it",
    )
    parser.add_argument(
        "-c",
        "--component",
        action="append",
        choices=COMPONENTS,
        default=None,
        metavar="NAME",
        help=f"check only this component (repeatable; one of {', '.join(COMPONENTS)}; "
        "default: every one the adapter has)",
    )
    parser.add_argument(
        "--max-examples",
        type=_positive,
        default=DEFAULT_MAX_EXAMPLES,
        metavar="N",
        help=f"Hypothesis examples per component (default {DEFAULT_MAX_EXAMPLES}); more finds "
        "rarer bugs and takes longer",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="Hypothesis's seed (default 0): the same seed gives the same verdicts",
    )
    parser.set_defaults(run=run_conform)
    return parser


def run_conform(args: argparse.Namespace) -> int:
    """Run ``interlace conform``; the exit status."""
    try:
        from interlace import conformance
    except ImportError as error:
        print(MSG_ERROR.format(error=error), file=sys.stderr)
        return EXIT_ERROR
    try:
        adapter = load_adapter(args.adapter)
        if not conformance.components(adapter):
            raise AdapterError(
                f"{args.adapter} ({adapter!r}) has none of the kit's components as an "
                f"attribute: give it one or more of {', '.join(conformance.COMPONENTS)}, each a "
                "factory of your implementation of that component"
            )
    except AdapterError as error:
        print(MSG_ERROR.format(error=error), file=sys.stderr)
        return EXIT_ERROR

    def show(verdict: conformance.ComponentVerdict) -> None:
        print(verdict.line(), flush=True)

    verdicts = conformance.check(
        adapter,
        only=args.component,
        max_examples=args.max_examples,
        random_seed=args.seed,
        progress=show,
    )
    failed = [v for v in verdicts if v.conforms is False]
    for verdict in failed:
        print(f"\n== {verdict.component} ==\n{verdict.report}")
    checked = [v for v in verdicts if v.conforms is not None]
    print(
        MSG_SUMMARY.format(
            conform=len(checked) - len(failed),
            checked=len(checked),
            failed=len(failed),
            skipped=len(verdicts) - len(checked),
        ),
        file=sys.stderr,
    )
    return EXIT_DOES_NOT_CONFORM if failed else EXIT_CONFORMS
