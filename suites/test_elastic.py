"""Elastic TrainJobs: a gang that needs only part of its pods uses idle GPUs and gives them back first.

A TrainJob whose gang minimum (``kai.scheduler/batch-min-member``) is below its pod count is elastic. KAI v0.16+
reads that minimum from the replicatedJob template, as the leaf SubGroup's ``minMember`` (flat ``minMember`` from
the JobSet's annotation on v0.14–v0.15; ignored on v0.13: table in suites/support/expectations/elastic.py), so the
TrainJob carries it in a ``runtimePatches`` entry for its ``node`` replicatedJob. Specification:

* The PodGroup carries the minimum where the KAI version puts it.
* Behind a running blocker that leaves exactly the minimum free, the gang binds its minimum and keeps its surplus
  pending for the whole hold: partly bound at or above the minimum is the elastic phase, not a gang violation.
* Once the blocker is deleted the gang grows to every pod, never dropping below its minimum on the way.
* When a higher-priority non-preemptible gang (``build``) as large as the surplus arrives in the same queue, KAI
  evicts the surplus only (GetTasksToEvict: surplus first): the newcomer runs, every pod of the minimum that was bound
  before keeps running, the recreated surplus waits, and the PodGroup records ``Evict`` events of action
  ``preempt``. No observation on the way shows the gang below its minimum, or a core pod lost.
* Control: an elastic gang held at its minimum by its queue's limit, judged as if its minimum were every pod (the
  annotation lost on the way): the elastic detector fires, and holds for the real minimum.

Sizes come from the cluster's GPU layout: one 1-GPU pod per GPU, half of them the minimum.

Both holds over a running gang whose surplus waits (behind the blocker; recreated after the eviction) are holds
over a workload KAI must refuse: its pending surplus. They start once every pod exists, so nothing changes during
them, and end on KAI's refusals of the elastic gang (``TimeoutPolicy.refusals``: 3 more, 2 s after the last, 5
periods at least; the full hold when the count stalls, and the verdict says which).
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.cases.elastic import ElasticPreemptionCase, ElasticStartCase, ElasticUnderLimitCase
from kai_conformance.suites.support.detectors.elastic import (
    ElasticMinimumWatch,
    elastic_bound_exactly,
    elastic_minimum_held,
    podgroup_elastic_minimum,
    surplus_evicted_first,
)
from kai_conformance.suites.support.detectors.eviction import eviction_recorded
from kai_conformance.suites.support.detectors.gang import gang_fully_bound
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.observe import Observer, Workload, visibility
from kai_conformance.suites.support.snapshot import Snapshot, uid_of
from kai_conformance.suites.support.timing import settle

pytestmark = pytest.mark.elastic

START = [ElasticStartCase()]
PREEMPTION = [ElasticPreemptionCase()]
CONTROL = [ElasticUnderLimitCase()]


@pytest.mark.parametrize("case", [param(c) for c in START])
def test_an_elastic_gang_starts_with_its_minimum_and_grows_when_gpus_free_up(
    case: ElasticStartCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Only the minimum fits: the minimum binds and the surplus waits; the blocker goes: every pod binds."""
    require_elastic(expect)
    pods, minimum = case.sizes(ctx.layout)
    skip_unless(pods >= 2, f"an elastic gang needs 2 GPUs or more; the cluster has {ctx.layout.describe()}")
    row = f"[{expect.elastic.name}]"
    workspace.apply(case.queue(ctx))
    blocker_job = workspace.apply(case.blocker(ctx))
    blocker_pods = case.blocker_pods(ctx.layout)
    blocker = observer.workload("blocker", blocker_pods)
    blocker.visible(timeouts("schedule"))
    blocker.bound(what=f"{row} the blocker's {blocker_pods} pods bound", timeout=timeouts("schedule"))

    workspace.apply(case.elastic(ctx))
    elastic = observer.workload(case.workload, pods, minimum=minimum)
    elastic_visible(elastic, expect, minimum, timeouts, record)
    watch = ElasticMinimumWatch(minimum, pods, settle(timeouts))
    guard = elastic.narrow(watch.observe)
    _, started = elastic.until(
        lambda s: elastic_bound_exactly(s, minimum, pods),
        what=f"{row} the elastic gang's minimum of {minimum} bound, its {pods - minimum} surplus pending",
        timeout=timeouts("schedule"),
        guard=guard,
        events=True,
    )
    record.verdict(started)
    _, held = observer.holds(
        lambda s: all_of(
            elastic_bound_exactly(s.of(case.workload), minimum, pods), gang_fully_bound(s.of("blocker"), blocker_pods)
        ),
        what=f"{row} the elastic gang stays at its minimum of {minimum} while the blocker runs",
        hold=timeouts.hold,
        guard=guard,
        # KAI must refuse the surplus every cycle while nothing changes: the hold ends on its refusals
        refusals=timeouts.refusals,
        refused=case.workload,
    )
    record.verdict(held)

    workspace.delete(blocker_job)
    _, grown = elastic.bound(
        what=f"{row} the elastic gang grown to all {pods} pods once the blocker is gone",
        timeout=timeouts("schedule"),
        guard=guard,
    )
    record.verdict(grown)
    record.verdict(watch.observe(elastic.snapshot()))


@pytest.mark.parametrize("case", [param(c) for c in PREEMPTION])
def test_a_higher_priority_gang_takes_only_the_surplus_of_an_elastic_gang(
    case: ElasticPreemptionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A non-preemptible gang as large as the surplus arrives: the surplus is evicted, the minimum keeps running."""
    require_elastic(expect)
    pods, minimum = case.sizes(ctx.layout)
    skip_unless(pods >= 2, f"an elastic gang needs 2 GPUs or more; the cluster has {ctx.layout.describe()}")
    row = f"[{expect.elastic.name}, preempt]"
    newcomer_pods = case.newcomer_pods(ctx.layout)
    workspace.apply(case.queue(ctx))
    workspace.apply(case.elastic(ctx))
    elastic = observer.workload(case.workload, pods, minimum=minimum)
    elastic_visible(elastic, expect, minimum, timeouts, record)
    snap, _ = elastic.bound(what=f"{row} all {pods} pods of the elastic gang bound", timeout=timeouts("schedule"))
    original = frozenset(uid_of(p) for p in snap.bound_pods)

    watch = ElasticMinimumWatch(minimum, pods, settle(timeouts))
    guard = elastic.narrow(lambda s: all_of(watch.observe(s), surplus_evicted_first(s, original, minimum)))
    workspace.apply(case.newcomer(ctx))
    newcomer = observer.workload("newcomer", newcomer_pods)
    newcomer.visible(timeouts("schedule"))

    def newcomer_runs_on_the_surplus(snap: Snapshot) -> Verdict:
        return all_of(
            gang_fully_bound(snap.of(newcomer.name), newcomer_pods),
            surplus_evicted_first(snap.of(case.workload), original, minimum),
            elastic_minimum_held(snap.of(case.workload), minimum, pods),
        )

    observer.until(
        newcomer_runs_on_the_surplus,
        what=f"{row} {newcomer.name} bound on the {newcomer_pods} GPUs of the elastic gang's surplus",
        timeout=timeouts("evict"),
        guard=guard,
    )

    def settled(snap: Snapshot) -> Verdict:
        return all_of(
            newcomer_runs_on_the_surplus(snap),
            elastic_bound_exactly(snap.of(case.workload), pods - newcomer_pods, pods),
        )

    observer.until(
        lambda s: all_of(visibility(s.of(case.workload), pods), settled(s)),
        what=f"{row} the elastic gang's Jobs recreated its {newcomer_pods} evicted pods, pending",
        timeout=timeouts("evict"),
        guard=guard,
        owners=True,
    )
    _, kept = observer.holds(
        settled,
        what=f"{row} the elastic gang keeps its minimum while {newcomer.name} runs",
        hold=timeouts.hold,
        guard=guard,
        # the recreated surplus exists (waited for above), so nothing changes: KAI must refuse it every cycle
        refusals=timeouts.refusals,
        refused=case.workload,
    )
    record.verdict(kept)
    record.verdict(surplus_evicted_first(elastic.snapshot(), original, minimum))
    record.verdict(watch.observe(elastic.snapshot()))
    _, evicted = elastic.until(
        lambda s: eviction_recorded(s, "preempt"),
        what=f"{row} the elastic gang's PodGroup records the eviction",
        timeout=timeouts("api"),
        events=True,
    )
    record.verdict(evicted)


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_elastic_detector_fires_on_a_gang_judged_against_a_larger_minimum(
    case: ElasticUnderLimitCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """KAI binds an elastic gang's minimum up to its queue's limit; judged as if every pod were its minimum, the
    elastic detector fires, and it holds for the real minimum on the same snapshot."""
    require_elastic(expect)
    require_gpus(ctx.layout, case.minimum)
    row = f"[{expect.elastic.name}]"
    workspace.apply_all(case.manifests(ctx))
    elastic = observer.workload(case.workload, case.pods, minimum=case.minimum)
    elastic_visible(elastic, expect, case.minimum, timeouts, record)
    snap, _ = elastic.until(
        lambda s: elastic_bound_exactly(s, case.minimum, case.pods),
        what=f"{row} the queue's limit of {case.minimum} GPUs to hold the elastic gang at its minimum",
        timeout=timeouts("schedule"),
        events=True,
    )
    verdict = elastic_minimum_held(snap, case.pods, case.pods)
    record.verdict(verdict, expect_violation=True)
    elastic.confirm_fired(verdict, f"{row} the elastic detector did not fire on a gang of {case.pods} pods bound at "
                          f"{case.minimum}, judged against a minimum of {case.pods}")  # fmt: skip
    own = elastic_minimum_held(snap, case.minimum, case.pods)
    record.verdict(own)
    elastic.confirm(own, f"{row} the elastic detector fires on a gang at its own minimum of {case.minimum}")


# ------------------------------------------------------------------------------------------------- shared steps
def require_elastic(expect: Expectations) -> None:
    skip_unless(expect.elastic.supported, f"{expect.elastic.describe()}: no elastic TrainJob on this KAI version")


def elastic_visible(
    elastic: Workload, expect: Expectations, minimum: int, timeouts: TimeoutPolicy, record: CaseRecorder
) -> Snapshot:
    """Wait until KAI sees the elastic gang, then confirm its PodGroup carries the minimum where the row says."""
    snap = elastic.visible(timeouts("schedule"))
    record.note(f"elastic row: {expect.elastic.describe()}")
    shape = podgroup_elastic_minimum(snap, expect.elastic, minimum, elastic.size)
    record.verdict(shape)
    elastic.confirm(shape, f"[{expect.elastic.name}] the PodGroup of {elastic.name} does not carry its minimum")
    return snap
