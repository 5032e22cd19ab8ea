"""Placement cases: small 1-GPU TrainJobs placed one at a time, judged against the placement strategy the cluster
runs (binpack or spread, read from its SchedulingShard) or, for the control, against the other one.

One more TrainJob than the largest node has GPUs: under binpack the first node fills and one pod spills over, under
spread they go one per node first, so the two strategies place them differently on any cluster of two or more
GPU nodes. The cases judge each placement against the free GPUs just before it, so they must see an idle cluster:
serial (they hold few GPUs and evict nothing, so not disruptive).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import SERIAL, Manifest, held_if_fits
from kai_conformance.suites.support.expectations.placement import BINPACK, SPREAD, STRATEGIES
from kai_conformance.suites.support.workloads import case_queue, case_train_job


def small_jobs(layout: GpuLayout) -> int:
    """How many 1-GPU TrainJobs: one more than the largest node holds, within the cluster (at least two)."""
    return max(2, min(layout.total, layout.max_per_node + 1))


def other(strategy: str) -> str:
    return SPREAD if strategy == BINPACK else BINPACK


@dataclass(frozen=True)
class PlacementCase:
    """Small TrainJobs under ``strategy``; the test skips it when the cluster runs the other one. ``control``: run
    under whatever strategy is active and judged against the other one, where the placement detector must fire."""

    strategy: str | None = None
    control: bool = False

    def __post_init__(self) -> None:
        if (self.strategy is None) != self.control or (self.strategy and self.strategy not in STRATEGIES):
            raise ValueError(f"a placement case needs a strategy of {STRATEGIES}, or none as the control")

    @property
    def id(self) -> str:
        return "active-strategy-judged-as-the-other" if self.control else f"{self.strategy}-small-trainjobs"

    def jobs(self, layout: GpuLayout) -> int:
        return small_jobs(layout)

    def name(self, index: int) -> str:
        return f"small-{index}"

    def queue(self, ctx: RenderContext) -> Manifest:
        jobs = self.jobs(ctx.layout)
        return case_queue(ctx, "small", gpu_quota=jobs, gpu_limit=jobs)

    def trainjob(self, ctx: RenderContext, index: int) -> Manifest:
        return case_train_job(ctx, self.name(index), 1, 1, "small")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), *(self.trainjob(ctx, i) for i in range(self.jobs(ctx.layout)))]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.jobs(layout), layout)

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (SERIAL,)
