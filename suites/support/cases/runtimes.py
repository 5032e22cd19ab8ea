"""Runtime cases: a TrainJob on a namespaced copy of a ClusterTrainingRuntime the tested Trainer ships (read from
``--trainer-runtimes``, default the release's on GitHub: suites/support/shipped_runtimes.py).

What each KAI row predicts for a runtime (:func:`outcome`): a runtime without ``dependsOn`` works; one whose
replicatedJob ``dependsOn`` another fails where the row has ``depends_on_gap`` (KAI #1209) and works with the
documented ``kai.scheduler/batch-min-member`` annotation where the row honours it (:func:`workaround_min_member`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import Manifest, SideBySide, held_if_fits
from kai_conformance.suites.support.expectations import (
    MIN_MEMBER_ANNOTATION,
    KaiRow,
    PodGroupShape,
    expectations_for,
)
from kai_conformance.suites.support.shipped_runtimes import ShippedRuntime, case_copy, find, runtime, source_of
from kai_conformance.suites.support.workloads import NAMESPACED_RUNTIME_KIND, case_queue, case_train_job, queue_name

WORKLOAD = "shipped"
#: Where KAI documents the annotation: docs/batch/README.md (v0.16+: it caps the JobSet PodGroup's root minSubGroup;
#: v0.14.1–v0.15: the flat minMember), CHANGELOG v0.16.0 (#1617); named as the #1209 workaround in kai-scheduler.md.
WORKAROUND_SOURCE = "KAI docs/batch/README.md; kai-scheduler.md (#1209)"


#: What a real cluster showed of the workaround: on real kind, KAI v0.17.0 with Trainer v2.3.0 (2026-11-24), the
#: deepspeed, mlx and torchtune copies carrying the annotation still bound nothing within the schedule budget
#: (their pods "Unable to schedule pod"). Not established: whether KAI leaves the dependent replicatedJobs in the
#: gang despite the cap, or the copies' own resource requests keep them off the nodes. v0.16 has the same JobSet
#: grouper (docs/research/upstream-facts.md §B10). A strict xfail on those rows until the cause is known: the day
#: the workaround binds, the case XPASSes and the row is to be changed.
WORKAROUND_NOT_SEEN = (
    "KAI #1209 workaround not seen to work: on real kind (KAI v0.17.0, Trainer v2.3.0, 2026-11-24) the copy with "
    "kai.scheduler/batch-min-member bound nothing; cause not established (KAI, or the copy's own requests)"
)


def workaround_unproven(row: KaiRow) -> bool:
    """The rows whose JobSet grouper the workaround failed on, on a real cluster (:data:`WORKAROUND_NOT_SEEN`)."""
    return row.podgroup_shape is PodGroupShape.SUBGROUPS


class Outcome(Enum):
    WORKS = "works"
    FAILS = "fails"
    WORKAROUND = "works with workaround"


def gap(row: KaiRow, rt: ShippedRuntime) -> str | None:
    """The known upstream gap that stops ``rt`` as shipped under ``row``, if any."""
    return row.depends_on_gap if rt.depends_on else None


def workaround_min_member(row: KaiRow, rt: ShippedRuntime) -> int | None:
    """The ``kai.scheduler/batch-min-member`` value that keeps the gang to the replicatedJobs JobSet creates at once:
    v0.16+ the number of those replicatedJobs (it caps the root ``minSubGroup``), flat rows their pods. None where
    the row does not honour the annotation (v0.13) or ``rt`` has no ``dependsOn``."""
    if not rt.depends_on or not row.min_member_annotation:
        return None
    if row.podgroup_shape is PodGroupShape.SUBGROUPS:
        return len(rt.up_front)
    return rt.pods_of(rt.up_front)


def outcome(row: KaiRow, rt: ShippedRuntime) -> tuple[Outcome, str]:
    """What the row predicts for ``rt``, with the reason (the issue, or the workaround)."""
    if not gap(row, rt):
        return Outcome.WORKS, ""
    value = workaround_min_member(row, rt)
    if value is None:
        return Outcome.FAILS, f"{row.depends_on_gap}; no workaround: {row.name} ignores {MIN_MEMBER_ANNOTATION}"
    return Outcome.WORKAROUND, f'{MIN_MEMBER_ANNOTATION}: "{value}" on the TrainJob ({WORKAROUND_SOURCE})'


@dataclass(frozen=True)
class RuntimeCase(SideBySide):
    """A TrainJob ``shipped`` on the case's copy of the shipped runtime ``name``, routed to the case's queue, with
    one GPU per node (``workaround``: with the ``batch-min-member`` annotation of :func:`workaround_min_member`)."""

    name: str
    workaround: bool = False

    @property
    def id(self) -> str:
        return self.name

    def shipped(self, ctx: RenderContext) -> ShippedRuntime:
        """The runtime as the case's source ships it (:func:`~suites.support.shipped_runtimes.source_of`); KeyError
        when it ships none of that name, RuntimesUnavailable when it cannot be read."""
        source = source_of(ctx)
        if source is None:
            raise KeyError(f"no source of Trainer's runtimes in render mode without --trainer-runtimes ({self.name})")
        return runtime(source, self.name)

    def found(self, ctx: RenderContext) -> ShippedRuntime | None:
        """The runtime, or None when the source ships none of that name (the case skips) or there is no source
        (render mode without --trainer-runtimes)."""
        source = source_of(ctx)
        return None if source is None else find(source, self.name)

    def min_member(self, ctx: RenderContext) -> int | None:
        """The annotation the TrainJob carries: the workaround's, or on rows without a default gang (v0.15) the
        pods of the replicatedJobs created at once (the dependent ones are surplus there, upstream-facts §B10)."""
        row, rt = expectations_for(ctx.combination).kai, self.shipped(ctx)
        if self.workaround:
            return workaround_min_member(row, rt)
        return None if row.gang_by_default else rt.pods_of(rt.up_front)

    def expected_queue(self, ctx: RenderContext) -> str:
        return queue_name(ctx.namespace, WORKLOAD)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        """Nothing when the source does not ship the runtime (the case skips)."""
        rt = self.found(ctx)
        if rt is None:
            return []
        pods = rt.pods_of(rt.replicated_job_names)
        queue = case_queue(ctx, WORKLOAD, gpu_quota=pods, gpu_limit=pods)
        value = self.min_member(ctx)
        job = case_train_job(
            ctx, WORKLOAD, rt.num_nodes, 1, WORKLOAD, runtime=rt.name, runtime_kind=NAMESPACED_RUNTIME_KIND,
            annotations={MIN_MEMBER_ANNOTATION: str(value)} if value is not None else {},
        )  # fmt: skip
        if value is None:  # case_train_job's own gang annotation counts numNodes, not the runtime's pods
            job["metadata"].get("annotations", {}).pop(MIN_MEMBER_ANNOTATION, None)
            if not job["metadata"].get("annotations"):
                job["metadata"].pop("annotations", None)
        return [queue, case_copy(rt, ctx.namespace, ctx.workload_image), job]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(2, layout)  # the trainer pods (2 nodes; an MPI launcher and node) hold a GPU each
