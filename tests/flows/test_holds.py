"""Holds that end on KAI's own evidence, driven through suite cases against the simulated KAI
(tests/fakes/kai/scheduler.py refuses a pending PodGroup once per cycle, as KAI does: the ``Unschedulable`` event's count
rises, the scheduling condition stays as it is). The waits run on a simulated clock (``simulated_waits``): a hold of
0.9 s with a minimum of 0.3 s is the same few looks of the simulated cluster however busy the machine is.
"""

from __future__ import annotations

import re

import pytest

from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.suites import test_gang, test_preemption, test_queues
from kai_conformance.suites.support.expectations import UNSCHEDULABLE_REASON
from kai_conformance.suites.support.refusals import kai_refusals
from tests.fakes.controllers import Faults

pytestmark = pytest.mark.usefixtures("simulated_waits")

HOLDING = TimeoutPolicy(scale=0.06)
#: A hold that runs out whatever the speed of the polls.
SHORT = TimeoutPolicy(scale=0.02)


def held_verdict(h) -> str:
    return next(v.explanation for v in h.record.record.verdicts if "held " in v.explanation)


def test_the_simulated_kai_refuses_once_per_cycle_without_touching_the_condition(flow) -> None:
    h = flow()
    h.workspace.apply_all(test_gang.LARGER_THAN_THE_CLUSTER[0].manifests(h.ctx))
    seen = [h.observer.snapshot(events=True).of("gang") for _ in range(3)]
    counts = [kai_refusals(s) for s in seen]
    assert counts[0] >= 1 and counts[0] < counts[1] < counts[2], counts
    for snap in seen:
        (event,) = snap.events_for(snap.podgroup, UNSCHEDULABLE_REASON)  # one Event, counted on
        (condition,) = snap.podgroup["status"]["schedulingConditions"]
        assert condition["transitionID"] == "1", "a repeated refusal is no transition"
        assert event["count"] == kai_refusals(snap)


def test_an_oversized_gang_hold_ends_after_kai_refused_it_three_more_times(flow) -> None:
    h = flow()
    h.timeouts = HOLDING
    test_gang.test_a_gang_that_cannot_fit_binds_no_pod(test_gang.LARGER_THAN_THE_CLUSTER[0], **h.args())
    held = held_verdict(h)
    assert held.startswith("none of the 13 pods bound")
    assert "ended after the scheduler refused the workload" in held and "(needs 3)" in held
    seconds = float(re.search(r"held (\d+\.\d)s of 0\.9s", held).group(1))
    assert HOLDING.refusals.minimum <= seconds < HOLDING.hold  # ended early, on the waits' simulated clock


def test_with_kai_events_throttled_the_hold_lasts_its_wall_time_and_says_so(flow, simulated_waits) -> None:
    h = flow(Faults(kai_events_throttled=True))
    h.timeouts = SHORT
    started = simulated_waits.monotonic()
    test_gang.test_a_gang_that_cannot_fit_binds_no_pod(test_gang.LARGER_THAN_THE_CLUSTER[0], **h.args())
    assert simulated_waits.monotonic() - started >= SHORT.hold
    assert "held the full 0.3s: the scheduler's refusals did not reach 3 (0 counted)" in held_verdict(h)


@pytest.mark.parametrize(
    "run",
    [
        lambda h: test_gang.test_a_blocked_gang_waits_whole_and_binds_whole_once_unblocked(
            test_gang.BLOCKED[0], **h.args()
        ),
        lambda h: test_queues.test_a_missing_queue_schedules_nothing_and_says_why(test_queues.MISSING[0], **h.args()),
        lambda h: test_queues.test_a_hierarchical_queue_limit_admits_up_to_the_limit(
            test_queues.HIERARCHY[1], **h.args()
        ),
        lambda h: test_preemption.test_a_higher_priority_newcomer_evicts_the_whole_victim_gang(
            test_preemption.PREEMPTING[0], **h.args()
        ),
        lambda h: test_preemption.test_no_preemption_without_a_preemptible_lower_priority_victim(
            test_preemption.NOT_PREEMPTING[0], **h.args()
        ),
    ],
    ids=["blocked-gang", "missing-queue", "over-child-limit", "victim-back-to-pending", "no-preemption"],
)
def test_every_hold_over_a_refused_workload_ends_on_kais_refusals(flow, run) -> None:
    h = flow()
    h.timeouts = HOLDING
    run(h)
    assert "ended after the scheduler refused the workload" in held_verdict(h)


def test_the_queue_move_hold_has_no_refusals_to_end_on(flow) -> None:
    h = flow()  # the fast timeouts of the other flows: this hold lasts its wall time
    test_queues.test_the_queue_does_not_move_after_creation(test_queues.QueueMoveCase(), kube=h.fake, **h.args())
    assert held_verdict(h).endswith("; held the full 0.0s")


def test_a_hold_on_refusals_must_name_the_refused_workload(flow) -> None:
    h = flow()
    with pytest.raises(ValueError, match="must name the TrainJob KAI refuses"):
        h.observer.holds(lambda s: None, what="nothing bound", hold=1, refusals=HOLDING.refusals)
