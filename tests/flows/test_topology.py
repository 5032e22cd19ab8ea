"""The topology suite end to end on the simulated cluster (tests/flows/__init__.py; simulated topology placement:
tests/fakes/kai/topology.py) on the PR-gate layout: rack-1 = 2 workers, rack-2 = 1 worker, 4 GPUs each."""

from __future__ import annotations

import dataclasses

import pytest
from _pytest.outcomes import Skipped

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites import test_topology
from kai_conformance.suites.support.cases.topology import Fill, Placement, TopologyCase
from kai_conformance.suites.support.domains import RACK_LABEL
from kai_conformance.suites.support.expectations import expectations_for
from tests.fakes.kai.topology import TopologyFaults

CATALOG = Catalog.load()


def racks_of(h) -> dict[str, str]:
    """Pod name → rack of its node, from the simulated cluster."""
    racks = {n.name: n.labels[RACK_LABEL] for n in h.ctx.layout.nodes}
    return {
        p["metadata"]["name"]: racks[p["spec"]["nodeName"]]
        for p in h.fake.objects(kinds.POD)
        if p["spec"].get("nodeName")
    }


@pytest.mark.parametrize("case", test_topology.REQUIRED_FITS, ids=lambda c: c.id)
def test_a_required_gang_is_bound_inside_the_one_rack_that_holds_it(flow, case) -> None:
    h = flow()
    seen: list[dict[str, str]] = []
    original = h.observer.snapshot

    def watching(**wider):
        seen.append(racks_of(h))
        return original(**wider)

    h.observer.snapshot = watching
    test_topology.test_required_placement_binds_the_gang_inside_one_rack(case, **h.args())
    verdicts = h.verdicts()
    assert verdicts["topology-constraint"] and verdicts["gang-bound"] and verdicts["one-domain"]
    assert set(seen[-1].values()) == {"rack-1"} and len(seen[-1]) == 2
    (topology,) = h.fake.objects(kinds.TOPOLOGY)
    assert topology in [o for o in h.workspace.objects if o["kind"] == "Topology"], "the workspace removes it"


def test_the_topology_object_is_the_cases_own_with_the_levels_every_gpu_node_carries(flow) -> None:
    h = flow()
    case = test_topology.REQUIRED_FITS[0]
    topology, _queue, trainjob = case.manifests(h.ctx)
    assert topology["kind"] == "Topology" and topology["metadata"]["name"].startswith("kct-")
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == ["kai-conformance/zone", "kai-conformance/rack"]
    annotations = trainjob["metadata"]["annotations"]
    assert annotations == {
        "kai.scheduler/topology": topology["metadata"]["name"],
        "kai.scheduler/topology-required-placement": "kai-conformance/rack",
    }
    assert trainjob["spec"]["trainer"]["numNodes"] == 2  # rack-1 holds two whole-node pods
    alias = test_topology.REQUIRED_FITS[2]
    _, _, by_alias = alias.manifests(h.ctx)
    assert by_alias["metadata"]["annotations"]["kai.scheduler/topology-required-placement"] == "rack"
    old = dataclasses.replace(h.ctx, combination=CATALOG.combination("kai-v0.16.8+trainer-v2.3.0"))
    old_topology, _, old_trainjob = alias.manifests(old)
    assert "alias" not in old_topology["spec"]["levels"][0], "v0.16's Topology CRD has no alias field"
    assert old_trainjob["metadata"]["annotations"]["kai.scheduler/topology-required-placement"] == RACK_LABEL


def test_the_alias_case_skips_on_a_version_without_aliases_saying_so(flow) -> None:
    h = flow()
    h.expect = expectations_for(CATALOG.combination("kai-v0.16.8+trainer-v2.3.0"))
    with pytest.raises(Skipped, match=r"\[KAI v0.16 topology\] a Topology level has no alias in this version"):
        test_topology.test_required_placement_binds_the_gang_inside_one_rack(test_topology.REQUIRED_FITS[2], **h.args())


def test_a_required_gang_fails_naming_the_racks_when_the_scheduler_ignores_the_constraint(flow) -> None:
    h = flow(TopologyFaults(scheduler_ignores_topology=True))
    with pytest.raises(AssertionError, match=r"required one rack: \[one-domain\] VIOLATED: the 2 bound pods of "
                       r"TrainJob gang span 2 rack domains: zone-a/rack-1: kai-conformance-worker; "
                       r"zone-a/rack-2: kai-conformance-worker3"):  # fmt: skip
        test_topology.test_required_placement_binds_the_gang_inside_one_rack(test_topology.REQUIRED_FITS[0], **h.args())


def test_a_podgroup_without_the_constraint_fails_before_any_placement_is_judged(flow) -> None:
    h = flow(TopologyFaults(podgrouper_drops_topology=True))
    with pytest.raises(
        ConditionNotMet, match=r"(?s)carries its topology constraint.*topologyConstraint = \{\}, expected"
    ):
        test_topology.test_required_placement_binds_the_gang_inside_one_rack(test_topology.REQUIRED_FITS[0], **h.args())


def test_a_required_gang_no_rack_holds_binds_nothing_and_kai_names_the_topology(flow) -> None:
    h = flow()
    case = test_topology.REQUIRED_OVER[0]
    test_topology.test_required_placement_that_no_rack_holds_binds_no_pod(case, **h.args())
    verdicts = h.verdicts()
    assert verdicts["gang-held"]
    explained = next(v for v in h.record.record.verdicts if v.detector.startswith("pods-unschedulable"))
    assert "couldn't be satisfied" in explained.explanation and "kai-conformance/rack" in explained.explanation


def test_a_required_gang_no_rack_holds_fails_when_it_is_spread_over_racks(flow) -> None:
    h = flow(TopologyFaults(scheduler_ignores_topology=True))
    with pytest.raises(ConditionViolated, match=r"no pod of 3 pod\(s\).*bound \(required in one rack\)"):
        test_topology.test_required_placement_that_no_rack_holds_binds_no_pod(
            test_topology.REQUIRED_OVER[0], **h.args()
        )


@pytest.mark.parametrize("case", test_topology.PREFERRED, ids=lambda c: c.id)
def test_a_preferred_gang_is_packed_into_as_few_racks_as_hold_it(flow, case) -> None:
    h = flow()
    test_topology.test_preferred_placement_packs_the_gang_and_still_schedules_it_when_no_rack_holds_it(case, **h.args())
    (tight,) = [v for v in h.record.record.verdicts if v.detector == "packed"]
    assert tight.ok
    fewest = 1 if case.fill is Fill.LARGEST_DOMAIN else 2
    assert f"(fewest that hold them: {fewest})" in tight.explanation


def test_a_preferred_gang_fails_when_spread_over_more_racks_than_it_needs(flow) -> None:
    h = flow(TopologyFaults(scheduler_ignores_topology=True))
    with pytest.raises(AssertionError, match=r"preferred one rack: \[packed\] VIOLATED: 2 bound pods in 2 rack"):
        test_topology.test_preferred_placement_packs_the_gang_and_still_schedules_it_when_no_rack_holds_it(
            test_topology.PREFERRED[0], **h.args()
        )


def test_the_control_sees_the_one_rack_detector_fire_on_an_unconstrained_gang(flow) -> None:
    h = flow()
    test_topology.test_control_the_one_rack_detector_fires_on_a_gang_spread_over_racks(
        test_topology.CONTROL[0], **h.args()
    )
    (control,) = [v for v in h.record.record.verdicts if v.expect_violation]
    assert control.detector == "one-domain" and not control.ok and control.as_expected
    assert "span 2 rack domains" in control.explanation
    assert h.fake.objects(kinds.TOPOLOGY) == [], "an unconstrained gang needs no Topology"


def test_the_control_fails_when_the_detector_is_blind(flow, monkeypatch) -> None:
    from kai_conformance.suites.support.detectors.verdict import Verdict

    monkeypatch.setattr(test_topology, "one_domain", lambda *a, **k: Verdict("one-domain", True, "nothing"))
    h = flow()
    with pytest.raises(AssertionError, match="the one-rack detector did not fire on a gang that no rack holds"):
        test_topology.test_control_the_one_rack_detector_fires_on_a_gang_spread_over_racks(
            test_topology.CONTROL[0], **h.args()
        )


def test_every_case_skips_on_a_cluster_with_one_rack_saying_how_to_label_the_nodes(flow) -> None:
    one_rack = GpuLayout(tuple(GpuNode(f"n{i}", 4, {RACK_LABEL: "r", "kai-conformance/zone": "z"}) for i in range(2)))
    h = flow(layout=one_rack)
    case = TopologyCase(Placement.REQUIRED, Fill.LARGEST_DOMAIN)
    with pytest.raises(Skipped, match=r"needs GPU nodes in at least 2 racks; found 1 .*label every GPU node "
                       r"kai-conformance/zone=<zone> and kai-conformance/rack=<rack>"):  # fmt: skip
        test_topology.test_required_placement_binds_the_gang_inside_one_rack(case, **h.args())
