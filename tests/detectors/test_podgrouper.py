"""The SubGroup-floor detector (``subgroup-floor``) fires on a timeline where a leaf SubGroup stays bound below its
``minMember`` (what KAI up to v0.17.0 does with PR #2096's case) and stays quiet on correct ones: nothing bound, a
floor bound whole, a floor bound pod by pod within the grace, an elastic SubGroup above its floor. Also the KAI
row's PR #2096 gap per release. And the PodGroup API detectors (KAI #1944): ``no-gang-podgroup-accepted`` fires on a
refusal, quoting it, and holds on acceptance; ``podgroup-floor-enforced`` fires where a PodGroup below every floor
was accepted."""

from __future__ import annotations

import pytest

from kai_conformance.suites.support.detectors.gang import SubGroupFloorWatch, leaf_floors, subgroups_at_floor
from kai_conformance.suites.support.detectors.podgrouper import no_gang_podgroup_accepted, podgroup_floor_enforced
from kai_conformance.suites.support.expectations import KAI_ROWS, kai_row
from kai_conformance.suites.support.snapshot import Snapshot, parse_time
from tests import builders as b

T0 = parse_time(b.T0) or 0.0
#: The PodGroup of the case: root minSubGroup 1 over ``aux`` (floor 3, 2 pods) and ``node`` (floor 1).
SPEC = {
    "minSubGroup": 1,
    "subGroups": [
        {"name": "aux", "minSubGroup": 1},
        {"name": "aux-replica-0", "parent": "aux", "minMember": 3},
        {"name": "node", "minSubGroup": 1},
        {"name": "node-replica-0", "parent": "node", "minMember": 1},
    ],
}


def pods(aux_bound: int, node_bound: int = 0, aux: int = 2) -> list[dict]:
    """The case's pods, labelled with their SubGroups, the first ``aux_bound`` of aux's and ``node_bound`` bound."""
    made = [
        b.pod(f"floor-aux-{i}", workload="floor", node="node-a" if i < aux_bound else None,
              labels={"kai.scheduler/subgroup-name": "aux-replica-0"})
        for i in range(aux)
    ]  # fmt: skip
    node = b.pod("floor-node-0", workload="floor", node="node-b" if node_bound else None,
                 labels={"kai.scheduler/subgroup-name": "node-replica-0"})  # fmt: skip
    return [*made, node]


def snap(members: list[dict], taken_at: float = T0, spec: dict | None = None) -> Snapshot:
    pg = b.podgroup(b.jobset(name="floor"), spec=spec if spec is not None else SPEC)
    return Snapshot(taken_at=taken_at, pods=tuple(members), podgroups=(pg,))


def over(timeline: list[Snapshot], grace: float = 5, floors: dict[str, int] | None = None):
    """The watch's verdict after the last snapshot, or at the first violation."""
    watch = SubGroupFloorWatch(grace, floors)
    verdict = None
    for seen in timeline:
        verdict = watch.observe(seen)
        if not verdict.ok:
            break
    return verdict


def test_leaf_floors_are_the_subgroups_no_other_names_as_its_parent() -> None:
    assert leaf_floors({"spec": SPEC}) == {"aux-replica-0": 3, "node-replica-0": 1}
    assert leaf_floors({"spec": {"minMember": 2}}) == {}


def test_a_subgroup_left_below_its_floor_fires_naming_it_its_floor_and_for_how_long() -> None:
    buggy = [snap(pods(aux_bound=2), T0 + t) for t in range(8)]  # v0.17.0: aux's 2 pods bound, floor 3
    verdict = over(buggy)
    assert not verdict.ok and verdict.detector == "subgroup-floor"
    assert verdict.explanation.startswith("SubGroup aux-replica-0: 2 of its floor 3 bound (node-a×2), for 6.0s")
    assert "aux-replica-0 2/3, node-replica-0 0/1" in verdict.explanation


def test_correct_timelines_stay_quiet() -> None:
    fixed = [snap(pods(aux_bound=0), T0 + t) for t in range(20)]  # the fix: nothing bound
    verdict = over(fixed)
    assert verdict.ok and "aux-replica-0 0/3, node-replica-0 0/1" in verdict.explanation
    whole = [snap(pods(aux_bound=3, node_bound=1, aux=3), T0 + t) for t in range(20)]  # every floor reached
    assert over(whole).ok
    pod_by_pod = [snap(pods(aux_bound=n, aux=3), T0 + t) for t, n in enumerate((0, 1, 2, 2, 3, 3, 3, 3, 3, 3))]
    verdict = over(pod_by_pod)  # the binder binds a floor's pods one by one, within the grace
    assert verdict.ok and "longest such moment at most 3.0s" in verdict.explanation
    evicted = [snap(pods(aux_bound=n, aux=3), T0 + t) for t, n in enumerate((3, 1, 0, 0, 0, 0, 0, 0))]
    assert over(evicted).ok  # and the evictor deletes them one by one


def test_an_elastic_subgroup_above_its_floor_is_not_below_it() -> None:
    elastic = {**SPEC, "subGroups": [{"name": "aux", "minSubGroup": 1},
                                     {"name": "aux-replica-0", "parent": "aux", "minMember": 1}]}  # fmt: skip
    timeline = [snap(pods(aux_bound=1), T0 + t, elastic) for t in range(10)]
    assert over(timeline).ok
    verdict = over(timeline, floors={"aux-replica-0": 2})  # judged as if the floor were every pod: a control
    assert not verdict.ok and "SubGroup aux-replica-0: 1 of its floor 2 bound" in verdict.explanation


def test_the_one_look_verdict_and_what_cannot_be_judged() -> None:
    assert not subgroups_at_floor(snap(pods(aux_bound=2))).ok
    assert subgroups_at_floor(snap(pods(aux_bound=0))).ok
    none = Snapshot(taken_at=T0, pods=tuple(pods(aux_bound=2)))
    assert not subgroups_at_floor(none).ok and "expected one PodGroup" in subgroups_at_floor(none).explanation
    flat = subgroups_at_floor(snap(pods(aux_bound=2), spec={"minMember": 3}))
    assert not flat.ok and "no SubGroup with a minMember to judge" in flat.explanation
    assert not over([snap(pods(aux_bound=2), spec={"minMember": 3})]).ok


@pytest.mark.parametrize(
    ("version", "gap"),
    [("v0.13.0", True), ("v0.14.7", True), ("v0.15.3", True), ("v0.16.8", True), ("v0.17.0", True),
     ("v0.17.1", True), ("v0.17.2", False), ("v0.17.5", False)],
)  # fmt: skip
def test_the_kai_rows_name_pr_2096_up_to_the_release_with_the_fix(version: str, gap: bool) -> None:
    found = kai_row(version).podset_floor_gap(version)
    assert bool(found) is gap
    if found:
        assert found.startswith("KAI PR #2096")


def test_only_the_v017_row_names_a_release_with_the_fix() -> None:
    assert {minor: row.podset_floor_fixed_in for minor, row in KAI_ROWS.items()} == {
        "v0.13": None, "v0.14": None, "v0.15": None, "v0.16": None, "v0.17": "v0.17.2",
    }  # fmt: skip
    assert "v0.17.2 [inferred]" in (KAI_ROWS["v0.17"].podset_floor_gap("v0.17.1") or "")
    # The read main and v0.17 heads of 2026-08-07 predate the fix (b1a4be07, #2152: suites/support/known_bugs.py);
    # an unread build counts as newer than every release, which the fixed branches' heads are.
    assert (KAI_ROWS["v0.17"].podset_floor_gap("main") or "").startswith("KAI PR #2096 in main")
    assert KAI_ROWS["v0.17"].podset_floor_gap("v0.17") is not None
    assert KAI_ROWS["v0.17"].podset_floor_gap("pr-42") is None


REFUSAL = (
    'PodGroup.scheduling.run.ai "no-gang-min-member" is invalid: spec.minMember: Invalid value: 0: spec.minMember in '
    "body should be greater than or equal to 1"
)


def test_no_gang_accepted_fires_on_a_refusal_quoting_it_and_holds_on_acceptance() -> None:
    refused = no_gang_podgroup_accepted(
        [("no-gang-min-member", "spec.minMember 0", REFUSAL), ("no-gang-min-subgroup", "spec.minSubGroup 0", None)]
    )
    assert refused.detector == "no-gang-podgroup-accepted" and not refused.ok
    assert refused.explanation == (
        f"the API server refuses a PodGroup without a gang: PodGroup no-gang-min-member (spec.minMember 0): refused: "
        f"{REFUSAL}; PodGroup no-gang-min-subgroup (spec.minSubGroup 0): accepted (dry-run)"
    )
    accepted = no_gang_podgroup_accepted([("a", "spec.minMember 0", None), ("b", "spec.minSubGroup 0", None)])
    assert accepted.ok and not accepted.vacuous and "refused" not in accepted.explanation
    nothing = no_gang_podgroup_accepted([])
    assert not nothing.ok and "nothing to judge" in nothing.explanation


def test_floor_enforced_fires_where_a_podgroup_below_every_floor_is_accepted() -> None:
    held = podgroup_floor_enforced(("below-every-floor", "spec.minMember -1", "should be greater than or equal to 0"))
    assert held.ok and "refused: should be greater than or equal to 0" in held.explanation
    fired = podgroup_floor_enforced(("below-every-floor", "spec.minMember -1", None))
    assert (
        not fired.ok
        and "validates no PodGroup bound" in fired.explanation
        and "accepted (dry-run)" in fired.explanation
    )
