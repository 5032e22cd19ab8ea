"""Suite cases driven end to end against FakeKube with simulated controllers: the harness is tests/flows/__init__.py, the
``flow`` fixture tests/conftest.py. Without a fault each case passes; with one, the failure names what went wrong.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites import test_gang, test_labels, test_podgrouper, test_preemption, test_queues
from kai_conformance.suites.support.expectations import PODGROUPER_USER
from tests.fakes.controllers import Faults
from tests.flows import NAMESPACE


# ------------------------------------------------------------------------------------------------------ gang
def test_a_fitting_gang_binds_together_and_records_its_timeline(flow) -> None:
    h = flow()
    test_gang.test_a_gang_that_fits_is_bound_together(test_gang.FITTING[0], **h.args())
    assert h.verdicts() == {"gang-bound": True, "bind-spread": True, "running": True}
    times = h.observer.timeline.pods("gang")
    assert len(times) == 2
    assert all(t.bound is not None and t.running is not None and t.node for t in times)


def test_an_oversized_gang_is_held_and_explained(flow) -> None:
    h = flow()
    test_gang.test_a_gang_that_cannot_fit_binds_no_pod(test_gang.LARGER_THAN_THE_CLUSTER[0], **h.args())
    explained = next(v for v in h.record.record.verdicts if "podgroup-explains" in v.detector)
    assert explained.ok
    assert "Resources were found for 0 pods" in explained.explanation


def test_a_kai_placing_gangs_partially_fails_the_oversized_gang_case_readably(flow) -> None:
    h = flow(Faults(partial_gangs=True))
    with pytest.raises(ConditionViolated) as failure:
        test_gang.test_a_gang_that_cannot_fit_binds_no_pod(test_gang.LARGER_THAN_THE_CLUSTER[0], **h.args())
    message = str(failure.value)
    assert message.startswith("[KAI v0.17] no pod of 13 pod(s) × 1 GPU(s)")
    assert (
        "12 of 13 pods bound (kai-conformance-worker×4, kai-conformance-worker2×4, kai-conformance-worker3×4)"
        in message
    )
    assert "although the gang must not be placed" in message


def test_a_blocked_gang_binds_whole_once_the_blocker_is_deleted(flow) -> None:
    h = flow()
    test_gang.test_a_blocked_gang_waits_whole_and_binds_whole_once_unblocked(test_gang.BLOCKED[0], **h.args())
    assert h.verdicts()["gang-bound"]
    assert h.fake.find(kinds.TRAIN_JOB, "blocker", NAMESPACE) is None


def test_the_control_case_sees_the_default_scheduler_place_a_gang_partially(flow) -> None:
    h = flow()
    args = h.args()
    del args["expect"]
    test_gang.test_control_the_default_scheduler_places_an_oversized_gang_partially(test_gang.CONTROL[0], **args)
    (verdict,) = h.record.record.verdicts
    assert verdict.expect_violation
    assert not verdict.ok
    assert verdict.as_expected
    assert "gang violated: 12 of 13 pods bound" in verdict.explanation


# ----------------------------------------------------------------------------------------------------- queues
@pytest.mark.parametrize("case", test_queues.ROUTING, ids=lambda c: c.id)
def test_routing_follows_label_precedence(flow, case) -> None:
    h = flow()
    test_queues.test_the_podgroup_is_queued_by_label_precedence(case, **h.args())
    assert all(observation.as_expected for observation in h.record.record.labels)


def test_a_missing_queue_is_reported(flow) -> None:
    h = flow()
    test_queues.test_a_missing_queue_schedules_nothing_and_says_why(test_queues.MISSING[0], **h.args())
    explained = h.record.record.verdicts[-1]
    assert "QueueDoesNotExist: Queue 'kcq-" in explained.explanation


@pytest.mark.parametrize("case", test_queues.HIERARCHY, ids=lambda c: c.id)
def test_hierarchical_limits(flow, case) -> None:
    h = flow()
    test_queues.test_a_hierarchical_queue_limit_admits_up_to_the_limit(case, **h.args())
    assert [v.ok for v in h.record.record.verdicts] == [True] * len(h.record.record.verdicts) != []


def test_the_queue_stays_after_regrouping(flow) -> None:
    h = flow()
    test_queues.test_the_queue_does_not_move_after_creation(test_queues.QueueMoveCase(), kube=h.fake, **h.args())
    assert [v.ok for v in h.record.record.verdicts] == [True] * len(h.record.record.verdicts) != []


def test_a_podgrouper_moving_the_queue_is_caught(flow) -> None:
    h = flow(Faults(podgrouper_moves_queue=True))
    with pytest.raises(ConditionViolated, match=r"(?s)PodGroup keeps queue kcq-\w+-first .*expected 'kcq-\w+-first'"):
        test_queues.test_the_queue_does_not_move_after_creation(test_queues.QueueMoveCase(), kube=h.fake, **h.args())


# ----------------------------------------------------------------------------------------------------- labels
@pytest.mark.parametrize("case", test_labels.SOURCES, ids=lambda c: c.id)
def test_every_label_source_arrives_where_the_table_says(flow, case) -> None:
    h = flow()
    test_labels.test_metadata_arrives_only_where_the_chain_copies_it(case, **h.args())
    assert len(h.record.record.labels) == 10  # a label and an annotation at five levels


def test_a_trainer_copying_trainjob_labels_to_pods_fails_with_the_level_named(flow) -> None:
    h = flow(Faults(trainer_copies_trainjob_labels=True))
    case = next(c for c in test_labels.SOURCES if c.source == "trainjob-metadata")
    with pytest.raises(AssertionError) as failure:
        test_labels.test_metadata_arrives_only_where_the_chain_copies_it(case, **h.args())
    assert (
        "label propagation.kai-conformance.io/trainjob-metadata from trainjob-metadata at Pod: expected absent, found present"
        in str(failure.value)
    )
    wrong = [o for o in h.record.record.labels if not o.as_expected]
    assert [(o.level, o.observed) for o in wrong] == [("Pod", True)]


def test_controller_marks_and_priority_classes(flow) -> None:
    test_labels.test_the_controllers_mark_jobs_and_pods(test_labels.ControllerMarksCase(), **flow().args())
    for case in test_labels.PRIORITY_SOURCES:
        h = flow()
        test_labels.test_a_priority_class_label_reaches_the_podgroup(case, **h.args())
        assert h.record.record.labels[0].observed


# ------------------------------------------------------------------------------------------------- podgrouper
def test_ownership_shape_and_garbage_collection(flow) -> None:
    for case in test_podgrouper.OWNERSHIP:
        test_podgrouper.test_one_podgroup_per_trainjob_owned_by_its_jobset(case, **flow().args())
    for case in test_podgrouper.SHAPES:
        test_podgrouper.test_the_podgroup_has_the_shape_of_its_version(case, **flow().args())
    h = flow()
    test_podgrouper.test_deleting_the_trainjob_collects_everything(test_podgrouper.PodGroupCase(pods=2), **h.args())
    assert h.fake.objects(kinds.POD_GROUP, NAMESPACE) == []


def test_rbac_review_passes_and_names_the_missing_verb(flow) -> None:
    h = flow()  # the simulated stack grants the podgrouper what KAI's chart grants; take one verb away
    h.fake.access_rules.discard((PODGROUPER_USER, "watch", "jobset.x-k8s.io", "jobsets"))
    test_podgrouper.test_the_podgrouper_may_read_the_owner_chain(
        "trainer.kubeflow.org", "trainjobs", kube=h.fake, expect=h.expect, record=h.record
    )
    with pytest.raises(AssertionError, match=r"may not: watch jobsets\.jobset\.x-k8s\.io"):
        test_podgrouper.test_the_podgrouper_may_read_the_owner_chain(
            "jobset.x-k8s.io", "jobsets", kube=h.fake, expect=h.expect, record=h.record
        )


# ------------------------------------------------------------------------------------------------- preemption
def test_preemption_evicts_the_whole_victim_and_the_victim_returns_to_pending(flow) -> None:
    h = flow()
    test_preemption.test_a_higher_priority_newcomer_evicts_the_whole_victim_gang(
        test_preemption.PREEMPTING[0], **h.args()
    )
    verdicts = h.verdicts()
    assert verdicts["gang-never-partial"]
    assert verdicts["eviction-event"]
    victim = h.observer.timeline.pods("victim")
    assert sum(1 for t in victim if t.evicted) == 12, "the 12 original victim pods were evicted"
    assert sum(1 for t in victim if not t.evicted and t.bound is None) == 12, "and 12 replacements wait, unbound"


@pytest.mark.parametrize("case", test_preemption.NOT_PREEMPTING, ids=lambda c: c.id)
def test_no_preemption_cases_keep_the_victim(flow, case) -> None:
    h = flow()
    test_preemption.test_no_preemption_without_a_preemptible_lower_priority_victim(case, **h.args())
    assert h.verdicts() == {"gang-undisturbed+gang-held": True}


def test_a_missed_eviction_fails_the_preemption_case_with_the_waiting_pods(flow) -> None:
    h = flow()
    case = test_preemption.PreemptionCase("train", "train")  # equal priority: the simulator will not preempt
    with pytest.raises(ConditionNotMet) as failure:
        test_preemption.test_a_higher_priority_newcomer_evicts_the_whole_victim_gang(case, **h.args())
    message = str(failure.value)
    assert "newcomer bound after victim was evicted whole: not reached" in message
    assert "0 of 2 pods bound; waiting: newcomer-node-0-0" in message


def test_a_queue_within_its_quota_keeps_its_gang(flow) -> None:
    h = flow()
    case = test_preemption.ReclaimCase(borrowing=False)
    test_preemption.test_reclaim_takes_back_only_what_a_queue_borrowed(case, **h.args())
    assert h.verdicts() == {"gang-undisturbed+gang-held": True}
