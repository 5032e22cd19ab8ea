"""Routing detectors: the queue and priority class of the PodGroup, and its own account of why it is not
scheduled (a missing queue, a queue over its limit)."""

from __future__ import annotations

from collections.abc import Sequence

from kai_conformance.fixtures.kube import api_views
from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.expectations import UNSCHEDULABLE_CONDITION, UNSCHEDULABLE_REASON
from kai_conformance.suites.support.snapshot import NAMED, Obj, Snapshot, name_of, uid_of


def _podgroup_reasons(snap: Snapshot, podgroup: Obj) -> list[tuple[str, str]]:
    """(reason, text) pairs the PodGroup gives: its unschedulable conditions' reasons, then its events."""
    found: list[tuple[str, str]] = []
    for cond in api_views.podgroup(podgroup).get("status", {}).get("schedulingConditions") or []:
        if cond.get("type") != UNSCHEDULABLE_CONDITION or cond.get("status") != "True":
            continue
        for reason in cond.get("reasons") or []:
            found.append((reason.get("reason", ""), f"{reason.get('reason')}: {reason.get('message', '')}"))
        if cond.get("message"):
            found.append((cond.get("reason", ""), f"condition {cond.get('reason')}: {cond['message']}"))
    for event in snap.events_for(podgroup, UNSCHEDULABLE_REASON):
        found.append((UNSCHEDULABLE_REASON, f"event {UNSCHEDULABLE_REASON}: {event.get('message', '')}"))
    return found


def podgroup_explains(snap: Snapshot, reasons: Sequence[str] = (), mentions: str | None = None) -> Verdict:
    """The PodGroup says why it is not scheduled (status.schedulingConditions or an Unschedulable event).

    With ``reasons``, one of them must be given: as a condition reason or as the ``<Reason>:`` prefix KAI puts on
    messages (``QueueDoesNotExist: Queue 'q' does not exist.``); with ``mentions``, that text must appear in it.
    """
    pg = snap.podgroup
    if pg is None:
        return Verdict("podgroup-explains", False, f"expected one PodGroup, found {len(snap.podgroups)}")
    given = _podgroup_reasons(snap, pg)
    wanted = " or ".join(reasons) + (f" mentioning {mentions!r}" if mentions else "")
    hits = [text for reason, text in given if not reasons or reason in reasons or any(f"{r}:" in text for r in reasons)]
    hits = [text for text in hits if mentions is None or mentions in text]
    if hits:
        return Verdict("podgroup-explains", True, f"PodGroup {name_of(pg)} says {hits[0]}")
    seen = "; ".join(text for _, text in given[:NAMED]) or "no UnschedulableOnNodePool condition and no event"
    return Verdict(
        "podgroup-explains",
        False,
        f"PodGroup {name_of(pg)} gives no reason{' ' + wanted if wanted else ''} (it says: {seen})",
    )


def _podgroup_spec_is(snap: Snapshot, detector: str, field: str, expected: str) -> Verdict:
    """The one PodGroup's ``spec.<field>`` is ``expected``."""
    pg = one_podgroup(snap, detector)
    if isinstance(pg, Verdict):
        return pg
    actual = (pg.get("spec") or {}).get(field)
    return Verdict(
        detector,
        actual == expected,
        f"PodGroup {name_of(pg)} spec.{field} = {actual!r}"
        + ("" if actual == expected else f", expected {expected!r}"),
    )


def podgroup_queue(snap: Snapshot, queue: str) -> Verdict:
    """KAI queued the PodGroup to ``queue``."""
    return _podgroup_spec_is(snap, "podgroup-queue", "queue", queue)


def podgroup_priority_class(snap: Snapshot, priority_class: str) -> Verdict:
    """The PodGroup carries ``priority_class``."""
    return _podgroup_spec_is(snap, "podgroup-priority", "priorityClassName", priority_class)


def podgroup_kept(snap: Snapshot, before: Obj) -> Verdict:
    """The workload's one PodGroup is ``before`` itself (same uid), not a new one made in its place: a queue kept by
    a replacement proves nothing about the queue not moving."""
    podgroup = one_podgroup(snap, "podgroup-kept")
    if isinstance(podgroup, Verdict):
        return podgroup
    kept = uid_of(podgroup) == uid_of(before)
    how = "the same object" if kept else f"a replacement (uid {uid_of(podgroup)}, was {uid_of(before)})"
    return Verdict("podgroup-kept", kept, f"PodGroup {name_of(podgroup)} is {how}")
