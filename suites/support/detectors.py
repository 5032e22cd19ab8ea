"""Named detectors: pure functions over snapshots that return a :class:`Verdict` with an explanation.

A verdict reads like a finding: "gang violated: 2 of 4 pods bound (node-a, node-b) while 2 pending". Cases record
verdicts (``record.verdict``) and turn them into waits (``verdict.observation()``); every detector is shown to
fire on a violating snapshot in ``tests/test_detectors.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kai_conformance.fixtures import matching
from kai_conformance.fixtures.kube import AccessReview, event_time
from kai_conformance.fixtures.waits import Observation
from kai_conformance.suites.support.expectations import (
    EVICT_ACTION_ANNOTATION,
    EVICT_EVENT_REASON,
    JOBSET_API_VERSION,
    NOT_READY_EVENT_REASON,
    POD_GROUP_ANNOTATION,
    SUBGROUP_LABEL,
    TOP_OWNER_ANNOTATION,
    UNSCHEDULABLE_CONDITION,
    UNSCHEDULABLE_REASON,
)
from kai_conformance.suites.support.snapshot import (
    Obj,
    Snapshot,
    annotations_of,
    bound_at,
    container_waiting,
    is_running,
    labels_of,
    name_of,
    node_summary,
    owner_refs,
    pending_reason,
    podgroup_name,
    scheduled_condition,
    uid_of,
)

#: How many pods a verdict names before it abbreviates.
NAMED = 3


@dataclass(frozen=True)
class Verdict:
    detector: str
    ok: bool
    explanation: str

    def observation(self) -> Observation:
        return Observation(self.ok, f"{self.detector}: {self.explanation}")

    def __str__(self) -> str:
        return f"[{self.detector}] {'ok' if self.ok else 'VIOLATED'}: {self.explanation}"


def _names(objs: Sequence[Obj], describe: Callable[[Obj], str] = name_of) -> str:
    shown = [describe(o) for o in objs[:NAMED]]
    return ", ".join(shown) + (f" and {len(objs) - NAMED} more" if len(objs) > NAMED else "")


def _waiting(pod: Obj) -> str:
    return f"{name_of(pod)} ({pending_reason(pod)})"


def all_of(*verdicts: Verdict) -> Verdict:
    """One verdict holding when all hold; its explanation lists the failing ones first."""
    failing = [v for v in verdicts if not v.ok]
    shown = failing or list(verdicts)
    return Verdict("+".join(v.detector for v in verdicts), not failing, "; ".join(str(v) for v in shown))


def fires(verdict: Verdict) -> Verdict:
    """For control cases: holds when ``verdict`` reports a violation (the detector works on this cluster)."""
    return Verdict(f"{verdict.detector}-fires", not verdict.ok, verdict.explanation)


# ------------------------------------------------------------------------------------------------------ gang
def gang_all_or_nothing(snap: Snapshot, size: int) -> Verdict:
    """A gang is either wholly bound or not bound at all."""
    bound, pending = snap.bound_pods, snap.pending_pods
    missing = max(0, size - len(snap.live_pods))
    if not bound:
        text = f"no pod of the {size}-pod gang is bound ({len(pending)} pending"
        return Verdict("gang", True, text + (f", {missing} not created yet)" if missing else ")"))
    if len(bound) >= size:
        return Verdict("gang", True, f"all {size} pods bound ({node_summary(bound)})")
    text = f"gang violated: {len(bound)} of {size} pods bound ({node_summary(bound)}) while {len(pending)} pending"
    return Verdict("gang", False, text + (f" and {missing} not created" if missing else ""))


def gang_fully_bound(snap: Snapshot, size: int) -> Verdict:
    """Every pod of the gang is bound."""
    bound, pending = snap.bound_pods, snap.pending_pods
    if len(bound) >= size:
        return Verdict("gang-bound", True, f"all {size} pods bound ({node_summary(bound)})")
    text = f"{len(bound)} of {size} pods bound"
    if pending:
        text += f"; waiting: {_names(pending, _waiting)}"
    if len(snap.live_pods) < size:
        text += f"; {size - len(snap.live_pods)} pod(s) not created yet"
    return Verdict("gang-bound", False, text + _podgroup_says(snap))


def _podgroup_says(snap: Snapshot) -> str:
    """The PodGroup's latest NotReady/Unschedulable event, when the snapshot read events: KAI's own account."""
    pg = snap.podgroup
    if pg is None:
        return ""
    events = [e for reason in (NOT_READY_EVENT_REASON, UNSCHEDULABLE_REASON) for e in snap.events_for(pg, reason)]
    if not events:
        return ""
    latest = max(events, key=event_time)
    return f"; PodGroup {name_of(pg)} says {latest.get('reason')}: {latest.get('message', '')}"


def nothing_bound(snap: Snapshot, size: int) -> Verdict:
    """No pod of the gang is bound (the "never happens" side of a gang that must wait)."""
    bound = snap.bound_pods
    if bound:
        return Verdict(
            "gang-held",
            False,
            f"{len(bound)} of {size} pods bound ({node_summary(bound)}) although the gang must not be placed",
        )
    pending = snap.pending_pods
    first = f": {pending_reason(pending[0])}" if pending else ""
    return Verdict("gang-held", True, f"none of the {size} pods bound ({len(pending)} pending{first})")


def pods_running(snap: Snapshot, size: int) -> Verdict:
    """Every pod of the workload runs (its container started): the workload image works on this cluster."""
    running = [p for p in snap.live_pods if is_running(p)]
    if len(running) >= size:
        return Verdict("running", True, f"all {size} pods running")
    waiting = [p for p in snap.live_pods if not is_running(p)]
    described = _names(waiting, lambda p: f"{name_of(p)} ({container_waiting(p)})")
    return Verdict("running", False, f"{len(running)} of {size} pods running; not yet: {described}")


def pods_gone(snap: Snapshot) -> Verdict:
    """No live pod is left (a suspended or deleted workload)."""
    live = snap.live_pods
    if live:
        return Verdict("pods-gone", False, f"{len(live)} pod(s) still live: {_names(live)}")
    terminating = len(snap.pods)
    return Verdict("pods-gone", True, "no live pod" + (f" ({terminating} terminating)" if terminating else ""))


def bind_spread(snap: Snapshot, limit: float) -> Verdict:
    """The gang's pods were bound within ``limit`` seconds of each other (PodScheduled=True transitions)."""
    bound = snap.bound_pods
    if not bound:
        return Verdict("bind-spread", False, "no bound pod to measure")
    unknown = [p for p in bound if bound_at(p) is None]
    if unknown:
        return Verdict("bind-spread", False, f"bind time unknown (no PodScheduled=True) for {_names(unknown)}")
    times = [bound_at(p) or 0.0 for p in bound]
    spread = max(times) - min(times)
    return Verdict(
        "bind-spread",
        spread <= limit,
        f"{len(bound)} pods bound within {spread:.0f}s of each other (limit {limit:.0f}s; times have 1s resolution)",
    )


def pods_marked_unschedulable(snap: Snapshot) -> Verdict:
    """Every pending pod carries PodScheduled=False with reason Unschedulable."""
    pending = snap.pending_pods
    if not pending:
        return Verdict("pods-unschedulable", False, "no pending pod carries a scheduling verdict (none pending)")
    unmarked = [
        p
        for p in pending
        if (scheduled_condition(p) or {}).get("status") != "False"
        or (scheduled_condition(p) or {}).get("reason") != UNSCHEDULABLE_REASON
    ]
    if unmarked:
        return Verdict(
            "pods-unschedulable",
            False,
            f"{len(unmarked)} of {len(pending)} pending pods lack PodScheduled=False/Unschedulable: "
            + _names(unmarked, _waiting),
        )
    return Verdict("pods-unschedulable", True, f"all {len(pending)} pending pods say {pending_reason(pending[0])}")


def _podgroup_reasons(snap: Snapshot, podgroup: Obj) -> list[tuple[str, str]]:
    """(reason, text) pairs the PodGroup gives: its unschedulable conditions' reasons, then its events."""
    found: list[tuple[str, str]] = []
    for cond in (podgroup.get("status") or {}).get("schedulingConditions") or []:
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


def _one_podgroup(snap: Snapshot, detector: str) -> Obj | Verdict:
    pg = snap.podgroup
    if pg is None:
        names = ", ".join(name_of(g) for g in snap.podgroups) or "none"
        return Verdict(detector, False, f"expected one PodGroup for {snap.what}, found {len(snap.podgroups)}: {names}")
    return pg


def podgroup_queue(snap: Snapshot, queue: str) -> Verdict:
    pg = _one_podgroup(snap, "podgroup-queue")
    if isinstance(pg, Verdict):
        return pg
    actual = (pg.get("spec") or {}).get("queue")
    return Verdict(
        "podgroup-queue",
        actual == queue,
        f"PodGroup {name_of(pg)} spec.queue = {actual!r}" + ("" if actual == queue else f", expected {queue!r}"),
    )


def podgroup_priority_class(snap: Snapshot, priority_class: str) -> Verdict:
    pg = _one_podgroup(snap, "podgroup-priority")
    if isinstance(pg, Verdict):
        return pg
    actual = (pg.get("spec") or {}).get("priorityClassName")
    return Verdict(
        "podgroup-priority",
        actual == priority_class,
        f"PodGroup {name_of(pg)} spec.priorityClassName = {actual!r}"
        + ("" if actual == priority_class else f", expected {priority_class!r}"),
    )


# ------------------------------------------------------------------------------------------------ ownership
def single_podgroup_owned_by_jobset(snap: Snapshot) -> Verdict:
    """Exactly one PodGroup, named ``pg-<jobset>-<jobset uid>``, whose only ownerReference is the JobSet."""
    if len(snap.jobsets) != 1:
        return Verdict("podgroup-owner", False, f"expected one JobSet, found {len(snap.jobsets)}")
    jobset = snap.jobsets[0]
    if len(snap.podgroups) != 1:
        names = ", ".join(name_of(g) for g in snap.podgroups) or "none"
        return Verdict("podgroup-owner", False, f"expected exactly one PodGroup, found {len(snap.podgroups)}: {names}")
    pg = snap.podgroups[0]
    problems = []
    if name_of(pg) != podgroup_name(jobset):
        problems.append(f"named {name_of(pg)}, expected {podgroup_name(jobset)}")
    refs = owner_refs(pg)
    wanted = {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "name": name_of(jobset), "uid": uid_of(jobset)}
    if len(refs) != 1 or matching.mismatches(wanted, refs[0]):
        shown = ", ".join(f"{r.get('kind')}/{r.get('name')} uid {r.get('uid')}" for r in refs) or "none"
        problems.append(f"ownerReferences [{shown}], expected exactly JobSet/{name_of(jobset)} uid {uid_of(jobset)}")
    if problems:
        return Verdict("podgroup-owner", False, f"PodGroup {name_of(pg)}: " + "; ".join(problems))
    return Verdict(
        "podgroup-owner", True, f"one PodGroup {name_of(pg)}, owned only by JobSet {name_of(jobset)} ({uid_of(jobset)})"
    )


def top_owner_is_jobset(snap: Snapshot) -> Verdict:
    """The PodGroup's ``kai.scheduler/top-owner-metadata`` (a YAML document, B2) describes the JobSet."""
    pg = _one_podgroup(snap, "top-owner")
    if isinstance(pg, Verdict):
        return pg
    if len(snap.jobsets) != 1:
        return Verdict("top-owner", False, f"expected one JobSet, found {len(snap.jobsets)}")
    jobset = snap.jobsets[0]
    text = annotations_of(pg).get(TOP_OWNER_ANNOTATION)
    if text is None:
        return Verdict("top-owner", False, f"PodGroup {name_of(pg)} has no {TOP_OWNER_ANNOTATION} annotation")
    try:
        described = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return Verdict("top-owner", False, f"{TOP_OWNER_ANNOTATION} is not YAML: {exc}")
    group, version = JOBSET_API_VERSION.split("/")
    wanted = {"name": name_of(jobset), "uid": uid_of(jobset), "group": group, "version": version, "kind": "JobSet"}
    found = matching.mismatches(wanted, described if isinstance(described, dict) else {})
    if found:
        return Verdict("top-owner", False, f"{TOP_OWNER_ANNOTATION} of {name_of(pg)}: " + "; ".join(map(str, found)))
    return Verdict("top-owner", True, f"PodGroup {name_of(pg)} names JobSet {name_of(jobset)} as its top owner")


def _owned_by(obj: Obj, kind: str, owners: Iterable[Obj]) -> bool:
    uids = {uid_of(o) for o in owners}
    return any(ref.get("kind") == kind and ref.get("uid") in uids for ref in owner_refs(obj))


def ownership_chain(snap: Snapshot) -> Verdict:
    """TrainJob → JobSet → Job → Pod, each link an ownerReference carrying the owner's uid."""
    if len(snap.trainjobs) != 1 or len(snap.jobsets) != 1:
        return Verdict(
            "ownership-chain", False, f"expected one TrainJob and one JobSet, found {len(snap.trainjobs)} and "
            f"{len(snap.jobsets)}"
        )  # fmt: skip
    trainjob, jobset = snap.trainjobs[0], snap.jobsets[0]
    breaks = []
    if not _owned_by(jobset, "TrainJob", [trainjob]):
        breaks.append(f"JobSet {name_of(jobset)} is not owned by TrainJob {name_of(trainjob)} ({uid_of(trainjob)})")
    if not snap.jobs:
        breaks.append("no Job")
    breaks += [
        f"Job {name_of(j)} is not owned by the JobSet" for j in snap.jobs if not _owned_by(j, "JobSet", [jobset])
    ]
    if not snap.pods:
        breaks.append("no pod")
    breaks += [
        f"pod {name_of(p)} is not owned by a Job of the JobSet" for p in snap.pods if not _owned_by(p, "Job", snap.jobs)
    ]
    if breaks:
        return Verdict("ownership-chain", False, "; ".join(breaks[: NAMED + 2]))
    return Verdict(
        "ownership-chain",
        True,
        f"TrainJob {name_of(trainjob)} → JobSet {name_of(jobset)} → {len(snap.jobs)} Job(s) → {len(snap.pods)} pod(s), "
        "each linked by uid",
    )


def podgroup_shape(snap: Snapshot, expected_spec: dict[str, Any], row: str) -> Verdict:
    """The PodGroup's spec matches what the expectation row predicts (partial match)."""
    pg = _one_podgroup(snap, "podgroup-shape")
    if isinstance(pg, Verdict):
        return pg
    found = matching.mismatches(expected_spec, pg.get("spec") or {})
    if found:
        return Verdict(
            "podgroup-shape",
            False,
            f"PodGroup {name_of(pg)} differs from {row}: " + "; ".join(str(m) for m in found[: NAMED + 2]),
        )
    return Verdict("podgroup-shape", True, f"PodGroup {name_of(pg)} has the shape {row} predicts")


def pods_annotated(snap: Snapshot) -> Verdict:
    """KAI's podgrouper has annotated every live pod with its PodGroup's name (it has grouped them)."""
    pods = snap.live_pods
    done = [p for p in pods if POD_GROUP_ANNOTATION in annotations_of(p)]
    if pods and len(done) == len(pods):
        return Verdict("pods-annotated", True, f"all {len(pods)} pods carry {POD_GROUP_ANNOTATION}")
    missing = [p for p in pods if p not in done]
    return Verdict(
        "pods-annotated",
        False,
        f"{len(done)} of {len(pods)} pods carry {POD_GROUP_ANNOTATION}"
        + (f"; not: {_names(missing)}" if missing else ""),
    )


def pods_grouped(snap: Snapshot, subgroup_for: Callable[[Obj], str | None]) -> Verdict:
    """Every pod is annotated with its PodGroup's name and labelled with its SubGroup (``None``: no label)."""
    pg = _one_podgroup(snap, "pods-grouped")
    if isinstance(pg, Verdict):
        return pg
    if not snap.pods:
        return Verdict("pods-grouped", False, "no pod to check")
    wrong = []
    for pod in snap.live_pods:
        group = annotations_of(pod).get(POD_GROUP_ANNOTATION)
        subgroup, expected = labels_of(pod).get(SUBGROUP_LABEL), subgroup_for(pod)
        if group != name_of(pg):
            wrong.append(f"{name_of(pod)}: {POD_GROUP_ANNOTATION}={group!r}, expected {name_of(pg)!r}")
        if subgroup != expected:
            wrong.append(f"{name_of(pod)}: {SUBGROUP_LABEL}={subgroup!r}, expected {expected!r}")
    if wrong:
        return Verdict("pods-grouped", False, "; ".join(wrong[: NAMED + 2]))
    return Verdict("pods-grouped", True, f"all {len(snap.live_pods)} pods point at PodGroup {name_of(pg)}")


# ------------------------------------------------------------------------------------------ eviction and GC
def eviction_recorded(snap: Snapshot, action: str) -> Verdict:
    """The victim's PodGroup carries ``Evict`` events written by the scheduler for ``action`` (preempt | reclaim)."""
    pg = _one_podgroup(snap, "eviction-event")
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


def collected(snap: Snapshot) -> Verdict:
    """Nothing of the workload is left: no JobSet, Job, pod or PodGroup (garbage collection is done)."""
    left = [
        f"{kind} {name_of(o)}"
        for kind, objs in (
            ("JobSet", snap.jobsets),
            ("Job", snap.jobs),
            ("Pod", snap.pods),
            ("PodGroup", snap.podgroups),
        )
        for o in objs
    ]
    if left:
        return Verdict("garbage-collected", False, f"{len(left)} object(s) left: {', '.join(left[: NAMED + 2])}")
    return Verdict("garbage-collected", True, "JobSet, Jobs, pods and PodGroup are gone")


# ------------------------------------------------------------------------------------- partial over time
class PartialGangWatch:
    """Fires when a gang stays partially bound for longer than ``grace`` seconds across observations.

    Binding and eviction are not atomic (the binder binds pods one by one; an eviction deletes them one by one),
    so one snapshot may catch a gang half-way; a *persistent* partial gang is the violation.
    """

    def __init__(self, size: int, grace: float) -> None:
        self.size, self.grace = size, grace
        self.since: float | None = None
        self.longest = 0.0
        self.observations = 0

    def observe(self, snap: Snapshot) -> Verdict:
        self.observations += 1
        verdict = gang_all_or_nothing(snap, self.size)
        if verdict.ok:
            if self.since is not None:  # the partial moment ended somewhere before this observation
                self.longest = max(self.longest, snap.taken_at - self.since)
            self.since = None
        else:
            self.since = snap.taken_at if self.since is None else self.since
            lasted = snap.taken_at - self.since
            self.longest = max(self.longest, lasted)
            if lasted > self.grace:
                return Verdict(
                    "gang-never-partial",
                    False,
                    f"{verdict.explanation}, for {lasted:.1f}s (more than the {self.grace:.0f}s a gang may take "
                    "to bind or be evicted)",
                )
        return Verdict(
            "gang-never-partial",
            True,
            f"never partial for more than {self.grace:.0f}s in {self.observations} observation(s) "
            f"(longest partial moment at most {self.longest:.1f}s)",
        )


# -------------------------------------------------------------------------------------------- labels, RBAC
@dataclass(frozen=True)
class Arrival:
    """Did ``key`` set at ``source`` arrive at ``level``, and was it expected to?"""

    source: str
    key: str
    level: str
    expected: bool
    observed: bool


def arrivals_as_expected(arrivals: Sequence[Arrival]) -> Verdict:
    wrong = [a for a in arrivals if a.expected != a.observed]
    if not arrivals:
        return Verdict("propagation", False, "nothing was checked")
    if wrong:
        lines = [
            f"{a.key} from {a.source} at {a.level}: expected {'present' if a.expected else 'absent'}, "
            f"found {'present' if a.observed else 'absent'}"
            for a in wrong
        ]
        return Verdict("propagation", False, f"{len(wrong)} of {len(arrivals)} arrivals differ: " + "; ".join(lines))
    return Verdict("propagation", True, f"all {len(arrivals)} (source, key, level) arrivals as expected")


def access_granted(user: str, answers: Sequence[tuple[str, str, AccessReview]]) -> Verdict:
    """Every (verb, resource) SubjectAccessReview answered allowed for ``user``."""
    denied = [f"{verb} {resource}" + (f" ({review.reason})" if review.reason else "") for verb, resource, review in answers
              if not review.allowed]  # fmt: skip
    if not answers:
        return Verdict("rbac", False, "no access review was made")
    if denied:
        return Verdict("rbac", False, f"{user} may not: {', '.join(denied)}")
    return Verdict("rbac", True, f"{user} may " + ", ".join(f"{verb} {resource}" for verb, resource, _ in answers))
