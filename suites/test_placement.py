"""Placement strategy: KAI packs small GPU jobs onto as few nodes as it can (binpack, the default) or spreads them
(spread), as the SchedulingShard that places the suite's workloads says.

The run reads the strategy from the cluster (the shard with an empty ``partitionLabelValue``, its
``spec.placementStrategy.gpu``; absent means binpack), never from an assumption; facts and sources in
suites/support/expectations/placement.py. Specification:

* binpack: 1-GPU TrainJobs placed one at a time each land on the node with the fewest free GPUs among those with
  room, so a node fills before the next is used (on empty alike nodes: ⌈jobs / GPUs per node⌉ nodes).
* spread: each lands on the node with the largest free fraction of its GPUs (on empty alike nodes: one per node
  until every node has one).
* The case of the strategy the cluster does not run is skipped, naming the active strategy, where it was read, and
  the install option that turns the other on (``--kai-set scheduler.placementStrategy=spread``).
* Control: the same TrainJobs judged against the strategy the cluster does not run: the placement detector fires,
  and holds for the active one on the same placements.

One more TrainJob than the largest node has GPUs, placed one at a time on an idle cluster (serial): each placement
is judged against every node's free GPUs (cluster-wide, other namespaces included) just before it.
"""

from __future__ import annotations

import pytest

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy, eventually
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.cases.placement import PlacementCase, other
from kai_conformance.suites.support.confirm import confirm, confirm_fired
from kai_conformance.suites.support.detectors.placement import (
    PlacementStep,
    expected_nodes_used,
    nodes_used_as_expected,
    placements_follow,
)
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.expectations.placement import BINPACK, SPREAD, STRATEGIES, enable_hint
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.placement_setting import ActivePlacement, GpuUse, active_placement, gpu_use
from kai_conformance.suites.support.snapshot import gpus_of, node_of

pytestmark = pytest.mark.placement

STRATEGY_CASES = [PlacementCase(BINPACK), PlacementCase(SPREAD)]
CONTROL = [PlacementCase(control=True)]


@pytest.mark.parametrize("case", [param(c) for c in STRATEGY_CASES])
def test_small_trainjobs_are_placed_as_the_active_strategy_says(
    case: PlacementCase,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Each small TrainJob lands where the active strategy ranks first; the other strategy's case is skipped."""
    active = read_strategy(kube, case)
    skip_unless(
        active.gpu == case.strategy,
        f"the cluster places GPU pods by {active.describe()}; this case needs {case.strategy}: install KAI with "
        f"{enable_hint(str(case.strategy))} (with --install always on an existing cluster)",
    )
    require_layout(case, ctx)
    record.note(f"placement strategy: {active.describe()}")
    strategy = str(case.strategy)
    steps = place_one_at_a_time(case, ctx, kube, workspace, observer, timeouts, expect)
    verdict = placements_follow(strategy, steps)
    record.verdict(verdict)
    confirm(verdict, f"[{expect.kai.name}, {strategy}] the small TrainJobs were not placed as {strategy} says",
            observer=observer)  # fmt: skip
    expected = expected_nodes_used(strategy, steps)
    if expected is not None:  # the cluster was idle and its GPU nodes alike
        nodes = nodes_used_as_expected(strategy, steps, expected)
        record.verdict(nodes)
        confirm(nodes, f"[{expect.kai.name}, {strategy}] the nodes used are not those {strategy} fills",
                observer=observer)  # fmt: skip


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_placement_detector_fires_on_placements_judged_against_the_other_strategy(
    case: PlacementCase,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Placements made under the active strategy, judged against the other: the detector fires, and holds for the
    active one on the same placements."""
    active = read_strategy(kube, case)
    require_layout(case, ctx)
    strategy = str(active.gpu)
    judged = other(strategy)
    record.note(f"placement strategy: {active.describe()}; judged as {judged}")
    steps = place_one_at_a_time(case, ctx, kube, workspace, observer, timeouts, expect)
    skip_unless(
        any(not (s.best(BINPACK) & s.best(SPREAD)) for s in steps),
        "the free GPUs of this cluster never let binpack and spread choose differently: "
        + "; ".join(s.describe() for s in steps),
    )
    verdict = placements_follow(judged, steps)
    record.verdict(verdict, expect_violation=True)
    confirm_fired(verdict, f"[{expect.kai.name}] the placement detector did not fire on placements made under "
                  f"{strategy}, judged as {judged}", observer=observer)  # fmt: skip
    own = placements_follow(strategy, steps)
    record.verdict(own)
    confirm(own, f"[{expect.kai.name}] the placements do not follow the active strategy {strategy}", observer=observer)


# ------------------------------------------------------------------------------------------------- shared steps
def read_strategy(kube: KubeApi, case: PlacementCase) -> ActivePlacement:
    """The active strategy; the case skips when it cannot be read or is neither binpack nor spread."""
    active = active_placement(kube)
    skip_unless(active.gpu is not None, f"the placement strategy cannot be read: {active.source}")
    skip_unless(active.gpu in STRATEGIES, f"the cluster runs placement strategy {active.describe()}, not {STRATEGIES}")
    return active


def require_layout(case: PlacementCase, ctx: RenderContext) -> None:
    gpu_nodes = len(ctx.layout.gpu_nodes)
    skip_unless(gpu_nodes >= 2, f"needs 2 or more GPU nodes to tell placements apart; {ctx.layout.describe()}")
    require_gpus(ctx.layout, case.jobs(ctx.layout))


def place_one_at_a_time(
    case: PlacementCase,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    observer: Observer,
    timeouts: TimeoutPolicy,
    expect: Expectations,
) -> list[PlacementStep]:
    """Apply the small TrainJobs one by one, each after the previous is bound, noting the free GPUs before each."""
    workspace.apply(case.queue(ctx))
    capacity = {node.name: node.gpus for node in ctx.layout.gpu_nodes}
    steps = []
    for index in range(case.jobs(ctx.layout)):
        free = settled_use(kube, timeouts, ctx.layout).free(ctx.layout)
        workspace.apply(case.trainjob(ctx, index))
        job = observer.workload(case.name(index), 1)
        job.visible(timeouts("schedule"))
        snap, _ = job.bound(what=f"[{expect.kai.name}] TrainJob {job.name} bound", timeout=timeouts("schedule"))
        pod = snap.bound_pods[0]
        steps.append(PlacementStep(job.name, str(node_of(pod)), gpus_of(pod), free, capacity))
    return steps


def settled_use(kube: KubeApi, timeouts: TimeoutPolicy, layout: GpuLayout) -> GpuUse:
    """GPUs in use per node once no GPU pod is terminating on the case's nodes (KAI still counts a releasing pod's
    GPUs)."""
    seen: list[GpuUse] = []

    def probe():
        seen[:] = [gpu_use(kube)]
        return seen[0].settled(layout)

    eventually(probe, what="no GPU pod terminating on the case's nodes", timeout=timeouts("api"),
               failure=errors.WaitTimeout)  # fmt: skip
    return seen[0]
