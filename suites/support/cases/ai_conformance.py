"""Kubernetes AI Conformance cases: a gang of TrainJob pods whose workload ends (as the lifecycle area's), and the
admission webhooks to try (the stack readiness proof's invalid objects, clusters/install/readiness.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kai_conformance.clusters.install.readiness import WebhookProbe, podgroup_probe, queue_probe, trainer_probe
from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import lifetime_env
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, held_if_fits
from kai_conformance.suites.support.cases.lifecycle import RUN_SECONDS
from kai_conformance.suites.support.workloads import case_queue, case_train_job, queue_name


@dataclass(frozen=True)
class EndingGangCase(SideBySide):
    """``pods`` pods of one GPU in a queue whose quota and limit are exactly theirs; each exits 0 after
    ``run_seconds`` (the program's positive gang case: N co-scheduled pods all Running, then the job completes)."""

    id: str
    pods: int = 3
    run_seconds: int = RUN_SECONDS
    workload: str = "gang"

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.pods, layout)

    def queue_name(self, ctx: RenderContext) -> str:
        return queue_name(ctx.namespace, self.workload)

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, self.workload, gpu_quota=self.pods, gpu_limit=self.pods)

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, self.workload, self.pods, 1, self.workload, env=lifetime_env(self.run_seconds))

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.trainjob(ctx)]


@dataclass(frozen=True)
class WebhookCase(SideBySide):
    """An object the webhook must refuse, dry-run (nothing is stored, no GPU held)."""

    id: str
    probe: Callable[[], WebhookProbe]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return 0


WEBHOOKS = [WebhookCase("trainjob", trainer_probe), WebhookCase("queue", queue_probe),
            WebhookCase("podgroup", podgroup_probe)]  # fmt: skip
