"""Preemption cases: a newcomer of another priority class in a full queue, and sibling queues reclaiming GPUs
lent over quota."""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, WholeCluster
from kai_conformance.suites.support.expectations import PRIORITY_CLASSES
from kai_conformance.suites.support.shapes import GangShape, GpuSize, PodCount
from kai_conformance.suites.support.workloads import UNLIMITED, case_queue, case_train_job


def preemptible(priority_class: str) -> bool:
    return PRIORITY_CLASSES[priority_class][1]


def outranks(newcomer: str, victim: str) -> bool:
    return PRIORITY_CLASSES[newcomer][0] > PRIORITY_CLASSES[victim][0]


@dataclass(frozen=True)
class PreemptionCase(WholeCluster):
    """In one queue, a ``victim`` TrainJob fills every GPU; a ``newcomer`` of another priority class arrives.

    The queue's quota covers the whole cluster and it has no limit: a non-preemptible newcomer only runs within
    quota, and the limit must not be the reason it waits (KAI §6).
    """

    victim_priority: str
    newcomer_priority: str
    gpus: GpuSize = GpuSize.ONE
    slow: bool = False

    @property
    def id(self) -> str:
        return f"{self.newcomer_priority}-after-{self.victim_priority}-{self.gpus.value}"

    @property
    def preempts(self) -> bool:
        """KAI preempts within a queue only a preemptible victim of strictly lower priority (KAI §6 preempt)."""
        return preemptible(self.victim_priority) and outranks(self.newcomer_priority, self.victim_priority)

    @property
    def victim_shape(self) -> GangShape:
        return GangShape(PodCount.FULL, self.gpus)

    @property
    def newcomer_shape(self) -> GangShape:
        return GangShape(PodCount.ONE if self.gpus is GpuSize.WHOLE_NODE else PodCount.TWO, self.gpus)

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def victim(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.victim_shape.size(ctx.layout)
        return case_train_job(ctx, "victim", pods, gpus, "shared", priority_class=self.victim_priority)

    def newcomer(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.newcomer_shape.size(ctx.layout)
        return case_train_job(ctx, "newcomer", pods, gpus, "shared", priority_class=self.newcomer_priority)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.victim(ctx), self.newcomer(ctx)]


@dataclass(frozen=True)
class ReclaimCase(WholeCluster):
    """Two sibling queues splitting the cluster's GPUs by quota.

    ``borrowing``: the first queue runs a gang over its quota on GPUs the second queue is owed, then the second
    queue asks for exactly its quota → the borrower is reclaimed. Otherwise the first queue runs within its quota
    and the second asks for more than its own → nothing is reclaimed (in-quota resources are protected, KAI §6).
    """

    borrowing: bool

    @property
    def id(self) -> str:
        return "over-quota-queue-is-reclaimed" if self.borrowing else "within-quota-queue-is-kept"

    def quotas(self, layout: GpuLayout) -> tuple[int, int]:
        claimer = layout.total // 2
        return layout.total - claimer, claimer

    def sizes(self, layout: GpuLayout) -> tuple[int, int]:
        """1-GPU pods of the first ("holder") and the second ("claimer") queue's gangs."""
        holder_quota, claimer_quota = self.quotas(layout)
        if self.borrowing:
            return layout.total, claimer_quota
        return holder_quota, layout.total

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        holder_quota, claimer_quota = self.quotas(ctx.layout)
        return [
            case_queue(ctx, "holder", gpu_quota=holder_quota, gpu_limit=UNLIMITED),
            case_queue(ctx, "claimer", gpu_quota=claimer_quota, gpu_limit=UNLIMITED),
        ]

    def holder(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "holder", self.sizes(ctx.layout)[0], 1, "holder")

    def claimer(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "claimer", self.sizes(ctx.layout)[1], 1, "claimer")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.holder(ctx), self.claimer(ctx)]
