"""Control cases: workloads that put a real violation on the cluster under test, one per area, so that a green run
proves each area's detector can see a violation there (the gang one is
:class:`~suites.support.cases.gang.GangCase` with ``default_scheduler``).

The violation comes from the real controllers acting on what the case creates; the test then runs the area's own
detector on what it observes and passes only when the detector fires. Cases follow the render contract of
:mod:`suites.support.cases` (``id``, ``manifests(ctx)``, ``gpu_demand(layout)``, ``marks()``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME, pod_spec, replicated_job
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import MANAGED_BY, SUITE
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, held_if_fits
from kai_conformance.suites.support.cases.labels import PropagationCase
from kai_conformance.suites.support.expectations import ARRIVALS, LEVELS, QUEUE_LABEL, ReplicatedJob
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    UNLIMITED,
    case_queue,
    case_runtime,
    case_train_job,
    gpu_resources,
    queue_name,
    train_job,
)


@dataclass(frozen=True)
class MisroutedQueueCase(SideBySide):
    """A TrainJob labelled for queue ``routed``, judged by the routing detector as if it were meant for ``expected``.

    Both queues exist; the pod asks for no GPU (routing happens when the podgrouper makes the PodGroup, before any
    scheduling), so the case holds nothing and runs on any cluster.
    """

    id: str = "routed-to-one-queue-judged-against-another"
    routed: str = "routed"
    expected: str = "expected"

    def routed_queue(self, ctx: RenderContext) -> str:
        return queue_name(ctx.namespace, self.routed)

    def expected_queue(self, ctx: RenderContext) -> str:
        return queue_name(ctx.namespace, self.expected)

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        return [case_queue(ctx, role, gpu_quota=0, gpu_limit=UNLIMITED) for role in (self.routed, self.expected)]

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return train_job("routed", num_nodes=1, gpus=0, queue=self.routed_queue(ctx))

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return 0


@dataclass(frozen=True)
class MisplacedLabelCase(PropagationCase):
    """The propagation case of ``source`` unchanged on the cluster, judged against ``claimed`` levels instead of the
    table's (e.g. a pod-template label claimed at the Job, where JobSet never copies pod-template metadata, and not
    at the Pod, where it does arrive): the label detector must fire for exactly the levels that differ."""

    claimed: frozenset[str] = frozenset()

    @property
    def id(self) -> str:
        return f"{self.source}-claimed-at-{'-'.join(sorted(level.lower() for level in self.claimed))}"

    @property
    def misjudged_levels(self) -> frozenset[str]:
        """Levels where the claim and the table disagree: where the detector must fire, and nowhere else."""
        return frozenset(level for level in LEVELS if (level in self.claimed) != (level in ARRIVALS[self.source]))


@dataclass(frozen=True)
class PartialGangCase(SideBySide):
    """A running gang of ``pods`` 1-GPU pods from which the test deletes one pod by hand: a gang left partially
    evicted, as a preemption that missed pods would leave it.

    Its per-case runtime differs from the suite's in two ways. Each Job index tolerates no failure
    (``backoffLimitPerIndex: 0``): the deleted pod counts as a failure of its index (or its container's exit on
    SIGTERM completes the index), so the Job controller never re-creates it and the gang stays partial for as long
    as anyone looks (KAI's stale-gang eviction only acts after its 60 s grace, kai-scheduler.md §5), far longer
    than a gang may look partial while KAI evicts or binds (``suites/support/timing.settle``: 5 s, under that
    grace up to ``--timeout-scale`` 11). And the pod template
    carries the suite's managed-by label, so that the suite's API layer lets it delete one of these pods.
    """

    id: str = "one-pod-deleted-from-a-running-gang"
    pods: int = 2
    workload: str = "gang"

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, self.workload, gpu_quota=self.pods, gpu_limit=self.pods)

    def runtime(self, ctx: RenderContext) -> Manifest:
        node = replicated_job("node", ctx.workload_image, backoff_limit_per_index=0, pod_labels={MANAGED_BY: SUITE})
        return case_runtime(ctx, "no-retries", replicated_jobs=[node])

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return case_train_job(
            ctx, self.workload, self.pods, 1, self.workload, runtime="no-retries", runtime_kind=NAMESPACED_RUNTIME_KIND
        )

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.pods, layout)


@dataclass(frozen=True)
class JobPodGroupCase(SideBySide):
    """A plain ``batch/v1`` Job asking for ``kai-scheduler`` beside a suspended TrainJob.

    KAI's podgrouper groups the Job's pods with its Job grouper (``hub.go``: batch/v1 Job → K8sJobGrouper, v0.16
    and v0.17): one PodGroup ``pg-<job>-<job uid>`` owned by the Job, ``minMember`` 1 and no SubGroups. The
    TrainJob is suspended, so Trainer makes its JobSet (and JobSet its suspended Jobs) but no pod and no PodGroup
    of its own. The namespace then holds what a podgrouper whose owner walk stops at the Job would leave for a
    TrainJob (kai-scheduler.md §4.6): one JobSet and one PodGroup that is not the JobSet's, and not of the shape
    the version gives a TrainJob. The pods ask for no GPU, so the case holds nothing and runs on any cluster.
    """

    id: str = "batch-job-beside-a-suspended-trainjob"
    pods: int = 2
    job_name: str = "stray"
    trainjob_name: str = "owned"

    @property
    def trainjob_shape(self) -> list[ReplicatedJob]:
        """The replicatedJobs of a TrainJob of as many pods on the suite's runtime: the shape the detector expects."""
        return [ReplicatedJob("node", self.pods)]

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "stray", gpu_quota=0, gpu_limit=UNLIMITED)

    def job(self, ctx: RenderContext) -> Manifest:
        spec = pod_spec(ctx.workload_image, scheduler_name=KAI_SCHEDULER_NAME, restart_policy="Never")
        spec["containers"][0]["resources"] = gpu_resources(0)
        return {
            "apiVersion": kinds.JOB.api_version,
            "kind": kinds.JOB.kind,
            "metadata": {"name": self.job_name, "labels": {QUEUE_LABEL: queue_name(ctx.namespace, "stray")}},
            "spec": {"parallelism": self.pods, "completions": self.pods, "template": {"spec": spec}},
        }

    def trainjob(self, ctx: RenderContext) -> Manifest:
        suspended = train_job(self.trainjob_name, num_nodes=self.pods, gpus=0)
        suspended["spec"]["suspend"] = True
        return suspended

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.trainjob(ctx), self.job(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return 0
