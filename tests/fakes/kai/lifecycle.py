"""Simulated KAI, what it does when workloads end (facts and sources: suites/support/expectations/lifecycle.py):

* The podgroup-controller writes each PodGroup's ``status.resourcesStatus``: ``allocated`` sums the requests of its
  pods that are bound and Pending or Running, ``requested`` of those Pending or Running, a terminal pod counts for
  nothing (pkg/podgroupcontroller/controllers/metadata/pod.go ``GetPodMetadata``); ``allocatedNonPreemptible`` the
  allocated of a non-preemptible group. Empty lists are left out (``omitempty``).
* The queue-controller writes each Queue's ``status.allocated``, ``allocatedNonPreemptible`` and ``requested``: the
  sum over its PodGroups' and its child queues' (resource_updater.go ``UpdateQueue``).
* The scheduler's stale-gang eviction, the last action of its cycle: a PodGroup with some placed, running pods but
  fewer than its gang needs, and no ``Succeeded`` pod the scheduler sees, is stale; once it has been stale for its
  grace (``spec.stalenessGracePeriod``, else 60 s) every placed pod of it is evicted, with ``Evict`` events of action
  ``stalegangeviction``. The scheduler sees no ``Failed`` pod, and no ``Succeeded`` one where the version's row says
  it evicts completing gangs (KAI #1968, fixed by PR #2012). The v0.17 podgrouper fills ``spec.stalenessGracePeriod`` from
  ``kai.scheduler/staleness-grace-period`` on an owner or, here, the pods' template.

Faults (tests/fakes/simulation.py ``Faults``): ``ended_pods_hold_gpus`` (the podgroup-controller never lowers what a
PodGroup holds, and the scheduler never frees the GPUs of a pod that ended), ``stale_eviction_of_completing_gangs``
(#1968 whatever the row), ``regrouped_gang_bound_one_short`` (a PodGroup scheduled before, whose pods come again
after a JobSet restart or a resume, is bound one pod short), ``bindrequests_without_owner`` (BindRequests lose their
ownerReference to the pod, so garbage collection leaves them behind).

Time is the FakeKube clock (``fake.clock``).
"""

from __future__ import annotations

import re
from collections import defaultdict

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.detectors.consolidation import go_duration
from kai_conformance.suites.support.expectations.lifecycle import (
    DEFAULT_STALENESS_GRACE,
    KAI_LIFECYCLE_ROWS,
    STALE_GANG_ACTION,
    STALENESS_GRACE_ANNOTATION,
    LifecycleKaiRow,
)
from kai_conformance.suites.support.expectations.version_rows import minor
from kai_conformance.suites.support.snapshot import gpus_of, is_bound, is_terminating, uid_of
from tests.fakes.kai.scheduler import Kai
from tests.fakes.simulation import PODGROUP_CONTROLLER, QUEUE_CONTROLLER, SCHEDULER, Obj

TERMINAL = ("Succeeded", "Failed")
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi)?$")
_FACTORS = {None: 1.0, "m": 0.001, "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3}


def _value(text: str) -> float:
    found = _QUANTITY.match(str(text))
    return float(found.group(1)) * _FACTORS[found.group(2)] if found else 0.0


def _format(resource: str, value: float) -> str:
    """Quantities as Kubernetes prints sums: CPU in millicores, memory in Mi where whole, the rest as numbers."""
    if resource == "cpu":
        return f"{round(value * 1000)}m" if value % 1 else str(int(value))
    if resource == "memory" and value % 1024**2 == 0:
        return f"{int(value // 1024**2)}Mi"
    return str(int(value)) if value == int(value) else str(value)


def _total(lists: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for resources in lists:
        for name, value in resources.items():
            total[name] += value
    return dict(total)


def _printed(resources: dict[str, float]) -> dict[str, str]:
    return {name: _format(name, value) for name, value in sorted(resources.items()) if value}


def _requests(pod: Obj) -> dict[str, float]:
    return _total([
        {name: _value(q) for name, q in ((c.get("resources") or {}).get("requests") or {}).items()}
        for c in pod["spec"].get("containers") or []
    ])  # fmt: skip


def _parsed(printed: dict[str, dict[str, str]]) -> dict[str, dict[str, float]]:
    """A PodGroup's stored ``status.resourcesStatus`` back as numbers."""
    return {key: {name: _value(q) for name, q in (value or {}).items()} for key, value in printed.items()}


def _phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


class KaiLifecycle(Kai):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._stale_since: dict[str, float] = {}  # PodGroup uid → when the scheduler first found it stale
        self._scheduled_before: set[str] = set()  # PodGroups the scheduler placed pods of

    @property
    def _lifecycle_row(self) -> LifecycleKaiRow:
        return KAI_LIFECYCLE_ROWS.get(minor(self.kai_version)) or KAI_LIFECYCLE_ROWS["v0.16"]

    # ------------------------------------------------------------------------------ podgroup- and queue-controller
    def kai_status(self) -> bool:
        """The podgroup-controller's PodGroup status, then the queue-controller's Queue status from it; a controller
        that is down (tests/fakes/restarts.py) writes nothing, and the other reads what is stored."""
        changed = self._orphan_bindrequests() if self.faults.bindrequests_without_owner else False
        podgroups, queues = self._acts(PODGROUP_CONTROLLER), self._acts(QUEUE_CONTROLLER)
        if not podgroups and not queues:
            return changed
        groups: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        for pod in self.fake.stored(kinds.POD) if podgroups else ():  # read only
            group = (pod["metadata"].get("annotations") or {}).get(ex.POD_GROUP_ANNOTATION)
            if group:
                groups[(pod["metadata"]["namespace"], group)].append(pod)
        per_queue: dict[str, list[dict[str, dict[str, float]]]] = defaultdict(list)
        for pg in self._all(kinds.POD_GROUP):
            stored = (pg.get("status") or {}).get("resourcesStatus", {})
            if not podgroups:
                per_queue[(pg.get("spec") or {}).get("queue", "")].append(_parsed(stored))
                continue
            status = self._podgroup_status(pg, groups.get((pg["metadata"]["namespace"], pg["metadata"]["name"]), []))
            per_queue[(pg.get("spec") or {}).get("queue", "")].append(status)
            printed = {key: _printed(value) for key, value in status.items() if _printed(value)}
            if stored != printed:
                pg.setdefault("status", {})["resourcesStatus"] = printed
                self.fake.write(pg)
                changed = True
        return (queues and self._queue_status(per_queue)) or changed

    def _podgroup_status(self, pg: Obj, pods: list[Obj]) -> dict[str, dict[str, float]]:
        active = [p for p in pods if _phase(p) not in TERMINAL]
        allocated = _total([_requests(p) for p in active if is_bound(p)])
        if self.faults.ended_pods_hold_gpus:  # never lowered: what it held before stays
            held = ((pg.get("status") or {}).get("resourcesStatus") or {}).get("allocated") or {}
            allocated = {n: max(allocated.get(n, 0.0), _value(v)) for n, v in {**held, **allocated}.items()}
        priority = (pg.get("spec") or {}).get("priorityClassName", "train")
        preemptible = ex.PRIORITY_CLASSES.get(priority, (50, True))[1]
        return {
            "allocated": allocated,
            "requested": _total([_requests(p) for p in active]),
            "allocatedNonPreemptible": {} if preemptible else dict(allocated),
        }

    def _queue_status(self, per_queue: dict[str, list[dict[str, dict[str, float]]]]) -> bool:
        queues = self._all(kinds.QUEUE)
        children: dict[str, list[str]] = defaultdict(list)
        for queue in queues:
            parent = (queue.get("spec") or {}).get("parentQueue")
            if parent:
                children[parent].append(queue["metadata"]["name"])

        def summed(name: str) -> dict[str, dict[str, float]]:
            parts = per_queue.get(name, []) + [summed(child) for child in children.get(name, [])]
            return {
                key: _total([p.get(key, {}) for p in parts])
                for key in ("allocated", "allocatedNonPreemptible", "requested")
            }

        changed = False
        for queue in queues:
            wanted = dict(queue.get("status") or {})
            for key, value in summed(queue["metadata"]["name"]).items():
                wanted.pop(key, None)
                wanted.update({key: _printed(value)} if _printed(value) else {})  # omitempty
            if wanted != (queue.get("status") or {}):
                queue["status"] = wanted
                self.fake.write(queue)
                changed = True
        return changed

    def _orphan_bindrequests(self) -> bool:
        changed = False
        for request in self._all(kinds.BIND_REQUEST):
            if request["metadata"].get("ownerReferences"):
                del request["metadata"]["ownerReferences"]
                self.fake.write(request)
                changed = True
        return changed

    # ---------------------------------------------------------------------------------------------- scheduler
    def scheduler(self) -> bool:
        changed = super().scheduler()
        return self._stale_gang_eviction() or changed

    def _stale_gang_eviction(self) -> bool:
        gap = self._lifecycle_row.completing_gang_gap(self.kai_version)
        blind = gap is not None or self.faults.stale_eviction_of_completing_gangs
        now, placed, changed = self.fake.clock().timestamp(), self._placed(), False
        for pg in self._all(kinds.POD_GROUP):
            key = uid_of(pg)
            seen = [p for p in self._members(pg) if _phase(p) != "Failed" and not (blind and _phase(p) == "Succeeded")]
            active = [p for p in seen if _phase(p) not in TERMINAL and (is_bound(p) or _key(p) in placed)]
            if any(_phase(p) == "Succeeded" for p in seen) or not 0 < len(active) < self._gang_size(pg):
                self._stale_since.pop(key, None)
                continue
            since = self._stale_since.setdefault(key, now)
            grace = pg["spec"].get("stalenessGracePeriod")
            seconds = (
                go_duration(grace.lstrip("-")) * (-1 if grace.startswith("-") else 1)
                if grace
                else DEFAULT_STALENESS_GRACE
            )
            if seconds < 0 or now - since < seconds:
                continue
            for pod in active:
                message = (
                    f"Workload doesn't meet the minimum required number of pods ({self._gang_size(pg)}), evicting "
                    f"remaining pod: {pod['metadata']['namespace']}/{pod['metadata']['name']}"
                )
                self._evict(pg, pod, pg, len(active), STALE_GANG_ACTION, message)
            self._stale_since.pop(key, None)
            changed = True
        return changed

    def _free(self) -> dict[str, int]:
        free = super()._free()
        if self.faults.ended_pods_hold_gpus:
            for pod in self.fake.stored(kinds.POD):
                node = pod["spec"].get("nodeName")
                if node in free and _phase(pod) in TERMINAL and not is_terminating(pod):
                    free[node] -= gpus_of(pod)
        return free

    def _allocated(self, pg: Obj) -> None:
        super()._allocated(pg)
        self._scheduled_before.add(uid_of(pg))

    def _forget(self, component: str) -> None:
        """A restarted scheduler starts every staleness anew, and knows as placed before the PodGroups it finds with
        placed pods."""
        super()._forget(component)
        if component == SCHEDULER:
            self._stale_since.clear()
            placed = self._placed()
            self._scheduled_before = {
                uid_of(pg) for pg in self._all(kinds.POD_GROUP)
                if any(is_bound(p) or _key(p) in placed for p in self._members(pg))
            }  # fmt: skip

    def _place_group(self, pg: Obj, pods: list[Obj], free: dict[str, int], whole: bool) -> dict[str, str] | None:
        placement = super()._place_group(pg, pods, free, whole)
        if placement and self.faults.regrouped_gang_bound_one_short and uid_of(pg) in self._scheduled_before:
            bound = sum(1 for p in self._members(pg) if is_bound(p) and _phase(p) not in TERMINAL)
            if bound + len(placement) >= self._gang_size(pg):  # never the pod that would make it whole
                placement = dict(list(placement.items())[:-1]) or None
        return placement

    # --------------------------------------------------------------------------------------------- podgrouper
    def _decorate_podgroup(self, pg: Obj, jobset: Obj, top_annotations: dict[str, str]) -> Obj:
        """v0.17: ``spec.stalenessGracePeriod`` from the annotation on an owner, else on the pods (their template)."""
        pg = super()._decorate_podgroup(pg, jobset, top_annotations)
        if not self._lifecycle_row.staleness_grace_annotation:
            return pg
        grace = top_annotations.get(STALENESS_GRACE_ANNOTATION) or next(
            (
                annotations[STALENESS_GRACE_ANNOTATION]
                for r in jobset["spec"]["replicatedJobs"]
                if STALENESS_GRACE_ANNOTATION
                in (annotations := ((r["template"]["spec"]["template"].get("metadata") or {}).get("annotations") or {}))
            ),
            None,
        )
        if grace:
            pg["spec"]["stalenessGracePeriod"] = grace
        return pg


def _key(pod: Obj) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]
