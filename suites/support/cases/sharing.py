"""GPU-sharing cases: TrainJobs whose pods ask for a fraction of one GPU (pod annotation ``gpu-fraction``).

The annotation must be on the pod (KAI's admission reads the pod), so a TrainJob puts it on its pods' template with
a ``runtimePatches`` entry (pod template metadata arrives at the Pod only), and asks for no ``nvidia.com/gpu``
(KAI refuses a fraction beside a whole-GPU limit). Every case is ``serial``: which device a fraction lands on
depends on the fractions already on the cluster, and the binder's reservation pods take whole GPUs of their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import SERIAL, SHARED_WORKERS, Manifest, WholeCluster, held_if_fits
from kai_conformance.suites.support.expectations.sharing import GPU_FRACTION_ANNOTATION, portion_text
from kai_conformance.suites.support.workloads import UNLIMITED, case_queue, case_train_job, runtime_patch


def fractional_train_job(ctx: RenderContext, name: str, pods: int, fraction: str, queue_role: str) -> Manifest:
    """A TrainJob of ``pods`` pods, each asking for ``fraction`` of one GPU and for no whole GPU."""
    patch = runtime_patch(pod={"annotations": {GPU_FRACTION_ANNOTATION: fraction}})
    return case_train_job(ctx, name, pods, 0, queue_role, runtime_patches=[patch])


@dataclass(frozen=True)
class FractionCase:
    """``pods`` pods of ``fraction`` of a GPU each, in their own queue (quota and limit: the devices they need)."""

    pods: int = 2
    fraction: str = "0.5"
    workload: str = "fractions"

    @property
    def id(self) -> str:
        return f"{self.pods}-pods-of-{self.fraction}-gpu"

    @property
    def portion(self) -> str:
        """``receivedGPU.portion`` each BindRequest should carry."""
        return portion_text(float(self.fraction))

    @property
    def fit_one_device(self) -> bool:
        return self.pods * float(self.fraction) <= 1.0

    @property
    def devices(self) -> int:
        """Devices the pods take when packed: one when they fit one, else one each (no two fit a device)."""
        return 1 if self.fit_one_device else self.pods

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, self.workload, gpu_quota=self.devices, gpu_limit=self.devices)

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return fractional_train_job(ctx, self.workload, self.pods, self.fraction, self.workload)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.devices, layout)

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        # The binder's reservation pods (one per shared device) are not in the case's node pool.
        return (SERIAL, SHARED_WORKERS)


@dataclass(frozen=True)
class FractionGangBehindBlocker(WholeCluster):
    """A blocker of whole 1-GPU pods leaves one GPU free; a gang of ``pods`` fractional pods needs more than that
    one device (two of them would fit it, not all), so it must wait whole, then bind whole once the blocker goes.

    Blocker and gang share a queue whose quota is the whole cluster, so only capacity holds the gang back.
    """

    pods: int = 3
    fraction: str = "0.5"

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (*super().marks(), SHARED_WORKERS)  # reservation pods: see FractionCase.marks

    @property
    def id(self) -> str:
        return f"{self.pods}-pods-of-{self.fraction}-gpu-behind-a-blocker"

    @property
    def portion(self) -> str:
        return portion_text(float(self.fraction))

    def devices(self) -> int:
        return math.ceil(self.pods * float(self.fraction))

    def blocker_pods(self, layout: GpuLayout) -> int:
        return max(1, layout.total - 1)

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def blocker(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "blocker", self.blocker_pods(ctx.layout), 1, "shared")

    def gang(self, ctx: RenderContext) -> Manifest:
        return fractional_train_job(ctx, "gang", self.pods, self.fraction, "shared")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.blocker(ctx), self.gang(ctx)]
