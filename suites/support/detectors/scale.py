"""Scale detectors: what must hold over a whole burst, judged on the burst's ledger (suites/support/scale/ledger.py)
at every change a watch delivers, and what must hold once it has settled.

Over the whole run (every change):

* ``gang-never-partial`` (:class:`PartialGangs`): no gang has some but not all of its pods *placed* (bound, or named
  by a BindRequest the binder has not finished) for longer than the settle time (suites/support/timing.py): KAI
  places a gang whole or not at all, and the evictor deletes pod by pod. A gang KAI placed whole whose binds the
  binder has not all done yet is *binding*, and may stay so as long as the binder keeps binding (pods of any gang:
  it binds pod by pod at its client rate, every gang's in one queue; at 300 fake nodes on kind a 16-pod gang took
  5.1 s from its first bind to its last, at 1,000 minutes); once the binder has bound nothing for the
  ``bind_allowance`` while a gang is part bound, that gang is partial.
* ``queue-limit`` (:func:`queue_limits`): the GPUs of a queue's bound, live pods never exceed its GPU limit.
* ``non-preemptible-in-quota`` (:func:`non_preemptible_quota`): the GPUs of a queue's non-preemptible bound pods
  never exceed its quota (KAI runs non-preemptible workloads only within quota: ``NonPreemptibleOverQuota``,
  capacity_policy/quota_check.go).
* ``non-preemptible-never-evicted`` (:func:`non_preemptible_evictions`): no pod of a non-preemptible gang is deleted
  while bound (preempt, reclaim and consolidation take only preemptible victims, kai-scheduler.md §6).

Once settled:

* ``fitting-gangs-bound`` (:func:`fitting_gangs_bound`): no gang waits that *fits*, see :func:`fits`.
* ``burst-bound`` (:func:`burst_bound`): every gang of a burst that fits the empty cluster is bound.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.snapshot import name_list


def _named(items: Sequence[str]) -> str:
    return name_list(items, str)


class PartialGangs:
    """``gang-never-partial`` over many gangs: fires once a gang has been partial for longer than ``grace``, or
    binding (placed whole, some but not all bound) for longer than ``bind_allowance`` (see the module docstring; ``None``: binding is never judged, as in a
    chaos mix, where the binder itself restarts).

    :meth:`update` is told each gang's pods whenever they change; :meth:`check` judges at a given time, so a gang that
    goes partial and then nothing else happens still fires once its time has passed."""

    def __init__(self, grace: float, bind_allowance: float | None = None) -> None:
        self.grace, self.bind_allowance = grace, bind_allowance
        self.since: dict[str, float] = {}
        self.binding: set[str] = set()  # gangs placed whole, not all bound yet
        self.bound_now: dict[str, int] = {}
        self.last_bind: float | None = None  # of any gang: the binder's progress
        self.detail: dict[str, str] = {}
        self.longest = 0.0
        self.partial_moments = 0
        self.violation: Verdict | None = None
        self.placed_ever = False  # a gang with no pod ever placed cannot be partial: nothing to judge

    def update(self, gang: str, bound: int, size: int, at: float, *, binding: int = 0) -> None:
        """``bound`` of the gang's ``size`` pods are bound and ``binding`` more are named by a BindRequest the binder
        has not finished."""
        placed = min(bound + binding, size)
        self.placed_ever = self.placed_ever or placed > 0
        if bound > self.bound_now.get(gang, 0):
            self.last_bind = at
        self.bound_now[gang] = bound
        # Placed whole with none bound yet is no partial gang: nothing of it runs (a binder that binds nothing at
        # all is a stalled burst, which the burst's stall limit ends).
        if 0 < placed < size or (placed == size and 0 < bound < size):
            if gang not in self.since:
                self.since[gang] = at
                self.partial_moments += 1
            if placed == size:
                self.binding.add(gang)
                self.detail[gang] = f"{bound} of {size} pods bound, the other {size - bound} being bound"
            else:
                self.binding.discard(gang)
                self.detail[gang] = f"{bound} of {size} pods bound" + (f", {binding} being bound" if binding else "")
        elif gang in self.since:
            self.longest = max(self.longest, at - self.since.pop(gang))
            self.detail.pop(gang, None)
            self.binding.discard(gang)

    def _allowed(self, gang: str) -> float:
        if gang not in self.binding:
            return self.grace
        return float("inf") if self.bind_allowance is None else self.bind_allowance

    def _clock(self, gang: str) -> float:
        """Since when ``gang`` is judged: since it went partial; a binding gang since the binder last bound a pod of
        any gang, too (it binds every gang's pods in one queue, at its client rate: at 1,000 fake nodes on kind a
        16-pod gang stayed part bound for minutes while the binder bound 2–5 pods/s of the others)."""
        since = self.since[gang]
        if gang in self.binding and self.last_bind is not None:
            return max(since, self.last_bind)
        return since

    def overdue(self, at: float) -> list[str]:
        """The gangs partial or binding for longer than allowed at ``at``, longest first, before any is judged."""
        return [gang for since, gang in sorted((since, gang) for gang, since in self.since.items()
                                               if at - self._clock(gang) > self._allowed(gang))]  # fmt: skip

    def check(self, at: float, *, lagging: Collection[str] = ()) -> Verdict:
        """Judge at ``at``. ``lagging``: overdue gangs a list of the cluster just now showed otherwise than the watches
        told (the watch events that complete them were not read yet, as on a busy machine): how long they were
        really partial is not known yet, so they are not judged now. A gang the list shows as partial as the watches
        did has been partial at least since the watches first saw it so, which is how long it is said to be."""
        if self.violation is None:
            overdue = [gang for gang in self.overdue(at) if gang not in lagging]
            if overdue:
                gang = overdue[0]
                others = f"; {len(overdue) - 1} more gang(s) partial for as long" if len(overdue) > 1 else ""
                allowed = (
                    f"the {self._allowed(gang):.0f}s the binder may go without binding any pod while a gang KAI "
                    f"placed whole is part bound (its last bind {at - self._clock(gang):.1f}s ago)"
                    if gang in self.binding
                    else f"the {self.grace:.0f}s a gang may take to bind or be evicted"
                )
                self.violation = Verdict(
                    "gang-never-partial",
                    False,
                    f"gang {gang} partially bound ({self.detail[gang]}) for {at - self.since[gang]:.1f}s, more than "
                    f"{allowed}{others}",
                )
        if self.violation is not None:
            return self.violation
        current = max((at - since for since in self.since.values()), default=0.0)
        binding = f", binding for up to {self.bind_allowance:.0f}s" if self.bind_allowance is not None else ""
        return Verdict(
            "gang-never-partial",
            True,
            f"no gang partial for more than {self.grace:.0f}s{binding} ({self.partial_moments} partial moment(s), "
            f"the longest {max(self.longest, current):.1f}s; {len(self.since)} partial now)",
        )


@dataclass(frozen=True)
class QueueBounds:
    """GPU quota and limit of one queue (-1: none)."""

    name: str
    quota: int
    limit: int


#: Tolerance when comparing GPU amounts: a fractional pod counts its fraction (0.25 + 0.25 + 0.5 is 1 GPU).
EPSILON = 1e-9


def gpus(amount: float) -> str:
    """A GPU amount as the verdicts show it: ``3``, ``2.5``."""
    return f"{round(amount, 4):g}"


def queue_limits(held: Mapping[str, float], queues: Iterable[QueueBounds]) -> Verdict:
    """Every queue's bound GPUs within its limit (a fractional pod counts its fraction, as KAI counts it)."""
    queues = list(queues)
    over = [f"{q.name} holds {gpus(held.get(q.name, 0))} GPUs, limit {q.limit}" for q in queues
            if q.limit >= 0 and held.get(q.name, 0) > q.limit + EPSILON]  # fmt: skip
    if over:
        return Verdict("queue-limit", False, "queue over its GPU limit: " + "; ".join(over))
    shown = ", ".join(f"{q.name} {gpus(held.get(q.name, 0))}/{q.limit if q.limit >= 0 else '∞'}" for q in queues)
    return Verdict("queue-limit", True, f"every queue within its GPU limit ({shown})")


def non_preemptible_quota(held: Mapping[str, float], queues: Iterable[QueueBounds]) -> Verdict:
    """Every queue's non-preemptible bound GPUs within its quota."""
    over = [f"{q.name} runs {gpus(held.get(q.name, 0))} non-preemptible GPUs, quota {q.quota}" for q in queues
            if q.quota >= 0 and held.get(q.name, 0) > q.quota + EPSILON]  # fmt: skip
    if over:
        return Verdict("non-preemptible-in-quota", False,
                       "non-preemptible workloads over their queue's quota: " + "; ".join(over))  # fmt: skip
    return Verdict("non-preemptible-in-quota", True, "non-preemptible workloads within their queues' quotas")


def non_preemptible_evictions(evicted: Mapping[str, int]) -> Verdict:
    """No pod of a non-preemptible gang was evicted (``evicted``: gang → its pods deleted while bound)."""
    hit = [f"{gang} ({n} pod(s))" for gang, n in sorted(evicted.items()) if n]
    if hit:
        return Verdict("non-preemptible-never-evicted", False, "non-preemptible gang(s) evicted: " + _named(hit))
    return Verdict("non-preemptible-never-evicted", True, "no non-preemptible pod evicted")


# ------------------------------------------------------------------------------------------------------ settled
@dataclass(frozen=True)
class Waiting:
    """A gang that waits: its shape, queue and preemptibility."""

    name: str
    pods: int
    gpus: int
    queue: str
    preemptible: bool


def room(free: Mapping[str, int], gpus: int) -> int:
    """Pods of ``gpus`` GPUs the free GPUs hold, each node packed on its own."""
    return sum(left // gpus for left in free.values() if left > 0) if gpus > 0 else 0


def fits(
    gang: Waiting,
    free: Mapping[str, int],
    held: Mapping[str, int],
    held_non_preemptible: Mapping[str, int],
    queues: Mapping[str, QueueBounds],
) -> bool:
    """A waiting gang *fits* when, as things stand, KAI's allocate action alone could place it:

    * its pods fit the GPUs free on the nodes, each node on its own (Σ over nodes of ⌊free / GPUs per pod⌋ ≥ pods;
      free = the node's GPUs less those of every pod bound there that has not ended, any namespace);
    * its queue's bound GPUs plus the gang's stay within the queue's GPU limit (KAI: ``OverLimit``);
    * a non-preemptible gang's queue's non-preemptible GPUs plus the gang's stay within the queue's quota (KAI:
      ``NonPreemptibleOverQuota``).

    No eviction is assumed: a gang that fits needs nothing but GPUs that are idle."""
    return not why_not(gang, free, held, held_non_preemptible, queues)


def why_not(
    gang: Waiting,
    free: Mapping[str, int],
    held: Mapping[str, int],
    held_non_preemptible: Mapping[str, int],
    queues: Mapping[str, QueueBounds],
) -> str:
    """Why ``gang`` does not fit (:func:`fits`), each reason with its numbers; "" when it fits."""
    bounds = queues.get(gang.queue)
    demand = gang.pods * gang.gpus
    reasons = []
    if bounds is not None and bounds.limit >= 0 and held.get(gang.queue, 0) + demand > bounds.limit:
        reasons.append(f"queue {gang.queue} holds {held.get(gang.queue, 0)} + {demand} asked > limit {bounds.limit}")
    if (
        bounds is not None
        and not gang.preemptible
        and bounds.quota >= 0
        and held_non_preemptible.get(gang.queue, 0) + demand > bounds.quota
    ):
        reasons.append(f"non-preemptible: queue {gang.queue} runs {held_non_preemptible.get(gang.queue, 0)} "
                       f"non-preemptible + {demand} asked > quota {bounds.quota}")  # fmt: skip
    if room(free, gang.gpus) < gang.pods:
        reasons.append(f"the idle GPUs hold {room(free, gang.gpus)} of its {gang.pods} pods of {gang.gpus} GPU")
    return "; ".join(reasons)


def free_text(free: Mapping[str, int]) -> str:
    """``12 idle GPUs (w1 4, w2 8)``: the idle GPUs per node, as the fit was judged."""
    idle = {node: left for node, left in sorted(free.items()) if left > 0}
    per_node = ", ".join(f"{node} {gpus(left)}" for node, left in idle.items())
    return f"{gpus(sum(idle.values()))} idle GPUs" + (f" ({per_node})" if per_node else "")


def fitting_gangs_bound(
    waiting: Sequence[Waiting],
    free: Mapping[str, int],
    held: Mapping[str, int],
    held_non_preemptible: Mapping[str, int],
    queues: Mapping[str, QueueBounds],
) -> Verdict:
    """Once the burst has settled, no waiting gang fits (:func:`fits`): KAI leaves no GPU idle that a waiting gang
    could use within its queue's limit and, if non-preemptible, its quota. The verdict names each waiting gang and
    why it does not fit, so a reader can check the judgement; with no gang waiting it holds vacuously."""
    return judged_fits(waiting, free, lambda g: why_not(g, free, held, held_non_preemptible, queues),
                       lambda g: room(free, g.gpus))  # fmt: skip


def judged_fits(waiting: Sequence[Any], free: Mapping[str, int], reason: Callable[[Any], str],
                room_for: Callable[[Any], int]) -> Verdict:  # fmt: skip
    """``fitting-gangs-bound`` from each waiting gang's reason not to fit (``reason``: "" when it fits) and the pods
    of its shape the idle GPUs hold (``room_for``); the chaos area's fractional gangs come here too
    (suites/support/chaos/sharing.py)."""
    idle = free_text(free)
    if not waiting:
        return Verdict("fitting-gangs-bound", True, f"held vacuously, no placeable gang waited to be judged; {idle}",
                       vacuous=True)  # fmt: skip
    why = {g.name: reason(g) for g in waiting}
    shape = {g.name: f"{g.name} ({g.pods}×{gpus(g.gpus)} GPU, queue {g.queue}"
                     f"{'' if g.preemptible else ', non-preemptible'})" for g in waiting}  # fmt: skip
    fitting = [g for g in waiting if not why[g.name]]
    others = "; ".join(f"{shape[name]}: {text}" for name, text in why.items() if text)
    if fitting:
        described = [f"{g.name} ({g.pods}×{gpus(g.gpus)} GPU, queue {g.queue}: room for {room_for(g)} such pods)"
                     for g in fitting]  # fmt: skip
        return Verdict(
            "fitting-gangs-bound",
            False,
            f"{len(fitting)} waiting gang(s) fit the {idle} within their queue's limit and quota: "
            + _named(described)
            + (f"; the others do not: {others}" if others else ""),
        )
    return Verdict(
        "fitting-gangs-bound",
        True,
        f"none of the {len(waiting)} waiting gang(s) fits the {idle} within its queue's limit and quota: {others}",
    )


def burst_bound(whole: int, gangs: int, waiting: Sequence[str]) -> Verdict:
    """Every gang of a burst that fits the empty cluster is bound."""
    if waiting:
        return Verdict("burst-bound", False, f"{whole} of {gangs} gangs bound; waiting: {_named(list(waiting))}")
    return Verdict("burst-bound", True, f"all {gangs} gangs bound")
