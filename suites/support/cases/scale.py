"""Scale cases: bursts of TrainJobs sized from the cluster's GPU layout (kwok fake nodes included), all submitted at
once and watched over the whole run (suites/test_scale.py).

A case is symbolic (a fill fraction, an overload factor, queue quotas and limits as fractions of the cluster) and
resolves into a :class:`BurstPlan` of concrete gangs only when it runs or renders, like every other case
(docs/suites.md, "Anatomy of a case"). Plans are deterministic: the same layout gives the same gangs, so a run on
``--topology scale-500`` is comparable with the last one (``reports compare``).

**The mix.** Gangs of :data:`GANG_SIZES` pods, each pod either one GPU or a whole node (the GPUs of the largest node),
added round by round (1, 2, 4, 8, 16 pods of each pod size per round) while they fit the part of the burst they
belong to, so every size appears and small gangs are the most numerous, as on a shared training cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import DEFAULT_SCHEDULER_RUNTIME
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import SHARED_WORKERS, Manifest, WholeCluster
from kai_conformance.suites.support.expectations import DEFAULT_PRIORITY_CLASS, PRIORITY_CLASSES
from kai_conformance.suites.support.workloads import UNLIMITED, case_queue, case_train_job, queue_name, train_job

SCALE = pytest.mark.scale
CONTROL = pytest.mark.control
GANG_SIZES = (1, 2, 4, 8, 16)
#: The preemptible and the non-preemptible priority class of the overload burst (KAI §3.3: < 100 is preemptible).
PREEMPTIBLE = DEFAULT_PRIORITY_CLASS
NON_PREEMPTIBLE = "build"


def percent(value: int, share: int) -> int:
    """``share`` % of ``value``, rounded down (GPUs are whole)."""
    return value * share // 100


@dataclass(frozen=True)
class PlannedQueue:
    """A leaf queue of the burst (under the suite's parent queue): GPU quota and limit, -1 meaning none."""

    role: str
    quota: int
    limit: int = UNLIMITED


@dataclass(frozen=True)
class PlannedGang:
    """One TrainJob of the burst: ``pods`` pods of ``gpus`` GPUs each, in queue ``queue`` at ``priority``."""

    name: str
    pods: int
    gpus: int
    queue: str
    priority: str = PREEMPTIBLE

    @property
    def demand(self) -> int:
        return self.pods * self.gpus

    @property
    def preemptible(self) -> bool:
        return PRIORITY_CLASSES.get(self.priority, (0, True))[1]

    def describe(self) -> str:
        return f"{self.name} ({self.pods}×{self.gpus} GPU, {self.queue}, {self.priority})"


@dataclass(frozen=True)
class BurstPlan:
    gangs: tuple[PlannedGang, ...]
    queues: tuple[PlannedQueue, ...]
    cluster_gpus: int

    @property
    def pods(self) -> int:
        return sum(g.pods for g in self.gangs)

    @property
    def gpus(self) -> int:
        return sum(g.demand for g in self.gangs)

    def queue(self, role: str) -> PlannedQueue:
        return next(q for q in self.queues if q.role == role)

    def describe(self) -> str:
        sizes = sorted({g.pods for g in self.gangs})
        per_pod = sorted({g.gpus for g in self.gangs})
        share = 100 * self.gpus / self.cluster_gpus if self.cluster_gpus else 0.0
        return (
            f"{len(self.gangs)} TrainJobs, {self.pods:,} pods, {self.gpus:,} GPUs ({share:.0f}% of the cluster's "
            f"{self.cluster_gpus:,}; gangs of {'/'.join(map(str, sizes))} pods of {'/'.join(map(str, per_pod))} GPU)"
        )


def whole_node(layout: GpuLayout) -> int:
    """GPUs of a whole-node pod: those of the largest node."""
    return max(layout.max_per_node, 1)


def whole_nodes(layout: GpuLayout) -> int:
    """Nodes a whole-node pod fits on."""
    return sum(1 for node in layout.gpu_nodes if node.gpus >= whole_node(layout))


def mix(one_gpu: int, whole: int, whole_gpus: int) -> list[tuple[int, int]]:
    """(pods, GPUs per pod) of the gangs filling ``one_gpu`` GPUs with 1-GPU pods and ``whole`` GPUs with pods of
    ``whole_gpus``: round by round, each gang size of each pod size while it still fits its budget."""
    budgets = {1: one_gpu} if whole_gpus == 1 else {1: one_gpu, whole_gpus: whole}
    if whole_gpus == 1:
        budgets[1] += whole
    shapes: list[tuple[int, int]] = []
    added = True
    while added:
        added = False
        for pods in GANG_SIZES:
            for gpus, left in budgets.items():
                if 0 < pods * gpus <= left:
                    shapes.append((pods, gpus))
                    budgets[gpus] -= pods * gpus
                    added = True
    return shapes


def split(gpus: int, layout: GpuLayout, *, whole_pod_cap: int | None = None) -> list[tuple[int, int]]:
    """``gpus`` as a mix of gangs, half of them (at most) in whole-node pods, at most ``whole_pod_cap`` of those."""
    width = whole_node(layout)
    whole_pods = gpus // 2 // width if width > 1 else 0
    if whole_pod_cap is not None:
        whole_pods = min(whole_pods, whole_pod_cap)
    return mix(gpus - whole_pods * width, whole_pods * width, width)


def interleave(parts: list[list[tuple[int, int, str, str]]]) -> list[tuple[int, int, str, str]]:
    """One gang of each part in turn: the submission order mixes queues and priorities."""
    merged = []
    for index in range(max((len(p) for p in parts), default=0)):
        merged += [part[index] for part in parts if index < len(part)]
    return merged


def named(gangs: list[tuple[int, int, str, str]]) -> tuple[PlannedGang, ...]:
    return tuple(PlannedGang(f"g{i:04d}", pods, gpus, queue, priority) for i, (pods, gpus, queue, priority)
                 in enumerate(gangs))  # fmt: skip


# ------------------------------------------------------------------------------------------------------ the cases
class BurstCase(WholeCluster):
    """What every burst shares: its plan from the layout, its queues and its TrainJobs (in submission order). Serial
    and disruptive: a burst fills the cluster. Never in a slice: the fake nodes a scale run adds belong to the shared
    node pool, and a burst seated in a slice judged its 3 kind workers' GPUs instead of the cluster's (on real kind,
    300 fake nodes, 2026-11-27)."""

    def plan(self, layout: GpuLayout) -> BurstPlan:
        raise NotImplementedError

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (SCALE, SHARED_WORKERS, *super().marks())

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        return [case_queue(ctx, q.role, gpu_quota=q.quota, gpu_limit=q.limit) for q in self.plan(ctx.layout).queues]

    def trainjobs(self, ctx: RenderContext) -> list[Manifest]:
        return [self.trainjob(ctx, gang) for gang in self.plan(ctx.layout).gangs]

    def trainjob(self, ctx: RenderContext, gang: PlannedGang) -> Manifest:
        return case_train_job(ctx, gang.name, gang.pods, gang.gpus, gang.queue, priority_class=gang.priority)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return self.queues(ctx) + self.trainjobs(ctx)


@dataclass(frozen=True)
class FillingBurst(BurstCase):
    """Case (a): gangs of every size, 1-GPU and whole-node pods, asking for ``fill_percent`` % of the cluster's GPUs,
    all submitted at once into one queue whose quota is the burst (``train``, preemptible).

    Whole-node pods take at most half the burst and never more than there are nodes they fit on, so the whole burst
    fits the empty cluster: the whole-node pods each take a node of their own and the 1-GPU pods fit the GPUs the
    others leave (``fill_percent`` < 100 leaves the headroom KAI's bin-packing needs to keep whole nodes empty for them).
    """

    fill_percent: int = 75

    @property
    def id(self) -> str:
        return f"mixed-gangs-fill-{self.fill_percent}-percent"

    def plan(self, layout: GpuLayout) -> BurstPlan:
        target = percent(layout.total, self.fill_percent)
        shapes = split(target, layout, whole_pod_cap=whole_nodes(layout))
        gangs = named([(pods, gpus, "burst", PREEMPTIBLE) for pods, gpus in shapes])
        demand = sum(g.demand for g in gangs)
        return BurstPlan(gangs, (PlannedQueue("burst", quota=demand),), layout.total)


@dataclass(frozen=True)
class OverloadBurst(BurstCase):
    """Case (b): ``overload_percent`` % of the cluster's GPUs asked for at once by two sibling queues, each with a GPU
    quota of ``quota_percent`` % and a limit of ``limit_percent`` % of the cluster; in each queue non-preemptible
    (``build``) gangs ask for ``non_preemptible_of_quota`` % of the queue's quota (KAI runs non-preemptible workloads
    only within quota, so some of them must wait) and preemptible (``train``) gangs for the rest."""

    overload_percent: int = 150
    quota_percent: int = 25
    limit_percent: int = 60
    non_preemptible_of_quota: int = 150

    @property
    def id(self) -> str:
        return f"overload-{self.overload_percent}-percent-two-limited-queues"

    def plan(self, layout: GpuLayout) -> BurstPlan:
        quota, limit = percent(layout.total, self.quota_percent), percent(layout.total, self.limit_percent)
        queues = (PlannedQueue("first", quota, limit), PlannedQueue("second", quota, limit))
        per_queue = percent(layout.total, self.overload_percent) // len(queues)
        parts = []
        for queue in queues:
            build = min(percent(queue.quota, self.non_preemptible_of_quota), per_queue)
            # A non-preemptible gang larger than its queue's quota could never run: leave such shapes out.
            non_preemptible = [(p, g) for p, g in split(build, layout) if p * g <= queue.quota]
            parts.append([(p, g, queue.role, NON_PREEMPTIBLE) for p, g in non_preemptible])
            parts.append([(p, g, queue.role, PREEMPTIBLE) for p, g in split(per_queue - build, layout)])
        return BurstPlan(named(interleave(parts)), queues, layout.total)


@dataclass(frozen=True)
class DefaultSchedulerBurst(BurstCase):
    """Control: a gang of whole-node pods, one more than there are nodes to hold them, run by the default scheduler
    (no KAI, so no gang and no queue) and labelled for a queue whose limit is half the cluster. The default
    scheduler binds a pod on every node it fits and leaves the last one pending: the gang stays partial, and the
    queue's bound GPUs pass its limit."""

    @property
    def id(self) -> str:
        return "over-cluster-whole-node-gang-default-scheduler"

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (CONTROL, *super().marks())

    def plan(self, layout: GpuLayout) -> BurstPlan:
        gangs = (PlannedGang("g0000", whole_nodes(layout) + 1, whole_node(layout), "limited"),)
        return BurstPlan(gangs, (PlannedQueue("limited", quota=0, limit=layout.total // 2),), layout.total)

    def trainjob(self, ctx: RenderContext, gang: PlannedGang) -> Manifest:
        return train_job(gang.name, num_nodes=gang.pods, gpus=gang.gpus, runtime=DEFAULT_SCHEDULER_RUNTIME,
                         queue=queue_name(ctx.namespace, gang.queue))  # fmt: skip
