"""Queue routing: which KAI queue a TrainJob's PodGroup lands in, and what queue quotas and limits do to it.

Trainer copies no TrainJob label to the JobSet, Jobs or pods; KAI's podgrouper reads the TrainJob itself
(skip-top-owner) and merges its labels under the JobSet's. Specification:

* A ``kai.scheduler/queue`` label on the TrainJob routes the PodGroup (``spec.queue``); the label is found on the
  TrainJob and the PodGroup, and on no JobSet, Job or pod.
* No label anywhere routes it to ``default-queue``.
* Precedence: a queue label in the runtime's JobSet template beats the TrainJob's, which beats the pod template's.
* A label naming a queue that does not exist schedules nothing for the whole hold, and KAI says so
  (``QueueDoesNotExist: Queue '<q>' does not exist.``).
* Hierarchical queues (a parent and its child, GPU quota and limit on one of them): a job within the limit runs;
  one GPU over it binds nothing and KAI reports ``OverLimit`` naming the limited queue.
* The queue does not move after creation: relabelling the TrainJob and regrouping its new pods (suspend, resume)
  keeps the PodGroup's ``spec.queue`` (for the whole wall-clock hold: KAI refuses nothing here, so no evidence
  of its own can end the hold early; the missing-queue and over-limit holds end once KAI refused three more times).
* Control: a TrainJob routed to one of the case's queues, judged by the routing detector as if meant for the other,
  makes the detector fire naming the queue the PodGroup got (and the same detector holds for that queue): proof
  that it reads ``spec.queue`` on this cluster.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus
from kai_conformance.suites.support.cases.control import MisroutedQueueCase
from kai_conformance.suites.support.cases.queues import HierarchyCase, QueueMoveCase, RoutingCase
from kai_conformance.suites.support.detectors.gang import (
    gang_fully_bound,
    nothing_bound,
    pods_gone,
    pods_marked_unschedulable,
)
from kai_conformance.suites.support.detectors.labels import arrivals_as_expected
from kai_conformance.suites.support.detectors.queues import podgroup_explains, podgroup_kept, podgroup_queue
from kai_conformance.suites.support.detectors.verdict import all_of
from kai_conformance.suites.support.expectations import (
    OVER_LIMIT_REASON,
    QUEUE_LABEL,
    QUEUE_MISSING_MESSAGE,
    QUEUE_MISSING_REASON,
    Expectations,
)
from kai_conformance.suites.support.levels import arrivals
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.workloads import queue_name

pytestmark = pytest.mark.queue

ROUTING = [
    RoutingCase("trainjob-label", trainjob_queue="team"),
    RoutingCase("no-label"),
    RoutingCase("pod-template-label", pod_queue="pods"),
    RoutingCase("trainjob-label-beats-pod-template", trainjob_queue="team", pod_queue="pods"),
    RoutingCase("jobset-template-label-beats-trainjob", trainjob_queue="team", jobset_queue="runtime"),
]
MISSING = [RoutingCase("missing-queue", trainjob_queue="absent", missing=("absent",))]
HIERARCHY = [
    HierarchyCase("child", over=False),
    HierarchyCase("child", over=True),
    HierarchyCase("parent", over=False),
    HierarchyCase("parent", over=True),
]
CONTROL = [MisroutedQueueCase()]


@pytest.mark.parametrize("case", [param(c) for c in ROUTING])
def test_the_podgroup_is_queued_by_label_precedence(
    case: RoutingCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """The PodGroup's queue follows the labels' precedence, and each label is found only where it arrives."""
    require_gpus(ctx.layout, 1)
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("routed", 1)
    job.visible(timeouts("schedule"))
    expected = case.expected_queue(ctx)
    _, routed = job.until(
        lambda s: podgroup_queue(s, expected),
        what=f"[{expect.kai.name}] PodGroup of TrainJob routed queued to {expected} ({case.id})",
        timeout=timeouts("api"),
    )
    record.verdict(routed)
    if not case.sources:  # no queue label anywhere: nothing to look for along the chain
        return

    snap = job.snapshot(owners=True)
    found = [
        a
        for source, role in case.sources.items()
        for a in arrivals(snap, source, QUEUE_LABEL, case.label_levels(source), value=case.queue_of(ctx, role))
    ]
    for a in found:
        record.label(a.source, a.key, a.level, expected=a.expected, observed=a.observed)
    where = arrivals_as_expected(found)
    record.verdict(where)
    job.confirm(where, f"[{expect.describe()}] the queue label is not where the chain puts it")


@pytest.mark.parametrize("case", [param(c) for c in MISSING])
def test_a_missing_queue_schedules_nothing_and_says_why(
    case: RoutingCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A PodGroup queued to a queue that does not exist binds nothing, and KAI reports QueueDoesNotExist."""
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("routed", 1)
    job.visible(timeouts("schedule"))
    missing = case.expected_queue(ctx)
    _, held = job.holds(
        lambda s: all_of(podgroup_queue(s, missing), nothing_bound(s, 1)),
        what=f"[{expect.kai.name}] nothing bound from missing queue {missing}",
        hold=timeouts.hold,
        refusals=timeouts.refusals,
    )
    record.verdict(held)
    _, explained = job.until(
        lambda s: all_of(
            pods_marked_unschedulable(s),
            podgroup_explains(s, [QUEUE_MISSING_REASON], mentions=QUEUE_MISSING_MESSAGE.format(queue=missing)),
        ),
        what=f"[{expect.kai.name}] KAI reports {QUEUE_MISSING_REASON} for {missing}",
        timeout=timeouts("api"),
        events=True,
    )
    record.verdict(explained)


@pytest.mark.parametrize("case", [param(c) for c in HIERARCHY])
def test_a_hierarchical_queue_limit_admits_up_to_the_limit(
    case: HierarchyCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Within the child's or parent's GPU limit the gang runs; one GPU over it nothing binds, with OverLimit."""
    require_gpus(ctx.layout, case.pods)
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("hier", case.pods)
    job.visible(timeouts("schedule"))
    if not case.over:
        _, bound = job.bound(
            what=f"[{expect.kai.name}] {case.pods} GPUs within the {case.limited}'s limit of {case.limit} bound",
            timeout=timeouts("schedule"),
        )
        record.verdict(bound)
        return
    _, held = job.holds(
        lambda s: nothing_bound(s, case.pods),
        what=f"[{expect.kai.name}] nothing bound over the {case.limited}'s limit of {case.limit} GPUs",
        hold=timeouts.hold,
        refusals=timeouts.refusals,
    )
    record.verdict(held)
    _, explained = job.until(
        lambda s: podgroup_explains(s, [OVER_LIMIT_REASON], mentions=case.limited_display_name(ctx)),
        what=f"[{expect.kai.name}] KAI reports {OVER_LIMIT_REASON} for queue {case.limited_display_name(ctx)}",
        timeout=timeouts("api"),
        events=True,
    )
    record.verdict(explained)


@pytest.mark.parametrize("case", [param(QueueMoveCase())])
def test_the_queue_does_not_move_after_creation(
    case: QueueMoveCase,
    ctx: RenderContext,
    workspace: Workspace,
    kube: KubeApi,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Relabelling a TrainJob to another queue and regrouping its pods keeps the PodGroup's queue."""
    require_gpus(ctx.layout, 1)
    first, second = queue_name(ctx.namespace, "first"), queue_name(ctx.namespace, "second")
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("mover", 1)
    job.visible(timeouts("schedule"))
    before, _ = job.until(
        lambda s: all_of(podgroup_queue(s, first), gang_fully_bound(s, 1)),
        what=f"[{expect.kai.name}] TrainJob mover queued to {first} and bound",
        timeout=timeouts("schedule"),
        events=True,
    )

    # Suspending deletes the pods; resuming makes new ones, which the podgrouper groups again with the new label.
    relabel = {"metadata": {"labels": {QUEUE_LABEL: second}}, "spec": {"suspend": True}}
    kube.patch(kinds.TRAIN_JOB, "mover", relabel, namespace=ctx.namespace)
    job.until(pods_gone, what="TrainJob mover suspended: its pods deleted", timeout=timeouts("gc"))
    kube.patch(kinds.TRAIN_JOB, "mover", {"spec": {"suspend": False}}, namespace=ctx.namespace)
    job.bound(
        what=f"[{expect.kai.name}] TrainJob mover resumed and bound again",
        timeout=timeouts("schedule"),
    )
    snap, kept = job.holds(
        lambda s: podgroup_queue(s, first),
        what=f"[{expect.kai.name}] PodGroup keeps queue {first} after the TrainJob was relabelled to {second}",
        hold=timeouts.hold,
    )
    record.verdict(kept)
    same = podgroup_kept(snap, before.podgroups[0])
    record.verdict(same)
    job.confirm(
        same, f"[{expect.kai.name}] the PodGroup was replaced instead of kept, so the kept queue proves nothing"
    )


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_routing_detector_fires_on_a_podgroup_in_another_queue(
    case: MisroutedQueueCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A TrainJob routed to one queue, judged as if meant for another: the routing detector fires, naming the queue
    the PodGroup got, and holds for that queue."""
    routed, expected = case.routed_queue(ctx), case.expected_queue(ctx)
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("routed", 1)
    snap = job.visible(timeouts("schedule"))  # the podgrouper sets spec.queue once, when it makes the PodGroup
    verdict = podgroup_queue(snap, expected)
    record.verdict(verdict, expect_violation=True)
    own = podgroup_queue(snap, routed)
    record.verdict(own)
    # First the PodGroup's own queue, with the chain diagnosis (the podgrouper's access to TrainJobs included): a
    # PodGroup in neither queue would make the control's firing prove nothing.
    job.confirm(own, f"[{expect.kai.name}] the PodGroup is not in the queue its TrainJob names, {routed}")
    job.confirm_fired(
        verdict,
        f"[{expect.kai.name}] the queue detector did not fire on a PodGroup in the wrong queue "
        f"(routed to {routed}, judged against {expected})",
        naming=[routed],
    )
