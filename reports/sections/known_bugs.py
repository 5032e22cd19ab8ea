"""The report knows the bugs of what it tests: for every version column, each known upstream bug of the versions
under test (suites/support/known_bugs.py), whether those versions have it, and whether this run saw it.

"Seen" is strict: a case of the bug ended as a known deviation (a strict xfail) whose reason names the bug, that is
the case failed on the product the way the bug fails it. A pass where the table says the version has the bug is an
unexpected pass (the table is out of date); a product failure is a failure to read, never counted as the bug.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kai_conformance.reports.model import Case, Column, Report, Status
from kai_conformance.suites.support.known_bugs import KNOWN_BUGS, KnownBug

COMPONENT_NAMES = {"kai": "KAI", "trainer": "Trainer", "jobset": "JobSet"}

#: What a run says of a bug, per column.
SEEN = "seen"
NOT_SEEN = "not seen"
UNEXPECTED_PASS = "not seen: passed, where the table says the version has it"
FAILED = "failed (a product failure: see the case)"
NOT_JUDGED = "not judged (skipped, an infrastructure failure, or a known deviation for another reason)"
NOT_RUN = "not run"
NOT_OBSERVABLE = "not observable through a TrainJob"
NO_CASE = "no case yet"


@dataclass(frozen=True)
class BugResult:
    bug: KnownBug
    column: Column
    version: str
    #: True: the version has it; False: it has the fix or never had it; None: not known.
    applies: bool | None
    result: str
    cases: tuple[Case, ...]

    @property
    def applies_text(self) -> str:
        return {True: "yes", False: "no", None: "not known"}[self.applies]

    def to_json(self) -> dict:
        return {
            "bug": self.bug.key,
            "url": self.bug.url,
            "component": self.bug.component,
            "column": self.column.key,
            "version": self.version,
            "applies": self.applies,
            "result": self.result,
            "affected": self.bug.affected_text,
            "fixed": self.bug.fixed_in,
            "source": self.bug.source,
            "cases": [{"nodeid": c.record.nodeid, "status": c.status.key} for c in self.cases],
        }


def _names_bug(case: Case, bug: KnownBug) -> bool:
    return re.search(rf"#{bug.number}\b", case.record.message or "") is not None


def _result(bug: KnownBug, applies: bool | None, cases: list[Case]) -> str:
    if not cases:
        if bug.not_observable:
            return NOT_OBSERVABLE
        return NO_CASE if bug.no_case_yet else NOT_RUN
    statuses = {c.status for c in cases}
    if any(c.status is Status.XFAILED and _names_bug(c, bug) for c in cases):
        return SEEN
    if Status.FAILED in statuses:
        return FAILED
    if Status.XPASSED in statuses or (applies and Status.PASSED in statuses):
        return UNEXPECTED_PASS
    if statuses == {Status.PASSED}:
        return NOT_SEEN
    return NOT_JUDGED  # skipped, or ended by the infrastructure


def of_report(report: Report) -> list[BugResult]:
    """One line per column and known bug of a component version that column tests."""
    found = []
    for column in report.columns:
        versions = dict(column.versions)
        in_column = [c for c in report.cases if c.column.key == column.key]
        for bug in KNOWN_BUGS:
            version = versions.get(bug.component)
            if not version:
                continue
            cases = [c for c in in_column if any(c.record.nodeid.startswith(p) for p in bug.cases)]
            applies = bug.affects(version)
            found.append(BugResult(bug, column, version, applies, _result(bug, applies, cases), tuple(cases)))
    return found


def to_json(results: list[BugResult]) -> list[dict]:
    return [r.to_json() for r in results]


def markdown(results: list[BugResult]) -> list[str]:
    """The Markdown section: the bugs the versions under test have first, then the others."""
    if not results:
        return []
    having = sum(1 for r in results if r.applies)
    seen = sum(1 for r in results if r.applies and r.result == SEEN)
    out = [
        f"### Known upstream bugs (this run saw {seen} of the {having} the versions under test have)",
        "",
        "| Bug | Version | Has it | This run | Fixed in |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in sorted(results, key=lambda r: (r.applies is not True, r.column.key, r.bug.key)):
        name = f"{COMPONENT_NAMES[r.bug.component]} {r.version}"
        out.append(f"| [{r.bug.key}]({r.bug.url}) | {name} | {r.applies_text} | {r.result} | {r.bug.fixed_in} |")
    return [*out, ""]
