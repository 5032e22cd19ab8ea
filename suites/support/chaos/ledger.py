"""The ledger of a chaos mix: the scale ledger (suites/support/scale/ledger.py) over workloads that arrive, end, are
deleted, suspended and resumed while components restart, plus what only a mix can break. Pure data, fed from the
mix namespace's watches of pods, PodGroups, BindRequests and TrainJobs (suites/support/chaos/run.py) or, in the
self-tests, by hand.

What it judges at every change, over the whole mix (the invariants of suites/test_chaos.py):

* ``gang-never-partial``: a gang's *placed* pods (bound, or named by a BindRequest the binder has not finished: the
  binder's pace is not a gang violation) are all or none of it, beyond the settle grace. A gang some of whose pods
  have ended or are being deleted is *leaving* (completing, failing, restarting, suspended, evicted whole) and is
  judged again once they are gone.
* ``queue-limit``, ``non-preemptible-in-quota``, ``non-preemptible-never-evicted`` as in the scale area; a bound pod
  that goes away is an eviction unless the suite deleted or suspended its TrainJob or a pod of its gang failed (its
  JobSet restarts or fails the gang).
* ``one-podgroup-per-trainjob``: never two PodGroups (not being deleted) owned by one TrainJob's JobSet at once.
* ``no-leftover-bindrequest``: no BindRequest names a pod that is gone for longer than garbage collection may take.
* ``no-leftover-reservation`` (mixes with fractional workloads): no reservation pod of a GPU group the mix used is
  left once nothing uses the group, beyond the grace (suites/support/chaos/sharing.py, with KAI's rule).

GPUs are counted as KAI counts them: a pod asking 0.5 GPU counts 0.5 against its queue's quota and limit
(``queue-limit``, ``non-preemptible-in-quota``, ``fitting-gangs-bound``), and is placed, for ``gang-never-partial``,
like any pod: bound, or named by a BindRequest the binder has not finished (while the binder waits for its
reservation pod's answer).

A mix is *settled* when every *active* workload (submitted, not finished, not suspended, not deleted) has all its
pods and its PodGroup and nothing changed for the quiet time; then no waiting gang that KAI could place (active, with
all its pods and its PodGroup as it is judged: a "fails" workload may lose its pod again between the settling and the
judgement) may fit the idle GPUs (``fitting-gangs-bound``, judged by the run against the cluster).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from kai_conformance.suites.support.cases.chaos import ChaosMix
from kai_conformance.suites.support.chaos.sharing import LEFTOVER_RESERVATION, Asking, Reservations
from kai_conformance.suites.support.detectors import scale as detect
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.sharing import GPU_GROUP_LABEL
from kai_conformance.suites.support.scale.ledger import DELETED, BurstLedger, GangState, PodState
from kai_conformance.suites.support.snapshot import (
    Obj,
    is_terminating,
    labels_of,
    name_list,
    name_of,
    node_of,
    owner_refs,
    uid_of,
    workload_of,
)

FINISHED = ("Complete", "Failed")
ONE_PODGROUP = "one-podgroup-per-trainjob"
LEFTOVER_BINDREQUEST = "no-leftover-bindrequest"
QUEUE_LIMIT, IN_QUOTA = "queue-limit", "non-preemptible-in-quota"
BINDER = "binder"


@dataclass
class WorkloadState:
    """What the suite and the TrainJob say of one workload, beside its pods."""

    submitted: bool = False
    released: bool = False  # deleted or suspended by the suite: its pods going is not an eviction
    suspended: bool = False
    finished: str = ""  # the TrainJob's Complete or Failed condition, once True
    exists: bool = False
    #: The pods the gang had when one of them ended Failed: its JobSet restarts (deletes them) or fails the gang.
    #: Their going is not an eviction; the pods of the next attempt are judged again.
    failed_round: set[str] = field(default_factory=set)
    podgroups: set[str] = field(default_factory=set)


class ChaosLedger(BurstLedger):
    """``reservation_grace``: how long a reservation pod may outlive its GPU group's use (chaos/sharing.py); the
    ``gc_grace`` unless given."""

    def __init__(self, mix: ChaosMix, grace: float, gc_grace: float, reservation_grace: float | None = None) -> None:
        super().__init__(mix.plan(), grace)
        self.mix = mix
        self.gc_grace = gc_grace
        self.fractions = {w.name: w.fraction for w in mix.workloads if w.fraction}
        # The fractional GPUs bound per queue, beside the base ledger's whole ones (KAI adds them up).
        self.shared: dict[str, float] = {}
        self.shared_non_preemptible: dict[str, float] = {}
        self.reservations = Reservations(gc_grace if reservation_grace is None else reservation_grace)
        self.state = {w.name: WorkloadState() for w in mix.workloads}
        self.orphans: dict[str, float] = {}  # BindRequest uid → since when its pod is gone
        self.orphaned_ever = 0  # BindRequests whose pod went while they existed: what no-leftover-bindrequest judges
        self.podgroups_seen: set[str] = set()
        self.gone_pods: set[str] = set()  # names of the pods seen deleted (a BindRequest may arrive before its pod)
        self.violated_at: dict[str, float] = {}
        self.changes: list[float] = []
        self.journal: list[tuple[float, str, str]] = []

    # ------------------------------------------------------------------------------------------------ input
    def note(self, at: float, gang: str, text: str) -> None:
        """A line of the mix's timeline (the run's steps and faults come here too)."""
        self.journal.append((at, gang, text))

    def started(self, at: float) -> None:
        """The mix began: quiet is measured from here until the first change."""
        self.note(at, "", "mix started")
        self._changed(at)

    def submitted(self, gang: str, at: float) -> None:
        self.state[gang].submitted = True
        self.note(at, gang, "submitted")
        super().submitted(gang, at)

    def released(self, gang: str, at: float, *, how: str) -> None:
        """The suite deleted or suspended ``gang``'s TrainJob."""
        self.state[gang].released = True
        self.note(at, gang, how)
        self._changed(at)

    def resumed(self, gang: str, at: float) -> None:
        self.state[gang].released = False
        self.note(at, gang, "resumed")
        self._changed(at)

    def trainjob(self, event_type: str, trainjob: Obj, at: float) -> None:
        state = self.state.get(name_of(trainjob))
        if state is None:
            return
        state.exists = event_type != DELETED
        state.suspended = bool((trainjob.get("spec") or {}).get("suspend"))
        for cond in (trainjob.get("status") or {}).get("conditions") or []:
            if cond.get("type") in FINISHED and cond.get("status") == "True" and not state.finished:
                state.finished = cond["type"]
                self.note(at, name_of(trainjob), f"TrainJob {cond['type']}")
                self._changed(at)

    def podgroup(self, event_type: str, podgroup: Obj, at: float) -> None:
        super().podgroup(event_type, podgroup, at)
        owner = next((r.get("name") for r in owner_refs(podgroup) if r.get("kind") == "JobSet"), None)
        state = self.state.get(owner or "")
        if state is None or owner is None:
            return
        uid = uid_of(podgroup)
        if event_type == DELETED or is_terminating(podgroup):
            if uid in state.podgroups:
                state.podgroups.discard(uid)
                self.note(
                    at, owner, f"PodGroup {name_of(podgroup)} {'deleted' if event_type == DELETED else 'deleting'}"
                )
            return
        self.podgroups_seen.add(uid)
        if uid not in state.podgroups:
            state.podgroups.add(uid)
            self.note(at, owner, f"PodGroup {name_of(podgroup)} created")
            if len(state.podgroups) > 1:
                self._judge(ONE_PODGROUP, Verdict(ONE_PODGROUP, False, f"TrainJob {owner} has "
                                                  f"{len(state.podgroups)} PodGroups at once"))  # fmt: skip
                self.violated_at.setdefault(ONE_PODGROUP, at)

    def pod(self, event_type: str, pod: Obj, at: float) -> None:
        gang = workload_of(pod) or ""
        if gang not in self.gangs:
            return
        uid, name = uid_of(pod), name_of(pod)
        before = self.pods.get(uid)
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Failed":
            self.state[gang].failed_round |= {u for u, p in self.pods.items() if p.gang == gang} | {uid}
        if event_type == DELETED:
            self.gone_pods.add(name)
            self._pod_gone(name, at)
        super().pod(event_type, pod, at)
        self.reservations.pod(event_type, pod, gang, at)
        after = self.pods.get(uid)
        self._journal_pod(gang, name, before, after, phase, event_type, node_of(pod), at)

    def bindrequest(self, event_type: str, request: Obj, at: float) -> None:
        uid = uid_of(request)
        pod = (request.get("spec") or {}).get("podName") or ""
        self.reservations.bindrequest(event_type, request, self.live_pods.get(pod, ""), at)
        if event_type == DELETED:
            self.orphans.pop(uid, None)
        elif uid not in self.bindrequests:
            self.note(
                at,
                self.live_pods.get(pod, ""),
                f"BindRequest for {pod} → {(request.get('spec') or {}).get('selectedNode')}",
            )
        super().bindrequest(event_type, request, at)
        if event_type != DELETED and pod in self.gone_pods and uid not in self.orphans:
            self.orphans[uid] = at
            self.orphaned_ever += 1

    def reservation(self, event_type: str, pod: Obj, at: float) -> None:
        """A pod of KAI's reservation namespace (the binder's, one per shared GPU)."""
        changed = self.reservations.reservation(event_type, pod, at)
        if changed:
            group = labels_of(pod).get(GPU_GROUP_LABEL) or ""
            self.note(at, self.reservations.gang_of(group), changed)
            self._changed(at)

    def restarting(self, component: str, at: float) -> None:
        """A restart of ``component`` began (the run's step)."""
        if component == BINDER:
            self.reservations.binder_restarting()

    def back(self, component: str, at: float) -> None:
        """``component`` is back after a restart: a new pod of it is Ready."""
        self.note(at, "", f"{component} back")
        if component == BINDER:
            self.reservations.binder_returned(at)

    def _pod_gone(self, name: str, at: float) -> None:
        for uid, pod in self.bindrequests.items():
            if pod == name and uid not in self.orphans:
                self.orphans[uid] = at
                self.orphaned_ever += 1

    def _journal_pod(self, gang: str, name: str, before: PodState | None, after: PodState | None, phase: str | None,
                     event_type: str, node: str | None, at: float) -> None:  # fmt: skip
        if before is None and after is not None:
            self.note(at, gang, f"pod {name} created")
        if after is not None and before is not None and after.bound and not before.bound:
            self.note(at, gang, f"pod {name} bound to {node}")
        if before is not None and before.live and after is not None and after.ended:
            self.note(at, gang, f"pod {name} {phase}")
        if after is not None and after.evicted and (before is None or not before.evicted):
            self.note(at, gang, f"pod {name} evicted (deleted while bound)")
        if event_type == DELETED:
            self.note(at, gang, f"pod {name} gone")

    # ------------------------------------------------------------------------------------------------ hooks
    def _bound_changed(self, gang: GangState, pod: PodState, at: float, *, now: bool) -> None:
        fraction = self.fractions.get(gang.plan.name, 0.0)
        if fraction:  # before the base ledger judges the queues at this change
            step, queue = fraction if now else -fraction, gang.plan.queue
            self.shared[queue] = self.shared.get(queue, 0.0) + step
            if not gang.plan.preemptible:
                self.shared_non_preemptible[queue] = self.shared_non_preemptible.get(queue, 0.0) + step
        super()._bound_changed(gang, pod, at, now=now)

    def _judge(self, detector: str, verdict: Verdict) -> None:
        """The queues are judged on KAI's GPU amounts, fractions included, whatever the base ledger counted."""
        if detector in (QUEUE_LIMIT, IN_QUOTA):
            verdict = self._amount_verdict(detector)
        super()._judge(detector, verdict)

    def _amount_verdict(self, detector: str) -> Verdict:
        if detector == QUEUE_LIMIT:
            return detect.queue_limits(self.amounts(), self.queues.values())
        return detect.non_preemptible_quota(self.amounts(non_preemptible=True), self.queues.values())

    def amounts(self, *, non_preemptible: bool = False) -> dict[str, float]:
        """GPUs bound per queue as KAI counts them: whole GPUs plus fractions, through the gangs' PodGroups. The
        pods of a gang the suite released (deleted, suspended, removed at the end of the mix) or that finished count
        in no queue once its PodGroup is gone: the PodGroup may be collected before the pods, and KAI accounts a
        queue's GPUs by PodGroup (its snapshot builds jobs from the PodGroups it lists and attaches pods to them,
        ``pkg/scheduler/cache/cluster_info/cluster_info.go`` ``snapshotPodGroups`` 416–470 at v0.17.0; the nodes still
        count the pods' GPUs) (seen on the real controllers: while a deleted gang's pods were still bound, a
        non-preemptible gang was bound into the quota they had filled)."""
        whole, shared = ((self.held_non_preemptible, self.shared_non_preemptible) if non_preemptible
                         else (self.held, self.shared))  # fmt: skip
        totals = {q: whole.get(q, 0) + shared.get(q, 0.0) for q in {*whole, *shared}}
        for pod in self.pods.values():
            gang = self.gangs[pod.gang]
            if pod.bound and self._unaccounted(pod.gang) and not (non_preemptible and gang.plan.preemptible):
                queue = gang.plan.queue
                totals[queue] = totals.get(queue, 0.0) - (self.fractions.get(pod.gang) or pod.gpus)
        return totals

    def _unaccounted(self, gang: str) -> bool:
        state = self.state[gang]
        return (state.released or bool(state.finished)) and not state.podgroups

    def _removal_expected(self, gang: GangState, uid: str) -> bool:
        state = self.state[gang.plan.name]
        return state.released or uid in state.failed_round or bool(state.finished)

    def _placement_changed(self, gang: GangState, at: float) -> None:
        """A gang being bound counts as placed, with no allowance: in a mix the binder itself restarts (its pace is
        not a gang violation, and a BindRequest it never finishes is ``no-leftover-bindrequest``'s)."""
        leaving = any(p.gang == gang.plan.name and not p.live for p in self.pods.values())
        placed = 0 if leaving else gang.bound + self._binding(gang.plan.name)
        self.partial.update(gang.plan.name, min(placed, gang.plan.pods), gang.plan.pods, at)

    def _changed(self, at: float) -> None:
        super()._changed(at)
        self.changes.append(at)

    # ------------------------------------------------------------------------------------------------ judging
    def guard_verdicts(self, at: float, *, lagging: Collection[str] = ()) -> dict[str, Verdict]:
        verdicts = super().guard_verdicts(at, lagging=lagging)
        for detector in (QUEUE_LIMIT, IN_QUOTA):
            if detector in verdicts:
                verdicts[detector] = self.violations.get(detector) or self._amount_verdict(detector)
        verdicts[ONE_PODGROUP] = self.violations.get(ONE_PODGROUP) or Verdict(
            ONE_PODGROUP, True, "never two PodGroups for one TrainJob at once"
        )
        verdicts[LEFTOVER_BINDREQUEST] = self.leftover_bindrequests(at)
        if self.fractions:
            verdicts[LEFTOVER_RESERVATION] = self.reservations.verdict(at)
        for detector, verdict in verdicts.items():
            if not verdict.ok:
                self.violated_at.setdefault(detector, at)
        return self.marked_vacuous(verdicts)

    def nothing_to_judge(self) -> dict[str, str]:
        reasons = super().nothing_to_judge()
        if not self.podgroups_seen:
            reasons[ONE_PODGROUP] = "no PodGroup was made"
        if not self.orphaned_ever:
            reasons[LEFTOVER_BINDREQUEST] = "no pod went away while a BindRequest named it"
        if not self.reservations.gangs:
            reasons[LEFTOVER_RESERVATION] = "no pod used a shared GPU group"
        return reasons

    def leftover_bindrequests(self, at: float) -> Verdict:
        overdue = sorted((since, uid) for uid, since in self.orphans.items() if at - since > self.gc_grace)
        if overdue or LEFTOVER_BINDREQUEST in self.violations:
            if LEFTOVER_BINDREQUEST not in self.violations:
                pods = [self.bindrequests.get(uid, "?") for _, uid in overdue]
                self._judge(LEFTOVER_BINDREQUEST, Verdict(
                    LEFTOVER_BINDREQUEST, False,
                    f"{len(overdue)} BindRequest(s) left for pods that are gone ({name_list(pods, str)}) for more "
                    f"than the {self.gc_grace:.1f}s garbage collection may take"))  # fmt: skip
            return self.violations[LEFTOVER_BINDREQUEST]
        return Verdict(LEFTOVER_BINDREQUEST, True, f"no BindRequest outlived its pod ({len(self.bindrequests)} now)")

    def status(self) -> str:
        shared = sum(self.shared.values())
        return super().status() + (f", {detect.gpus(shared)} GPU(s) held in fractions" if self.fractions else "")

    def active(self, gang: str) -> bool:
        state = self.state[gang]
        return state.submitted and not (state.released or state.suspended or state.finished)

    def settled(self, at: float, quiet: float) -> Verdict:
        incomplete = [g for g in self.gangs.values() if self.active(g.plan.name) and (not g.complete or not g.podgroup)]
        still = at - (self.last_change if self.last_change is not None else at)
        if incomplete:
            shown = [f"{g.plan.name} ({g.live} of {g.plan.pods} pods{'' if g.podgroup else ', no PodGroup'})"
                     for g in incomplete]  # fmt: skip
            return Verdict("settled", False, f"{len(incomplete)} active gang(s) not complete: "
                           f"{name_list(shown, str)}; {self.status()}")  # fmt: skip
        if still < quiet:
            return Verdict(
                "settled", False, f"last change {still:.1f}s ago (settles after {quiet:.1f}s); {self.status()}"
            )
        return Verdict("settled", True, f"nothing changed for {still:.1f}s; {self.status()}")

    def placeable(self, gang: str) -> bool:
        """An active gang whose pods all exist with their PodGroup: KAI's to place. A gang short of pods waits on its
        Job controller, not on KAI: a failed pod is re-created only after the Job's backoff (10 s, doubling: seen on
        the real controllers, 2026-11-24), and a restarting JobSet makes the next attempt's Jobs."""
        state = self.gangs[gang]
        return self.active(gang) and state.complete and state.podgroup

    def waiting(self) -> list[detect.Waiting]:
        return [w for w in super().waiting() if self.placeable(w.name)]

    def asking(self) -> list[Asking]:
        """The placeable gangs not whole, each pod's GPUs as KAI counts them (a fraction for a fractional pod)."""
        return [Asking(g.plan.name, g.plan.pods, self.mix.workload(g.plan.name).gpu_amount, g.plan.queue,
                       g.plan.preemptible) for g in self.gangs.values() if not g.whole and self.placeable(g.plan.name)]  # fmt: skip

    def quiet_after(self, start: float, quiet: float, until: float | None) -> float | None:
        """The first moment after ``start`` from which nothing changed for ``quiet`` seconds, if one came before
        ``until`` (the next step of the mix, or now): when the cluster had converged after a restart."""
        moments = [t for t in self.changes if t >= start]
        previous = start
        for t in moments:
            if t - previous >= quiet:
                break
            previous = t
        if until is not None and previous + quiet > until:
            return None
        return previous

    def excerpt(self, gangs: set[str], around: float | None, window: float, *, origin: float | None = None,
                scale: float = 1.0) -> list[str]:  # fmt: skip
        """The timeline lines of ``gangs`` (every gang when empty) within ``window`` seconds of ``around``, at the
        seconds of the mix (since ``origin``, divided by the run's time ``scale``), restarts included."""
        start = origin if origin is not None else (self.first_submitted or 0.0)
        lines = []
        for at, gang, text in sorted(self.journal, key=lambda e: e[0]):
            if gangs and gang and gang not in gangs:
                continue
            if around is not None and abs(at - around) > window and gang not in ("", *gangs):
                continue
            lines.append(f"{(at - start) / scale:7.1f}s  {gang or '-':<8} {text}")
        return lines
