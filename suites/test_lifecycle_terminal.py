"""Lifecycle: states that must stay once reached, where real upstream releases did not keep them.

The same workloads and steps as ``test_lifecycle.py`` (its workload command ends the pods; per-case runtimes give
restarts and TTLs); which versions have each known bug is ``suites/support/known_bugs.py``, and on those the case is
a strict xfail naming the bug, so the suite reports the fix. Specification:

* A failed TrainJob stays failed: its JobSet fails with no restart left (``maxRestarts: 0``), the TrainJob with it;
  then the failed JobSet goes, by its ``ttlSecondsAfterFinished`` or deleted by hand, and for a hold the TrainJob
  keeps ``Failed`` and makes no JobSet again (``failed-stays-failed``: a new JobSet would start a new restart
  budget). A strict xfail where the known-bugs table says the Trainer has it (Trainer #3779 by TTL, #3737 by hand).
* A gang that waited is no longer unschedulable once bound: a gang waits behind a blocker (its PodGroup says
  ``UnschedulableOnNodePool``), the blocker is deleted, the gang is bound whole, and within a few scheduling periods
  the PodGroup carries no such condition (``unschedulable-cleared``). A strict xfail where KAI has #1888.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus
from kai_conformance.suites.support.cases.lifecycle import BY_HAND, BY_TTL, FailedJobSetGoneCase, WaitedGangCase
from kai_conformance.suites.support.detectors.gang import nothing_bound
from kai_conformance.suites.support.detectors.lifecycle import trainjob_ended
from kai_conformance.suites.support.detectors.terminal import (
    failed_stays_failed,
    unschedulable_cleared,
    unschedulable_said,
)
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.expectations.lifecycle import REACHED_MAX_RESTARTS, TRAINJOB_FAILED
from kai_conformance.suites.support.known_bugs import gap
from kai_conformance.suites.support.lifecycle import follow, lifetime_budget
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.snapshot import Snapshot, uid_of
from kai_conformance.suites.support.steps import bring
from kai_conformance.suites.support.timing import settle
from kai_conformance.suites.support.workloads import queue_name

pytestmark = [pytest.mark.lifecycle, pytest.mark.kubelet]

GONE = [FailedJobSetGoneCase(deleted_by=BY_TTL), FailedJobSetGoneCase(deleted_by=BY_HAND)]
WAITED = [WaitedGangCase()]
#: The known bug a failed JobSet's going shows, per way it goes (suites/support/known_bugs.py).
REMADE_BUG = {BY_TTL: "Trainer #3779", BY_HAND: "Trainer #3737"}


@pytest.mark.parametrize("case", [param(c) for c in GONE])
def test_a_failed_trainjob_does_not_make_its_deleted_jobset_again(
    case: FailedJobSetGoneCase,
    ctx: RenderContext,
    workspace: Workspace,
    kube: KubeApi,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    request: pytest.FixtureRequest,
) -> None:
    """The JobSet fails with no restart left, then goes (TTL or by hand): the TrainJob stays Failed, no new JobSet."""
    reason = gap(REMADE_BUG[case.deleted_by], ctx.combination.trainer.version)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, raises=AssertionError, strict=True))
    require_gpus(ctx.layout, case.pods)
    row = f"[{expect.trainer.name}, {expect.lifecycle.name}]"
    workspace.apply_all([case.queue(ctx), case.runtime(ctx)])
    follow(observer, queue_name(ctx.namespace, case.workload))
    gang = bring(workspace, observer, case.trainjob(ctx), case.workload, case.pods, timeouts)
    gang.bound(what=f"{row} the {case.pods} pods of {gang.name} bound", timeout=timeouts("schedule"))
    # The failed JobSet's uid is read while it is there: its TTL (or the test) removes it next.
    snap, failed = gang.until(
        lambda s: all_of(trainjob_ended(s, TRAINJOB_FAILED, REACHED_MAX_RESTARTS), jobset_there(s)),
        what=f"{row} {gang.name} fails with no restart left",
        timeout=lifetime_budget(case.run_seconds, timeouts) + timeouts("schedule"),
        owners=True,
    )
    record.verdict(failed)
    failed_uid = uid_of(snap.jobsets[0])
    if case.deleted_by == BY_HAND:
        # The JobSet is Trainer's, not labelled as the suite's; it lives in the case's namespace, owned by its TrainJob.
        kube.delete(kinds.JOB_SET, gang.name, ctx.namespace, allow_foreign=True)
    gang.until(
        lambda s: Verdict("failed-jobset-gone", not any(uid_of(j) == failed_uid for j in s.jobsets),
                          f"JobSet {gang.name} uid {failed_uid}: {'gone' if not s.jobsets else 'still there'}"),
        what=f"{row} the failed JobSet of {gang.name} goes ({case.deleted_by})",
        timeout=case.ttl_seconds * timeouts.scale + timeouts("gc"),
        owners=True,
    )  # fmt: skip
    _, stayed = gang.holds(
        lambda s: failed_stays_failed(s, failed_uid),
        what=f"{row} {gang.name} stays Failed and makes no JobSet again",
        hold=timeouts.hold,
        owners=True,
    )
    record.verdict(stayed)


def jobset_there(snap: Snapshot) -> Verdict:
    return Verdict("jobset-there", bool(snap.jobsets), f"JobSet {snap.workload}: {len(snap.jobsets)} in the snapshot")


@pytest.mark.parametrize("case", [param(c) for c in WAITED])
def test_a_gang_that_waited_sheds_its_unschedulable_condition_once_bound(
    case: WaitedGangCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    request: pytest.FixtureRequest,
) -> None:
    """The gang's PodGroup said UnschedulableOnNodePool while it waited; bound whole, it must no longer say so."""
    reason = gap("KAI #1888", ctx.combination.kai.version)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, raises=AssertionError, strict=True))
    require_gpus(ctx.layout, case.pods)
    row = f"[{expect.kai.name}, {expect.lifecycle.name}]"
    workspace.apply(case.queue(ctx))
    blocker_job = workspace.apply(case.blocker(ctx))
    blocker = observer.workload("blocker", case.blocker_pods(ctx.layout))
    blocker.visible(timeouts("schedule"))
    blocker.bound(what=f"{row} the blocker bound", timeout=timeouts("schedule"))
    gang = bring(workspace, observer, case.trainjob(ctx), case.workload, case.pods, timeouts)
    _, said = gang.until(
        unschedulable_said,
        what=f"{row} the PodGroup of {gang.name} says it is unschedulable while the blocker holds the GPUs",
        timeout=timeouts("schedule"),
        guard=lambda s: nothing_bound(s.of(gang.name), case.pods),
    )
    record.verdict(said)
    workspace.delete(blocker_job)
    gang.bound(
        what=f"{row} {gang.name} bound whole once the blocker is gone", timeout=timeouts("gc") + timeouts("schedule")
    )
    _, cleared = gang.until(
        lambda s: unschedulable_cleared(s, case.pods),
        what=f"{row} KAI clears the unschedulable condition of {gang.name}, bound whole",
        timeout=settle(timeouts) + timeouts("api"),
    )
    record.verdict(cleared)
