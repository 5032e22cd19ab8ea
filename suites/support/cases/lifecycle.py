"""Lifecycle cases: gangs whose workload ends (on its own, by failing, by suspension or deletion), and what follows.

A workload's end is written into its TrainJob's ``spec.trainer.env`` (:func:`clusters.suite_stack.lifetime_env`):
the suite's own workload command reads it, so the cases need no image of their own, and the simulated kubelet of
the self-tests reads the same variables. Restarts and failures need Jobs that fail at their first failed pod
(``backoffLimit: 0`` instead of the suite's per-index tolerance) and, for restarts, a JobSet ``failurePolicy``:
both come from a per-case TrainingRuntime. Every case follows the render contract of :mod:`suites.support.cases`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import lifetime_env, replicated_job
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.cases.contract import (
    DISRUPTIVE,
    SERIAL,
    Manifest,
    SideBySide,
    WholeCluster,
    held_if_fits,
)
from kai_conformance.suites.support.expectations import expectations_for
from kai_conformance.suites.support.expectations.lifecycle import DEFAULT_STALENESS_GRACE, STALENESS_GRACE_ANNOTATION
from kai_conformance.suites.support.workloads import (
    NAMESPACED_RUNTIME_KIND,
    UNLIMITED,
    case_queue,
    case_runtime,
    case_train_job,
    metadata,
    queue_name,
)

#: Seconds a workload runs before it exits on its own: long enough that the suite sees its gang bound whole and
#: running first (a gang binds within a few scheduling periods; a pod on kind starts within about a second).
RUN_SECONDS = 15
#: Exit code of the pod that fails its gang.
FAILURE_EXIT_CODE = 1


def restart_runtime(ctx: RenderContext, name: str, max_restarts: int | None) -> Manifest:
    """A runtime whose Job fails at its first failed pod (``backoffLimit: 0``; the Job controller then terminates
    the other pods), with a JobSet failure policy of ``max_restarts`` restarts (None: no failure policy)."""
    node = replicated_job("node", ctx.workload_image, backoff_limit_per_index=None, backoff_limit=0)
    policy = None if max_restarts is None else {"maxRestarts": max_restarts}
    return case_runtime(ctx, name, replicated_jobs=[node], failure_policy=policy)


@dataclass(frozen=True)
class CompletionCase(WholeCluster):
    """A gang of every GPU (``holder``, its own queue with the whole cluster as quota and limit) whose pods exit 0
    after ``run_seconds``, and a gang of two pods (``waiting``, a queue of quota 0) that cannot fit while it runs.
    Both are ``train``; the waiting queue is owed nothing, so KAI may reclaim nothing for it: only the end of the
    holder's workload frees GPUs."""

    id: str = "full-cluster-gang-completes-and-a-waiting-gang-takes-its-gpus"
    run_seconds: int = RUN_SECONDS
    holder: str = "first"
    waiting: str = "waiting"

    def sizes(self, layout: GpuLayout) -> tuple[int, int]:
        """1-GPU pods of the holder (every GPU) and of the waiting gang."""
        return layout.pods_that_fit(1), 2

    def queue_of(self, ctx: RenderContext, role: str) -> str:
        return queue_name(ctx.namespace, role)

    def queues(self, ctx: RenderContext) -> list[Manifest]:
        total = ctx.layout.total
        return [
            case_queue(ctx, self.holder, gpu_quota=total, gpu_limit=total),
            case_queue(ctx, self.waiting, gpu_quota=0, gpu_limit=UNLIMITED),
        ]

    def first(self, ctx: RenderContext) -> Manifest:
        pods, _ = self.sizes(ctx.layout)
        return case_train_job(ctx, self.holder, pods, 1, self.holder, env=lifetime_env(self.run_seconds))

    def second(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, self.waiting, self.sizes(ctx.layout)[1], 1, self.waiting)

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [*self.queues(ctx), self.first(ctx), self.second(ctx)]


@dataclass(frozen=True)
class StaggeredCompletionCase(SideBySide):
    """A gang of two pods that complete apart: pod 1 exits 0 ``stagger`` seconds after pod 0, longer than KAI's
    staleness grace, so a stale-gang eviction that does not see the completed pod (KAI #1968) evicts pod 1. The pods
    carry a short grace for the versions that read it (``kai.scheduler/staleness-grace-period``), which keeps the
    case short there (v0.17 and later: 25 s of workload); elsewhere the stagger outlasts the scheduler's default
    grace (80 s, beside other cases). Not ``slow``: no quicker case covers #1968, so the PR gate must run it."""

    id: str = "2-pods-completing-apart-are-not-evicted-as-stale"
    pods: int = 2
    run_seconds: int = 10
    short_grace: int = 5
    workload: str = "apart"

    def stagger(self, ctx: RenderContext) -> int:
        row = expectations_for(ctx.combination).lifecycle.kai
        return (self.short_grace if row.staleness_grace_annotation else DEFAULT_STALENESS_GRACE) + 10

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, self.workload, gpu_quota=self.pods, gpu_limit=self.pods)

    def runtime(self, ctx: RenderContext) -> Manifest:
        return case_runtime(
            ctx, "short-grace", pod=metadata(annotations={STALENESS_GRACE_ANNOTATION: f"{self.short_grace}s"})
        )

    def trainjob(self, ctx: RenderContext) -> Manifest:
        env = lifetime_env(self.run_seconds, stagger_seconds=self.stagger(ctx))
        return case_train_job(
            ctx,
            self.workload,
            self.pods,
            1,
            self.workload,
            runtime="short-grace",
            runtime_kind=NAMESPACED_RUNTIME_KIND,
            env=env,
        )

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.pods, layout)


@dataclass(frozen=True)
class RestartCase(SideBySide):
    """A gang of two pods whose pod 0 exits 1 after ``run_seconds``, on a runtime whose Job fails at its first failed
    pod and whose JobSet restarts ``max_restarts`` times: every attempt fails the same way, so the JobSet recreates
    the gang ``max_restarts`` times and then fails, and the TrainJob with it."""

    id: str = "one-pod-exits-1-the-gang-restarts-whole-then-fails"
    pods: int = 2
    max_restarts: int = 1
    run_seconds: int = 10
    workload: str = "restarts"

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, self.workload, gpu_quota=self.pods, gpu_limit=self.pods)

    #: The runtime's name; its JobSet failure policy restarts ``max_restarts`` times (None: no failure policy).
    runtime_name: str = "restarts"

    def runtime(self, ctx: RenderContext) -> Manifest:
        return restart_runtime(ctx, self.runtime_name, self.failure_policy_restarts())

    def failure_policy_restarts(self) -> int | None:
        return self.max_restarts

    def trainjob(self, ctx: RenderContext) -> Manifest:
        env = lifetime_env(self.run_seconds, exit_code=FAILURE_EXIT_CODE, exit_index=0)
        return case_train_job(
            ctx,
            self.workload,
            self.pods,
            1,
            self.workload,
            runtime=self.runtime_name,
            runtime_kind=NAMESPACED_RUNTIME_KIND,
            env=env,
        )

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.runtime(ctx), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return held_if_fits(self.pods, layout)


@dataclass(frozen=True)
class SuspendCase(WholeCluster):
    """A non-preemptible ``inference`` gang of half the cluster is suspended; a lower-priority, also non-preemptible
    ``build`` filler takes what is free: the other half (``fits``: the resumed gang finds room) or every GPU (the
    resumed gang cannot preempt it and waits whole until the filler is deleted). One queue whose quota is twice the
    cluster: neither quota nor reclaim decides, only capacity."""

    fits: bool

    @property
    def id(self) -> str:
        return "suspended-gang-resumes-whole-into-room" if self.fits else "suspended-gang-resumes-and-waits-whole"

    def sizes(self, layout: GpuLayout) -> tuple[int, int]:
        """1-GPU pods of the suspended gang (half the cluster) and of the filler."""
        slots = layout.pods_that_fit(1)
        gang = max(1, slots // 2)
        return gang, (slots - gang if self.fits else slots)

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=2 * ctx.layout.total, gpu_limit=UNLIMITED)

    def gang(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "resumed", self.sizes(ctx.layout)[0], 1, "shared", priority_class="inference")

    def filler(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "filler", self.sizes(ctx.layout)[1], 1, "shared", priority_class="build")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.gang(ctx), self.filler(ctx)]


@dataclass(frozen=True)
class DeletionCase:
    """A TrainJob of two pods deleted while its PodGroup is pending behind a blocker that leaves one pod slot too few
    (``pending``: one queue for both, the whole cluster as quota; serial, disruptive), or while it runs in its own
    quota (side by side): either way nothing of it may be left, and the GPUs it held go back."""

    pending: bool
    pods: int = 2
    workload: str = "doomed"

    @property
    def id(self) -> str:
        return f"{'pending' if self.pending else 'running'}-gang-deleted-leaves-nothing"

    def blocker_pods(self, layout: GpuLayout) -> int:
        return max(1, layout.pods_that_fit(1) - self.pods + 1)

    def queue(self, ctx: RenderContext) -> Manifest:
        if self.pending:
            return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)
        return case_queue(ctx, "shared", gpu_quota=self.pods, gpu_limit=self.pods)

    def blocker(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "blocker", self.blocker_pods(ctx.layout), 1, "shared")

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, self.workload, self.pods, 1, "shared")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), *([self.blocker(ctx)] if self.pending else []), self.trainjob(ctx)]

    def gpu_demand(self, layout: GpuLayout) -> int:
        return layout.total if self.pending else held_if_fits(self.pods, layout)

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (SERIAL, DISRUPTIVE) if self.pending else ()


@dataclass(frozen=True)
class FailingGangCase(RestartCase):
    """Control: a gang of two pods whose pod 0 exits 1, on a runtime without restarts (the Job fails at its first
    failed pod, the JobSet with it, ``FailedJobs``): the TrainJob really fails, so judged as if it were to complete,
    the completion detector fires."""

    id: str = "one-pod-exits-1-without-restarts-judged-as-completion"
    workload: str = "failing"
    runtime_name: str = "no-restarts"

    def failure_policy_restarts(self) -> int | None:
        return None  # no failure policy: the JobSet fails with FailedJobs at the Job's first failure


#: How a failed JobSet goes: its own ``ttlSecondsAfterFinished``, or a user deleting it.
BY_TTL = "ttl"
BY_HAND = "by-hand"


@dataclass(frozen=True)
class FailedJobSetGoneCase(RestartCase):
    """A gang of two pods whose pod 0 exits 1 on a runtime with no restart left (``maxRestarts: 0``): the JobSet
    fails (``ReachedMaxRestarts``), the TrainJob with it. Then the failed JobSet goes, by its TTL (the runtime's
    ``ttlSecondsAfterFinished``) or deleted by hand; the TrainJob must stay failed and make no JobSet again."""

    deleted_by: str = BY_TTL
    max_restarts: int = 0
    run_seconds: int = 5
    #: Long enough that the suite reads the failed JobSet (its uid) before the TTL removes it.
    ttl_seconds: int = 15
    workload: str = "failed"
    runtime_name: str = "no-restarts-left"
    id: str = ""

    def __post_init__(self) -> None:
        if self.deleted_by not in (BY_TTL, BY_HAND):
            raise ValueError(f"deleted_by must be {BY_TTL!r} or {BY_HAND!r}, not {self.deleted_by!r}")
        if not self.id:
            object.__setattr__(self, "id", f"{self.deleted_by}-failed-jobset-gone-stays-gone")

    def runtime(self, ctx: RenderContext) -> Manifest:
        runtime = super().runtime(ctx)
        if self.deleted_by == BY_TTL:
            runtime["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = self.ttl_seconds
        return runtime


@dataclass(frozen=True)
class WaitedGangCase(WholeCluster):
    """A gang of two pods waits behind a blocker that leaves one slot too few (one queue, the whole cluster as
    quota), so KAI marks its PodGroup unschedulable; the blocker is deleted and the gang is bound whole. Then KAI
    must stop saying the gang is unschedulable."""

    id: str = "gang-bound-after-waiting-is-no-longer-unschedulable"
    pods: int = 2
    workload: str = "waited"

    def blocker_pods(self, layout: GpuLayout) -> int:
        return max(1, layout.pods_that_fit(1) - self.pods + 1)

    def queue(self, ctx: RenderContext) -> Manifest:
        return case_queue(ctx, "shared", gpu_quota=ctx.layout.total, gpu_limit=UNLIMITED)

    def blocker(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, "blocker", self.blocker_pods(ctx.layout), 1, "shared")

    def trainjob(self, ctx: RenderContext) -> Manifest:
        return case_train_job(ctx, self.workload, self.pods, 1, "shared")

    def manifests(self, ctx: RenderContext) -> list[Manifest]:
        return [self.queue(ctx), self.blocker(ctx), self.trainjob(ctx)]
