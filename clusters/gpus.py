"""Fake GPU capacity on kind workers, and discovery of real GPUs on existing clusters.

Faking is a JSON patch of ``/status/capacity/nvidia.com~1gpu`` on each worker's status (the documented way to
advertise an extended resource); kubelet mirrors capacity into allocatable on its next status sync and keeps the
value until the node is re-created. Workers are matched to the topology by the worker-index label the kind
config puts on them, not by name. :func:`ensure_gpus` is the cheap per-case check that re-applies the patch
after a node was re-created.
"""

from __future__ import annotations

from typing import Any

from kai_conformance.clusters.layout import GPU_RESOURCE, describe_gpus
from kai_conformance.clusters.topology import WORKER_INDEX_LABEL, Topology
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually

CAPACITY_PATH = "/status/capacity/" + GPU_RESOURCE.replace("~", "~0").replace("/", "~1")


def gpu_count(node: dict[str, Any], field: str = "allocatable") -> int:
    value = (node.get("status", {}).get(field) or {}).get(GPU_RESOURCE, "0")
    try:
        return int(value)
    except ValueError:
        return 0


def workers_by_index(kube: KubeApi) -> dict[int, dict[str, Any]]:
    """The cluster's workers keyed by the suite's worker-index label."""
    found = {}
    for node in kube.list(kinds.NODE, labels=WORKER_INDEX_LABEL):
        try:
            found[int(node["metadata"]["labels"][WORKER_INDEX_LABEL])] = node
        except ValueError:
            continue
    return found


def _matched_workers(kube: KubeApi, topology: Topology, cluster: str) -> list[tuple[dict[str, Any], int]]:
    """(node, wanted GPUs) per topology worker; a usage error when the cluster was built for another topology."""
    found = workers_by_index(kube)
    wanted = {index: spec.gpus for index, spec in enumerate(topology.workers)}
    if set(found) != set(wanted):
        raise errors.UsageError(
            f"kind cluster {cluster} has workers labelled {WORKER_INDEX_LABEL}={sorted(found)}, but topology "
            f"{topology.name} has {len(wanted)} workers (indexes {sorted(wanted)}); it was created for another "
            f"topology or not by this suite: delete it (`kind delete cluster --name {cluster}`) or pass the "
            "--topology it was created with"
        )
    return [(found[index], gpus) for index, gpus in sorted(wanted.items())]


def _patch(kube: KubeApi, node: str, gpus: int) -> None:
    kube.patch(
        kinds.NODE,
        node,
        [{"op": "add", "path": CAPACITY_PATH, "value": str(gpus)}],
        patch_type="json",
        subresource="status",
        allow_foreign=True,
    )


def _wait_allocatable(kube: KubeApi, wanted: dict[str, int], timeouts: TimeoutPolicy) -> None:
    def probe() -> Observation:
        seen = {name: gpu_count(kube.get(kinds.NODE, name)) for name in wanted}
        missing = [f"{n} shows {seen[n]}" for n in wanted if seen[n] != wanted[n]]
        summary = "every worker shows its GPUs" if not missing else "; ".join(missing)
        return Observation(not missing, summary, wanted, seen)

    what = f"kubelet to show the fake GPUs in node allocatable ({_describe(wanted)})"
    progress.report(f"waiting for {what}")
    eventually(probe, what=what, timeout=timeouts("gpus"), failure=errors.WaitTimeout)
    progress.report(f"fake GPUs ready: {_describe(wanted)}")


def _describe(gpus: dict[str, int]) -> str:
    return describe_gpus(gpus)


def fake_gpus(kube: KubeApi, topology: Topology, cluster: str, timeouts: TimeoutPolicy) -> dict[str, int]:
    """Patch every worker's GPU capacity per the topology and wait for allocatable; returns node → GPUs."""
    matched = _matched_workers(kube, topology, cluster)
    wanted = {}
    for node, gpus in matched:
        name = node["metadata"]["name"]
        wanted[name] = gpus
        if gpu_count(node, "capacity") != gpus:
            _patch(kube, name, gpus)
    _wait_allocatable(kube, wanted, timeouts)
    return wanted


def ensure_gpus(kube: KubeApi, topology: Topology, cluster: str, timeouts: TimeoutPolicy) -> list[str]:
    """One list call when nothing changed; re-patches workers whose capacity was lost (a re-created node)."""
    matched = _matched_workers(kube, topology, cluster)
    lost = {node["metadata"]["name"]: gpus for node, gpus in matched if gpu_count(node, "capacity") != gpus}
    if not lost:
        return []
    progress.report(f"fake GPUs missing on re-created node(s) {', '.join(lost)}: patching them again")
    for name, gpus in lost.items():
        _patch(kube, name, gpus)
    _wait_allocatable(kube, lost, timeouts)
    return sorted(lost)


def discover_gpus(kube: KubeApi) -> dict[str, int]:
    """Real GPUs of an existing cluster: allocatable ``nvidia.com/gpu`` of Ready, schedulable nodes."""
    found = {}
    for node in kube.list(kinds.NODE):
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions", [])
        )
        if ready and not node.get("spec", {}).get("unschedulable") and gpu_count(node) > 0:
            found[node["metadata"]["name"]] = gpu_count(node)
    return found
