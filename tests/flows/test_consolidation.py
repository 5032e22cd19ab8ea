"""The consolidation suite end to end on the simulated cluster (harness: tests/flows/__init__.py; consolidation, min-runtime
and preemption delay: tests/fakes/kai/consolidation.py). Protection windows are timed on a StepClock (tests/flows/__init__.py):
cluster time moves 0.5 s per snapshot, so a 30 s window passes in 60 snapshots while every wait keeps its real-time
timeout.

Without a fault each case passes and records what it saw, a protection window ending on KAI's eviction and judged on
KAI's own timestamps; a KAI that does not consolidate, evicts before a protection ends or protects too long fails the
case saying so; without KAI's timestamps a window falls back to the wall clock and says so; a cluster whose shard spreads skips the consolidation case naming the
setting that turns it on; v0.16 skips the preemption delay with its row's reason; the control fires, and fails when
its detector is blind."""

from __future__ import annotations

import dataclasses
import re
import time
import types

import pytest
import tenacity

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures import errors, waits
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites import test_consolidation as suite
from kai_conformance.suites.support import observe
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import kai_row
from kai_conformance.suites.support.expectations.consolidation import LAST_EVICTION_ANNOTATION, LAST_START_ANNOTATION
from tests.fakes.kai import consolidation
from tests.fakes.kai.consolidation import KaiConsolidation
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
def verdict_of(h, detector: str) -> str:
    return next(v.explanation for v in h.record.record.verdicts if v.detector == detector)


def seen_after_end(h) -> float:
    """When the window's wait saw KAI act, in seconds from the protection's end (cluster time)."""
    return float(re.search(r"KAI has acted ([+-]\d+\.\d)", verdict_of(h, "evicted-when-due")).group(1))


@pytest.mark.parametrize("case", suite.MIN_RUNTIME, ids=lambda c: c.id)
def test_a_victim_is_protected_for_its_min_runtime_then_evicted_and_the_window_ends_on_kais_eviction(
    flow, monkeypatch, case
) -> None:
    h = timed(flow, monkeypatch)
    run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, case, h)
    verdicts = h.verdicts()
    assert verdicts["gang-undisturbed+gang-held"] and verdicts["evicted-when-due"] and verdicts["eviction-event"]
    assert verdicts["protected-until-end"]
    # The end is KAI's own (last-start stamp + 30 s) and judged without margin on KAI's clock.
    assert h.record.record.notes[0].startswith(
        f"its queue's {case.field} of 30s from kai.scheduler/last-start-timestamp "
    )
    assert (
        "(exact: KAI compares its clock with the same timestamp); eviction due within 0 s" in h.record.record.notes[0]
    )
    after = verdict_of(h, "protected-until-end")
    assert re.fullmatch(r"KAI evicted at \S+Z by its own clock \(.+\), 0 s after the protection ended at \S+Z", after)
    # The wait ended on the eviction, within one step of the cluster clock after the end: not on a wall-clock bound.
    assert 0.0 <= seen_after_end(h) <= STEP
    phase = verdict_of(h, "gang-undisturbed+gang-held")
    assert re.search(r"on \d+ observation\(s\) over \d+\.\ds, until KAI acted", phase)
    assert re.search(r"KAI refused newcomer [1-9]\d* more time\(s\) meanwhile", phase)


@pytest.mark.parametrize("case", suite.MIN_RUNTIME, ids=lambda c: c.id)
def test_a_kai_evicting_before_the_min_runtime_ends_fails_on_its_own_eviction_time(flow, monkeypatch, case) -> None:
    monkeypatch.setattr(KaiConsolidation, "_min_runtime", lambda self, victim, preemptor, action: 20.0)
    h = timed(flow, monkeypatch)
    with pytest.raises(AssertionError) as failure:
        run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, case, h)
    message = str(failure.value)
    assert f"the victim was evicted before its queue's {case.field} of 30s ended: [protected-until-end] VIOLATED: " in (
        message
    )
    assert re.search(r"KAI evicted at \S+ by its own clock \(.+\), 10 s before the protection ended", message)
    assert "diagnosis of TrainJob victim: TrainJob victim → JobSet victim" in message


def test_a_kai_protecting_forever_fails_a_few_periods_after_the_end(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiConsolidation, "_min_runtime", lambda self, victim, preemptor, action: 1e9)
    h = timed(flow, monkeypatch)
    with pytest.raises(ConditionViolated) as failure:
        run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, suite.MIN_RUNTIME[0], h)
    message = str(failure.value)
    assert "victim stays whole and newcomer waits for its queue's preemptMinRuntime of 30s, until KAI acts: " in message
    late = re.search(r"\[evicted-when-due\] VIOLATED: nothing evicted (\d+\.\d) s after the protection ended", message)
    assert late and float(late.group(1)) <= 2 * STEP, "judged at the first observation after the due time"
    assert "KAI evicts in its first cycle after the end, due within 0 s" in message
    assert "diagnosis of TrainJob newcomer: TrainJob newcomer → JobSet newcomer" in message


def test_without_a_last_start_stamp_the_window_falls_back_to_the_wall_clock_and_says_so(flow, monkeypatch) -> None:
    # A KAI that protects the victim but keeps the start to itself: the simulation stamps another annotation.
    monkeypatch.setattr(consolidation, "LAST_START_ANNOTATION", "kai.scheduler/not-the-last-start")
    h = timed(flow, monkeypatch)
    run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, suite.MIN_RUNTIME[0], h)
    note = h.record.record.notes[0]
    assert note.startswith("its queue's preemptMinRuntime of 30s from its first bind at ")
    assert "the wall clock (PodGroup pg-victim-" in note and f"has no {LAST_START_ANNOTATION} annotation" in note
    assert "(the wall clock applies: evictions accepted from 1 s before it)" in note
    after = verdict_of(h, "protected-until-end")
    assert after.startswith("first eviction seen ")
    assert after.endswith("(wall clock: the end is estimated; KAI's time from its Evict event (preempt))")


def test_without_kais_time_of_the_eviction_it_is_judged_as_the_suite_saw_it(flow, monkeypatch) -> None:
    evict = KaiConsolidation._evict

    def untimed(self, victim, pod, *args, **kwargs):  # Evict events whose time did not survive, no stamp
        evict(self, victim, pod, *args, **kwargs)
        for event in self.fake.objects(kinds.EVENT, NAMESPACE):
            if event["reason"] == "Evict" and event.get("firstTimestamp"):
                self.fake.write({**event, "firstTimestamp": None, "lastTimestamp": None})
        group = self._find(kinds.POD_GROUP, victim["metadata"]["name"], NAMESPACE)
        group["metadata"]["annotations"].pop(LAST_EVICTION_ANNOTATION, None)
        self.fake.write(group)

    monkeypatch.setattr(KaiConsolidation, "_evict", untimed)
    h = timed(flow, monkeypatch)
    run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, suite.MIN_RUNTIME[0], h)
    after = verdict_of(h, "protected-until-end")
    assert after.startswith("first eviction seen ")
    assert after.endswith("(wall clock: no Evict event or eviction stamp carries KAI's time)")


def test_a_cluster_too_slow_to_start_the_workloads_names_the_slow_step(flow, monkeypatch) -> None:
    monkeypatch.setattr(suite, "PROTECTION_WINDOW", "0s")  # the window has ended before the newcomer is visible
    h = timed(flow, monkeypatch)
    with pytest.raises(errors.InfrastructureError) as failure:
        run(suite.test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer, suite.MIN_RUNTIME[0], h)
    message = str(failure.value)
    assert "too little to observe: the cluster took too long to start the workloads (slowest: " in message
    assert "victim created → all 4 bound " in message
    assert "victim bound → newcomer created " in message and "newcomer created → visible to KAI and checked " in message


# ----------------------------------------------------------------------------------------- preemption delay
def test_a_newcomer_waits_out_its_preemption_delay_then_preempts(flow, monkeypatch) -> None:
    h = timed(flow, monkeypatch)
    run(suite.test_a_newcomer_within_its_preemption_delay_evicts_no_one_until_it_elapses,
        suite.PREEMPTION_DELAY[0], h)  # fmt: skip
    verdicts = h.verdicts()
    assert verdicts["preemption-delay"] and verdicts["podgroup-explains"] and verdicts["protected-until-end"]
    assert verdicts["evicted-when-due"] and verdicts["gang-undisturbed+gang-held"]
    explained = verdict_of(h, "podgroup-explains")
    assert "PreemptionDelayNotElapsed: Workload is within its preemption delay window (30s)" in explained
    note = h.record.record.notes[0]
    ends = re.fullmatch(
        r"the newcomer's preemption delay of 30s from PodGroup pg-newcomer-\S+ creationTimestamp \S+: protected "
        r"until (\S+) \(exact: .*\); eviction due within 0 s after it; KAI states (\S+)",
        note,
    )
    assert ends and ends.group(1) == ends.group(2), "KAI's stated end is the one the suite computed"
    assert "0 s after the protection ended" in verdict_of(h, "protected-until-end")
    assert 0.0 <= seen_after_end(h) <= STEP


def test_a_kai_ignoring_the_preemption_delay_fails_the_case(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiConsolidation, "_delay_end", lambda self, group: None)
    h = timed(flow, monkeypatch)
    with pytest.raises(ConditionNotMet, match="the newcomer's PodGroup says PreemptionDelayNotElapsed: not reached"):
        run(suite.test_a_newcomer_within_its_preemption_delay_evicts_no_one_until_it_elapses,
            suite.PREEMPTION_DELAY[0], h)  # fmt: skip


def test_a_kai_ending_the_preemption_delay_early_fails_on_its_own_eviction_time(flow, monkeypatch) -> None:
    def early(self, group) -> bool:  # says the delay, but triggers evictions 10 s before it ends
        end = self._delay_end(group)
        return end is not None and self._seconds() < end - 10

    monkeypatch.setattr(KaiConsolidation, "_within_delay", early)
    h = timed(flow, monkeypatch)
    with pytest.raises(AssertionError) as failure:
        run(suite.test_a_newcomer_within_its_preemption_delay_evicts_no_one_until_it_elapses,
            suite.PREEMPTION_DELAY[0], h)  # fmt: skip
    message = str(failure.value)
    assert "the victim was evicted before the newcomer's preemption delay of 30s ended" in message
    assert re.search(r"KAI evicted at \S+ by its own clock \(.+\), 10 s before the protection ended", message)


def test_a_kai_never_ending_the_preemption_delay_fails_a_few_periods_after_it(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiConsolidation, "_within_delay", lambda self, group: self._delay_end(group) is not None)
    h = timed(flow, monkeypatch)
    with pytest.raises(ConditionViolated, match=r"\[evicted-when-due\] VIOLATED: nothing evicted \d+\.\d s after"):
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
