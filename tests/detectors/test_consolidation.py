"""The consolidation and eviction-protection detectors fire on violating snapshots with readable explanations, and
their expectation rows cover every catalogued KAI version (v0.16 without preemption delay, saying why)."""

from __future__ import annotations

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.reports.records import PodTimes
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.cases.consolidation import consolidation_off
from kai_conformance.suites.support.detectors.consolidation import (
    ProtectionWindow,
    all_bound,
    consolidation_recorded,
    evicted_after,
    evicted_when_due,
    fragmented,
    go_duration,
    kai_eviction_time,
    preemption_delay,
    protected_until_end,
    protection_start,
    stated_delay_end,
)
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.consolidation import (
    LAST_EVICTION_ANNOTATION,
    LAST_START_ANNOTATION,
    PREEMPTION_DELAY_REASON,
    consolidation_row,
)
from kai_conformance.suites.support.expectations.fairness import fair_share_row
from kai_conformance.suites.support.snapshot import Snapshot, parse_time
from kai_conformance.suites.support.windows import delay_window, min_runtime_window
from tests import builders as b


def filler(name: str, node: str | None) -> dict:
    return b.pod(f"{name}-0", workload=name, node=node)


def snap(*pods: dict, **others) -> Snapshot:
    return Snapshot(taken_at=0.0, pods=tuple(pods), **{k: tuple(v) for k, v in others.items()})


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m0s", 300), ("1h2m3.5s", 3723.5), ("300ms", 0.3), ("2m", 120)]
)
def test_go_durations_parse_as_kai_writes_them(text: str, seconds: float) -> None:
    assert go_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "30 s", "5x", "s"])
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="not a Go duration"):
        go_duration(text)


def test_fragmented_holds_only_with_the_same_gpus_in_use_on_every_node() -> None:
    even = snap(filler("a", "n1"), filler("b", "n2"))
    assert fragmented(even, ["n1", "n2"], 1).ok
    uneven = fragmented(snap(filler("a", "n1"), filler("b", "n1")), ["n1", "n2"], 1)
    assert not uneven.ok
    assert uneven.explanation == "GPUs in use per node n1: 2, n2: 0; expected 1 on each"


def test_replacement_detector_names_the_workloads_not_bound_again() -> None:
    ran = {"filler-0": 1, "filler-1": 1, "filler-2": 1}
    assert all_bound(snap(*(filler(n, "n1") for n in ran)), ran).ok
    lost = all_bound(snap(filler("filler-0", "n1"), filler("filler-1", None)), ran)
    assert not lost.ok and lost.detector == "every-moved-pod-replaced"
    assert lost.explanation == (
        "2 of 3 workload(s) that ran before are not bound again: filler-1 (0 of 1 bound), filler-2 (0 of 1 bound)"
    )


def test_consolidation_recorded_needs_an_evict_event_of_action_consolidation() -> None:
    group = b.podgroup(b.jobset(name="filler-0"))
    pod = filler("filler-0", "n1")
    reclaimed = b.event(group, "Evict", "preempted", {ex.EVICT_ACTION_ANNOTATION: "reclaim"})
    assert not consolidation_recorded(snap(pod, podgroups=[group], events=[reclaimed]), ["filler-0"]).ok
    moved = b.event(group, "Evict", "rescheduled due to bin packing", {ex.EVICT_ACTION_ANNOTATION: "consolidation"})
    verdict = consolidation_recorded(snap(pod, podgroups=[group], events=[moved]), ["filler-0", "filler-1"])
    assert verdict.ok and verdict.explanation == "1 workload(s) moved by consolidation: filler-0"


def test_protection_starts_at_the_last_start_stamp_or_says_it_is_missing() -> None:
    stamped = b.podgroup(b.jobset(name="victim"), annotations={LAST_START_ANNOTATION: b.at(7)})
    assert protection_start(snap(podgroups=[stamped]).of("victim")) == parse_time(b.at(7))
    missing = protection_start(snap(podgroups=[b.podgroup(b.jobset(name="victim"))]).of("victim"))
    assert isinstance(missing, Verdict) and not missing.ok
    assert f"has no {LAST_START_ANNOTATION} annotation" in missing.explanation


def test_preemption_delay_detector_compares_durations_not_spellings() -> None:
    group = b.podgroup(b.jobset(name="newcomer"), spec={"preemptionDelay": "0h0m30s"})
    assert preemption_delay(snap(podgroups=[group]).of("newcomer"), 30).ok
    absent = preemption_delay(snap(podgroups=[b.podgroup(b.jobset(name="newcomer"))]).of("newcomer"), 30)
    assert not absent.ok and absent.explanation.endswith("spec.preemptionDelay = None, expected 30s")
    other = b.podgroup(b.jobset(name="newcomer"), spec={"preemptionDelay": "1m0s"})
    wrong = preemption_delay(snap(podgroups=[other]).of("newcomer"), 30)
    assert not wrong.ok and wrong.explanation.endswith("spec.preemptionDelay = '1m0s', expected 30s")


def test_protected_until_end_fires_on_an_eviction_before_the_window_ended() -> None:
    pods = [
        PodTimes("v-0", "victim", evicted=100.0),
        PodTimes("v-1", "victim", evicted=101.0),
        PodTimes("v-2", "victim"),
    ]
    assert evicted_after(pods, 99.0, 6).ok
    early = evicted_after(pods, 110.0, 6)
    assert not early.ok
    assert early.explanation.startswith("first eviction seen 10.0 s before the protection window ended")
    assert not evicted_after([PodTimes("v-0", "victim")], 99.0, 6).ok


# ------------------------------------------------------------------------------------- protection windows
T = parse_time(b.at(0)) or 0.0
#: The real stack's policy: 5 periods of due time, a wall-clock margin of settle (5 s) + 1 s.
REAL = TimeoutPolicy()


def evict_event(group: dict, at: str | None, action: str = "preempt") -> dict:
    event = b.event(group, "Evict", "Pod ns/victim-0 was preempted", {ex.EVICT_ACTION_ANNOTATION: action})
    return {**event, "firstTimestamp": at}


def window(end: float = T + 30, *, exact: bool = True) -> ProtectionWindow:
    return ProtectionWindow("preemptMinRuntime 30s", end, "a stamp", exact, 6.0, end + 5)


def test_the_min_runtime_window_ends_at_kais_last_start_stamp_plus_the_min_runtime() -> None:
    stamped = b.podgroup(b.jobset(name="victim"), annotations={LAST_START_ANNOTATION: b.at(7)})
    found = min_runtime_window("preemptMinRuntime 30s", 30, snap(podgroups=[stamped]).of("victim"), [], REAL)
    assert (found.end, found.exact, found.margin, found.due) == (T + 37, True, 6.0, T + 42)
    assert found.describe() == (
        "preemptMinRuntime 30s from kai.scheduler/last-start-timestamp 2026-11-21T12:00:07Z: protected until "
        "2026-11-21T12:00:37Z (exact: KAI compares its clock with the same timestamp); eviction due within 5 s after it"
    )


def test_without_a_stamp_the_window_is_estimated_from_the_first_bind_with_the_wall_clock_margin() -> None:
    bare = snap(podgroups=[b.podgroup(b.jobset(name="victim"))]).of("victim")
    pods = [PodTimes("v-1", "victim", bound=T + 9), PodTimes("v-0", "victim", bound=T + 8), PodTimes("v-2", "victim")]
    found = min_runtime_window("preemptMinRuntime 30s", 30, bare, pods, REAL)
    assert (found.end, found.exact, found.margin, found.due) == (T + 38, False, 6.0, T + 44)
    assert found.source.startswith("its first bind at 2026-11-21T12:00:08Z, the wall clock (PodGroup ")
    assert "(the wall clock applies: evictions accepted from 6 s before it)" in found.describe()
    nothing = min_runtime_window("preemptMinRuntime 30s", 30, bare, [PodTimes("v-0", "victim")], REAL)
    assert nothing.end == bare.taken_at + 30 and nothing.source.startswith("when the suite saw it bound at ")


def test_the_preemption_delay_ends_at_the_podgroups_creation_plus_the_delay() -> None:
    group = b.podgroup(b.jobset(name="newcomer"))
    group["metadata"]["creationTimestamp"] = b.at(3)
    found = delay_window("preemption delay 30s", 30, group, REAL)
    assert (found.end, found.exact, found.due) == (T + 33, True, T + 38)
    assert "creationTimestamp 2026-11-21T12:00:03Z" in found.source


def test_kais_eviction_time_is_its_earliest_evict_event_or_its_eviction_stamp() -> None:
    group = b.podgroup(b.jobset(name="victim"))
    events = [evict_event(group, b.at(31)), evict_event(group, b.at(30), "reclaim"), evict_event(group, None)]
    assert kai_eviction_time(snap(podgroups=[group], events=events).of("victim")) == (
        T + 30,
        "its Evict event (reclaim)",
    )
    stamped = b.podgroup(b.jobset(name="victim"), annotations={LAST_EVICTION_ANNOTATION: b.at(29)})
    when = kai_eviction_time(snap(podgroups=[stamped], events=[evict_event(stamped, b.at(30))]).of("victim"))
    assert when is not None and when[0] == T + 29 and when[1].endswith(f" {LAST_EVICTION_ANNOTATION}")
    untimed = snap(podgroups=[group], events=[evict_event(group, None)]).of("victim")
    assert kai_eviction_time(untimed) is None and kai_eviction_time(snap().of("victim")) is None


def test_protected_until_end_on_kais_clock_has_no_margin() -> None:
    assert protected_until_end(window(), (T + 30, "its Evict event (preempt)"), []).ok
    early = protected_until_end(window(), (T + 29, "its Evict event (preempt)"), [])
    assert not early.ok and early.detector == "protected-until-end"
    assert early.explanation == (
        "KAI evicted at 2026-11-21T12:00:29Z by its own clock (its Evict event (preempt)), 1 s before the protection "
        "ended at 2026-11-21T12:00:30Z"
    )


def test_without_kais_time_or_an_exact_end_it_falls_back_to_the_wall_clock_and_says_so() -> None:
    seen = [PodTimes("v-0", "victim", evicted=T + 26)]
    fallback = protected_until_end(window(), None, seen)
    assert fallback.ok, "6 s of margin on the suite's observation"
    assert fallback.explanation.endswith("(wall clock: no Evict event or eviction stamp carries KAI's time)")
    assert not protected_until_end(window(), None, [PodTimes("v-0", "victim", evicted=T + 23)]).ok
    estimated = protected_until_end(window(exact=False), (T + 25, "its Evict event (preempt)"), [])
    assert estimated.ok and estimated.explanation.endswith(
        "(wall clock: the end is estimated; KAI's time from its Evict event (preempt))"
    )


def test_evicted_when_due_fires_only_on_a_protected_observation_after_the_due_time() -> None:
    protected, acted = Verdict("gang-undisturbed", True, "all 4 still bound"), Verdict("gang-undisturbed", False, "-")
    assert evicted_when_due(window(), T + 35, protected).ok, "due at the end + 5 s"
    assert evicted_when_due(window(), T + 40, acted).ok
    late = evicted_when_due(window(), T + 35.5, protected)
    assert not late.ok and late.explanation.startswith(
        "nothing evicted 5.5 s after the protection ended at 2026-11-21T12:00:30Z (a stamp): KAI evicts in its first "
        "cycle after the end, due within 5 s; [gang-undisturbed] ok: all 4 still bound"
    )


def test_the_end_kai_states_for_a_preemption_delay_is_read_from_its_condition_or_events() -> None:
    text = "Workload is within its preemption delay window (30s) and may not trigger evictions before " + b.at(33)
    condition = {"type": "UnschedulableOnNodePool", "message": f"{PREEMPTION_DELAY_REASON}: {text}.",
                 "reasons": [{"reason": PREEMPTION_DELAY_REASON, "message": text}]}  # fmt: skip
    group = b.podgroup(b.jobset(name="newcomer"), conditions=[condition])
    assert stated_delay_end(snap(podgroups=[group]).of("newcomer")) == T + 33
    bare = b.podgroup(b.jobset(name="newcomer"))
    evented = snap(podgroups=[bare], events=[b.event(bare, "Unschedulable", f"{PREEMPTION_DELAY_REASON}: {text}.")])
    assert stated_delay_end(evented.of("newcomer")) == T + 33
    assert stated_delay_end(snap(podgroups=[bare]).of("newcomer")) is None


@pytest.mark.parametrize("version", sorted(Catalog.load().components["kai"]))
def test_every_catalogued_kai_version_has_fairness_and_consolidation_rows(version: str) -> None:
    assert fair_share_row(version).priority_buckets
    row = consolidation_row(version)
    assert row.max_preemptees == 16 and row.queue_min_runtime
    assert row.preemption_delay == (ex.minor(version) != "v0.16")


def test_v016_says_why_it_has_no_preemption_delay_and_unknown_rows_name_the_module() -> None:
    assert "arrived in v0.17.0" in (consolidation_row("v0.16.8").no_preemption_delay or "")
    with pytest.raises(ex.UnknownVersion, match=r"expectations/consolidation\.py"):
        consolidation_row("v0.15.2")
    with pytest.raises(ex.UnknownVersion, match=r"expectations/fairness\.py"):
        fair_share_row("v0.18.0")


def shard(name: str = "default", **spec) -> dict:
    return {"apiVersion": kinds.SCHEDULING_SHARD.api_version, "kind": "SchedulingShard", "metadata": {"name": name},
            "spec": {"partitionLabelValue": "", **spec}}  # fmt: skip


@pytest.mark.parametrize(
    ("shards", "reason"),
    [
        ([], None),
        ([shard(placementStrategy={"gpu": "binpack", "cpu": "binpack"})], None),
        ([shard(placementStrategy={"gpu": "spread", "cpu": "binpack"})], "places gpu with spread"),
        ([shard(actions={"consolidation": {"enabled": False}})], "spec.actions.consolidation.enabled"),
        ([shard(args={"max-consolidation-preemptees": "0"})], "max-consolidation-preemptees: 0"),
        ([shard(placementStrategy={"gpu": "spread"}), shard("other", placementStrategy={"gpu": "spread"})], None),
    ],
    ids=["no-shard", "binpack", "spread", "action-disabled", "no-preemptees", "ambiguous"],
)
def test_consolidation_is_read_off_the_shard_that_places_the_suites_workloads(fake, shards, reason) -> None:
    for obj in shards:
        fake.put(obj)
    found = consolidation_off(fake)
    assert found is None if reason is None else reason in (found or "")
    if reason == "places gpu with spread":
        assert "--install always --kai-set scheduler.placementStrategy=binpack" in (found or "")


def test_an_unreadable_shard_assumes_kais_default(fake) -> None:
    fake.unserve(kinds.SCHEDULING_SHARD)
    assert consolidation_off(fake) is None
