"""The scale suite end to end on the in-memory API at 500 nodes × 8 GPUs: the bursts submitted at once, observed by
watch while the simulated controllers reconcile in a thread of their own (as real ones do), judged and measured;
a KAI that binds part of a gang, or leaves gangs waiting beside idle GPUs, fails the case naming what it did; the
control fires on the simulated default scheduler."""

from __future__ import annotations

import time

import pytest

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.clusters.topology import load_topology
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.suites import test_scale
from kai_conformance.suites.support import scale
from kai_conformance.suites.support.cases.scale import DefaultSchedulerBurst, FillingBurst, OverloadBurst
from tests.fakes.controllers import Faults
from tests.flows import Harness

SCALE_500 = load_topology("scale-500").layout("kai-conformance")
SCALE_100 = load_topology("scale-100").layout("kai-conformance")
#: 40 nodes × 8 GPUs: an overload of 320 GPUs asks for 480 (the 500-node one, 3,396 pods, takes the simulation tens
#: of seconds; the filling burst is the 500-node proof).
MEDIUM = GpuLayout(tuple(GpuNode(f"node-{i:02d}", 8) for i in range(40)))
#: 16 nodes × 8 GPUs: the fault cases need no more.
SMALL = GpuLayout(tuple(GpuNode(f"node-{i:02d}", 8) for i in range(16)))
#: Settle time 0.5 s. The simulated controllers reconcile in rounds, each atomic for the API: every gang complete at a
#: round's end has been placed if it fits, so a burst judged settled between two rounds is judged on a true state.
TIMEOUTS = TimeoutPolicy(scale=0.1)
#: The background controllers catch up before each list of the suite (tests/fakes/controllers.py): a settled burst
#: is judged on what they leave once they have nothing left to do, not on how far a busy machine let them get.
LOOKS = ("list",)
#: A stuck burst is judged after the ``schedule`` budget without change: 1.2 s here.
STUCK_TIMEOUTS = TimeoutPolicy(scale=0.02)


def run(test, harness: Harness, case) -> float:
    """Run one suite test on the harness; returns the seconds it took."""
    started = time.monotonic()
    args = {"case": case, "ctx": harness.ctx, "kube": harness.fake, "workspace": harness.workspace,
            "timeouts": harness.timeouts, "record": harness.record}  # fmt: skip
    if "expect" in test.__code__.co_varnames:
        args["expect"] = harness.expect
    test(**args)
    return time.monotonic() - started


def test_a_burst_filling_500_nodes_is_bound_whole_and_measured(flow, fast_polling) -> None:
    harness = flow(layout=SCALE_500, background=True, catch_up=LOOKS, timeouts=TIMEOUTS)
    seconds = run(test_scale.test_a_burst_that_fits_is_bound_gang_by_gang, harness, FillingBurst())
    record = harness.record.record
    (burst,) = record.bursts
    assert burst.pods >= 1000 and burst.cluster_gpus == 4000 and burst.held_gpus == burst.gpus == 3000
    assert all(v.ok for v in record.verdicts), record.verdicts
    assert {v.detector for v in record.verdicts} >= {"gang-never-partial", "queue-limit", "fitting-gangs-bound",
                                                     "burst-bound"}  # fmt: skip
    assert all(g.all_bound is not None and g.podgroup is not None for g in record.gangs)
    assert burst.binds == burst.pods and burst.evicted_pods == 0 and burst.filled is not None
    assert record.series and any("276 TrainJobs, 1,691 pods" in note for note in record.notes)
    print(f"filling burst of {burst.pods} pods on 500 nodes: {seconds:.1f}s")


def test_an_overload_of_two_limited_queues_settles_within_its_bounds(flow, fast_polling) -> None:
    harness = flow(layout=MEDIUM, background=True, catch_up=LOOKS, timeouts=TIMEOUTS)
    seconds = run(test_scale.test_an_overload_keeps_gangs_whole_and_queues_within_their_bounds, harness,
                  OverloadBurst())  # fmt: skip
    record = harness.record.record
    (burst,) = record.bursts
    assert all(v.ok for v in record.verdicts), record.verdicts
    assert burst.gpus > burst.cluster_gpus and burst.held_gpus <= burst.cluster_gpus
    assert burst.evicted_pods > 0, "KAI preempted or reclaimed on the way"
    print(f"overload of {burst.pods} pods on 40 nodes: {seconds:.1f}s, {burst.evicted_pods} evicted")


def test_a_kai_binding_part_of_a_gang_fails_the_overload_naming_the_gang(flow, fast_polling) -> None:
    harness = flow(Faults(partial_gangs=True), layout=SMALL, background=True, catch_up=LOOKS, timeouts=TIMEOUTS)
    with pytest.raises(AssertionError, match=r"gang-never-partial.*gang g\d+ partially bound \(\d+ of \d+ pods"):
        run(test_scale.test_an_overload_keeps_gangs_whole_and_queues_within_their_bounds, harness, OverloadBurst())
    failed = {v.detector for v in harness.record.record.verdicts if not v.ok}
    assert "gang-never-partial" in failed


def test_a_kai_leaving_gangs_waiting_beside_idle_gpus_fails_the_filling_burst(flow, fast_polling) -> None:
    harness = flow(
        Faults(scheduler_considers_only=10), layout=SMALL, background=True, catch_up=LOOKS, timeouts=TIMEOUTS
    )
    with pytest.raises(AssertionError, match=r"KAI left idle GPUs a waiting gang fits: .*fitting-gangs-bound"):
        run(test_scale.test_a_burst_that_fits_is_bound_gang_by_gang, harness, FillingBurst())
    verdicts = {v.detector: v.ok for v in harness.record.record.verdicts}
    assert verdicts["fitting-gangs-bound"] is False and verdicts["gang-never-partial"] is True


def test_the_control_fires_on_the_default_scheduler_at_scale(flow, fast_polling) -> None:
    harness = flow(layout=SCALE_100, background=True, catch_up=LOOKS, timeouts=TIMEOUTS)
    run(test_scale.test_control_the_default_scheduler_breaks_a_gang_and_a_queue_limit, harness,
        DefaultSchedulerBurst())  # fmt: skip
    verdicts = {v.detector: v for v in harness.record.record.verdicts}
    assert set(verdicts) == {"gang-never-partial", "queue-limit"}
    assert all(v.expect_violation and not v.ok for v in verdicts.values())
    assert "gang g0000 partially bound (100 of 101 pods bound)" in verdicts["gang-never-partial"].explanation


def test_a_stuck_burst_fails_once_nothing_changes_not_at_its_ceiling(flow, fast_polling) -> None:
    """With the podgrouper down no gang is ever complete: the burst is judged stuck after the stall limit (the
    ``schedule`` budget without any change), long before its ceiling of a second per pod."""
    harness = flow(Faults(podgrouper_down=True), layout=SMALL, background=True, catch_up=LOOKS, timeouts=STUCK_TIMEOUTS)
    with pytest.raises(AssertionError, match=r"settled: stuck, nothing changed for \d+s .*no PodGroup") as caught:
        run(test_scale.test_a_burst_that_fits_is_bound_gang_by_gang, harness, FillingBurst())
    ceiling = scale.burst_timeout(STUCK_TIMEOUTS, FillingBurst().plan(SMALL))
    # Ended by the stall rule, not by the ceiling (its message, not the wall time: a busy machine stretches both).
    assert "not reached within" not in str(caught.value) and ceiling > 0
