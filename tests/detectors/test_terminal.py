"""The detectors of states that must stay (suites/support/detectors/terminal.py) hold on conforming snapshots and
fire on violating ones, each naming what broke: a failed TrainJob that made its JobSet again or lost ``Failed``
(Trainer #3779, #3737), a bound gang whose PodGroup still says ``UnschedulableOnNodePool`` (KAI #1888)."""

from __future__ import annotations

from typing import Any

from kai_conformance.suites.support.detectors.terminal import (
    failed_stays_failed,
    jobset_follows_suspend,
    unschedulable_cleared,
    unschedulable_said,
)
from kai_conformance.suites.support.snapshot import Snapshot
from tests import builders as b


def _failed(owner: dict[str, Any], status: str = "True") -> dict[str, Any]:
    return {**owner, "status": {"conditions": [{"type": "Failed", "status": status, "reason": "ReachedMaxRestarts"}]}}


def _snap(trainjob: dict[str, Any], *jobsets: dict[str, Any]) -> Snapshot:
    return Snapshot(0.0, trainjobs=(trainjob,), jobsets=jobsets).of("gang")


def test_failed_stays_failed_holds_while_the_failed_jobset_stays_or_is_gone() -> None:
    trainjob = _failed(b.trainjob())
    old = b.jobset(trainjob)
    for snap in (_snap(trainjob, old), _snap(trainjob)):
        verdict = failed_stays_failed(snap, old["metadata"]["uid"])
        assert verdict.ok, verdict


def test_failed_stays_failed_fires_on_a_jobset_made_again() -> None:
    """Trainer v2.3.0 after the failed JobSet's TTL (#3779) or deletion (#3737): a new JobSet, restarts from 0."""
    trainjob = _failed(b.trainjob())
    old, new = b.jobset(trainjob), b.jobset(trainjob)
    new["status"] = {"restarts": 0}
    verdict = failed_stays_failed(_snap(trainjob, new), old["metadata"]["uid"])
    assert not verdict.ok and verdict.detector == "failed-stays-failed"
    assert "made its JobSet again" in verdict.explanation and new["metadata"]["uid"] in verdict.explanation
    assert "restart budget starts anew" in verdict.explanation


def test_failed_stays_failed_fires_on_a_failed_condition_removed() -> None:
    old = b.jobset(b.trainjob())
    removed = failed_stays_failed(_snap(b.trainjob()), old["metadata"]["uid"])
    assert not removed.ok and "lost its Failed condition (removed)" in removed.explanation
    cleared = failed_stays_failed(_snap(_failed(b.trainjob(), "False")), old["metadata"]["uid"])
    assert not cleared.ok and "now False" in cleared.explanation
    assert not failed_stays_failed(Snapshot(0.0).of("gang"), "x").ok  # no TrainJob: never a silent pass


def _gang_snap(bound: int, conditions: list[dict[str, Any]]) -> Snapshot:
    owner = b.jobset(name="gang")
    pods = b.gang(2, bound)
    return Snapshot(0.0, pods=tuple(pods), podgroups=(b.podgroup(owner, conditions=conditions),)).of("gang")


def test_unschedulable_cleared_fires_on_a_bound_gang_still_called_unschedulable() -> None:
    """KAI v0.16.8 (#1888): the condition written while the gang waited stays after it is bound."""
    stale = b.unschedulable_condition("Unschedulable", "Resources were found for 1 pods while 2 are required")
    verdict = unschedulable_cleared(_gang_snap(2, [stale]), 2)
    assert not verdict.ok and verdict.detector == "unschedulable-cleared"
    assert "still says UnschedulableOnNodePool while all 2 pods are bound" in verdict.explanation
    assert "Resources were found for 1 pods" in verdict.explanation


def test_unschedulable_cleared_holds_once_kai_cleared_it_and_never_before_the_gang_is_bound() -> None:
    assert unschedulable_cleared(_gang_snap(2, []), 2).ok
    cleared = {**b.unschedulable_condition("Unschedulable", "gone"), "status": "False"}
    assert unschedulable_cleared(_gang_snap(2, [cleared]), 2).ok
    early = unschedulable_cleared(_gang_snap(1, []), 2)
    assert not early.ok and "only 1 of 2 pods bound" in early.explanation


def test_unschedulable_said_is_the_precondition() -> None:
    said = unschedulable_said(_gang_snap(0, [b.unschedulable_condition("Unschedulable", "no room")]))
    assert said.ok and "no room" in said.explanation
    assert not unschedulable_said(_gang_snap(0, [])).ok


def test_jobset_follows_suspend_fires_where_the_jobset_did_not_follow() -> None:
    """Trainer #3008: JobSet's webhook refused Trainer's apply, so the JobSet keeps running (or stays suspended)."""
    for wanted in (True, False):
        trainjob = {**b.trainjob(), "spec": {"suspend": wanted}}
        jobset = {**b.jobset(trainjob), "spec": {"suspend": not wanted}}
        verdict = jobset_follows_suspend(_snap(trainjob, jobset))
        assert not verdict.ok and verdict.detector == "jobset-follows-suspend"
        assert (
            f"spec.suspend {str(wanted).lower()} but its JobSet still {str(not wanted).lower()}" in verdict.explanation
        )
        assert "#3008" in verdict.explanation
        assert jobset_follows_suspend(_snap(trainjob, {**jobset, "spec": {"suspend": wanted}})).ok
    assert not jobset_follows_suspend(_snap(b.trainjob())).ok  # no JobSet: never a silent pass
