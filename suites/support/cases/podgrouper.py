"""Podgrouper cases: a TrainJob on the suite's runtime, or on a runtime with a second replicatedJob; one whose second
replicatedJob can never reach its SubGroup floor (KAI PR #2096); and (control) a SubGroup held below a floor it is
judged against; and PodGroups of the case's own asking for no gang, only dry-run (KAI #1944)."""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import replicated_job
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, held_if_fits
from kai_conformance.suites.support.cases.elastic import elastic_train_job
from kai_conformance.suites.support.expectations import (
    DEFAULT_PRIORITY_CLASS,
    MIN_MEMBER_ANNOTATION,
    ReplicatedJob,
)
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    case_queue,
    case_runtime,
    case_train_job,
    floored_replicated_job,
    queue_name,
)

AUX_JOB = "aux"
LAUNCHER_JOB = "launcher"


@dataclass(frozen=True)
class PodGroupCase(SideBySide):
    """A TrainJob of ``pods`` 1-GPU pods on the suite's runtime, or on a per-case runtime that adds a second
    replicatedJob (``extra``: ``aux`` beside ``node``, or a ``launcher`` that dependsOn ``node`` being Ready).
    The TrainJob names its queue and, with ``priority_class``, a ``priorityClassName`` label: what the PodGroup
    must carry."""

    pods: int = 2
    extra: str | None = None
    priority_class: str | None = None

    @property
    def id(self) -> str:
        return f"{self.pods}-pods" + (f"-with-{self.extra}" if self.extra else "")

    @property
    def replicated_jobs(self) -> list[ReplicatedJob]:
        jobs = [ReplicatedJob("node", self.pods)]
        return jobs + ([ReplicatedJob(self.extra, 1)] if self.extra else [])

    @property
    def total_pods(self) -> int:
        return sum(r.pods * r.replicas for r in self.replicated_jobs)

    def runtime(self, ctx: RenderContext) -> list[Manifest]:
        if not self.extra:
            return []
        depends_on = [{"name": "node", "status": "Ready"}] if self.extra == LAUNCHER_JOB else None
        second = replicated_job(
            self.extra, ctx.workload_image, ancestor=None, container=self.extra, depends_on=depends_on
        )
        node = replicated_job("node", ctx.workload_image)
        return [case_runtime(ctx, f"with-{self.extra}", replicated_jobs=[node, second])]

    def trainjob(self, ctx: RenderContext) -> Manifest:
        runtime = {"runtime": f"with-{self.extra}", "runtime_kind": NAMESPACED_RUNTIME_KIND} if self.extra else {}
        return case_train_job(ctx, "owned", self.pods, 1, "owned", priority_class=self.priority_class, **runtime)

    def expected_queue(self, ctx: RenderContext) -> str:
        return queue_name(ctx.namespace, "owned")

    @property
    def expected_priority_class(self) -> str:
        return self.priority_class or DEFAULT_PRIORITY_CLASS

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        queue = case_queue(ctx, "owned", gpu_quota=self.pods, gpu_limit=self.pods)
        return [queue, *self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.pods, layout)


@dataclass(frozen=True)
class PodSetFloorCase(SideBySide):
    """KAI PR #2096 as a TrainJob: a per-case runtime of the trainer ``node`` (one 1-GPU pod) and ``aux`` (``aux_pods``
    pods without GPUs whose SubGroup floor, ``aux_floor``, is above its pods), and a TrainJob whose
    ``kai.scheduler/batch-min-member`` caps the PodGroup's root ``minSubGroup`` at ``root_cap``.

    ``node`` has its pod, so the root is ready; ``aux`` comes first by name and can never reach its floor, so no pod
    of it may ever be bound. v0.17.0 binds its two pods (reproduced on real kind with a plain JobSet of this shape,
    upstream-facts §B10); with the fix nothing is bound (``aux`` gives no task and still takes the one place)."""

    aux_pods: int = 2
    aux_floor: int = 3
    root_cap: int = 1
    workload: str = "floor"
    runtime_name: str = "aux-floor"

    @property
    def id(self) -> str:
        return f"{self.aux_pods}-{AUX_JOB}-pods-below-floor-{self.aux_floor}-beside-a-ready-node"

    @property
    def gpus(self) -> int:
        return 1

    @property
    def total_pods(self) -> int:
        return 1 + self.aux_pods

    @property
    def floors(self) -> list[ReplicatedJob]:
        """The replicatedJobs with the floors the PodGroup must carry (``ReplicatedJob.pods``: a leaf's
        ``minMember``), for :meth:`KaiRow.podgroup_spec`."""
        return [ReplicatedJob("node", 1), ReplicatedJob(AUX_JOB, self.aux_floor)]

    def runtime(self, ctx: RenderContext) -> Manifest:
        node = replicated_job("node", ctx.workload_image)
        aux = floored_replicated_job(ctx, AUX_JOB, self.aux_pods, self.aux_floor)
        return case_runtime(ctx, self.runtime_name, replicated_jobs=[node, aux])

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return case_train_job(
            ctx, self.workload, 1, self.gpus, self.workload, runtime=self.runtime_name,
            runtime_kind=NAMESPACED_RUNTIME_KIND, annotations={MIN_MEMBER_ANNOTATION: str(self.root_cap)},
        )  # fmt: skip

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        queue = case_queue(ctx, self.workload, gpu_quota=self.gpus, gpu_limit=self.gpus)
        return [queue, self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.gpus, layout)


@dataclass(frozen=True)
class FloorHeldByLimitCase(SideBySide):
    """Control of the SubGroup-floor detector: a TrainJob of ``pods`` 1-GPU pods whose ``node`` SubGroup has floor
    ``floor`` (an elastic gang: the annotation where the version reads it), in a queue whose GPU limit is that floor.
    KAI binds the floor and holds the rest at the limit (OverLimit); judged as if the floor were every pod, the
    detector fires, and it holds for the real floor on the same observations. It holds ``floor`` GPUs."""

    id: str = "subgroup-held-at-its-floor-judged-against-all-its-pods"
    workload: str = "held"
    pods: int = 2
    floor: int = 1

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        queue = case_queue(ctx, self.workload, gpu_quota=self.floor, gpu_limit=self.floor)
        return [queue, elastic_train_job(ctx, self.workload, self.pods, self.floor, self.workload)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.floor, layout)


@dataclass(frozen=True)
class NoGangPodGroupCase(SideBySide):
    """PodGroups of the case's own, server-side dry-run in its namespace (nothing stored, nothing scheduled): a flat
    one with ``minMember: 0`` and one whose SubGroup sits under ``minSubGroup: 0``, both "no gang" (KAI #1944: the
    root fields' CRD ``minimum`` is 1 at v0.16.8 and v0.17.0, 0 where fixed; the SubGroups' own is 0 everywhere).
    First, ``minMember: -1``, below every version's floor: the API server must refuse it. No TrainJob asks for
    either (KAI's JobSet grouper refuses ``kai.scheduler/batch-min-member`` below 1), so the case asks itself."""

    id: str = "min-member-0-and-min-subgroup-0"

    def gpu_demand(self, layout: GpuLayout) -> int:
        return 0

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return []  # nothing is stored: every PodGroup of the case is only dry-run

    def below_every_floor(self) -> tuple[Manifest, str]:
        return podgroup("below-every-floor", {"minMember": -1}), "spec.minMember -1"

    def no_gang(self) -> list[tuple[Manifest, str]]:
        leaf = {"name": "workers", "minMember": 1}
        return [
            (podgroup("no-gang-min-member", {"minMember": 0}), "spec.minMember 0"),
            (podgroup("no-gang-min-subgroup", {"minSubGroup": 0, "subGroups": [leaf]}),
             "spec.minSubGroup 0 over SubGroup workers (minMember 1)"),
        ]  # fmt: skip


def podgroup(name: str, spec: Manifest) -> Manifest:
    """A PodGroup of the case's own (the workspace labels it and places it in the case's namespace)."""
    return {"apiVersion": kinds.POD_GROUP.api_version, "kind": kinds.POD_GROUP.kind, "metadata": {"name": name},
            "spec": spec}  # fmt: skip
