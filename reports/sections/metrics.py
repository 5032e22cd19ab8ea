"""Performance metrics derived from the records every run already writes (no extra cluster work).

A metric is a name, a unit, which direction is better and a list of samples; each sample may carry a gang
size (the number of pods recorded for its workload) as a dimension, so the report can plot latency by gang
size. New metrics (e.g. from scale cases) are added as one more :class:`MetricDefinition` in
:data:`DEFINITIONS`: a function from a case's records to samples; everything downstream (statistics,
summary.json, the Markdown table, the HTML plots, ``reports compare``) picks them up by name.

Statistics use the **nearest-rank** percentile: the p-th percentile of n sorted samples is the
⌈p/100 · n⌉-th smallest sample. It is always an observed value (no interpolation), so a p99 over fewer than
100 samples is simply the maximum; see :func:`percentile`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kai_conformance.reports.records import BurstTimes, CaseRecord, GangTimes, PodTimes

if TYPE_CHECKING:
    from kai_conformance.reports.model import Report

LOWER = "lower"
HIGHER = "higher"
#: The statistics reported per metric, in order.
STATISTICS = ("p50", "p95", "p99", "max")


@dataclass(frozen=True)
class Sample:
    value: float
    #: Pods recorded for the workload the sample came from; None for run-level samples.
    gang_size: int | None = None
    source: str = ""  # "<test id> / <workload>", for tooltips and debugging


@dataclass(frozen=True)
class MetricDefinition:
    name: str
    unit: str
    better: str  # LOWER or HIGHER
    description: str
    #: Samples of one run (all its case records).
    collect: Callable[[Sequence[CaseRecord]], list[Sample]]


@dataclass
class Metric:
    name: str
    unit: str
    better: str
    description: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.samples]

    @property
    def stats(self) -> dict[str, float | int]:
        return statistics(self.values)

    @property
    def by_gang_size(self) -> dict[int, list[float]]:
        sizes: dict[int, list[float]] = {}
        for sample in self.samples:
            if sample.gang_size is not None:
                sizes.setdefault(sample.gang_size, []).append(sample.value)
        return dict(sorted(sizes.items()))

    def to_json(self) -> dict:
        return {
            "unit": self.unit,
            "better": self.better,
            "description": self.description,
            **self.stats,
            "by_gang_size": {str(size): statistics(values) for size, values in self.by_gang_size.items()},
        }


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile: the ⌈p/100 · n⌉-th smallest value (p in (0, 100])."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0 < p <= 100:
        raise ValueError(f"percentile {p} is outside (0, 100]")
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def statistics(values: Sequence[float]) -> dict[str, float | int]:
    """count, p50, p95, p99 and max (nearest rank) of ``values`` (non-empty), rounded to microseconds' worth
    of digits (the records' clock is no finer)."""
    return {
        "count": len(values),
        "p50": round(percentile(values, 50), 6),
        "p95": round(percentile(values, 95), 6),
        "p99": round(percentile(values, 99), 6),
        "max": round(max(values), 6),
    }


# -------------------------------------------------------------------------------------------------- definitions
def _workloads(records: Sequence[CaseRecord]) -> Iterable[tuple[str, list[PodTimes]]]:
    for record in records:
        for workload, pods in record.timelines.items():
            if pods:
                yield f"{record.nodeid} / {workload}", pods


def _per_workload(measure: Callable[[list[PodTimes]], float | None]) -> Callable[[Sequence[CaseRecord]], list[Sample]]:
    def collect(records: Sequence[CaseRecord]) -> list[Sample]:
        samples = []
        for source, pods in _workloads(records):
            value = measure(pods)
            if value is not None:
                samples.append(Sample(value, len(pods), source))
        return samples

    return collect


def time_to_schedule(pods: list[PodTimes]) -> float | None:
    """Seconds from the first pod's creation to the last pod's bind; None unless every pod was created and
    bound (a gang that was not placed whole has no time to schedule)."""
    created = [p.created for p in pods]
    bound = [p.bound for p in pods]
    if None in created or None in bound:
        return None
    return max(bound) - min(created)  # type: ignore[type-var]


def bind_spread(pods: list[PodTimes]) -> float | None:
    """Seconds between the first and the last bind of a gang; None unless every pod was bound."""
    bound = [p.bound for p in pods]
    if None in bound:
        return None
    return max(bound) - min(bound)  # type: ignore[type-var]


def time_to_running(pods: list[PodTimes]) -> float | None:
    """Seconds from the first pod's creation to the last pod's Running; None unless every pod was created and
    seen Running."""
    created = [p.created for p in pods]
    running = [p.running for p in pods]
    if None in created or None in running:
        return None
    return max(running) - min(created)  # type: ignore[type-var]


def bind_throughput(records: Sequence[CaseRecord]) -> list[Sample]:
    """One sample per run: the run's bound pods divided by the seconds from its first to its last bind; none
    when the run bound fewer than two pods or all at the same instant. Idle time between cases counts, so it
    is a rate of the whole run, comparable between runs of the same case selection."""
    bound = [p.bound for _, pods in _workloads(records) for p in pods if p.bound is not None]
    if len(bound) < 2 or max(bound) == min(bound):
        return []
    return [Sample(len(bound) / (max(bound) - min(bound)), None, "run")]


# ------------------------------------------------------------------------------------- scale bursts (records.gangs)
def _per_gang(measure: Callable[[GangTimes], float | None]) -> Callable[[Sequence[CaseRecord]], list[Sample]]:
    def collect(records: Sequence[CaseRecord]) -> list[Sample]:
        return [
            Sample(value, gang.pods, f"{record.nodeid} / {gang.workload}")
            for record in records
            for gang in record.gangs
            if (value := measure(gang)) is not None
        ]

    return collect


def _per_burst(measure: Callable[[BurstTimes], float | None]) -> Callable[[Sequence[CaseRecord]], list[Sample]]:
    def collect(records: Sequence[CaseRecord]) -> list[Sample]:
        return [
            Sample(value, None, f"{record.nodeid} / {burst.name}")
            for record in records
            for burst in record.bursts
            if (value := measure(burst)) is not None
        ]

    return collect


def _since(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


def gang_time_to_podgroup(gang: GangTimes) -> float | None:
    """TrainJob submitted → its PodGroup seen: Trainer, JobSet, the Job controller and KAI's podgrouper."""
    return _since(gang.submitted, gang.podgroup)


def gang_time_to_bound(gang: GangTimes) -> float | None:
    """TrainJob submitted → every pod of the gang bound (the first time it was whole)."""
    return _since(gang.submitted, gang.all_bound)


def gang_bind_spread(gang: GangTimes) -> float | None:
    return _since(gang.first_bound, gang.all_bound)


def burst_bind_throughput(burst: BurstTimes) -> float | None:
    """Pods bound per second: binds / (last bind − first submission); None without binds."""
    span = _since(burst.first_submitted, burst.last_bind)
    return burst.binds / span if burst.binds and span else None


def burst_time_to_fill(burst: BurstTimes) -> float | None:
    return _since(burst.first_submitted, burst.filled)


def burst_evictions(burst: BurstTimes) -> float | None:
    return float(burst.evicted_pods)


DEFINITIONS: tuple[MetricDefinition, ...] = (
    MetricDefinition("time_to_schedule", "s", LOWER, "first pod created → last pod bound, per gang",
                     _per_workload(time_to_schedule)),
    MetricDefinition("bind_spread", "s", LOWER, "first bind → last bind, per gang", _per_workload(bind_spread)),
    MetricDefinition("time_to_running", "s", LOWER, "first pod created → last pod Running, per gang",
                     _per_workload(time_to_running)),
    MetricDefinition("bind_throughput", "pods/s", HIGHER, "bound pods / (last bind − first bind), per run",
                     bind_throughput),
    MetricDefinition("scale_time_to_podgroup", "s", LOWER, "TrainJob submitted → its PodGroup seen, per gang of a "
                     "scale burst", _per_gang(gang_time_to_podgroup)),
    MetricDefinition("scale_time_to_bound", "s", LOWER, "TrainJob submitted → all its pods bound, per gang of a "
                     "scale burst", _per_gang(gang_time_to_bound)),
    MetricDefinition("scale_bind_spread", "s", LOWER, "first bind → last bind, per gang of a scale burst",
                     _per_gang(gang_bind_spread)),
    MetricDefinition("scale_bind_throughput", "pods/s", HIGHER, "pods bound / (last bind − first submission), "
                     "per scale burst", _per_burst(burst_bind_throughput)),
    MetricDefinition("scale_time_to_fill", "s", LOWER, "first submission → the burst's bound GPUs first at their "
                     "settled level, per scale burst", _per_burst(burst_time_to_fill)),
    MetricDefinition("scale_evictions", "pods", LOWER, "pods evicted while the burst ran, per scale burst",
                     _per_burst(burst_evictions)),
)  # fmt: skip


def collect(
    runs: Iterable[Sequence[CaseRecord]], definitions: Sequence[MetricDefinition] = DEFINITIONS
) -> list[Metric]:
    """The metrics with at least one sample, over the records of each run (a run-level metric gives one sample
    per run)."""
    runs = list(runs)
    metrics = []
    for definition in definitions:
        samples = [sample for records in runs for sample in definition.collect(records)]
        if samples:
            metrics.append(Metric(definition.name, definition.unit, definition.better, definition.description, samples))
    return metrics


def metrics_json(metrics: Sequence[Metric]) -> dict[str, dict]:
    return {metric.name: metric.to_json() for metric in metrics}


def of_report(report: Report) -> list[Metric]:
    """The metrics of a report's cases, each run's records apart (merged reports give a sample per run)."""
    runs: dict[str, list[CaseRecord]] = {}
    for case in report.cases:
        runs.setdefault(case.run.run_id, []).append(case.record)
    return collect(runs.values())
