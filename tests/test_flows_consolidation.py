"""The consolidation suite end to end on the simulated cluster (harness: tests/flows.py; consolidation, min-runtime
and preemption delay: tests/fakes/kai_consolidation.py). Protection windows are timed on a StepClock (tests/flows.py):
cluster time moves 0.5 s per snapshot, so a 30 s window passes in 60 snapshots while every wait keeps its real-time
timeout.

Without a fault each case passes and records what it saw; a KAI that does not consolidate, ignores a protection
or protects forever fails the case saying so; a cluster whose shard spreads skips the consolidation case naming the
setting that turns it on; v0.16 skips the preemption delay with its row's reason; the control fires, and fails when
its detector is blind."""

from __future__ import annotations

import dataclasses
import time
import types

import pytest
import tenacity

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures import errors, kinds, waits
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites import test_consolidation as suite
from kai_conformance.suites.support import observe
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import kai_row
from kai_conformance.suites.support.expectations_consolidation import LAST_START_ANNOTATION
from tests.fakes.kai_consolidation import KaiConsolidation
from tests.flows import NAMESPACE, StepClock

#: Cluster seconds between two snapshots: under the suite's margin at the end of a window (1 s for API timestamps).
STEP = 0.5
#: The timed flows run on one 4-GPU node: fewer objects, faster snapshots.
SMALL = GpuLayout((GpuNode("kai-conformance-worker", 4),))


def timed(flow, monkeypatch):
    """A flow on a StepClock whose holds count cluster time: a protection window's hold (``consistently`` over
    real time) ends once the cluster's window has passed, not 30 real seconds later. Only holds: every other wait
    keeps its real-time timeout. The holds' clock runs at least as fast as the real one, so a hold always ends."""
    clock = StepClock(STEP)
    holding: list[float] = []  # cluster time at which the hold in progress began

    def monotonic() -> float:
        return time.monotonic() + (clock.now.timestamp() - holding[0] if holding else 0.0)

    def consistently(*args, **kwargs):
        holding[:] = [clock.now.timestamp()]
        try:
            return waits.consistently(*args, **kwargs)
        finally:
            holding.clear()

    shim = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("_")})
    shim.monotonic = monotonic
    monkeypatch.setattr(waits, "time", shim)
    monkeypatch.setattr(tenacity, "time", shim)
    monkeypatch.setattr(observe, "consistently", consistently)
    return flow(layout=SMALL, clock=clock)


def run(test, case, h, **extra) -> None:
    test(case, **h.args(), **extra)


# -------------------------------------------------------------------------------------------- consolidation
def test_consolidation_repacks_fillers_for_the_gang_and_every_moved_filler_is_bound_again(flow) -> None:
    h = flow()
    run(suite.test_a_gang_that_fits_only_after_repacking_is_placed_by_consolidation, suite.CONSOLIDATION[0], h,
        kube=h.fake)  # fmt: skip
    verdicts = h.verdicts()
    assert verdicts["fragmented+every-moved-pod-replaced"] and verdicts["consolidation-recorded"]
    assert verdicts["gang-never-partial"]
    assert verdicts["gang-bound+every-moved-pod-replaced"]
    (note,) = h.record.record.notes
    assert note.startswith("2 filler(s) moved by consolidation: filler-")  # one filler off each of the 2 nodes taken
    gang = [p for p in h.fake.objects(kinds.POD, NAMESPACE) if p["metadata"]["name"].startswith("gang-")]
    assert len({p["spec"]["nodeName"] for p in gang}) == 2
    events = [e for e in h.fake.objects(kinds.EVENT, NAMESPACE) if e["reason"] == "Evict"]
    assert {e["metadata"]["annotations"]["evictor-action-type"] for e in events} == {"consolidation"}
    assert "rescheduled due to bin packing (resource consolidation)" in events[0]["message"]


def test_a_kai_without_consolidation_leaves_the_gang_pending_and_the_case_says_so(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiConsolidation, "_consolidate_for", lambda self, pg, waiting, whole: None)
    h = flow()
    with pytest.raises(ConditionNotMet) as failure:
        run(suite.test_a_gang_that_fits_only_after_repacking_is_placed_by_consolidation, suite.CONSOLIDATION[0], h,
            kube=h.fake)  # fmt: skip
    message = str(failure.value)
    assert "the 2-pod gang of 4-GPU pods bound by consolidation, every filler bound again: not reached" in message
    assert "0 of 2 pods bound" in message and "Resources were found for 0 pods" in message
    assert "diagnosis of TrainJob gang: TrainJob gang → JobSet gang → 1 Job(s) → 2 of 2 pods → PodGroup" in message
    assert "diagnosis of TrainJob filler-" in message, "the fillers kept are diagnosed too"


def test_a_cluster_that_spreads_skips_consolidation_naming_the_setting(flow) -> None:
    h = flow()
    h.fake.put({"apiVersion": kinds.SCHEDULING_SHARD.api_version, "kind": "SchedulingShard",
                "metadata": {"name": "default"}, "spec": {"placementStrategy": {"gpu": "spread", "cpu": "spread"}}})  # fmt: skip
    with pytest.raises(pytest.skip.Exception) as skipped:
        run(suite.test_a_gang_that_fits_only_after_repacking_is_placed_by_consolidation, suite.CONSOLIDATION[0], h,
            kube=h.fake)  # fmt: skip
    reason = str(skipped.value)
    assert "places cpu and gpu with spread" in reason
    assert "--install always --kai-set scheduler.placementStrategy=binpack" in reason
    assert h.fake.objects(kinds.TRAIN_JOB, NAMESPACE) == []


# ---------------------------------------------------------------------------------------------- min-runtime
@pytest.mark.parametrize("case", suite.MIN_RUNTIME, ids=lambda c: c.id)
def test_a_victim_is_protected_for_its_min_runtime_then_evicted(flow, monkeypatch, case) -> None:
    h = timed(flow, monkeypatch)
    run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, case, h)
    verdicts = h.verdicts()
    assert verdicts["gang-undisturbed+gang-held"] and verdicts["eviction-event"] and verdicts["protected-until-end"]
    after = next(v for v in h.record.record.verdicts if v.detector == "protected-until-end")
    assert after.explanation.startswith("first eviction seen ") and "the protection window ended" in after.explanation
    assert h.record.record.notes[0].startswith(f"{case.field} 30s from last-start ")


@pytest.mark.parametrize("case", suite.MIN_RUNTIME, ids=lambda c: c.id)
def test_a_kai_ignoring_min_runtime_evicts_within_the_window_and_the_case_says_so(flow, monkeypatch, case) -> None:
    monkeypatch.setattr(KaiConsolidation, "_min_runtime", lambda self, victim, preemptor, action: 0.0)
    h = timed(flow, monkeypatch)
    with pytest.raises(ConditionViolated) as failure:
        run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, case, h)
    message = str(failure.value)
    assert f"victim stays whole and newcomer waits for its queue's {case.field} of 30s: violated after " in message
    assert "4 of 4 original pods are no longer bound" in message
    assert "diagnosis of TrainJob victim: TrainJob victim → JobSet victim" in message
    assert "diagnosis of TrainJob newcomer: TrainJob newcomer → JobSet newcomer" in message


def test_a_cluster_too_slow_to_start_the_workloads_names_the_slow_step(flow, monkeypatch) -> None:
    monkeypatch.setattr(suite, "PROTECTION_WINDOW", "0s")  # the window has ended before the newcomer is visible
    h = timed(flow, monkeypatch)
    with pytest.raises(errors.InfrastructureError) as failure:
        run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, suite.MIN_RUNTIME[0], h)
    message = str(failure.value)
    assert "the cluster took too long to start the workloads (slowest: " in message
    assert "victim created → all 4 bound " in message
    assert "victim bound → newcomer created " in message and "newcomer created → visible to KAI and checked " in message


def test_a_kai_protecting_forever_fails_the_no_longer_half(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiConsolidation, "_min_runtime", lambda self, victim, preemptor, action: 1e9)
    h = timed(flow, monkeypatch)
    with pytest.raises(ConditionNotMet, match=r"newcomer bound after victim was evicted whole: not reached"):
        run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, suite.MIN_RUNTIME[0], h)


def test_a_victim_without_a_last_start_stamp_cannot_be_timed(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiConsolidation, "_allocated", lambda self, pg: None)
    h = timed(flow, monkeypatch)
    with pytest.raises(AssertionError, match=f"has no {LAST_START_ANNOTATION} annotation"):
        run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, suite.MIN_RUNTIME[0], h)


# ----------------------------------------------------------------------------------------- preemption delay
def test_a_newcomer_waits_out_its_preemption_delay_then_preempts(flow, monkeypatch) -> None:
    h = timed(flow, monkeypatch)
    run(suite.test_a_newcomer_within_its_preemption_delay_evicts_no_one_until_it_elapses,
        suite.PREEMPTION_DELAY[0], h)  # fmt: skip
    verdicts = h.verdicts()
    assert verdicts["preemption-delay"] and verdicts["podgroup-explains"] and verdicts["protected-until-end"]
    explained = next(v for v in h.record.record.verdicts if v.detector == "podgroup-explains")
    assert "PreemptionDelayNotElapsed: Workload is within its preemption delay window (30s)" in explained.explanation


def test_a_kai_ignoring_the_preemption_delay_fails_the_case(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiConsolidation, "_delay_end", lambda self, group: None)
    h = timed(flow, monkeypatch)
    with pytest.raises(ConditionNotMet, match="the newcomer's PodGroup says PreemptionDelayNotElapsed: not reached"):
        run(suite.test_a_newcomer_within_its_preemption_delay_evicts_no_one_until_it_elapses,
            suite.PREEMPTION_DELAY[0], h)  # fmt: skip


def test_kai_v016_skips_the_preemption_delay_with_its_rows_reason(flow) -> None:
    h = flow()
    h.expect = dataclasses.replace(h.expect, kai=kai_row("v0.16.8"))
    with pytest.raises(pytest.skip.Exception, match=r"KAI v0\.16 has no preemption delay"):
        run(suite.test_a_newcomer_within_its_preemption_delay_evicts_no_one_until_it_elapses,
            suite.PREEMPTION_DELAY[0], h)  # fmt: skip
    assert h.fake.objects(kinds.TRAIN_JOB, NAMESPACE) == []


# ------------------------------------------------------------------------------------------------- control
def test_the_control_fires_naming_the_filler_deleted_by_hand(flow) -> None:
    h = flow()
    run(suite.test_control_the_replacement_detector_fires_on_a_workload_that_is_not_bound_again, suite.CONTROL[0], h)
    fired, others = h.record.record.verdicts
    assert fired.expect_violation and not fired.ok and fired.as_expected
    assert fired.explanation == "1 of 2 workload(s) that ran before are not bound again: filler-1 (0 of 1 bound)"
    assert others.ok and not others.expect_violation


def test_the_control_fails_when_the_replacement_detector_is_blind(flow, monkeypatch) -> None:
    monkeypatch.setattr(suite, "all_bound", lambda snap, workloads: Verdict("every-moved-pod-replaced", True, "fine"))
    h = flow()
    with pytest.raises(AssertionError, match="the replacement detector did not fire on filler-1"):
        run(suite.test_control_the_replacement_detector_fires_on_a_workload_that_is_not_bound_again,
            suite.CONTROL[0], h)  # fmt: skip
