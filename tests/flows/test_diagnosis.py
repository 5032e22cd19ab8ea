"""Suite cases on a simulated stack broken on purpose, one fault at a time: each failure names the broken link (or
the component that is down, as an infrastructure error), where the PodGroup's queue, priority and labels came
from, and whose fault a partial gang is (suites/support/diagnosis/__init__.py, provenance.py, gang_floor.py). The harness is
tests/flows/__init__.py, the ``flow`` fixture tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kai_conformance.clusters.suite_stack import queue, unlimited_resources
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.plugin.recording import failure_kind
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.reports.categories import classify
from kai_conformance.suites import test_gang, test_labels, test_podgrouper, test_preemption, test_queues
from kai_conformance.suites.support.expectations import PODGROUPER_USER
from kai_conformance.suites.support.workloads import queue_name
from tests.fakes.controllers import Faults
from tests.fakes.kube import FakeKube
from tests.flows import NAMESPACE

NO_TRAINJOB_RBAC = Faults(podgrouper_without_trainjob_rbac=True)
WALK_STOPPED = (
    f"why: the podgrouper ({PODGROUPER_USER}) may not get, list, watch trainjobs.trainer.kubeflow.org: its owner walk "
    "stopped at the JobSet, so no TrainJob label reached the PodGroup"
)


def queue_of(role: str) -> str:
    return queue_name(NAMESPACE, role)


@pytest.fixture
def chart_default_queues() -> Iterator:
    """KAI's chart creates default-parent-queue/default-queue (kai-scheduler.md §3.2): a PodGroup routed there binds,
    as it did on the stack the issue was found on. Removed again before the flow's cleanup check."""
    made: list[FakeKube] = []

    def add(fake: FakeKube) -> None:
        fake.put(queue("default-parent-queue", resources=unlimited_resources()))
        fake.put(queue("default-queue", parent="default-parent-queue", resources=unlimited_resources()))
        made.append(fake)

    yield add
    for fake in made:
        for name in ("default-queue", "default-parent-queue"):
            fake._remove(kinds.QUEUE, None, name)


# ------------------------------------------------------------------------- podgrouper without TrainJob RBAC
def test_without_trainjob_rbac_a_held_queue_case_names_the_default_queue_and_the_stopped_owner_walk(
    flow, chart_default_queues
) -> None:
    """The issue's first example: "nothing bound over the child's limit" was true but one step late."""
    h = flow(NO_TRAINJOB_RBAC)
    chart_default_queues(h.fake)
    over_child = test_queues.HierarchyCase("child", over=True)
    with pytest.raises(ConditionViolated) as failure:
        test_queues.test_a_hierarchical_queue_limit_admits_up_to_the_limit(over_child, **h.args())
    message = str(failure.value)
    assert "nothing bound over the child's limit of 2 GPUs: violated" in message
    assert "every link is there, but the PodGroup does not carry what the chain asks for" in message
    assert (
        "queue default-queue from KAI's default (no queue set on the JobSet or the pods), but the chain asks for "
        f"{queue_of('child')} (the TrainJob's label kai.scheduler/queue)"
    ) in message
    assert WALK_STOPPED in message


def test_without_trainjob_rbac_routing_fails_with_the_provenance_of_the_queue(flow) -> None:
    h = flow(NO_TRAINJOB_RBAC)
    with pytest.raises(ConditionNotMet) as failure:
        test_queues.test_the_podgroup_is_queued_by_label_precedence(test_queues.ROUTING[0], **h.args())
    message = str(failure.value)
    assert f"but the chain asks for {queue_of('team')} (the TrainJob's label kai.scheduler/queue)" in message
    assert WALK_STOPPED in message
    assert "KAI's decision: KAI scheduler" in message and "QueueDoesNotExist: Queue 'default-queue'" in message


def test_without_trainjob_rbac_the_priority_and_label_verdicts_say_what_the_podgroup_got(flow) -> None:
    h = flow(NO_TRAINJOB_RBAC)
    with pytest.raises(AssertionError) as priority:
        test_labels.test_a_priority_class_label_reaches_the_podgroup(test_labels.PRIORITY_SOURCES[0], **h.args())
    assert (
        "priority class train from KAI's default (no priority class set on the JobSet or the pods), but the chain "
        "asks for build (the TrainJob's label priorityClassName)"
    ) in str(priority.value)
    assert WALK_STOPPED in str(priority.value)

    h = flow(NO_TRAINJOB_RBAC)
    trainjob_metadata = next(c for c in test_labels.SOURCES if c.source == "trainjob-metadata")
    with pytest.raises(AssertionError) as labels:
        test_labels.test_metadata_arrives_only_where_the_chain_copies_it(trainjob_metadata, **h.args())
    message = str(labels.value)
    assert "trainjob-metadata at PodGroup: expected present, found absent" in message
    assert (
        "none of the TrainJob's labels kai.scheduler/queue, propagation.kai-conformance.io/trainjob-metadata" in message
    )
    assert WALK_STOPPED in message


def test_without_trainjob_rbac_the_podgrouper_area_fails_on_what_the_podgroup_carries(flow) -> None:
    h = flow(NO_TRAINJOB_RBAC)
    with pytest.raises(ConditionNotMet) as failure:
        test_podgrouper.test_one_podgroup_per_trainjob_owned_by_its_jobset(test_podgrouper.OWNERSHIP[0], **h.args())
    message = str(failure.value)
    assert f"spec.queue = 'default-queue', expected '{queue_of('owned')}'" in message
    assert "priority class train from KAI's default" in message
    assert (
        f"but the chain asks for {test_podgrouper.OWNED_PRIORITY} (the TrainJob's label priorityClassName)" in message
    )
    assert WALK_STOPPED in message
    with pytest.raises(AssertionError, match=r"may not: get trainjobs\.trainer\.kubeflow\.org, list .*, watch"):
        test_podgrouper.test_the_podgrouper_may_read_the_owner_chain(
            "trainer.kubeflow.org", "trainjobs", kube=h.fake, expect=h.expect, record=h.record
        )


def test_without_trainjob_rbac_the_queue_control_fails_naming_the_stopped_owner_walk(
    flow, chart_default_queues
) -> None:
    """Seen on real kind: this control failed at a bare assert with no "why" line, while the other cases named the
    podgrouper's RBAC. Its PodGroup's own queue is now confirmed with the chain diagnosis."""
    h = flow(NO_TRAINJOB_RBAC)
    chart_default_queues(h.fake)
    with pytest.raises(AssertionError) as failure:
        test_queues.test_control_the_routing_detector_fires_on_a_podgroup_in_another_queue(
            test_queues.CONTROL[0], **h.args()
        )
    message = str(failure.value)
    assert "the PodGroup is not in the queue its TrainJob names" in message
    assert "spec.queue = 'default-queue'" in message
    assert WALK_STOPPED in message


# ------------------------------------------------------------------------------------ who placed part of a gang
PARTIAL = "[gang-held] VIOLATED: 1 of 2 pods bound (kai-conformance-worker3) although the gang must not be placed"


def test_a_podgrouper_writing_a_floor_below_the_gang_is_named_by_the_gang_verdict(flow) -> None:
    """The issue's gang example: "1 of 2 pods bound although the gang must not be placed" was true, and the cause was
    the PodGroup's floor, one object away from the pods."""
    h = flow(Faults(podgrouper_gang_floor=1))
    with pytest.raises(ConditionViolated) as failure:
        test_gang.test_a_blocked_gang_waits_whole_and_binds_whole_once_unblocked(test_gang.BLOCKED[0], **h.args())
    message = str(failure.value)
    assert PARTIAL in message
    gang = message[message.index("diagnosis of TrainJob gang:") :]
    assert "gang floor: KAI podgrouper (groups the pods into a PodGroup): PodGroup pg-gang-" in gang
    assert (
        "sets the gang's floor to 1 (spec.subGroups[node-replica-0].minMember = 1), below the gang's 2 pods, so KAI "
        "may bind part of the gang; 1 of 2 pods are bound: KAI v0.17 sets each leaf SubGroup's minMember from its "
        "replicatedJob template's annotation kai.scheduler/batch-min-member, else the Job's parallelism (v0.17.0 "
        "jobset_grouper.go:168-176, 207-248), and the chain asks for 2 (replicatedJob node: parallelism 2, no "
        "kai.scheduler/batch-min-member)"
    ) in gang
    assert "gang floor: KAI scheduler" not in message


def test_a_scheduler_placing_part_of_a_gang_with_the_right_floor_is_named_by_the_gang_verdict(flow) -> None:
    h = flow(Faults(partial_gangs=True))
    with pytest.raises(ConditionViolated) as failure:
        test_gang.test_a_blocked_gang_waits_whole_and_binds_whole_once_unblocked(test_gang.BLOCKED[0], **h.args())
    message = str(failure.value)
    assert PARTIAL in message
    assert (
        "gang floor: KAI scheduler (places the PodGroup (BindRequests) or says why not): PodGroup pg-gang-"
    ) in message
    assert (
        "sets the gang's floor to 2 (spec.subGroups[node-replica-0].minMember = 2), which holds the gang's 2 pods, yet "
        "1 of 2 pods are bound: it placed part of a gang whose floor is right"
    ) in message
    assert "gang floor: KAI podgrouper" not in message
    assert message.count("gang floor:") == 1, "the blocker, bound whole on its right floor, is nobody's fault"


def test_an_oversized_gang_bound_partially_on_a_low_floor_names_the_podgrouper(flow) -> None:
    h = flow(Faults(podgrouper_gang_floor=1))
    with pytest.raises(ConditionViolated) as failure:
        test_gang.test_a_gang_that_cannot_fit_binds_no_pod(test_gang.LARGER_THAN_THE_CLUSTER[0], **h.args())
    message = str(failure.value)
    assert "12 of 13 pods bound" in message
    assert "below the gang's 13 pods, so KAI may bind part of the gang; 12 of 13 pods are bound" in message


# ---------------------------------------------------------------------------------------------- binder down
def test_binder_down_fails_a_gang_case_as_infrastructure_naming_the_binder(flow) -> None:
    h = flow(Faults(binder_down=True))
    with pytest.raises(errors.ComponentDown) as failure:
        test_gang.test_a_gang_that_fits_is_bound_together(test_gang.FITTING[0], **h.args())
    assert not isinstance(failure.value, AssertionError)
    assert failure_kind(failure) == "infrastructure"
    assert classify(failure.value).name == "Infrastructure: a component of the stack is down or cannot act"
    assert failure.value.component == "KAI binder"
    message = str(failure.value)
    first = message.splitlines()[0]
    assert first.startswith("KAI binder is down or cannot act, so the behaviour under test was not observed: ")
    assert "2 BindRequest(s) for gang-node-0-0-" in first
    assert "without a phase: the scheduler chose kai-conformance-worker and nobody bound them" in first
    assert "Deployment kai-scheduler/binder not Available (0/1 available; MinimumReplicasUnavailable" in first
    assert "while waiting for: [KAI v0.17] all 2 pod(s)" in message
    assert "(no PodScheduled condition)" in message, "the wait's own observation is kept"
    assert "→ 2 BindRequest(s) (2 without a phase) → 0 of 2 pods bound" in message
    assert "fix: check the KAI binder" in message


def test_binder_down_without_a_deployment_is_still_named_by_its_pending_bind_requests(flow) -> None:
    """Components may run as processes (real-stack-run.md): the BindRequests alone show who did not act."""
    h = flow(Faults(binder_down=True))
    h.fake._remove(kinds.DEPLOYMENT, "kai-scheduler", "binder")
    with pytest.raises(errors.ComponentDown, match=r"no Deployment runs an image named binder \(health unknown\)"):
        test_preemption.test_no_preemption_without_a_preemptible_lower_priority_victim(
            test_preemption.NOT_PREEMPTING[0], **h.args()
        )


# ------------------------------------------------------------------------------ podgrouper reads another key
def test_a_podgrouper_reading_another_queue_label_fails_the_podgrouper_area(flow) -> None:
    h = flow(Faults(podgrouper_queue_label="runai/queue"))
    with pytest.raises(ConditionNotMet) as failure:
        test_podgrouper.test_one_podgroup_per_trainjob_owned_by_its_jobset(test_podgrouper.OWNERSHIP[1], **h.args())
    message = str(failure.value)
    assert "[podgroup-queue] VIOLATED: PodGroup pg-owned-" in message
    assert (
        f"queue default-queue from KAI's default (no queue set on the JobSet, the TrainJob or the pods), but the "
        f"chain asks for {queue_of('owned')} (the TrainJob's label kai.scheduler/queue)"
    ) in message
    assert (
        "why: the podgrouper did not take it from the TrainJob's label kai.scheduler/queue although the podgrouper "
        "may get, list, watch trainjobs.trainer.kubeflow.org (does it read another label key?)"
    ) in message
    assert f"priority class {test_podgrouper.OWNED_PRIORITY} from the TrainJob's label priorityClassName" in message


def test_a_kai_configured_for_another_queue_label_says_so(flow) -> None:
    h = flow(Faults(podgrouper_queue_label="runai/queue"))
    h.fake.put({"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"},
                "spec": {"global": {"queueLabelKey": "runai/queue"}}})  # fmt: skip
    with pytest.raises(ConditionNotMet, match=r"why: KAI is configured to read the queue from label runai/queue"):
        test_queues.test_the_podgroup_is_queued_by_label_precedence(test_queues.ROUTING[0], **h.args())
    h.fake._remove(kinds.KAI_CONFIG, None, "kai-config")


def test_without_faults_the_binder_binds_what_the_scheduler_requested(flow) -> None:
    h = flow()
    test_gang.test_a_gang_that_fits_is_bound_together(test_gang.FITTING[0], **h.args())
    requests = h.fake.objects(kinds.BIND_REQUEST, NAMESPACE)
    assert len(requests) == 2
    assert {r["status"]["phase"] for r in requests} == {"Succeeded"}
    assert {r["spec"]["podName"] for r in requests} == {t.pod for t in h.observer.timeline.pods("gang")}
