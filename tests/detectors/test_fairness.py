"""The fair-share detectors: KAI's division reproduced on the cases the proportion plugin's own rules decide, and
each detector firing on a violating snapshot with an explanation that names queues, holdings and shares."""

from __future__ import annotations

import pytest

from kai_conformance.suites.support.detectors.fairness import (
    QueueShare,
    ShareTrace,
    fair_shares,
    held_by_queue,
    in_quota_kept,
    queue_holds,
    shares_settled,
)
from kai_conformance.suites.support.snapshot import Snapshot
from tests import builders as b


def team(queue: str, gangs: int, bound: int, gang: int = 2, prefix: str | None = None) -> tuple[list, list]:
    """``gangs`` gangs of ``gang`` 1-GPU pods in ``queue``, the first ``bound`` of them bound; (pods, PodGroups)."""
    pods, groups = [], []
    for i in range(gangs):
        workload = f"{prefix or queue}-{i}"
        groups.append(b.podgroup(b.jobset(name=workload), spec={"queue": queue}))
        pods += [b.pod(f"{workload}-{j}", workload=workload, node="node-a" if i < bound else None) for j in range(gang)]
    return pods, groups


def snap_of(*teams: tuple[list, list], taken_at: float = 0.0) -> Snapshot:
    pods = [p for t in teams for p in t[0]]
    groups = [g for t in teams for g in t[1]]
    return Snapshot(taken_at=taken_at, pods=tuple(pods), podgroups=tuple(groups))


@pytest.mark.parametrize(
    ("total", "queues", "expected"),
    [
        (12, {"a": QueueShare("a", 12), "b": QueueShare("b", 12)}, {"a": 6, "b": 6}),
        (12, {"a": QueueShare("a", 12, weight=1), "b": QueueShare("b", 12, weight=3)}, {"a": 3, "b": 9}),
        # A higher priority bucket takes all it asks for before the default bucket's weights count.
        (12, {"a": QueueShare("a", 12, weight=3), "b": QueueShare("b", 12, priority=200)}, {"a": 0, "b": 12}),
        (12, {"a": QueueShare("a", 5, weight=3), "b": QueueShare("b", 12, priority=200)}, {"a": 0, "b": 12}),
        # Deserved quota comes first, whatever the priority.
        (12, {"a": QueueShare("a", 12, quota=4), "b": QueueShare("b", 12, priority=200)}, {"a": 4, "b": 8}),
        # A queue asking for less gets what it asks; the rest goes to the other in a further round.
        (12, {"a": QueueShare("a", 2, weight=1), "b": QueueShare("b", 12, weight=1)}, {"a": 2, "b": 10}),
        # Rounds give whole GPUs; the rounded-off remainder goes one by one to the largest fractions.
        (10, {"a": QueueShare("a", 10, weight=1), "b": QueueShare("b", 10, weight=3)}, {"a": 3, "b": 7}),
        (12, {"a": QueueShare("a", 12, weight=0), "b": QueueShare("b", 12, weight=1)}, {"a": 0, "b": 12}),
        (12, {"a": QueueShare("a", 12, limit=4), "b": QueueShare("b", 12)}, {"a": 4, "b": 8}),
        (12, {"a": QueueShare("a", 12, quota=-1), "b": QueueShare("b", 12)}, {"a": 12, "b": 0}),
    ],
    ids=[
        "equal",
        "1-to-3",
        "priority-bucket",
        "bucket-asks-less",
        "quota-first",
        "asks-less",
        "rounding",
        "zero-weight",
        "limit",
        "unlimited-quota",
    ],
)
def test_fair_shares_follow_kais_division(total: float, queues: dict, expected: dict) -> None:
    assert fair_shares(total, queues) == expected


def test_held_gpus_count_bound_live_pods_by_the_queue_of_their_podgroup() -> None:
    a_pods, a_groups = team("qa", 3, bound=2)
    b_pods, b_groups = team("qb", 2, bound=1)
    b_pods[0]["metadata"]["deletionTimestamp"] = b.at(5)  # an evicted pod no longer counts
    assert held_by_queue(snap_of((a_pods, a_groups), (b_pods, b_groups))) == {"qa": 4, "qb": 1}


SHARES = {"qa": QueueShare("light", 12, weight=1), "qb": QueueShare("heavy", 12, weight=3)}


def test_fair_share_detector_passes_within_one_gang_and_fires_beyond_naming_each_queue() -> None:
    settled = shares_settled(snap_of(team("qa", 2, 2), team("qb", 4, 4)), SHARES, 12, 2)
    assert settled.ok
    assert settled.explanation.startswith("light holds 4 GPU(s), fair share 3; heavy holds 8 GPU(s), fair share 9")
    equal = shares_settled(snap_of(team("qa", 3, 3), team("qb", 3, 3)), SHARES, 12, 2)
    assert not equal.ok
    assert equal.detector == "fair-share"
    assert "light holds 6 GPU(s), fair share 3 (off by more than the tolerance)" in equal.explanation
    assert "heavy holds 6 GPU(s), fair share 9 (off by more than the tolerance)" in equal.explanation
    assert "(±2 GPUs, one gang; 12 GPUs shared by light: quota 0, weight 1, priority 100, asks 12" in equal.explanation


def test_in_quota_detector_fires_once_a_queue_holds_less_than_its_quota() -> None:
    owner = QueueShare("owner", 12, quota=4)
    assert in_quota_kept(snap_of(team("qa", 2, 2)), "qa", owner).ok
    taken = in_quota_kept(snap_of(team("qa", 2, 1)), "qa", owner)
    assert not taken.ok
    assert taken.explanation == (
        "owner holds 2 GPU(s); its deserved quota is 4 of the 12 it asks: 2 in-quota GPU(s) were taken from it"
    )
    assert in_quota_kept(snap_of(team("qa", 1, 1)), "qa", QueueShare("owner", 2, quota=4)).ok  # asks less


def test_queue_holds_detector() -> None:
    assert queue_holds(snap_of(team("qa", 6, 6)), "qa", "first", 12).ok
    short = queue_holds(snap_of(team("qa", 6, 5)), "qa", "first", 12)
    assert not short.ok and short.explanation == "first holds 10 of the 12 GPU(s) it should"


def test_share_trace_records_every_observation_per_role() -> None:
    trace = ShareTrace({"qa": "light", "qb": "heavy"})
    assert trace.span is None
    trace.observe(snap_of(team("qa", 2, 2), taken_at=10.0))
    trace.observe(snap_of(team("qa", 2, 1), team("qb", 1, 1), taken_at=12.5))
    assert trace.points == {"light": [(10.0, 4.0), (12.5, 2.0)], "heavy": [(10.0, 0.0), (12.5, 2.0)]}
    assert trace.span == (10.0, 12.5)
