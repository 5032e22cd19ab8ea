"""Simulated KAI, consolidation and eviction protection (facts: suites/support/expectations/consolidation.py).

* Consolidation, the first of the evicting actions: for a pending preemptible gang that fits nowhere while the
  cluster has enough free GPUs in total, whole preemptible gangs are evicted node by node (fewest GPUs first) until
  the gang fits and every evicted pod fits again on what is left (``allPodsReallocated``), with at most
  ``max_preemptees`` victim gangs. ``Evict`` events of action ``consolidation``; the evicted pods' Jobs recreate
  them and the scheduler places them like any pod.
* Min-runtime: a victim gang whose PodGroup's ``kai.scheduler/last-start-timestamp`` (stamped when the scheduler
  places the gang, whole seconds like KAI's) is younger than its queue's ``preemptMinRuntime`` (preempt) or
  ``reclaimMinRuntime`` (reclaim; for sibling queues the victim's queue, else its parents) may not be evicted.
* Eviction stamp (v0.17, the rows with a preemption delay: both arrived in v0.17.0): an evicted victim's PodGroup
  gets ``kai.scheduler/last-eviction-timestamp`` (whole seconds, like KAI's ``commitEvict``).
* Preemption delay (rows that have it): the podgrouper copies ``kai.scheduler/preemption-delay`` from the merged
  top-owner annotations into ``spec.preemptionDelay`` (KAI also reads the pod's; the cases put it on the TrainJob); a gang within ``max(creation, last eviction) +
  delay`` triggers no eviction and says ``PreemptionDelayNotElapsed``.

Time is the FakeKube clock (``fake.clock``), so a flow can run it faster than the wall clock.
"""

from __future__ import annotations

import datetime as dt

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.detectors.consolidation import go_duration
from kai_conformance.suites.support.expectations.consolidation import (
    CONSOLIDATION_ACTION,
    LAST_EVICTION_ANNOTATION,
    LAST_START_ANNOTATION,
    PREEMPTION_DELAY_ANNOTATION,
    PREEMPTION_DELAY_REASON,
    consolidation_row,
)
from kai_conformance.suites.support.snapshot import gpus_of, is_bound, parse_time, uid_of
from tests.fakes.simulation import SCHEDULER, Obj, Simulation


def _preemptible(group: Obj) -> bool:
    return ex.PRIORITY_CLASSES.get(group["spec"].get("priorityClassName", "train"), (50, True))[1]


def _name(obj: Obj) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


class KaiConsolidation(Simulation):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.consolidation = consolidation_row(self.kai_version)
        self._last_eviction: dict[str, float] = {}  # PodGroup uid → when the fake last evicted its pods

    def _seconds(self) -> float:
        return self.fake.clock().timestamp()

    def _forget(self, component: str) -> None:
        """A restarted scheduler knows a PodGroup's last eviction only from its annotation (the rows that stamp it)."""
        super()._forget(component)
        if component == SCHEDULER:
            self._last_eviction = {
                uid_of(g): stamp for g in self._all(kinds.POD_GROUP)
                if (stamp := parse_time((g["metadata"].get("annotations") or {}).get(LAST_EVICTION_ANNOTATION)))
            }  # fmt: skip

    # ------------------------------------------------------------------------------------- preemption delay
    def _decorate_podgroup(self, pg: Obj, jobset: Obj, top_annotations: dict[str, str]) -> Obj:
        group = super()._decorate_podgroup(pg, jobset, top_annotations)
        delay = top_annotations.get(PREEMPTION_DELAY_ANNOTATION)
        if self.consolidation.preemption_delay and delay:
            try:
                go_duration(delay)
                group["spec"]["preemptionDelay"] = delay
            except ValueError:
                pass  # KAI ignores an invalid value with a warning
        return group

    def _delay_end(self, group: Obj) -> float | None:
        delay = group["spec"].get("preemptionDelay")
        if not self.consolidation.preemption_delay or not delay:
            return None
        anchor = max(parse_time(group["metadata"].get("creationTimestamp")) or 0.0,
                     self._last_eviction.get(uid_of(group), 0.0))  # fmt: skip
        return anchor + go_duration(delay)

    def _within_delay(self, group: Obj) -> bool:
        end = self._delay_end(group)
        return end is not None and self._seconds() < end

    def _unplaceable(self, pg: Obj, waiting: list[Obj]) -> tuple[str, str]:
        end = self._delay_end(pg)
        if end is not None and self._seconds() < end:
            until = dt.datetime.fromtimestamp(end, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            return PREEMPTION_DELAY_REASON, (
                f"Workload is within its preemption delay window ({pg['spec']['preemptionDelay']}) and may not "
                f"trigger evictions before {until}"
            )
        return super()._unplaceable(pg, waiting)

    # ------------------------------------------------------------------------------------------ min-runtime
    def _allocated(self, pg: Obj) -> None:
        super()._allocated(pg)
        group = self._find(kinds.POD_GROUP, pg["metadata"]["name"], pg["metadata"]["namespace"])
        if group is not None:
            group["metadata"].setdefault("annotations", {})[LAST_START_ANNOTATION] = self.fake._now()
            self.fake.write(group)

    def _min_runtime(self, victim: Obj, preemptor: Obj, action: str) -> float:
        """The victim queue's (or the nearest parent's) ``<action>MinRuntime`` in seconds; for reclaim, the walk
        starts one level below the queues' lowest common ancestor on the victim's side (minruntime/resolver.go)."""

        def path(queue_name: str) -> list[Obj]:
            found, queue = [], self._find(kinds.QUEUE, queue_name, None)
            while queue is not None:
                found.insert(0, queue)
                parent = queue["spec"].get("parentQueue")
                queue = self._find(kinds.QUEUE, parent, None) if parent else None
            return found

        victims = path(victim["spec"]["queue"])
        if action == "reclaim":
            mine = [q["metadata"]["name"] for q in path(preemptor["spec"]["queue"])]
            common = next(
                (i for i, q in enumerate(victims) if i >= len(mine) or q["metadata"]["name"] != mine[i]), len(victims)
            )
            victims = victims[: min(common + 1, len(victims))]
        for queue in reversed(victims):
            value = queue["spec"].get(f"{action}MinRuntime")
            if value:
                return go_duration(value)
        return 0.0

    def _may_evict(self, victim: Obj, preemptor: Obj, action: str) -> bool:
        if not super()._may_evict(victim, preemptor, action):
            return False
        if action not in ("preempt", "reclaim"):
            return True
        started = parse_time((victim["metadata"].get("annotations") or {}).get(LAST_START_ANNOTATION))
        return started is None or self._seconds() >= started + self._min_runtime(victim, preemptor, action)

    # ---------------------------------------------------------------------------------------- consolidation
    def _evict_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        if self._within_delay(pg):
            return None
        return self._consolidate_for(pg, waiting, whole) or super()._evict_for(pg, waiting, whole)

    def _evict(
        self, victim: Obj, pod: Obj, preemptor: Obj, evicted: int, action: str = "preempt", message: str | None = None
    ) -> None:
        self._last_eviction[uid_of(victim)] = self._seconds()
        super()._evict(victim, pod, preemptor, evicted, action, message)
        group = self._find(kinds.POD_GROUP, victim["metadata"]["name"], victim["metadata"]["namespace"])
        if self.consolidation.preemption_delay and group is not None:
            group["metadata"].setdefault("annotations", {})[LAST_EVICTION_ANNOTATION] = self.fake._now()
            self.fake.write(group)

    def _consolidate_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        free = self._free()
        if any(gpus_of(p) == 0 for p in waiting):
            return None  # whole-GPU pods only: a fraction's needs are the sharing mixin's (sharing.py)
        if not _preemptible(pg) or sum(free.values()) < sum(gpus_of(p) for p in waiting):
            return None
        groups = [g for g in self._all(kinds.POD_GROUP) if uid_of(g) != uid_of(pg) and _preemptible(g)
                  and self._may_evict(g, pg, CONSOLIDATION_ACTION)]  # fmt: skip
        bound = {uid_of(g): [p for p in self._members(g) if is_bound(p)] for g in groups}
        on_node: dict[str, list[Obj]] = {}
        for group in groups:
            for pod in bound[uid_of(group)]:
                on_node.setdefault(pod["spec"]["nodeName"], []).append(group)
        victims: dict[str, Obj] = {}
        for node in sorted(on_node, key=lambda n: (sum(gpus_of(p) for g in on_node[n] for p in bound[uid_of(g)]), n)):
            victims.update({uid_of(g): g for g in on_node[node]})
            if len(victims) > self.consolidation.max_preemptees:
                return None
            moved = [p for uid in victims for p in bound[uid]]
            trial = dict(free)
            for pod in moved:
                trial[pod["spec"]["nodeName"]] += gpus_of(pod)
            placement = self._place(waiting, trial, whole)
            if not placement:
                continue
            for pod in waiting:
                if pod["metadata"]["name"] in placement:
                    trial[placement[pod["metadata"]["name"]]] -= gpus_of(pod)
            if self._place(moved, trial, whole=True) is None:
                continue  # allPodsReallocated: every evicted pod must fit again
            for uid, victim in victims.items():
                for pod in bound[uid]:
                    message = f"Pod {_name(pod)} was preempted and rescheduled due to bin packing (resource consolidation) procedure"
                    self._evict(victim, pod, pg, len(moved), CONSOLIDATION_ACTION, message)
            return placement
        return None
