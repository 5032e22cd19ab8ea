"""Counting KAI's refusals of a workload from its ``Unschedulable`` events (suites/support/refusals.py)."""

from __future__ import annotations

from kai_conformance.suites.support.refusals import kai_refusals, occurrences
from kai_conformance.suites.support.snapshot import Snapshot
from tests import builders


def counted(event: dict, count: int | None = None, series: int | None = None) -> dict:
    if count is not None:
        event["count"] = count
    if series is not None:
        event["series"] = {"count": series}
    return event


def workload(pg_events, pod_events=(), other_events=()) -> Snapshot:
    return Snapshot(taken_at=0.0, pods=tuple(PODS), podgroups=(PG,), events=(*pg_events, *pod_events, *other_events))


OWNER = builders.jobset(name="gang")
PG = builders.podgroup(OWNER)
PODS = [builders.pod("gang-0", unschedulable="gang"), builders.pod("gang-1", unschedulable="gang")]
OTHER_PG = builders.podgroup(builders.jobset(name="other"))


def test_an_event_counts_its_repeats_in_either_api() -> None:
    event = builders.event(PG, "Unschedulable", "no nodes")
    assert occurrences(event) == 1  # written once: count may be absent
    assert occurrences(counted(dict(event), count=7)) == 7  # core/v1 repeats (client-go's correlator)
    assert occurrences(counted(dict(event), count=1, series=9)) == 9  # events.k8s.io/v1 series


def test_the_podgroups_unschedulable_events_are_summed_over_messages() -> None:
    repeats = counted(builders.event(PG, "Unschedulable", "Resources were found for 0 pods"), count=4)
    other_message = counted(builders.event(PG, "Unschedulable", "(combined from similar events): x"), count=3)
    not_a_refusal = counted(builders.event(PG, "NotReady", "Job is not ready for scheduling."), count=20)
    snap = workload([repeats, other_message, not_a_refusal]).of("gang")
    assert kai_refusals(snap) == 7


def test_the_pods_count_when_they_counted_more_than_the_podgroup() -> None:
    pg_event = counted(builders.event(PG, "Unschedulable", "gang"), count=25)  # PodGroup's spam budget spent
    pod_events = [counted(builders.event(PODS[0], "Unschedulable", "gang"), count=31),
                  counted(builders.event(PODS[1], "Unschedulable", "gang"), count=30)]  # fmt: skip
    assert kai_refusals(workload([pg_event], pod_events).of("gang")) == 31


def test_other_workloads_events_do_not_count() -> None:
    mine = counted(builders.event(PG, "Unschedulable", "gang"), count=2)
    theirs = counted(builders.event(OTHER_PG, "Unschedulable", "gang"), count=50)
    snap = Snapshot(taken_at=0.0, pods=tuple(PODS), podgroups=(PG, OTHER_PG), events=(mine, theirs))
    assert kai_refusals(snap.of("gang")) == 2


def test_no_podgroup_no_count_and_no_events_zero() -> None:
    assert kai_refusals(Snapshot(taken_at=0.0, pods=tuple(PODS)).of("gang")) is None
    assert kai_refusals(workload([]).of("gang")) == 0
