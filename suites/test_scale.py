"""Scheduling at scale: hundreds of TrainJobs submitted at once, watched over the whole run.

Opt-in: these cases run only when ``-m`` names ``scale`` (``pytest suites -m scale --fake-nodes 200``,
``--topology scale-500``); a plain run and the PR gate deselect them (fixtures/plugin/markers.py). Bursts are sized from the
cluster's GPU layout, kwok's fake nodes included (suites/support/cases/scale.py). Each burst's pods and PodGroups are
observed by watch (one watch per kind over the case's namespace); every change is judged (suites/support/
detectors/scale.py). Specification:

* Over the whole run, at every change: no gang is partially bound for longer than the settle time
  (``gang-never-partial``); no queue's bound GPUs exceed its GPU limit (``queue-limit``); no queue's non-preemptible
  GPUs exceed its quota (``non-preemptible-in-quota``); no pod of a non-preemptible gang is evicted
  (``non-preemptible-never-evicted``). Evictions are counted.
* A burst is *settled* once every gang is complete (all its pods and its PodGroup exist) and nothing has changed for
  the settle time. Then no waiting gang *fits* (``fitting-gangs-bound``): its pods fit the GPUs idle on the nodes,
  each node on its own, within its queue's limit and, non-preemptible, its quota — KAI leaves no idle GPU that a
  waiting gang could use without evicting anyone.
* A burst of gangs of 1, 2, 4, 8 and 16 pods, 1-GPU and whole-node, asking for 75 % of the cluster's GPUs (so that it
  fits the empty cluster) is bound whole, every gang (``burst-bound``; under KAI's default binpack placement: spread
  may leave no empty node for whole-node pods, and then only ``fitting-gangs-bound`` is judged).
* A burst of 150 % of the cluster's GPUs from two sibling queues (quota 25 %, limit 60 % each), preemptible ``train``
  and non-preemptible ``build`` gangs, settles with every detector above holding, however many gangs KAI evicts on
  the way (preemption within a queue, reclaim between them).
* Measured per gang: submission → PodGroup, submission → all pods bound, bind spread; per burst: pods bound per
  second, time to fill, evictions (reports/sections/metrics.py ``scale_*``; the report's percentiles, plots and
  ``reports compare`` cover them).
* Control: a gang of whole-node pods, one more than the nodes that hold one, under the default scheduler, labelled
  for a queue limited to half the cluster: the default scheduler leaves it partial and the queue over its limit, and
  ``gang-never-partial`` and ``queue-limit`` fire on the watch's timeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, skip_unless
from kai_conformance.suites.support.cases.scale import (
    DefaultSchedulerBurst,
    FillingBurst,
    OverloadBurst,
)
from kai_conformance.suites.support.confirm import confirm, confirm_fired
from kai_conformance.suites.support.detectors.verdict import fires
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.expectations.placement import SPREAD
from kai_conformance.suites.support.placement_setting import active_placement
from kai_conformance.suites.support.scale import Burst, diagnosed, wait_for_idle_gpus

pytestmark = pytest.mark.scale

FILLING = [FillingBurst()]
OVERLOAD = [OverloadBurst()]
CONTROL = [DefaultSchedulerBurst()]


@pytest.mark.parametrize("case", [param(c) for c in FILLING])
def test_a_burst_that_fits_is_bound_gang_by_gang(
    case: FillingBurst,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Every gang of a burst filling 75 % of the cluster is bound whole, never partial on the way."""
    plan = case.plan(ctx.layout)
    skip_unless(bool(plan.gangs), f"the cluster's GPUs ({ctx.layout.describe()}) make no burst")
    room = wait_for_idle_gpus(kube, ctx.layout, plan.gpus, timeouts)
    skip_unless(room.idle() >= plan.gpus, f"the burst needs {plan.gpus:,} idle GPUs: {room.describe(ctx.layout)}")
    placement = active_placement(kube)
    with submitted_and_settled(case, ctx, kube, workspace, expect, timeouts, record, "burst") as burst:
        whole = burst.burst_bound()
        record.verdict(whole)
        if placement.gpu == SPREAD:
            record.note(f"placement {placement.describe()}: burst-bound not required (spread may leave no "
                        "empty node for whole-node pods)")  # fmt: skip
        else:
            confirm(whole, f"[{expect.kai.name}] a burst that fits the empty cluster was not bound")  # diagnosed


@pytest.mark.parametrize("case", [param(c) for c in OVERLOAD])
def test_an_overload_keeps_gangs_whole_and_queues_within_their_bounds(
    case: OverloadBurst,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A burst larger than the cluster from two limited queues: gangs whole, limits and quotas kept, no idle fit."""
    plan = case.plan(ctx.layout)
    skip_unless(
        all(q.quota > 0 and q.limit > 0 for q in plan.queues) and bool(plan.gangs),
        f"the cluster's GPUs ({ctx.layout.describe()}) are too few for two queues with quotas and limits",
    )
    with submitted_and_settled(case, ctx, kube, workspace, expect, timeouts, record, "overload"):
        pass  # what an overload must keep is judged on the way and once settled


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_default_scheduler_breaks_a_gang_and_a_queue_limit(
    case: DefaultSchedulerBurst,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Without KAI an over-cluster gang is left partial and its queue over its limit; the scale detectors fire."""
    skip_unless(ctx.layout.total > 1, "the cluster has too few GPUs to put a queue over half of them")
    plan = case.plan(ctx.layout)
    workspace.apply_all(case.queues(ctx))
    with Burst(kube, ctx.namespace, plan, timeouts, kai=False) as burst:
        try:
            burst.submit(workspace, case.trainjobs(ctx))
            for detector in ("gang-never-partial", "queue-limit"):
                burst.until(
                    lambda ledger, now, name=detector: fires(ledger.guard_verdicts(now)[name]),
                    what=f"the default scheduler's placement of {plan.describe()} to make {detector} fire",
                    timeout=burst.timeout(),
                    guarded=False,
                )
                verdict = burst.guards()[detector]
                record.verdict(verdict, expect_violation=True)
                confirm_fired(verdict, f"the {detector} detector did not fire on the default scheduler's burst")
        finally:
            burst.record(record, case.id, verdicts=False)


# ------------------------------------------------------------------------------------------------- shared steps
@contextmanager
def submitted_and_settled(
    case: FillingBurst | OverloadBurst,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    what: str,
) -> Iterator[Burst]:
    """Submit the case's burst, wait until it settles (judging every change on the way), assert that no waiting
    gang fits the idle GPUs, and hand the settled burst over; the burst's measurements are recorded whatever
    happened."""
    plan = case.plan(ctx.layout)
    workspace.apply_all(case.queues(ctx))
    with Burst(kube, ctx.namespace, plan, timeouts) as burst, diagnosed(burst, kube, ctx.namespace):
        try:
            burst.submit(workspace, case.trainjobs(ctx))
            burst.settle(f"[{expect.kai.name}] the {what} of {plan.describe()} settled")
            fitting = burst.fitting_gangs_bound(ctx.layout)
            record.verdict(fitting)
            confirm(fitting, f"[{expect.kai.name}] KAI left idle GPUs a waiting gang fits")  # diagnosed
            yield burst
        finally:
            burst.record(record, case.id)
