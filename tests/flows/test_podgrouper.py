"""The podgrouper area's SubGroup-floor case (KAI PR #2096) and its control end to end on the simulated cluster, on a
StepClock (tests/flows/test_lifecycle.py ``lifecycle``: the hold and the watch's grace count cluster seconds, so a
loaded machine cannot shorten them). The simulated scheduler reads SubGroups as KAI does (tests/fakes/kai/subgroups.py)
and hands a SubGroup below its floor the pods it has where the KAI row has the gap:

* KAI v0.17.0 (the row's gap): ``aux``'s two pods are bound under a floor of 3, the case fails naming the SubGroup,
  and it is the strict xfail whose reason names the PR;
* the v0.17 row as if the fix were in v0.17.0: nothing is bound, KAI says why, the case passes with no marker;
  a KAI that still binds them there fails the case for real;
* the control fires where a SubGroup is held at its floor, and fails when its detector is blind.
"""

from __future__ import annotations

import dataclasses

import pytest

from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites import test_podgrouper as suite
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import KAI_ROWS, SUBGROUP_LABEL
from kai_conformance.suites.support.snapshot import Snapshot
from tests.fakes.kai.scheduler import NOTHING_TO_ALLOCATE, Kai
from tests.flows import NAMESPACE, Harness
from tests.flows.test_lifecycle import Request, lifecycle

CASE = suite.FLOORS[0]


def fixed_in(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """The v0.17 row as if PR #2096 were in ``version``: the simulated KAI reads the row when it is built."""
    monkeypatch.setitem(KAI_ROWS, "v0.17", dataclasses.replace(KAI_ROWS["v0.17"], podset_floor_fixed_in=version))


def harness(flow, monkeypatch: pytest.MonkeyPatch) -> Harness:
    h = lifecycle(flow, monkeypatch)
    h.expect = dataclasses.replace(h.expect, kai=KAI_ROWS["v0.17"])  # the case reads the row from here
    return h


def bound_by_subgroup(h: Harness) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in h.fake.objects(kinds.POD, NAMESPACE):
        leaf = pod["metadata"]["labels"].get(SUBGROUP_LABEL, "-")
        counts[leaf] = counts.get(leaf, 0) + bool(pod["spec"].get("nodeName"))
    return counts


def test_on_a_release_with_the_gap_the_case_is_the_strict_xfail_and_fails_naming_the_subgroup(flow, monkeypatch):
    h = harness(flow, monkeypatch)  # KAI v0.17.0: #2096 is there, the fix is first in v0.17.2
    request = Request()
    with pytest.raises(ConditionViolated) as failure:
        suite.test_no_subgroup_is_bound_below_its_floor(CASE, request, **h.args())
    (marker,) = request.markers
    assert marker.name == "xfail" and marker.kwargs["strict"] and marker.kwargs["raises"] is AssertionError
    assert "#2096" in marker.kwargs["reason"] and "v0.17.2 [inferred]" in marker.kwargs["reason"]
    message = str(failure.value)
    assert "subgroup-floor" in message and "SubGroup aux-replica-0: 2 of its floor 3 bound" in message
    assert h.verdicts() == {"podgroup-shape": True}  # the PodGroup carried the floors: the violation is KAI's
    (podgroup,) = h.fake.objects(kinds.POD_GROUP, NAMESPACE)
    assert podgroup["spec"]["minSubGroup"] == 1
    assert bound_by_subgroup(h) == {"aux-replica-0": 2, "node-replica-0": 0}


def test_where_the_release_has_the_fix_nothing_is_bound_and_the_case_passes(flow, monkeypatch) -> None:
    fixed_in(monkeypatch, "v0.17.0")
    h = harness(flow, monkeypatch)
    request = Request()
    suite.test_no_subgroup_is_bound_below_its_floor(CASE, request, **h.args())
    assert request.markers == []
    held = {v.detector: v for v in h.record.record.verdicts}["subgroup-floor"]
    assert held.ok and "aux-replica-0 0/3, node-replica-0 0/1" in held.explanation
    assert "held the full 15.0s" in held.explanation
    assert bound_by_subgroup(h) == {"aux-replica-0": 0, "node-replica-0": 0}
    pods = h.fake.objects(kinds.POD, NAMESPACE)
    assert all(NOTHING_TO_ALLOCATE in p["status"]["conditions"][0]["message"] for p in pods)


def test_a_kai_binding_below_the_floor_where_the_fix_is_expected_fails_the_case(flow, monkeypatch) -> None:
    fixed_in(monkeypatch, "v0.17.0")
    monkeypatch.setattr(Kai, "ignores_podset_floors", True)
    h = harness(flow, monkeypatch)
    request = Request()
    with pytest.raises(ConditionViolated, match=r"subgroup-floor.*aux-replica-0: 2 of its floor 3"):
        suite.test_no_subgroup_is_bound_below_its_floor(CASE, request, **h.args())
    assert request.markers == []  # a real failure, not an expected one


def test_on_a_flat_release_the_case_skips_saying_why(flow, monkeypatch) -> None:
    h = harness(flow, monkeypatch)
    h.expect = dataclasses.replace(h.expect, kai=KAI_ROWS["v0.15"])
    with pytest.raises(pytest.skip.Exception, match="flat PodGroups: no SubGroup floor to judge"):
        suite.test_no_subgroup_is_bound_below_its_floor(CASE, Request(), **h.args())


def test_the_control_fires_on_a_subgroup_held_at_its_floor(flow, monkeypatch) -> None:
    h = harness(flow, monkeypatch)
    suite.test_control_the_subgroup_floor_detector_fires_on_a_subgroup_judged_against_a_higher_floor(
        suite.FLOOR_CONTROL[0], **h.args()
    )
    (fired,) = [v for v in h.record.record.verdicts if v.expect_violation]
    assert fired.detector == "subgroup-floor" and not fired.ok
    assert "SubGroup node-replica-0: 1 of its floor 2 bound" in fired.explanation
    assert bound_by_subgroup(h) == {"node-replica-0": 1}


class BlindWatch:
    """A SubGroup-floor detector that never sees a SubGroup below its floor."""

    def __init__(self, grace: float, floors=None) -> None:
        self.grace = grace

    def observe(self, snap: Snapshot) -> Verdict:
        return Verdict("subgroup-floor", True, "blind")


def test_the_control_fails_when_its_detector_is_blind(flow, monkeypatch) -> None:
    monkeypatch.setattr(suite, "SubGroupFloorWatch", BlindWatch)
    h = harness(flow, monkeypatch)
    with pytest.raises(ConditionNotMet, match="held at 1 of 2 bound pods"):
        suite.test_control_the_subgroup_floor_detector_fires_on_a_subgroup_judged_against_a_higher_floor(
            suite.FLOOR_CONTROL[0], **h.args()
        )
