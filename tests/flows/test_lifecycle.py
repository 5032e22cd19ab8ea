"""The lifecycle suite end to end on the simulated cluster (harness: tests/flows/__init__.py). Workloads end by the same
environment variables as on a real cluster (the simulated kubelet follows ``clusters.suite_stack.planned_end``);
their lifetimes are cluster seconds on a StepClock (0.5 s per snapshot), so a 20 s workload ends within 40
snapshots. Ending, restarting and releasing are modelled in tests/fakes/kubelet.py, job_controller.py,
jobset_lifecycle.py and kai/lifecycle.py.

Without a fault every case passes and records what it saw; a KAI broken in the way each detector is about fails the
case naming it: GPUs of ended pods kept (``queue-released``, ``podgroup-after-end``, ``took-the-freed-gpus``), a
stale-gang eviction that does not see completed pods (``completing-gang-spared``: the strict xfail of the releases
without the fix, KAI #1968), a restarted or resumed gang bound one pod short (``gang-never-partial``), BindRequests without
owner (``nothing-left``); the JobSet version decides the ``RestartingJobSet`` condition; the control fires, and
fails when its detector is blind.
"""

from __future__ import annotations

import dataclasses
import time
import types

import pytest
import tenacity

from kai_conformance.fixtures import waits
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated, TimeoutPolicy
from kai_conformance.suites import test_lifecycle as suite
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import jobset_row
from kai_conformance.suites.support.expectations.lifecycle import KAI_LIFECYCLE_ROWS, STALE_GANG_ACTION
from tests.fakes.controllers import Faults
from tests.fakes.jobset_lifecycle import JobSetLifecycle
from tests.flows import NAMESPACE, Harness, StepClock

#: Cluster seconds between two snapshots.
STEP = 0.5
#: Budgets in cluster seconds (the waits' clock below): a few dozen snapshots, and a settle time (5 periods) of ten.
TIMEOUTS = TimeoutPolicy(overrides={"schedule": 10, "running": 10, "gc": 10, "api": 5})


def lifecycle(flow, monkeypatch, faults: Faults | None = None) -> Harness:
    """A flow on a StepClock whose waits count cluster time: a budget ends once that much cluster time has passed
    in snapshots (or, as a backstop for waits that take none, that much real time), so a 20 s workload ends within
    its budget however slowly a loaded machine takes the snapshots."""
    clock = StepClock(STEP)
    real, cluster = time.monotonic(), clock.now.timestamp()

    def monotonic() -> float:
        return real + max(time.monotonic() - real, clock.now.timestamp() - cluster)

    shim = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("_")})
    shim.monotonic = monotonic
    monkeypatch.setattr(waits, "time", shim)
    monkeypatch.setattr(tenacity, "time", shim)
    return flow(faults, clock=clock, timeouts=TIMEOUTS)


def run(test, case, h: Harness, **extra) -> None:
    test(case, **h.args(), **extra)


def verdicts(h: Harness) -> dict[str, Verdict]:
    return {v.detector: v for v in h.record.record.verdicts}


class Request:
    """What a suite test asks of pytest's ``request``: the markers it applies (the strict xfail)."""

    def __init__(self) -> None:
        self.markers: list[pytest.MarkDecorator] = []

    def applymarker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker)


# ----------------------------------------------------------------------------------------------------- completion
def test_a_completed_gang_releases_its_queue_and_the_waiting_gang_takes_the_gpus(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)
    run(suite.test_a_completed_gang_releases_its_gpus_to_a_gang_that_waited_whole, suite.COMPLETION[0], h)
    seen = verdicts(h)
    for detector in ("trainjob-complete", "pods-ended", "queue-released", "podgroup-after-end",
                     "completing-gang-spared", "took-the-freed-gpus"):  # fmt: skip
        assert seen[detector].ok, seen[detector]
    assert "AllJobsCompleted" in seen["trainjob-complete"].explanation
    assert "jobset completed successfully" in seen["trainjob-complete"].explanation
    assert "none 0.0s after its last pod ended" in seen["queue-released"].explanation


def test_a_kai_keeping_the_gpus_of_ended_pods_fails_the_release(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch, Faults(ended_pods_hold_gpus=True))
    with pytest.raises(ConditionNotMet) as failure:
        run(suite.test_a_completed_gang_releases_its_gpus_to_a_gang_that_waited_whole, suite.COMPLETION[0], h)
    assert "waiting takes its GPUs whole" in str(failure.value)
    assert "0 of 2 pods bound" in str(failure.value)


# ------------------------------------------------------------------------------------------ completing pod by pod
def fixed_in(monkeypatch, version: str) -> None:
    """The v0.17 row as if PR #2012 were in ``version`` (the simulated KAI follows the row as the case does)."""
    fixed = dataclasses.replace(KAI_LIFECYCLE_ROWS["v0.17"], completing_gang_fixed_in=version)
    monkeypatch.setitem(KAI_LIFECYCLE_ROWS, "v0.17", fixed)


def test_on_a_release_with_the_gap_the_case_is_a_strict_xfail_and_fails_naming_the_eviction(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)  # KAI v0.17.0: #1968 is there, the fix is first in v0.17.1
    request = Request()
    with pytest.raises(ConditionViolated) as failure:
        run(suite.test_a_gang_completing_pod_by_pod_is_not_evicted_as_stale, suite.STAGGERED[0], h, request=request)
    (marker,) = request.markers
    assert marker.kwargs["strict"] and marker.kwargs["raises"] is AssertionError
    assert "#1968" in marker.kwargs["reason"] and "inferred" in marker.kwargs["reason"]
    message = str(failure.value)
    assert "completing-gang-spared" in message and STALE_GANG_ACTION in message
    (podgroup,) = h.fake.objects(kinds.POD_GROUP, NAMESPACE)
    assert podgroup["spec"]["stalenessGracePeriod"] == "5s"  # v0.17 reads the pods' annotation: a short case


def test_where_the_release_has_the_fix_a_gang_completing_apart_is_spared(flow, monkeypatch) -> None:
    fixed_in(monkeypatch, "v0.17.0")
    h = lifecycle(flow, monkeypatch)
    request = Request()
    run(suite.test_a_gang_completing_pod_by_pod_is_not_evicted_as_stale, suite.STAGGERED[0], h, request=request)
    assert request.markers == []
    assert verdicts(h)["completing-gang-spared"].ok


def test_a_stale_gang_eviction_blind_to_completed_pods_fails_where_the_fix_is_expected(flow, monkeypatch) -> None:
    fixed_in(monkeypatch, "v0.17.0")
    h = lifecycle(flow, monkeypatch, Faults(stale_eviction_of_completing_gangs=True))
    request = Request()
    with pytest.raises(ConditionViolated, match=r"completing-gang-spared.*Evict event"):
        run(suite.test_a_gang_completing_pod_by_pod_is_not_evicted_as_stale, suite.STAGGERED[0], h, request=request)
    assert request.markers == []  # a real failure, not an expected one


# ------------------------------------------------------------------------------------------------------- restarts
@pytest.mark.parametrize(("jobset", "restarting"), [("v0.12.0", True), ("v0.11.1", False)])
def test_a_failed_pod_restarts_the_gang_whole_until_it_fails(flow, monkeypatch, jobset: str, restarting: bool) -> None:
    monkeypatch.setattr(JobSetLifecycle, "jobset_version", jobset)
    h = lifecycle(flow, monkeypatch)
    h.expect = dataclasses.replace(h.expect, jobset=jobset_row(jobset))
    run(suite.test_a_failed_pod_restarts_the_whole_gang_until_no_restart_is_left, suite.RESTART[0], h)
    seen = verdicts(h)
    assert seen["restarted-whole"].ok and "attempt 1: at most 2 of 2 bound" in seen["restarted-whole"].explanation
    assert seen["jobset-restarts"].ok, seen["jobset-restarts"]
    assert ("RestartingJobSet=False (JobSetFailed)" in seen["jobset-restarts"].explanation) is restarting
    assert "ReachedMaxRestarts" in seen["jobset-restarts"].explanation
    assert seen["queue-released"].ok
    jobset_obj = h.fake.get(kinds.JOB_SET, "restarts", NAMESPACE)
    assert jobset_obj["status"]["restarts"] == 1 and jobset_obj["status"]["terminalState"] == "Failed"


def test_a_restarted_gang_bound_one_short_fails_as_a_partial_gang(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch, Faults(regrouped_gang_bound_one_short=True))
    with pytest.raises(ConditionViolated, match=r"gang-never-partial.*1 of 2 pods bound"):
        run(suite.test_a_failed_pod_restarts_the_whole_gang_until_no_restart_is_left, suite.RESTART[0], h)


# ------------------------------------------------------------------------------------------------ suspend, resume
@pytest.mark.parametrize("case", suite.SUSPEND, ids=lambda c: c.id)
def test_a_suspended_gang_releases_everything_and_comes_back_whole(flow, monkeypatch, case) -> None:
    h = lifecycle(flow, monkeypatch)
    run(suite.test_a_suspended_gang_releases_everything_and_resumes_whole_or_waits_whole, case, h, kube=h.fake)
    seen = verdicts(h)
    assert seen["queue-released"].ok and seen["trainjob-suspended"].ok
    assert "Resumed" in seen["trainjob-suspended"].explanation


def test_a_suspended_gang_whose_gpus_kai_keeps_fails_the_release(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch, Faults(ended_pods_hold_gpus=True))
    with pytest.raises(AssertionError, match=r"queue-released.*still holds 6 GPU"):
        run(suite.test_a_suspended_gang_releases_everything_and_resumes_whole_or_waits_whole, suite.SUSPEND[0], h,
            kube=h.fake)  # fmt: skip


@pytest.mark.parametrize("case", suite.SUSPEND, ids=lambda c: c.id)
def test_a_resumed_gang_bound_partially_fails(flow, monkeypatch, case) -> None:
    h = lifecycle(flow, monkeypatch, Faults(regrouped_gang_bound_one_short=True))
    with pytest.raises(ConditionViolated, match=r"gang-never-partial.*\d of 6 pods bound"):
        run(suite.test_a_suspended_gang_releases_everything_and_resumes_whole_or_waits_whole, case, h, kube=h.fake)


# --------------------------------------------------------------------------------------------------------- deletion
@pytest.mark.parametrize("case", suite.DELETION, ids=lambda c: c.id)
def test_a_deleted_trainjob_leaves_nothing(flow, monkeypatch, case) -> None:
    h = lifecycle(flow, monkeypatch)
    run(suite.test_a_deleted_trainjob_leaves_nothing_behind_and_frees_its_gpus, case, h)
    seen = verdicts(h)
    assert seen["nothing-left"].ok and seen["queue-released"].ok


def test_bindrequests_left_behind_fail_the_deletion(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch, Faults(bindrequests_without_owner=True))
    with pytest.raises(ConditionNotMet, match=r"nothing-left.*BindRequest doomed-node-0-0"):
        run(suite.test_a_deleted_trainjob_leaves_nothing_behind_and_frees_its_gpus, suite.DELETION[1], h)


# ---------------------------------------------------------------------------------------------------------- control
def test_the_control_sees_the_completion_detector_fire_on_a_failed_gang(flow, monkeypatch) -> None:
    h = lifecycle(flow, monkeypatch)
    run(suite.test_control_the_completion_detector_fires_on_a_gang_that_failed, suite.CONTROL[0], h)
    fired, failed = h.record.record.verdicts[-2:]
    assert fired.detector == "trainjob-complete" and fired.expect_violation and not fired.ok and fired.as_expected
    assert "Failed, not Complete" in fired.explanation and "FailedJobs" in fired.explanation
    assert failed.detector == "trainjob-failed" and failed.ok and not failed.expect_violation


def test_the_control_fails_when_the_completion_detector_is_blind(flow, monkeypatch) -> None:
    monkeypatch.setattr(suite, "trainjob_ended", blind_to_completion(suite.trainjob_ended))
    h = lifecycle(flow, monkeypatch)
    with pytest.raises(AssertionError, match="the completion detector did not fire on a TrainJob that failed"):
        run(suite.test_control_the_completion_detector_fires_on_a_gang_that_failed, suite.CONTROL[0], h)


def blind_to_completion(detector):
    """The completion detector made blind: it says every TrainJob completed; other conditions it judges as before."""

    def judged(snap, kind, reason=None):
        if kind == "Complete":
            return Verdict("trainjob-complete", True, "nothing to report")
        return detector(snap, kind, reason)

    return judged
