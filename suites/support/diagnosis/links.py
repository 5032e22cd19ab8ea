"""The links of a TrainJob's chain, one finding each: who should have made the link, what is missing, and whether
that component is down or cannot act (:mod:`suites.support.diagnosis` walks the chain and calls these in order).

Each function reads only :class:`Facts` (what the diagnosis read once, when a wait failed) and returns a
:class:`Finding`, or None when its link is there.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME
from kai_conformance.fixtures.kube import event_time
from kai_conformance.suites.support.components import BINDER, PODGROUPER, SCHEDULER, Component, health
from kai_conformance.suites.support.detectors.queues import podgroup_explains
from kai_conformance.suites.support.diagnosis.provenance import JOBS, JOBSETS, PODGROUPS, Access
from kai_conformance.suites.support.expectations import (
    BIND_FAILED,
    NOT_READY_EVENT_REASON,
    POD_GROUP_ANNOTATION,
    PODGROUPER_USER,
    PODGROUPER_WARNING_REASON,
    QUEUE_LABEL,
)
from kai_conformance.suites.support.snapshot import (
    NAMED,
    Obj,
    Snapshot,
    bind_finished,
    name_list,
    name_of,
    owner_refs,
    pending_reason,
    scheduled_condition,
)

DECIDED = "KAI's decision"


@dataclass(frozen=True)
class Facts:
    """What a diagnosis reads, once, when a wait has failed: the namespace (owners and events included) and the
    cluster-wide facts about the components. ``None``: could not be read (``unread`` says why)."""

    snap: Snapshot
    bindrequests: tuple[Obj, ...] | None = ()
    deployments: tuple[Obj, ...] | None = ()
    access: dict[str, Access] | None = None
    queue_label_key: str = QUEUE_LABEL
    unread: tuple[str, ...] = ()
    #: The pods of the components' Deployments (their OOM kills: components.health).
    component_pods: tuple[Obj, ...] | None = ()


@dataclass(frozen=True)
class Finding:
    """The broken link: who should have acted (``component``, None when no component is to blame) and what is
    missing. ``down``: the component is down or cannot act (an infrastructure failure)."""

    component: Component | None
    text: str
    down: bool = False
    fix: str = ""
    #: How the finding is introduced: a link nobody made, or the scheduler's own decision not to place the pods
    #: (the behaviour under test, with KAI's reason).
    heading: str = "broken link"

    def __str__(self) -> str:
        who = f"{self.component.name} ({self.component.acts}): " if self.component else ""
        return f"{self.heading}: {who}{self.text}"


def conditions(obj: Obj) -> str:
    """``<Kind> <name> conditions: Type=Status (Reason: message); …; `` or nothing when it has none."""
    found = [
        f"{c.get('type')}={c.get('status')}"
        + (f" ({c.get('reason')}: {c.get('message', '')})" if c.get("reason") else "")
        for c in (obj.get("status") or {}).get("conditions") or []
    ]
    return f"{obj.get('kind')} {name_of(obj)} conditions: {'; '.join(found[:NAMED])}; " if found else ""


def look(component: Component, *also: str) -> str:
    """The ``fix:`` line that sends the reader to ``component`` (and its log in the case's diagnostics)."""
    log = [f"its log ({component.log} in the case's diagnostics)"] if component.log else []
    return f"check the {component.name}: " + ", ".join([*also, *log])


def absent(component: Component, facts: Facts, what: str, detail: str = "") -> Finding:
    """``what`` is missing and ``component`` should have made it: down when its Deployment is not Available."""
    state = health(component, facts.deployments, facts.component_pods)
    return Finding(component, f"{what}; {detail}{state.text}", down=state.up is False, fix=look(component))


def no_podgroup(facts: Facts, snap: Snapshot, workload: str) -> Finding:
    """Every pod exists but no PodGroup is owned by the JobSet: why the podgrouper did not make it."""
    pods = snap.live_pods
    foreign = sorted({p["spec"].get("schedulerName") or "default-scheduler" for p in pods} - {KAI_SCHEDULER_NAME})
    if foreign:
        return Finding(
            None,
            f"no PodGroup: the pods ask for schedulerName {', '.join(foreign)}, and KAI's podgrouper only groups pods "
            f"asking for {KAI_SCHEDULER_NAME} (kai-scheduler.md §3.5)",
            fix="the runtime's pod template must set schedulerName: kai-scheduler",
        )
    if len(snap.podgroups) > 1:
        return Finding(
            PODGROUPER, f"{len(snap.podgroups)} PodGroups are owned by JobSet {workload}: {name_list(snap.podgroups)}"
        )
    named = {(p["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION) for p in pods} - {None}
    elsewhere = [g for g in facts.snap.podgroups if name_of(g) in named]
    parts = [f"no PodGroup owned by JobSet {workload}"]
    if elsewhere:
        owners = ", ".join(f"{r.get('kind')} {r.get('name')}" for g in elsewhere for r in owner_refs(g)) or "nothing"
        parts.append(
            f"the pods point at {name_list(elsewhere)}, owned by {owners}: the owner walk stopped below the JobSet"
        )
    elif named:
        parts.append(f"the pods point at {', '.join(sorted(n for n in named if n))}, which does not exist")
    else:
        parts.append(f"no pod carries {POD_GROUP_ANNOTATION}: the podgrouper has not grouped them")
    warnings = [e for e in snap.events if e.get("reason") == PODGROUPER_WARNING_REASON]
    if warnings:
        parts.append(f"{PODGROUPER_WARNING_REASON}: {max(warnings, key=event_time).get('message', '')}")
    blocked = [a for r in (JOBS, JOBSETS, PODGROUPS) if (a := (facts.access or {}).get(r)) and a.granted is False]
    parts += [str(a) for a in blocked]
    state = health(PODGROUPER, facts.deployments, facts.component_pods)
    parts.append(state.text)
    fix = (
        f"grant the podgrouper's ClusterRole what KAI's chart grants (kai-scheduler.md §4.6), bound to {PODGROUPER_USER}"
        if blocked
        else look(PODGROUPER, "its Deployment's pods and events")
    )
    return Finding(PODGROUPER, "; ".join(parts), down=bool(blocked) or state.up is False, fix=fix)


def _phase(request: Obj) -> str:
    return (request.get("status") or {}).get("phase") or "without a phase"


def scheduling(facts: Facts, snap: Snapshot, pg: Obj, chain: list[str]) -> Finding | None:
    """The pods are grouped: did the scheduler decide (BindRequests, or a reason not to) and did the binder bind?
    Appends the BindRequests and bound pods to ``chain``."""
    pending = snap.pending_pods
    requests = {r["spec"].get("podName"): r for r in facts.bindrequests or ()}
    mine = [requests[name_of(p)] for p in snap.live_pods if name_of(p) in requests]
    if facts.bindrequests is None:
        chain.append("BindRequests not read")
    elif mine:
        phases: dict[str, int] = {}
        for request in mine:
            phases[_phase(request)] = phases.get(_phase(request), 0) + 1
        chain.append(f"{len(mine)} BindRequest(s) (" + ", ".join(f"{n} {p}" for p, n in sorted(phases.items())) + ")")
    chain.append(f"{len(snap.bound_pods)} of {len(snap.live_pods)} pods bound")
    if not pending:
        return None
    stuck = [
        (p, requests[name_of(p)]) for p in pending if name_of(p) in requests and not bind_finished(requests[name_of(p)])
    ]
    if stuck:
        nodes = sorted({r["spec"].get("selectedNode", "?") for _, r in stuck})
        return Finding(
            BINDER,
            f"{len(stuck)} BindRequest(s) for {name_list([p for p, _ in stuck])} {_phase(stuck[0][1])}: the scheduler "
            f"chose {', '.join(nodes)} and nobody bound them; {health(BINDER, facts.deployments, facts.component_pods).text}",
            down=True,
            fix=look(BINDER, "its Deployment's pods and events", "its RBAC for pods/binding"),
        )
    failed = [
        (p, requests[name_of(p)])
        for p in pending
        if name_of(p) in requests and _phase(requests[name_of(p)]) == BIND_FAILED
    ]
    if failed:
        status = failed[0][1].get("status") or {}
        state = health(BINDER, facts.deployments, facts.component_pods)
        return Finding(
            BINDER,
            f"binding {name_list([p for p, _ in failed])} failed after {status.get('failedAttempts', 0)} attempt(s): "
            f"{status.get('reason', 'no reason given')}; {state.text}",
            down=state.up is False,
            fix=look(BINDER, "the pods' BindingError events"),
        )
    held = [p for p in pending if (scheduled_condition(p) or {}).get("status") == "False"]
    says = podgroup_explains(snap)
    if held or says.ok:
        reason = pending_reason(held[0]) if held else "no pod condition"
        told = f"; {says.explanation}" if says.ok else ""
        return Finding(
            SCHEDULER,
            f"it did not place {len(pending)} pod(s): {name_list(held or pending)} {reason}{told}",
            heading=DECIDED,
        )
    not_ready = snap.events_for(pg, NOT_READY_EVENT_REASON)
    if not_ready:
        message = max(not_ready, key=event_time).get("message", "")
        return Finding(SCHEDULER, f"it waits for the gang's pods: {message}", heading=DECIDED)
    state = health(SCHEDULER, facts.deployments, facts.component_pods)
    return Finding(
        SCHEDULER,
        f"it has not acted on PodGroup {name_of(pg)}: no BindRequest, no PodScheduled condition on "
        f"{name_list(pending)}, no scheduling condition or event on the PodGroup; {state.text}",
        down=state.up is False,
        fix=look(SCHEDULER, "is it running for the default shard, and its Deployment's pods and events"),
    )
