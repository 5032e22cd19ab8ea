"""Consolidation and eviction protection (min-runtime, preemption delay), per KAI version.

* **Consolidation** (``pkg/scheduler/actions/consolidation/consolidation.go``, v0.16.8 and v0.17.0): for a pending
  *preemptible* gang (``FilterNonPreemptible``) that does not fit as the nodes are, KAI evicts running preemptible
  pods and commits only a scenario in which every evicted pod is placed again (``allPodsReallocated``: no victim
  task left ``Releasing``), considering at most ``--max-consolidation-preemptees`` victim gangs (default 16,
  ``cmd/scheduler/app/options/options.go`` l. 38). Its ``Evict`` events carry ``evictor-action-type:
  consolidation`` (``framework/interface.go`` l. 36) and "…was preempted and rescheduled due to bin packing
  (resource consolidation) procedure" (``api/unschedule_info.go``). The operator turns the action off when the
  shard's placement strategy is ``spread`` (``pkg/apis/kai/v1/schedulingshard_types.go`` ``setDefaultActions``).
* **Min-runtime** (``pkg/scheduler/plugins/minruntime``, enabled by default at priority 600 in
  ``schedulingshard_types.go``; ``docs/plugins/minruntime.md``): a victim gang is not preempted before its queue's
  ``preemptMinRuntime``, nor reclaimed before ``reclaimMinRuntime`` (resolved one level below the lowest common
  ancestor of the two queues: for sibling queues, the victim's queue), counted from the PodGroup annotation
  ``kai.scheduler/last-start-timestamp`` (RFC 3339, whole seconds) that the scheduler writes when it allocates the
  gang (``status_updater/default_status_updater.go`` ``setPodGroupLastStartTimeStamp``). Both Queue fields are in the
  Queue CRD of v0.16.8 and v0.17.0 (``../shared/crds/kai-scheduler/<v>/scheduling.run.ai_queues.yaml``). The
  SchedulingShard has a shard-wide default too (``spec.minRuntime {preemptMinRuntime, reclaimMinRuntime}`` in the
  shard CRD of both versions), the node-pool level that applies "if not overridden by a queue"
  (``docs/developer/designs/min-runtime/README.md`` "Configuration Hierarchy"); the cases set the windows on their
  own queues, so a cluster's shard default does not change what they expect.
* **Preemption delay** (v0.17.0 only; ``docs/preemption-delay/README.md``; ``podgroup_types.go`` l. 79–84): a
  pending gang with ``spec.preemptionDelay`` triggers no eviction (preempt, reclaim, consolidation) until
  ``max(PodGroup creation, last eviction) + delay`` (``podgroup_info/job_info.go`` ``PreemptionDelayEnd``); meanwhile
  its PodGroup gives the reason ``PreemptionDelayNotElapsed`` (``actions/utils/input_jobs.go``). The podgrouper fills
  the field from the annotation ``kai.scheduler/preemption-delay`` on an owner or the pod
  (``defaultgrouper.calcPodGroupPreemptionDelay``); on a TrainJob the annotation reaches the JobSet through
  skip-top-owner (kai-scheduler.md §4.2), which is where the cases put it. v0.16.8 has neither the field (PodGroup
  CRD) nor the annotation.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.suites.support.expectations.version_rows import row_for

#: ``evictor-action-type`` of consolidation's Evict events (``framework/interface.go``, v0.16.8 and v0.17.0).
CONSOLIDATION_ACTION = "consolidation"
#: PodGroup annotation the scheduler stamps when it allocates a gang: where min-runtime counts from.
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"
#: PodGroup annotation the v0.17 scheduler stamps on a victim when it evicts it (``framework/statement.go``
#: ``commitEvict`` l. 153–154, written at the session's close); absent from v0.16.8. Facts: upstream-facts.md §B11.
LAST_EVICTION_ANNOTATION = "kai.scheduler/last-eviction-timestamp"
#: Annotation (TrainJob, JobSet or pod) the v0.17 podgrouper turns into ``PodGroup.spec.preemptionDelay``.
PREEMPTION_DELAY_ANNOTATION = "kai.scheduler/preemption-delay"
PREEMPTION_DELAY_REASON = "PreemptionDelayNotElapsed"


@dataclass(frozen=True)
class ConsolidationRow:
    minor: str
    #: Victim gangs consolidation considers at most (``--max-consolidation-preemptees`` default).
    max_preemptees: int
    #: Queue ``spec.preemptMinRuntime`` / ``spec.reclaimMinRuntime`` exist and the minruntime plugin is on.
    queue_min_runtime: bool
    #: Why the version has no preemption delay, or None where it has one.
    no_preemption_delay: str | None

    @property
    def name(self) -> str:
        return f"KAI {self.minor} consolidation"

    @property
    def preemption_delay(self) -> bool:
        return self.no_preemption_delay is None


CONSOLIDATION_ROWS: dict[str, ConsolidationRow] = {
    row.minor: row
    for row in (
        ConsolidationRow(
            "v0.16", 16, True,
            "KAI v0.16 has no preemption delay: PodGroup spec.preemptionDelay and the kai.scheduler/preemption-delay "
            "annotation arrived in v0.17.0 (absent from the v0.16.8 PodGroup CRD and pkg/)",
        ),
        ConsolidationRow("v0.17", 16, True, None),
    )
}  # fmt: skip


def consolidation_row(version: str) -> ConsolidationRow:
    return row_for(CONSOLIDATION_ROWS, "consolidation", version, "suites/support/expectations/consolidation.py")
