"""GPU sharing in chaos mixes: which fractions a mix draws, how KAI counts a fractional pod's GPUs, and the binder's
reservation pods a mix must not leave behind (``no-leftover-reservation``). Pure data and verdicts, fed by the chaos
ledger (suites/support/chaos/ledger.py).

Facts, KAI v0.17.0 (the GPU-sharing facts the suite holds for every row: suites/support/expectations/sharing.py):

* **A fraction counts as a fraction.** The scheduler's vector of a pod asking ``gpu-fraction: 0.5`` holds 0.5 GPU
  (``pkg/scheduler/api/pod_info/pod_info.go``:577, ``portion × count``: ``resource_info/gpu_resource_requirment.go``
  :224, :266), and the queue capacity checks add those vectors up over the tasks to allocate
  (``plugins/proportion/capacity_policy/capacity_policy.go``:74–86): two 0.5 pods take 1 GPU of a queue's quota and
  limit. The binder's reservation pods are utility pods of no queue (``pod_info/utility_pods.go``:14, :26); each
  holds one whole GPU of its node, which the convergence check's idle GPUs count like any pod there.
* **When the binder removes a reservation pod.** It keeps a GPU group's reservation pod (``kai-resource-reservation``,
  label ``runai-gpu-group``) while a pod labelled with the group is Pending or Running, or a BindRequest not yet
  Succeeded or Failed names the group (``pkg/binder/binding/resourcereservation/resource_reservation.go``:176–227,
  :232–248); once neither is left it deletes it at once, grace period 0 (:412–426). It looks on the event that leaves
  the group unused: a pod of the group deleted or ending (``pkg/binder/controllers/pod_controller.go``:85–95,
  :110–128), a fractional BindRequest deleted (``bindrequest_controller.go``:208–225), a failed bind rolled back
  (``pkg/binder/binding/binder.go``:98–105); and what it missed while it was down, once at its start, over every
  labelled pod, reservation pods included (``cmd/binder/app/app.go``:145–153, ``resource_reservation.go``:96–106).

So ``no-leftover-reservation`` fires when a reservation pod of a GPU group the mix's pods or BindRequests used is
still there (not gone, not being deleted) :attr:`Reservations.grace` seconds after the later of: the moment nothing
used its group any more, the moment the pod was first seen, and the binder's return from its latest restart. It is
not judged while the binder is down. The grace is the ``api`` budget (30 s × ``--timeout-scale``): KAI deletes in
the reconcile of the event itself, so the grace is an API round trip under load plus the restarted binder's cache
sync before its start-up sync. Groups no pod of the mix used are not the mix's to judge (a chaos case runs alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kai_conformance.suites.support.detectors.scale import (
    EPSILON,
    QueueBounds,
    gpus,
    judged_fits,
)
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.sharing import GPU_GROUP_LABEL
from kai_conformance.suites.support.snapshot import (
    Obj,
    bind_finished,
    is_terminating,
    labels_of,
    name_list,
    name_of,
    uid_of,
)

#: GPU fractions a mix draws when the cluster shares GPUs: each divides one GPU exactly, so the pods a free GPU
#: holds are a whole number and the convergence check's room is exact.
FRACTIONS = (0.5, 0.25)
LEFTOVER_RESERVATION = "no-leftover-reservation"
#: Pod phases in which the binder counts a pod as using its GPU group (resource_reservation.go:187–191); a pod
#: not yet given a phase is Pending.
USING_PHASES = ("", "Pending", "Running")


# ------------------------------------------------------------------------------------------ GPUs as KAI counts them
@dataclass(frozen=True)
class Asking:
    """A waiting gang as the convergence check sees it: ``pods`` pods of ``gpus`` GPUs each (a fraction of one GPU
    for a fractional pod), in ``queue``."""

    name: str
    pods: int
    gpus: float
    queue: str
    preemptible: bool


def room(free: Mapping[str, int], per_pod: float) -> int:
    """Pods of ``per_pod`` GPUs the idle GPUs hold, each node on its own. A fractional pod is counted only on a GPU
    nobody uses (one already shared may hold it too): a fitting gang this misses goes unreported, and no gang is
    reported that does not fit."""
    if per_pod <= 0:
        return 0
    if per_pod < 1:
        per_gpu = int(1 / per_pod + EPSILON)
        return sum(left * per_gpu for left in free.values() if left > 0)
    return sum(int(left // per_pod + EPSILON) for left in free.values() if left > 0)


def fits(gang: Asking, free: Mapping[str, int], held: Mapping[str, float], held_non_preemptible: Mapping[str, float],
         queues: Mapping[str, QueueBounds]) -> bool:  # fmt: skip
    """The scale area's ``fits`` (KAI's allocate alone could place it: room on the idle GPUs, within the queue's
    limit and, non-preemptible, its quota), with fractions counted as KAI counts them."""
    return not why_not(gang, free, held, held_non_preemptible, queues)


def why_not(gang: Asking, free: Mapping[str, int], held: Mapping[str, float],
            held_non_preemptible: Mapping[str, float], queues: Mapping[str, QueueBounds]) -> str:  # fmt: skip
    """Why ``gang`` does not fit (:func:`fits`), each reason with its numbers; "" when it fits."""
    bounds = queues.get(gang.queue)
    demand = gang.pods * gang.gpus
    reasons = []
    if bounds is not None and bounds.limit >= 0 and held.get(gang.queue, 0) + demand > bounds.limit + EPSILON:
        reasons.append(f"queue {gang.queue} holds {gpus(held.get(gang.queue, 0))} + {gpus(demand)} asked > limit "
                       f"{bounds.limit}")  # fmt: skip
    if (bounds is not None and not gang.preemptible and bounds.quota >= 0
            and held_non_preemptible.get(gang.queue, 0) + demand > bounds.quota + EPSILON):  # fmt: skip
        reasons.append(f"non-preemptible: queue {gang.queue} runs {gpus(held_non_preemptible.get(gang.queue, 0))} "
                       f"non-preemptible + {gpus(demand)} asked > quota {bounds.quota}")  # fmt: skip
    if room(free, gang.gpus) < gang.pods:
        reasons.append(f"the idle GPUs hold {room(free, gang.gpus)} of its {gang.pods} pods of {gpus(gang.gpus)} GPU")
    return "; ".join(reasons)


def fitting_gangs_bound(waiting: Sequence[Asking], free: Mapping[str, int], held: Mapping[str, float],
                        held_non_preemptible: Mapping[str, float], queues: Mapping[str, QueueBounds]) -> Verdict:  # fmt: skip
    """Once the mix has settled no waiting gang fits (:func:`fits`); the words of the scale area's detector: each
    waiting gang and why it does not fit, or a vacuous hold when none waited."""
    return judged_fits(waiting, free, lambda g: why_not(g, free, held, held_non_preemptible, queues),
                       lambda g: room(free, g.gpus))  # fmt: skip


# ------------------------------------------------------------------------------------------ reservation pods
@dataclass
class ReservationPod:
    name: str
    group: str
    node: str
    seen: float


@dataclass
class Reservations:
    """``no-leftover-reservation`` over the watches of a mix (module docstring): who uses each GPU group, the
    reservation pods there are, and whether the binder is down."""

    grace: float
    #: GPU group → what uses it now: ``pod <uid>`` (labelled, Pending or Running), ``bind <uid>`` (not finished).
    users: dict[str, set[str]] = field(default_factory=dict)
    #: GPU group → the gangs whose pods used it (what a violation names).
    gangs: dict[str, set[str]] = field(default_factory=dict)
    unused_since: dict[str, float] = field(default_factory=dict)
    pods: dict[str, ReservationPod] = field(default_factory=dict)  # uid → a reservation pod not yet removed
    binder_down: int = 0  # restarts of the binder under way
    binder_back: float = 0.0
    violation: Verdict | None = None
    #: What each user used last: a pod's label may change or go (a failed bind's rollback removes it).
    _using: dict[str, tuple[str, ...]] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------------ input
    def pod(self, event_type: str, pod: Obj, gang: str, at: float) -> None:
        """A pod of the mix: it uses the group it is labelled with while it is Pending or Running."""
        group = labels_of(pod).get(GPU_GROUP_LABEL)
        phase = (pod.get("status") or {}).get("phase") or ""
        using = (group,) if group and event_type != "DELETED" and phase in USING_PHASES else ()
        if group:
            self.gangs.setdefault(group, set()).add(gang)
        self._uses(f"pod {uid_of(pod)}", using, at)

    def bindrequest(self, event_type: str, request: Obj, gang: str, at: float) -> None:
        """A BindRequest of the mix: it uses its selected GPU groups until the binder finished it."""
        groups = tuple((request.get("spec") or {}).get("selectedGPUGroups") or ())
        for group in groups if gang else ():
            self.gangs.setdefault(group, set()).add(gang)
        finished = bind_finished(request)
        self._uses(f"bind {uid_of(request)}", groups if event_type != "DELETED" and not finished else (), at)

    def reservation(self, event_type: str, pod: Obj, at: float) -> str:
        """A pod of the reservation namespace; returns what changed, for the mix's timeline ("" when nothing)."""
        uid, group = uid_of(pod), labels_of(pod).get(GPU_GROUP_LABEL) or ""
        if event_type == "DELETED" or is_terminating(pod):
            gone = self.pods.pop(uid, None)
            return "" if gone is None else f"reservation pod {gone.name} of GPU group {gone.group} removed"
        if uid in self.pods or not group:
            return ""
        node = (pod.get("spec") or {}).get("nodeName") or "no node"
        self.pods[uid] = ReservationPod(name_of(pod), group, node, at)
        return f"reservation pod {name_of(pod)} of GPU group {group} created on {node}"

    def binder_restarting(self) -> None:
        self.binder_down += 1

    def binder_returned(self, at: float) -> None:
        self.binder_down = max(self.binder_down - 1, 0)
        self.binder_back = max(self.binder_back, at)

    def _uses(self, user: str, groups: tuple[str, ...], at: float) -> None:
        before = self._using.get(user, ())
        if before == groups:
            return
        self._using[user] = groups
        for group in groups:
            self.users.setdefault(group, set()).add(user)
        for group in set(before) - set(groups):
            users = self.users[group]
            users.discard(user)
            if not users:
                self.unused_since[group] = at
        if not groups:
            self._using.pop(user, None)

    # ------------------------------------------------------------------------------------------------ judging
    def gang_of(self, group: str) -> str:
        return min(self.gangs.get(group) or {""})

    def left(self) -> list[ReservationPod]:
        """The reservation pods of the mix's GPU groups still there."""
        return [p for p in self.pods.values() if p.group in self.users]

    def overdue(self, at: float) -> list[tuple[float, ReservationPod]]:
        """(seconds unused, pod) of each reservation pod left past the grace, the longest first."""
        if self.binder_down:
            return []
        late = []
        for pod in self.left():
            if self.users[pod.group]:
                continue
            since = max(self.unused_since.get(pod.group, pod.seen), pod.seen, self.binder_back)
            if at - since > self.grace:
                late.append((at - self.unused_since.get(pod.group, pod.seen), pod))
        return sorted(late, key=lambda item: -item[0])

    def verdict(self, at: float) -> Verdict:
        if self.violation is None:
            late = self.overdue(at)
            if late:
                shown = [f"{p.name} of GPU group {p.group} on {p.node}, used by "
                         f"{', '.join(sorted(self.gangs.get(p.group) or {'no pod seen'}))}, unused for {age:.1f}s"
                         for age, p in late]  # fmt: skip
                self.violation = Verdict(LEFTOVER_RESERVATION, False,
                    f"{len(late)} reservation pod(s) left after no pod used their GPU group: {name_list(shown, str)} "
                    f"(the binder removes one within the {self.grace:.1f}s grace of the group's last use or of its "
                    "own return from a restart)")  # fmt: skip
        if self.violation is not None:
            return self.violation
        return Verdict(LEFTOVER_RESERVATION, True, f"no reservation pod outlived the pods sharing its GPU group "
                       f"({len(self.users)} group(s) used, {len(self.left())} reservation pod(s) now)")  # fmt: skip
