"""Gang all-or-nothing placement: the pods of a TrainJob are bound together, or none of them is.

KAI's podgrouper turns a TrainJob's JobSet into one PodGroup whose gang size is the TrainJob's ``numNodes``
(per version: see suites/support/expectations/__init__.py). Specification:

* A gang that fits the free GPUs is bound whole, its pods bound within a few scheduling periods of each other
  (the bind-time spread is reported), and its pods run.
* A gang larger than the cluster, or whose pods are each larger than any node, binds no pod for the whole
  "never happens" hold; its pending pods say PodScheduled=False/Unschedulable and its PodGroup says why
  (``status.schedulingConditions`` or an ``Unschedulable`` event). Holds over a gang KAI must refuse end once KAI
  has refused it three more times (fixtures/waits.py), at most after the wall-clock hold.
* A gang that would fit but for a running blocker binds no pod while blocked, and all of its pods together once the
  blocker is deleted.
* Control: the same over-subscribed gang under the default scheduler is placed partially, and the gang detector
  reports it: proof that the detector can fire on this cluster.

Sizes are symbolic (pods per gang × GPUs per pod × cluster fill) and resolved from the cluster's GPU layout.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, skip_unless
from kai_conformance.suites.support.cases.gang import BlockedGangCase, GangCase
from kai_conformance.suites.support.detectors.gang import (
    bind_spread,
    gang_all_or_nothing,
    gang_fully_bound,
    nothing_bound,
    pods_marked_unschedulable,
    pods_running,
)
from kai_conformance.suites.support.detectors.queues import podgroup_explains
from kai_conformance.suites.support.detectors.verdict import all_of, fires
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.observe import Observer, Workload
from kai_conformance.suites.support.shapes import GangShape, GpuSize, PodCount
from kai_conformance.suites.support.snapshot import Snapshot
from kai_conformance.suites.support.steps import never_partial_for_long
from kai_conformance.suites.support.timing import settle

pytestmark = pytest.mark.gang

FITTING = [
    GangCase(GangShape(PodCount.TWO, GpuSize.ONE)),
    GangCase(GangShape(PodCount.PER_GPU_NODE, GpuSize.ONE)),
    GangCase(GangShape(PodCount.HALF, GpuSize.ONE)),
    GangCase(GangShape(PodCount.FULL, GpuSize.ONE)),
    GangCase(GangShape(PodCount.TWO, GpuSize.WHOLE_NODE)),
    GangCase(GangShape(PodCount.PER_GPU_NODE, GpuSize.WHOLE_NODE)),
]
LARGER_THAN_THE_CLUSTER = [
    GangCase(GangShape(PodCount.OVER, GpuSize.ONE)),
    GangCase(GangShape(PodCount.OVER, GpuSize.WHOLE_NODE)),
]
PODS_LARGER_THAN_ANY_NODE = [GangCase(GangShape(PodCount.TWO, GpuSize.MORE_THAN_A_NODE))]
BLOCKED = [
    BlockedGangCase(GangShape(PodCount.TWO, GpuSize.ONE)),
    BlockedGangCase(GangShape(PodCount.PER_GPU_NODE, GpuSize.WHOLE_NODE)),
]
CONTROL = [GangCase(GangShape(PodCount.OVER, GpuSize.ONE), default_scheduler=True)]


@pytest.mark.parametrize("case", [param(c) for c in FITTING])
def test_a_gang_that_fits_is_bound_together(
    case: GangCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A gang that fits is bound whole, within a small bind-time spread, and runs."""
    skip_unless(case.shape.fits(ctx.layout), f"{case.shape.describe(ctx.layout)} does not fit this cluster")
    pods, _ = case.size(ctx.layout)
    workspace.apply_all(case.manifests(ctx))

    gang = observer.workload(case.workload, pods)
    gang.visible(timeouts("schedule"))
    snap, bound = gang.bound(
        what=f"[{expect.kai.name}] all {case.shape.describe(ctx.layout)} of the gang bound",
        timeout=timeouts("schedule"),
        guard=never_partial_for_long(gang, timeouts),
    )
    record.verdict(bound)
    assert_bound_together(gang, snap, timeouts, record, expect)
    _, running = gang.until(
        lambda s: pods_running(s, pods),
        what=f"the {pods} bound pods of TrainJob {case.workload} running",
        timeout=timeouts("running"),
        failure=errors.WaitTimeout,
    )
    record.verdict(running)


@pytest.mark.parametrize("case", [param(c) for c in LARGER_THAN_THE_CLUSTER + PODS_LARGER_THAN_ANY_NODE])
def test_a_gang_that_cannot_fit_binds_no_pod(
    case: GangCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Larger than the empty cluster, or pods larger than any node: for the whole hold no pod is bound, and the
    pending pods and the PodGroup say why."""
    skip_unless(ctx.layout.total > 0, "the cluster has no GPUs")
    pods, _ = case.size(ctx.layout)
    workspace.apply_all(case.manifests(ctx))
    gang = observer.workload(case.workload, pods)
    gang.visible(timeouts("schedule"))
    _, held = gang.holds(
        lambda s: nothing_bound(s, pods),
        what=f"[{expect.kai.name}] no pod of {case.shape.describe(ctx.layout)} bound",
        hold=timeouts.hold,
        refusals=timeouts.refusals,
    )
    record.verdict(held)
    _, explained = gang.until(
        lambda s: all_of(pods_marked_unschedulable(s), podgroup_explains(s)),
        what=f"[{expect.kai.name}] the pending pods and the PodGroup of TrainJob {case.workload} say why",
        timeout=timeouts("api"),
        events=True,
    )
    record.verdict(explained)


@pytest.mark.parametrize("case", [param(c) for c in BLOCKED])
def test_a_blocked_gang_waits_whole_and_binds_whole_once_unblocked(
    case: BlockedGangCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Behind a running blocker the gang binds nothing; once the blocker is deleted every pod binds together."""
    gang_pods, gpus = case.gang_size(ctx.layout)
    blocker_pods, _ = case.blocker_size(ctx.layout)
    skip_unless(
        case.gang.fits(ctx.layout) and gang_pods > 1,
        f"{case.gang.describe(ctx.layout)} is no gang that one blocker can hold back on this cluster",
    )
    workspace.apply(case.queue(ctx))
    blocker_job = workspace.apply(case.blocker(ctx))
    blocker = observer.workload("blocker", blocker_pods)
    blocker.visible(timeouts("schedule"))
    blocker.bound(
        what=f"[{expect.kai.name}] the blocker's {blocker_pods} pods of {gpus} GPU(s) bound",
        timeout=timeouts("schedule"),
    )

    workspace.apply(case.waiting_gang(ctx))
    gang = observer.workload("gang", gang_pods)
    gang.visible(timeouts("schedule"))
    _, held = observer.holds(
        lambda s: all_of(nothing_bound(s.of("gang"), gang_pods), gang_fully_bound(s.of("blocker"), blocker_pods)),
        what=f"[{expect.kai.name}] gang of {gang_pods} held back while the blocker runs",
        hold=timeouts.hold,
        refusals=timeouts.refusals,
        refused=gang.name,
    )
    record.verdict(held)

    workspace.delete(blocker_job)
    snap, bound = gang.bound(
        what=f"[{expect.kai.name}] the gang of {gang_pods} bound once the blocker is gone",
        timeout=timeouts("schedule"),
        guard=never_partial_for_long(gang, timeouts),
    )
    record.verdict(bound)
    assert_bound_together(gang, snap, timeouts, record, expect)


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_default_scheduler_places_an_oversized_gang_partially(
    case: GangCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Without KAI the same over-subscribed gang is placed partially, and the gang detector says so."""
    skip_unless(ctx.layout.total > 0, "the cluster has no GPUs")
    pods, _ = case.size(ctx.layout)
    workspace.apply_all(case.manifests(ctx))
    gang = observer.workload(case.workload, pods)
    gang.visible(timeouts("schedule"), kai=False)
    snap, _ = gang.until(
        lambda s: fires(gang_all_or_nothing(s, pods)),
        what=f"the default scheduler to place {case.shape.describe(ctx.layout)} partially",
        timeout=timeouts("schedule"),
    )
    verdict = gang_all_or_nothing(snap, pods)
    record.verdict(verdict, expect_violation=True)
    gang.confirm_fired(verdict, "the gang detector did not fire on a partial placement")


# ------------------------------------------------------------------------------------------------- shared steps
def assert_bound_together(
    gang: Workload, snap: Snapshot, timeouts: TimeoutPolicy, record: CaseRecorder, expect: Expectations
) -> None:
    """The gang's pods were bound within :func:`~suites.support.timing.settle` of each other."""
    spread = bind_spread(snap, settle(timeouts))
    record.verdict(spread)
    record.note(f"TrainJob {gang.name}: {spread.explanation}")
    gang.confirm(spread, f"[{expect.kai.name}] TrainJob {gang.name} was not bound together")
