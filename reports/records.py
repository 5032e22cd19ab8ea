"""Per-case result records: what each case observed, written by the process that ran it.

Suites fill a :class:`CaseRecorder` (the ``record`` fixture): detector verdicts, per-pod timelines, label
observations, free-form notes and the expectation table they assumed. After the case's teardown the plugin
adds the outcome and writes one JSON file per case into ``<state dir>/records/``; the main process merges
them into the reports. JSON keeps the records readable and mergeable across runs and machines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

RECORDS_DIR = "records"


class VerdictLike(Protocol):
    """What the recorder reads of a verdict (read-only: the detectors' ``Verdict`` is a frozen dataclass)."""

    @property
    def detector(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    @property
    def explanation(self) -> str: ...


@dataclass
class DetectorVerdict:
    detector: str
    ok: bool
    explanation: str
    #: Control cases expect the detector to fire (``ok`` False); the report shows that as conforming.
    expect_violation: bool = False

    @property
    def as_expected(self) -> bool:
        return self.ok != self.expect_violation

    @property
    def control_outcome(self) -> str:
        """For a control verdict, whether the detector fired; empty for any other verdict."""
        if not self.expect_violation:
            return ""
        return CONTROL_FIRED if not self.ok else CONTROL_SILENT

    @property
    def heading(self) -> str:
        """The detector's name as a report line starts, a control verdict saying whether it fired."""
        return f"{self.detector} (control: {self.control_outcome})" if self.expect_violation else self.detector


#: What the reports say of a control verdict (a control case passes only when its detector fires).
CONTROL_FIRED = "detector fired as expected"
CONTROL_SILENT = "detector did not fire"
#: What a runtimes case's skip says when the cluster, not KAI, kept its pods off their nodes (suites/test_runtimes.py);
#: the runtimes table reads it in the skip's message (reports/sections/runtime_table.py). Here, in the record format the
#: two share: the suites import no other module of reports/ (docs/ARCHITECTURE.md, the layers).
RUNTIME_NOT_JUDGED = "KAI is not judged"


@dataclass
class PodTimes:
    """Seconds since the epoch at which a pod was seen created / bound / running / evicted (None: never)."""

    pod: str
    workload: str
    node: str | None = None
    created: float | None = None
    bound: float | None = None
    running: float | None = None
    evicted: float | None = None
    #: When the pod was last looked at (e.g. the end of a "never bound" hold): the picture extends to it.
    observed: float | None = None


@dataclass
class GangTimes:
    """One gang of a scale burst, timed on the suite's clock when its watch delivered each change (seconds since the
    epoch; None: never). A burst has hundreds of gangs: the record keeps these instead of per-pod timelines."""

    workload: str
    pods: int
    gpus_per_pod: int
    queue: str = ""
    priority: str = ""
    #: Just before the suite sent the TrainJob's create.
    submitted: float | None = None
    #: When the gang's PodGroup was first seen.
    podgroup: float | None = None
    #: The first and the last bind of the first time every pod of the gang was bound.
    first_bound: float | None = None
    all_bound: float | None = None
    #: Pods of the gang deleted while bound (evicted: the suite deletes nothing while a burst runs).
    evicted_pods: int = 0


@dataclass
class BurstTimes:
    """A scale burst as a whole: what it asked for, how fast the cluster took it and what it holds once settled."""

    name: str
    gangs: int
    pods: int
    gpus: int  # the burst's GPUs, all gangs together
    cluster_gpus: int
    first_submitted: float | None = None
    last_submitted: float | None = None
    #: Pods going bound during the burst (replacements of evicted pods included), and the last of them.
    binds: int = 0
    last_bind: float | None = None
    #: GPUs the burst's bound pods hold once settled, and when they first reached that many.
    held_gpus: int = 0
    filled: float | None = None
    evicted_pods: int = 0
    evicted_gangs: int = 0
    #: When the burst was judged settled (None: it never settled).
    settled: float | None = None


@dataclass
class LabelObservation:
    """Did ``key`` (set at ``source``) arrive at ``level``, and was it expected to?"""

    source: str
    key: str
    level: str
    expected: bool
    observed: bool

    @property
    def as_expected(self) -> bool:
        return self.expected == self.observed


@dataclass
class CaseRecord:
    nodeid: str
    title: str = ""
    area: str = ""
    markers: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    combination: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    expectations: str = ""  # the expectation table the case assumed, e.g. "KAI v0.16+ (SubGroups)"
    outcome: str = ""  # passed | failed | skipped | xfailed | xpassed | error
    failure_kind: str = ""  # product | infrastructure | "" (no failure)
    message: str = ""
    duration: float = 0.0
    worker: str = ""
    verdicts: list[DetectorVerdict] = field(default_factory=list)
    timelines: dict[str, list[PodTimes]] = field(default_factory=dict)
    labels: list[LabelObservation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Named quantities observed over time (name → [(seconds since the epoch, value)]), plotted in the report.
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    #: Scale cases: every gang of their bursts, and each burst as a whole.
    gangs: list[GangTimes] = field(default_factory=list)
    bursts: list[BurstTimes] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)  # paths relative to the run's report directory
    run_id: str = ""
    exception: str = (
        ""  # qualified type of the exception that failed the case, e.g. "kai_conformance.fixtures.errors.Unreachable"
    )
    category: str = ""  # failure category (reports/categories.py), the same one Allure shows

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseRecord:
        """Tolerant of records written by newer versions: unknown keys are ignored."""
        data = _known(cls, data)
        data["verdicts"] = [DetectorVerdict(**_known(DetectorVerdict, v)) for v in data.get("verdicts", [])]
        data["timelines"] = {
            k: [PodTimes(**_known(PodTimes, p)) for p in v] for k, v in data.get("timelines", {}).items()
        }
        data["labels"] = [LabelObservation(**_known(LabelObservation, o)) for o in data.get("labels", [])]
        data["gangs"] = [GangTimes(**_known(GangTimes, g)) for g in data.get("gangs", [])]
        data["bursts"] = [BurstTimes(**_known(BurstTimes, b)) for b in data.get("bursts", [])]
        data["series"] = {
            name: [(float(t), float(value)) for t, value in points] for name, points in data.get("series", {}).items()
        }
        return cls(**data)


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {key: value for key, value in data.items() if key in names}


class CaseRecorder:
    """What a case writes into its record while it runs (the ``record`` fixture)."""

    def __init__(self, record: CaseRecord) -> None:
        self.record = record

    def expectations(self, description: str) -> None:
        """Name the expectation table (and version) the case assumed."""
        self.record.expectations = description

    def verdict(self, verdict: VerdictLike, *, expect_violation: bool = False) -> None:
        self.record.verdicts.append(
            DetectorVerdict(verdict.detector, bool(verdict.ok), verdict.explanation, expect_violation)
        )

    def timeline(self, workload: str, pods: list[PodTimes]) -> None:
        self.record.timelines[workload] = list(pods)

    def label(self, source: str, key: str, level: str, *, expected: bool, observed: bool) -> None:
        self.record.labels.append(LabelObservation(source, key, level, expected, observed))

    def note(self, text: str) -> None:
        self.record.notes.append(text)

    def burst(self, burst: BurstTimes, gangs: Iterable[GangTimes]) -> None:
        """A scale burst and its gangs (reports/sections/metrics.py derives the scale metrics from them)."""
        self.record.bursts.append(burst)
        self.record.gangs.extend(gangs)

    def series(self, name: str, points: Iterable[tuple[float, float]]) -> None:
        """A quantity observed over time (e.g. the GPUs a queue held): ``(seconds since the epoch, value)`` pairs,
        plotted as one line of the case's plot in the HTML report. Recording a name again replaces its points."""
        self.record.series[name] = [(float(t), float(value)) for t, value in points]


def write(record: CaseRecord, state_dir: Path, worker: str, sequence: int) -> Path:
    directory = state_dir / RECORDS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{worker}-{sequence:05d}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=1, sort_keys=True))
    tmp.replace(path)
    return path


def read_all(state_dir: Path) -> list[CaseRecord]:
    directory = state_dir / RECORDS_DIR
    return [CaseRecord.from_json(json.loads(p.read_text())) for p in sorted(directory.glob("*.json"))]
