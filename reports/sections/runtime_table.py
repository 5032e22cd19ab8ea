"""The shipped-runtimes table: Trainer runtime × KAI version → works / fails (issue) / works with workaround.

Derived from the records of the ``runtimes`` area (suites/test_runtimes.py), so every format (Markdown, HTML,
summary.json) shows the same cells: the shipped case says whether the runtime works as shipped; where it is a
known deviation (strict xfail), the workaround case says whether ``kai.scheduler/batch-min-member`` makes it work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kai_conformance.reports.model import Case, Report, Status
from kai_conformance.reports.records import RUNTIME_NOT_JUDGED as NOT_JUDGED

AREA = "runtimes"
SHIPPED = "test_a_shipped_runtime_runs_under_kai"
WORKAROUND = "test_a_depends_on_runtime_runs_with_the_workaround"
_ISSUE = re.compile(r"(KAI issue |KAI )?#(\d+)")


@dataclass
class RuntimeTable:
    kai_versions: list[str] = field(default_factory=list)
    #: runtime → KAI version → cell text
    rows: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"kai_versions": self.kai_versions, "rows": self.rows}


def _issue(case: Case) -> str:
    found = _ISSUE.search(case.record.message)
    return f"KAI #{found.group(2)}" if found else "known deviation"


def cell(shipped: Case | None, workaround: Case | None) -> str:
    """The text of one cell from the runtime's two cases under one KAI version."""
    if shipped is None:
        return "not run"
    status = shipped.status
    if status is Status.PASSED:
        return "works"
    if status is Status.XPASSED:
        return f"works (expected to fail: {_issue(shipped)})"
    if status is Status.XFAILED:
        text = f"fails ({_issue(shipped)})"
        if workaround is not None and workaround.status is Status.PASSED:
            return f"works with workaround ({_issue(shipped)})"
        if workaround is not None and workaround.status in (Status.FAILED, Status.BROKEN):
            return text + "; workaround " + workaround.status.label
        if workaround is not None and workaround.status is Status.XFAILED:  # KAI stops it where its reason says
            return text + "; the workaround does not help either"
        if workaround is not None and workaround.status is Status.SKIPPED and NOT_JUDGED in workaround.record.message:
            return text + "; workaround not judged on this cluster"
        return text
    return {Status.FAILED: "fails (unexpected)", Status.BROKEN: "not observed"}.get(status, "not run")


def of_report(report: Report) -> RuntimeTable | None:
    """The table of the report's runtime cases, or None when it has none."""
    found: dict[tuple[str, str, str], Case] = {}
    for case in report.cases:
        if case.area != AREA or not case.record.params.get("case"):
            continue
        test = case.record.nodeid.split("::")[-1].split("[", 1)[0]
        kai = dict(case.column.versions).get("kai") or case.column.short
        found[(test, case.record.params["case"], kai)] = case
    if not found:
        return None
    table = RuntimeTable()
    for _, runtime, kai in found:
        if kai not in table.kai_versions:
            table.kai_versions.append(kai)
        table.rows.setdefault(runtime, {})
    for runtime, cells in table.rows.items():
        for kai in table.kai_versions:
            cells[kai] = cell(found.get((SHIPPED, runtime, kai)), found.get((WORKAROUND, runtime, kai)))
    return table


def markdown(table: RuntimeTable | None) -> list[str]:
    if table is None:
        return []
    out = ["### Trainer's shipped runtimes", "", "| Runtime | " + " | ".join(f"KAI {k}" for k in table.kai_versions)
           + " |", "| --- | " + " | ".join("---" for _ in table.kai_versions) + " |"]  # fmt: skip
    out += [
        f"| {name} | " + " | ".join(cells[k] for k in table.kai_versions) + " |" for name, cells in table.rows.items()
    ]
    return [*out, ""]
