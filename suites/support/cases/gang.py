"""Gang cases: one TrainJob of a gang shape in its own queue, and a gang waiting behind a running blocker."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import DEFAULT_SCHEDULER_RUNTIME, RUNTIME
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import DISRUPTIVE, SERIAL, SHARED_WORKERS, Manifest, WholeCluster
from kai_conformance.suites.support.shapes import GangShape, PodCount
from kai_conformance.suites.support.workloads import UNLIMITED, case_queue, case_train_job, train_job


@dataclass(frozen=True)
class GangCase:
    """One TrainJob of ``shape`` in its own queue; ``default_scheduler`` runs it without KAI (control case)."""

    shape: GangShape
    default_scheduler: bool = False
    workload: str = "gang"

    @property
    def id(self) -> str:
        return self.shape.id + ("-default-scheduler" if self.default_scheduler else "")

    def size(self, layout: GpuLayout) -> tuple[int, int]:
        return self.shape.size(layout)

    def queue(self, ctx: RenderContext) -> Manifest:
        demand = self.shape.demand(ctx.layout)
        return case_queue(ctx, self.workload, gpu_quota=demand, gpu_limit=demand)

    def trainjob(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.size(ctx.layout)
        if self.default_scheduler:  # no KAI involved: no queue, no PodGroup
            return train_job(self.workload, num_nodes=pods, gpus=gpus, runtime=DEFAULT_SCHEDULER_RUNTIME)
        return case_train_job(ctx, self.workload, pods, gpus, self.workload, runtime=RUNTIME)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.trainjob(ctx)] if self.default_scheduler else [self.queue(ctx), self.trainjob(ctx)]

    @property
    def reserves_every_gpu(self) -> bool:
        """An over-subscribed gang binds nothing on a correct KAI, yet its hold proves something only while every GPU
        is idle: a KAI that places part of a gang must find room to do so, and may take no GPU another case holds.
        It leases every GPU (no other GPU-leasing case runs meanwhile) instead of taking the whole cluster
        (``serial``), so the cases that lease none (refused workloads, controls) still run beside it."""
        return self.shape.pods is PodCount.OVER and not self.default_scheduler

    def gpu_demand(self, layout: GpuLayout) -> int:
        if self.default_scheduler:  # places what fits: everything up to the whole cluster
            return min(self.shape.demand(layout), layout.total)
        if self.reserves_every_gpu:
            return layout.total
        return self.shape.demand(layout) if self.shape.fits(layout) else 0

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        if self.default_scheduler:  # the default scheduler fills every GPU it can, and knows no node pools
            return (SERIAL, DISRUPTIVE, SHARED_WORKERS)
        if self.reserves_every_gpu:  # every GPU idle by lease (gpu_demand), not the whole cluster
            return ()
        if self.shape.needs_whole_cluster:  # fills every GPU
            return (SERIAL, DISRUPTIVE)
        if self.shape.needs_whole_nodes:
            return (SERIAL,)
        return ()


@dataclass(frozen=True)
class BlockedGangCase(WholeCluster):
    """A running blocker leaves one pod slot too few for the gang; the gang waits whole, then binds whole.

    Blocker and gang share one queue of equal priority (``train``) whose quota is the whole cluster: nothing may
    preempt (equal priority) or reclaim (same queue) the blocker, so only capacity holds the gang back.
    """

    gang: GangShape

    @property
    def id(self) -> str:
        return f"{self.gang.id}-behind-blocker"

    def gang_size(self, layout: GpuLayout) -> tuple[int, int]:
        return self.gang.size(layout)

    def blocker_size(self, layout: GpuLayout) -> tuple[int, int]:
        """Pods of the gang's size taking every slot but ``gang pods - 1``: the gang is short by exactly one."""
        pods, gpus = self.gang.size(layout)
        return max(1, layout.pods_that_fit(gpus) - pods + 1), gpus

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def blocker(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.blocker_size(ctx.layout)
        return case_train_job(ctx, "blocker", pods, gpus, "shared")

    def waiting_gang(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.gang.size(ctx.layout)
        return case_train_job(ctx, "gang", pods, gpus, "shared")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.blocker(ctx), self.waiting_gang(ctx)]
