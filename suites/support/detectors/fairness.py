"""Fair-share detectors: the GPUs each sibling queue holds against the share KAI's rules give it.

:func:`fair_shares` is KAI's division of one resource among sibling queues, step by step as the proportion plugin
does it (``suites/support/expectations/fairness.py`` cites each step at both tags). The detectors read a snapshot of
the case's namespace: a queue *holds* the GPUs of its bound, live pods (the queue of a pod is its PodGroup's
``spec.queue``); what a queue *asks for* is the case's to say (its TrainJobs' sizes), so the expected share does not
wobble while evicted pods wait to be recreated.

* ``fair-share``: every queue holds its fair share within ``tolerance`` GPUs. Reclaim moves whole gangs and stops
  once the reclaimer's next gang would take it over its share, so a settled queue sits within one gang of it: the
  cases pass one gang's GPUs as the tolerance.
* ``in-quota-kept``: a queue holds at least its deserved quota (or all it asks for, if less): judged on every
  observation while another queue reclaims.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.fairness import DEFAULT_QUEUE_PRIORITY
from kai_conformance.suites.support.snapshot import Snapshot, gpus_of, owner_refs, workload_of

UNLIMITED = -1


@dataclass(frozen=True)
class QueueShare:
    """A leaf queue as the proportion plugin sees it for GPUs: its spec and what its workloads ask for."""

    role: str
    demand: float
    quota: float = 0
    weight: float = 1
    priority: int = DEFAULT_QUEUE_PRIORITY
    limit: float = UNLIMITED

    @property
    def requestable(self) -> float:
        return self.demand if self.limit == UNLIMITED else min(self.limit, self.demand)

    @property
    def protected(self) -> float:
        """GPUs reclaim never takes from the queue: its deserved quota, or all it asks for when that is less."""
        return min(self.quota if self.quota != UNLIMITED else math.inf, self.requestable)


def fair_shares(total: float, queues: Mapping[str, QueueShare]) -> dict[str, float]:
    """The fair share of each sibling queue of ``total`` GPUs (KAI's ``SetResourcesShare`` for one resource)."""
    share = dict.fromkeys(queues, 0.0)
    remaining = total
    for name, queue in queues.items():  # setDeservedResource
        deserved = total if queue.quota == UNLIMITED else queue.quota
        amount = min(deserved, queue.requestable)
        share[name] += amount
        remaining -= amount
    if remaining <= 0:
        return share
    priorities = sorted({q.priority for q in queues.values()}, reverse=True)
    leftovers: dict[int, dict[str, float]] = {}
    for priority in priorities:  # divideOverQuotaResource: the highest bucket first
        bucket = [name for name, q in queues.items() if q.priority == priority]
        remaining, leftovers[priority] = _divide_up_to_fair_share(remaining, bucket, queues, share)
    for priority in priorities:
        if remaining <= 0:
            break
        remaining = _divide_remaining(remaining, leftovers[priority], share)
    return share


def _left_to_ask(queue: QueueShare, share: float) -> float:
    return max(0.0, queue.requestable - share)


def _divide_up_to_fair_share(
    amount: float, bucket: list[str], queues: Mapping[str, QueueShare], share: dict[str, float]
) -> tuple[float, dict[str, float]]:
    """Rounds of ``amount × weight / Σ weights`` over unsatisfied queues, rounded down (``divideUpToFairShare``).
    Returns what is left and each queue's rounded-off fraction of its last round."""
    fractions: dict[str, float] = {}
    while True:
        unsatisfied = [n for n in bucket if queues[n].demand > share[n] and _left_to_ask(queues[n], share[n]) > 0]
        weights = {n: queues[n].weight for n in unsatisfied}
        total_weight = sum(weights.values())
        if total_weight == 0:  # usage is 0 without a usage database: the share weight is the normalised weight
            break
        round_amount, another_round = amount, False
        for name in unsatisfied:
            if amount == 0:
                break
            if weights[name] == 0:
                continue
            asked = _left_to_ask(queues[name], share[name])
            fair = round_amount * weights[name] / total_weight
            if asked <= fair:
                give = asked
                fractions.pop(name, None)
            else:
                give = float(math.floor(fair))
                if fair - give > 0:
                    fractions[name] = fair - give
            share[name] += give
            amount -= give
            another_round = another_round or asked < fair
        if not another_round or amount == 0:
            break
    return amount, fractions


def _divide_remaining(amount: float, fractions: dict[str, float], share: dict[str, float]) -> float:
    """What rounding left: one unit at a time, largest rounded-off fraction first (``divideRemainingResource``)."""
    for name in sorted(fractions, key=lambda n: (-fractions[n], n)):
        if amount <= 0:
            break
        give = min(1.0, amount)
        share[name] += give
        amount -= give
    return amount


def queues_of_workloads(snap: Snapshot) -> dict[str, str]:
    """TrainJob (= JobSet) name → the queue of its PodGroup."""
    found = {}
    for pg in snap.podgroups:
        for ref in owner_refs(pg):
            if ref.get("kind") == "JobSet":
                found[ref["name"]] = (pg.get("spec") or {}).get("queue", "")
    return found


def held_by_queue(snap: Snapshot) -> dict[str, int]:
    """Queue → GPUs of its bound, live pods in the snapshot."""
    queue_of = queues_of_workloads(snap)
    held: dict[str, int] = defaultdict(int)
    for pod in snap.bound_pods:
        queue = queue_of.get(workload_of(pod) or "")
        if queue:
            held[queue] += gpus_of(pod)
    return dict(held)


def _fmt(value: float) -> str:
    return f"{value:g}"


def shares_settled(snap: Snapshot, queues: Mapping[str, QueueShare], total: float, tolerance: float) -> Verdict:
    """Each queue (name → :class:`QueueShare`) holds its fair share of ``total`` GPUs within ``tolerance``."""
    held, fair = held_by_queue(snap), fair_shares(total, queues)
    off = [n for n in queues if abs(held.get(n, 0) - fair[n]) > tolerance]
    described = "; ".join(
        f"{queues[n].role} holds {held.get(n, 0)} GPU(s), fair share {_fmt(fair[n])}"
        + (" (off by more than the tolerance)" if n in off else "")
        for n in queues
    )
    rules = ", ".join(
        f"{q.role}: quota {_fmt(q.quota)}, weight {_fmt(q.weight)}, priority {q.priority}, asks {_fmt(q.demand)}"
        for q in queues.values()
    )
    return Verdict(
        "fair-share",
        not off,
        f"{described} (±{_fmt(tolerance)} GPUs, one gang; {_fmt(total)} GPUs shared by {rules})",
    )


def queue_holds(snap: Snapshot, queue: str, role: str, gpus: float) -> Verdict:
    """``queue`` holds at least ``gpus`` GPUs (e.g. all a team's gangs can take of the empty cluster)."""
    held = held_by_queue(snap).get(queue, 0)
    return Verdict("queue-holds", held >= gpus, f"{role} holds {held} of the {_fmt(gpus)} GPU(s) it should")


def in_quota_kept(snap: Snapshot, queue: str, share: QueueShare) -> Verdict:
    """``queue`` holds at least what reclaim may never take from it (its quota, or its demand if smaller)."""
    held = held_by_queue(snap).get(queue, 0)
    floor = share.protected
    text = f"{share.role} holds {held} GPU(s); its deserved quota is {_fmt(share.quota)} of the {_fmt(share.demand)} it asks"
    if held < floor:
        return Verdict("in-quota-kept", False, text + f": {_fmt(floor - held)} in-quota GPU(s) were taken from it")
    return Verdict("in-quota-kept", True, text)


class ShareTrace:
    """The GPUs each queue held at every observation it was shown, for the report's plot (``record.series``)."""

    def __init__(self, roles: Mapping[str, str]) -> None:
        self.roles = dict(roles)  # queue name → role
        self.points: dict[str, list[tuple[float, float]]] = {role: [] for role in self.roles.values()}

    def observe(self, snap: Snapshot) -> None:
        held = held_by_queue(snap)
        for queue, role in self.roles.items():
            self.points[role].append((snap.taken_at, float(held.get(queue, 0))))

    @property
    def span(self) -> tuple[float, float] | None:
        times = [t for points in self.points.values() for t, _ in points]
        return (min(times), max(times)) if times else None
