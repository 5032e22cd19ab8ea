"""Elastic TrainJobs, per KAI version: where the podgrouper reads a gang's minimum (``kai.scheduler/batch-min-member``),
which PodGroup field carries it, and how a TrainJob puts it there. Reached as ``expect.elastic``.

A gang is elastic when its minimum is below its pod count: KAI schedules the minimum first and the rest when GPUs
allow, and evicts the surplus first (docs/elastic/README.md at v0.16.8 and v0.17.0). Sources, read at the tags in
the kai-scheduler/KAI-Scheduler repository (``pkg/podgrouper/podgrouper/plugins/jobset/jobset_grouper.go`` is
``git diff``-identical between v0.16.8 and v0.17.0, and so is ``pkg/scheduler/api/podgroup_info/eviction_info.go``):

* v0.13.0 ``jobset_grouper.go`` 88–104: ``MinAvailable`` = Σ replicas × parallelism, no annotation read at all.
* v0.14.7 ``jobset_grouper.go`` 109–115, ``getMinMemberOverride`` 203–214: the JobSet's annotation replaces the
  flat ``minMember`` (backported by c586e27a, "Min member override v0.14 (#1381)", from v0.14.1).
* v0.15.3 ``jobset_grouper.go`` 98, ``getMinAvailable`` 119–131: flat ``minMember`` = the JobSet's annotation, else 1.
* v0.16.8 / v0.17.0 ``jobset_grouper.go``: ``singleReplicaSubGroupMinMember`` 207–237 reads the annotation from
  ``spec.replicatedJobs[].template.metadata.annotations`` (``readReplicatedJobTemplateAnnotation`` 239–248) and
  sets it as the ``minMember`` of every leaf SubGroup ``<rjob>-replica-<i>`` of that replicatedJob (``buildSubGroups``
  168–176); without it the leaf's minMember is ``parallelism``. The *JobSet's* annotation only caps the root
  ``minSubGroup`` at the number of replicatedJobs (``computePodGroupMinSubGroup`` 112–127): on a one-replicatedJob
  runtime it changes nothing, so an annotation on the TrainJob (copied to the JobSet by skip-top-owner) makes no
  elastic gang there.
* Eviction (``eviction_info.go`` 16–106, v0.15.3 to v0.17.0): ``GetTasksToEvict`` takes the elastic surplus first,
  one pod at a time (``collectElasticEvictionFromPodSet``: pods above the PodSet's ``minAvailable``), and the whole
  gang only when no surplus is left (``collectAllAllocatedTasksFromSubGroupSet``).
* Allocation (``allocation_info.go`` 27–79 at v0.17.0): ``GetTasksToAllocate`` asks for the minimum while a gang is
  below it ("gang phase") and one more pod at a time once it is satisfied ("elastic phase").

How a TrainJob carries the annotation: Trainer v2.2 and v2.3 copy the runtime's and ``runtimePatches``'
``replicatedJobs[].template`` (metadata included) into the JobSet spec (trainer-jobset.md §3.1 ``mergeRuntimePatches``,
§3.2 table; the labels suite observes such metadata arrive at the Job). So on SubGroup rows the case patches the
``node`` replicatedJob's template metadata through ``spec.runtimePatches``; on flat rows it annotates the TrainJob,
which skip-top-owner merges into the JobSet (KAI §4.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from kai_conformance.fixtures.kube import api_views
from kai_conformance.suites.support.expectations import MIN_MEMBER_ANNOTATION, kai_row


class MinimumSource(Enum):
    """Where the podgrouper reads ``kai.scheduler/batch-min-member`` for a JobSet, and what it sets from it."""

    #: v0.13: no annotation is read; the gang is every pod.
    IGNORED = "ignored"
    #: v0.14.1+, v0.15: the JobSet's annotation → the flat PodGroup's ``spec.minMember``.
    JOBSET_ANNOTATION = "JobSet annotation → spec.minMember"
    #: v0.16+: the replicatedJob template's annotation → ``spec.subGroups[<rjob>-replica-<i>].minMember``.
    REPLICATED_JOB_TEMPLATE = "replicatedJob template annotation → leaf SubGroup minMember"


@dataclass(frozen=True)
class ElasticRow:
    minor: str
    source: MinimumSource
    #: Source lines at the tag (file:line), for the record and the docs' version table.
    citation: str

    @property
    def name(self) -> str:
        return f"KAI {self.minor}"

    @property
    def supported(self) -> bool:
        """Can a TrainJob be an elastic gang on this version at all?"""
        return self.source is not MinimumSource.IGNORED

    def describe(self) -> str:
        return f"{self.name}: minimum from {self.source.value} ({self.citation})"

    def leaf(self, replicated_job: str, replica: int = 0) -> str:
        """The SubGroup a replica's pods form (``<rjob>-replica-<i>``, ``replicasSubgroupNameFormat``)."""
        return f"{replicated_job}-replica-{replica}"

    def field(self, replicated_job: str = "node") -> str:
        """The PodGroup field that carries the minimum, as a reader would look for it."""
        if self.source is MinimumSource.REPLICATED_JOB_TEMPLATE:
            return f"spec.subGroups[{self.leaf(replicated_job)}].minMember"
        return "spec.minMember"

    def minimum_in(self, podgroup: dict[str, Any], replicated_job: str = "node") -> int | None:
        """The minimum the PodGroup sets for (one replica of) ``replicated_job``, or None when it sets none."""
        spec = api_views.podgroup(podgroup).get("spec", {})
        if self.source is not MinimumSource.REPLICATED_JOB_TEMPLATE:
            return spec.get("minMember")
        leaf = self.leaf(replicated_job)
        found = next((g for g in spec.get("subGroups") or [] if g.get("name") == leaf), None)
        return None if found is None else found.get("minMember")

    def trainjob_settings(self, minimum: int, replicated_job: str = "node") -> dict[str, Any]:
        """Keyword arguments of :func:`~suites.support.workloads.train_job` that make its gang's minimum
        ``minimum``: TrainJob ``annotations`` on flat rows, a ``runtime_patches`` entry on SubGroup rows."""
        from kai_conformance.suites.support.workloads import runtime_patch

        annotation = {MIN_MEMBER_ANNOTATION: str(minimum)}
        if self.source is MinimumSource.REPLICATED_JOB_TEMPLATE:
            patch = runtime_patch(job={"annotations": annotation}, replicated_job_name=replicated_job)
            return {"runtime_patches": [patch]}
        return {"annotations": annotation}


ELASTIC_ROWS: dict[str, ElasticRow] = {
    row.minor: row
    for row in (
        ElasticRow("v0.13", MinimumSource.IGNORED, "v0.13.0 jobset_grouper.go:88-104"),
        ElasticRow("v0.14", MinimumSource.JOBSET_ANNOTATION, "v0.14.7 jobset_grouper.go:109-115, 203-214"),
        ElasticRow("v0.15", MinimumSource.JOBSET_ANNOTATION, "v0.15.3 jobset_grouper.go:98, 119-131"),
        ElasticRow("v0.16", MinimumSource.REPLICATED_JOB_TEMPLATE, "v0.16.8 jobset_grouper.go:168-176, 207-248"),
        ElasticRow("v0.17", MinimumSource.REPLICATED_JOB_TEMPLATE, "v0.17.0 jobset_grouper.go:168-176, 207-248"),
    )
}


def elastic_row(version: str) -> ElasticRow:
    """The elastic row of a KAI version; a version without a KAI row fails as :func:`~.expectations.kai_row` does."""
    return ELASTIC_ROWS[kai_row(version).minor]
