"""Consolidation and eviction-protection detectors.

* ``fragmented``: the case's pods leave every GPU node exactly so many GPUs in use (the layout consolidation must
  repack).
* ``every-moved-pod-replaced``: every workload that ran before consolidation is bound again, whole: the pods KAI
  moved were placed again and none was lost.
* ``consolidation-recorded``: at least one of them records an ``Evict`` event of action ``consolidation``.
* ``protection-start`` / ``preemption-delay``: where a protection window starts, as KAI counts it (the PodGroup's
  ``kai.scheduler/last-start-timestamp``; its ``spec.preemptionDelay``).
* ``protected-until-end``: a victim's first eviction came no earlier than its protection window's end (less a
  margin for clocks and polling).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from kai_conformance.reports.records import PodTimes
from kai_conformance.suites.support.detectors.eviction import eviction_recorded
from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.expectations_consolidation import CONSOLIDATION_ACTION, LAST_START_ANNOTATION
from kai_conformance.suites.support.snapshot import (
    Snapshot,
    annotations_of,
    gpus_of,
    name_list,
    name_of,
    node_of,
    parse_time,
)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def go_duration(text: str) -> float:
    """Seconds in a Go duration string as KAI parses and prints them (``30s``, ``5m0s``, ``1h2m``, ``300ms``)."""
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def fragmented(snap: Snapshot, nodes: Iterable[str], per_node: int) -> Verdict:
    """Every node of ``nodes`` has exactly ``per_node`` GPUs used by the snapshot's bound pods."""
    used = Counter[str]()
    for pod in snap.bound_pods:
        used[node_of(pod) or ""] += gpus_of(pod)
    wanted = list(nodes)
    off = [n for n in wanted if used[n] != per_node]
    text = ", ".join(f"{n}: {used[n]}" for n in wanted)
    if off:
        return Verdict("fragmented", False, f"GPUs in use per node {text}; expected {per_node} on each")
    return Verdict("fragmented", True, f"{per_node} GPU(s) in use on each node ({text}): no node can take the gang")


def all_bound(snap: Snapshot, workloads: Mapping[str, int]) -> Verdict:
    """Every workload (TrainJob name → pods) has all its pods bound: whatever consolidation moved is placed again."""
    short = {w: len(snap.of(w).bound_pods) for w in workloads if len(snap.of(w).bound_pods) < workloads[w]}
    if short:
        described = name_list(sorted(short), lambda w: f"{w} ({short[w]} of {workloads[w]} bound)")
        return Verdict(
            "every-moved-pod-replaced",
            False,
            f"{len(short)} of {len(workloads)} workload(s) that ran before are not bound again: {described}",
        )
    pods = sum(workloads.values())
    return Verdict("every-moved-pod-replaced", True, f"all {len(workloads)} workload(s) ({pods} pods) bound")


def consolidation_recorded(snap: Snapshot, workloads: Iterable[str]) -> Verdict:
    """At least one of ``workloads`` records ``Evict`` events of action ``consolidation`` (snapshot with events)."""
    moved = [w for w in workloads if eviction_recorded(snap.of(w), CONSOLIDATION_ACTION).ok]
    if not moved:
        return Verdict("consolidation-recorded", False, "no workload's PodGroup records an Evict event (consolidation)")
    return Verdict(
        "consolidation-recorded", True, f"{len(moved)} workload(s) moved by consolidation: {name_list(moved, str)}"
    )


def protection_start(snap: Snapshot) -> float | Verdict:
    """When KAI last allocated the workload's gang: its PodGroup's ``kai.scheduler/last-start-timestamp``."""
    pg = one_podgroup(snap, "protection-start")
    if isinstance(pg, Verdict):
        return pg
    stamp = annotations_of(pg).get(LAST_START_ANNOTATION)
    started = parse_time(stamp) if stamp else None
    if started is None:
        return Verdict(
            "protection-start",
            False,
            f"PodGroup {name_of(pg)} has no {LAST_START_ANNOTATION} annotation: the scheduler stamps it when it "
            "allocates the gang, and min-runtime counts from it",
        )
    return started


def preemption_delay(snap: Snapshot, seconds: float) -> Verdict:
    """The workload's PodGroup carries ``spec.preemptionDelay`` of ``seconds``."""
    pg = one_podgroup(snap, "preemption-delay")
    if isinstance(pg, Verdict):
        return pg
    value = (pg.get("spec") or {}).get("preemptionDelay")
    try:
        found = go_duration(value) if value else None
    except ValueError:
        found = None
    text = f"PodGroup {name_of(pg)} spec.preemptionDelay = {value!r}"
    return Verdict(
        "preemption-delay", found == seconds, text + ("" if found == seconds else f", expected {seconds:g}s")
    )


def evicted_after(pods: Iterable[PodTimes], end: float, margin: float) -> Verdict:
    """The first eviction among ``pods`` (a victim's original pods) came no earlier than ``end - margin``."""
    times = [p.evicted for p in pods if p.evicted is not None]
    if not times:
        return Verdict("protected-until-end", False, "no pod of the victim was seen evicted")
    first = min(times)
    after = first - end
    when = f"{after:.1f} s after" if after >= 0 else f"{-after:.1f} s before"
    return Verdict(
        "protected-until-end",
        after >= -margin,
        f"first eviction seen {when} the protection window ended (allowed from {margin:.0f} s before: clocks, polling)",
    )
