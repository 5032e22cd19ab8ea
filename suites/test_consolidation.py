"""Consolidation, and how long a running gang is protected from eviction (min-runtime, preemption delay).

Facts per version: ``suites/support/expectations/consolidation.py`` (KAI's consolidation action, minruntime
plugin and preemption delay at v0.16.8 and v0.17.0). Specification:

* Consolidation: 1-GPU one-pod TrainJobs ("fillers") fill every GPU; deleting some leaves every GPU node with the
  same few fillers, so no node has room for a whole-node pod. A preemptible gang of whole-node pods (2 when there
  are 3 or more GPU nodes) then fits only if fillers are repacked: KAI's consolidation evicts the fillers of the
  nodes the gang needs, only in a scenario where each of them is placed again → the gang is bound (never partial),
  every filler that ran before is bound again, nothing is lost (``every-moved-pod-replaced``, held for the hold),
  and the moved fillers' PodGroups record ``Evict`` events of action ``consolidation``. Skipped where the cluster's
  SchedulingShard turns consolidation off (placement strategy ``spread``), naming the setting that turns it on.
* Min-runtime: a preemptible victim gang in a queue with ``preemptMinRuntime: 30s`` faces a non-preemptible
  ``build`` newcomer in its queue; in a queue with ``reclaimMinRuntime: 30s`` (over its quota) it faces a sibling
  queue asking for its quota. The window ends where KAI's minruntime plugin ends it: the victim PodGroup's
  ``kai.scheduler/last-start-timestamp`` + 30 s. Until KAI acts, every observation must find the victim whole and
  the newcomer unbound; KAI must act within 5 scheduling periods of the end (``evicted-when-due``), and the time
  it evicted, by its own clock (its ``Evict`` events; v0.17's ``kai.scheduler/last-eviction-timestamp``), must
  not be before the end (``protected-until-end``, no margin). Then the victim is evicted whole, the newcomer runs,
  and the eviction (``preempt`` / ``reclaim``) is recorded: protected for the stated time and no longer.
* Preemption delay (v0.17; v0.16 skips, its row saying why): a ``build`` newcomer annotated
  ``kai.scheduler/preemption-delay: 30s`` on the TrainJob gets ``spec.preemptionDelay: 30s`` on its PodGroup, says
  ``PreemptionDelayNotElapsed`` (KAI's stated end is recorded) and evicts no one until its PodGroup's
  ``creationTimestamp`` + 30 s, judged as the min-runtime window is; then it preempts the victim whole.
* Where KAI's evidence is missing (no last-start stamp: the end is estimated from the victim's first bind; no
  Evict event with a time: the eviction is the one the suite saw), the window falls back to the wall clock with
  the former margin (``settle`` + 1 s), and the case's record says so (``suites/support/windows.py``; the rule:
  docs/performance.md, "Protection windows").
* Control: two fillers bound, one deleted by hand: ``every-moved-pod-replaced`` fires naming it, and holds for the
  other.

All but the control fill the cluster (serial, disruptive). Only the due time is judged on the clock of the machine
running the suite against a cluster timestamp: a suite clock running ahead of the cluster's eats into its periods.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.consolidation import (
    PROTECTION_WINDOW,
    ConsolidationCase,
    LostFillerCase,
    MinRuntimeCase,
    PreemptionDelayCase,
    consolidation_off,
)
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.confirm import confirm, confirm_fired, present
from kai_conformance.suites.support.detectors.consolidation import (
    ProtectionWindow,
    all_bound,
    clock_time,
    consolidation_recorded,
    fragmented,
    go_duration,
    preemption_delay,
    stated_delay_end,
)
from kai_conformance.suites.support.detectors.gang import PartialGangWatch, gang_fully_bound
from kai_conformance.suites.support.detectors.queues import podgroup_explains
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of, fires
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.expectations.consolidation import PREEMPTION_DELAY_REASON
from kai_conformance.suites.support.observe import About, Observer, Workload
from kai_conformance.suites.support.snapshot import Snapshot, node_of, uid_of, workload_of
from kai_conformance.suites.support.steps import assert_evicted_whole, bring, start_filling_gang
from kai_conformance.suites.support.timing import settle
from kai_conformance.suites.support.windows import delay_window, judge_eviction, min_runtime_window, wait_out

pytestmark = [pytest.mark.consolidation, pytest.mark.preemption]  # all but the control are serial and disruptive

CONSOLIDATION = [ConsolidationCase()]
#: The PR gate keeps preempt's min-runtime; reclaim's is the same protection by another action (slow: 70 s each on the
#: real controllers, docs/performance.md).
MIN_RUNTIME = [MinRuntimeCase("preempt"), MinRuntimeCase("reclaim", slow=True)]
PREEMPTION_DELAY = [PreemptionDelayCase()]
CONTROL = [LostFillerCase()]


@pytest.mark.parametrize("case", [param(c) for c in CONSOLIDATION])
def test_a_gang_that_fits_only_after_repacking_is_placed_by_consolidation(
    case: ConsolidationCase,
    ctx: RenderContext,
    kube: KubeApi,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Consolidation repacks running 1-GPU pods so that a whole-node gang fits: the gang is bound, every moved pod
    is placed again and nothing is lost."""
    off = consolidation_off(kube)
    if off:
        pytest.skip(off)
    plan = case.plan(ctx.layout)
    skip_unless(plan is not None, f"{ctx.layout.describe()}: needs 2 or more GPU nodes of one size to fragment")
    plan = present(plan, "no consolidation plan, though the layout was checked to have one")
    row = f"[{expect.consolidation.name}]"
    skip_unless(plan.moved <= expect.consolidation.max_preemptees, f"{plan.moved} fillers to move: over the maximum")
    workspace.apply(case.queue(ctx))
    fillers = {obj["metadata"]["name"]: obj for obj in workspace.apply_all(case.fillers(ctx))}
    # Failed waits diagnose the chain of the fillers still in play (and, once applied, the gang): not of those
    # deleted on purpose, whose missing TrainJob would read as a broken link.
    filler_chains = [observer.workload(name, 1) for name in fillers]
    observer.until(
        lambda s: all_bound(s, dict.fromkeys(fillers, 1)),
        what=f"{row} {len(fillers)} fillers bound, every GPU in use",
        timeout=timeouts("schedule"),
        about=chains(filler_chains),
    )

    kept = fragment(observer.snapshot(), plan.nodes, plan.kept)
    for name in sorted(set(fillers) - set(kept)):
        workspace.delete(fillers[name], wait=False)
    kept_chains = [f for f in filler_chains if f.name in kept]
    before, fragmented_ = observer.until(
        lambda s: all_of(fragmented(s, plan.nodes, plan.kept), all_bound(s, kept)),
        what=f"{row} {plan.kept} filler(s) left on each GPU node",
        timeout=timeouts("gc"),
        about=chains(kept_chains),
    )
    record.verdict(fragmented_)
    placed_before = {workload_of(p): uid_of(p) for p in before.bound_pods}

    workspace.apply(case.gang(ctx))
    gang = observer.workload("gang", plan.pods)
    gang.visible(timeouts("schedule"))
    watch = PartialGangWatch(plan.pods, settle(timeouts))
    in_play = chains([gang, *kept_chains])

    def consolidated(snap: Snapshot) -> Verdict:
        return all_of(gang_fully_bound(snap.of(gang.name), gang.size), all_bound(snap, kept))

    _, placed = observer.until(
        consolidated,
        what=f"{row} the {plan.pods}-pod gang of {plan.gpus}-GPU pods bound by consolidation, every filler bound again",
        timeout=timeouts("evict"),
        guard=gang.narrow(watch.observe),
        events=True,
        about=in_play,
    )
    record.verdict(placed)
    _, recorded = observer.until(
        lambda s: consolidation_recorded(s, kept),
        what=f"{row} the moved fillers' PodGroups record the consolidation",
        timeout=timeouts("api"),
        events=True,
        about=in_play,
    )
    record.verdict(recorded)
    after, held = observer.holds(
        consolidated, what=f"{row} nothing is lost afterwards", hold=timeouts.hold, about=in_play
    )
    record.verdict(held)
    record.verdict(watch.observe(after.of(gang.name)))
    moved = sorted(w for w, uid in placed_before.items() if w and uid not in {uid_of(p) for p in after.bound_pods})
    record.note(f"{len(moved)} filler(s) moved by consolidation: {', '.join(moved) or 'none'}")


@pytest.mark.parametrize("case", [param(c) for c in MIN_RUNTIME])
def test_a_young_victim_is_protected_for_its_min_runtime_and_no_longer(
    case: MinRuntimeCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A victim gang is neither preempted nor reclaimed before its queue's min-runtime has passed since KAI
    started it, and is evicted whole once it has."""
    rules = expect.consolidation
    skip_unless(rules.queue_min_runtime, f"{rules.name}: no queue {case.field}")
    victim_pods, newcomer_pods = case.sizes(ctx.layout)
    skip_unless(victim_pods >= 2 and newcomer_pods >= 1, f"{ctx.layout.describe()} is too small")
    workspace.apply_all(case.queues(ctx))
    victim = start_filling_gang(workspace, observer, case.victim(ctx), "victim", victim_pods, timeouts, expect)
    first = victim.snapshot()
    window = min_runtime_window(
        f"its queue's {case.field} of {PROTECTION_WINDOW}", go_duration(PROTECTION_WINDOW), first,
        observer.timeline.pods(victim.name), timeouts,
    )  # fmt: skip
    record.note(window.describe())
    newcomer = bring(workspace, observer, case.newcomer(ctx), "newcomer", newcomer_pods, timeouts)
    protect_then_evict(observer, victim, first, newcomer, window, case.action, timeouts, record, expect)


@pytest.mark.parametrize("case", [param(c) for c in PREEMPTION_DELAY])
def test_a_newcomer_within_its_preemption_delay_evicts_no_one_until_it_elapses(
    case: PreemptionDelayCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A preemptor annotated with a preemption delay waits that long after its PodGroup was created, saying so,
    and then preempts the victim whole."""
    rules = expect.consolidation
    if not rules.preemption_delay:
        pytest.skip(rules.no_preemption_delay)
    require_gpus(ctx.layout, 2)
    seconds = go_duration(PROTECTION_WINDOW)
    workspace.apply(case.queue(ctx))
    victim = start_filling_gang(workspace, observer, case.victim(ctx), "victim", ctx.layout.total, timeouts, expect)
    first = victim.snapshot()
    newcomer = bring(workspace, observer, case.newcomer(ctx), "newcomer", min(2, ctx.layout.total), timeouts)
    snap, delay = newcomer.until(
        lambda s: preemption_delay(s, seconds),
        what=f"[{rules.name}] the newcomer's PodGroup carries spec.preemptionDelay {PROTECTION_WINDOW}",
        timeout=timeouts("api"),
    )
    record.verdict(delay)
    podgroup = present(snap.podgroup, f"[{rules.name}] the newcomer has no PodGroup, though it carried the delay",
                       observer=observer, about=newcomer.about)  # fmt: skip
    window = delay_window(f"the newcomer's preemption delay of {PROTECTION_WINDOW}", seconds, podgroup, timeouts)
    _, explained = newcomer.until(
        lambda s: podgroup_explains(s, [PREEMPTION_DELAY_REASON]),
        what=f"[{rules.name}] the newcomer's PodGroup says {PREEMPTION_DELAY_REASON}",
        timeout=timeouts("api"),
        events=True,
    )
    record.verdict(explained)
    stated = stated_delay_end(newcomer.snapshot(events=True))
    kai_says = f"KAI states {clock_time(stated)}" if stated is not None else "KAI states no end it can be read from"
    record.note(f"{window.describe()}; {kai_says}")
    protect_then_evict(observer, victim, first, newcomer, window, "preempt", timeouts, record, expect)


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_replacement_detector_fires_on_a_workload_that_is_not_bound_again(
    case: LostFillerCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Two fillers ran; one is deleted by hand: the every-moved-pod-replaced detector fires naming it, and holds for
    the other."""
    require_gpus(ctx.layout, case.fillers)
    workspace.apply(case.queue(ctx))
    trainjobs = workspace.apply_all(case.trainjobs(ctx))
    ran = dict.fromkeys(case.names(), 1)
    for name, pods in ran.items():  # failed waits diagnose each filler's chain
        observer.workload(name, pods)
    observer.until(lambda s: all_bound(s, ran), what=f"{len(ran)} fillers bound", timeout=timeouts("schedule"))
    lost = trainjobs[-1]["metadata"]["name"]
    workspace.delete(trainjobs[-1], wait=False)

    snap, _ = observer.settle(
        lambda s: fires(all_bound(s, ran)),
        what=f"[{expect.consolidation.name}] the replacement detector to fire on {lost}, deleted by hand",
        timeout=timeouts("gc"),
    )
    verdict = all_bound(snap, ran)
    record.verdict(verdict, expect_violation=True)
    confirm_fired(verdict, f"[{expect.consolidation.name}] the replacement detector did not fire on {lost}, deleted "
                  "and never bound again", naming=[lost], observer=observer)  # fmt: skip
    others = all_bound(snap, {name: 1 for name in ran if name != lost})
    record.verdict(others)
    confirm(others, "the fillers nobody deleted are not all bound", observer=observer,
            about=[(name, 1) for name in ran if name != lost])  # fmt: skip


# ------------------------------------------------------------------------------------------------ shared steps
def chains(workloads: list[Workload]) -> About:
    """The workloads a failed wait diagnoses the chain of."""
    return [(w.name, w.size) for w in workloads]


def fragment(snap: Snapshot, nodes: tuple[str, ...], per_node: int) -> dict[str, int]:
    """The fillers to keep: the first ``per_node`` (by name) bound on each node; the others are to be deleted."""
    kept: dict[str, int] = {}
    for node in nodes:
        on_node = sorted(workload_of(p) or "" for p in snap.bound_pods if node_of(p) == node)
        kept.update(dict.fromkeys(on_node[:per_node], 1))
    return kept


def protect_then_evict(
    observer: Observer,
    victim: Workload,
    started: Snapshot,
    newcomer: Workload,
    window: ProtectionWindow,
    action: str,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    expect: Expectations,
) -> None:
    """A protection window judged on KAI's evidence (``suites/support/windows.py``): protected on every observation
    until KAI acts, which must be within the due time; KAI's own time of the eviction no earlier than the end; then
    the victim evicted whole, the newcomer running and the eviction recorded."""
    row = f"[{expect.consolidation.name}]"
    phase, due = wait_out(observer, victim, started, newcomer, window, timeouts, row)
    record.verdict(phase)
    record.verdict(due)
    after = judge_eviction(observer, victim, window, timeouts)
    record.verdict(after)
    victim.confirm(after, f"{row} the victim was evicted before {window.what} ended")
    assert_evicted_whole(observer, victim, newcomer, action, timeouts, record, expect)
