"""Simulated GPU sharing (KAI's admission, scheduler and binder, reduced to what the suite observes; facts:
suites/support/expectations/sharing.py).

* Admission: a pod asking for ``gpu-fraction`` (every GPU pod in rows that say so) without a RuntimeClass gets
  ``nvidia`` — applied the first time the podgrouper's reconcile sees the pod, standing in for the webhook.
* Scheduler: a gang with fractional pods is placed device by device, all or nothing: each pod goes to a shared device
  with room left (the fullest first: binpack, gpusharingorder), else to a free whole GPU of the first node that has
  one, which becomes a new GPU group. Its BindRequest says ``Fraction``, ``receivedGPU {count: 1, portion: "0.50"}``
  and the group.
* Binder: before binding the first pod of a group it creates the group's reservation pod in
  ``kai-resource-reservation`` (requesting ``nvidia.com/gpu: 1`` on the node) and binds only once that pod is
  annotated ``run.ai/reserve_for_gpu_index``; the pod is then labelled ``runai-gpu-group``. The answer comes from the
  suite's own fake device layer (``clusters/gpu_sharing.answer_reservations``, run here in place of the thread the
  sharing suite starts on kind). A reservation pod whose group has no pod left is deleted.
* Queues: a fractional pod counts its fraction against its queue's quota and limit, as KAI's capacity checks count
  it (suites/support/chaos/sharing.py): the core counts whole GPUs only.

:class:`SharingFaults` switches on misbehaviour for the flow self-tests.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from kai_conformance.clusters.gpu_sharing import answer_reservations
from kai_conformance.clusters.layout import GPU_RESOURCE
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.expectations.sharing import (
    DEFAULT_FRACTION_RUNTIME_CLASS,
    FRACTION,
    GPU_FRACTION_ANNOTATION,
    GPU_GROUP_LABEL,
    RESERVATION_NAMESPACE,
    RESERVED_GPU_ANNOTATION,
    portion_text,
    sharing_row,
)
from kai_conformance.suites.support.snapshot import annotations_of, gpus_of, is_bound, is_live, labels_of, uid_of
from tests.fakes.binder import Binder
from tests.fakes.simulation import SCHEDULER, Faults, Obj

#: 1e-9: fractions are compared as floats.
EPSILON = 1e-9


@dataclass
class SharingFaults(Faults):
    #: Nobody answers the binder's reservation pods (kind without the suite's fake device layer).
    reservations_unanswered: bool = False
    #: The scheduler gives every fractional pod a device of its own.
    fractions_never_share: bool = False
    #: The scheduler places the fractional pods that fit and leaves the rest pending (no gang).
    partial_fraction_gangs: bool = False
    #: After the binder's restart (tests/fakes/restarts.py) it never deletes a reservation pod again: the pods of a
    #: GPU group go and its reservation pod stays (tests/fakes/restart_faults.py).
    restart_leaks_reservations: bool = False


def fraction_of(pod: Obj) -> float:
    return float(annotations_of(pod).get(GPU_FRACTION_ANNOTATION) or 0)


class KaiSharing(Binder):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._groups = itertools.count(1)
        self._planned: dict[str, tuple[str, float]] = {}  # pod uid → (GPU group, fraction)
        self._asking = 0.0  # the fractions the PodGroup being scheduled asks for

    def _forget(self, component: str) -> None:
        """A restarted scheduler's plans are gone (what it decided is in the BindRequests); GPU group names stay
        unique (KAI's are random)."""
        super()._forget(component)
        if component == SCHEDULER:
            self._planned.clear()

    # ------------------------------------------------------------------------------------------------ admission
    def podgrouper(self) -> bool:
        return self._admit_fractions() | super().podgrouper()

    def _admit_fractions(self) -> bool:
        everyone = sharing_row(self.kai_version).runtime_class_on_whole_gpu_pods
        changed = False
        for pod in self._all(kinds.POD):
            asks = fraction_of(pod) > 0 or (everyone and gpus_of(pod) > 0)
            if (
                asks
                and pod["metadata"]["namespace"] != RESERVATION_NAMESPACE
                and not pod["spec"].get("runtimeClassName")
            ):
                pod["spec"]["runtimeClassName"] = DEFAULT_FRACTION_RUNTIME_CLASS
                self.fake.write(pod)
                changed = True
        return changed

    # ------------------------------------------------------------------------------------------------ scheduler
    def _schedule_group(self, pg: Obj) -> bool:
        placed = self._placed()
        self._asking = sum(fraction_of(p) for p in self._members(pg)
                           if not is_bound(p) and (p["metadata"]["namespace"], p["metadata"]["name"]) not in placed)  # fmt: skip
        try:
            return super()._schedule_group(pg)
        finally:
            self._asking = 0.0

    def _over_limit(self, queue: Obj | None, request: float) -> str | None:
        return super()._over_limit(queue, request + self._asking)

    def _non_preemptible_over_quota(self, pg: Obj, queue: Obj | None, request: float) -> str | None:
        return super()._non_preemptible_over_quota(pg, queue, request + self._asking)

    def _queue_gpus(self, queue: str, *, non_preemptible: bool = False) -> float:
        """The core's whole GPUs (its queues below included, through this method) plus the fractions of this
        queue's own placed pods."""
        whole = super()._queue_gpus(queue, non_preemptible=non_preemptible)

        def fractions() -> float:
            groups = [g for g in self.fake.stored(kinds.POD_GROUP) if g["spec"]["queue"] == queue and not (
                non_preemptible and ex.PRIORITY_CLASSES.get(g["spec"]["priorityClassName"], (50, True))[1])]  # fmt: skip
            requested = self._placed()
            total = 0.0
            for group in groups:
                for key in self._member_keys(group):
                    pod = self.fake.store[self.fake._key(kinds.POD, *key)]  # read only
                    if is_bound(pod) or key in requested:
                        total += fraction_of(pod)
            return total

        shared = self._derived(f"queue-fractions:{queue}:{non_preemptible}", fractions,
                               (kinds.QUEUE, kinds.POD_GROUP, kinds.POD, kinds.BIND_REQUEST))  # fmt: skip
        return whole + shared

    def _shared_devices(self) -> dict[str, list]:
        """GPU group → [node, portion used], from the BindRequests of live fractional pods."""
        live = {uid_of(p) for p in self._all(kinds.POD) if is_live(p)}
        pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): uid_of(p) for p in self._all(kinds.POD)}
        devices: dict[str, list] = {}
        for request in self._all(kinds.BIND_REQUEST):
            spec = request["spec"]
            pod_uid = pods.get((request["metadata"]["namespace"], spec["podName"]))
            if spec.get("receivedResourceType") != FRACTION or pod_uid not in live:
                continue
            if (request.get("status") or {}).get("phase") == ex.BIND_FAILED:
                continue
            device = devices.setdefault(spec["selectedGPUGroups"][0], [spec["selectedNode"], 0.0])
            device[1] += float(spec["receivedGPU"]["portion"])
        return devices

    def _reservation(self, group: str) -> Obj | None:
        return next(
            (p for p in self._all(kinds.POD, RESERVATION_NAMESPACE) if labels_of(p).get(GPU_GROUP_LABEL) == group), None
        )

    def _place_group(self, pg: Obj, pods: list[Obj], free: dict[str, int], whole: bool) -> dict[str, str] | None:
        if not any(fraction_of(p) for p in pods):
            return super()._place_group(pg, pods, free, whole)
        devices = self._shared_devices()
        left = dict(free)
        for group, (node, _) in devices.items():
            if self._reservation(group) is None:  # decided, not reserved yet: its whole GPU is taken all the same
                left[node] -= 1
        placed: dict[str, str] = {}
        plan: dict[str, tuple[str, float]] = {}
        for pod in pods:
            fraction = fraction_of(pod)
            roomy = [] if getattr(self.faults, "fractions_never_share", False) else [
                (used, group) for group, (_, used) in devices.items() if used + fraction <= 1 + EPSILON
            ]  # fmt: skip
            if roomy:
                _, group = max(roomy)
            else:
                node = next((n for n in sorted(left) if left[n] >= 1), None)
                if node is None:
                    if whole and not getattr(self.faults, "partial_fraction_gangs", False):
                        return None
                    continue
                left[node] -= 1
                group = f"gpu-group-{next(self._groups)}"
                devices[group] = [node, 0.0]
            devices[group][1] += fraction
            placed[pod["metadata"]["name"]] = devices[group][0]
            plan[uid_of(pod)] = (group, fraction)
        self._planned.update(plan)
        return placed or None

    def _bind_request_spec(self, pod: Obj, node: str) -> Obj:
        spec = super()._bind_request_spec(pod, node)
        planned = self._planned.get(uid_of(pod))
        if planned is None:
            return spec
        group, fraction = planned
        return {**spec, "receivedResourceType": FRACTION, "selectedGPUGroups": [group],
                "receivedGPU": {"count": 1, "portion": portion_text(fraction)}}  # fmt: skip

    # --------------------------------------------------------------------------------------------------- binder
    def _ready_to_bind(self, request: Obj, pod: Obj) -> bool:
        spec = request["spec"]
        if spec.get("receivedResourceType") != FRACTION:
            return super()._ready_to_bind(request, pod)
        group = spec["selectedGPUGroups"][0]
        reservation = self._reservation(group)
        if reservation is None:
            self.fake.write(self._reservation_pod(spec["selectedNode"], group))
            return False
        if RESERVED_GPU_ANNOTATION not in annotations_of(reservation):
            if not getattr(self.faults, "reservations_unanswered", False):
                answer_reservations(self.fake)
            reservation = self._reservation(group)
            if reservation is None or RESERVED_GPU_ANNOTATION not in annotations_of(reservation):
                return False
        pod["metadata"].setdefault("labels", {})[GPU_GROUP_LABEL] = group
        return True

    def _reservation_pod(self, node: str, group: str) -> Obj:
        """As the binder makes it with ``--fake-gpu-nodes`` (resource_reservation.go createResourceReservationPod)."""
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"gpu-reservation-{group}", "namespace": RESERVATION_NAMESPACE,
                         "labels": {"app": RESERVATION_NAMESPACE, GPU_GROUP_LABEL: group}},
            "spec": {"nodeName": node, "containers": [{
                "name": "resource-reservation", "image": "ubuntu", "args": ["sleep", "infinity"],
                "resources": {"limits": {GPU_RESOURCE: "1"}, "requests": {GPU_RESOURCE: "1"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
        }  # fmt: skip

    def binder(self) -> bool:
        return super().binder() | self._release_reservations()

    def _release_reservations(self) -> bool:
        """Delete reservation pods whose group no live pod uses (the binder's SyncForGpuGroup)."""
        used = set(self._shared_devices())
        changed = False
        for pod in self._all(kinds.POD, RESERVATION_NAMESPACE):
            if labels_of(pod).get(GPU_GROUP_LABEL) not in used and not pod["metadata"].get("deletionTimestamp"):
                self._api_delete(pod)
                changed = True
        return changed
