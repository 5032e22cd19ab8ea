"""Topology-aware placement: the per-version rows and the facts that hold for every row (the style of
:mod:`suites.support.expectations`, which exposes the row as ``expect.topology``).

How a TrainJob asks for topology-aware placement, read at the tags (KAI-Scheduler ``v0.16.8`` and ``v0.17.0``; the
same files at v0.13.0–v0.15.0 for the older rows):

* The three annotations (``pkg/podgrouper/podgrouper/plugins/constants/constants.go`` v0.16.8:21–23,
  v0.17.0:24–26) on the **TrainJob's metadata**: KAI groups a TrainJob with its skip-top-owner grouper, which copies
  every TrainJob annotation onto the JobSet it groups unless the JobSet has that key (``skiptopowner.go``
  ``propagateMetadataDownChain``, v0.16.8/v0.17.0:104, v0.13.0:64); the default grouper reads them from that top
  owner (``defaultgrouper/default_grouper.go``:86–89 at every tag) and the PodGroup handler writes them into
  ``spec.topologyConstraint`` (``podgroup/handler.go`` v0.16.8:139, v0.17.0:141, v0.13.0:126). The scheduler applies
  that constraint to the whole PodGroup (its root SubGroup set, ``subgroup_info/factory.go``).
* The same annotations on a **replicatedJob template** (``spec.replicatedJobs[].template.metadata.annotations`` of
  the JobSet, where a runtime's or a runtimePatch's replicatedJob metadata lands) give each of that replicatedJob's
  leaf SubGroups ``<rjob>-replica-<i>`` their own ``topologyConstraint`` (``jobset_grouper.go``
  ``singleReplicaSubGroupTopology`` 184–205, from v0.16.0): SubGroup rows only.
* A level is named by its node label; v0.17 also accepts a level's ``alias`` (Topology CRD ``spec.levels[].alias``,
  ``topology_types.go``:82–91; resolved by ``podgroup_info/job_info.go`` ``ResolveTopologyAliases`` 170–196). The
  v0.16.8 CRD has no ``alias`` field.
* Required placement at a level: all pods in one domain of that level or none; preferred: the scheduler tries the
  preferred level first and falls back to higher levels (``docs/topology/README.md``, identical at both tags;
  ``pkg/scheduler/plugins/topology/job_filtering.go``). A required gang no domain holds is reported as
  ``topology <name>, requirement <level> couldn't be satisfied for job <ns/name>`` (job_filtering.go
  ``getNoTopologyMatchError`` v0.16.8:580, v0.17.0:602) in the PodGroup's scheduling condition; a constraint naming a
  Topology that does not exist as ``Requested topology <name> does not exist`` (v0.16.8:40, v0.17.0:42).
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.suites.support.expectations.version_rows import row_for

#: Workload annotations (constants.go, above).
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
REQUIRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-required-placement"
PREFERRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-preferred-placement"
#: PodGroup (and SubGroup) ``topologyConstraint`` fields the annotations become (handler.go, above).
CONSTRAINT_FIELDS = {
    TOPOLOGY_ANNOTATION: "topology",
    REQUIRED_PLACEMENT_ANNOTATION: "requiredTopologyLevel",
    PREFERRED_PLACEMENT_ANNOTATION: "preferredTopologyLevel",
}
#: What KAI says when no domain at the required level holds the gang (job_filtering.go, above).
UNSATISFIED_MESSAGE = "topology {topology}, requirement {level} couldn't be satisfied"


@dataclass(frozen=True)
class TopologyRow:
    minor: str
    #: TrainJob annotations reach ``PodGroup.spec.topologyConstraint`` (skip-top-owner + default grouper).
    podgroup_constraint: bool
    #: replicatedJob template annotations reach the leaf SubGroups' ``topologyConstraint``.
    subgroup_constraint: bool
    #: A constraint may name a level by the Topology level's ``alias``.
    level_aliases: bool

    @property
    def name(self) -> str:
        return f"KAI {self.minor} topology"


TOPOLOGY_ROWS: dict[str, TopologyRow] = {
    row.minor: row
    for row in (
        TopologyRow("v0.13", True, False, False),
        TopologyRow("v0.14", True, False, False),
        TopologyRow("v0.15", True, False, False),
        TopologyRow("v0.16", True, True, False),
        TopologyRow("v0.17", True, True, True),
    )
}


def topology_row(version: str) -> TopologyRow:
    return row_for(TOPOLOGY_ROWS, "KAI topology", version, "suites/support/expectations/topology.py")
