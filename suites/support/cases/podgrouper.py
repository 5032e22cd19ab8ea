"""Podgrouper cases: a TrainJob on the suite's runtime, or on a runtime with a second replicatedJob."""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import replicated_job
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, held_if_fits
from kai_conformance.suites.support.expectations import DEFAULT_PRIORITY_CLASS, ReplicatedJob
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    case_queue,
    case_runtime,
    case_train_job,
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
