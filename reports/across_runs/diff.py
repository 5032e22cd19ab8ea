"""``python -m kai_conformance.reports diff BASE NEW``: what changed between two runs, e.g. two KAI releases.

BASE and NEW are report directories (a run's ``--report-dir``, or a merged one), read as ``reports generate``
reads them; typically the suite against two releases on the same cluster shape. Four parts (docs/reports.md):

* **Versions**: each component's version and how the run knows it, Kubernetes, what the nodes run, the GPUs
  per node and the expectations assumed for versions the tables do not know; differing rows are marked.
* **Verdicts.** Cases are matched by pytest node id (test and parametrization); in a merged directory a later
  occurrence of a node id is ``<node id> (#2)``, in run order. A verdict *changed* when the report status
  differs or the case ran on one side only; the report's reason (failing detector, else exception) comes
  from NEW, else from BASE.
* **Observations** of the cases on both sides, field by field (:func:`observations`): expectation rows,
  detector verdicts and explanations (PodGroup shape and owner, queue, evictions, fair share), label arrivals
  per level, each workload's placement, the eviction order, scale bursts, series' last values, the failure
  category of two failures, and notes (a multiset). Text that differs between runs by construction
  (:data:`VOLATILE`) is masked before comparing; both texts are shown unmasked.
* **Metrics**: ``reports/sections/metrics.py`` on both sides' records, gated by ``reports/across_runs/compare.py`` exactly as
  ``reports compare`` gates; improvements past the same gate are listed too, one-sided metrics named.

Output: a terminal summary on stdout and, with ``--out FILE``, a self-contained HTML page
(``reports/across_runs/diff_html.py``); none is written into either input directory unless ``--out`` names one. Exit status: 0
no verdict changed and no metric regressed (observations may differ), 1 a verdict changed, a metric regressed or a
side is an interrupted run (verdict ``incomplete``), 2 a usage error (a missing or unreadable directory), one message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

from kai_conformance.reports import generate
from kai_conformance.reports.across_runs import compare
from kai_conformance.reports.model import AREAS, Case, Report, Status, build, plural
from kai_conformance.reports.records import BurstTimes, CaseRecord, PodTimes
from kai_conformance.reports.runinfo import COMPONENTS, gpu_topology
from kai_conformance.reports.sections import metrics

CATEGORY = "failure category"
UNCHANGED, CHANGED, USAGE = 0, 1, 2

#: Run-specific text, masked before two observations are compared: the same behaviour seen twice differs in
#: these by construction. Durations go too: the metrics compare timing, with a threshold and a clock floor.
VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uid>"),  # PodGroup names embed one
    (re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b"), "<run>"),  # run ids (fixtures/run.py)
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<time>"),
    (re.compile(r"\bkc-[a-z0-9-]+-[0-9a-f]{6}\b"), "<namespace>"),  # a case's namespace ends in a random suffix
    (re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}\b"), "-<id>"),  # generateName suffixes (a Job's pods)
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds?)\b"), "<duration>"),
    (re.compile(r"\b[\d,]+ watch event"), "<n> watch event"),  # how busy the watch was, not what it saw
    (re.compile(r"\b[a-z0-9.-]+-(?:control-plane|worker\d*)\b"), "<node>"),  # kind nodes carry the cluster's name
)  # fmt: skip

#: A label observation in words, by (expected, observed).
LABEL_STATES = {(True, True): "✓ arrived", (False, False): "– absent, as expected",
                (True, False): "✗ missing (expected to arrive)", (False, True): "! arrived (expected absent)"}  # fmt: skip


class DiffError(Exception):
    """A usage error: the message names the fix."""


def masked(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


# ------------------------------------------------------------------------------------------------ the model
@dataclass(frozen=True)
class VersionRow:
    what: str
    base: str
    new: str
    changed: bool


@dataclass(frozen=True)
class ObservationChange:
    observation: str  # "detector podgroup-shape", "label team (TrainJob labels) at Pod", "note", …
    base: str  # "" when BASE did not observe it
    new: str


@dataclass(frozen=True)
class CaseDiff:
    key: str  # the node id (plus " (#2)" for a later occurrence in a merged directory)
    title: str
    params: str
    area: str
    base: Status | None  # None: the case did not run on that side
    new: Status | None
    reason: str
    observations: tuple[ObservationChange, ...] = ()
    #: The version combination(s) the case ran on: ``KAI v0.16.8 / k8s 1.35 → KAI v0.17.0 / k8s 1.35``, one
    #: when both sides ran the same (a merged directory holds a case once per combination).
    combination: str = ""

    @property
    def verdict_changed(self) -> bool:
        return self.base is not self.new

    @property
    def change(self) -> str:
        """``✓ passed → ✗ product failure``, ``only in NEW: ✓ passed``."""
        shown = [f"{status.symbol} {status.label}" for status in (self.base, self.new) if status is not None]
        if self.base is None or self.new is None:
            return f"only in {'NEW' if self.base is None else 'BASE'}: {shown[0]}"
        return " → ".join(shown)


@dataclass(frozen=True)
class MetricsDiff:
    comparison: compare.Comparison | None  # None: no metric in common
    improvements: list[compare.Row] = field(default_factory=list)
    only_base: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[compare.Row]:
        return self.comparison.regressions if self.comparison else []

    @property
    def gate(self) -> str:
        """``p50, p95 past 20% and 1 s``, as ``reports compare`` says it."""
        if self.comparison is None:
            return ""
        text = f"{', '.join(self.comparison.statistics)} past {self.comparison.threshold:.0%}"
        return text + (f" and {self.comparison.min_seconds:g} s" if self.comparison.min_seconds else "")


@dataclass(frozen=True)
class Diff:
    base_dir: Path
    new_dir: Path
    base: Report
    new: Report
    versions: list[VersionRow]
    cases: list[CaseDiff]  # every case present on either side
    metrics: MetricsDiff

    @property
    def verdict_changes(self) -> list[CaseDiff]:
        return [c for c in self.cases if c.verdict_changed]

    @property
    def observation_changes(self) -> list[CaseDiff]:
        return [c for c in self.cases if c.observations]

    @property
    def incomplete(self) -> list[str]:
        """The sides whose run was interrupted: what they did not run is no change, and no sameness either."""
        return [side for side, report in (("BASE", self.base), ("NEW", self.new)) if report.interrupted]

    @property
    def exit_status(self) -> int:
        return CHANGED if self.verdict_changes or self.metrics.regressions or self.incomplete else UNCHANGED

    @property
    def headline(self) -> str:
        verdicts, regressions = len(self.verdict_changes), len(self.metrics.regressions)
        if self.incomplete:
            sides = " and ".join(self.incomplete)
            return (f"{sides} {'is an interrupted run' if len(self.incomplete) == 1 else 'are interrupted runs'} "
                    f"(verdict incomplete): {plural(verdicts, 'verdict')} changed among the cases that ran, and "
                    "the diff cannot say the rest is unchanged")  # fmt: skip
        if not verdicts and not regressions:
            return f"No verdict changed ({plural(len(self.cases), 'case')}) and no metric regressed"
        parts = [f"{plural(verdicts, 'verdict')} changed" if verdicts else "",
                 f"{plural(regressions, 'metric statistic')} regressed" if regressions else ""]  # fmt: skip
        return "; ".join(p for p in parts if p)

    @property
    def detail(self) -> str:
        observed = len(self.observation_changes)
        same = sum(not c.verdict_changed and not c.observations for c in self.cases)
        return f"{plural(observed, 'case')} with differing observations; {plural(same, 'case')} unchanged."


# ------------------------------------------------------------------------------------------------ loading
def load_side(directory: Path, side: str) -> Report:
    """The report of one side; DiffError when it is not a readable report directory."""
    if not directory.is_dir():
        raise DiffError(f"{side} {directory} is not a directory: pass the --report-dir of a run")
    try:
        return build(generate.load(directory))
    except generate.NoResults as exc:
        raise DiffError(f"{side} {exc}") from exc
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:  # a truncated or foreign JSON
        raise DiffError(
            f"{side} {directory} holds unreadable results ({type(exc).__name__}: {exc}): "
            "regenerate them with `python -m kai_conformance.reports generate`"
        ) from exc


def cases_by_key(report: Report) -> dict[str, Case]:
    found: dict[str, Case] = {}
    for case in report.cases:
        key, occurrence = case.record.nodeid, 2
        while key in found:  # a merged directory: the same case once per run
            key, occurrence = f"{case.record.nodeid} (#{occurrence})", occurrence + 1
        found[key] = case
    return found


# ------------------------------------------------------------------------------------------------ observations
def _placement(pods: list[PodTimes]) -> str:
    """``4/4 bound on 2 nodes (2+2)`` plus evictions: the node count, not the names, is what binpack and
    spread decide (on symmetric nodes which one is chosen is chance)."""
    bound = [p for p in pods if p.bound is not None]
    text = f"{len(bound)}/{len(pods)} bound"
    per_node: dict[str, int] = {}
    for pod in bound:
        per_node[pod.node or "?"] = per_node.get(pod.node or "?", 0) + 1
    if per_node:
        shape = "+".join(str(n) for n in sorted(per_node.values(), reverse=True))
        text += f" on {plural(len(per_node), 'node')} ({shape})"
    evicted = sum(p.evicted is not None for p in pods)
    return text + (f"; {evicted} evicted" if evicted else "")


def _eviction_order(timelines: dict[str, list[PodTimes]]) -> str:
    """``low-prio (4 pods) → mid-prio (2 pods)``: the workloads by their first evicted pod."""
    first = []
    for workload, pods in timelines.items():
        evicted = [p.evicted for p in pods if p.evicted is not None]
        if evicted:
            first.append((min(evicted), workload, len(evicted)))
    return " → ".join(f"{workload} ({plural(count, 'pod')})" for _, workload, count in sorted(first))


def _burst(burst: BurstTimes) -> str:
    settled = f"held {burst.held_gpus} GPUs once settled" if burst.settled is not None else "never settled"
    return (f"{burst.gangs} gangs, {burst.pods} pods, {burst.gpus} GPUs asked of {burst.cluster_gpus}; {settled}; "
            f"{burst.evicted_gangs} gangs ({burst.evicted_pods} pods) evicted")  # fmt: skip


def observations(case: Case) -> dict[str, str]:
    """What a case observed, as observation name → text (the notes apart: see :func:`_note_changes`)."""
    record: CaseRecord = case.record
    seen: dict[str, str] = {}

    def put(name: str, value: str) -> None:
        key, occurrence = name, 2
        while key in seen:  # a detector judged twice (e.g. before and after a step)
            key, occurrence = f"{name} #{occurrence}", occurrence + 1
        seen[key] = value

    if record.expectations:
        put("expectation rows", record.expectations)
    if case.category:
        put(CATEGORY, case.category.name)
    for verdict in record.verdicts:
        mark = "✓" if verdict.as_expected else "✗"
        put(f"detector {verdict.detector}" + (" (control)" if verdict.expect_violation else ""),
            f"{mark} {verdict.explanation}".rstrip())  # fmt: skip
    for label in record.labels:
        put(f"label {label.key} ({label.source}) at {label.level}", LABEL_STATES[(label.expected, label.observed)])
    for workload, pods in record.timelines.items():
        if pods:
            put(f"pods of {workload}", _placement(pods))
    if order := _eviction_order(record.timelines):
        put("eviction order", order)
    for burst in record.bursts:
        put(f"burst {burst.name}", _burst(burst))
    for name, points in record.series.items():
        if points:
            put(f"last {name}", f"{points[-1][1]:g}")
    return seen


def _note_changes(base_notes: Sequence[str], new_notes: Sequence[str]) -> list[ObservationChange]:
    """Notes on one side only (masked), the n-th gone paired with the n-th added: most notes start with what
    they are about ("placement strategy: …"), so a changed note reads as one row."""
    unmatched = list(new_notes)
    gone = []
    for note in base_notes:
        twin = next((n for n in unmatched if masked(n) == masked(note)), None)
        if twin is None:
            gone.append(note)
        else:
            unmatched.remove(twin)
    return [ObservationChange("note", b or "", n or "") for b, n in zip_longest(gone, unmatched)]


def observation_changes(base: Case, new: Case) -> list[ObservationChange]:
    before, after = observations(base), observations(new)
    if base.status is not new.status:  # the verdict change says it; a category only compares two failures
        for seen in (before, after):
            seen.pop(CATEGORY, None)
    names = [*before, *(name for name in after if name not in before)]
    changes = [ObservationChange(name, before.get(name, ""), after.get(name, "")) for name in names
               if masked(before.get(name, "")) != masked(after.get(name, ""))]  # fmt: skip
    return changes + _note_changes(base.record.notes, new.record.notes)


def _reason(base: Case | None, new: Case | None) -> str:
    if new is not None and new.headline:
        return new.headline
    return f"in BASE: {base.headline}" if base is not None and base.headline else ""


def _combination(base: Case | None, new: Case | None) -> str:
    sides = [case.column.short for case in (base, new) if case is not None]
    if len(sides) == 2 and sides[0] != sides[1]:
        return f"BASE {sides[0]} → NEW {sides[1]}"
    return sides[0] if sides else ""


def diff_cases(base: Report, new: Report) -> list[CaseDiff]:
    before, after = cases_by_key(base), cases_by_key(new)
    either = {**before, **after}  # NEW's title and area where both have the case
    area_order = [*AREAS, None]  # an area the report does not know sorts last
    out = []
    for key in sorted(either, key=lambda k: (area_order.index(either[k].area if either[k].area in AREAS else None), k)):
        b, n, case = before.get(key), after.get(key), either[key]
        changes = tuple(observation_changes(b, n)) if b is not None and n is not None else ()
        out.append(CaseDiff(key, case.title, case.params_text, case.area, b.status if b else None,
                            n.status if n else None, _reason(b, n), changes, _combination(b, n)))  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------------ versions
def _joined(texts: list[str]) -> str:
    return "; ".join(dict.fromkeys(t for t in texts if t))  # several runs (merged): each distinct text once


def diff_versions(base: Report, new: Report) -> list[VersionRow]:
    rows = []
    for key, name in COMPONENTS:
        found = [[v for run in report.runs for v in run.component_versions() if v.component == key]
                 for report in (base, new)]  # fmt: skip
        texts = [_joined([v.text for v in versions]) for versions in found]
        changed = {v.version for v in found[0]} != {v.version for v in found[1]}
        rows.append(VersionRow(name, texts[0] or "—", texts[1] or "—", changed))
    for what, read in (("Kubernetes", lambda run: run.kubernetes), ("Nodes", lambda run: run.nodes),
                       ("GPUs", lambda run: gpu_topology(run.gpus) if run.gpus else ""),
                       ("Assumed expectations", lambda run: "; ".join(run.assumptions))):  # fmt: skip
        texts = [_joined([read(run) for run in report.runs]) for report in (base, new)]
        if any(texts) or what == "Kubernetes":
            rows.append(VersionRow(what, texts[0] or "—", texts[1] or "—", texts[0] != texts[1]))
    return rows


# ------------------------------------------------------------------------------------------------ metrics
def diff_metrics(
    base: Report, new: Report, threshold: float, statistics: Sequence[str], min_seconds: float
) -> MetricsDiff:
    """``reports compare`` on the metrics of both sides' records, plus the improvements past the same gate."""
    before, after = (metrics.metrics_json(metrics.of_report(report)) for report in (base, new))
    only_base, only_new = [n for n in before if n not in after], [n for n in after if n not in before]
    if not set(before) & set(after):
        return MetricsDiff(None, [], only_base, only_new)
    comparison = compare.compare(before, after, threshold, statistics, (), min_seconds)
    improvements = []
    for row in comparison.rows:
        better = after[row.metric].get("better", before[row.metric].get("better", ""))
        floor = min_seconds if row.unit == compare.SECONDS else 0.0
        # An improvement is a regression read backwards: the base is the one past the threshold.
        if row.gated and compare.regressed(row.new, row.base, better, threshold, floor):
            improvements.append(row)
    return MetricsDiff(comparison, improvements, only_base, only_new)


# ------------------------------------------------------------------------------------------------ the whole
def diff(base_dir: Path, new_dir: Path, threshold: float = compare.DEFAULT_THRESHOLD,
         statistics: Sequence[str] = compare.DEFAULT_STATISTICS, min_seconds: float = compare.DEFAULT_MIN_SECONDS,
         ) -> Diff:  # fmt: skip
    if threshold < 0:
        raise DiffError(f"--threshold {threshold} is negative: give a fraction such as 0.2 for 20 %")
    if min_seconds < 0:
        raise DiffError(f"--min-seconds {min_seconds} is negative: give 0 to gate on the ratio alone")
    base, new = load_side(base_dir, "BASE"), load_side(new_dir, "NEW")
    return Diff(base_dir, new_dir, base, new, diff_versions(base, new), diff_cases(base, new),
                diff_metrics(base, new, threshold, statistics, min_seconds))  # fmt: skip


def run(base: Path, new: Path, out: Path | None = None, threshold: float = compare.DEFAULT_THRESHOLD,
        statistics: Sequence[str] = compare.DEFAULT_STATISTICS, min_seconds: float = compare.DEFAULT_MIN_SECONDS,
        ) -> int:  # fmt: skip
    """Print the summary, write the HTML page; the exit status. Raises DiffError on misuse."""
    from kai_conformance.reports.across_runs import diff_html, diff_text

    result = diff(base, new, threshold, statistics, min_seconds)
    if out is not None:  # only where asked: the inputs are other runs' report directories, not this diff's
        try:  # before printing anything: a page that cannot be written is a usage error, with nothing half-said
            out.write_text(diff_html.render(result))
        except OSError as exc:
            raise DiffError(f"cannot write the HTML page {out} ({exc.strerror or exc}): choose another --out") from exc
    print(diff_text.render(result))
    print(f"HTML: {out}" if out is not None else "HTML: not written (pass --out FILE.html for the full page)")
    return result.exit_status
