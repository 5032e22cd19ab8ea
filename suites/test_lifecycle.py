"""Lifecycle: what happens when a gang's workload ends, and what KAI gives back.

Every other area starts a gang and judges its placement; here the workload ends. Its lifetime and exit code come
from its TrainJob's ``spec.trainer.env`` (``KC_RUN_SECONDS``, ``KC_EXIT_CODE``, ``KC_EXIT_INDEX``,
``KC_STAGGER_SECONDS``: clusters/suite_stack.py ``WORKLOAD_COMMAND``), so real kubelets end the containers (marker
``kubelet``). Facts per version: ``suites/support/expectations/lifecycle.py``. Specification:

* Completion: a gang of every GPU whose pods exit 0 after a stated time completes (every pod ``Succeeded``, exit 0;
  TrainJob ``Complete``/``AllJobsCompleted``, copied from the JobSet); its Queue's ``status.allocated`` GPUs drop to
  zero within a few scheduling periods of its last pod's end (``queue-released``); its PodGroup stays, as the
  version says, holding no GPU (``podgroup-after-end``); a gang that waited whole while it ran (another queue, owed
  nothing) then takes the freed GPUs whole (``took-the-freed-gpus``); no pod is evicted while the gang completes
  (``completing-gang-spared``).
* Completing pod by pod: a gang whose pods complete further apart than KAI's staleness grace is never evicted as
  stale; a strict xfail on the releases the row names (KAI #1968, fixed by PR #2012: v0.16.2 and later, v0.17.0),
  so the suite reports the fix. In the PR gate: no quicker case covers the bug.
* Failure and restart: one pod of a running gang exits 1; with a JobSet ``failurePolicy.maxRestarts`` the whole
  gang is recreated and bound again whole, every attempt (``restarted-whole``), never partially bound for longer
  than a bind takes; with no restarts left the JobSet fails (``ReachedMaxRestarts``, and the ``RestartingJobSet``
  condition where the JobSet version has it: ``jobset-restarts``), the TrainJob with it, and every GPU is released.
* Suspend and resume: ``spec.suspend: true`` on a running TrainJob reaches its JobSet (``jobset-follows-suspend``:
  where JobSet's webhook refuses Trainer's apply, Trainer #3008, it never does), deletes all its pods and releases all its GPUs
  (Trainer's ``Suspended`` condition; ``queue-released``); a lower-priority gang takes them; on resume the gang comes
  back whole when it fits, or waits whole (and keeps the filler running) until room is made.
* Deletion: a TrainJob deleted while its PodGroup is pending, or while it runs, leaves nothing behind: no JobSet,
  Job, pod, PodGroup or BindRequest (``nothing-left``), and every GPU it held is free again.
* Control: a gang whose pod 0 exits 1 on a runtime without restarts really fails (``FailedJobs``); judged as if it
  were to complete, ``trainjob-complete`` fires, and ``trainjob-failed`` holds on the same snapshot: proof that on
  this cluster the detectors read how the workload really ended.

States that must stay once reached (a failed TrainJob stays failed, a bound gang stops being unschedulable):
``test_lifecycle_terminal.py``, with the same workloads and steps.

Every detector reads the whole episode, every snapshot the case took (``suites/support/lifecycle.py``), not a
sample. Cases that fill the cluster are serial and disruptive, as in the other areas.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.cases.lifecycle import (
    CompletionCase,
    DeletionCase,
    FailingGangCase,
    RestartCase,
    StaggeredCompletionCase,
    SuspendCase,
)
from kai_conformance.suites.support.detectors.eviction import gang_undisturbed
from kai_conformance.suites.support.detectors.gang import gang_fully_bound, nothing_bound, pods_gone
from kai_conformance.suites.support.detectors.lifecycle import (
    completing_gang_spared,
    jobset_restarts,
    nothing_left,
    podgroup_kept,
    pods_ended,
    restarted_whole,
    took_freed_gpus,
    trainjob_ended,
    trainjob_suspended,
)
from kai_conformance.suites.support.detectors.queues import podgroup_explains
from kai_conformance.suites.support.detectors.terminal import (
    jobset_follows_suspend,
)
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.expectations.lifecycle import (
    ALL_JOBS_COMPLETED,
    FAILED_JOBS,
    REACHED_MAX_RESTARTS,
    TRAINJOB_COMPLETE,
    TRAINJOB_FAILED,
)
from kai_conformance.suites.support.lifecycle import (
    follow,
    judge,
    lifetime_budget,
    never_partial,
    suspend,
    wait_held,
    wait_released,
)
from kai_conformance.suites.support.observe import Observer, Workload
from kai_conformance.suites.support.snapshot import Snapshot, uid_of
from kai_conformance.suites.support.steps import bring
from kai_conformance.suites.support.workloads import queue_name

pytestmark = [pytest.mark.lifecycle, pytest.mark.kubelet]

COMPLETION = [CompletionCase(run_seconds=20)]
STAGGERED = [StaggeredCompletionCase()]
RESTART = [RestartCase()]
SUSPEND = [SuspendCase(fits=True), SuspendCase(fits=False)]
DELETION = [DeletionCase(pending=True), DeletionCase(pending=False)]
CONTROL = [FailingGangCase()]


@pytest.mark.parametrize("case", [param(c) for c in COMPLETION])
def test_a_completed_gang_releases_its_gpus_to_a_gang_that_waited_whole(
    case: CompletionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """The gang completes; its queue, PodGroup and GPUs are released; the waiting gang takes them whole."""
    holder_pods, waiting_pods = case.sizes(ctx.layout)
    skip_unless(ctx.layout.total >= waiting_pods, f"needs {waiting_pods} GPUs; {ctx.layout.describe()}")
    rows, queue = expect.lifecycle, case.queue_of(ctx, case.holder)
    row = f"[{expect.kai.name}, {rows.name}]"
    workspace.apply_all(case.queues(ctx))
    episode = follow(observer, queue, case.queue_of(ctx, case.waiting))
    holder = bring(workspace, observer, case.first(ctx), case.holder, holder_pods, timeouts)
    guard = never_partial(timeouts, holder, observer.workload(case.waiting, waiting_pods))
    holder.bound(what=f"{row} the {holder_pods} pods of {case.holder} bound", timeout=timeouts("schedule"), guard=guard)
    waiting = bring(workspace, observer, case.second(ctx), case.waiting, waiting_pods, timeouts)

    observer.until(
        lambda s: all_of(
            trainjob_ended(s.of(holder.name), TRAINJOB_COMPLETE), gang_fully_bound(s.of(waiting.name), waiting_pods)
        ),
        what=f"{row} {holder.name} completes after {case.run_seconds}s and {waiting.name} takes its GPUs whole",
        timeout=lifetime_budget(case.run_seconds, timeouts) + timeouts("schedule"),
        guard=guard,
        owners=True,
    )
    released = wait_released(observer, episode, queue, holder, holder_pods, timeouts, row)
    final = observer.snapshot(events=True, owners=True)
    for gang, verdict in (
        (holder, trainjob_ended(final.of(holder.name), TRAINJOB_COMPLETE, ALL_JOBS_COMPLETED)),
        (holder, pods_ended(final.of(holder.name), holder_pods, "Succeeded", 0)),
        (holder, released),
        (holder, podgroup_kept(episode.snapshots, holder.name, rows.kai.podgroup_kept)),
        (holder, completing_gang_spared(episode.snapshots, holder.name)),
        (waiting, took_freed_gpus(episode.snapshots, waiting.name, holder.name, waiting_pods, holder_pods)),
        (waiting, guard(final)),
    ):
        judge(record, gang, verdict, row)


@pytest.mark.parametrize("case", [param(c) for c in STAGGERED])
def test_a_gang_completing_pod_by_pod_is_not_evicted_as_stale(
    case: StaggeredCompletionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    request: pytest.FixtureRequest,
) -> None:
    """Pod 1 ends longer than the staleness grace after pod 0: KAI must not evict it as a stale gang (KAI #1968)."""
    rows = expect.lifecycle
    gap = rows.kai.completing_gang_gap(ctx.combination.kai.version)
    if gap:
        request.applymarker(pytest.mark.xfail(reason=f"{rows.kai.name}: {gap}", raises=AssertionError, strict=True))
    require_gpus(ctx.layout, case.pods)
    row = f"[{expect.kai.name}, {rows.name}]"
    workspace.apply_all([case.queue(ctx), case.runtime(ctx)])
    episode = follow(observer, queue_name(ctx.namespace, case.workload))
    gang = bring(workspace, observer, case.trainjob(ctx), case.workload, case.pods, timeouts)
    gang.bound(
        what=f"{row} the {case.pods} pods of {gang.name} bound",
        timeout=timeouts("schedule"),
        guard=never_partial(timeouts, gang),
    )
    lifetime = case.run_seconds + case.stagger(ctx)
    # Once pod 0 has ended the gang looks partial on purpose: the guard is now that no pod is evicted meanwhile.
    gang.until(
        lambda s: trainjob_ended(s, TRAINJOB_COMPLETE),
        what=f"{row} {gang.name} completes, pod 1 {case.stagger(ctx)}s after pod 0",
        timeout=lifetime_budget(lifetime, timeouts),
        guard=lambda s: completing_gang_spared([s], gang.name),
        owners=True,
        events=True,
    )
    final = observer.snapshot(events=True, owners=True)
    judge(record, gang, completing_gang_spared(episode.snapshots, gang.name), row)
    judge(record, gang, pods_ended(final.of(gang.name), case.pods, "Succeeded", 0), row)


@pytest.mark.parametrize("case", [param(c) for c in RESTART])
def test_a_failed_pod_restarts_the_whole_gang_until_no_restart_is_left(
    case: RestartCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Every attempt is bound whole; after the last one the TrainJob fails and every GPU is released."""
    require_gpus(ctx.layout, case.pods)
    rows, queue = expect.lifecycle, queue_name(ctx.namespace, case.workload)
    row = f"[{expect.kai.name}, {rows.name}]"
    workspace.apply_all([case.queue(ctx), case.runtime(ctx)])
    episode = follow(observer, queue)
    gang = bring(workspace, observer, case.trainjob(ctx), case.workload, case.pods, timeouts)
    guard = never_partial(timeouts, gang)
    gang.bound(what=f"{row} the {case.pods} pods of {gang.name} bound", timeout=timeouts("schedule"), guard=guard)
    attempts = case.max_restarts + 1
    gang.until(
        lambda s: all_of(trainjob_ended(s, TRAINJOB_FAILED, REACHED_MAX_RESTARTS), pods_gone(s)),
        what=f"{row} {gang.name} restarted {case.max_restarts} time(s), then failed with every pod ended",
        timeout=attempts * (lifetime_budget(case.run_seconds, timeouts) + timeouts("schedule")),
        guard=guard,
        owners=True,
    )
    released = wait_released(observer, episode, queue, gang, case.pods, timeouts, row)
    final = observer.snapshot(owners=True)
    judge(record, gang, restarted_whole(episode.snapshots, gang.name, case.pods, attempts), row)
    judge(record, gang, jobset_restarts(final.of(gang.name), case.max_restarts, rows.jobset), row)
    judge(record, gang, released, row)
    judge(record, gang, guard(final), row)


@pytest.mark.parametrize("case", [param(c) for c in SUSPEND])
def test_a_suspended_gang_releases_everything_and_resumes_whole_or_waits_whole(
    case: SuspendCase,
    ctx: RenderContext,
    workspace: Workspace,
    kube: KubeApi,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Suspend releases all pods and GPUs; a lower-priority gang takes them; resume is whole or waits whole."""
    gang_pods, filler_pods = case.sizes(ctx.layout)
    skip_unless(ctx.layout.total >= 2, f"needs 2 GPUs to split; {ctx.layout.describe()}")
    rows, queue = expect.lifecycle, queue_name(ctx.namespace, "shared")
    row = f"[{expect.kai.name}, {rows.name}]"
    workspace.apply(case.queue(ctx))
    episode = follow(observer, queue)
    gang = bring(workspace, observer, case.gang(ctx), "resumed", gang_pods, timeouts)
    guard = never_partial(timeouts, gang, observer.workload("filler", filler_pods))
    gang.bound(what=f"{row} the {gang_pods} pods of {gang.name} bound", timeout=timeouts("schedule"), guard=guard)
    wait_held(observer, queue, gang_pods, timeouts, row)

    suspend(kube, ctx.namespace, gang.name, True)
    gang.until(
        lambda s: all_of(jobset_follows_suspend(s), pods_gone(s), trainjob_suspended(s, True)),
        what=f"{row} {gang.name} suspended: every pod deleted",
        timeout=timeouts("gc"),
        guard=guard,
        owners=True,
    )
    judge(record, gang, wait_released(observer, episode, queue, gang, gang_pods, timeouts, row), row)
    filler_job = workspace.apply(case.filler(ctx))
    filler = observer.workload("filler", filler_pods)
    filler.visible(timeouts("schedule"))
    filler.bound(what=f"{row} the lower-priority filler takes the GPUs", timeout=timeouts("schedule"), guard=guard)
    kept = frozenset(uid_of(p) for p in filler.snapshot().bound_pods)

    def filler_kept(snap: Snapshot) -> Verdict:  # the guard from now on: no partial gang, the filler keeps its pods
        return all_of(guard(snap), gang_undisturbed(snap.of(filler.name), kept))

    suspend(kube, ctx.namespace, gang.name, False)
    _, followed = gang.until(
        jobset_follows_suspend, what=f"{row} the JobSet of {gang.name} resumed", timeout=timeouts("api"), owners=True
    )
    record.verdict(followed)
    gang.visible(timeouts("schedule"))
    if not case.fits:
        _, waited = observer.holds(
            lambda s: nothing_bound(s.of(gang.name), gang_pods),
            what=f"{row} the resumed {gang.name} waits whole while the filler holds every GPU",
            hold=timeouts.hold,
            guard=filler_kept,
            refusals=timeouts.refusals,
            refused=gang.name,
        )
        record.verdict(waited)
        workspace.delete(filler_job)
    _, back = gang.bound(
        what=f"{row} the resumed {gang.name} bound whole again",
        timeout=timeouts("schedule"),
        guard=filler_kept if case.fits else guard,
    )
    record.verdict(back)
    final = observer.snapshot(owners=True)
    judge(record, gang, trainjob_suspended(final.of(gang.name), False), row)
    judge(record, gang, guard(final), row)


@pytest.mark.parametrize("case", [param(c) for c in DELETION])
def test_a_deleted_trainjob_leaves_nothing_behind_and_frees_its_gpus(
    case: DeletionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Deleted while pending (its PodGroup unschedulable) or while running: no JobSet, Job, pod, PodGroup or
    BindRequest is left, and every GPU goes back."""
    require_gpus(ctx.layout, case.pods)
    queue, row = queue_name(ctx.namespace, "shared"), f"[{expect.kai.name}, {expect.lifecycle.name}]"
    workspace.apply(case.queue(ctx))
    episode = follow(observer, queue, bindrequests=True)
    blocker: Workload | None = None
    if case.pending:
        blocker_job = workspace.apply(case.blocker(ctx))
        blocker = observer.workload("blocker", case.blocker_pods(ctx.layout))
        blocker.visible(timeouts("schedule"))
        blocker.bound(what=f"{row} the blocker bound", timeout=timeouts("schedule"))
        wait_held(observer, queue, blocker.size, timeouts, row)
    doomed_job = workspace.apply(case.trainjob(ctx))
    doomed = observer.workload(case.workload, case.pods)
    doomed.visible(timeouts("schedule"))
    if case.pending:
        _, pending = doomed.until(
            lambda s: all_of(nothing_bound(s, case.pods), podgroup_explains(s)),
            what=f"{row} the PodGroup of {doomed.name} pending, saying why",
            timeout=timeouts("schedule"),
            events=True,
            guard=lambda s: nothing_bound(s.of(doomed.name), case.pods),
        )
        record.verdict(pending)
    else:
        doomed.bound(what=f"{row} {doomed.name} bound", timeout=timeouts("schedule"))
        wait_held(observer, queue, case.pods, timeouts, row)

    workspace.delete(doomed_job)
    names = episode.pod_names(doomed.name)
    _, left = observer.until(
        lambda s: nothing_left(s, doomed.name, names),
        what=f"{row} nothing of {doomed.name} left",
        timeout=timeouts("gc"),
        owners=True,
        about=doomed.about,
    )
    record.verdict(left)
    if blocker is not None:  # the deleted gang held no GPU; the queue's last holder goes now
        workspace.delete(blocker_job)
        judge(record, blocker, wait_released(observer, episode, queue, blocker, blocker.size, timeouts, row), row)
    else:
        judge(record, doomed, wait_released(observer, episode, queue, doomed, case.pods, timeouts, row), row)


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_completion_detector_fires_on_a_gang_that_failed(
    case: FailingGangCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Pod 0 exits 1 without restarts: the TrainJob fails, and judged as if it were to complete, the completion
    detector fires, while the failure detector holds on the same snapshot."""
    require_gpus(ctx.layout, case.pods)
    row = f"[{expect.kai.name}, {expect.lifecycle.name}]"
    workspace.apply_all([case.queue(ctx), case.runtime(ctx)])
    follow(observer, queue_name(ctx.namespace, case.workload))
    gang = bring(workspace, observer, case.trainjob(ctx), case.workload, case.pods, timeouts)
    gang.bound(what=f"{row} the {case.pods} pods of {gang.name} bound", timeout=timeouts("schedule"))
    snap, failed = gang.until(
        lambda s: trainjob_ended(s, TRAINJOB_FAILED, FAILED_JOBS),
        what=f"{row} {gang.name} fails: pod 0 exits 1 and the runtime has no restarts",
        timeout=lifetime_budget(case.run_seconds, timeouts) + timeouts("schedule"),
        owners=True,
    )
    verdict = trainjob_ended(snap, TRAINJOB_COMPLETE)
    record.verdict(verdict, expect_violation=True)
    gang.confirm_fired(verdict, f"{row} the completion detector did not fire on a TrainJob that failed (or fired "
                       "for another reason than its failure)", naming=[f"{TRAINJOB_FAILED}, not {TRAINJOB_COMPLETE}"])  # fmt: skip
    record.verdict(failed)
