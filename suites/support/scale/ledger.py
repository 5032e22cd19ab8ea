"""The ledger of a scale burst: every change a watch delivers about the burst's pods and PodGroups, kept as per-gang
and per-queue counts, judged by the scale detectors at every change and timed for the report.

Pure data: it never calls the API. :mod:`suites.support.scale` feeds it from informers (a watch each of pods,
PodGroups and BindRequests over the case's namespace), the self-tests feed it hand-made timelines. Times are seconds since the epoch
on the suite's clock, taken when the watch delivered the change (sub-second, unlike API timestamps).

Pod states, as the detectors need them:

* *live*: not being deleted and not ended (phase neither Succeeded nor Failed);
* *bound*: live and on a node: it counts toward its gang and, with its GPUs, toward its queue;
* *holding*: on a node and not ended, being deleted or not: its GPUs are not free on that node yet;
* *evicted*: seen bound, then being deleted or gone (the suite deletes nothing while a burst runs);
* *being bound*: live, not bound, and named by a BindRequest the binder has not finished (Succeeded or Failed): KAI
  placed it, the binder has yet to bind it. A gang is judged on its placed pods (bound or being bound), so the
  binder's pace is not taken for a partial gang (``gang-never-partial``, suites/support/detectors/scale.py).

A gang is *whole* when all its pods are bound, *partial* when some but not all are, *complete* when all its pods
exist (and, under KAI, its PodGroup): only a complete gang can be scheduled, so a burst is *settled* once every gang
is complete and nothing (creation, bind, eviction, deletion, PodGroup) has changed for the quiet time.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from kai_conformance.reports.records import BurstTimes, GangTimes
from kai_conformance.suites.support.cases.scale import BurstPlan, PlannedGang
from kai_conformance.suites.support.detectors import scale as detect
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of, vacuous
from kai_conformance.suites.support.snapshot import (
    Obj,
    bind_finished,
    gpus_of,
    is_terminating,
    name_list,
    name_of,
    node_of,
    owner_refs,
    uid_of,
    workload_of,
)

ENDED = ("Succeeded", "Failed")
DELETED = "DELETED"


@dataclass
class PodState:
    gang: str
    gpus: int
    node: str | None = None
    live: bool = True
    ended: bool = False
    gone: bool = False
    evicted: bool = False

    @property
    def bound(self) -> bool:
        return self.live and self.node is not None and not self.gone

    @property
    def holding(self) -> bool:
        return self.node is not None and not self.ended and not self.gone


@dataclass
class GangState:
    plan: PlannedGang
    times: GangTimes
    live: int = 0
    bound: int = 0
    podgroup: bool = False
    round_started: float | None = None  # first bind since the gang last had no pod bound

    @property
    def whole(self) -> bool:
        return self.bound >= self.plan.pods

    @property
    def complete(self) -> bool:
        return self.live >= self.plan.pods


@dataclass
class BurstLedger:
    """See the module docstring. ``kai``: the burst is KAI's (a gang is complete only with its PodGroup); the default
    scheduler's control burst has no PodGroups."""

    plan: BurstPlan
    grace: float
    kai: bool = True
    bind_allowance: float | None = None
    gangs: dict[str, GangState] = field(init=False)
    pods: dict[str, PodState] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.gangs = {
            g.name: GangState(g, GangTimes(g.name, g.pods, g.gpus, g.queue, g.priority)) for g in self.plan.gangs
        }
        self.queues = {q.role: detect.QueueBounds(q.role, q.quota, q.limit) for q in self.plan.queues}
        self.partial = detect.PartialGangs(self.grace, self.bind_allowance)
        self.names: dict[str, str] = {}  # pod uid → name
        self.live_pods: dict[str, str] = {}  # pod name → gang, for every pod not yet gone
        self.members: dict[str, set[str]] = {}  # gang → uids of its pods not yet gone
        self.bindrequests: dict[str, str] = {}  # BindRequest uid → the pod it names
        self.finished_binds: set[str] = set()  # BindRequest uids the binder has finished (Succeeded or Failed)
        self.requested: dict[str, set[str]] = {}  # pod name → uids of the unfinished BindRequests naming it
        self.held: dict[str, int] = dict.fromkeys(self.queues, 0)
        self.held_non_preemptible: dict[str, int] = dict.fromkeys(self.queues, 0)
        self.evicted_non_preemptible: dict[str, int] = {}
        self.violations: dict[str, Verdict] = {}
        self.held_total = 0
        self.series: list[tuple[float, float]] = []
        self.binds = 0
        self.non_preemptible_binds = 0
        self.last_bind: float | None = None
        self.last_change: float | None = None
        self.first_submitted: float | None = None
        self.last_submitted: float | None = None
        self.events = 0

    # ------------------------------------------------------------------------------------------------ input
    def submitted(self, gang: str, at: float) -> None:
        self.gangs[gang].times.submitted = at
        self.first_submitted = at if self.first_submitted is None else min(self.first_submitted, at)
        self.last_submitted = at if self.last_submitted is None else max(self.last_submitted, at)
        self._changed(at)

    def podgroup(self, event_type: str, podgroup: Obj, at: float) -> None:
        self.events += 1
        owner = next((r.get("name") for r in owner_refs(podgroup) if r.get("kind") == "JobSet"), None)
        gang = self.gangs.get(owner or "")
        if gang is None or event_type == DELETED or gang.podgroup:
            return
        gang.podgroup = True
        gang.times.podgroup = at
        self._changed(at)

    def lags(self, listed: list[Obj]) -> list[str]:
        """How the pods the watches told of differ from ``listed`` (a list of the namespace's pods just now): empty
        once every change up to that list has been fed in. A judgement of "settled" on a view that lags would miss
        what the cluster did last (an eviction the watch has not delivered yet)."""
        mine = {uid_of(p): p for p in listed if workload_of(p) in self.gangs}
        seen = {uid: (state.node, state.live) for uid, state in self.pods.items()}
        differ = [name_of(p) for uid, p in mine.items()
                  if seen.get(uid) != (node_of(p), (p.get("status") or {}).get("phase") not in ENDED
                                       and not is_terminating(p))]  # fmt: skip
        gone = len(set(seen) - set(mine))
        return differ + ([f"{gone} pod(s) gone"] if gone else [])

    def lagging_gangs(self, gangs: Collection[str], listed: list[Obj], requests: list[Obj] | None = None) -> set[str]:
        """Of ``gangs``, those whose pods in ``listed`` (a list of the namespace's pods just now), or which of their
        pods unfinished BindRequests name in ``requests`` (a list of its BindRequests), differ from what the watches
        told: their view lags, so how long they looked partial says nothing yet (:meth:`PartialGangs.check`)."""
        wanted = set(gangs)
        seen = {uid: (state.gang, state.node, state.live) for uid, state in self.pods.items() if state.gang in wanted}
        mine = {uid_of(p): (str(workload_of(p)), node_of(p), (p.get("status") or {}).get("phase") not in ENDED
                            and not is_terminating(p)) for p in listed if workload_of(p) in wanted}  # fmt: skip
        differ = {state[0] for uid, state in mine.items() if seen.get(uid) != state}
        differ |= {seen[uid][0] for uid in set(seen) - set(mine)}
        if requests is not None:
            pending = {(r.get("spec") or {}).get("podName") for r in requests if not bind_finished(r)}
            for gang in wanted - differ:
                names = {self.names[uid] for uid in self.members.get(gang, ()) if uid in self.names}
                if names & pending != names & set(self.requested):
                    differ.add(gang)
        return differ

    def pod(self, event_type: str, pod: Obj, at: float) -> None:
        """One watch event of a pod: its new state replaces the old one, and every count that moved moves."""
        self.events += 1
        gang = self.gangs.get(workload_of(pod) or "")
        if gang is None:
            return
        uid, name = uid_of(pod), name_of(pod)
        before = self.pods.get(uid)
        self._track(gang.plan.name, uid, name, gone=event_type == DELETED)
        after = PodState(gang.plan.name, gpus_of(pod), node_of(pod))
        phase = (pod.get("status") or {}).get("phase")
        after.ended = phase in ENDED
        after.gone = event_type == DELETED
        after.live = not after.gone and not after.ended and not is_terminating(pod)
        after.evicted = before.evicted if before else False
        self.pods[uid] = after
        was_bound, was_live = (before.bound, before.live and not before.gone) if before else (False, False)
        now_live = after.live
        if was_live != now_live:
            gang.live += 1 if now_live else -1
            self._changed(at)
        if was_bound != after.bound:
            self._bound_changed(gang, after, at, now=after.bound)
            deleted = after.gone or is_terminating(pod)
            if was_bound and deleted and not after.evicted and not self._removal_expected(gang, uid):
                # deleted while bound, and not by the suite or the workload's own controllers: KAI evicted it
                after.evicted = True
                gang.times.evicted_pods += 1
                if not gang.plan.preemptible:
                    self.evicted_non_preemptible[gang.plan.name] = gang.times.evicted_pods
                    self._judge("non-preemptible-never-evicted",
                                detect.non_preemptible_evictions(self.evicted_non_preemptible))  # fmt: skip
        if before is None and name in self.requested and not after.bound:
            self._placement_changed(gang, at)  # its BindRequest was seen before the pod itself
        if after.gone:
            del self.pods[uid]
            self.names.pop(uid, None)

    def _track(self, gang: str, uid: str, name: str, *, gone: bool) -> None:
        """Who the pod is, for the BindRequests that name it."""
        if gone:
            self.live_pods.pop(name, None)
            self.members.get(gang, set()).discard(uid)
        else:
            self.names[uid] = name
            self.live_pods[name] = gang
            self.members.setdefault(gang, set()).add(uid)

    def bindrequest(self, event_type: str, request: Obj, at: float) -> None:
        """One watch event of a BindRequest: KAI's decision to place the pod it names (``spec.podName``) on a node."""
        self.events += 1
        uid = uid_of(request)
        pod = (request.get("spec") or {}).get("podName") or ""
        named = self.bindrequests.get(uid, pod)
        if event_type == DELETED:
            self.bindrequests.pop(uid, None)
            self.finished_binds.discard(uid)
        else:
            self.bindrequests[uid] = pod
            if bind_finished(request):
                self.finished_binds.add(uid)
        pending = self.requested.setdefault(named, set())
        if uid in self.bindrequests and uid not in self.finished_binds:
            pending.add(uid)
        else:
            pending.discard(uid)
        if not pending:
            del self.requested[named]
        gang = self.gangs.get(self.live_pods.get(named, ""))
        if gang is not None:
            self._placement_changed(gang, at)

    def _binding(self, gang: str) -> int:
        """Pods of ``gang`` not bound yet that a BindRequest the binder has not finished names."""
        return sum(1 for uid in self.members.get(gang, ())
                   if not self.pods[uid].bound and self.names.get(uid) in self.requested)  # fmt: skip

    def _bound_changed(self, gang: GangState, pod: PodState, at: float, *, now: bool) -> None:
        step = 1 if now else -1
        gang.bound += step
        queue = gang.plan.queue
        self.held[queue] = self.held.get(queue, 0) + step * pod.gpus
        if not gang.plan.preemptible:
            self.held_non_preemptible[queue] = self.held_non_preemptible.get(queue, 0) + step * pod.gpus
        self.held_total += step * pod.gpus
        self.series.append((at, float(self.held_total)))
        if now:
            self.binds += 1
            self.non_preemptible_binds += not gang.plan.preemptible
            self.last_bind = at
            if gang.bound == 1:
                gang.round_started = at
            if gang.whole and gang.times.all_bound is None:
                gang.times.first_bound, gang.times.all_bound = gang.round_started, at
        elif gang.bound == 0:
            gang.round_started = None
        self._placement_changed(gang, at)
        self._judge("queue-limit", detect.queue_limits(self.held, self.queues.values()))
        self._judge("non-preemptible-in-quota", detect.non_preemptible_quota(self.held_non_preemptible,
                                                                              self.queues.values()))  # fmt: skip
        self._changed(at)

    def _placement_changed(self, gang: GangState, at: float) -> None:
        """Judge the gang's placement after a change: its bound pods and those being bound."""
        self.partial.update(gang.plan.name, gang.bound, gang.plan.pods, at, binding=self._binding(gang.plan.name))

    def _removal_expected(self, gang: GangState, uid: str) -> bool:
        """Whether the bound pod ``uid`` of ``gang`` going away now is not an eviction (a burst's pods are never removed by
        the suite, so every removal of a bound pod is KAI's)."""
        return False

    def _changed(self, at: float) -> None:
        self.last_change = at if self.last_change is None else max(self.last_change, at)

    def _judge(self, detector: str, verdict: Verdict) -> None:
        """Keep the first violation of each detector: once broken, a "never" stays broken."""
        if not verdict.ok and detector not in self.violations:
            self.violations[detector] = verdict

    # ------------------------------------------------------------------------------------------------ judging
    def guard_verdicts(self, at: float, *, lagging: Collection[str] = ()) -> dict[str, Verdict]:
        """The over-the-run detectors at ``at``, by name: a violation seen at any change so far stays one.
        ``lagging``: partial gangs not judged yet (:meth:`lagging_gangs`)."""
        verdicts = {"gang-never-partial": self.partial.check(at, lagging=lagging)}
        verdicts["queue-limit"] = self.violations.get("queue-limit") or detect.queue_limits(
            self.held, self.queues.values()
        )
        if self.kai:
            verdicts["non-preemptible-in-quota"] = self.violations.get(
                "non-preemptible-in-quota"
            ) or detect.non_preemptible_quota(self.held_non_preemptible, self.queues.values())
            verdicts["non-preemptible-never-evicted"] = self.violations.get(
                "non-preemptible-never-evicted"
            ) or detect.non_preemptible_evictions(self.evicted_non_preemptible)
        return self.marked_vacuous(verdicts)

    def nothing_to_judge(self) -> dict[str, str]:
        """Why a detector had nothing to judge so far (detector → reason), for those that had not."""
        reasons = {}
        if not self.partial.placed_ever:
            reasons["gang-never-partial"] = "no pod was ever placed, so no gang could be partial"
        if not any(q.limit >= 0 for q in self.queues.values()):
            reasons["queue-limit"] = "no queue has a GPU limit"
        elif not self.binds:
            reasons["queue-limit"] = "no pod was ever bound"
        non_preemptible = any(not g.plan.preemptible for g in self.gangs.values())
        if not non_preemptible or not self.non_preemptible_binds:
            why = "no gang is non-preemptible" if not non_preemptible else "no non-preemptible pod was ever bound"
            reasons["non-preemptible-never-evicted"] = why
            reasons["non-preemptible-in-quota"] = why
        elif not any(q.quota >= 0 for q in self.queues.values()):
            reasons["non-preemptible-in-quota"] = "no queue has a GPU quota"
        return reasons

    def marked_vacuous(self, verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
        """``verdicts`` with each hold that had nothing to judge marked so (a violation stays as it is)."""
        reasons = self.nothing_to_judge()
        return {name: vacuous(v, reasons[name]) if name in reasons else v for name, v in verdicts.items()}

    def guards(self, at: float, *, lagging: Collection[str] = ()) -> Verdict:
        """All over-the-run detectors as one verdict (the failing ones first)."""
        return all_of(*self.guard_verdicts(at, lagging=lagging).values())

    def settled(self, at: float, quiet: float) -> Verdict:
        """Every gang complete and nothing changed for ``quiet`` seconds."""
        incomplete = [g for g in self.gangs.values() if not g.complete or (self.kai and not g.podgroup)]
        still = at - (self.last_change if self.last_change is not None else at)
        if incomplete:
            shown = [f"{g.plan.name} ({g.live} of {g.plan.pods} pods{'' if g.podgroup or not self.kai else ', no PodGroup'})"
                     for g in incomplete]  # fmt: skip
            return Verdict("settled", False, f"{len(incomplete)} gang(s) not complete: {name_list(shown, str)}; "
                           + self.status())  # fmt: skip
        if still < quiet:
            return Verdict(
                "settled", False, f"last change {still:.1f}s ago (settles after {quiet:.1f}s); " + self.status()
            )
        return Verdict("settled", True, f"nothing changed for {still:.1f}s; " + self.status())

    def waiting(self) -> list[detect.Waiting]:
        return [
            detect.Waiting(g.plan.name, g.plan.pods, g.plan.gpus, g.plan.queue, g.plan.preemptible)
            for g in self.gangs.values()
            if not g.whole
        ]

    def node_use(self) -> dict[str, int]:
        """GPUs the burst's pods hold per node (being deleted included, until they end)."""
        use: dict[str, int] = {}
        for pod in self.pods.values():
            if pod.holding and pod.node:
                use[pod.node] = use.get(pod.node, 0) + pod.gpus
        return use

    def whole_gangs(self) -> int:
        return sum(1 for g in self.gangs.values() if g.whole)

    def status(self) -> str:
        bound = sum(g.bound for g in self.gangs.values())
        partial = sum(1 for g in self.gangs.values() if 0 < g.bound < g.plan.pods)
        evicted = sum(g.times.evicted_pods for g in self.gangs.values())
        return (
            f"{bound:,} of {self.plan.pods:,} pods bound, {self.whole_gangs()} of {len(self.gangs)} gangs whole, "
            f"{partial} partial, {self.held_total:,} of {self.plan.cluster_gpus:,} GPUs held, {evicted} pod(s) evicted"
        )

    # ------------------------------------------------------------------------------------------------ records
    def gang_times(self) -> list[GangTimes]:
        return [g.times for g in self.gangs.values()]

    def burst_times(self, name: str, settled: float | None) -> BurstTimes:
        """The burst as a whole; ``filled`` is when the held GPUs first reached what they hold at the end."""
        filled = next((t for t, held in self.series if held >= self.held_total), None) if self.held_total else None
        evicted = [g for g in self.gangs.values() if g.times.evicted_pods]
        return BurstTimes(
            name=name, gangs=len(self.gangs), pods=self.plan.pods, gpus=self.plan.gpus,
            cluster_gpus=self.plan.cluster_gpus, first_submitted=self.first_submitted,
            last_submitted=self.last_submitted, binds=self.binds, last_bind=self.last_bind,
            held_gpus=self.held_total, filled=filled, evicted_pods=sum(g.times.evicted_pods for g in evicted),
            evicted_gangs=len(evicted), settled=settled,
        )  # fmt: skip

    def held_over_time(self, points: int = 400) -> list[tuple[float, float]]:
        """GPUs held by the burst over time, thinned to about ``points`` points (the last kept) for the report."""
        if len(self.series) <= points:
            return list(self.series)
        step = len(self.series) / points
        thinned = [self.series[int(i * step)] for i in range(points)]
        return [*thinned, self.series[-1]]
