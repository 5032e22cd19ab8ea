"""What the placement cases read from the cluster, through :class:`~fixtures.kube.KubeApi`: the placement strategy
of the SchedulingShard that places the suite's workloads, and how many GPUs each node has in use.

The strategy is read, never assumed (facts and sources: :mod:`suites.support.expectations.placement`). A cluster
where it cannot be read (no SchedulingShard served, none for the default partition, no permission) yields an
:class:`ActivePlacement` without a strategy, and its ``source`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import Observation
from kai_conformance.suites.support.expectations.placement import DEFAULT_STRATEGY, SHARD_FIELD
from kai_conformance.suites.support.snapshot import gpus_of, is_live, is_terminating, name_of, node_of


@dataclass(frozen=True)
class ActivePlacement:
    """The GPU placement strategy in force for the suite's workloads (None: unreadable) and where it came from."""

    gpu: str | None
    source: str

    def describe(self) -> str:
        return f"{self.gpu} ({self.source})" if self.gpu else f"unknown: {self.source}"


def active_placement(kube: KubeApi) -> ActivePlacement:
    """The ``gpu`` strategy of the one SchedulingShard with an empty ``partitionLabelValue``; absent means binpack."""
    try:
        shards = kube.list(kinds.SCHEDULING_SHARD)
    except (errors.KindNotServed, errors.Forbidden) as failure:
        return ActivePlacement(None, f"the SchedulingShards cannot be read ({failure})")
    default = [s for s in shards if not (s.get("spec") or {}).get("partitionLabelValue")]
    if len(default) != 1:
        names = ", ".join(name_of(s) for s in shards) or "none"
        return ActivePlacement(
            None, f"{len(default)} SchedulingShards with an empty partitionLabelValue (need one; shards: {names})"
        )
    (shard,) = default
    strategy = ((shard.get("spec") or {}).get("placementStrategy") or {}).get("gpu")
    where = f"SchedulingShard {name_of(shard)} {SHARD_FIELD}"
    if not strategy:
        return ActivePlacement(DEFAULT_STRATEGY, f"{where} unset, which KAI defaults to {DEFAULT_STRATEGY}")
    return ActivePlacement(strategy, f"{where} = {strategy}")


@dataclass(frozen=True)
class GpuUse:
    """GPUs held per node by every bound pod of the cluster, and the GPU pods still terminating."""

    used: dict[str, int]
    terminating: dict[str, str]  # "namespace/pod" → its node

    def free(self, layout: GpuLayout) -> dict[str, int]:
        """Free GPUs per GPU node of ``layout``."""
        return {n.name: n.gpus - self.used.get(n.name, 0) for n in layout.gpu_nodes}

    def settled(self, layout: GpuLayout | None = None) -> Observation:
        """No GPU pod is terminating (on ``layout``'s nodes, when given: a slice's case does not wait for the
        others'): KAI still counts a releasing pod's GPUs, so the free map would be wrong."""
        nodes = None if layout is None else {n.name for n in layout.nodes}
        terminating = sorted(pod for pod, node in self.terminating.items() if nodes is None or node in nodes)
        if terminating:
            return Observation(False, f"{len(terminating)} GPU pod(s) terminating: {', '.join(terminating)}")
        return Observation(True, "no GPU pod terminating; in use: " + _describe(self.used))


def gpu_use(kube: KubeApi) -> GpuUse:
    """Cluster-wide: other namespaces' pods count, so that an existing cluster's own workloads are seen too."""
    used: dict[str, int] = {}
    terminating: dict[str, str] = {}
    for pod in kube.list(kinds.POD):
        gpus, node = gpus_of(pod), node_of(pod)
        if not gpus or node is None:
            continue
        if is_terminating(pod):
            terminating[f"{pod['metadata'].get('namespace')}/{name_of(pod)}"] = node
        elif is_live(pod):
            used[node] = used.get(node, 0) + gpus
    return GpuUse(used, terminating)


def _describe(used: dict[str, int]) -> str:
    return ", ".join(f"{node}={gpus}" for node, gpus in sorted(used.items())) or "none"
