"""Queue cases: where queue labels route a PodGroup, GPU limits along a queue hierarchy, and a queue that must
not move when its TrainJob is relabelled."""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, held_if_fits
from kai_conformance.suites.support.expectations import (
    ARRIVALS,
    DEFAULT_QUEUE,
    PODGROUP_LABEL_SOURCES,
    QUEUE_LABEL,
    QUEUE_LABEL_PRECEDENCE,
)
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    UNLIMITED,
    case_queue,
    case_runtime,
    case_train_job,
    metadata,
    queue_name,
    train_job,
)


@dataclass(frozen=True)
class RoutingCase(SideBySide):
    """A one-pod TrainJob with queue labels at some of: the TrainJob, the JobSet template (from a per-case runtime)
    and the pod template. Labels name queue *roles*; ``missing`` roles are never created."""

    id: str
    trainjob_queue: str | None = None
    jobset_queue: str | None = None
    pod_queue: str | None = None
    missing: tuple[str, ...] = ()

    @property
    def sources(self) -> dict[str, str]:
        """Label source (as in expectations.ARRIVALS) → the queue role it names."""
        named = {
            "runtime-jobset-template": self.jobset_queue,
            "trainjob-metadata": self.trainjob_queue,
            "runtime-pod-template": self.pod_queue,
        }
        return {source: role for source, role in named.items() if role}

    @property
    def expected_role(self) -> str | None:
        """The role KAI must queue the PodGroup to (None: ``default-queue``)."""
        return next((self.sources[s] for s in QUEUE_LABEL_PRECEDENCE if s in self.sources), None)

    def queue_of(self, ctx: RenderContext, role: str | None) -> str:
        return queue_name(ctx.namespace, role) if role else DEFAULT_QUEUE

    def expected_queue(self, ctx: RenderContext) -> str:
        return self.queue_of(ctx, self.expected_role)

    def label_levels(self, source: str) -> frozenset[str]:
        """Where the queue label of ``source`` must be found: where its metadata arrives, except on the PodGroup
        when a source ahead of it in precedence also labels the top owner."""
        levels = set(ARRIVALS[source])
        ahead = (
            PODGROUP_LABEL_SOURCES[: PODGROUP_LABEL_SOURCES.index(source)] if source in PODGROUP_LABEL_SOURCES else ()
        )
        if any(s in self.sources for s in ahead):
            levels.discard("PodGroup")
        return frozenset(levels)

    @property
    def needs_runtime(self) -> bool:
        return bool(self.jobset_queue or self.pod_queue)

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        roles = dict.fromkeys(self.sources.values())
        return [case_queue(ctx, r, gpu_quota=1, gpu_limit=1) for r in roles if r not in self.missing]

    def runtime(self, ctx: RenderContext) -> list[Manifest]:
        if not self.needs_runtime:
            return []
        jobset = metadata({QUEUE_LABEL: self.queue_of(ctx, self.jobset_queue)}) if self.jobset_queue else None
        pod = metadata({QUEUE_LABEL: self.queue_of(ctx, self.pod_queue)}) if self.pod_queue else None
        return [case_runtime(ctx, "routing", jobset=jobset, pod=pod)]

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return train_job(
            "routed",
            num_nodes=1,
            gpus=1,
            queue=self.queue_of(ctx, self.trainjob_queue) if self.trainjob_queue else None,
            **({"runtime": "routing", "runtime_kind": NAMESPACED_RUNTIME_KIND} if self.needs_runtime else {}),
        )

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), *self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return 0 if self.expected_role in self.missing else held_if_fits(1, layout)


@dataclass(frozen=True)
class HierarchyCase(SideBySide):
    """A parent queue and its child, one of them with a GPU limit; a job within or one GPU over that limit."""

    limited: str  # "child" | "parent"
    over: bool
    limit: int = 2

    @property
    def id(self) -> str:
        return f"{'over' if self.over else 'within'}-{self.limited}-limit"

    @property
    def pods(self) -> int:
        return self.limit + (1 if self.over else 0)

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        parent_limit = self.limit if self.limited == "parent" else UNLIMITED
        child_limit = self.limit if self.limited == "child" else UNLIMITED
        parent = case_queue(ctx, "parent", gpu_quota=self.limit, gpu_limit=parent_limit)
        child = case_queue(
            ctx, "child", gpu_quota=self.limit, gpu_limit=child_limit, parent=queue_name(ctx.namespace, "parent")
        )
        return [parent, child]

    def limited_display_name(self, ctx: RenderContext) -> str:
        """KAI names the queue whose limit is hit by its displayName (``queue_info.go``)."""
        return f"{ctx.namespace}/{self.limited}"

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "hier", self.pods, 1, "child")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return 0 if self.over else held_if_fits(self.pods, layout)


@dataclass(frozen=True)
class QueueMoveCase(SideBySide):
    """A TrainJob queued to ``first`` is relabelled to ``second`` and suspended/resumed, so the podgrouper
    regroups new pods; the PodGroup must keep its queue."""

    id: str = "relabel-and-regroup"

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        return [case_queue(ctx, role, gpu_quota=1, gpu_limit=1) for role in ("first", "second")]

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "mover", 1, 1, "first")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(1, layout)
