"""The fairness suite end to end on the simulated cluster (harness: tests/flows/__init__.py; reclaim toward fair shares:
tests/fakes/kai/fairness.py): each case settles and records its shares; a KAI that ignores weights, priority
buckets or quotas, or never reclaims, fails the case saying which queue holds what against which share; the
control fires, and fails when its detector is blind. The reclaim cases of the preemption suite run here too, now
that reclaim is simulated."""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites import test_fairness, test_preemption
from kai_conformance.suites.support.detectors.fairness import held_by_queue
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.workloads import queue_name
from tests.fakes.kai.fairness import KaiFairness
from tests.flows import NAMESPACE

#: Case id → GPUs held at the end by (first, second) team on the PR-gate layout (12 GPUs, gangs of 2).
SETTLED = {
    "equal-weights": (6, 6),
    "weights-1-to-3": (4, 8),  # shares 3 and 9: the heavy team stops where its next gang would pass 9
    "priority-bucket-before-weights": (0, 12),
    "in-quota-never-reclaimed": (4, 8),
}


def held(h, case) -> tuple[int, int]:
    shares = held_by_queue(h.observer.snapshot())
    return tuple(shares.get(queue_name(NAMESPACE, team.role), 0) for team in case.teams)  # type: ignore[return-value]


@pytest.mark.parametrize("case", test_fairness.SETTLING, ids=lambda c: c.id)
def test_each_case_settles_to_its_fair_shares_and_records_them(flow, case) -> None:
    h = flow()
    test_fairness.test_saturated_queues_settle_to_their_fair_shares(case, **h.args())
    assert h.verdicts() == {"fair-share": True, "in-quota-kept": True}
    assert held(h, case) == SETTLED[case.id]
    series = h.record.record.series
    first, second = (team.role for team in case.teams)
    assert set(series) == {f"GPUs held by {first}", f"GPUs held by {second}", f"fair share of {first}",
                           f"fair share of {second}"}  # fmt: skip
    assert max(v for _, v in series[f"GPUs held by {first}"]) == 12  # it filled the cluster before the second came
    assert series[f"GPUs held by {second}"][-1][1] == SETTLED[case.id][1]


def test_a_kai_ignoring_weights_fails_the_weighted_case_naming_holdings_and_shares(flow, monkeypatch) -> None:
    original = KaiFairness._fair_shares

    def equal_weights(self, queues, asked):
        for queue in queues:
            queue["spec"]["resources"]["gpu"]["overQuotaWeight"] = 1
        return original(self, queues, asked)

    monkeypatch.setattr(KaiFairness, "_fair_shares", equal_weights)
    h = flow()
    with pytest.raises(ConditionNotMet) as failure:
        test_fairness.test_saturated_queues_settle_to_their_fair_shares(test_fairness.SETTLING[1], **h.args())
    message = str(failure.value)
    assert message.startswith("[KAI v0.17 fair share] light (weight 1) and heavy (weight 3) settle to their fair")
    assert "light holds 6 GPU(s), fair share 3 (off by more than the tolerance)" in message
    assert "heavy holds 6 GPU(s), fair share 9 (off by more than the tolerance)" in message
    assert "(±2 GPUs, one gang; 12 GPUs shared by light: quota 0, weight 1, priority 100, asks 12" in message
    assert h.record.record.series, "the shares seen so far are recorded for the report even when the case fails"


def test_a_kai_reclaiming_in_quota_gpus_fails_the_in_quota_case_on_the_way(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiFairness, "_deserved", lambda self, queue, total: 0.0)
    h = flow()
    with pytest.raises(ConditionViolated) as failure:
        test_fairness.test_saturated_queues_settle_to_their_fair_shares(test_fairness.SETTLING[3], **h.args())
    message = str(failure.value)
    assert "violated on the way: [in-quota-kept] VIOLATED: owner holds 0 GPU(s)" in message
    assert "its deserved quota is 4 of the 12 it asks: 4 in-quota GPU(s) were taken from it" in message


def test_a_kai_ignoring_queue_priority_fails_the_priority_case(flow, monkeypatch) -> None:
    original = KaiFairness._fair_shares

    def no_buckets(self, queues, asked):
        for queue in queues:
            queue["spec"].pop("priority", None)
        return original(self, queues, asked)

    monkeypatch.setattr(KaiFairness, "_fair_shares", no_buckets)
    h = flow()
    with pytest.raises(ConditionNotMet, match=r"urgent holds 2 GPU\(s\), fair share 12 \(off by more"):
        test_fairness.test_saturated_queues_settle_to_their_fair_shares(test_fairness.SETTLING[2], **h.args())


def test_a_kai_that_never_reclaims_leaves_the_first_team_with_everything(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiFairness, "_reclaim_for", lambda self, pg, waiting, whole: None)
    h = flow()
    with pytest.raises(ConditionNotMet, match=r"first holds 12 GPU\(s\), fair share 6 \(off by more") as failure:
        test_fairness.test_saturated_queues_settle_to_their_fair_shares(test_fairness.SETTLING[0], **h.args())
    message = str(failure.value)
    assert "diagnosis of TrainJob first-0: TrainJob first-0 → JobSet first-0" in message
    assert "diagnosis of TrainJob second-0: TrainJob second-0 → JobSet second-0" in message
    assert "Resources were found for 0 pods" in message, "KAI's account of the second team's pending gangs"


def test_the_control_fires_against_weights_the_queues_do_not_have(flow) -> None:
    h = flow()
    case = test_fairness.CONTROL[0]
    test_fairness.test_control_the_fair_share_detector_fires_against_rules_the_queues_do_not_have(case, **h.args())
    own, kept, fired = h.record.record.verdicts
    assert own.ok and kept.ok and not own.expect_violation
    assert fired.expect_violation and not fired.ok and fired.as_expected
    assert "first holds 6 GPU(s), fair share 3 (off by more than the tolerance)" in fired.explanation
    assert "second holds 6 GPU(s), fair share 9 (off by more than the tolerance)" in fired.explanation


def test_the_control_fails_when_the_fair_share_detector_is_blind(flow, monkeypatch) -> None:
    monkeypatch.setattr(test_fairness, "shares_settled", lambda *a, **k: Verdict("fair-share", True, "looks fine"))
    h = flow()
    with pytest.raises(AssertionError, match="the fair-share detector did not fire on shares judged as first"):
        test_fairness.test_control_the_fair_share_detector_fires_against_rules_the_queues_do_not_have(
            test_fairness.CONTROL[0], **h.args()
        )


@pytest.mark.parametrize(
    "borrowing", [True, False], ids=["over-quota-queue-is-reclaimed", "within-quota-queue-is-kept"]
)
def test_the_preemption_suites_reclaim_cases_pass_on_the_simulated_reclaim(flow, borrowing: bool) -> None:
    h = flow()
    case = test_preemption.ReclaimCase(borrowing=borrowing)
    test_preemption.test_reclaim_takes_back_only_what_a_queue_borrowed(case, **h.args())
    if borrowing:
        assert h.verdicts()["eviction-event"]
        assert "was preempted by workload" in h.record.record.verdicts[-1].explanation
    else:
        assert h.verdicts() == {"gang-undisturbed+gang-held": True}
