"""From records to what the reports show: statuses, totals, the matrix, failures, label tables, a verdict.

Every report format (HTML, Markdown, JSON) renders one :class:`Report`, so they always agree. A report covers
one run or several merged runs (e.g. one per version combination); a *column* of the matrix is a version
combination on a Kubernetes version, a *behaviour* is a test function (all its parametrizations).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from kai_conformance.reports import categories
from kai_conformance.reports.categories import Category
from kai_conformance.reports.records import CaseRecord, LabelObservation, PodTimes
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.status import STATUS_ORDER, Status, exception_lines, plural, status_of
from kai_conformance.reports.verdict import CONFORMANT_ASSUMED, Verdict, verdict_of

# Where a status or the verdict is needed, this module's name has always served: they live in status.py and
# verdict.py now, and stay importable from here.
__all__ = ["CONFORMANT_ASSUMED", "STATUS_ORDER", "Status", "Verdict", "exception_lines", "plural", "status_of"]

#: Areas in report order, with their headings: every area marker of fixtures/plugin/markers.py has one
#: (tests/reports/test_model.py fails on a marker without), and every view lists the areas a run has
#: (:attr:`Report.areas`), so a case of an area missing here is still shown, under :func:`area_heading`.
AREAS: dict[str, str] = {
    "gang": "Gang scheduling (all-or-nothing)",
    "queue": "Queue routing",
    "labels": "Label propagation",
    "preemption": "Preemption and reclaim",
    "podgrouper": "Pod grouping and ownership",
    "elastic": "Elastic TrainJobs",
    "placement": "Placement strategy",
    "topology": "Topology-aware placement",
    "sharing": "GPU sharing",
    "fairness": "Fair share between queues",
    "consolidation": "Consolidation and eviction protection",
    "lifecycle": "Workload lifecycle",
    "runtimes": "Trainer's shipped runtimes",
    "scale": "Scheduling at scale",
    "chaos": "Invariants under chaos",
    "ai_conformance": "Kubernetes AI Conformance",
    "control": "Detector controls",
    "": "Other",
}


#: Diagnostics files listed first: what a reader of a failure usually opens first.
FIRST_DIAGNOSTICS = ("events.txt", "pods.txt", "podgroups.yaml", "case-objects.yaml", "applied-objects.yaml",
                     "logs-kai-scheduler.txt", "gpus.txt")  # fmt: skip


#: A dotted module path before an exception's class name: ``fixtures.errors.ServerError`` at a line's start, or
#: ``kai_conformance.fixtures.waits.WaitTimeout`` anywhere. A reader needs the class name, not where it lives.
_MODULE_PATH = re.compile(
    r"^(?P<indent>\s*)(?:[a-z_][a-z0-9_]*\.)+(?=[A-Z]\w*(?::|$))"
    r"|\b(?:kai_conformance\.)?(?:fixtures|clusters|suites|reports)(?:\.[a-z_][a-z0-9_]*)+\.(?=[A-Z]\w*)",
    re.MULTILINE,
)


def without_module_paths(text: str) -> str:
    """``fixtures.errors.ServerError: apply … → 500`` → ``ServerError: apply … → 500``."""
    return _MODULE_PATH.sub(lambda m: m.group("indent") or "", text)


def area_heading(area: str) -> str:
    """The area's heading; one the report does not know (records of a newer suite) is named in words too."""
    return AREAS.get(area) or f"Area “{area}”"


def area_of(record: CaseRecord) -> str:
    """The record's area; control cases without one count as their own area."""
    return record.area or ("control" if "control" in record.markers else "")


def behaviour_of(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def anchor_for(run_id: str, nodeid: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", nodeid.removeprefix("suites/")).strip("-")[:80]
    digest = hashlib.sha1(f"{run_id}\0{nodeid}".encode()).hexdigest()[:6]
    return f"case-{slug}-{digest}"


@dataclass(frozen=True)
class Column:
    """One version combination on one Kubernetes version."""

    key: str
    combination: str
    versions: tuple[tuple[str, str], ...]
    kubernetes: str

    @property
    def title(self) -> str:
        v = dict(self.versions)
        parts = [f"{name} {v[key]}" for key, name in (("kai", "KAI"), ("trainer", "Trainer"), ("jobset", "JobSet"))
                 if v.get(key)]  # fmt: skip
        return " · ".join(parts) or self.combination or "unknown versions"

    @property
    def subtitle(self) -> str:
        return f"Kubernetes {self.kubernetes}" if self.kubernetes else ""

    @property
    def short(self) -> str:
        """Compact header for narrow tables: ``KAI v0.17.0 / Trainer v2.3.0 / k8s 1.35``."""
        v = dict(self.versions)
        parts = [f"KAI {v['kai']}" if v.get("kai") else "", f"Trainer {v['trainer']}" if v.get("trainer") else ""]
        parts.append(f"k8s {self.kubernetes}" if self.kubernetes else "")
        return " / ".join(p for p in parts if p) or self.combination or "unknown"


@dataclass
class WorkloadTimeline:
    workload: str
    pods: list[PodTimes]

    @property
    def bound(self) -> list[PodTimes]:
        return [p for p in self.pods if p.bound is not None]

    @property
    def evicted(self) -> list[PodTimes]:
        return [p for p in self.pods if p.evicted is not None]

    @property
    def summary(self) -> str:
        """``4/4 bound within 0.4 s`` / ``0/4 bound`` / ``2/4 bound: partial placement``, plus evictions."""
        total, bound = len(self.pods), self.bound
        if not bound:
            text = f"0/{total} bound"
        elif len(bound) < total:
            text = f"{len(bound)}/{total} bound: partial placement"
        else:
            times = [p.bound for p in bound if p.bound is not None]
            text = f"{total}/{total} bound within {max(times) - min(times):.1f} s"
        if self.evicted:
            text += f"; {len(self.evicted)} evicted"
        return text

    @property
    def partial(self) -> bool:
        return 0 < len(self.bound) < len(self.pods)


@dataclass
class Case:
    record: CaseRecord
    run: RunInfo
    status: Status
    anchor: str
    column: Column
    category: Category | None = None

    @property
    def area(self) -> str:
        return area_of(self.record)

    @property
    def is_control(self) -> bool:
        return "control" in self.record.markers

    @property
    def title(self) -> str:
        return self.record.title or self.record.nodeid.rsplit("::", 1)[-1]

    @property
    def params_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.record.params.items())

    @property
    def param_id(self) -> str:
        nodeid = self.record.nodeid
        return nodeid[nodeid.index("[") + 1 : -1] if "[" in nodeid and nodeid.endswith("]") else ""

    @property
    def headline(self) -> str:
        """One line saying why the case did not pass (empty when it did)."""
        if self.status in (Status.PASSED,):
            return ""
        for verdict in self.record.verdicts:
            if not verdict.as_expected:
                return f"{verdict.heading}: {verdict.explanation.splitlines()[0] if verdict.explanation else ''}"
        lines = exception_lines(self.record.message)
        return without_module_paths(lines[0]) if lines else ""

    @property
    def exception_text(self) -> str:
        return without_module_paths("\n".join(exception_lines(self.record.message)))

    @property
    def failing_verdicts(self) -> list:
        return [v for v in self.record.verdicts if not v.as_expected]

    @property
    def timelines(self) -> list[WorkloadTimeline]:
        return [WorkloadTimeline(name, pods) for name, pods in self.record.timelines.items() if pods]

    @property
    def attachments(self) -> list[tuple[str, str]]:
        """(file name, link relative to the report directory) of each diagnostic file, the telling ones first."""
        named = [(path.rsplit("/", 1)[-1], path) for path in self.record.attachments]
        return sorted(named, key=lambda item: (FIRST_DIAGNOSTICS.index(item[0]) if item[0] in FIRST_DIAGNOSTICS
                                               else len(FIRST_DIAGNOSTICS), item[0]))  # fmt: skip


@dataclass
class Cell:
    cases: list[Case] = field(default_factory=list)

    @property
    def status(self) -> Status | None:
        return max((c.status for c in self.cases), key=lambda s: s.severity, default=None)

    @property
    def counts(self) -> Counter:
        return Counter(c.status for c in self.cases)

    @property
    def ratio(self) -> str:
        """Conforming / observed (skipped cases are not observed)."""
        observed = [c for c in self.cases if c.status is not Status.SKIPPED]
        if not observed:
            return "skipped"
        return f"{sum(c.status.conforming for c in observed)}/{len(observed)}"

    @property
    def tooltip(self) -> str:
        return ", ".join(f"{n} {s.label}" for s, n in sorted(self.counts.items(), key=lambda i: -i[0].severity))

    @property
    def target(self) -> Case | None:
        """The case a click should show: the worst one."""
        status = self.status
        return next((c for c in self.cases if c.status is status), None)


@dataclass
class Behaviour:
    key: str
    title: str
    area: str
    cells: dict[str, Cell] = field(default_factory=dict)

    @property
    def status(self) -> Status | None:
        return max((c.status for c in self.cells.values() if c.status), key=lambda s: s.severity, default=None)


@dataclass
class LabelCell:
    observations: dict[str, list[tuple[LabelObservation, Case]]] = field(default_factory=dict)  # key → seen

    def add(self, observation: LabelObservation, case: Case) -> None:
        self.observations.setdefault(observation.key, []).append((observation, case))

    @property
    def keys(self) -> list[tuple[str, str, str, Case]]:
        """(key, state, symbol, a case) per label key; state: arrived | absent | missing | unexpected."""
        out = []
        for key, seen in self.observations.items():
            wrong = [(o, c) for o, c in seen if not o.as_expected]
            observation, case = wrong[0] if wrong else seen[0]
            if observation.as_expected:
                state, symbol = ("arrived", "✓") if observation.observed else ("absent", "–")
            else:
                state, symbol = ("missing", "✗") if observation.expected else ("unexpected", "!")
            out.append((key, state, symbol, case))
        return out

    @property
    def ok(self) -> bool:
        return all(state in ("arrived", "absent") for _, state, _, _ in self.keys)


@dataclass
class LabelTable:
    column: Column
    sources: list[str]
    levels: list[str]
    cells: dict[tuple[str, str], LabelCell]


@dataclass
class AreaSummary:
    area: str
    title: str
    counts: Counter

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class Report:
    title: str
    generated: float
    runs: list[RunInfo]
    cases: list[Case]
    columns: list[Column]
    behaviours: list[Behaviour]
    areas: list[AreaSummary]
    label_tables: list[LabelTable]

    @property
    def totals(self) -> Counter:
        return Counter(c.status for c in self.cases)

    def with_status(self, *statuses: Status) -> list[Case]:
        return [c for c in self.cases if c.status in statuses]

    @property
    def product_failures(self) -> list[Case]:
        return self.with_status(Status.FAILED)

    @property
    def infrastructure_failures(self) -> list[Case]:
        return self.with_status(Status.BROKEN)

    @property
    def infrastructure_groups(self) -> list[tuple[str, str, list[Case]]]:
        """(category, hint, cases) of the infrastructure failures, largest group first."""
        groups: dict[str, list[Case]] = {}
        for case in self.infrastructure_failures:
            groups.setdefault(case.category.name if case.category else "Infrastructure", []).append(case)
        return sorted(
            ((name, categories.BY_NAME[name].hint if name in categories.BY_NAME else "", cases)
             for name, cases in groups.items()),
            key=lambda g: -len(g[2]),
        )  # fmt: skip

    @property
    def timeline_cases(self) -> list[Case]:
        """Cases with pod timelines, failures first (gang and preemption cases record them)."""
        with_timelines = [c for c in self.cases if c.timelines]
        return sorted(with_timelines, key=lambda c: -c.status.severity)

    @property
    def interrupted(self) -> bool:
        return any(run.interrupted for run in self.runs)

    @property
    def assumptions(self) -> list[str]:
        """Every version of the runs the expectation tables do not know, and what it assumed, once each."""
        return list(dict.fromkeys(a for run in self.runs for a in run.assumptions))

    @property
    def uncounted(self) -> list[str]:
        """Cases of an interrupted run that finished on a worker after the interrupt: pytest did not count them."""
        return [nodeid for run in self.runs for nodeid in run.uncounted]

    @property
    def not_provisioned(self) -> list[str]:
        """Why a run's cluster could not be provisioned, once per run that could not."""
        return [run.not_provisioned for run in self.runs if run.not_provisioned]

    @property
    def verdict(self) -> Verdict:
        return verdict_of(self.totals, interrupted=self.interrupted, assumptions=self.assumptions,
                          uncounted=self.uncounted, not_provisioned=self.not_provisioned)  # fmt: skip


@dataclass
class RunRecords:
    """One run's records; their attachments are paths relative to the report directory being written."""

    run: RunInfo
    records: list[CaseRecord]


def column_of(record: CaseRecord, run: RunInfo) -> Column:
    versions = record.versions or run.versions
    kubernetes = versions.get("kubernetes_server") or run.kubernetes_server or versions.get("kubernetes", "")
    combination = record.combination or run.combination
    key = f"{combination}@{kubernetes}"
    shown = tuple((k, versions[k]) for k in ("kai", "trainer", "jobset") if versions.get(k))
    return Column(key, combination, shown, kubernetes)


def build(runs: list[RunRecords], title: str = "KAI Scheduler conformance report") -> Report:
    cases: list[Case] = []
    columns: dict[str, Column] = {}
    for entry in runs:
        for record in entry.records:
            if record.run_id and record.run_id != entry.run.run_id:
                continue  # left over from an earlier run into the same directory
            if record.nodeid in entry.run.uncounted:
                continue  # finished after the interrupt: the counts stay pytest's (RunInfo.uncounted)
            column = columns.setdefault(column_of(record, entry.run).key, column_of(record, entry.run))
            status = status_of(record)
            category = categories.BY_NAME.get(record.category) or (
                categories.from_message(record.failure_kind, exception_lines(record.message)[0])
                if record.message and status in (Status.FAILED, Status.BROKEN)
                else None
            )
            cases.append(Case(record, entry.run, status, anchor_for(entry.run.run_id, record.nodeid), column, category))
    area_order = list(AREAS)
    cases.sort(key=lambda c: (area_order.index(c.area) if c.area in AREAS else len(AREAS), c.record.nodeid))
    return Report(
        title=title,
        generated=time.time(),
        runs=[entry.run for entry in runs],
        cases=cases,
        columns=list(columns.values()),
        behaviours=_behaviours(cases),
        areas=_areas(cases),
        label_tables=_label_tables(cases, list(columns.values())),
    )


def _behaviours(cases: list[Case]) -> list[Behaviour]:
    behaviours: dict[str, Behaviour] = {}
    for case in cases:
        key = behaviour_of(case.record.nodeid)
        behaviour = behaviours.setdefault(key, Behaviour(key, case.title, case.area))
        behaviour.cells.setdefault(case.column.key, Cell()).cases.append(case)
    return list(behaviours.values())


def _areas(cases: list[Case]) -> list[AreaSummary]:
    counts: dict[str, Counter] = {}
    for case in cases:
        counts.setdefault(case.area, Counter())[case.status] += 1
    return [AreaSummary(area, area_heading(area), counts[area]) for area in counts]


def _label_tables(cases: list[Case], columns: list[Column]) -> list[LabelTable]:
    tables = []
    for column in columns:
        sources: list[str] = []
        levels: list[str] = []
        cells: dict[tuple[str, str], LabelCell] = {}
        for case in cases:
            if case.column.key != column.key:
                continue
            for observation in case.record.labels:
                if observation.source not in sources:
                    sources.append(observation.source)
                if observation.level not in levels:
                    levels.append(observation.level)
                cells.setdefault((observation.source, observation.level), LabelCell()).add(observation, case)
        if cells:
            tables.append(LabelTable(column, sources, levels, cells))
    return tables
