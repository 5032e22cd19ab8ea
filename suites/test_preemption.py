"""Preemption (within a queue) and reclaim (across queues): who may evict whom, and that eviction takes whole gangs.

Every case fills the cluster's GPUs with a first gang, then brings a second one. Specification:

* Preemption, in one queue: a preemptible low-priority gang (``train``) fills the GPUs; a non-preemptible
  higher-priority one (``build`` or ``inference``) arrives → the victim gang is evicted whole (it is never left
  partially running, checked on every observation), the newcomer runs, the victim returns to pending and its
  PodGroup records ``Evict`` events of action ``preempt``.
* Equal priority → no preemption. A non-preemptible victim is never preempted.
* Reclaim, across sibling queues: a queue running over its quota on GPUs another queue is owed is reclaimed when
  that queue asks within its quota (``Evict`` events of action ``reclaim``); a queue within its quota is never
  reclaimed.
* Every hold above is over a gang KAI must refuse (the victim back to pending, or the newcomer that may not
  preempt): it ends once KAI has refused that gang three more times (fixtures/waits.py), at most after the
  wall-clock hold; the victim's and the newcomer's state are judged on every observation until then.
* Control: one pod of a running gang deleted by hand, its Job index never re-created, leaves the gang partially
  evicted; the detector guarding every eviction above (``gang-never-partial``) fires once it has lasted longer
  than an eviction may take: proof that it sees a partial gang on this cluster.

KAI evicts by deleting pods; the suite's runtimes give each Job index a high backoff limit, so a victim's Job
recreates its pods (pending) instead of failing. That needs an evicted pod to end ``Failed``: the workload exits
non-zero on SIGTERM (clusters/suite_stack.py ``WORKLOAD_COMMAND``); a pod that ended ``Succeeded`` would complete its
index and never come back (docs/suites.md, "The workload").
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.cases.control import PartialGangCase
from kai_conformance.suites.support.cases.preemption import PreemptionCase, ReclaimCase
from kai_conformance.suites.support.detectors.eviction import gang_undisturbed
from kai_conformance.suites.support.detectors.gang import PartialGangWatch, nothing_bound
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of, fires
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.observe import Observer, Workload
from kai_conformance.suites.support.shapes import GpuSize
from kai_conformance.suites.support.snapshot import Snapshot, name_of, uid_of
from kai_conformance.suites.support.steps import assert_evicted_whole, bring, start_filling_gang
from kai_conformance.suites.support.timing import settle

pytestmark = pytest.mark.preemption  # every case but the control is also serial and disruptive (see its marks)

# The PR-gate selection (-m "not slow") keeps one case per behaviour; the slow ones are its longer variants.
PREEMPTION = [
    PreemptionCase("train", "build"),
    PreemptionCase("train", "inference", slow=True),
    PreemptionCase("train", "build", GpuSize.WHOLE_NODE, slow=True),
    PreemptionCase("train", "train"),
    PreemptionCase("build", "inference"),
]
PREEMPTING = [c for c in PREEMPTION if c.preempts]
NOT_PREEMPTING = [c for c in PREEMPTION if not c.preempts]
CONTROL = [PartialGangCase()]


@pytest.mark.parametrize("case", [param(c) for c in PREEMPTING])
def test_a_higher_priority_newcomer_evicts_the_whole_victim_gang(
    case: PreemptionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A non-preemptible higher-priority gang preempts the preemptible victim gang whole, in the same queue."""
    victim_pods, _ = case.victim_shape.size(ctx.layout)
    newcomer_pods, _ = case.newcomer_shape.size(ctx.layout)
    skip_unless(victim_pods >= 2 and case.newcomer_shape.fits(ctx.layout), f"{ctx.layout.describe()} is too small")
    workspace.apply(case.queue(ctx))
    victim = start_filling_gang(workspace, observer, case.victim(ctx), "victim", victim_pods, timeouts, expect)

    newcomer = bring(workspace, observer, case.newcomer(ctx), "newcomer", newcomer_pods, timeouts)
    assert_evicted_whole(observer, victim, newcomer, "preempt", timeouts, record, expect)


@pytest.mark.parametrize("case", [param(c) for c in NOT_PREEMPTING])
def test_no_preemption_without_a_preemptible_lower_priority_victim(
    case: PreemptionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """An equal-priority newcomer, or any newcomer facing a non-preemptible victim, waits; the victim keeps running."""
    victim_pods, _ = case.victim_shape.size(ctx.layout)
    newcomer_pods, _ = case.newcomer_shape.size(ctx.layout)
    workspace.apply(case.queue(ctx))
    victim = start_filling_gang(workspace, observer, case.victim(ctx), "victim", victim_pods, timeouts, expect)

    newcomer = bring(workspace, observer, case.newcomer(ctx), "newcomer", newcomer_pods, timeouts)
    assert_undisturbed(observer, victim, newcomer, timeouts, record, expect)


@pytest.mark.parametrize("case", [param(ReclaimCase(borrowing=True)), param(ReclaimCase(borrowing=False))])
def test_reclaim_takes_back_only_what_a_queue_borrowed(
    case: ReclaimCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A queue over its quota is evicted whole so that the other gets its quota; a queue within its quota keeps its
    gang while the other asks beyond its own."""
    skip_unless(ctx.layout.total >= 2, "needs at least 2 GPUs to split between two queues")
    holder_pods, claimer_pods = case.sizes(ctx.layout)
    workspace.apply_all(case.queues(ctx))
    holder = start_filling_gang(workspace, observer, case.holder(ctx), "holder", holder_pods, timeouts, expect)

    claimer = bring(workspace, observer, case.claimer(ctx), "claimer", claimer_pods, timeouts)
    if case.borrowing:
        assert_evicted_whole(observer, holder, claimer, "reclaim", timeouts, record, expect)
    else:
        assert_undisturbed(observer, holder, claimer, timeouts, record, expect)


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_partial_gang_detector_fires_on_a_gang_left_partially_evicted(
    case: PartialGangCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """One pod of a running gang deleted by hand and never replaced: the gang-never-partial detector, judging every
    observation as it does during an eviction, fires once the gang has been partial for longer than one may take."""
    require_gpus(ctx.layout, case.pods)
    workspace.apply_all([case.queue(ctx), case.runtime(ctx)])
    gang = start_filling_gang(workspace, observer, case.trainjob(ctx), case.workload, case.pods, timeouts, expect)
    victim = gang.snapshot().bound_pods[0]
    deleted = name_of(victim)
    workspace.delete(victim, wait=False)  # the pod carries the suite's label (see PartialGangCase)

    grace = settle(timeouts)
    watch = PartialGangWatch(gang.size, grace)
    judged: list[Verdict] = []

    def partial_for_long(snap: Snapshot) -> Verdict:
        judged[:] = [watch.observe(snap)]
        return fires(judged[0])

    gang.settle(
        partial_for_long,
        what=f"[{expect.kai.name}] the gang-never-partial detector to fire on {case.workload} without pod {deleted}",
        timeout=grace + timeouts("api"),
    )
    verdict = judged[-1]
    record.verdict(verdict, expect_violation=True)
    gang.confirm_fired(verdict, f"[{expect.kai.name}] the preemption detector did not fire on a gang left partially "
                       f"evicted (pod {deleted} deleted, its Job index never re-created)")  # fmt: skip


# ------------------------------------------------------------------------------------------------- shared steps
def assert_undisturbed(
    observer: Observer,
    first: Workload,
    second: Workload,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    expect: Expectations,
) -> None:
    """For the whole hold the first gang keeps all its original pods bound and the second binds nothing."""
    original = frozenset(uid_of(p) for p in first.snapshot().bound_pods)
    _, kept = observer.holds(
        lambda s: all_of(gang_undisturbed(s.of(first.name), original), nothing_bound(s.of(second.name), second.size)),
        what=f"[{expect.kai.name}] {first.name} keeps running and {second.name} waits",
        hold=timeouts.hold,
        refusals=timeouts.refusals,
        refused=second.name,
    )
    record.verdict(kept)
