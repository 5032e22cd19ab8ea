"""Hand-made API objects for detector and flow self-tests: pods, PodGroups, events and the owner chain."""

from __future__ import annotations

import itertools
from typing import Any

from kai_conformance.suites.support.expectations import (
    JOBSET_API_VERSION,
    JOBSET_NAME_LABEL,
    POD_GROUP_ANNOTATION,
    SUBGROUP_LABEL,
)

NS = "kc-test"
T0 = "2026-11-21T12:00:00Z"
_uids = itertools.count(1)


def uid(prefix: str = "uid") -> str:
    return f"{prefix}-{next(_uids):04d}"


def at(seconds: int) -> str:
    """``T0`` plus ``seconds`` as an RFC 3339 string."""
    minutes, secs = divmod(seconds, 60)
    return f"2026-11-21T12:{minutes:02d}:{secs:02d}Z"


def ref(owner: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        **({"controller": True} if controller else {}),
    }


def trainjob(name: str = "gang") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS, "uid": uid("tj")},
    }


def jobset(owner: dict[str, Any] | None = None, name: str = "gang") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid("js")}
    if owner is not None:
        meta["ownerReferences"] = [ref(owner)]
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": meta}


def job(owner: dict[str, Any], index: int = 0, rjob: str = "node") -> dict[str, Any]:
    workload = owner["metadata"]["name"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{workload}-{rjob}-{index}",
            "namespace": NS,
            "uid": uid("job"),
            "labels": {JOBSET_NAME_LABEL: workload},
            "ownerReferences": [ref(owner)],
        },
    }


def pod(
    name: str,
    *,
    workload: str = "gang",
    node: str | None = None,
    bound: int | None = 0,
    unschedulable: str | None = None,
    running: int | None = None,
    terminating: bool = False,
    owner: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    gpus: int = 1,
) -> dict[str, Any]:
    """A pod of ``workload``; bound to ``node`` at ``T0 + bound`` s, or pending (``unschedulable``: its message)."""
    conditions = []
    if node is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": at(bound or 0)})
    elif unschedulable is not None:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
        )
    status: dict[str, Any] = {"phase": "Running" if running is not None else "Pending", "conditions": conditions}
    if running is not None:
        status["containerStatuses"] = [{"name": "node", "state": {"running": {"startedAt": at(running)}}}]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": uid("pod"),
        "creationTimestamp": T0,
        "labels": {JOBSET_NAME_LABEL: workload, **(labels or {})},
        "annotations": dict(annotations or {}),
    }
    if owner is not None:
        meta["ownerReferences"] = [ref(owner)]
    if terminating:
        meta["deletionTimestamp"] = at(30)
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "node", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def gang(size: int, bound: int, workload: str = "gang", nodes: tuple[str, ...] = ("node-a", "node-b")) -> list[dict]:
    """``size`` pods of which the first ``bound`` are bound (round robin over ``nodes``), the rest Unschedulable."""
    return [
        pod(f"{workload}-{i}", workload=workload, node=nodes[i % len(nodes)], bound=i)
        if i < bound
        else pod(f"{workload}-{i}", workload=workload, unschedulable="Resources were found for 2 pods")
        for i in range(size)
    ]


def podgroup(
    owner: dict[str, Any],
    *,
    name: str | None = None,
    spec: dict[str, Any] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": name or f"pg-{meta['name']}-{meta['uid']}",
            "namespace": NS,
            "uid": uid("pg"),
            "annotations": dict(annotations or {}),
            "ownerReferences": owners if owners is not None else [ref(owner, controller=False)],
        },
        "spec": {"queue": "q", **(spec or {})},
        "status": {"schedulingConditions": conditions or []},
    }


def unschedulable_condition(reason: str, message: str) -> dict[str, Any]:
    return {
        "type": "UnschedulableOnNodePool",
        "nodePool": "default",
        "reason": "Unschedulable",
        "status": "True",
        "message": f"{reason}: {message}.",
        "reasons": [{"reason": reason, "message": message}],
    }


def event(involved: dict[str, Any], reason: str, message: str, annotations: dict[str, str] | None = None) -> dict:
    meta = involved["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{uid('ev')}", "namespace": NS, "annotations": dict(annotations or {})},
        "involvedObject": {"kind": involved["kind"], "name": meta["name"], "uid": meta["uid"]},
        "reason": reason,
        "message": message,
        "lastTimestamp": T0,
    }


def grouped(pod_obj: dict[str, Any], pg: dict[str, Any], subgroup: str | None) -> dict[str, Any]:
    """``pod_obj`` as KAI's podgrouper leaves it: annotated with the PodGroup and labelled with its SubGroup."""
    pod_obj["metadata"]["annotations"][POD_GROUP_ANNOTATION] = pg["metadata"]["name"]
    if subgroup:
        pod_obj["metadata"]["labels"][SUBGROUP_LABEL] = subgroup
    return pod_obj


def deployment(name: str, image: str, *, available: bool, namespace: str = "kai-scheduler") -> dict[str, Any]:
    """A Deployment as KAI's operator makes its operands (label ``app: <name>``), Available or not."""
    condition = (
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
        if available
        else {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
              "message": "Deployment does not have minimum availability."}
    )  # fmt: skip
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": name, "image": image}]}}},
        "status": {"replicas": 1, "availableReplicas": 1 if available else 0, "conditions": [condition]},
    }  # fmt: skip


def unsliced(name: str = "pr-gate") -> Any:
    """A topology without slices: the simulated clusters of the self-tests have only the topology's own workers."""
    from kai_conformance.clusters.topology import load_topology, with_slices

    return with_slices(load_topology(name), 0)
