"""Gang detectors: whether a gang binds all or nothing, runs, waits whole and says why, and is never partial
for long; and whether each of its SubGroups binds at its floor or not at all."""

from __future__ import annotations

from collections.abc import Mapping

from kai_conformance.fixtures.kube import event_time
from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.expectations import NOT_READY_EVENT_REASON, SUBGROUP_LABEL, UNSCHEDULABLE_REASON
from kai_conformance.suites.support.snapshot import (
    Obj,
    Snapshot,
    bound_at,
    container_waiting,
    is_running,
    labels_of,
    name_list,
    name_of,
    node_summary,
    pending_reason,
    scheduled_condition,
)


def _waiting(pod: Obj) -> str:
    return f"{name_of(pod)} ({pending_reason(pod)})"


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
        text += f"; waiting: {name_list(pending, _waiting)}"
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
    described = name_list(waiting, lambda p: f"{name_of(p)} ({container_waiting(p)})")
    return Verdict("running", False, f"{len(running)} of {size} pods running; not yet: {described}")


def pods_gone(snap: Snapshot) -> Verdict:
    """No live pod is left (a suspended or deleted workload)."""
    live = snap.live_pods
    if live:
        return Verdict("pods-gone", False, f"{len(live)} pod(s) still live: {name_list(live)}")
    terminating = len(snap.pods)
    return Verdict("pods-gone", True, "no live pod" + (f" ({terminating} terminating)" if terminating else ""))


def bind_spread(snap: Snapshot, limit: float) -> Verdict:
    """The gang's pods were bound within ``limit`` seconds of each other (PodScheduled=True transitions)."""
    bound = snap.bound_pods
    if not bound:
        return Verdict("bind-spread", False, "no bound pod to measure")
    unknown = [p for p in bound if bound_at(p) is None]
    if unknown:
        return Verdict("bind-spread", False, f"bind time unknown (no PodScheduled=True) for {name_list(unknown)}")
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
            + name_list(unmarked, _waiting),
        )
    return Verdict("pods-unschedulable", True, f"all {len(pending)} pending pods say {pending_reason(pending[0])}")


class PartialGangWatch:
    """Fires when a gang stays partially bound for longer than ``grace`` seconds across observations.

    Binding and eviction are not atomic (the binder binds pods one by one; an eviction deletes them one by one),
    so one snapshot may catch a gang half-way; a *persistent* partial gang is the violation.

    A gang one of whose pods ended ``Succeeded`` is completing, not partially bound: its workload's pods end one by
    one, as far apart as their containers started (seconds on a busy node), and the rest stay bound until then. Such
    a gang is not judged here; whether a completing gang is spared eviction is ``completing-gang-spared``'s.
    """

    def __init__(self, size: int, grace: float) -> None:
        self.size, self.grace = size, grace
        self.since: float | None = None
        self.longest = 0.0
        self.observations = 0

    def observe(self, snap: Snapshot) -> Verdict:
        self.observations += 1
        verdict = gang_all_or_nothing(snap, self.size)
        completed = [p for p in snap.pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        if completed and not verdict.ok:
            verdict = Verdict("gang", True, f"completing: {len(completed)} of {self.size} pods ended Succeeded")
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


# ------------------------------------------------------------------------------------------- SubGroup floors
def leaf_floors(podgroup: Obj) -> dict[str, int]:
    """The PodGroup's leaf SubGroups (no SubGroup names them as its parent) and their ``minMember``: the pods of a
    leaf are bound all together up to that floor, or none."""
    subgroups = (podgroup.get("spec") or {}).get("subGroups") or []
    parents = {s.get("parent") for s in subgroups}
    return {s["name"]: int(s["minMember"]) for s in subgroups if s["name"] not in parents and "minMember" in s}


def _below_floor(snap: Snapshot, floors: Mapping[str, int]) -> Verdict | tuple[dict[str, list[Obj]], str]:
    """(leaf → its bound pods, for the leaves with some but fewer than their floor bound; every leaf's bound/floor),
    or the verdict that there is nothing to judge. ``floors`` replaces the PodGroup's floors of the leaves it names."""
    pg = one_podgroup(snap, "subgroup-floor")
    if isinstance(pg, Verdict):
        return pg
    leaves = {**leaf_floors(pg), **floors}
    if not leaves:
        return Verdict("subgroup-floor", False, f"PodGroup {name_of(pg)} has no SubGroup with a minMember to judge")
    bound: dict[str, list[Obj]] = {}
    for pod in snap.bound_pods:
        bound.setdefault(labels_of(pod).get(SUBGROUP_LABEL, ""), []).append(pod)
    below = {leaf: bound[leaf] for leaf, floor in sorted(leaves.items()) if 0 < len(bound.get(leaf, ())) < floor}
    state = ", ".join(f"{leaf} {len(bound.get(leaf, ()))}/{floor}" for leaf, floor in sorted(leaves.items()))
    return below, f"bound/floor: {state}"


def _described(below: Mapping[str, list[Obj]], floors: Mapping[str, int]) -> str:
    return "; ".join(
        f"SubGroup {leaf}: {len(pods)} of its floor {floors[leaf]} bound ({node_summary(pods)})"
        for leaf, pods in below.items()
    )


def subgroups_at_floor(snap: Snapshot, floors: Mapping[str, int] | None = None) -> Verdict:
    """No leaf SubGroup of the workload's PodGroup has some, but fewer than its ``minMember``, of its pods bound.
    ``floors``: judge the leaves it names against those floors instead (controls)."""
    found = _below_floor(snap, floors or {})
    if isinstance(found, Verdict):
        return found
    below, state = found
    if below:
        pg = snap.podgroup or {}
        return Verdict("subgroup-floor", False, f"{_described(below, {**leaf_floors(pg), **(floors or {})})} ({state})")
    return Verdict("subgroup-floor", True, f"every SubGroup bound at its floor or not at all ({state})")


class SubGroupFloorWatch:
    """Fires when a leaf SubGroup stays bound below its floor for longer than ``grace`` seconds across observations:
    the binder binds a floor's pods one by one and the evictor deletes them one by one, so one snapshot may catch a
    SubGroup half-way; one that stays there was handed fewer pods than its floor. ``floors`` as for
    :func:`subgroups_at_floor`."""

    def __init__(self, grace: float, floors: Mapping[str, int] | None = None) -> None:
        self.grace, self.floors = grace, dict(floors or {})
        self.since: dict[str, float] = {}
        self.longest = 0.0
        self.observations = 0

    def observe(self, snap: Snapshot) -> Verdict:
        self.observations += 1
        found = _below_floor(snap, self.floors)
        if isinstance(found, Verdict):
            return found
        below, state = found
        for leaf in set(self.since) - set(below):  # that partial moment ended somewhere before this observation
            self.longest = max(self.longest, snap.taken_at - self.since.pop(leaf))
        for leaf in below:
            self.since.setdefault(leaf, snap.taken_at)
        lasted = {leaf: snap.taken_at - self.since[leaf] for leaf in below}
        self.longest = max([self.longest, *lasted.values()])
        stuck = {leaf: pods for leaf, pods in below.items() if lasted[leaf] > self.grace}
        if stuck:
            floors = {**leaf_floors(snap.podgroup or {}), **self.floors}
            longest = max(lasted[leaf] for leaf in stuck)
            return Verdict(
                "subgroup-floor",
                False,
                f"{_described(stuck, floors)}, for {longest:.1f}s (more than the {self.grace:.0f}s a SubGroup may "
                f"take to bind or be evicted; {state})",
            )
        return Verdict(
            "subgroup-floor",
            True,
            f"no SubGroup below its floor for more than {self.grace:.0f}s in {self.observations} observation(s) "
            f"(longest such moment at most {self.longest:.1f}s; {state})",
        )
