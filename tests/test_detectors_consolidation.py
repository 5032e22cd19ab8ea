"""The consolidation and eviction-protection detectors fire on violating snapshots with readable explanations, and
their expectation rows cover every catalogued KAI version (v0.16 without preemption delay, saying why)."""

from __future__ import annotations

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.fixtures import kinds
from kai_conformance.reports.records import PodTimes
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.cases.consolidation import consolidation_off
from kai_conformance.suites.support.detectors.consolidation import (
    all_bound,
    consolidation_recorded,
    evicted_after,
    fragmented,
    go_duration,
    preemption_delay,
    protection_start,
)
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations_consolidation import (
    LAST_START_ANNOTATION,
    consolidation_row,
)
from kai_conformance.suites.support.expectations_fairness import fair_share_row
from kai_conformance.suites.support.snapshot import Snapshot, parse_time
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


@pytest.mark.parametrize("version", sorted(Catalog.load().components["kai"]))
def test_every_catalogued_kai_version_has_fairness_and_consolidation_rows(version: str) -> None:
    assert fair_share_row(version).priority_buckets
    row = consolidation_row(version)
    assert row.max_preemptees == 16 and row.queue_min_runtime
    assert row.preemption_delay == (ex.minor(version) != "v0.16")


def test_v016_says_why_it_has_no_preemption_delay_and_unknown_rows_name_the_module() -> None:
    assert "arrived in v0.17.0" in (consolidation_row("v0.16.8").no_preemption_delay or "")
    with pytest.raises(ex.UnknownVersion, match=r"expectations_consolidation\.py"):
        consolidation_row("v0.15.2")
    with pytest.raises(ex.UnknownVersion, match=r"expectations_fairness\.py"):
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
