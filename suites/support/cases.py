"""The cases: parametrize values that know what they create (the render contract of :mod:`fixtures.render`).

Each case is a frozen dataclass with

* ``id`` – its pytest id (symbolic, so collection is the same on every xdist worker and every cluster),
* ``manifests(ctx)`` – every object the case applies over its life, in apply order; a test applies exactly these
  (phase by phase, through the named methods ``manifests`` is made of),
* ``gpu_demand(layout)`` – the most GPUs it holds at once, so GPU cases can run side by side,
* ``marks()`` – ``serial``/``disruptive`` when it needs whole nodes or the whole cluster.

Numbers come from the GPU layout in ``ctx`` (the cluster's at run time, the topology's in render mode).
Queues: every case has its own leaf queues under the suite's parent queue. A case that may run beside others gets
GPU quota and limit equal to what it uses: a queue at or below its quota is never reclaimed and such a case never
borrows, so cases running side by side cannot take GPUs from each other. Serial cases size their queues for what
they test (a whole-cluster quota, or quotas that split the cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import DEFAULT_SCHEDULER_RUNTIME, RUNTIME, replicated_job
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.expectations import (
    ARRIVALS,
    DEFAULT_PRIORITY_CLASS,
    DEFAULT_QUEUE,
    PODGROUP_LABEL_SOURCES,
    PRIORITY_CLASSES,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    QUEUE_LABEL_PRECEDENCE,
    ReplicatedJob,
    expectations_for,
)
from kai_conformance.suites.support.shapes import GangShape, GpuSize, PodCount
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    UNLIMITED,
    case_queue,
    case_runtime,
    metadata,
    queue_name,
    runtime_patch,
    train_job,
)

Manifest = dict[str, Any]
SERIAL = pytest.mark.serial
DISRUPTIVE = pytest.mark.disruptive
SLOW = pytest.mark.slow


def param(case: Any) -> Any:
    """``pytest.param`` of a case with its id and marks."""
    return pytest.param(case, id=case.id, marks=case.marks())


def skip_unless(condition: bool, reason: str) -> None:
    """Skip a case this cluster's layout cannot express (an existing cluster may be small or GPU-less)."""
    if not condition:
        pytest.skip(reason)


def require_gpus(layout: GpuLayout, gpus: int) -> None:
    skip_unless(layout.total >= gpus, f"needs {gpus} GPU(s); the cluster has {layout.total} ({layout.describe()})")


def held_if_fits(gpus: int, layout: GpuLayout) -> int:
    """GPUs a fixed-size case holds: all of them, or none on a cluster too small (its test then skips)."""
    return gpus if gpus <= layout.total else 0


def _gang_annotations(ctx: RenderContext, pods: int) -> dict[str, str]:
    return expectations_for(ctx.combination).kai.gang_annotations(pods)


def _job(ctx: RenderContext, name: str, pods: int, gpus: int, queue_role: str, **kwargs: Any) -> Manifest:
    """A TrainJob routed to this case's queue ``queue_role`` that forms one gang under the version's KAI."""
    annotations = {**_gang_annotations(ctx, pods), **kwargs.pop("annotations", {})}
    return train_job(
        name,
        num_nodes=pods,
        gpus=gpus,
        queue=queue_name(ctx.namespace, queue_role),
        annotations=annotations or None,
        **kwargs,
    )


class WholeCluster:
    """A case that at some point holds every GPU (it fills the cluster, evicts or reclaims): serial, disruptive.

    A subclass with a true ``slow`` field is also ``slow``: a long variant of a behaviour that a quicker case of the
    PR-gate selection (``-m "not slow"``) already covers.
    """

    def gpu_demand(self, layout: GpuLayout) -> int:
        return layout.total

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (SERIAL, DISRUPTIVE, SLOW) if getattr(self, "slow", False) else (SERIAL, DISRUPTIVE)


class SideBySide:
    """A case that may run beside others: it holds only what its ``gpu_demand`` says, in its own quota."""

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return ()


# ------------------------------------------------------------------------------------------------------ gang
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
        return _job(ctx, self.workload, pods, gpus, self.workload, runtime=RUNTIME)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.trainjob(ctx)] if self.default_scheduler else [self.queue(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        if self.default_scheduler:  # places what fits: everything up to the whole cluster
            return min(self.shape.demand(layout), layout.total)
        return self.shape.demand(layout) if self.shape.fits(layout) else 0

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        if self.default_scheduler:  # the default scheduler fills every GPU it can
            return (SERIAL, DISRUPTIVE)
        if self.shape.pods is PodCount.OVER:  # over-subscription: must see the whole, otherwise idle, cluster
            return (SERIAL,)
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
        return _job(ctx, "blocker", pods, gpus, "shared")

    def waiting_gang(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.gang.size(ctx.layout)
        return _job(ctx, "gang", pods, gpus, "shared")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.blocker(ctx), self.waiting_gang(ctx)]


# ----------------------------------------------------------------------------------------------------- queues
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
        return _job(ctx, "hier", self.pods, 1, "child")

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
        return _job(ctx, "mover", 1, 1, "first")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(1, layout)


# ----------------------------------------------------------------------------------------------------- labels
#: Prefix of the label and annotation keys the propagation cases set (one key per source, as label and annotation).
PROPAGATION_PREFIX = "propagation.kai-conformance.io"


@dataclass(frozen=True)
class PropagationCase(SideBySide):
    """A label and an annotation set at one ``source``; the test looks for both at every level."""

    source: str  # a key of expectations.ARRIVALS

    @property
    def id(self) -> str:
        return self.source

    @property
    def key(self) -> str:
        return f"{PROPAGATION_PREFIX}/{self.source}"

    @property
    def marker(self) -> Manifest:
        return metadata({self.key: "set"}, {self.key: "set"})

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "labels", gpu_quota=1, gpu_limit=1)

    def runtime(self, ctx: RenderContext) -> list[Manifest]:
        place = {
            "runtime-jobset-template": "jobset",
            "runtime-job-template": "job",
            "runtime-pod-template": "pod",
        }.get(self.source)
        return [case_runtime(ctx, "labels", **{place: self.marker})] if place else []

    def trainjob(self, ctx: RenderContext) -> Manifest:
        kwargs: dict[str, Any] = {}
        if self.runtime(ctx):
            kwargs.update(runtime="labels", runtime_kind=NAMESPACED_RUNTIME_KIND)
        if self.source.startswith("patch-"):
            kwargs["runtime_patches"] = [runtime_patch(**{self.source.split("-")[1]: self.marker})]
        if self.source == "trainjob-metadata":
            kwargs.update(labels=self.marker["labels"], annotations=self.marker["annotations"])
        return _job(ctx, "labels", 1, 1, "labels", **kwargs)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), *self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(1, layout)


@dataclass(frozen=True)
class ControllerMarksCase(SideBySide):
    """A plain TrainJob on the suite's runtime: what the controllers themselves put on Jobs and pods."""

    id: str = "controllers"
    pods: int = 2

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [
            case_queue(ctx, "marks", gpu_quota=self.pods, gpu_limit=self.pods),
            _job(ctx, "marks", self.pods, 1, "marks"),
        ]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.pods, layout)


@dataclass(frozen=True)
class PriorityCase(SideBySide):
    """A ``priorityClassName`` label at ``source`` (or none) and the PodGroup's ``spec.priorityClassName``."""

    source: str  # trainjob-label | runtime-jobset-template | runtime-pod-template | none
    priority_class: str = "build"

    @property
    def id(self) -> str:
        return self.source

    @property
    def expected(self) -> str:
        return DEFAULT_PRIORITY_CLASS if self.source == "none" else self.priority_class

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        # A non-preemptible class only runs within quota (KAI §6), so the quota covers the pod.
        objs = [case_queue(ctx, "priority", gpu_quota=1, gpu_limit=1)]
        label = metadata({PRIORITY_LABEL: self.priority_class})
        kwargs: dict[str, Any] = {}
        if self.source in ("runtime-jobset-template", "runtime-pod-template"):
            place = "jobset" if self.source == "runtime-jobset-template" else "pod"
            objs.append(case_runtime(ctx, "priority", **{place: label}))
            kwargs.update(runtime="priority", runtime_kind=NAMESPACED_RUNTIME_KIND)
        if self.source == "trainjob-label":
            kwargs["priority_class"] = self.priority_class
        return [*objs, _job(ctx, "prio", 1, 1, "priority", **kwargs)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(1, layout)


# ------------------------------------------------------------------------------------------------- preemption
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
        return _job(ctx, "victim", pods, gpus, "shared", priority_class=self.victim_priority)

    def newcomer(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.newcomer_shape.size(ctx.layout)
        return _job(ctx, "newcomer", pods, gpus, "shared", priority_class=self.newcomer_priority)

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
        return _job(ctx, "holder", self.sizes(ctx.layout)[0], 1, "holder")

    def claimer(self, ctx: RenderContext) -> Manifest:
        return _job(ctx, "claimer", self.sizes(ctx.layout)[1], 1, "claimer")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.holder(ctx), self.claimer(ctx)]


# ------------------------------------------------------------------------------------------------- podgrouper
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
        return _job(ctx, "owned", self.pods, 1, "owned", priority_class=self.priority_class, **runtime)

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
