"""Simulated KAI, fair share: reclaim across sibling queues toward the proportion plugin's fair shares.

Reduced to what the fairness and reclaim cases observe (docs/fairness; suites/support/expectations/fairness.py):

* Fair shares of the leaf queues under one parent, of the cluster's GPUs: deserved ``min(quota, requested)`` first,
  then the rest by queue ``priority`` (highest bucket first) and, within a bucket, by ``overQuotaWeight`` in rounds
  until every queue has what it asks for — the docs' pseudo-code in floats, written apart from the suite's
  detector (which follows the Go code's rounding), so the two check each other.
* Reclaim, for a gang that fits nowhere: only while its queue stays within its fair share with the gang
  (``CanReclaimResources``); victims are whole preemptible gangs of sibling queues, taken while the victim's queue
  is above its fair share (``MaintainFairShare``) or above its quota while the reclaimer is within its own
  (``GuaranteeDeservedQuota``), the most saturated queue and its newest gang first, until the gang fits.
  ``Evict`` events of action ``reclaim``; the min-runtime mixin may veto a victim (``_may_evict``).
"""

from __future__ import annotations

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.expectations.fairness import DEFAULT_QUEUE_PRIORITY
from kai_conformance.suites.support.snapshot import gpus_of, is_bound, is_terminating
from tests.fakes.simulation import Obj, Simulation

EPSILON = 1e-9


def _gpu(queue: Obj) -> Obj:
    return queue["spec"].get("resources", {}).get("gpu", {})


class KaiFairness(Simulation):
    def _evict_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        return self._reclaim_for(pg, waiting, whole) or super()._evict_for(pg, waiting, whole)

    # --------------------------------------------------------------------------------------------- fair share
    def _siblings(self, queue: Obj) -> list[Obj]:
        parent = queue["spec"].get("parentQueue")
        children = {q["spec"].get("parentQueue") for q in self._all(kinds.QUEUE)}
        return [q for q in self._all(kinds.QUEUE) if q["spec"].get("parentQueue") == parent
                and q["metadata"]["name"] not in children]  # fmt: skip

    def _usage(self, queues: set[str]) -> tuple[dict[str, float], dict[str, float], dict[str, list[Obj]]]:
        """GPUs each queue holds (bound or being bound) and asks for (every live pod), and the bound pods of each of
        its PodGroups (by uid), from one look at the pods: the scheduler asks this for every gang that waits, so it
        is kept while pods, PodGroups and BindRequests are unchanged (read it, do not change it)."""
        return self._derived(f"usage:{sorted(queues)}", lambda: self._usage_now(queues),
                             (kinds.POD, kinds.POD_GROUP, kinds.BIND_REQUEST))  # fmt: skip

    def _usage_now(self, queues: set[str]) -> tuple[dict[str, float], dict[str, float], dict[str, list[Obj]]]:
        groups = {(g["metadata"]["namespace"], g["metadata"]["name"]): g for g in self._all(kinds.POD_GROUP)
                  if g["spec"]["queue"] in queues}  # fmt: skip
        requested = self._requested()
        held, asked = dict.fromkeys(queues, 0.0), dict.fromkeys(queues, 0.0)
        bound: dict[str, list[Obj]] = {}
        for pod in self._all(kinds.POD):
            key = (
                pod["metadata"]["namespace"],
                (pod["metadata"].get("annotations") or {}).get(ex.POD_GROUP_ANNOTATION),
            )
            group = groups.get(key)
            if group is None or is_terminating(pod):
                continue
            queue = group["spec"]["queue"]
            asked[queue] += gpus_of(pod)
            if is_bound(pod) or (key[0], pod["metadata"]["name"]) in requested:
                held[queue] += gpus_of(pod)
            if is_bound(pod):
                bound.setdefault(group["metadata"]["uid"], []).append(pod)
        return held, asked, bound

    def _deserved(self, queue: Obj, total: float) -> float:
        quota = _gpu(queue).get("quota", 0)
        return total if quota == -1 else float(quota)

    def _fair_shares(self, queues: list[Obj], asked: dict[str, float]) -> dict[str, float]:
        total = float(self.layout.total)
        share = {name: min(self._deserved(q, total), asked[name]) for q in queues for name in [q["metadata"]["name"]]}
        remaining = total - sum(share.values())
        for priority in sorted({q["spec"].get("priority", DEFAULT_QUEUE_PRIORITY) for q in queues}, reverse=True):
            bucket = [q for q in queues if q["spec"].get("priority", DEFAULT_QUEUE_PRIORITY) == priority]
            while remaining > EPSILON:
                hungry = [q for q in bucket if asked[q["metadata"]["name"]] - share[q["metadata"]["name"]] > EPSILON
                          and _gpu(q).get("overQuotaWeight", 1) > 0]  # fmt: skip
                weights = sum(_gpu(q).get("overQuotaWeight", 1) for q in hungry)
                if not hungry:
                    break
                given = 0.0
                for q in hungry:
                    name = q["metadata"]["name"]
                    give = min(remaining * _gpu(q).get("overQuotaWeight", 1) / weights, asked[name] - share[name])
                    share[name] += give
                    given += give
                remaining -= given
        return share

    # ---------------------------------------------------------------------------------------------- reclaim
    def _reclaim_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        mine = self._find(kinds.QUEUE, pg["spec"]["queue"], None)
        if mine is None or any(gpus_of(p) == 0 for p in waiting):
            return None  # whole-GPU pods only: a fraction's needs are the sharing mixin's (sharing.py)
        queues = self._siblings(mine)
        if len(queues) < 2:
            return None
        name, total = mine["metadata"]["name"], float(self.layout.total)
        held, asked, bound = self._usage({q["metadata"]["name"] for q in queues})
        shares = self._fair_shares(queues, asked)
        request = float(sum(gpus_of(p) for p in waiting))
        if held[name] + request > shares[name] + EPSILON:
            return None
        preemptible = ex.PRIORITY_CLASSES.get(pg["spec"]["priorityClassName"], (50, True))[1]
        within_quota = held[name] + request <= self._deserved(mine, total) + EPSILON
        if not preemptible and not within_quota:
            return None
        deserved = {q["metadata"]["name"]: self._deserved(q, total) for q in queues}
        order = {uid: i for i, uid in enumerate(self._seen)}

        def saturation(group: Obj) -> float:
            queue = group["spec"]["queue"]
            return held[queue] / shares[queue] if shares[queue] > 0 else float("inf")

        candidates = [
            g for g in self._all(kinds.POD_GROUP)
            if g["spec"]["queue"] in held and g["spec"]["queue"] != name and bound.get(g["metadata"]["uid"])
            and ex.PRIORITY_CLASSES.get(g["spec"]["priorityClassName"], (50, True))[1]
            and self._may_evict(g, pg, "reclaim")
        ]  # fmt: skip
        candidates.sort(key=lambda g: (-saturation(g), -order.get(g["metadata"]["uid"], 0)))
        free, remaining, chosen = self._free(), dict(held), []
        for group in candidates:
            queue = group["spec"]["queue"]
            over_share = remaining[queue] > shares[queue] + EPSILON
            over_quota = within_quota and remaining[queue] > deserved[queue] + EPSILON
            if not (over_share or over_quota):
                continue
            pods = bound[group["metadata"]["uid"]]
            chosen += [(group, p) for p in pods]
            for pod in pods:
                free[pod["spec"]["nodeName"]] += gpus_of(pod)
                remaining[queue] -= gpus_of(pod)
            placement = self._place(waiting, free, whole)
            if placement:
                for victim, pod in chosen:
                    message = f"Pod {_name(pod)} was preempted by workload {_name(pg)}."
                    self._evict(victim, pod, pg, len(chosen), "reclaim", message)
                return placement
        return None


def _name(obj: Obj) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
