"""A snapshot: one look at a namespace's workload objects, and pure readings of it.

Detectors (:mod:`suites.support.detectors`) and the timeline work on snapshots only, never on the API, so each
can be fed hand-made snapshots in the self-tests. :class:`~suites.support.observe.Observer` takes them.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kai_conformance.clusters.layout import GPU_RESOURCE
from kai_conformance.fixtures.kube import api_views
from kai_conformance.suites.support.expectations import (
    JOBSET_API_VERSION,
    JOBSET_NAME_LABEL,
    POD_GROUP_NAME_FORMAT,
)

Obj = dict[str, Any]

#: How many objects a verdict or a diagnosis names before it abbreviates.
NAMED = 3


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``2026-11-21T12:00:00Z``, fractions allowed) → seconds since the epoch."""
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def name_of(obj: Obj) -> str:
    return obj["metadata"]["name"]


def name_list(items: Sequence[Any], describe: Callable[[Any], str] = name_of) -> str:
    """``a, b, c and 2 more``: the first :data:`NAMED` of ``items`` as ``describe`` puts them, then how many more."""
    shown = [describe(item) for item in items[:NAMED]]
    return ", ".join(shown) + (f" and {len(items) - NAMED} more" if len(items) > NAMED else "")


def uid_of(obj: Obj) -> str:
    return obj["metadata"].get("uid", "")


def labels_of(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("annotations") or {}


# ------------------------------------------------------------------------------------------------ pod readings
def node_of(pod: Obj) -> str | None:
    return pod.get("spec", {}).get("nodeName") or None


def is_bound(pod: Obj) -> bool:
    return node_of(pod) is not None


def is_terminating(pod: Obj) -> bool:
    return pod["metadata"].get("deletionTimestamp") is not None


def bind_finished(request: Obj) -> bool:
    """Has KAI's binder finished the BindRequest (``status.phase`` Succeeded or Failed; Pending or none: not yet,
    the v0.17.0 CRD's ``[Pending/Succeeded/Failed]``)?"""
    return ((request.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed")


def is_live(pod: Obj) -> bool:
    """Counts toward its gang: not being deleted and not finished."""
    return not is_terminating(pod) and api_views.pod(pod).get("status", {}).get("phase") not in ("Succeeded", "Failed")


def condition(pod: Obj, kind: str) -> Obj | None:
    return next((c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == kind), None)


def scheduled_condition(pod: Obj) -> Obj | None:
    return condition(pod, "PodScheduled")


def bound_at(pod: Obj) -> float | None:
    """When the pod was bound: the PodScheduled=True transition."""
    cond = scheduled_condition(pod)
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime"))


def running_at(pod: Obj) -> float | None:
    for status in api_views.pod(pod).get("status", {}).get("containerStatuses") or []:
        started = status.get("state", {}).get("running", {}).get("startedAt")
        if started:
            return parse_time(started)
    return None


def container_waiting(pod: Obj) -> str:
    """Why the first container is not running: ``ImagePullBackOff: ...``, the pod phase, or ``not started``."""
    status = api_views.pod(pod).get("status", {})
    for container in status.get("containerStatuses") or []:
        waiting = container.get("state", {}).get("waiting")
        if waiting:
            return f"{waiting.get('reason', 'waiting')}: {waiting.get('message', '')}".rstrip(": ")
    return status.get("phase") or "not started"


def is_running(pod: Obj) -> bool:
    return api_views.pod(pod).get("status", {}).get("phase") == "Running" and running_at(pod) is not None


def gpus_of(pod: Obj) -> int:
    total = 0
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        amount = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(
            GPU_RESOURCE
        )
        total += int(amount or 0)
    return total


def pending_reason(pod: Obj) -> str:
    """``Unschedulable: <message>`` from the PodScheduled condition, or ``no PodScheduled condition``."""
    cond = scheduled_condition(pod)
    if cond is None:
        return "no PodScheduled condition"
    text = f"PodScheduled={cond.get('status')}"
    if cond.get("reason"):
        text += f"/{cond['reason']}"
    if cond.get("message"):
        text += f": {cond['message']}"
    return text


def node_summary(pods: list[Obj]) -> str:
    """``node-a, node-b×2``: where pods are bound."""
    counts = Counter(node_of(p) for p in pods if is_bound(p))
    return ", ".join(f"{node}×{n}" if n > 1 else str(node) for node, n in sorted(counts.items())) or "-"


def workload_of(obj: Obj) -> str | None:
    """The TrainJob (= JobSet) a pod or Job belongs to, from JobSet's own label."""
    return labels_of(obj).get(JOBSET_NAME_LABEL)


def owner_refs(obj: Obj) -> list[Obj]:
    return obj.get("metadata", {}).get("ownerReferences") or []


def podgroup_name(jobset: Obj) -> str:
    return POD_GROUP_NAME_FORMAT.format(jobset=name_of(jobset), uid=uid_of(jobset))


def is_owned_by_jobset(podgroup: Obj, workload: str) -> bool:
    return any(
        ref.get("kind") == "JobSet" and ref.get("apiVersion") == JOBSET_API_VERSION and ref.get("name") == workload
        for ref in owner_refs(podgroup)
    )


# ------------------------------------------------------------------------------------------------ snapshot
@dataclass(frozen=True)
class Snapshot:
    """Objects of one namespace seen at ``taken_at`` (seconds since the epoch). Lists not read stay empty."""

    taken_at: float
    pods: tuple[Obj, ...] = ()
    podgroups: tuple[Obj, ...] = ()
    events: tuple[Obj, ...] = ()
    trainjobs: tuple[Obj, ...] = ()
    jobsets: tuple[Obj, ...] = ()
    jobs: tuple[Obj, ...] = ()
    #: Queues the observer was asked to follow (cluster-scoped: kept whole by :meth:`of`) and the namespace's
    #: BindRequests (narrowed by :meth:`of` to those naming a pod of the TrainJob: its pods' names start with it).
    queues: tuple[Obj, ...] = ()
    bindrequests: tuple[Obj, ...] = ()
    workload: str | None = field(default=None)

    def of(self, workload: str) -> Snapshot:
        """The part of the snapshot belonging to one TrainJob (its JobSet, Jobs, pods, PodGroup and their events)."""
        pods = tuple(p for p in self.pods if workload_of(p) == workload)
        podgroups = tuple(g for g in self.podgroups if is_owned_by_jobset(g, workload))
        uids = {uid_of(o) for o in pods + podgroups}
        return replace(
            self,
            pods=pods,
            podgroups=podgroups,
            events=tuple(e for e in self.events if (e.get("involvedObject") or {}).get("uid") in uids),
            trainjobs=tuple(t for t in self.trainjobs if name_of(t) == workload),
            jobsets=tuple(j for j in self.jobsets if name_of(j) == workload),
            jobs=tuple(j for j in self.jobs if workload_of(j) == workload),
            bindrequests=tuple(
                b for b in self.bindrequests if str((b.get("spec") or {}).get("podName", "")).startswith(f"{workload}-")
            ),
            workload=workload,
        )

    @property
    def what(self) -> str:
        return f"TrainJob {self.workload}" if self.workload else "the namespace"

    @property
    def live_pods(self) -> list[Obj]:
        return sorted((p for p in self.pods if is_live(p)), key=name_of)

    @property
    def bound_pods(self) -> list[Obj]:
        return [p for p in self.live_pods if is_bound(p)]

    @property
    def pending_pods(self) -> list[Obj]:
        return [p for p in self.live_pods if not is_bound(p)]

    @property
    def podgroup(self) -> Obj | None:
        """The workload's PodGroup, when there is exactly one."""
        return self.podgroups[0] if len(self.podgroups) == 1 else None

    def events_for(self, obj: Obj, reason: str | None = None) -> list[Obj]:
        uid = uid_of(obj)
        return [
            e
            for e in self.events
            if (e.get("involvedObject") or {}).get("uid") == uid and (reason is None or e.get("reason") == reason)
        ]

    def workloads(self) -> list[str]:
        return sorted({w for w in (workload_of(p) for p in self.pods) if w})
