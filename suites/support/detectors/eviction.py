"""Eviction detectors: the scheduler recorded why it evicted a gang, and a gang it must spare kept its pods."""

from __future__ import annotations

from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.expectations import EVICT_ACTION_ANNOTATION, EVICT_EVENT_REASON
from kai_conformance.suites.support.snapshot import NAMED, Snapshot, annotations_of, name_of, uid_of


def eviction_recorded(snap: Snapshot, action: str) -> Verdict:
    """The victim's PodGroup carries ``Evict`` events written by the scheduler for ``action`` (preempt | reclaim)."""
    pg = one_podgroup(snap, "eviction-event")
    if isinstance(pg, Verdict):
        return pg
    events = snap.events_for(pg, EVICT_EVENT_REASON)
    matching_action = [e for e in events if annotations_of(e).get(EVICT_ACTION_ANNOTATION) == action]
    if matching_action:
        return Verdict(
            "eviction-event",
            True,
            f"PodGroup {name_of(pg)} has {len(matching_action)} Evict event(s) ({action}): "
            f"{matching_action[-1].get('message', '')}",
        )
    seen = ", ".join(str(annotations_of(e).get(EVICT_ACTION_ANNOTATION)) for e in events) or "none"
    return Verdict(
        "eviction-event", False, f"PodGroup {name_of(pg)} has no Evict event for {action} (Evict actions seen: {seen})"
    )


def gang_undisturbed(snap: Snapshot, original_uids: frozenset[str]) -> Verdict:
    """The gang's original pods are all still bound: none evicted, deleted or replaced."""
    live = {uid_of(p): p for p in snap.bound_pods}
    lost = sorted(original_uids - set(live))
    if lost:
        newcomers = [name_of(p) for u, p in live.items() if u not in original_uids]
        return Verdict(
            "gang-undisturbed",
            False,
            f"{len(lost)} of {len(original_uids)} original pods are no longer bound"
            + (f"; replacements: {', '.join(newcomers[:NAMED])}" if newcomers else ""),
        )
    return Verdict("gang-undisturbed", True, f"all {len(original_uids)} original pods still bound")
