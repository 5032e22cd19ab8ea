"""Consolidation and eviction-protection detectors.

* ``fragmented``: the case's pods leave every GPU node exactly so many GPUs in use (the layout consolidation must
  repack).
* ``every-moved-pod-replaced``: every workload that ran before consolidation is bound again, whole: the pods KAI
  moved were placed again and none was lost.
* ``consolidation-recorded``: at least one of them records an ``Evict`` event of action ``consolidation``.
* ``protection-start`` / ``preemption-delay``: where a protection window starts, as KAI counts it (the PodGroup's
  ``kai.scheduler/last-start-timestamp``; its ``spec.preemptionDelay``).
* ``protected-until-end``: a victim's first eviction came no earlier than its protection window's end: judged on
  KAI's own clock (its ``Evict`` events' time, ``kai.scheduler/last-eviction-timestamp`` on v0.17) against the end
  KAI computes from the same timestamp the suite read, without margin; where either is missing, on the suite's
  observation with the wall-clock margin (:class:`ProtectionWindow`).
* ``evicted-when-due``: once the window has ended, KAI evicts within a few scheduling periods (the suite's clock).

Facts: docs/research/upstream-facts.md §B11.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kai_conformance.reports.records import PodTimes
from kai_conformance.suites.support.detectors.eviction import eviction_recorded
from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.expectations import (
    EVICT_ACTION_ANNOTATION,
    EVICT_EVENT_REASON,
    UNSCHEDULABLE_REASON,
)
from kai_conformance.suites.support.expectations.consolidation import (
    CONSOLIDATION_ACTION,
    LAST_EVICTION_ANNOTATION,
    LAST_START_ANNOTATION,
    PREEMPTION_DELAY_REASON,
)
from kai_conformance.suites.support.snapshot import (
    Snapshot,
    annotations_of,
    gpus_of,
    name_list,
    name_of,
    node_of,
    parse_time,
)

#: The end KAI states in its ``PreemptionDelayNotElapsed`` fit error (v0.17.0 actions/utils/input_jobs.go 92–94).
_STATED_END = re.compile(
    r"may not trigger evictions before (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))"
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


# ------------------------------------------------------------------------------------------ protection windows
def clock_time(seconds: float) -> str:
    """``2026-11-24T10:00:30Z``: a time as KAI and the API write it (whole seconds, UTC)."""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ProtectionWindow:
    """When a protection ends and how an eviction is judged against it (docs/performance.md, "Protection windows").

    ``exact``: ``end`` was read from the very timestamp KAI compares its clock with (the victim's
    ``kai.scheduler/last-start-timestamp``, the preemptor PodGroup's ``creationTimestamp``), so an eviction time
    KAI wrote itself is judged against it without margin. Any other judgment (an end the suite estimated, or an
    eviction only the suite saw) accepts evictions from ``margin`` seconds before the end (the wall-clock margin).
    ``due``: the suite's clock by which KAI must have evicted."""

    what: str
    end: float
    source: str
    exact: bool
    margin: float
    due: float

    def describe(self) -> str:
        judged = (
            "exact: KAI compares its clock with the same timestamp"
            if self.exact
            else f"the wall clock applies: evictions accepted from {self.margin:.0f} s before it"
        )
        return (
            f"{self.what} from {self.source}: protected until {clock_time(self.end)} ({judged}); eviction due within "
            f"{self.due - self.end:.0f} s after it"
        )


def kai_eviction_time(snap: Snapshot) -> tuple[float, str] | None:
    """When KAI first evicted the workload of ``snap`` (narrowed, taken with events), on KAI's own clock: the
    earliest ``firstTimestamp`` (or ``eventTime``) of its PodGroup's ``Evict`` events, which KAI's recorder stamps
    with the scheduler's clock as it evicts, and on v0.17 the PodGroup's ``kai.scheduler/last-eviction-timestamp``.
    None when neither is there or readable."""
    pg = snap.podgroup
    if pg is None:
        return None
    found: list[tuple[float, str]] = []
    for event in snap.events_for(pg, EVICT_EVENT_REASON):
        stamp = parse_time(event.get("firstTimestamp") or event.get("eventTime"))
        if stamp is not None:
            action = annotations_of(event).get(EVICT_ACTION_ANNOTATION) or "no action"
            found.append((stamp, f"its Evict event ({action})"))
    stamp = parse_time(annotations_of(pg).get(LAST_EVICTION_ANNOTATION))
    if stamp is not None:
        found.append((stamp, f"PodGroup {name_of(pg)} {LAST_EVICTION_ANNOTATION}"))
    return min(found, key=lambda f: f[0], default=None)  # the first of equal times: an event, naming the action


def stated_delay_end(snap: Snapshot) -> float | None:
    """The end of its preemption delay that KAI states for the workload of ``snap`` (``PreemptionDelayNotElapsed``:
    "may not trigger evictions before <time>", in the PodGroup's scheduling condition or an Unschedulable event)."""
    pg = snap.podgroup
    if pg is None:
        return None
    texts = [str(e.get("message") or "") for e in snap.events_for(pg, UNSCHEDULABLE_REASON)]
    for condition in (pg.get("status") or {}).get("schedulingConditions") or []:
        texts.append(str(condition.get("message") or ""))
        texts += [str(r.get("message") or "") for r in condition.get("reasons") or []
                  if r.get("reason") == PREEMPTION_DELAY_REASON]  # fmt: skip
    for text in texts:
        found = _STATED_END.search(text)
        if found:
            return parse_time(found.group(1))
    return None


def protected_until_end(
    window: ProtectionWindow, kai_evicted: tuple[float, str] | None, pods: Iterable[PodTimes]
) -> Verdict:
    """The victim's first eviction came no earlier than ``window.end``. KAI's own time of it (:func:`kai_eviction_time`)
    against an exact end is judged without margin (both whole seconds on KAI's clock, the end an integer: KAI
    evicted at or after the end exactly when its stamp is); anything else falls back to the suite's observation
    (:func:`evicted_after`) with the window's margin, and says so."""
    if kai_evicted is not None and window.exact:
        when, source = kai_evicted
        after = when - window.end
        side = f"{after:.0f} s after" if after >= 0 else f"{-after:.0f} s before"
        return Verdict(
            "protected-until-end",
            after >= 0,
            f"KAI evicted at {clock_time(when)} by its own clock ({source}), {side} the protection ended at "
            f"{clock_time(window.end)}",
        )
    why = "no Evict event or eviction stamp carries KAI's time" if kai_evicted is None else "the end is estimated"
    if kai_evicted is not None:
        when, source = kai_evicted
        pods = [PodTimes("kai", "victim", evicted=when)]
        why += f"; KAI's time from {source}"
    seen = evicted_after(pods, window.end, window.margin)
    return Verdict(seen.detector, seen.ok, f"{seen.explanation} (wall clock: {why})")


def evicted_when_due(window: ProtectionWindow, taken_at: float, protected: Verdict) -> Verdict:
    """Once the protection has ended, KAI evicts within the window's due time: fires on an observation after
    ``window.due`` (the suite's clock) in which the victim is still ``protected`` (whole, the preemptor unbound)."""
    late = taken_at - window.end
    if protected.ok and taken_at > window.due:
        return Verdict(
            "evicted-when-due",
            False,
            f"nothing evicted {late:.1f} s after the protection ended at {clock_time(window.end)} ({window.source}): "
            f"KAI evicts in its first cycle after the end, due within {window.due - window.end:.0f} s; {protected}",
        )
    state = "still protected" if protected.ok else "KAI has acted"
    return Verdict("evicted-when-due", True, f"{state} {late:+.1f} s from the protection's end")
