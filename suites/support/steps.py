"""Steps several suites take the same way: bring a TrainJob until KAI sees it, fill the cluster with a first gang,
guard a wait against a gang that stays partial, and check that an eviction took a victim gang whole."""

from __future__ import annotations

from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.detectors.eviction import eviction_recorded
from kai_conformance.suites.support.detectors.gang import PartialGangWatch, gang_fully_bound, nothing_bound
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.observe import Check, Observer, Workload, visibility
from kai_conformance.suites.support.snapshot import Snapshot
from kai_conformance.suites.support.timing import settle


def bring(
    workspace: Workspace, observer: Observer, trainjob: dict, name: str, pods: int, timeouts: TimeoutPolicy
) -> Workload:
    """Apply a TrainJob and wait until KAI sees all of it (its pods and PodGroup exist)."""
    workspace.apply(trainjob)
    gang = observer.workload(name, pods)
    gang.visible(timeouts("schedule"))
    return gang


def start_filling_gang(
    workspace: Workspace,
    observer: Observer,
    trainjob: dict,
    name: str,
    pods: int,
    timeouts: TimeoutPolicy,
    expect: Expectations,
) -> Workload:
    """Apply the first gang and wait until all of it is bound."""
    gang = bring(workspace, observer, trainjob, name, pods, timeouts)
    gang.bound(
        what=f"[{expect.kai.name}] the first gang ({name}, {pods} pods) bound",
        timeout=timeouts("schedule"),
    )
    return gang


def assert_evicted_whole(
    observer: Observer,
    victim: Workload,
    newcomer: Workload,
    action: str,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    expect: Expectations,
) -> None:
    """The victim is evicted whole, the newcomer runs, the victim returns to pending; never a partial victim."""
    watch = PartialGangWatch(victim.size, settle(timeouts))
    guard = victim.narrow(watch.observe)
    row = f"[{expect.kai.name}, {action}]"

    def newcomer_runs_victim_waits(snap: Snapshot) -> Verdict:
        return all_of(
            gang_fully_bound(snap.of(newcomer.name), newcomer.size), nothing_bound(snap.of(victim.name), victim.size)
        )

    observer.until(
        newcomer_runs_victim_waits,
        what=f"{row} {newcomer.name} bound after {victim.name} was evicted whole",
        timeout=timeouts("evict"),
        guard=guard,
    )
    observer.until(
        lambda s: all_of(visibility(s.of(victim.name), victim.size), newcomer_runs_victim_waits(s)),
        what=f"{row} {victim.name}'s Jobs recreated its {victim.size} pods, pending",
        timeout=timeouts("evict"),
        guard=guard,
        owners=True,  # a failure then says whether the victim's Jobs finished instead
    )
    _, settled = observer.holds(
        newcomer_runs_victim_waits,
        what=f"{row} {victim.name} stays pending while {newcomer.name} runs",
        hold=timeouts.hold,
        guard=guard,
        refusals=timeouts.refusals,
        refused=victim.name,
    )
    record.verdict(settled)
    whole = watch.observe(victim.snapshot())
    record.verdict(whole)
    victim.confirm(whole, row)
    _, evicted = victim.until(
        lambda s: eviction_recorded(s, action),
        what=f"{row} the PodGroup of {victim.name} records the eviction",
        timeout=timeouts("api"),
        events=True,
    )
    record.verdict(evicted)


def never_partial_for_long(gang: Workload, timeouts: TimeoutPolicy) -> Check:
    """A guard for the wait while the binder binds: a gang may look partial for a moment, not for longer."""
    return gang.narrow(PartialGangWatch(gang.size, settle(timeouts)).observe)
