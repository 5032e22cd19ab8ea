"""Elastic cases: a TrainJob gang of 1-GPU pods whose minimum (``kai.scheduler/batch-min-member``, where the KAI
version reads it: ``expect.elastic``) is half its pods, starting behind a blocker, preempted by a higher-priority
gang, and (control) held at its minimum by its queue's limit.

Sizes come from the layout: the elastic gang has one pod per GPU of the cluster and half of them as its minimum, so
the other half is its surplus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, WholeCluster, held_if_fits
from kai_conformance.suites.support.expectations import expectations_for
from kai_conformance.suites.support.workloads import UNLIMITED, case_queue, case_train_job


def elastic_train_job(
    ctx: RenderContext, name: str, pods: int, minimum: int, queue_role: str, **kwargs: Any
) -> Manifest:
    """A TrainJob of ``pods`` 1-GPU pods whose gang needs only ``minimum`` of them: the annotation goes where the
    KAI row says the podgrouper reads it (a runtimePatch of the ``node`` replicatedJob's template, or the TrainJob)."""
    settings = expectations_for(ctx.combination).elastic.trainjob_settings(minimum)
    return case_train_job(ctx, name, pods, 1, queue_role, **settings, **kwargs)


def cluster_elastic_sizes(layout: GpuLayout) -> tuple[int, int]:
    """(pods, minimum): one 1-GPU pod per GPU of the cluster, half of them (at least one) the minimum."""
    pods = layout.pods_that_fit(1)
    return pods, max(1, pods // 2)


@dataclass(frozen=True)
class ElasticStartCase(WholeCluster):
    """A running blocker leaves exactly the elastic gang's minimum free: the gang starts with its minimum, its surplus
    pending, and grows to every pod once the blocker is deleted.

    Blocker and elastic gang share one queue and priority class (``train``) with the whole cluster as quota, so
    nothing preempts or reclaims the blocker: only capacity holds the surplus back.
    """

    id: str = "half-minimum-behind-a-blocker"
    workload: str = "elastic"

    def sizes(self, layout: GpuLayout) -> tuple[int, int]:
        return cluster_elastic_sizes(layout)

    def blocker_pods(self, layout: GpuLayout) -> int:
        pods, minimum = self.sizes(layout)
        return pods - minimum

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def blocker(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "blocker", max(1, self.blocker_pods(ctx.layout)), 1, "shared")

    def elastic(self, ctx: RenderContext) -> Manifest:
        pods, minimum = self.sizes(ctx.layout)
        return elastic_train_job(ctx, self.workload, pods, minimum, "shared")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.blocker(ctx), self.elastic(ctx)]


@dataclass(frozen=True)
class ElasticPreemptionCase(WholeCluster):
    """A preemptible elastic gang (``train``) runs on every GPU; a non-preemptible ``build`` gang as large as its
    surplus arrives in the same queue: KAI takes the surplus, the minimum keeps running (GetTasksToEvict).

    The queue's quota is the whole cluster, so the non-preemptible newcomer runs within quota (KAI §6 preempt).
    """

    id: str = "build-gang-takes-the-surplus-of-a-train-gang"
    workload: str = "elastic"
    newcomer_priority: str = "build"

    def sizes(self, layout: GpuLayout) -> tuple[int, int]:
        return cluster_elastic_sizes(layout)

    def newcomer_pods(self, layout: GpuLayout) -> int:
        pods, minimum = self.sizes(layout)
        return max(1, pods - minimum)

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def elastic(self, ctx: RenderContext) -> Manifest:
        pods, minimum = self.sizes(ctx.layout)
        return elastic_train_job(ctx, self.workload, pods, minimum, "shared", priority_class="train")

    def newcomer(self, ctx: RenderContext) -> Manifest:
        pods = self.newcomer_pods(ctx.layout)
        return case_train_job(ctx, "newcomer", pods, 1, "shared", priority_class=self.newcomer_priority)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.elastic(ctx), self.newcomer(ctx)]


@dataclass(frozen=True)
class ElasticUnderLimitCase(SideBySide):
    """Control: an elastic gang of ``pods`` with minimum ``minimum`` in a queue whose GPU limit is its minimum. KAI
    binds the minimum and holds the surplus at the limit (OverLimit); judged as if its minimum were every pod (the
    annotation lost on the way), the elastic detector must fire. It holds only ``minimum`` GPUs, in its own quota."""

    id: str = "limited-to-its-minimum-judged-as-a-full-gang"
    workload: str = "elastic"
    pods: int = 4
    minimum: int = 2

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "limited", gpu_quota=self.minimum, gpu_limit=self.minimum)

    def elastic(self, ctx: RenderContext) -> Manifest:
        return elastic_train_job(ctx, self.workload, self.pods, self.minimum, "limited")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.elastic(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.minimum, layout)
