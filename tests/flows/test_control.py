"""The control cases of every area, end to end on the simulated cluster (harness: tests/flows/__init__.py): each passes
because its area's detector fires on the violation the simulated controllers produce, and records that verdict as
an expected violation; each fails, saying which detector did not fire on what, when the detector is blind or the
violation does not happen.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites import test_labels, test_podgrouper, test_preemption, test_queues
from kai_conformance.suites.support.detectors.verdict import Verdict
from tests.flows import NAMESPACE


def blind(detector: str):
    """A detector that sees nothing wrong, whatever it is shown."""
    return lambda *args, **kwargs: Verdict(detector, True, "nothing to report")


def control_verdicts(h) -> list:
    return [v for v in h.record.record.verdicts if v.expect_violation]


def assert_fired_as_expected(h, *detectors: str) -> None:
    controls = control_verdicts(h)
    assert [v.detector for v in controls] == list(detectors)
    assert all(not v.ok and v.as_expected for v in controls), controls
    assert all(v.as_expected for v in h.record.record.verdicts)


# ----------------------------------------------------------------------------------------------------- queues
def test_the_queue_control_sees_the_routing_detector_fire_naming_the_queue_the_podgroup_got(flow) -> None:
    h = flow()
    case = test_queues.CONTROL[0]
    test_queues.test_control_the_routing_detector_fires_on_a_podgroup_in_another_queue(case, **h.args())
    assert_fired_as_expected(h, "podgroup-queue")
    fired, own = h.record.record.verdicts
    routed, expected = case.routed_queue(h.ctx), case.expected_queue(h.ctx)
    assert f"spec.queue = {routed!r}, expected {expected!r}" in fired.explanation
    assert own.ok and not own.expect_violation


def test_the_queue_control_fails_when_the_routing_detector_does_not_fire(flow, monkeypatch) -> None:
    monkeypatch.setattr(test_queues, "podgroup_queue", blind("podgroup-queue"))
    h = flow()
    with pytest.raises(AssertionError, match="the queue detector did not fire on a PodGroup in the wrong queue"):
        test_queues.test_control_the_routing_detector_fires_on_a_podgroup_in_another_queue(
            test_queues.CONTROL[0], **h.args()
        )
    verdict, own = h.record.record.verdicts  # the PodGroup's own queue is confirmed before the control's firing
    assert verdict.expect_violation and not verdict.as_expected and own.ok


def test_the_queue_control_fails_when_the_routing_detector_fires_on_anything(flow, monkeypatch) -> None:
    monkeypatch.setattr(test_queues, "podgroup_queue", lambda snap, queue: Verdict("podgroup-queue", False, "?"))
    h = flow()
    with pytest.raises(AssertionError, match="the PodGroup is not in the queue its TrainJob names"):
        test_queues.test_control_the_routing_detector_fires_on_a_podgroup_in_another_queue(
            test_queues.CONTROL[0], **h.args()
        )


# ----------------------------------------------------------------------------------------------------- labels
def test_the_labels_control_sees_the_propagation_detector_fire_at_exactly_the_misclaimed_levels(flow) -> None:
    h = flow()
    case = test_labels.CONTROL[0]
    test_labels.test_control_the_propagation_detector_fires_on_a_label_claimed_at_the_wrong_level(case, **h.args())
    assert_fired_as_expected(h, "propagation")
    (verdict,) = h.record.record.verdicts
    assert "2 of 5 arrivals differ" in verdict.explanation
    assert f"label {case.key} from runtime-pod-template at Job: expected present, found absent" in verdict.explanation
    assert f"label {case.key} from runtime-pod-template at Pod: expected absent, found present" in verdict.explanation
    assert h.record.record.labels == [], "a control's claims must not reach the report's propagation table"


def test_the_labels_control_fails_when_the_propagation_detector_does_not_fire(flow, monkeypatch) -> None:
    monkeypatch.setattr(test_labels, "arrivals_as_expected", blind("propagation"))
    h = flow()
    with pytest.raises(AssertionError, match="the label detector did not fire on a label claimed where the chain"):
        test_labels.test_control_the_propagation_detector_fires_on_a_label_claimed_at_the_wrong_level(
            test_labels.CONTROL[0], **h.args()
        )


def test_the_labels_control_fails_when_the_label_is_where_it_was_claimed(flow, monkeypatch) -> None:
    """A Trainer copying the pod template's metadata onto the Job too: the detector then fires for the Pod only."""
    from tests.fakes import trainer_jobset

    original = trainer_jobset.TrainerAndJobSet._job_for

    def job_with_pod_labels(self, js, rjob, index, name):
        job = original(self, js, rjob, index, name)
        job["metadata"]["labels"].update((job["spec"]["template"].get("metadata") or {}).get("labels") or {})
        return job

    monkeypatch.setattr(trainer_jobset.TrainerAndJobSet, "_job_for", job_with_pod_labels)
    h = flow()
    with pytest.raises(
        AssertionError, match=r"the label detector fired at \['Pod'\], expected exactly at \['Job', 'Pod'\]"
    ):
        test_labels.test_control_the_propagation_detector_fires_on_a_label_claimed_at_the_wrong_level(
            test_labels.CONTROL[0], **h.args()
        )


# ------------------------------------------------------------------------------------------------- preemption
def test_the_preemption_control_sees_a_gang_left_partial_by_a_deleted_pod(flow) -> None:
    h = flow()
    case = test_preemption.CONTROL[0]
    test_preemption.test_control_the_partial_gang_detector_fires_on_a_gang_left_partially_evicted(case, **h.args())
    assert_fired_as_expected(h, "gang-never-partial")
    fired = control_verdicts(h)[0]
    assert "gang violated: 1 of 2 pods bound" in fired.explanation
    assert "more than the" in fired.explanation
    pods = h.fake.objects(kinds.POD, NAMESPACE)
    assert len(pods) == 1, "the deleted pod's index must not have been re-created"
    times = h.observer.timeline.pods("gang")
    assert sum(1 for t in times if t.evicted) == 1


def test_the_preemption_control_fails_when_no_pod_is_deleted(flow, monkeypatch) -> None:
    """A deletion that never happens leaves the gang whole: the detector rightly stays quiet, and the control fails."""
    h = flow()
    monkeypatch.setattr(h.workspace, "delete", lambda obj, wait=True: None)
    with pytest.raises(AssertionError, match="the preemption detector did not fire on a gang left partially evicted"):
        test_preemption.test_control_the_partial_gang_detector_fires_on_a_gang_left_partially_evicted(
            test_preemption.CONTROL[0], **h.args()
        )
    (verdict,) = control_verdicts(h)
    assert verdict.ok and not verdict.as_expected
    assert "never partial for more than" in verdict.explanation


def test_the_preemption_control_fails_when_the_partial_gang_detector_does_not_fire(flow, monkeypatch) -> None:
    class BlindWatch:
        def __init__(self, size: int, grace: float) -> None:
            pass

        def observe(self, snap) -> Verdict:
            return Verdict("gang-never-partial", True, "nothing to report")

    monkeypatch.setattr(test_preemption, "PartialGangWatch", BlindWatch)
    h = flow()
    with pytest.raises(AssertionError, match="the preemption detector did not fire on a gang left partially evicted"):
        test_preemption.test_control_the_partial_gang_detector_fires_on_a_gang_left_partially_evicted(
            test_preemption.CONTROL[0], **h.args()
        )


# ------------------------------------------------------------------------------------------------- podgrouper
def test_the_podgrouper_control_sees_both_detectors_fire_on_the_jobs_podgroup(flow) -> None:
    h = flow()
    case = test_podgrouper.CONTROL[0]
    test_podgrouper.test_control_the_ownership_detectors_fire_on_a_podgroup_owned_by_a_job(case, **h.args())
    assert_fired_as_expected(h, "podgroup-owner", "podgroup-shape")
    owner, shape = control_verdicts(h)
    job = h.fake.find(kinds.JOB, case.job_name, NAMESPACE)
    assert f"Job/{case.job_name} uid {job['metadata']['uid']}" in owner.explanation
    assert "expected exactly JobSet/owned" in owner.explanation
    assert "minSubGroup" in shape.explanation and "minMember" in shape.explanation
    (podgroup,) = h.fake.objects(kinds.POD_GROUP, NAMESPACE)
    assert podgroup["spec"]["minMember"] == 1 and "subGroups" not in podgroup["spec"]


@pytest.mark.parametrize(
    ("detector", "message"),
    [
        (
            "single_podgroup_owned_by_jobset",
            "the podgrouper ownership detector did not fire on a PodGroup owned by Job",
        ),
        ("podgroup_shape", "the podgroup shape detector did not fire on Job stray's PodGroup"),
    ],
)
def test_the_podgrouper_control_fails_when_a_detector_does_not_fire(flow, monkeypatch, detector, message) -> None:
    monkeypatch.setattr(test_podgrouper, detector, blind(detector))
    h = flow()
    with pytest.raises(AssertionError, match=message):
        test_podgrouper.test_control_the_ownership_detectors_fire_on_a_podgroup_owned_by_a_job(
            test_podgrouper.CONTROL[0], **h.args()
        )
