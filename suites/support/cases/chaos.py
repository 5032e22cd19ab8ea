"""Chaos mixes as data: queues, workloads with their arrivals and endings, and a schedule of component restarts
(suites/test_chaos.py).

A :class:`ChaosMix` is what a seed draws (suites/support/chaos/mix.py), what a reproducer file holds and what a replay
runs: plain values, times in seconds from the start of the mix (scaled by ``--timeout-scale`` when it runs), so the
same mix means the same thing on kind, on the real controllers and on the simulated ones. It resolves into the
:class:`~suites.support.cases.scale.BurstPlan` the watch ledger judges, and into the manifests the run applies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import DEFAULT_SCHEDULER_RUNTIME, lifetime_env
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import SHARED_WORKERS, Manifest, WholeCluster
from kai_conformance.suites.support.cases.lifecycle import restart_runtime
from kai_conformance.suites.support.cases.scale import BurstPlan, PlannedGang, PlannedQueue, whole_node, whole_nodes
from kai_conformance.suites.support.cases.sharing import fractional_train_job
from kai_conformance.suites.support.expectations import PRIORITY_CLASSES
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    UNLIMITED,
    case_queue,
    case_train_job,
    queue_name,
    train_job,
)

#: How a workload ends, if it does: it runs until the mix is over (``runs``), its pods exit 0 (``completes``), its pod 0
#: exits 1 (``fails``: on :data:`FAILS_RUNTIME` the JobSet restarts the gang whole once, then fails, and the TrainJob
#: with it), the suite deletes the TrainJob (``deleted``) or suspends it (``suspended``, resumed ``resume_after``
#: seconds later when that is set).
ENDINGS = ("runs", "completes", "fails", "deleted", "suspended")
#: The runtime of ``fails`` workloads (the lifecycle area's: the Job fails at its first failed pod, the JobSet
#: restarts :data:`FAILS_RESTARTS` times). On the suite's own runtime the Job re-creates a failed pod after a backoff
#: that doubles (10 s, 20 s, ...) for ever: the gang never ends, and on the real controllers a mix waited out its
#: settle budget on it.
FAILS_RUNTIME = "chaos-fails"
FAILS_RESTARTS = 1


@dataclass(frozen=True)
class ChaosQueue:
    """A leaf queue of the mix (under the suite's parent queue): GPU quota and limit (-1: none) and the weight of its
    share of what is over quota."""

    role: str
    quota: int
    limit: int = UNLIMITED
    weight: int = 1


@dataclass(frozen=True)
class ChaosWorkload:
    """One TrainJob: ``pods`` pods of ``gpus`` GPUs each in queue ``queue`` at ``priority``, submitted ``arrive``
    seconds into the mix; it ends as ``ending`` says ``after`` seconds after it arrived (for ``completes`` and
    ``fails`` the pods' own lifetime, counted from their start). A fractional workload asks ``fraction`` of one GPU
    per pod (``gpu-fraction``, as the sharing area asks) and no whole GPU (``gpus`` 0)."""

    name: str
    pods: int
    gpus: int
    queue: str
    priority: str = "train"
    arrive: float = 0.0
    ending: str = "runs"
    after: float = 0.0
    resume_after: float | None = None
    #: ``default``: run by the default scheduler (the control), not KAI.
    scheduler: str = "kai"
    fraction: float = 0.0

    @property
    def gpu_amount(self) -> float:
        """GPUs per pod as KAI counts them against quotas and limits: the fraction for a fractional pod."""
        return self.fraction or float(self.gpus)

    @property
    def preemptible(self) -> bool:
        return PRIORITY_CLASSES.get(self.priority, (0, True))[1]

    @property
    def acted_at(self) -> float | None:
        """When the suite acts on it (deletes or suspends it), if it does."""
        return self.arrive + self.after if self.ending in ("deleted", "suspended") else None

    @property
    def resumed_at(self) -> float | None:
        acted = self.acted_at
        return acted + self.resume_after if acted is not None and self.resume_after is not None else None

    def describe(self) -> str:
        ending = "" if self.ending == "runs" else f", {self.ending} after {self.after:g}s"
        if self.resume_after is not None:
            ending += f", resumed {self.resume_after:g}s later"
        return (
            f"{self.name} ({self.pods}×{self.gpu_amount:g} GPU, {self.queue}, {self.priority}, at {self.arrive:g}s"
            f"{ending})"
        )


@dataclass(frozen=True)
class Fault:
    """A restart of ``component`` (suites/support/chaos/faults.py names them) ``at`` seconds into the mix."""

    component: str
    at: float

    def describe(self) -> str:
        return f"restart {self.component} at {self.at:g}s"


@dataclass(frozen=True)
class ChaosMix:
    queues: tuple[ChaosQueue, ...]
    workloads: tuple[ChaosWorkload, ...]
    faults: tuple[Fault, ...] = ()
    cluster_gpus: int = 0
    #: The seed that drew it (None for a mix written by hand or shrunk from another).
    seed: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def fractional(self) -> bool:
        return any(w.fraction for w in self.workloads)

    @property
    def horizon(self) -> float:
        """When the last planned step falls (arrival, action, resume or fault)."""
        moments = [0.0]
        for w in self.workloads:
            moments += [w.arrive, *(t for t in (w.acted_at, w.resumed_at) if t is not None)]
        return max(moments + [f.at for f in self.faults])

    def plan(self) -> BurstPlan:
        """The ledger's view: each workload a gang, each queue with its bounds."""
        gangs = tuple(PlannedGang(w.name, w.pods, w.gpus, w.queue, w.priority) for w in self.workloads)
        queues = tuple(PlannedQueue(q.role, q.quota, q.limit) for q in self.queues)
        return BurstPlan(gangs, queues, self.cluster_gpus)

    def workload(self, name: str) -> ChaosWorkload:
        return next(w for w in self.workloads if w.name == name)

    def without(self, workloads: frozenset[str] = frozenset(), faults: frozenset[int] = frozenset()) -> ChaosMix:
        """The mix less the named workloads and the faults at those indexes (what shrinking tries)."""
        kept = tuple(w for w in self.workloads if w.name not in workloads)
        used = {w.queue for w in kept}
        return ChaosMix(
            tuple(q for q in self.queues if q.role in used),
            kept,
            tuple(f for i, f in enumerate(self.faults) if i not in faults),
            self.cluster_gpus,
            None,
            self.notes,
        )

    def unshared(self, workloads: frozenset[str]) -> ChaosMix:
        """The mix with the named fractional workloads asking one whole GPU per pod instead (what shrinking tries:
        a violation that does not need GPU sharing is shown without it)."""
        changed = tuple(dataclasses.replace(w, gpus=1, fraction=0.0) if w.name in workloads and w.fraction else w
                        for w in self.workloads)  # fmt: skip
        return dataclasses.replace(self, workloads=changed, seed=None)

    def describe(self) -> str:
        gpus = sum(w.pods * w.gpu_amount for w in self.workloads)
        ends = {e: sum(1 for w in self.workloads if w.ending == e) for e in ENDINGS}
        ending = ", ".join(f"{n} {e}" for e, n in ends.items() if n and e != "runs")
        restarts = ", ".join(f.describe() for f in self.faults) or "no restart"
        fractional = sum(1 for w in self.workloads if w.fraction)
        shared = f" ({fractional} fractional)" if fractional else ""
        return (
            f"{len(self.workloads)} TrainJobs{shared} in {len(self.queues)} queue(s) asking for {gpus:g} GPUs of "
            f"{self.cluster_gpus}{'; ' + ending if ending else ''}; {restarts}"
        )

    # ------------------------------------------------------------------------------------------- manifests
    def runtime_manifests(self, ctx: RenderContext) -> list[Manifest]:
        """The namespaced runtime of the mix's ``fails`` workloads, if it has any."""
        fails = any(w.ending == "fails" and w.scheduler != "default" for w in self.workloads)
        return [restart_runtime(ctx, FAILS_RUNTIME, FAILS_RESTARTS)] if fails else []

    def queue_manifests(self, ctx: RenderContext) -> list[Manifest]:
        made = []
        for q in self.queues:
            obj = case_queue(ctx, q.role, gpu_quota=q.quota, gpu_limit=q.limit)
            obj["spec"]["resources"]["gpu"]["overQuotaWeight"] = q.weight
            made.append(obj)
        return made

    def trainjob(self, ctx: RenderContext, workload: ChaosWorkload, time_scale: float = 1.0) -> Manifest:
        """The TrainJob of ``workload``; its pods' own lifetime (``completes``, ``fails``) is scaled like the mix's
        times (whole seconds, at least 1: the workload's environment takes seconds)."""
        env = None
        lifetime = max(1, round(workload.after * time_scale))
        if workload.ending == "completes":
            env = lifetime_env(lifetime)
        elif workload.ending == "fails":
            env = lifetime_env(lifetime, exit_code=1, exit_index=0)
        if workload.scheduler == "default":
            return train_job(workload.name, num_nodes=workload.pods, gpus=workload.gpus, env=env,
                             runtime=DEFAULT_SCHEDULER_RUNTIME, queue=queue_name(ctx.namespace, workload.queue))  # fmt: skip
        patches = None
        if workload.fraction:
            # The sharing area's way of asking for a fraction (its runtimePatches entry puts gpu-fraction on the
            # pods), so a mix's fractional pods are the ones the sharing cases qualify.
            shared = fractional_train_job(ctx, workload.name, workload.pods, f"{workload.fraction:g}", workload.queue)
            patches = shared["spec"]["runtimePatches"]
        runtime = (
            {"runtime": FAILS_RUNTIME, "runtime_kind": NAMESPACED_RUNTIME_KIND} if workload.ending == "fails" else {}
        )
        return case_train_job(ctx, workload.name, workload.pods, workload.gpus, workload.queue,
                              priority_class=workload.priority, env=env, runtime_patches=patches, **runtime)  # fmt: skip

    # ------------------------------------------------------------------------------------------------ data
    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ChaosMix:
        """The inverse of :meth:`to_data`; a key this version does not know is an error (a reproducer must mean
        exactly what it meant when it was written)."""
        _only(cls, data, "mix")
        return cls(
            queues=tuple(ChaosQueue(**_only(ChaosQueue, q, "queue")) for q in data.get("queues") or ()),
            workloads=tuple(ChaosWorkload(**_only(ChaosWorkload, w, "workload")) for w in data.get("workloads") or ()),
            faults=tuple(Fault(**_only(Fault, f, "fault")) for f in data.get("faults") or ()),
            cluster_gpus=int(data.get("cluster_gpus") or 0),
            seed=data.get("seed"),
            notes=tuple(data.get("notes") or ()),
        )


def _only(cls: type, data: dict[str, Any], what: str) -> dict[str, Any]:
    unknown = set(data) - {f.name for f in fields(cls)}
    if unknown:
        raise ValueError(f"unknown field(s) of a chaos {what}: {', '.join(sorted(unknown))}")
    return data


# ------------------------------------------------------------------------------------------------------ the cases
CHAOS = pytest.mark.chaos
CONTROL = pytest.mark.control


@dataclass(frozen=True)
class RandomMixes(WholeCluster):
    """Mixes drawn from the run's seed (suites/support/chaos/mix.py), each restarting every chosen component: what
    it creates is drawn at run time, so render mode shows only its namespace. Serial, disruptive, never in a slice:
    a restart reaches every workload of the cluster."""

    horizon: int = 60
    max_workloads: int = 10

    @property
    def id(self) -> str:
        return "random-mixes-restarting-components"

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (CHAOS, SHARED_WORKERS, *super().marks())

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return []


@dataclass(frozen=True)
class DefaultSchedulerUnderChaos(WholeCluster):
    """Control: a gang of whole-node pods, one more than the nodes that hold one, run by the default scheduler while
    ``component`` restarts ``restart_at`` seconds in: it is bound partially, and ``gang-never-partial`` fires."""

    restart_at: float = 5.0

    @property
    def id(self) -> str:
        return "over-cluster-whole-node-gang-default-scheduler-while-restarting"

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (CONTROL, CHAOS, SHARED_WORKERS, *super().marks())

    def mix(self, layout: GpuLayout, component: str = "scheduler") -> ChaosMix:
        gang = ChaosWorkload("w00", whole_nodes(layout) + 1, whole_node(layout), "q0", scheduler="default")
        return ChaosMix((ChaosQueue("q0", 0),), (gang,), (Fault(component, self.restart_at),), layout.total)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        mix = self.mix(ctx.layout)
        return mix.queue_manifests(ctx) + [mix.trainjob(ctx, w) for w in mix.workloads]
