"""Simulated KAI Scheduler's scheduler: all-or-nothing gangs, read through their SubGroups as KAI reads them
(``subgroups``), hierarchical queue limits, whole-gang in-queue preemption with ``Evict`` events,
``Unschedulable`` conditions and events (``refusals``). It places pods by creating BindRequests (KAI §2.4);
the binder (``tests/fakes/binder.py``) binds them. What it schedules, the PodGroups, comes from the podgrouper
(``podgrouper``).
"""

from __future__ import annotations

from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME
from kai_conformance.clusters.topology import NODE_POOL_LABEL
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.snapshot import gpus_of, is_bound, is_terminating, labels_of, uid_of
from tests.fakes.kai.podgrouper import KaiPodgrouper
from tests.fakes.kai.refusals import KaiRefusals
from tests.fakes.kai.subgroups import subgroup_tree
from tests.fakes.simulation import Obj

#: KAI's reason for a non-preemptible workload beyond its queue's quota (podgroup_types.go UnschedulableReason).
NON_PREEMPTIBLE_OVER_QUOTA_REASON = "NonPreemptibleOverQuota"
#: What KAI says of a ready PodGroup from which its gang phase took no task (real kind, KAI v0.17.0: upstream-facts
#: §B10, the #1209 workaround on deepspeed).
NOTHING_TO_ALLOCATE = "Unable to schedule podgroup"


class Kai(KaiPodgrouper, KaiRefusals):
    #: Whether the scheduler hands a SubGroup below its floor the pods it has (KAI PR #2096); None: as the version's
    #: row says (``KaiRow.podset_floor_gap``). A flow sets it to show a KAI with the bug where the fix is expected.
    ignores_podset_floors: bool | None = None

    # --------------------------------------------------------------------------------------------- scheduling
    def _free(self) -> dict[str, int]:
        def free() -> dict[str, int]:
            left = {n.name: n.gpus for n in self.layout.nodes}
            requested = self._placed()
            for pod in self.fake.stored(kinds.POD):  # read only
                node = pod["spec"].get("nodeName") or requested.get(_key(pod))
                # A deleted pod holds its GPUs until its containers have ended (terminal phase), as on a node. A pod
                # pinned to a node outside the simulated layout (the kwok probe's) takes nothing KAI places on.
                if node in left and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    left[node] -= gpus_of(pod)
            return left

        return dict(self._derived("free", free, (kinds.POD, kinds.BIND_REQUEST)))

    def _requested(self) -> dict[tuple[str, str], str]:
        """(namespace, pod) → node of every BindRequest the binder has not failed: KAI counts those pods as placed."""
        return dict(self._placed())

    def _placed(self) -> dict[tuple[str, str], str]:
        """:meth:`_requested` itself, shared: read it, do not change it (the scheduler asks once per PodGroup)."""
        return self._derived("requested", lambda: {
            (r["metadata"]["namespace"], r["spec"]["podName"]): r["spec"]["selectedNode"]
            for r in self.fake.stored(kinds.BIND_REQUEST) if (r.get("status") or {}).get("phase") != ex.BIND_FAILED
        }, (kinds.BIND_REQUEST,))  # fmt: skip

    def _request_binding(self, pod: Obj, node: str) -> None:
        """The scheduler's decision: a BindRequest named after the pod and owned by it (KAI §2.4, cache.go)."""
        meta = pod["metadata"]
        placed_stamp, free_stamp = self._stamp((kinds.BIND_REQUEST,)), self._stamp((kinds.POD, kinds.BIND_REQUEST))
        self.fake.write({
            "apiVersion": kinds.BIND_REQUEST.api_version, "kind": kinds.BIND_REQUEST.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": {"selected-node": node},
                         "ownerReferences": [self._ref(pod, controller=False)]},
            "spec": self._bind_request_spec(pod, node),
        })  # fmt: skip
        self._carry_placement(pod, node, placed_stamp, free_stamp)

    def _carry_placement(self, pod: Obj, node: str, placed_stamp: object, free_stamp: object) -> None:
        """Bring what :meth:`_placed` and :meth:`_free` derived before this BindRequest up to date instead of deriving
        them again from every pod (the scheduler places hundreds of gangs in one pass): the pod now counts at
        ``node``, as a new derivation would count it."""
        placed, free = self._cache.get("requested"), self._cache.get("free")
        if placed is None or placed[0] != placed_stamp:
            return
        key = _key(pod)
        before = placed[1].get(key)
        placed[1][key] = node
        self._cache["requested"] = (self._stamp((kinds.BIND_REQUEST,)), placed[1])
        if free is None or free[0] != free_stamp:
            return
        left = free[1]
        if not pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            if before is not None:
                left[before] += gpus_of(pod)
            left[node] -= gpus_of(pod)
        self._cache["free"] = (self._stamp((kinds.POD, kinds.BIND_REQUEST)), left)

    def _bind_request_spec(self, pod: Obj, node: str) -> Obj:
        """Extension point: what the scheduler tells the binder about a pod (a whole-GPU pod here)."""
        return {"podName": pod["metadata"]["name"], "selectedNode": node, "receivedResourceType": "Regular",
                "receivedGPU": {"count": gpus_of(pod), "portion": "1.00"}}  # fmt: skip

    def _in_pool(self, free: dict[str, int], pool: str | None) -> dict[str, int]:
        """``free`` on the nodes of node pool ``pool`` (None: the nodes of none), as a shard's scheduler lists them;
        kube-scheduler's pods go there too (the suite keeps them off the slices by affinity)."""
        pools = {name: labels_of(node).get(NODE_POOL_LABEL) for name, node in self._nodes_by_name().items()}
        return {name: gpus for name, gpus in free.items() if pools.get(name) == pool}

    def _nodes_by_name(self) -> dict[str, Obj]:
        return self._derived(
            "nodes", lambda: {n["metadata"]["name"]: n for n in self.fake.stored(kinds.NODE)}, (kinds.NODE,)
        )

    def _place_group(self, pg: Obj, pods: list[Obj], free: dict[str, int], whole: bool) -> dict[str, str] | None:
        """Extension point: where the pods of ``pg`` go (first fit here; area mixins add topology or devices)."""
        return self._place(pods, free, whole)

    def _unplaceable(self, pg: Obj, waiting: list[Obj]) -> tuple[str, str]:
        """Extension point: KAI's reason and message for a PodGroup it found no place for."""
        return (
            "PodSchedulingErrors",
            f"Resources were found for 0 pods while {len(waiting)} are required for gang scheduling",
        )

    def _place(self, pods: list[Obj], free: dict[str, int], whole: bool) -> dict[str, str] | None:
        """Pod name → node, first fit; None when ``whole`` and not every pod fits."""
        sizes = {gpus_of(pod) for pod in pods}
        # Pods of one size fit one by one, whatever the order, exactly when the nodes have room for all of them.
        if (whole and len(sizes) == 1 and (size := sizes.pop()) > 0
                and sum(left // size for left in free.values() if left > 0) < len(pods)):  # fmt: skip
            return None
        left, placed = dict(free), {}
        for pod in pods:
            node = self._pick_node(left, gpus_of(pod))
            if node is None:
                if whole:
                    return None
                continue
            left[node] -= gpus_of(pod)
            placed[pod["metadata"]["name"]] = node
        return placed

    def _pick_node(self, free: dict[str, int], gpus: int) -> str | None:
        """The first node of :meth:`_node_order` with ``gpus`` GPUs free (an area mixin may find the same node
        without ordering them all)."""
        return next((n for n in self._node_order(free) if free[n] >= gpus), None)

    def _node_order(self, free: dict[str, int]) -> list[str]:
        """Extension point: the order in which nodes are tried for a pod (here by name; placement.py ranks them
        by the placement strategy)."""
        return sorted(free)

    def _bind(self, pod: Obj, node: str) -> None:
        """What a binder does: the node and ``PodScheduled=True``; the kubelet (tests/fakes/kubelet.py) runs it."""
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Pending",
                         "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": self._now()}]}  # fmt: skip
        self.fake.write(pod)

    def default_scheduler(self) -> bool:
        """kube-scheduler: the pending pods that are not KAI's, first fit on the nodes of no node pool (the stack's
        own component pods are not the simulated cluster's: tests/fakes/restarts.py)."""
        changed = False
        default = [p for p in self._all(kinds.POD) if not is_bound(p) and not is_terminating(p)
                   and p["spec"].get("schedulerName") != KAI_SCHEDULER_NAME and not self._stack_pod(p)]  # fmt: skip
        for name, node in (self._place(default, self._in_pool(self._free(), None), whole=False) or {}).items():
            self._bind(next(p for p in default if p["metadata"]["name"] == name), node)
            changed = True
        return changed

    def scheduler(self) -> bool:
        """KAI's scheduling cycle: every PodGroup, oldest first."""
        changed = False
        groups = sorted(self._all(kinds.POD_GROUP), key=lambda g: self._seen.setdefault(uid_of(g), len(self._seen)))
        for pg in groups[: self.faults.scheduler_considers_only]:
            changed |= self._schedule_group(pg)
        return changed

    def _member_keys(self, pg: Obj) -> list[tuple[str, str]]:
        """(namespace, name) of the live pods of ``pg`` (they name it in their ``pod-group-name`` annotation)."""

        def by_group() -> dict[tuple[str, str], list[tuple[str, str]]]:
            members: dict[tuple[str, str], list[tuple[str, str]]] = {}
            for p in self.fake.stored(kinds.POD):
                group = (p["metadata"].get("annotations") or {}).get(ex.POD_GROUP_ANNOTATION)
                if group and not is_terminating(p):
                    members.setdefault((p["metadata"]["namespace"], group), []).append(_key(p))
            return members

        return self._derived("members", by_group, (kinds.POD,)).get(
            (pg["metadata"]["namespace"], pg["metadata"]["name"]), []
        )

    def _members(self, pg: Obj) -> list[Obj]:
        """The live pods of ``pg`` (copies)."""
        keys = self._member_keys(pg)
        listed = self._listed(kinds.POD)
        if listed is not None:
            return [listed[key] for key in keys]
        return [self._copy(kinds.POD, self.fake.store[self.fake._key(kinds.POD, *key)]) for key in keys]

    @property
    def _ignores_podset_floors(self) -> bool:
        if self.ignores_podset_floors is not None:
            return self.ignores_podset_floors
        return self.row.podset_floor_gap(self.kai_version) is not None

    def _gang_size(self, pg: Obj) -> int:
        spec = pg["spec"]
        if "minMember" in spec:
            return spec["minMember"]
        return sum(sg.get("minMember", 0) for sg in spec.get("subGroups") or [])

    def _schedule_group(self, pg: Obj) -> bool:
        members = self._members(pg)
        requested = self._requested()
        waiting = [p for p in members if not is_bound(p) and _key(p) not in requested]
        if not waiting:
            return self._bound_whole(pg, members)
        tree = subgroup_tree(pg, members, lambda p: is_bound(p) or _key(p) in requested)
        if not (tree.ready if tree else len(members) >= self._gang_size(pg)):
            return False
        # Where a minSubGroup leaves SubGroups out, which ones the gang phase takes is KAI's choice (kai_subgroups);
        # elsewhere every SubGroup is needed and the attempt asks what the area's _to_allocate says.
        if tree is not None and tree.leaves_some_out:
            asked = tree.tasks(enforce_floor=not self._ignores_podset_floors)
        else:
            asked = self._to_allocate(pg, members, waiting)
        queue = self._find(kinds.QUEUE, pg["spec"]["queue"], None)
        if queue is not None and labels_of(queue).get(NODE_POOL_LABEL) != labels_of(pg).get(NODE_POOL_LABEL):
            queue = None  # each node pool's scheduler lists only the queues of its pool (clusters/slices.py)
        if queue is None:
            queue_name = pg["spec"]["queue"]
            return self._unschedulable(
                pg, waiting, ex.QUEUE_MISSING_REASON, ex.QUEUE_MISSING_MESSAGE.format(queue=queue_name)
            )
        over = self._over_limit(queue, sum(gpus_of(p) for p in asked))
        if over:
            return self._unschedulable(pg, waiting, ex.OVER_LIMIT_REASON, over)
        over_quota = self._non_preemptible_over_quota(pg, queue, sum(gpus_of(p) for p in asked))
        if over_quota:
            return self._unschedulable(pg, waiting, NON_PREEMPTIBLE_OVER_QUOTA_REASON, over_quota)
        if not asked:  # AllocateJob on an empty list: "Could not allocate resources" (actions/common/allocate.go)
            return self._unschedulable(pg, waiting, ex.UNSCHEDULABLE_REASON, NOTHING_TO_ALLOCATE)
        whole = not self.faults.partial_gangs
        free = self._in_pool(self._free(), labels_of(pg).get(NODE_POOL_LABEL))
        placement = self._place_group(pg, asked, free, whole) or self._evict_for(pg, asked, whole)
        if not placement:
            return self._unschedulable(pg, waiting, *self._unplaceable(pg, waiting))
        for pod in asked:
            if pod["metadata"]["name"] in placement:
                self._request_binding(pod, placement[pod["metadata"]["name"]])
        self._allocated(pg)
        return True

    def _evict_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        """Extension point: the actions after allocate that evict to make room, in KAI's order (consolidation,
        reclaim, preempt: KAI §6); consolidation.py and fairness.py put theirs in front of in-queue
        preemption."""
        return self._preempt_for(pg, waiting, whole)

    def _may_evict(self, victim: Obj, preemptor: Obj, action: str) -> bool:
        """Extension point: may ``victim``'s gang be evicted for ``preemptor`` by ``action`` (preempt, reclaim,
        consolidation)? consolidation.py protects young victims (min-runtime)."""
        return True

    def _allocated(self, pg: Obj) -> None:
        """Extension point: called once the scheduler has placed pods of ``pg`` (consolidation.py stamps
        ``kai.scheduler/last-start-timestamp``)."""

    def _to_allocate(self, pg: Obj, members: list[Obj], waiting: list[Obj]) -> list[Obj]:
        """Extension point: the pods one scheduling attempt asks for (here every waiting pod, the whole gang;
        elastic.py asks for the minimum first, then one pod at a time)."""
        return waiting

    def _over_limit(self, queue: Obj | None, request: int) -> str | None:
        """KAI walks from the leaf up through its parents (capacity_policy.resultsOverLimit)."""
        while queue is not None:
            limit = queue["spec"]["resources"]["gpu"].get("limit", -1)
            if limit != -1 and self._queue_gpus(queue["metadata"]["name"]) + request > limit:
                display = queue["spec"].get("displayName") or queue["metadata"]["name"]
                return f"{display} quota has reached the allowable limit of GPUs. Limit is {limit} GPUs"
            parent = queue["spec"].get("parentQueue")
            queue = self._find(kinds.QUEUE, parent, None) if parent else None
        return None

    def _non_preemptible_over_quota(self, pg: Obj, queue: Obj | None, request: int) -> str | None:
        """KAI runs a non-preemptible workload only within quota: from the leaf up, each queue's quota (its deserved
        GPUs; -1 unlimited) must hold its non-preemptible GPUs plus the request (capacity_policy/quota_check.go
        ``resultsWithNonPreemptibleOverQuota``, checked with the limit for allocation and for preemption; message
        unschedule_info.go ``GetBuildOverCapacityMessageForQueue``)."""
        if ex.PRIORITY_CLASSES.get(pg["spec"]["priorityClassName"], (50, True))[1]:
            return None
        while queue is not None:
            quota = queue["spec"]["resources"]["gpu"].get("quota", 0)
            name = queue["metadata"]["name"]
            used = self._queue_gpus(name, non_preemptible=True) if quota != -1 else 0
            if quota != -1 and used + request > quota:
                display = queue["spec"].get("displayName") or name
                return (f"Non-preemptible workload is over quota. Workload requested {request} GPUs, but {display} "
                        f"quota is {quota:g} GPUs, while {used} GPUs are already allocated for non-preemptible pods. "
                        "Use a preemptible workload to go over quota")  # fmt: skip
            parent = queue["spec"].get("parentQueue")
            queue = self._find(kinds.QUEUE, parent, None) if parent else None
        return None

    def _queue_gpus(self, queue: str, *, non_preemptible: bool = False) -> int:
        """GPUs of the placed pods (bound, or with a BindRequest) of ``queue`` and the queues below it;
        ``non_preemptible``: only those of non-preemptible PodGroups. The scheduler asks for every gang it considers."""

        def gpus() -> int:
            children = [q["metadata"]["name"] for q in self.fake.stored(kinds.QUEUE)
                        if q["spec"].get("parentQueue") == queue]  # fmt: skip
            groups = [g for g in self.fake.stored(kinds.POD_GROUP) if g["spec"]["queue"] == queue and not (
                non_preemptible and ex.PRIORITY_CLASSES.get(g["spec"]["priorityClassName"], (50, True))[1])]  # fmt: skip
            requested = self._placed()
            total = 0
            for group in groups:
                for key in self._member_keys(group):
                    pod = self.fake.store[self.fake._key(kinds.POD, *key)]  # read only
                    if is_bound(pod) or key in requested:
                        total += gpus_of(pod)
            return total + sum(self._queue_gpus(child, non_preemptible=non_preemptible) for child in children)

        return self._derived(f"queue-gpus:{queue}:{non_preemptible}", gpus,
                             (kinds.QUEUE, kinds.POD_GROUP, kinds.POD, kinds.BIND_REQUEST))  # fmt: skip

    def _preempt_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        """In-queue preemption: preemptible gangs of strictly lower priority are evicted whole (KAI §6)."""
        bound = [(g, p) for g in self._preemption_victims(pg) for p in self._members(g) if is_bound(p)]
        free = self._free()
        for _, pod in bound:
            free[pod["spec"]["nodeName"]] += gpus_of(pod)
        placement = self._place(waiting, free, whole)
        if not placement or not bound:
            return None
        for victim, pod in bound:
            self._evict(victim, pod, pg, len(bound))
        return placement

    def _preemption_victims(self, pg: Obj) -> list[Obj]:
        """PodGroups ``pg`` may preempt: preemptible, of strictly lower priority, in its queue (KAI §6 preempt)."""
        mine = ex.PRIORITY_CLASSES.get(pg["spec"]["priorityClassName"], (50, True))[0]
        return [g for g in self._all(kinds.POD_GROUP) if g["spec"]["queue"] == pg["spec"]["queue"]
                and g is not pg and ex.PRIORITY_CLASSES.get(g["spec"]["priorityClassName"], (50, True))[1]
                and ex.PRIORITY_CLASSES.get(g["spec"]["priorityClassName"], (50, True))[0] < mine
                and self._may_evict(g, pg, "preempt")]  # fmt: skip

    def _evict(
        self, victim: Obj, pod: Obj, preemptor: Obj, evicted: int, action: str = "preempt", message: str | None = None
    ) -> None:
        """Evict one pod of ``victim`` for ``preemptor`` by ``action``, with the ``Evict`` event KAI writes on the
        victim (default_status_updater.go; messages: api/unschedule_info.go)."""
        self._api_delete(pod)  # KAI's evictor deletes the pod (default_evictor.go), no Eviction API
        event = self.fake.record_event(
            victim,
            ex.EVICT_EVENT_REASON,
            message
            or f"Pod {pod['metadata']['namespace']}/{pod['metadata']['name']} was preempted by higher priority workload {preemptor['metadata']['namespace']}/{preemptor['metadata']['name']}",
        )
        event["metadata"]["annotations"] = {ex.EVICT_ACTION_ANNOTATION: action, "num-evicted-pods": str(evicted)}
        self.fake.write(event)


def _key(pod: Obj) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]
