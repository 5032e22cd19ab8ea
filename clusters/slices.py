"""Slices: copies of the topology's workers, each a KAI node pool with a scheduler of its own.

A case that needs "the whole cluster" (it fills every GPU, judges fair shares over the cluster's capacity, or
waits out a protection window) used to run alone. On kind the suite can give it a cluster of its own instead: a
slice is a copy of the topology's workers labelled ``kai.scheduler/node-pool=kc-slice-N``, with

* a SchedulingShard ``kc-slice-N`` whose ``partitionLabelValue`` is the slice's name: KAI's operator runs a
  scheduler for it (Deployment ``<schedulerName>-kc-slice-N``), which lists only the nodes, queues and PodGroups
  carrying that label (``pkg/scheduler/cache/cluster_info/data_lister/kubernetes_lister.go``: ``ListNodes``,
  ``ListQueues``, ``ListPodGroups`` with the partition selector), while the default shard lists only those
  *without* the label (``conf.SchedulingNodePoolParams.GetLabelSelector``: ``DoesNotExist``). Each scheduler's
  fair share, reclaim, consolidation and min-runtime therefore see the slice alone. The shard copies the default
  shard's spec, so placement strategy, actions, plugins and windows are the same as the cases expect;
* a parent queue ``kai-conformance-kc-slice-N`` labelled the same way (a queue without the label is invisible to
  the slice's scheduler, and a child whose parent it cannot see has no parent);
* a case in a slice labels its queues and workloads with the slice (``fixtures/partition.py``); KAI's podgrouper
  gives the PodGroup the TrainJob's labels (``skiptopowner.propagateMetadataDownChain`` then
  ``DefaultGrouper.CalcPodGroupLabels``), so the PodGroup lands in the slice's scheduler.

The facts and what they imply for each area are in docs/research/upstream-facts.md ("Node pools").
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from kai_conformance.clusters.install.behaviour import prove_scheduling
from kai_conformance.clusters.install.kai import NAMESPACE as KAI_NAMESPACE
from kai_conformance.clusters.install.readiness import wait_deployments
from kai_conformance.clusters.install.stack import in_parallel
from kai_conformance.clusters.install.suite import apply_stack_objects
from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import PARENT_QUEUE, queue
from kai_conformance.clusters.topology import NODE_POOL_LABEL
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import TimeoutPolicy

#: The scheduler name KAI's Config defaults to (``global.schedulerName``); the shard's Deployment is named after it.
SCHEDULER_NAME = "kai-scheduler"
#: Fields of the default shard's spec a slice does not copy: its own partition.
NOT_COPIED = ("partitionLabelValue",)


def parent_queue_name(slice_name: str) -> str:
    return f"{PARENT_QUEUE}-{slice_name}"


def scheduler_deployment(slice_name: str) -> str:
    """``pkg/operator/operands/scheduler/resources_for_shard.go`` ``DeploymentName``: ``<schedulerName>-<shard>``."""
    return f"{SCHEDULER_NAME}-{slice_name}"


def default_shard(kube: KubeApi) -> dict[str, Any]:
    """The one SchedulingShard with an empty ``partitionLabelValue`` (the chart's ``default``)."""
    try:
        shards = kube.list(kinds.SCHEDULING_SHARD)
    except errors.KindNotServed:
        raise errors.InfrastructureError(
            "slices need KAI's SchedulingShard (kai.scheduler/v1), which this cluster does not serve; fix: install "
            "KAI with its operator, or pass --slices 0"
        ) from None
    default = [s for s in shards if not (s.get("spec") or {}).get("partitionLabelValue")]
    if len(default) != 1:
        names = ", ".join(s["metadata"]["name"] for s in shards) or "none"
        raise errors.InfrastructureError(
            f"slices copy the SchedulingShard with an empty partitionLabelValue, and there are {len(default)} "
            f"(shards: {names}); fix: keep exactly one default shard, or pass --slices 0"
        )
    return default[0]


def slice_manifests(default: dict[str, Any], slice_name: str) -> list[dict[str, Any]]:
    """The slice's SchedulingShard (the default shard's spec, its own partition) and parent queue."""
    spec = {k: v for k, v in copy.deepcopy(default.get("spec") or {}).items() if k not in NOT_COPIED}
    spec["partitionLabelValue"] = slice_name
    shard = {
        "apiVersion": kinds.SCHEDULING_SHARD.api_version,
        "kind": kinds.SCHEDULING_SHARD.kind,
        "metadata": {"name": slice_name},
        "spec": spec,
    }
    parent = queue(parent_queue_name(slice_name))
    parent["metadata"]["labels"] = {NODE_POOL_LABEL: slice_name}
    return [shard, parent]


def install_slices(
    kube_factory: Callable[[], KubeApi],
    run_id: str,
    layouts: dict[str, GpuLayout],
    image: str,
    timeouts: TimeoutPolicy,
) -> dict[str, Any]:
    """Create every slice's shard and parent queue, wait for its scheduler, and prove it schedules on the slice's
    nodes (the behaviour probe, routed to the slice); returns what was made, for ``ClusterState.stack``.
    ``kube_factory`` gives each thread a client of its own."""
    if not layouts:
        return {}
    kube = kube_factory()
    default = default_shard(kube)
    apply_stack_objects(kube, run_id, [obj for name in layouts for obj in slice_manifests(default, name)], timeouts)
    refs = [(KAI_NAMESPACE, scheduler_deployment(name)) for name in layouts]
    wait_deployments(kube, refs, timeouts, "KAI schedulers of the slices")
    # Each slice has a scheduler of its own, so the probes are independent: run side by side, they cost the run
    # one probe's time.
    probes = in_parallel({
        name: functools.partial(prove_scheduling, kube_factory(), run_id, image, timeouts, node_pool=name,
                                parent=parent_queue_name(name))
        for name in layouts
    }, cancellable=True)  # fmt: skip
    record: dict[str, Any] = {}
    for name, layout in layouts.items():
        nodes = sorted(n.name for n in layout.nodes)
        probe = probes[name]
        if probe["node"] not in nodes:
            raise errors.InfrastructureError(
                f"slice {name}'s behaviour probe was bound to {probe['node']}, not to one of the slice's nodes "
                f"({', '.join(nodes)}): KAI does not partition by {NODE_POOL_LABEL}; fix: check the Config's "
                "global.nodePoolLabelKey, or pass --slices 0"
            )
        record[name] = {
            "nodes": nodes,
            "gpus": layout.total,
            "shard": name,
            "scheduler": f"{KAI_NAMESPACE}/{scheduler_deployment(name)}",
            "parent_queue": parent_queue_name(name),
            "probe_seconds": probe["seconds"].get("evicted"),
        }
    progress.report(
        "slices ready: " + "; ".join(f"{n} ({len(r['nodes'])} nodes, {r['gpus']} GPUs)" for n, r in record.items())
    )
    return record
