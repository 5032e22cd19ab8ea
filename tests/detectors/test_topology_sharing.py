"""The topology and GPU-sharing detectors fire on violating snapshots and pass on conforming ones, and the domain
arithmetic they are fed follows KAI's tree (a node lacking a level is outside; domains are label paths)."""

from __future__ import annotations

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.clusters.topology import load_topology
from kai_conformance.suites.support.detectors.sharing import fractional_bind_requests, one_device, runtime_class
from kai_conformance.suites.support.detectors.topology import one_domain, packed, topology_constraint
from kai_conformance.suites.support.domains import RACK_LABEL, ZONE_LABEL, Domains, Level, topology_levels
from kai_conformance.suites.support.domains import with_node_labels as labelled
from kai_conformance.suites.support.expectations import UnknownVersion, expectations_for
from kai_conformance.suites.support.expectations.sharing import GPU_GROUP_LABEL, sharing_row
from kai_conformance.suites.support.expectations.topology import topology_row
from kai_conformance.suites.support.snapshot import Snapshot
from tests import builders as b

CATALOG = Catalog.load()
NODE_RACKS = {"n1": "zone-a/rack-1", "n2": "zone-a/rack-1", "n3": "zone-a/rack-2"}


def snap(*pods: dict, **others) -> Snapshot:
    return Snapshot(taken_at=0.0, pods=tuple(pods), workload="gang", **{k: tuple(v) for k, v in others.items()})


def node(name: str, gpus: int, zone: str | None, rack: str | None) -> GpuNode:
    labels = {k: v for k, v in ((ZONE_LABEL, zone), (RACK_LABEL, rack)) if v}
    return GpuNode(name, gpus, labels)


# ------------------------------------------------------------------------------------------------------ domains
def test_domains_are_label_paths_and_a_node_lacking_a_level_is_outside() -> None:
    layout = GpuLayout((node("a", 4, "z1", "r1"), node("b", 4, "z2", "r1"), node("c", 4, "z2", "r2"),
                        node("d", 4, None, "r9"), GpuNode("cpu", 0)))  # fmt: skip
    assert topology_levels(layout) == (Level.RACK,)  # "d" has no zone: a Topology listing zone would drop it
    full = GpuLayout(layout.nodes[:3])
    assert topology_levels(full) == (Level.ZONE, Level.RACK)
    racks = Domains.of(full, Level.RACK)
    assert dict(racks.members) == {"z1/r1": (full.nodes[0],), "z2/r1": (full.nodes[1],), "z2/r2": (full.nodes[2],)}
    assert Domains.of(full, Level.ZONE).node_domains == {"a": "z1", "b": "z2", "c": "z2"}


def test_domain_capacity_and_the_fewest_domains_a_gang_needs() -> None:
    pr_gate = load_topology("pr-gate").layout("kc")
    racks = Domains.of(pr_gate, Level.RACK)
    assert len(racks) == 2 and racks.largest_holds(4) == 2 and racks.largest_holds(1) == 8
    assert (racks.fewest_for(2, 4), racks.fewest_for(3, 4), racks.fewest_for(4, 4)) == (1, 2, None)
    release = Domains.of(load_topology("release").layout("kc"), Level.RACK)
    assert list(release.members) == ["zone-a/rack-1", "zone-a/rack-2", "zone-b/rack-3"]
    assert (
        "no GPU node carries kai-conformance/rack" in Domains.of(GpuLayout((GpuNode("x", 2),)), Level.RACK).describe()
    )
    partly = GpuLayout((node("a", 4, "z", "r1"), node("b", 4, "z", None)))
    assert Domains.of(partly, Level.RACK).describe(partly) == (
        "only 1 of 2 GPU nodes carry kai-conformance/rack (a), and KAI leaves a node without a level's label out of "
        "the topology"
    )


def test_the_clusters_node_labels_replace_the_layouts() -> None:
    layout = GpuLayout((GpuNode("n1", 4), GpuNode("n2", 4)))
    nodes = [{"metadata": {"name": "n1", "labels": {RACK_LABEL: "r1", ZONE_LABEL: "z"}}}, {"metadata": {"name": "x"}}]
    result = labelled(layout, nodes)
    assert result.nodes[0].labels == {RACK_LABEL: "r1", ZONE_LABEL: "z"} and result.nodes[1].labels == {}
    assert result.by_name() == layout.by_name()


# ----------------------------------------------------------------------------------------------------- topology
def test_one_domain_fires_naming_each_rack_and_its_nodes() -> None:
    across = snap(b.pod("gang-0", node="n1"), b.pod("gang-1", node="n3"))
    verdict = one_domain(across, NODE_RACKS, "rack")
    assert not verdict.ok
    assert verdict.explanation == (
        "the 2 bound pods of TrainJob gang span 2 rack domains: zone-a/rack-1: n1; zone-a/rack-2: n3"
    )
    inside = one_domain(snap(b.pod("gang-0", node="n1"), b.pod("gang-1", node="n2")), NODE_RACKS, "rack")
    assert inside.ok and "all 2 bound pods in one rack: zone-a/rack-1: n1, n2" in inside.explanation


def test_one_domain_fires_on_a_node_outside_the_topology_and_on_nothing_bound() -> None:
    verdict = one_domain(snap(b.pod("gang-0", node="n9")), NODE_RACKS, "rack")
    assert not verdict.ok and "outside the topology: n9" in verdict.explanation
    assert not one_domain(snap(b.pod("gang-0", node=None, unschedulable="x")), NODE_RACKS, "rack").ok


def test_packed_fires_when_more_domains_are_used_than_needed() -> None:
    two_racks = snap(b.pod("gang-0", node="n1"), b.pod("gang-1", node="n3"))
    assert not packed(two_racks, NODE_RACKS, "rack", fewest=1).ok
    verdict = packed(two_racks, NODE_RACKS, "rack", fewest=2)
    assert verdict.ok and "(fewest that hold them: 2)" in verdict.explanation


def test_topology_constraint_reads_the_podgroup_or_its_subgroup() -> None:
    owner = b.jobset()
    wanted = {"topology": "t", "requiredTopologyLevel": RACK_LABEL}
    root = b.podgroup(owner, spec={"topologyConstraint": dict(wanted)})
    assert topology_constraint(snap(podgroups=[root]), wanted).ok
    empty = b.podgroup(owner, spec={"topologyConstraint": {}})
    verdict = topology_constraint(snap(podgroups=[empty]), wanted)
    assert not verdict.ok and "topologyConstraint = {}, expected" in verdict.explanation
    leaf = {"name": "node-replica-0", "parent": "node", "minMember": 2, "topologyConstraint": dict(wanted)}
    nested = b.podgroup(owner, spec={"topologyConstraint": {}, "subGroups": [{"name": "node"}, leaf]})
    assert topology_constraint(snap(podgroups=[nested]), wanted, "node-replica-0").ok
    missing = topology_constraint(snap(podgroups=[nested]), wanted, "node-replica-1")
    assert not missing.ok and "SubGroup node-replica-1 does not exist (SubGroups: node, node-replica-0)" in (
        missing.explanation
    )
    assert not topology_constraint(snap(), wanted).ok  # no PodGroup at all


# ------------------------------------------------------------------------------------------------------ sharing
def request(pod: str, node: str, group: str | None, *, kind: str = "Fraction", portion: str = "0.50") -> dict:
    spec = {"podName": pod, "selectedNode": node, "receivedResourceType": kind,
            "receivedGPU": {"count": 1, "portion": portion}}  # fmt: skip
    if group:
        spec["selectedGPUGroups"] = [group]
    return {"apiVersion": "scheduling.run.ai/v1alpha2", "kind": "BindRequest", "metadata": {"name": pod}, "spec": spec}


def test_fractional_bind_requests_fire_on_a_regular_request_and_a_wrong_portion() -> None:
    pods = (b.pod("gang-0", node="n1", gpus=0), b.pod("gang-1", node="n1", gpus=0))
    good = [request("gang-0", "n1", "g1"), request("gang-1", "n1", "g1")]
    assert fractional_bind_requests(snap(*pods), good, "0.50").ok
    bad = [request("gang-0", "n1", None, kind="Regular", portion="1.00"), request("gang-1", "n1", "g1", portion="0.60")]
    verdict = fractional_bind_requests(snap(*pods), bad, "0.50")
    assert not verdict.ok
    assert "gang-0: receivedResourceType 'Regular', receivedGPU count 1 portion '1.00', 0 GPU group(s)" in (
        verdict.explanation
    )
    assert "portion '0.60'" in verdict.explanation
    assert "gang-0: no BindRequest" in fractional_bind_requests(snap(*pods), good[1:], "0.50").explanation


def test_one_device_fires_on_two_groups_and_on_a_label_that_disagrees() -> None:
    pods = (b.pod("gang-0", node="n1", gpus=0), b.pod("gang-1", node="n1", gpus=0))
    shared = one_device(snap(*pods), [request("gang-0", "n1", "g1"), request("gang-1", "n1", "g1")])
    assert shared.ok and "share one device: gang-0, gang-1 on n1 GPU group g1" in shared.explanation
    apart = one_device(snap(*pods), [request("gang-0", "n1", "g1"), request("gang-1", "n1", "g2")])
    assert not apart.ok
    assert apart.explanation == (
        "the 2 bound pods of TrainJob gang are on 2 device(s): gang-0 on n1 GPU group g1; gang-1 on n1 GPU group g2"
    )
    labelled_pods = (b.pod("gang-0", node="n1", gpus=0, labels={GPU_GROUP_LABEL: "g9"}), pods[1])
    verdict = one_device(snap(*labelled_pods), [request("gang-0", "n1", "g1"), request("gang-1", "n1", "g1")])
    assert not verdict.ok and "gang-0 labelled runai-gpu-group=g9 but its BindRequest says ('g1',)" in (
        verdict.explanation
    )


def test_runtime_class_fires_on_a_pod_without_it_or_with_one_it_should_not_have() -> None:
    with_class = b.pod("gang-0", node="n1")
    with_class["spec"]["runtimeClassName"] = "nvidia"
    without = b.pod("gang-1", node="n1")
    assert runtime_class(snap(with_class), "nvidia").ok
    verdict = runtime_class(snap(with_class, without), "nvidia")
    assert not verdict.ok and "1 of 2 pods of TrainJob gang do not have RuntimeClass nvidia: gang-1 (none)" in (
        verdict.explanation
    )
    assert runtime_class(snap(without), None).ok
    assert not runtime_class(snap(with_class), None).ok


# -------------------------------------------------------------------------------------------------------- rows
def test_every_cataloged_kai_version_has_topology_and_sharing_rows() -> None:
    for combo in CATALOG.combinations:
        expect = expectations_for(combo)
        assert expect.topology.minor == expect.sharing.minor == expect.kai.minor
    assert topology_row("v0.17.0").level_aliases and not topology_row("v0.16.8").level_aliases
    assert topology_row("v0.16.8").subgroup_constraint and not topology_row("v0.15.3").subgroup_constraint
    assert (
        sharing_row("v0.15.3").runtime_class_on_whole_gpu_pods
        and not sharing_row("v0.16.8").runtime_class_on_whole_gpu_pods
    )


@pytest.mark.parametrize(
    ("lookup", "file"), [(topology_row, "expectations/topology.py"), (sharing_row, "expectations/sharing.py")]
)
def test_a_version_without_rows_names_the_area_file(lookup, file) -> None:
    with pytest.raises(UnknownVersion, match=rf"row for v0.99.0 .*add a row for v0.99 to suites/support/{file}"):
        lookup("v0.99.0")
