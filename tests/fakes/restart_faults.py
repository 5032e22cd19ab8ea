"""Simulated components that misbehave after a restart (tests/fakes/restarts.py), each switched on by a ``restart_*``
field of :class:`~tests.fakes.simulation.Faults` and acting only once its component has restarted in the run:

* ``restart_breaks_gangs_of``: the scheduler places every gang of at least that many pods one pod short, and never
  the pod that would make it whole (a gang already placed whole stays so);
* ``restart_ignores_queue_limits``: the scheduler ignores every queue's GPU limit;
* ``restart_evicts_non_preemptible``: after each restart of the scheduler, it evicts (deletes, with ``Evict`` events
  as its preemption writes them) the pods of one running non-preemptible gang within its queue's quota;
* ``restart_stalls_scheduler``: the scheduler never runs a cycle again;
* ``restart_duplicates_podgroups``: the podgrouper makes a second PodGroup, owned by the same JobSet, for every gang it
  had grouped before its restart;
* ``restart_leaks_bindrequests``: the binder drops the ownerReference of every BindRequest it finishes, so garbage
  collection leaves the BindRequest behind when its pod goes;
* ``restart_leaks_reservations`` (a field of :class:`~tests.fakes.kai.sharing.SharingFaults`: GPU sharing's own
  faults live there): the binder never deletes a reservation pod again, neither on the events that leave its GPU
  group unused nor in its start-up sync, so the reservation pod outlives the pods that shared its GPU.
"""

from __future__ import annotations

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.snapshot import is_bound, uid_of
from tests.fakes.kube import clone
from tests.fakes.restarts import Restarts
from tests.fakes.simulation import BINDER, PODGROUPER, SCHEDULER, Obj


def _preemptible(pg: Obj) -> bool:
    return ex.PRIORITY_CLASSES.get(pg["spec"].get("priorityClassName", ex.DEFAULT_PRIORITY_CLASS), (50, True))[1]


def _running(pod: Obj) -> bool:
    return is_bound(pod) and (pod.get("status") or {}).get("phase") == "Running"


def _key(pod: Obj) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]


class RestartFaults(Restarts):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._regroup: set[str] = set()  # uids of the PodGroups the podgrouper grouped before its restart
        self._evicted_after = 0  # the scheduler restarts after which a non-preemptible gang was evicted

    def forget_restarts(self) -> None:
        super().forget_restarts()
        self._evicted_after = 0

    def _acts(self, component: str) -> bool:
        stalled = component == SCHEDULER and self.faults.restart_stalls_scheduler and self._restarted(SCHEDULER)
        return not stalled and super()._acts(component)

    def _forget(self, component: str) -> None:
        super()._forget(component)
        if component == PODGROUPER and self.faults.restart_duplicates_podgroups:
            self._regroup = {uid_of(pg) for pg in self._all(kinds.POD_GROUP) if self._owner(pg, kinds.JOB_SET)}

    # --------------------------------------------------------------------------------------------- podgrouper
    def podgrouper(self) -> bool:
        changed = super().podgrouper()
        if not self._regroup:
            return changed
        present = set()
        for pg in self._all(kinds.POD_GROUP):
            present.add(uid_of(pg))
            if uid_of(pg) in self._regroup:
                self._regroup.discard(uid_of(pg))
                self.fake.write(self._duplicate(pg))
                changed = True
        self._regroup &= present
        return changed

    def _duplicate(self, pg: Obj) -> Obj:
        meta = pg["metadata"]
        return {
            "apiVersion": pg["apiVersion"], "kind": pg["kind"],
            "metadata": {"name": f"{meta['name']}-r{self.restart_count(PODGROUPER)}", "namespace": meta["namespace"],
                         "labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": clone(meta.get("ownerReferences") or [])},
            "spec": clone(pg["spec"]),
            "status": {},
        }  # fmt: skip

    # ----------------------------------------------------------------------------------------------- binder
    def _finished(self, request: Obj) -> Obj:
        if self.faults.restart_leaks_bindrequests and self._restarted(BINDER):
            request["metadata"].pop("ownerReferences", None)
        return super()._finished(request)

    def _release_reservations(self) -> bool:
        if getattr(self.faults, "restart_leaks_reservations", False) and self._restarted(BINDER):
            return False
        return super()._release_reservations()

    # -------------------------------------------------------------------------------------------- scheduler
    def scheduler(self) -> bool:
        changed = super().scheduler()
        restarts = self.restart_count(SCHEDULER)
        if self.faults.restart_evicts_non_preemptible and self._evicted_after < restarts and self._evict_protected():
            self._evicted_after = restarts
            changed = True
        return changed

    def _evict_protected(self) -> bool:
        """Evict the pods of the oldest running non-preemptible gang within its queue's quota, if there is one."""
        for pg in sorted(self._all(kinds.POD_GROUP), key=lambda g: self._seen.get(uid_of(g), len(self._seen))):
            running = [p for p in self._members(pg) if _running(p)]
            if _preemptible(pg) or not running or len(running) < self._gang_size(pg) or not self._within_quota(pg):
                continue
            for pod in running:
                name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                message = f"Pod {name} was evicted by the restarted scheduler (simulated fault)"
                self._evict(pg, pod, pg, len(running), "preempt", message)
            return True
        return False

    def _within_quota(self, pg: Obj) -> bool:
        queue = self._find(kinds.QUEUE, pg["spec"]["queue"], None)
        if queue is None:
            return False
        quota = queue["spec"]["resources"]["gpu"].get("quota", 0)
        return quota == -1 or self._queue_gpus(queue["metadata"]["name"], non_preemptible=True) <= quota

    def _over_limit(self, queue: Obj | None, request: int) -> str | None:
        if self.faults.restart_ignores_queue_limits and self._restarted(SCHEDULER):
            return None
        return super()._over_limit(queue, request)

    def _breaks(self, pg: Obj) -> bool:
        floor = self.faults.restart_breaks_gangs_of
        return floor is not None and self._restarted(SCHEDULER) and self._gang_size(pg) >= floor

    def _placed_members(self, pg: Obj) -> int:
        placed = self._placed()
        return sum(1 for p in self._members(pg) if is_bound(p) or _key(p) in placed)

    def _schedule_group(self, pg: Obj) -> bool:
        if self._breaks(pg) and self._placed_members(pg) >= self._gang_size(pg) - 1:
            return False  # never the pod that would make it whole
        return super()._schedule_group(pg)

    def _one_short(self, pg: Obj, placement: dict[str, str] | None) -> dict[str, str] | None:
        if not placement or not self._breaks(pg):
            return placement
        keep = self._gang_size(pg) - 1 - self._placed_members(pg)
        return dict(list(placement.items())[:keep]) if keep > 0 else None

    def _place_group(self, pg: Obj, pods: list[Obj], free: dict[str, int], whole: bool) -> dict[str, str] | None:
        return self._one_short(pg, super()._place_group(pg, pods, free, whole))

    def _evict_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        return self._one_short(pg, super()._evict_for(pg, waiting, whole))
