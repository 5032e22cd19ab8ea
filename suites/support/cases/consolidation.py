"""Consolidation and eviction-protection cases (facts: ``suites/support/expectations/consolidation.py``).

* :class:`ConsolidationCase`: 1-GPU, one-pod TrainJobs ("fillers") fill every GPU, then the test deletes fillers
  until every GPU node keeps the same number in use, too many for a whole-node pod; a preemptible gang of
  whole-node pods then fits only if KAI repacks fillers onto the other nodes.
* :class:`MinRuntimeCase`: a victim gang in a queue with ``preemptMinRuntime`` (in-queue preemption by a ``build``
  newcomer) or ``reclaimMinRuntime`` (reclaim by a sibling queue asking its quota).
* :class:`PreemptionDelayCase` (v0.17): a ``build`` newcomer annotated ``kai.scheduler/preemption-delay`` facing a
  preemptible victim in its queue.
* :class:`LostFillerCase` (control): two fillers bound; one is deleted by hand and never comes back.

Protection windows are stated here (:data:`PROTECTION_WINDOW`): long enough against KAI's 1 s cycle, the 1 s
resolution of API timestamps and the case's own polling; short enough for a PR gate.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, WholeCluster, held_if_fits
from kai_conformance.suites.support.cases.preemption import ReclaimCase
from kai_conformance.suites.support.expectations.consolidation import PREEMPTION_DELAY_ANNOTATION
from kai_conformance.suites.support.workloads import UNLIMITED, case_queue, case_train_job

#: The protection the cases ask for: a Go duration, as the Queue and PodGroup fields and the annotation take it.
PROTECTION_WINDOW = "30s"
#: The Helm value behind the default SchedulingShard's strategy (``templates/default-shard.yaml``).
BINPACK_SETTING = "--install always --kai-set scheduler.placementStrategy=binpack"


def consolidation_off(kube: KubeApi) -> str | None:
    """Why KAI's consolidation action is off for the suite's workloads (the reason names the setting that turns it
    on), or None when it is on or cannot be told: the SchedulingShard is chosen as the placement cases choose it
    (``placement_setting.active_placement``: the one with an empty ``partitionLabelValue``), and an unreadable or
    ambiguous one leaves KAI's default, binpack with consolidation, assumed."""
    try:
        shards = [s for s in kube.list(kinds.SCHEDULING_SHARD) if not (s.get("spec") or {}).get("partitionLabelValue")]
    except (errors.Forbidden, errors.KindNotServed):
        return None
    if len(shards) != 1:
        return None
    name, spec = shards[0]["metadata"]["name"], shards[0].get("spec") or {}
    strategy = spec.get("placementStrategy") or {}
    spread = sorted(k for k, v in strategy.items() if v == "spread")
    if spread:
        return (
            f"consolidation is off on this cluster: SchedulingShard {name} places {' and '.join(spread)} with "
            f"spread, and KAI's operator disables consolidation then (schedulingshard_types.go setDefaultActions); "
            f"run with {BINPACK_SETTING}"
        )
    if ((spec.get("actions") or {}).get("consolidation") or {}).get("enabled") is False:
        return f"consolidation is disabled in SchedulingShard {name} (spec.actions.consolidation.enabled)"
    if str((spec.get("args") or {}).get("max-consolidation-preemptees", "")) == "0":
        return f"consolidation is disabled in SchedulingShard {name} (args max-consolidation-preemptees: 0)"
    return None


@dataclass(frozen=True)
class RepackPlan:
    """``pods`` whole-node pods of ``gpus`` GPUs; ``kept`` fillers stay on each of the GPU ``nodes``."""

    pods: int
    gpus: int
    kept: int
    nodes: tuple[str, ...]

    @property
    def moved(self) -> int:
        """Fillers that must move off the nodes the gang takes."""
        return self.pods * self.kept


@dataclass(frozen=True)
class ConsolidationCase(WholeCluster):
    """Fill, fragment, then a gang that fits only after repacking. Needs GPU nodes of one size, at least 2."""

    id: str = "repack-1-gpu-pods-for-a-whole-node-gang"
    queue_role: str = "packed"

    def plan(self, layout: GpuLayout) -> RepackPlan | None:
        """Keep ``h`` fillers per node so that no node has room for a whole-node pod (``h ≥ 1``) while the fillers
        of ``pods`` nodes fit on the others' free GPUs (``pods·h ≤ (n − pods)·(g − h)``); 2 gang pods from 3 nodes."""
        nodes = layout.gpu_nodes
        if len(nodes) < 2 or len({n.gpus for n in nodes}) != 1:
            return None
        count, gpus = len(nodes), nodes[0].gpus
        pods = 2 if count >= 3 else 1
        kept = (count - pods) * gpus // count
        if kept < 1 or pods * kept > (count - pods) * (gpus - kept):
            return None
        return RepackPlan(pods, gpus, kept, tuple(n.name for n in nodes))

    def filler_names(self, layout: GpuLayout) -> list[str]:
        return [f"filler-{i}" for i in range(sum(n.gpus for n in layout.gpu_nodes))]

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, self.queue_role, gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def fillers(self, ctx: RenderContext) -> list[Manifest]:
        return [case_train_job(ctx, name, 1, 1, self.queue_role) for name in self.filler_names(ctx.layout)]

    def gang(self, ctx: RenderContext) -> Manifest:
        plan = self.plan(ctx.layout)
        pods, gpus = (plan.pods, plan.gpus) if plan else (1, max(ctx.layout.max_per_node, 1))
        return case_train_job(ctx, "gang", pods, gpus, self.queue_role)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), *self.fillers(ctx), self.gang(ctx)]


@dataclass(frozen=True)
class MinRuntimeCase(WholeCluster):
    """A victim gang protected by its queue's min-runtime for ``action`` (``preempt`` or ``reclaim``). ``slow``: the
    same protection by the other action, left to the full run (each case holds a 30 s window)."""

    action: str
    slow: bool = False

    @property
    def id(self) -> str:
        return f"{self.action}-min-runtime-{PROTECTION_WINDOW}"

    @property
    def field(self) -> str:
        return f"{self.action}MinRuntime"

    @property
    def victim_queue_role(self) -> str:
        return "shared" if self.action == "preempt" else "holder"

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        if self.action == "preempt":
            queues = [case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)]
        else:
            queues = ReclaimCase(borrowing=True).queues(ctx)
        for queue in queues:
            if queue["spec"]["displayName"].endswith(f"/{self.victim_queue_role}"):
                queue["spec"][self.field] = PROTECTION_WINDOW
        return queues

    def sizes(self, layout: GpuLayout) -> tuple[int, int]:
        """1-GPU pods of the victim and of the newcomer."""
        if self.action == "preempt":
            return layout.total, min(2, layout.total)
        return ReclaimCase(borrowing=True).sizes(layout)

    def victim(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "victim", self.sizes(ctx.layout)[0], 1, self.victim_queue_role)

    def newcomer(self, ctx: RenderContext) -> Manifest:
        pods = self.sizes(ctx.layout)[1]
        if self.action == "preempt":
            return case_train_job(ctx, "newcomer", pods, 1, "shared", priority_class="build")
        return case_train_job(ctx, "newcomer", pods, 1, "claimer")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.victim(ctx), self.newcomer(ctx)]


@dataclass(frozen=True)
class PreemptionDelayCase(WholeCluster):
    """A preemptible victim fills its queue; a ``build`` newcomer with a preemption delay arrives."""

    id: str = f"preemption-delay-{PROTECTION_WINDOW}"

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def victim(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "victim", ctx.layout.total, 1, "shared")

    def newcomer(self, ctx: RenderContext) -> Manifest:
        # On the TrainJob: skip-top-owner copies its annotations onto the JobSet the podgrouper reads (KAI §4.2).
        return case_train_job(
            ctx, "newcomer", min(2, ctx.layout.total), 1, "shared", priority_class="build",
            annotations={PREEMPTION_DELAY_ANNOTATION: PROTECTION_WINDOW},
        )  # fmt: skip

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.victim(ctx), self.newcomer(ctx)]


@dataclass(frozen=True)
class LostFillerCase(SideBySide):
    """Two 1-GPU fillers in their own queue (quota 2); the test deletes one: a workload that ran and is not bound
    again, as a consolidation that lost a moved pod would leave it."""

    id: str = "a-filler-deleted-by-hand"
    fillers: int = 2
    queue_role: str = "fillers"

    def names(self) -> list[str]:
        return [f"filler-{i}" for i in range(self.fillers)]

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, self.queue_role, gpu_quota=self.fillers, gpu_limit=self.fillers)

    def trainjobs(self, ctx: RenderContext) -> list[Manifest]:
        return [case_train_job(ctx, name, 1, 1, self.queue_role) for name in self.names()]

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), *self.trainjobs(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.fillers, layout)
