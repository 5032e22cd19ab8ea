"""Topology-aware placement: a TrainJob that asks for a rack gets one rack, or waits; one that prefers a rack packs.

Each case creates its own KAI ``Topology`` (``kai.scheduler/v1alpha1``, levels = the node labels every GPU node
carries, ``kai-conformance/zone`` over ``kai-conformance/rack``) and a TrainJob of whole-node pods annotated
``kai.scheduler/topology: <its Topology>`` plus a required or preferred placement at the rack level. KAI's
podgrouper copies the TrainJob's annotations onto the JobSet it groups (skip-top-owner) and writes them into the
PodGroup's ``spec.topologyConstraint``; on replicatedJob template annotations they go to the leaf SubGroups instead
(per version: suites/support/expectations/topology.py). Specification:

* Required placement at the rack level, for a gang the largest rack holds: the PodGroup carries the constraint, and
  every pod is bound, all in one rack. The same through the replicatedJob template (SubGroup rows), and naming the
  level by its Topology alias (v0.17; v0.16 has no alias and the case says so).
* Required placement for a gang no single rack holds (the cluster does): no pod is bound for the whole "never
  happens" hold; the pods say ``PodScheduled=False/Unschedulable`` and the PodGroup says the topology requirement
  could not be satisfied.
* Preferred placement: a gang the largest rack holds is packed into one rack; a gang no rack holds is still bound
  whole, over no more racks than it needs.
* Control: the gang no rack holds, without any constraint, is bound over several racks, and the one-rack detector
  fires: proof that it reads where the pods landed on this cluster.

Sizes come from the racks of the cluster's GPU nodes (their labels, read from the cluster); a cluster whose GPU nodes
are in fewer than 2 racks skips every case, saying how to label them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, skip_unless
from kai_conformance.suites.support.cases.topology import Fill, Placement, Source, TopologyCase, topology_name
from kai_conformance.suites.support.detectors.gang import (
    nothing_bound,
    pods_marked_unschedulable,
)
from kai_conformance.suites.support.detectors.queues import podgroup_explains
from kai_conformance.suites.support.detectors.topology import one_domain, packed, topology_constraint
from kai_conformance.suites.support.detectors.verdict import all_of
from kai_conformance.suites.support.domains import RACK_LABEL, ZONE_LABEL, Domains, with_node_labels
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.expectations.topology import UNSATISFIED_MESSAGE
from kai_conformance.suites.support.observe import Observer, Workload
from kai_conformance.suites.support.steps import never_partial_for_long

pytestmark = pytest.mark.topology

REQUIRED_FITS = [
    TopologyCase(Placement.REQUIRED, Fill.LARGEST_DOMAIN),
    TopologyCase(Placement.REQUIRED, Fill.LARGEST_DOMAIN, source=Source.REPLICATED_JOB),
    TopologyCase(Placement.REQUIRED, Fill.LARGEST_DOMAIN, by_alias=True),
]
REQUIRED_OVER = [TopologyCase(Placement.REQUIRED, Fill.OVER_ANY_DOMAIN)]
PREFERRED = [
    TopologyCase(Placement.PREFERRED, Fill.LARGEST_DOMAIN),
    TopologyCase(Placement.PREFERRED, Fill.OVER_ANY_DOMAIN),
]
CONTROL = [TopologyCase(Placement.NONE, Fill.OVER_ANY_DOMAIN)]


@pytest.fixture
def ctx(ctx: RenderContext, kube: KubeApi) -> RenderContext:
    """The case's render context with each GPU node's labels as the cluster has them: its racks and zones."""
    return replace(ctx, layout=with_node_labels(ctx.layout, kube.list(kinds.NODE)))


@pytest.mark.parametrize("case", [param(c) for c in REQUIRED_FITS])
def test_required_placement_binds_the_gang_inside_one_rack(
    case: TopologyCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A gang the largest rack holds, required at the rack level: the PodGroup carries the constraint and the
    whole gang is bound inside one rack."""
    domains = require_racks(case, ctx)
    require_row(case, expect)
    gang = apply_case(case, ctx, workspace, observer, timeouts)
    assert_constraint_carried(case, ctx, gang, timeouts, record, expect)
    snap, bound = gang.bound(
        what=f"[{expect.kai.name}] {case.describe(ctx.layout)} required in one rack, bound",
        timeout=timeouts("schedule"),
        guard=never_partial_for_long(gang, timeouts),
    )
    record.verdict(bound)
    inside = one_domain(snap, domains.node_domains, "rack")
    record.verdict(inside)
    gang.confirm(inside, f"[{expect.topology.name}] TrainJob {gang.name} required one rack")


@pytest.mark.parametrize("case", [param(c) for c in REQUIRED_OVER])
def test_required_placement_that_no_rack_holds_binds_no_pod(
    case: TopologyCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A gang the cluster holds but no rack does, required at the rack level: nothing is bound for the hold, and
    the pods and the PodGroup say why (the topology requirement)."""
    require_racks(case, ctx)
    skip_unless(case.fits_cluster(ctx.layout), f"{case.describe(ctx.layout)} does not fit this cluster either")
    gang = apply_case(case, ctx, workspace, observer, timeouts)
    assert_constraint_carried(case, ctx, gang, timeouts, record, expect)
    _, held = gang.holds(
        lambda s: nothing_bound(s, gang.size),
        what=f"[{expect.kai.name}] no pod of {case.describe(ctx.layout)} bound (required in one rack)",
        hold=timeouts.hold,
        refusals=timeouts.refusals,
    )
    record.verdict(held)
    unsatisfied = UNSATISFIED_MESSAGE.format(topology=topology_name(ctx.namespace), level=case.level_name(ctx))
    _, explained = gang.until(
        lambda s: all_of(pods_marked_unschedulable(s), podgroup_explains(s, mentions=unsatisfied)),
        what=f"[{expect.kai.name}] the pending pods and the PodGroup of TrainJob {gang.name} say why",
        timeout=timeouts("api"),
        events=True,
    )
    record.verdict(explained)


@pytest.mark.parametrize("case", [param(c) for c in PREFERRED])
def test_preferred_placement_packs_the_gang_and_still_schedules_it_when_no_rack_holds_it(
    case: TopologyCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Preferred at the rack level: the whole gang is bound, in as few racks as hold it (one when one does)."""
    domains = require_racks(case, ctx)
    skip_unless(case.fits_cluster(ctx.layout), f"{case.describe(ctx.layout)} does not fit this cluster")
    fewest = case.fewest_domains(ctx.layout) or len(domains)
    gang = apply_case(case, ctx, workspace, observer, timeouts)
    assert_constraint_carried(case, ctx, gang, timeouts, record, expect)
    snap, bound = gang.bound(
        what=f"[{expect.kai.name}] {case.describe(ctx.layout)} preferring one rack, bound",
        timeout=timeouts("schedule"),
        guard=never_partial_for_long(gang, timeouts),
    )
    record.verdict(bound)
    tight = packed(snap, domains.node_domains, "rack", fewest)
    record.verdict(tight)
    gang.confirm(tight, f"[{expect.topology.name}] TrainJob {gang.name} preferred one rack")


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_one_rack_detector_fires_on_a_gang_spread_over_racks(
    case: TopologyCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """The gang no rack holds, without a constraint, is bound over several racks; the one-rack detector fires."""
    domains = require_racks(case, ctx)
    skip_unless(case.fits_cluster(ctx.layout), f"{case.describe(ctx.layout)} does not fit this cluster")
    gang = apply_case(case, ctx, workspace, observer, timeouts)
    snap, bound = gang.bound(
        what=f"[{expect.kai.name}] {case.describe(ctx.layout)} without a topology constraint, bound",
        timeout=timeouts("schedule"),
    )
    record.verdict(bound)
    verdict = one_domain(snap, domains.node_domains, "rack")
    record.verdict(verdict, expect_violation=True)
    gang.confirm_fired(verdict, "the one-rack detector did not fire on a gang that no rack holds")


# ------------------------------------------------------------------------------------------------- shared steps
def require_racks(case: TopologyCase, ctx: RenderContext) -> Domains:
    """The racks of the cluster's GPU nodes; skips, saying how to label them, when there are fewer than 2."""
    domains = case.domains(ctx.layout)
    skip_unless(
        len(domains) >= 2,
        f"needs GPU nodes in at least 2 racks; found {len(domains)} ({domains.describe(ctx.layout)}): label every GPU node "
        f"{ZONE_LABEL}=<zone> and {RACK_LABEL}=<rack> (kind topologies do, clusters/topologies/*.yaml)",
    )
    return domains


def require_row(case: TopologyCase, expect: Expectations) -> None:
    row = expect.topology
    skip_unless(
        case.source is not Source.REPLICATED_JOB or row.subgroup_constraint,
        f"[{row.name}] replicatedJob template annotations give no SubGroup a topology constraint in this version "
        "(flat PodGroups; jobset_grouper.go singleReplicaSubGroupTopology is v0.16+)",
    )
    skip_unless(
        not case.by_alias or row.level_aliases,
        f"[{row.name}] a Topology level has no alias in this version (the alias field is v0.17+)",
    )


def apply_case(
    case: TopologyCase, ctx: RenderContext, workspace: Workspace, observer: Observer, timeouts: TimeoutPolicy
) -> Workload:
    """Apply the case's Topology, queue and TrainJob and wait until KAI sees the whole gang."""
    pods, _ = case.size(ctx.layout)
    workspace.apply_all(case.manifests(ctx))
    gang = observer.workload(case.workload, pods)
    gang.visible(timeouts("schedule"))
    return gang


def assert_constraint_carried(
    case: TopologyCase,
    ctx: RenderContext,
    gang: Workload,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    expect: Expectations,
) -> None:
    """The podgrouper wrote the annotations into the PodGroup (or, from the template, into the leaf SubGroup)."""
    subgroup = expect.kai.subgroup_of("node") if case.source is Source.REPLICATED_JOB else None
    _, carried = gang.until(
        lambda s: topology_constraint(s, case.expected_constraint(ctx), subgroup),
        what=f"[{expect.topology.name}] the PodGroup of TrainJob {gang.name} carries its topology constraint",
        timeout=timeouts("api"),
    )
    record.verdict(carried)
