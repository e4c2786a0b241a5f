"""Shard reports and ``interlace merge``: one verdict per exploration from the JSON each
shard wrote (``--interlace-report-dir``, ``interlace explore --report-dir``).

A shard needs nothing from the others: the same code, the same settings and seed, and its
``K/N``. Its report holds what the merge needs: the lowest failing schedule index it found
(with the shrunk failure's token) and whether it exhausted its part. The merged failure is
the one at the lowest index of any shard, which is the one a single exploration reports;
"exhausted" holds only when every shard exhausted its part.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from interlace._core.result import Exploration

__all__ = (
    "REPORT_VERSION",
    "Verdict",
    "add_merge_parser",
    "merge_reports",
    "read_reports",
    "report_payload",
    "write_report",
)

REPORT_VERSION = 1
_KEY = "interlace_report"
_SAME = ("seed", "strategy", "max_schedules")
"""What every shard of one exploration must share (else they split different spaces)."""

MSG_NO_DIR = (
    "interlace merge: error: {path!r} is not a directory: pass the --report-dir the shards wrote to"
)
MSG_NO_REPORTS = (
    "interlace merge: error: no shard reports in {path!r} (files named *.json holding an "
    "{key!r} object): run the shards with --interlace-report-dir={path} (pytest) or "
    "interlace explore --report-dir {path}"
)
MSG_BAD_REPORT = "interlace merge: error: {path!r} is not a shard report: {why}"
MSG_MIXED = (
    "{name}: the shards disagree on {what} ({values}): they explored different schedule "
    "spaces and cannot be merged; run every shard with the same settings and seed"
)
MSG_FAILED = "{name}: {kind} at schedule {index} (shard {shard}), token {token}"
MSG_MISSING = "; shards {missing} of {total} missing, one of them may hold an earlier failure"
MSG_EXHAUSTED = "{name}: exhausted (every one of {total} shards exhausted its part, {schedules})"
MSG_PASSED = "{name}: passed ({total} shards, {schedules}, not exhausted)"
MSG_INCOMPLETE = "{name}: incomplete: shards {missing} of {total} missing, no failure in the others"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def report_payload(name: str, exploration: Exploration, max_schedules: int) -> dict[str, Any]:
    """The JSON object a shard writes for the exploration ``name`` (a test id, a target)."""
    failure = exploration.failure
    shard = exploration.shard or (1, 1)
    return {
        _KEY: REPORT_VERSION,
        "name": name,
        "shard": list(shard),
        "seed": exploration.seed,
        "strategy": exploration.strategy,
        "max_schedules": max_schedules,
        "schedules": exploration.schedules,
        "exhausted": exploration.exhausted,
        "failure_index": exploration.failure_index,
        "failure": None
        if failure is None
        else {
            "kind": failure.kind,
            "token": failure.token,
            "label": failure.label,
            "report": failure.report,
        },
    }


def write_report(directory: Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` in ``directory`` under a name of its own (exploration and shard)."""
    directory.mkdir(parents=True, exist_ok=True)
    name = str(payload["name"])
    k, n = payload["shard"]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:].strip("_.") or "exploration"
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    path = directory / f"{slug}-{digest}.shard-{k}-of-{n}.json"
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return path


def read_reports(directory: Path) -> list[dict[str, Any]]:
    """Every shard report in ``directory``.

    Raises:
        ValueError: a ``*.json`` file holds an object that claims to be a report but is
            malformed; the message names the file.
    """
    reports = []
    for path in sorted(directory.glob("*.json")):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(payload, dict) or _KEY not in payload:
            continue
        problem = _malformed(payload)
        if problem:
            raise ValueError(MSG_BAD_REPORT.format(path=str(path), why=problem))
        reports.append(payload)
    return reports


def _malformed(payload: dict[str, Any]) -> str:
    if payload[_KEY] != REPORT_VERSION:
        return f"version {payload[_KEY]!r}, this interlace reads version {REPORT_VERSION}"
    shard = payload.get("shard")
    if (
        not isinstance(shard, list)
        or len(shard) != 2
        or not all(isinstance(n, int) for n in shard)
        or not 1 <= shard[0] <= shard[1]
    ):
        return f"shard {shard!r} is not [K, N] with 1 <= K <= N"
    for key in ("name", "exhausted", "schedules", "failure_index", "failure", *_SAME):
        if key not in payload:
            return f"it has no {key!r}"
    return ""


@dataclass
class Verdict:
    """The merged outcome of one exploration's shards.

    Attributes:
        name: the exploration (test id or target).
        outcome: ``"failed"``, ``"exhausted"``, ``"passed"``, ``"incomplete"`` (shards
            missing, no failure in the others) or ``"mixed"`` (shards of different spaces).
        line: the verdict in words.
        failure: the report of the failure at the lowest index, or None.
        missing: the shards (K) with no report.
    """

    name: str
    outcome: str
    line: str
    failure: dict[str, Any] | None = None
    failure_index: int | None = None
    missing: list[int] = field(default_factory=list)
    schedules: int = 0


def merge_reports(reports: list[dict[str, Any]]) -> list[Verdict]:
    """One verdict per exploration, in name order."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_name.setdefault(str(report["name"]), []).append(report)
    return [_merge(name, group) for name, group in sorted(by_name.items())]


def _merge(name: str, group: list[dict[str, Any]]) -> Verdict:
    for what in ("shard count", *_SAME):
        values = sorted(
            {json.dumps(r["shard"][1] if what == "shard count" else r[what]) for r in group}
        )
        if len(values) > 1:
            line = MSG_MIXED.format(name=name, what=what, values=", ".join(values))
            return Verdict(name, "mixed", line)
    total = group[0]["shard"][1]
    present = {r["shard"][0] for r in group}
    missing = sorted(set(range(1, total + 1)) - present)
    schedules = sum(int(r["schedules"]) for r in group)
    failed = [r for r in group if r["failure"] is not None and r["failure_index"] is not None]
    if failed:
        first = min(failed, key=lambda r: (r["failure_index"], r["shard"][0]))
        line = MSG_FAILED.format(
            name=name,
            kind=first["failure"]["kind"],
            index=first["failure_index"],
            shard=f"{first['shard'][0]}/{total}",
            token=first["failure"]["token"],
        )
        if missing:
            line += MSG_MISSING.format(missing=_listed(missing), total=total)
        return Verdict(
            name, "failed", line, first["failure"], first["failure_index"], missing, schedules
        )
    counted = _plural(schedules, "schedule")
    if missing:
        line = MSG_INCOMPLETE.format(name=name, missing=_listed(missing), total=total)
        return Verdict(name, "incomplete", line, missing=missing, schedules=schedules)
    if all(r["exhausted"] for r in group):
        line = MSG_EXHAUSTED.format(name=name, total=total, schedules=counted)
        return Verdict(name, "exhausted", line, schedules=schedules)
    line = MSG_PASSED.format(name=name, total=total, schedules=counted)
    return Verdict(name, "passed", line, schedules=schedules)


def _listed(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers)


EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_merge_parser(subparsers: Any) -> argparse.ArgumentParser:
    """``interlace merge DIR``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "merge",
        help="combine the reports of sharded explorations into one verdict each",
        description="Combine the JSON reports that shards (--interlace-shard=K/N with "
        "--interlace-report-dir, or interlace explore --shard K/N --report-dir) wrote into "
        "one verdict per exploration: the failure at the lowest schedule index of any shard "
        "(the one a single exploration reports), 'exhausted' only when every shard "
        "exhausted its part. Exit 0 when none failed, 1 when one did, 2 when shards are "
        "missing or disagree.",
    )
    parser.add_argument("directory", metavar="DIR", help="the directory the shards wrote to")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(run=run_merge)
    return parser


def run_merge(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``interlace merge`` and return the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    directory = Path(args.directory)
    if not directory.is_dir():
        print(MSG_NO_DIR.format(path=args.directory), file=err)
        return EXIT_ERROR
    try:
        reports = read_reports(directory)
    except ValueError as exc:
        print(str(exc), file=err)
        return EXIT_ERROR
    if not reports:
        print(MSG_NO_REPORTS.format(path=args.directory, key=_KEY), file=err)
        return EXIT_ERROR
    verdicts = merge_reports(reports)
    if args.format == "json":
        payload = [
            {
                "name": v.name,
                "outcome": v.outcome,
                "failure_index": v.failure_index,
                "failure": v.failure,
                "missing": v.missing,
                "schedules": v.schedules,
                "line": v.line,
            }
            for v in verdicts
        ]
        out.write(json.dumps(payload, indent=1) + "\n")
    else:
        for verdict in verdicts:
            print(verdict.line, file=out)
    outcomes = {v.outcome for v in verdicts}
    if outcomes & {"mixed", "incomplete"} and "failed" not in outcomes:
        return EXIT_ERROR
    return EXIT_FINDINGS if "failed" in outcomes else EXIT_CLEAN
