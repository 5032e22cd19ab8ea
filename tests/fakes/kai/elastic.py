"""Simulated KAI, elastic gangs: a PodGroup whose minimum is below its pod count.

* Podgrouper: ``kai.scheduler/batch-min-member`` read where the KAI version reads it
  (:mod:`suites.support.expectations.elastic`): on SubGroup rows from each replicatedJob template's annotations into
  its leaf SubGroups' ``minMember`` (the JobSet's own annotation only caps the root ``minSubGroup``); on flat rows
  from the JobSet's (skip-top-owner merged) annotations into ``spec.minMember``.
* Scheduler (``allocation_info.go`` ``GetTasksToAllocate``): a gang below its minimum asks for what the minimum still
  needs, all or nothing; a gang at or above it asks for one more pod per attempt, so it starts with the minimum when
  only that fits and grows as GPUs free up.
* Preemption (``eviction_info.go`` ``GetTasksToEvict``): a victim's surplus pods go first, one at a time, until the
  preemptor fits; only when no surplus is left does the whole gang go (the base simulation's whole-gang eviction).
"""

from __future__ import annotations

from kai_conformance.suites.support.expectations import MIN_MEMBER_ANNOTATION
from kai_conformance.suites.support.expectations.elastic import MinimumSource, elastic_row
from kai_conformance.suites.support.snapshot import gpus_of, is_bound
from tests.fakes.kai.scheduler import Kai
from tests.fakes.simulation import Obj


class KaiElastic(Kai):
    def _podgroup_for(self, name: str, jobset: Obj, trainjob: Obj | None, pod: Obj) -> Obj:
        pg = super()._podgroup_for(name, jobset, trainjob, pod)
        source = elastic_row(self.kai_version).source
        spec, top = pg["spec"], pg["metadata"]["annotations"].get(MIN_MEMBER_ANNOTATION)
        if source is MinimumSource.REPLICATED_JOB_TEMPLATE:
            rjobs = jobset["spec"]["replicatedJobs"]
            for rjob in rjobs:
                leaf_min = ((rjob["template"].get("metadata") or {}).get("annotations") or {}).get(
                    MIN_MEMBER_ANNOTATION
                )
                for subgroup in spec["subGroups"]:
                    if leaf_min and subgroup.get("parent") == rjob["name"]:
                        subgroup["minMember"] = int(leaf_min)
            if top:  # computePodGroupMinSubGroup: capped at the number of replicatedJobs
                spec["minSubGroup"] = min(int(top), len(rjobs))
        elif source is MinimumSource.JOBSET_ANNOTATION and top:
            spec["minMember"] = int(top)
        return pg

    def _to_allocate(self, pg: Obj, members: list[Obj], waiting: list[Obj]) -> list[Obj]:
        minimum, placed = self._gang_size(pg), len(members) - len(waiting)
        if placed >= minimum:  # elastic phase
            return waiting[:1]
        return waiting[: minimum - placed]  # gang phase

    def _preempt_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        free, chosen = self._free(), []
        for victim in self._preemption_victims(pg):
            for pod in self._surplus(victim):
                chosen.append((victim, pod))
                free[pod["spec"]["nodeName"]] += gpus_of(pod)
                placement = self._place(waiting, free, whole)
                if placement:
                    for owner, surplus in chosen:
                        self._evict(owner, surplus, pg, len(chosen))
                    return placement
        return super()._preempt_for(pg, waiting, whole)

    def _surplus(self, pg: Obj) -> list[Obj]:
        """The bound pods above the gang's minimum, last-named first."""
        bound = sorted((p for p in self._members(pg) if is_bound(p)), key=lambda p: p["metadata"]["name"])
        extra = max(0, len(bound) - self._gang_size(pg))
        return list(reversed(bound))[:extra]
