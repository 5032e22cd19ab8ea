"""Topology cases: a TrainJob of whole-node pods asking for required or preferred placement at the rack level of a
per-case KAI ``Topology``, sized from the racks of the cluster's GPU nodes.

**The Topology object is the case's own** (cluster-scoped, named ``kct-<hash of the namespace>``, removed with the
case), not a run-wide stack object: its levels are immutable (CRD rule ``nodeLabel structure is immutable``) and
must list only labels every GPU node carries, which a case reads from the cluster it runs on; render mode then shows
it beside the TrainJob that names it; nothing is left on clusters whose runs never select ``topology``; and a
per-case name keeps runs and xdist workers apart. KAI's own e2e does the same (``CreateRackZoneTopology`` per test,
``test/e2e/suites/allocate/topology``).

Sizes: each pod takes a whole node (the GPUs of the largest node), so a rack holds as many pods as it has such
nodes. ``fills-the-largest-rack`` = as many pods as the largest rack holds; ``more-than-any-rack`` = one more,
which the cluster still holds when it has another rack. Whole-node pods need empty nodes: every case is ``serial``,
and ``disruptive`` when it binds a gang no rack holds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import DISRUPTIVE, SERIAL, Manifest
from kai_conformance.suites.support.domains import Domains, Level, topology_levels
from kai_conformance.suites.support.expectations import expectations_for
from kai_conformance.suites.support.expectations.topology import (
    CONSTRAINT_FIELDS,
    PREFERRED_PLACEMENT_ANNOTATION,
    REQUIRED_PLACEMENT_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from kai_conformance.suites.support.shapes import GpuSize
from kai_conformance.suites.support.workloads import case_queue, case_train_job, runtime_patch


class Placement(Enum):
    REQUIRED = "required"
    PREFERRED = "preferred"
    #: No constraint at all (the control case).
    NONE = "unconstrained"

    @property
    def annotation(self) -> str | None:
        return {Placement.REQUIRED: REQUIRED_PLACEMENT_ANNOTATION,
                Placement.PREFERRED: PREFERRED_PLACEMENT_ANNOTATION}.get(self)  # fmt: skip


class Fill(Enum):
    LARGEST_DOMAIN = "fills-the-largest-rack"
    OVER_ANY_DOMAIN = "more-than-any-rack"


class Source(Enum):
    """Where the TrainJob puts the annotations (expectations.topology: root PodGroup or leaf SubGroups)."""

    TRAINJOB = "trainjob-annotations"
    REPLICATED_JOB = "replicated-job-template"


def topology_name(namespace: str) -> str:
    """A cluster-unique Topology name for one case: ``kct-<hash of the namespace>``."""
    return f"kct-{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class TopologyCase:
    placement: Placement
    fill: Fill
    source: Source = Source.TRAINJOB
    #: Name the level by its Topology alias rather than its node label (rows with ``level_aliases``).
    by_alias: bool = False
    level: Level = Level.RACK
    workload: str = "gang"

    @property
    def id(self) -> str:
        parts = [f"{self.placement.value}-{self.level.alias}", self.fill.value]
        if self.source is not Source.TRAINJOB:
            parts.append(f"via-{self.source.value}")
        if self.by_alias:
            parts.append("by-alias")
        return "-".join(parts)

    @property
    def constrained(self) -> bool:
        return self.placement is not Placement.NONE

    # ------------------------------------------------------------------------------------------------- sizes
    def domains(self, layout: GpuLayout) -> Domains:
        return Domains.of(layout, self.level)

    def size(self, layout: GpuLayout) -> tuple[int, int]:
        """(pods, GPUs per pod): whole-node pods filling the largest rack, or one more."""
        gpus = GpuSize.WHOLE_NODE.gpus(layout)
        largest = max(self.domains(layout).largest_holds(gpus), 1)
        return (largest if self.fill is Fill.LARGEST_DOMAIN else largest + 1), gpus

    def fits_cluster(self, layout: GpuLayout) -> bool:
        pods, gpus = self.size(layout)
        return layout.total > 0 and pods <= layout.pods_that_fit(gpus)

    def fewest_domains(self, layout: GpuLayout) -> int | None:
        pods, gpus = self.size(layout)
        return self.domains(layout).fewest_for(pods, gpus)

    def describe(self, layout: GpuLayout) -> str:
        pods, gpus = self.size(layout)
        return f"{pods} pod(s) × {gpus} GPU(s) ({self.fill.value}) on {self.domains(layout).describe()}"

    # ----------------------------------------------------------------------------------------------- objects
    def level_name(self, ctx: RenderContext) -> str:
        """How the constraint names the level: its node label, or its alias where the row supports aliases."""
        aliases = self.by_alias and expectations_for(ctx.combination).topology.level_aliases
        return self.level.alias if aliases else self.level.label

    def topology(self, ctx: RenderContext) -> Manifest:
        """``kai.scheduler/v1alpha1`` Topology with the levels every GPU node carries (this case's level at least)."""
        levels = topology_levels(ctx.layout) or (self.level,)
        aliases = self.by_alias and expectations_for(ctx.combination).topology.level_aliases
        return {
            "apiVersion": kinds.TOPOLOGY.api_version,
            "kind": kinds.TOPOLOGY.kind,
            "metadata": {"name": topology_name(ctx.namespace)},
            "spec": {"levels": [{"nodeLabel": lv.label, **({"alias": lv.alias} if aliases else {})} for lv in levels]},
        }

    def constraint_annotations(self, ctx: RenderContext) -> dict[str, str]:
        if not self.constrained:
            return {}
        return {TOPOLOGY_ANNOTATION: topology_name(ctx.namespace), self.placement.annotation: self.level_name(ctx)}  # type: ignore[dict-item]

    def expected_constraint(self, ctx: RenderContext) -> dict[str, str]:
        """The ``topologyConstraint`` KAI's podgrouper should write (expectations.topology.CONSTRAINT_FIELDS)."""
        return {CONSTRAINT_FIELDS[key]: value for key, value in self.constraint_annotations(ctx).items()}

    def queue(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.size(ctx.layout)
        return case_queue(ctx, self.workload, gpu_quota=pods * gpus, gpu_limit=pods * gpus)

    def trainjob(self, ctx: RenderContext) -> Manifest:
        pods, gpus = self.size(ctx.layout)
        annotations = self.constraint_annotations(ctx)
        if self.source is Source.REPLICATED_JOB and annotations:
            patch = runtime_patch(job={"annotations": annotations})
            return case_train_job(ctx, self.workload, pods, gpus, self.workload, runtime_patches=[patch])
        return case_train_job(ctx, self.workload, pods, gpus, self.workload, annotations=annotations)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        own = [self.topology(ctx)] if self.constrained else []
        return [*own, self.queue(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        """Every GPU it binds; a required gang no rack holds binds nothing."""
        pods, gpus = self.size(layout)
        binds_nothing = self.placement is Placement.REQUIRED and self.fill is Fill.OVER_ANY_DOMAIN
        return 0 if binds_nothing or not self.fits_cluster(layout) else pods * gpus

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        """Serial: whole empty nodes in given racks. A gang no rack holds that is bound takes whole nodes in more
        than one rack (every GPU of the PR-gate cluster): disruptive too."""
        binds_over = self.fill is Fill.OVER_ANY_DOMAIN and self.placement is not Placement.REQUIRED
        return (SERIAL, DISRUPTIVE) if binds_over else (SERIAL,)
