"""Runtime cases: a TrainJob on a namespaced copy of a ClusterTrainingRuntime the tested Trainer ships (read from
``--trainer-runtimes``, default the release's on GitHub: suites/support/shipped_runtimes.py).

What each KAI row predicts for a runtime (:func:`outcome`): a runtime without ``dependsOn`` works; one whose
replicatedJob ``dependsOn`` another fails where the row has ``depends_on_gap`` (KAI #1209), and works with the
documented ``kai.scheduler/batch-min-member`` annotation (:func:`workaround_min_member`) where the row honours it and
nothing in KAI's source stops it (:func:`workaround_gap`: on the SubGroup rows, v0.16 and v0.17, something does for
every dependsOn runtime Trainer ships, so there the runtime fails either way and the workaround case says where).
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


#: Where the workaround stops on the SubGroup rows, read in KAI's source at v0.17.0 (v0.16.0–v0.16.8 the same code;
#: upstream-facts §B10 "Why the #1209 workaround cannot work"; paths under pkg/scheduler/). The annotation does reach
#: the JobSet and caps the root minSubGroup (the PodGroup on real kind had minSubGroup 1 for deepspeed, 2 for
#: torchtune); what stops the gang is how the scheduler spends that cap:
#:
#: * While no SubGroup is placed, subgrouporder ties every SubGroup (plugins/subgrouporder/subgroup_order.go:44-50)
#:   and the session orders ties by name (framework/session_plugins.go:314); the gang phase collects tasks from the
#:   first minSubGroup SubGroups in that order only (api/podgroup_info/allocation_info.go:56-68), with no regard for
#:   whether they have pods. A replicatedJob that dependsOn another has none yet, so where it sorts first nothing is
#:   collected and the PodGroup is never placed (actions/common/allocate.go:24-27): deepspeed's and mlx's
#:   ``launcher`` sorts before ``node``. Real kind: "Attempting to allocate job … resources: <[0 0 0 0 0 0 0]>" every
#:   session, pod Unschedulable.
#: * Where the replicatedJobs created at once sort first (torchtune's initializers before ``node``) they are placed;
#:   but a replicatedJob another one waits to ``Complete`` stops counting once its pods succeed: a Succeeded pod is
#:   neither alive nor allocated (api/pod_status/pod_status.go:70-74; v0.16.2+ drop it from the cache altogether,
#:   cache/cache.go:81-107), a PodSet is ready only with minMember alive pods (subgroup_info/podset.go:114-120) and
#:   the root only with minSubGroup ready members (subgroup_info/subgroupset.go:123-131). The trainer ``node`` is
#:   then the one member with pods, below the cap of 2, and the PodGroup stays NotReady.
#:
#: No value of the annotation avoids both (1 picks ``launcher``, or after the initializers completed the empty
#: ``dataset-initializer`` [inferred]; the number of replicatedJobs is the gap itself), and a replicatedJob's own
#: template annotation only sets its leaf's minMember, ≥ 1 (pkg/podgrouper/podgrouper/plugins/jobset/
#: jobset_grouper.go:207-237). KAI issue #2120 (closed) asks for a choice of SubGroups that can be placed.
WHERE_IT_STOPS = "upstream-facts §B10, KAI v0.17.0 = v0.16.8"


class Step(Enum):
    """Which wait of a runtime case a KAI gap stops (:func:`suites.test_runtimes.run_case`)."""

    FIRST = "the replicatedJobs created at once"
    LATER = "the replicatedJobs that dependsOn them"


@dataclass(frozen=True)
class WorkaroundGap:
    """Why the workaround cannot carry a runtime through under a row, and the wait where that shows."""

    step: Step
    reason: str


def workaround_gap(row: KaiRow, rt: ShippedRuntime) -> WorkaroundGap | None:
    """Where :func:`workaround_min_member` stops ``rt`` under ``row`` (the SubGroup rows, see above), or None where
    nothing in KAI's source stops it (flat rows [inferred]; rows or runtimes without the workaround)."""
    value = workaround_min_member(row, rt)
    if value is None or row.podgroup_shape is not PodGroupShape.SUBGROUPS:
        return None
    first = sorted(rt.replicated_job_names)[:value]  # the session's order of SubGroups none of which is placed
    empty = [n for n in first if n in rt.depends_on]
    if empty:
        waits = "; ".join(f"{n} has no pod until {_awaited(rt, n)}" for n in empty)
        return WorkaroundGap(Step.FIRST, (
            f"KAI #1209 workaround cannot work: {MIN_MEMBER_ANNOTATION} {value} caps the root minSubGroup at "
            f"{value}, and KAI's scheduler fills it from the first {value} SubGroup(s) by name while none is placed "
            f"({', '.join(first)}); {waits}, so no task is collected and nothing is placed ({WHERE_IT_STOPS})"
        ))  # fmt: skip
    done = sorted(rt.awaited_complete)
    alive = len(rt.replicated_job_names) - len(done)  # replicatedJobs with pods once the awaited ones completed
    if done and alive < value:
        later = ", ".join(rt.depends_on)
        return WorkaroundGap(Step.LATER, (
            f"KAI #1209 workaround cannot finish: {', '.join(rt.up_front)} bind under root minSubGroup {value}, but "
            f"once {', '.join(done)} complete their Succeeded pods count neither alive nor allocated, so {alive} "
            f"replicatedJob(s) with pods stay below minSubGroup {value}: the PodGroup stays NotReady and {later} "
            f"never binds ({WHERE_IT_STOPS})"
        ))  # fmt: skip
    return None


def _awaited(rt: ShippedRuntime, name: str) -> str:
    return " and ".join(f"{d['name']} is {d.get('status', 'Ready')}" for d in rt.depends_on[name])


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
    """What the row predicts for ``rt``, with the reason (the issue, and why the workaround does not help; or the
    workaround)."""
    if not gap(row, rt):
        return Outcome.WORKS, ""
    value = workaround_min_member(row, rt)
    if value is None:
        return Outcome.FAILS, f"{row.depends_on_gap}; no workaround: {row.name} ignores {MIN_MEMBER_ANNOTATION}"
    stops = workaround_gap(row, rt)
    if stops is not None:
        return Outcome.FAILS, f"{row.depends_on_gap}; {stops.reason}"
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
