"""``python -m kai_conformance.reports flakes DIR...``: the verdicts of each case over many runs (a nightly's history),
and the cases whose verdict changed while the versions did not.

Each DIR is a report directory (``--report-dir`` of a run, or a merged one; read as ``reports merge`` reads them).
The runs are put in the order they started. A row is one case (its node id, parameters included) on one version
combination: KAI, Trainer and JobSet as the run established them, and the API server's Kubernetes version. A row
whose observed verdicts (passed, product failure, infrastructure error, known deviation, unexpected pass; a skip is
no verdict) are not all the same *flipped*: on the same versions the case said two things, so one of them is not
about the product (a flaky case, a flaky cluster) or the product is nondeterministic. A case whose versions changed
between runs lands in another row, so an upgrade that fixed or broke it is not a flip.

A run that was interrupted, or whose verdict code is ``incomplete``, is shown as incomplete: the cases it did not
reach are marked as missing from it and count for nothing; the verdicts it did record count as any other. A case a
complete run did not have (the selection changed) is marked absent, and counts for nothing either.

Exit status: 0 no flip, 1 at least one flip, 2 usage error (no readable report directory).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from kai_conformance.reports import generate
from kai_conformance.reports.model import Case, RunRecords, build
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.status import Status

INCOMPLETE = "incomplete"
#: The marker of a flipped row, here and in ``reports merge``'s output.
FLIP = "FLIP"
NOT_RUN = "-"  # absent from a complete run
MISSING = "?"  # not reached by an incomplete run
USAGE = 2


class FlakesError(Exception):
    """A directory that is not a readable report directory: one line naming the fix."""


@dataclass(frozen=True)
class Run:
    info: RunInfo
    incomplete: bool
    #: The versions of the cases it recorded: an incomplete run misses a case only on those (or on any, if none).
    versions: frozenset[tuple[tuple[str, str], ...]] = frozenset()

    @property
    def label(self) -> str:
        started = self.info.started
        when = datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%d %H:%M") if started else "start unknown"
        return f"{self.info.run_id} ({when}{', incomplete' if self.incomplete else ''})"


@dataclass
class Row:
    nodeid: str
    versions: tuple[tuple[str, str], ...]
    #: run index → the case's status in that run.
    statuses: dict[int, Status] = field(default_factory=dict)

    @property
    def observed(self) -> list[Status]:
        return [s for s in self.statuses.values() if s is not Status.SKIPPED]

    @property
    def flipped(self) -> bool:
        return len(set(self.observed)) > 1

    @property
    def versions_text(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.versions) or "versions unknown"


@dataclass
class History:
    runs: list[Run]
    rows: list[Row]

    @property
    def flips(self) -> list[Row]:
        return [r for r in self.rows if r.flipped]

    def cells(self, row: Row) -> list[str]:
        shown = []
        for index, run in enumerate(self.runs):
            status = row.statuses.get(index)
            could = run.incomplete and (not run.versions or row.versions in run.versions)
            shown.append(status.key if status else MISSING if could else NOT_RUN)
        return shown


def versions_of(case: Case) -> tuple[tuple[str, str], ...]:
    """The case's versions: the column's (as requested or recorded), each replaced by what the run established."""
    versions = dict(case.column.versions)
    versions.update((v.component, v.version) for v in case.run.component_versions())
    ordered = [(k, versions[k]) for k in ("kai", "trainer", "jobset") if versions.get(k)]
    return (*ordered, *((("kubernetes", case.column.kubernetes),) if case.column.kubernetes else ()))


def load(directories: Sequence[Path]) -> tuple[list[RunRecords], set[str]]:
    """Every run of ``directories`` (each once, by run id), and the ids of those that are incomplete."""
    runs: list[RunRecords] = []
    incomplete: set[str] = set()
    seen: set[str] = set()
    for directory in directories:
        if not directory.is_dir():
            raise FlakesError(f"{directory} is not a directory: pass report directories (--report-dir of each run)")
        try:
            loaded = generate.load(directory)
        except generate.NoResults as exc:
            raise FlakesError(str(exc)) from exc
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:  # a truncated or foreign JSON
            raise FlakesError(f"{directory} holds unreadable results ({type(exc).__name__}: {exc})") from exc
        whole = _verdict_code(directory) == INCOMPLETE
        for entry in loaded:
            if entry.run.run_id in seen:
                continue
            seen.add(entry.run.run_id)
            runs.append(entry)
            if whole or entry.run.interrupted:
                incomplete.add(entry.run.run_id)
    return runs, incomplete


def _verdict_code(directory: Path) -> str:
    summary = directory / generate.JSON
    try:
        return str(json.loads(summary.read_text()).get("verdict", {}).get("code", "")) if summary.is_file() else ""
    except (OSError, ValueError, AttributeError):
        return ""


def history(runs: list[RunRecords], incomplete: Set[str] = frozenset()) -> History:
    """The rows of ``runs``, in the order they started."""
    ordered = sorted(runs, key=lambda e: (e.run.started is None, e.run.started or 0.0, e.run.run_id))
    index = {e.run.run_id: i for i, e in enumerate(ordered)}
    rows: dict[tuple[str, tuple[tuple[str, str], ...]], Row] = {}
    seen: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for case in build(ordered).cases:
        versions = versions_of(case)
        row = rows.setdefault((case.record.nodeid, versions), Row(case.record.nodeid, versions))
        row.statuses[index[case.run.run_id]] = case.status
        seen.setdefault(case.run.run_id, set()).add(versions)
    found = [Run(e.run, e.run.run_id in incomplete, frozenset(seen.get(e.run.run_id, ()))) for e in ordered]
    return History(found, list(rows.values()))


def marker_lines(found: History) -> list[str]:
    """One line per flipped row, as ``flakes`` and ``reports merge`` print them."""
    return [f"{FLIP} {row.nodeid} [{row.versions_text}]: {' '.join(found.cells(row))}" for row in found.flips]


def render(found: History) -> str:
    lines = [f"Verdicts of {len(found.rows)} case(s) over {len(found.runs)} run(s), oldest first:"]
    lines += [f"  #{i + 1} {run.label}" for i, run in enumerate(found.runs)]
    lines.append(f"  ({NOT_RUN}: not in that run; {MISSING}: not reached by an incomplete run; neither counts)")
    for row in found.rows:
        mark = FLIP if row.flipped else " " * len(FLIP)
        lines.append(f"{mark} {row.nodeid} [{row.versions_text}]: {' '.join(found.cells(row))}")
    flips = len(found.flips)
    lines.append(
        f"{flips} case(s) changed verdict with the versions unchanged ({FLIP})" if flips
        else "No case changed verdict with the versions unchanged."
    )  # fmt: skip
    return "\n".join(lines)


def run(directories: Sequence[Path]) -> int:
    """The ``flakes`` command: print the history; 1 when a case flipped."""
    if not directories:
        raise FlakesError("give the report directories of the runs to compare")
    found = history(*load(directories))
    print(render(found))
    return 1 if found.flips else 0


def command(directories: Sequence[Path]) -> int:
    try:
        return run(directories)
    except FlakesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE


def merge_note(directories: Sequence[Path]) -> str:
    """What ``reports merge`` prints after the merge: the flipped rows of the runs it merged, with the same marker."""
    flipped = marker_lines(history(*load(directories)))
    if not flipped:
        return "  no case changed verdict with the versions unchanged"
    return "\n".join([f"  {len(flipped)} case(s) changed verdict with the versions unchanged:", *flipped])


def add_command(commands: argparse._SubParsersAction) -> None:
    history = commands.add_parser(
        "flakes",
        help="each case's verdicts over many runs; exit 1 when one changed with the versions unchanged",
        description="DIRs are report directories of many runs (a nightly's history). Exit 0 no flip, 1 a case's "
        "verdict changed with the versions unchanged (marked FLIP), 2 usage error. See reports/across_runs/flakes.py.",
    )
    history.add_argument("dirs", type=Path, nargs="+", help="report directories (--report-dir of each run)")
