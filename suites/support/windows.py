"""Protection windows that end on KAI's evidence: a victim protected for a while (min-runtime), or a preemptor
that may evict no one for a while (preemption delay), judged from KAI's decisions and its own timestamps rather
than from the wall clock plus margins (the rule: docs/performance.md, "Protection windows"; facts:
docs/research/upstream-facts.md §B11).

* **The end** is read from the timestamp KAI itself compares its clock with: the victim PodGroup's
  ``kai.scheduler/last-start-timestamp`` plus the queue's min-runtime (``minruntime.go``), the preemptor PodGroup's
  ``creationTimestamp`` plus ``spec.preemptionDelay`` (``PreemptionDelayEnd``). Without a last-start stamp the end
  is estimated from the victim's first bind (the wall clock), and the record says so.
* **The protected phase** lasts until KAI acts, not until the wall clock says the window is over: on every
  observation the victim keeps its original pods and the preemptor binds nothing; the phase ends on the first
  observation in which KAI evicted (or anything was bound). It fails if nothing happened :data:`DUE_PERIODS`
  periods after the end: KAI evicts in the first cycle that starts after it.
* **The eviction's time** is then judged on KAI's own clock (its Evict events, v0.17's last-eviction stamp)
  against the exact end, without margin; where KAI's time or the exact end is missing, on the suite's observation
  with the former margin (``settle`` + the 1 s resolution of API timestamps), and the verdict says so.
"""

from __future__ import annotations

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.waits import KAI_SCHEDULE_PERIOD, TimeoutPolicy
from kai_conformance.reports.records import PodTimes
from kai_conformance.suites.support.detectors.consolidation import (
    ProtectionWindow,
    clock_time,
    evicted_when_due,
    kai_eviction_time,
    protected_until_end,
    protection_start,
)
from kai_conformance.suites.support.detectors.eviction import gang_undisturbed
from kai_conformance.suites.support.detectors.gang import nothing_bound
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of
from kai_conformance.suites.support.expectations.consolidation import LAST_START_ANNOTATION
from kai_conformance.suites.support.observe import Observer, Workload
from kai_conformance.suites.support.refusals import kai_refusals
from kai_conformance.suites.support.snapshot import Obj, Snapshot, name_of, parse_time
from kai_conformance.suites.support.timing import settle

#: API timestamps (creation, deletion, KAI's stamps and events) have whole seconds.
TIMESTAMP_RESOLUTION = 1.0
#: Periods after a window's end by which KAI must have evicted: it does in the first cycle that starts after the
#: end (≤ 1 period); the other 4 cover a cycle stretched by load and the suite's clock running ahead of KAI's.
DUE_PERIODS = 5


def wall_clock_margin(timeouts: TimeoutPolicy) -> float:
    """How much earlier than an estimated end an eviction seen on another clock is still accepted: the time a gang
    may take to be bound or evicted (``settle``) plus the resolution of the timestamps."""
    return settle(timeouts) + TIMESTAMP_RESOLUTION


def due_after(timeouts: TimeoutPolicy) -> float:
    return DUE_PERIODS * KAI_SCHEDULE_PERIOD * timeouts.scale


def min_runtime_window(
    what: str, seconds: float, victim: Snapshot, pods: list[PodTimes], timeouts: TimeoutPolicy
) -> ProtectionWindow:
    """The victim's protection: from its PodGroup's last-start stamp (exact), else from its first bind seen (the
    binder binds after KAI stamped the start: the end estimated no earlier than KAI's, judged with the margin)."""
    started = protection_start(victim)
    if isinstance(started, float):
        return ProtectionWindow(
            what, started + seconds, f"{LAST_START_ANNOTATION} {clock_time(started)}", True,
            wall_clock_margin(timeouts), started + seconds + due_after(timeouts),
        )  # fmt: skip
    binds = [t.bound for t in pods if t.bound is not None]
    first, seen = (min(binds), "its first bind") if binds else (victim.taken_at, "when the suite saw it bound")
    source = f"{seen} at {clock_time(first)}, the wall clock ({started.explanation})"
    end = first + seconds
    # KAI's stamp is at most one whole second before the bind seen; its end is no later than this one + 1 s.
    return ProtectionWindow(
        what, end, source, False, wall_clock_margin(timeouts), end + TIMESTAMP_RESOLUTION + due_after(timeouts)
    )


def delay_window(what: str, seconds: float, podgroup: Obj, timeouts: TimeoutPolicy) -> ProtectionWindow:
    """The preemptor's delay: from its PodGroup's creation (KAI's anchor while it has never been evicted)."""
    created = parse_time(podgroup["metadata"].get("creationTimestamp"))
    if created is None:
        raise errors.InfrastructureError(f"PodGroup {name_of(podgroup)} has no creationTimestamp: not an API object")
    source = f"PodGroup {name_of(podgroup)} creationTimestamp {clock_time(created)}"
    end = created + seconds
    return ProtectionWindow(what, end, source, True, wall_clock_margin(timeouts), end + due_after(timeouts))


def wait_out(
    observer: Observer,
    victim: Workload,
    started: Snapshot,
    preemptor: Workload,
    window: ProtectionWindow,
    timeouts: TimeoutPolicy,
    row: str,
) -> tuple[Verdict, Verdict]:
    """The protected phase: the victim keeps the pods it had bound in ``started`` and ``preemptor`` binds nothing on
    every observation until KAI acts, which must be by ``window.due``. Returns the phase's verdict (with how many
    times KAI refused the preemptor while the window lasted, its own count) and ``evicted-when-due``."""
    original = frozenset(p["metadata"]["uid"] for p in started.bound_pods)
    left = window.end - observer.clock()
    if left <= wall_clock_margin(timeouts):
        raise errors.InfrastructureError(
            f"the protection window ({window.what}) had {left:.1f}s left when {preemptor.name} was visible to KAI, "
            f"too little to observe: the cluster took too long to start the workloads "
            f"({startup(observer, victim, preemptor)})"
        )
    protected_at: list[float] = []
    refusals: list[int] = []

    def protected(snap: Snapshot) -> Verdict:
        return all_of(
            gang_undisturbed(snap.of(victim.name), original), nothing_bound(snap.of(preemptor.name), preemptor.size)
        )

    def on_time(snap: Snapshot) -> Verdict:
        state = protected(snap)
        if state.ok:
            protected_at.append(snap.taken_at)
            count = kai_refusals(snap.of(preemptor.name))
            if count is not None and snap.taken_at < window.end:
                refusals.append(count)
        return evicted_when_due(window, snap.taken_at, state)

    def acted(snap: Snapshot) -> Verdict:
        state = protected(snap)
        return Verdict("kai-acted", not state.ok, "nothing evicted or bound yet" if state.ok else str(state))

    snap, _ = observer.until(
        acted,
        what=f"{row} {victim.name} stays whole and {preemptor.name} waits for {window.what}, until KAI acts",
        timeout=max(window.due - observer.clock(), 0.0) + settle(timeouts),
        guard=on_time,
        events=True,  # the preemptor's refusals, counted while the window lasts
        about=[*victim.about, *preemptor.about],
    )
    acted_at = snap.taken_at - window.end
    counted = (
        f"KAI refused {preemptor.name} {refusals[-1] - refusals[0]} more time(s) meanwhile (its Unschedulable count)"
        if len(refusals) >= 2
        else "KAI's refusals of it were not counted (no Unschedulable events seen)"
    )
    span = f"{protected_at[-1] - protected_at[0]:.1f}s" if protected_at else "no observation"
    phase = Verdict(
        "gang-undisturbed+gang-held",
        True,
        f"{victim.name} whole and {preemptor.name} unbound on {len(protected_at)} observation(s) over {span}, until "
        f"KAI acted, seen {acted_at:+.1f}s from the protection's end; {counted}",
    )
    return phase, evicted_when_due(window, snap.taken_at, protected(snap))


def judge_eviction(observer: Observer, victim: Workload, window: ProtectionWindow, timeouts: TimeoutPolicy) -> Verdict:
    """``protected-until-end`` once KAI has acted: KAI's own time of the eviction (its Evict events are written as it
    deletes the pods; waited for up to ``settle``), else the pods' eviction as the suite saw it."""
    snap, _ = victim.settle(
        lambda s: Verdict("kai-eviction-time", kai_eviction_time(s) is not None, "KAI's time of the eviction"),
        what=f"KAI's own record of when it evicted {victim.name}",
        timeout=settle(timeouts),
        events=True,
    )
    return protected_until_end(window, kai_eviction_time(snap), observer.timeline.pods(victim.name))


def startup(observer: Observer, victim: Workload, newcomer: Workload) -> str:
    """How long each step before a protection window's wait took, slowest first, from the timeline (cluster
    timestamps, whole seconds; the last step ends now on the observer's clock)."""
    victim_pods, newcomer_pods = observer.timeline.pods(victim.name), observer.timeline.pods(newcomer.name)
    victim_created = min((t.created for t in victim_pods if t.created is not None), default=None)
    victim_bound = max((t.bound for t in victim_pods if t.bound is not None), default=None)
    newcomer_created = min((t.created for t in newcomer_pods if t.created is not None), default=None)
    steps = {
        f"{victim.name} created → all {victim.size} bound": (victim_created, victim_bound),
        f"{victim.name} bound → {newcomer.name} created": (victim_bound, newcomer_created),
        f"{newcomer.name} created → visible to KAI and checked": (newcomer_created, observer.clock()),
    }
    took = {step: stop - start for step, (start, stop) in steps.items() if start is not None and stop is not None}
    if not took:
        return "no pod times were observed"
    slowest = max(took, key=lambda step: took[step])
    return f"slowest: {slowest}; " + ", ".join(f"{step} {seconds:.1f}s" for step, seconds in took.items())
