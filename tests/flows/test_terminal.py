"""The lifecycle area's known-bug cases end to end on the simulated cluster (tests/flows/test_lifecycle.py's
StepClock harness): a failed TrainJob whose JobSet goes by TTL or by hand (Trainer #3779, #3737), and a gang bound
after waiting (KAI #1888). On the default combination's versions (Trainer v2.3.0, KAI v0.17.0) each is what the
known-bugs table says: the Trainer cases are strict xfails that fail naming the JobSet made again, the KAI case
passes; with the table saying the other way (and the simulated component following it, or broken against it), the
case passes or fails naming the broken behaviour."""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites import test_lifecycle
from kai_conformance.suites import test_lifecycle_terminal as suite
from tests.fakes.controllers import Faults
from tests.fakes.kai.refusals import KaiRefusals
from tests.fakes.trainer_jobset import TrainerAndJobSet
from tests.flows import NAMESPACE
from tests.flows.test_lifecycle import Request, lifecycle, verdicts

TTL, BY_HAND = suite.GONE


def _no_known_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case as on a version the table says has the fix (a release after the one simulated)."""
    monkeypatch.setattr(suite, "gap", lambda key, version: None)


@pytest.mark.parametrize(("case", "bug"), [(TTL, "Trainer #3779"), (BY_HAND, "Trainer #3737")], ids=["ttl", "by-hand"])
def test_on_trainer_v2_3_the_gone_jobset_is_made_again_a_strict_xfail_naming_it(flow, monkeypatch, case, bug) -> None:
    h = lifecycle(flow, monkeypatch)
    request = Request()
    with pytest.raises(ConditionViolated) as failure:
        suite.test_a_failed_trainjob_does_not_make_its_deleted_jobset_again(
            case, kube=h.fake, request=request, **h.args()
        )
    (marker,) = request.markers
    assert marker.kwargs["strict"] and marker.kwargs["raises"] is AssertionError
    assert marker.kwargs["reason"].startswith(f"{bug} in v2.3.0: ")
    message = str(failure.value)
    assert "failed-stays-failed" in message and "made its JobSet again" in message
    assert "restart budget starts anew" in message
    assert verdicts(h)["trainjob-failed+jobset-there"].ok  # it did fail first: ReachedMaxRestarts


@pytest.mark.parametrize("case", [TTL, BY_HAND], ids=["ttl", "by-hand"])
def test_where_trainer_keeps_failed_terminal_the_case_passes(flow, monkeypatch, case) -> None:
    _no_known_bug(monkeypatch)
    monkeypatch.setattr(TrainerAndJobSet, "removes_failed_condition", False)
    h = lifecycle(flow, monkeypatch)
    request = Request()
    suite.test_a_failed_trainjob_does_not_make_its_deleted_jobset_again(case, kube=h.fake, request=request, **h.args())
    assert request.markers == []
    stayed = verdicts(h)["failed-stays-failed"]
    assert stayed.ok and "still Failed (ReachedMaxRestarts), no JobSet" in stayed.explanation
    assert h.fake.objects(kinds.JOB_SET, NAMESPACE) == []


def test_a_trainer_remaking_the_jobset_fails_where_the_fix_is_expected(flow, monkeypatch) -> None:
    _no_known_bug(monkeypatch)
    monkeypatch.setattr(TrainerAndJobSet, "removes_failed_condition", True)
    h = lifecycle(flow, monkeypatch)
    with pytest.raises(ConditionViolated, match=r"failed-stays-failed.*made its JobSet again"):
        suite.test_a_failed_trainjob_does_not_make_its_deleted_jobset_again(
            TTL, kube=h.fake, request=Request(), **h.args()
        )


def test_on_kai_v0_17_a_gang_bound_after_waiting_is_no_longer_unschedulable(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)
    request = Request()
    suite.test_a_gang_that_waited_sheds_its_unschedulable_condition_once_bound(
        suite.WAITED[0], request=request, **h.args()
    )
    assert request.markers == []  # KAI v0.17.0 carries #1908
    seen = verdicts(h)
    assert seen["unschedulable-said"].ok and seen["unschedulable-cleared"].ok


def test_a_kai_keeping_the_condition_fails_naming_it_and_is_the_strict_xfail_of_v0_16(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiRefusals, "keeps_unschedulable", True)
    h = lifecycle(flow, monkeypatch)
    request = Request()
    reasons = []
    monkeypatch.setattr(suite, "gap", lambda key, version: reasons.append(key) or f"{key} in v0.16.8: as v0.16")
    with pytest.raises(ConditionNotMet) as failure:
        suite.test_a_gang_that_waited_sheds_its_unschedulable_condition_once_bound(
            suite.WAITED[0], request=request, **h.args()
        )
    assert reasons == ["KAI #1888"]
    (marker,) = request.markers
    assert marker.kwargs["strict"] and marker.kwargs["reason"].startswith("KAI #1888 in v0.16.8")
    message = str(failure.value)
    assert (
        "unschedulable-cleared" in message
        and "still says UnschedulableOnNodePool while all 2 pods are bound" in message
    )


def test_a_suspend_the_jobset_webhook_refuses_fails_naming_the_jobset_that_did_not_follow(flow, monkeypatch) -> None:
    """Trainer #3008 (no version known to have it: the suspend case runs as it always did, without an xfail)."""
    h = lifecycle(flow, monkeypatch, Faults(jobset_webhook_refuses_suspend=True))
    with pytest.raises(ConditionNotMet) as failure:
        test_lifecycle.test_a_suspended_gang_releases_everything_and_resumes_whole_or_waits_whole(
            test_lifecycle.SUSPEND[0], kube=h.fake, **h.args()
        )
    message = str(failure.value)
    assert "jobset-follows-suspend" in message and "spec.suspend true but its JobSet still false" in message
    refused = [e for e in h.fake.objects(kinds.EVENT, NAMESPACE) if e["reason"] == "TrainJobResourcesCreationFailed"]
    assert refused and "field is immutable" in refused[0]["message"]
