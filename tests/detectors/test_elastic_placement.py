"""The elastic and placement detectors fire on violating snapshots and pass on conforming ones, with readable
explanations; the placement setting is read from the cluster as KAI defines it."""

from __future__ import annotations

import pytest

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.detectors.elastic import (
    ElasticMinimumWatch,
    elastic_bound_exactly,
    elastic_minimum_held,
    podgroup_elastic_minimum,
    surplus_evicted_first,
)
from kai_conformance.suites.support.detectors.placement import (
    PlacementStep,
    expected_nodes_used,
    nodes_used_as_expected,
    placements_follow,
)
from kai_conformance.suites.support.expectations.elastic import elastic_row
from kai_conformance.suites.support.placement_setting import active_placement, gpu_use
from kai_conformance.suites.support.snapshot import Snapshot, parse_time, uid_of
from tests import builders as b
from tests.fakes.kube import FakeKube
from tests.fakes.stack import default_shard

T0 = parse_time(b.T0) or 0.0


def snap(*pods: dict, taken_at: float = T0, **others) -> Snapshot:
    return Snapshot(taken_at=taken_at, pods=tuple(pods), **{k: tuple(v) for k, v in others.items()})


# --------------------------------------------------------------------------------------------------- elastic
def test_elastic_minimum_passes_none_or_at_least_the_minimum_and_fires_below_it() -> None:
    assert elastic_minimum_held(snap(*b.gang(4, bound=0)), 2, 4).explanation == "none of the 4 pods bound (4 pending)"
    held = elastic_minimum_held(snap(*b.gang(4, bound=3)), 2, 4)
    assert held.ok
    assert held.explanation == "3 of 4 pods bound (node-a×2, node-b): the minimum 2 and 1 of the surplus; 1 pending"
    below = elastic_minimum_held(snap(*b.gang(4, bound=1)), 2, 4)
    assert not below.ok
    assert below.explanation == "1 of 4 pods bound (node-a), below the gang's minimum 2, while 3 pending"


def test_elastic_watch_tolerates_a_moment_below_the_minimum_but_not_a_lasting_one() -> None:
    watch = ElasticMinimumWatch(3, 4, grace=5)
    assert watch.observe(snap(*b.gang(4, bound=1), taken_at=T0)).ok
    assert watch.observe(snap(*b.gang(4, bound=3), taken_at=T0 + 2)).ok  # bound up to the minimum in time
    assert watch.observe(snap(*b.gang(4, bound=2), taken_at=T0 + 3)).ok
    fired = watch.observe(snap(*b.gang(4, bound=2), taken_at=T0 + 9))
    assert not fired.ok
    assert fired.detector == "elastic-never-below-minimum"
    assert fired.explanation.endswith("for 6.0s (more than the 5s a gang may take to bind or be evicted)")


def test_elastic_size_wants_exactly_the_bound_count_and_the_rest_pending() -> None:
    assert elastic_bound_exactly(snap(*b.gang(4, bound=2)), 2, 4).ok
    grown = elastic_bound_exactly(snap(*b.gang(4, bound=3)), 2, 4)
    assert not grown.ok
    assert grown.explanation.endswith("3 of 4 pods bound (node-a×2, node-b), 1 pending; expected 2 bound and 2 pending")
    missing = elastic_bound_exactly(snap(*b.gang(3, bound=2)), 2, 4)  # the recreated surplus is not there yet
    assert not missing.ok


def test_surplus_first_counts_only_the_pods_bound_before_the_eviction() -> None:
    before = b.gang(4, bound=4)
    original = frozenset(uid_of(p) for p in before)
    replacement = b.pod("gang-9", node="node-a")  # a recreated pod bound again is not a core pod kept
    kept = surplus_evicted_first(snap(*before[:2], replacement), original, 2)
    assert kept.ok
    assert kept.explanation == "2 of the 4 pods bound before still bound (minimum 2): lost 2, within the surplus of 2"
    core_lost = surplus_evicted_first(snap(before[0], replacement), original, 2)
    assert not core_lost.ok
    assert core_lost.explanation == (
        "only 1 of the 4 pods bound before still bound, below the minimum 2: lost 3 although the surplus was 2, "
        "so core pods were evicted"
    )


def test_elastic_podgroup_reads_the_leaf_on_subgroup_rows_and_minmember_on_flat_rows() -> None:
    js = b.jobset()
    leaf = {"name": "node-replica-0", "parent": "node", "minMember": 2}
    tree = b.podgroup(js, spec={"minSubGroup": 1, "subGroups": [{"name": "node", "minSubGroup": 1}, leaf]})
    verdict = podgroup_elastic_minimum(snap(podgroups=[tree]), elastic_row("v0.17.0"), 2, 4)
    assert verdict.ok
    assert verdict.explanation.endswith("spec.subGroups[node-replica-0].minMember = 2 for 4 pods (elastic: 2 surplus)")
    lost = podgroup_elastic_minimum(snap(podgroups=[tree]), elastic_row("v0.16.8"), 3, 4)
    assert not lost.ok
    assert "minMember = 2 for 4 pods, expected 3 (KAI v0.16: minimum from replicatedJob template" in lost.explanation
    flat = b.podgroup(js, spec={"minMember": 4})
    assert not podgroup_elastic_minimum(snap(podgroups=[flat]), elastic_row("v0.15.3"), 2, 4).ok
    assert podgroup_elastic_minimum(snap(podgroups=[flat]), elastic_row("v0.15.3"), 4, 4).ok
    none = podgroup_elastic_minimum(snap(), elastic_row("v0.17.0"), 2, 4)
    assert not none.ok and "found 0" in none.explanation


# ------------------------------------------------------------------------------------------------- placement
CAPACITY = {"a": 4, "b": 4, "c": 4}


def steps_on(nodes: list[str], capacity: dict[str, int] = CAPACITY) -> list[PlacementStep]:
    """One 1-GPU pod after another onto ``nodes``, each step's free map following the previous placements."""
    free, steps = dict(capacity), []
    for i, node in enumerate(nodes):
        steps.append(PlacementStep(f"small-{i}", node, 1, dict(free), capacity))
        free[node] -= 1
    return steps


def test_binpack_accepts_filling_a_node_first_and_names_a_pod_sent_elsewhere() -> None:
    packed = steps_on(["a", "a", "a", "a", "b"])
    assert placements_follow("binpack", packed).ok
    spread = placements_follow("binpack", steps_on(["a", "b", "c"]))
    assert not spread.ok
    assert spread.explanation.startswith("2 of 3 pods not placed on the node with the fewest free GPUs")
    assert "small-1 on b (free before: a 3/4, b 4/4, c 4/4), binpack picks a" in spread.explanation


def test_spread_accepts_one_per_node_first_and_ties_and_names_a_pod_packed() -> None:
    assert placements_follow("spread", steps_on(["b", "a", "c", "c", "a"])).ok  # ties: any of the freest nodes
    packed = placements_follow("spread", steps_on(["a", "a"]))
    assert not packed.ok
    assert "small-1 on a (free before: a 3/4, b 4/4, c 4/4), spread picks b or c" in packed.explanation


def test_spread_compares_free_fractions_and_binpack_free_counts_on_uneven_nodes() -> None:
    uneven = {"big": 8, "small": 2}
    step = PlacementStep("small-0", "big", 1, {"big": 6, "small": 2}, uneven)  # 6/8 < 2/2
    assert not placements_follow("spread", [step]).ok
    assert placements_follow("binpack", [PlacementStep("small-0", "small", 1, {"big": 6, "small": 2}, uneven)]).ok
    full = PlacementStep("small-0", "big", 1, {"big": 6, "small": 0}, uneven)  # no room on small: not a candidate
    assert placements_follow("binpack", [full]).ok
    assert not placements_follow("binpack", []).ok
    with pytest.raises(ValueError, match="unknown placement strategy"):
        placements_follow("random", [step])


def test_nodes_used_is_expected_only_from_empty_alike_nodes() -> None:
    assert expected_nodes_used("binpack", steps_on(["a"] * 4 + ["b"])) == 2
    assert expected_nodes_used("spread", steps_on(["a", "b", "c", "a", "b"])) == 3
    assert expected_nodes_used("binpack", steps_on(["a", "b"], {"a": 4, "b": 2})) is None
    busy = [PlacementStep("small-0", "a", 1, {"a": 3, "b": 4}, {"a": 4, "b": 4})]
    assert expected_nodes_used("binpack", busy) is None
    assert nodes_used_as_expected("binpack", steps_on(["a"] * 4 + ["b"]), 2).ok
    wrong = nodes_used_as_expected("binpack", steps_on(["a", "b", "c"]), 1)
    assert not wrong.ok
    assert wrong.explanation == "3 pods of 1 GPU on 3 node(s) (a×1, b×1, c×1); binpack on empty alike nodes takes 1"


def test_the_active_strategy_comes_from_the_one_shard_of_the_default_partition(fake: FakeKube) -> None:
    fake.put(default_shard("spread"))
    assert active_placement(fake).describe() == "spread (SchedulingShard default spec.placementStrategy.gpu = spread)"
    other = default_shard("binpack")
    other["metadata"]["name"], other["spec"]["partitionLabelValue"] = "gpu-pool-b", "b"
    fake.put(other)  # another partition's shard does not place the suite's workloads
    assert active_placement(fake).gpu == "spread"
    second = default_shard("binpack")
    second["metadata"]["name"] = "duplicate"
    fake.put(second)
    ambiguous = active_placement(fake)
    assert ambiguous.gpu is None
    assert ambiguous.source == (
        "2 SchedulingShards with an empty partitionLabelValue (need one; shards: default, duplicate, gpu-pool-b)"
    )
    fake.unserve(kinds.SCHEDULING_SHARD)
    assert active_placement(fake).source.startswith("the SchedulingShards cannot be read (")


def test_gpu_use_counts_bound_gpu_pods_of_every_namespace_and_reports_terminating_ones(fake: FakeKube) -> None:
    layout = GpuLayout((GpuNode("node-a", 4), GpuNode("node-b", 4), GpuNode("cpu", 0)))
    for pod in (b.pod("p1", node="node-a", gpus=2), b.pod("p2", node="node-b"), b.pod("pending")):
        fake.put(pod)
    other = b.pod("foreign", node="node-b")
    other["metadata"]["namespace"] = "elsewhere"
    fake.put(other)
    use = gpu_use(fake)
    assert use.free(layout) == {"node-a": 2, "node-b": 2}
    assert use.settled().ok
    fake.put(b.pod("leaving", node="node-a", terminating=True))
    assert not gpu_use(fake).settled().ok
    assert gpu_use(fake).settled().summary == "1 GPU pod(s) terminating: kc-test/leaving"


def test_a_forbidden_shard_read_is_unreadable_not_an_error(fake: FakeKube, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args, **kwargs):
        raise errors.Forbidden("list schedulingshards", 403, "Forbidden", "no")

    monkeypatch.setattr(fake, "_list", forbidden)
    assert active_placement(fake).gpu is None
