"""Symbolic workload sizes, resolved against a GPU layout only when a case runs (or renders).

Collection must be the same on every pytest-xdist worker and independent of the cluster, so cases are
parametrized with symbols ("two pods", "a whole node", "the whole cluster plus one pod") and turn them into
numbers from the :class:`~clusters.layout.GpuLayout` at run time (from the topology file in render mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kai_conformance.clusters.layout import GpuLayout


class GpuSize(Enum):
    """GPUs each pod (each TrainJob "node") requests."""

    ONE = "1-gpu"
    #: All GPUs of the largest node: at most one such pod per node.
    WHOLE_NODE = "whole-node"
    #: One GPU more than the largest node has: fits nowhere.
    MORE_THAN_A_NODE = "more-than-any-node"

    def gpus(self, layout: GpuLayout) -> int:
        if self is GpuSize.ONE:
            return 1
        if self is GpuSize.WHOLE_NODE:
            return max(layout.max_per_node, 1)
        return layout.max_per_node + 1


class PodCount(Enum):
    """Pods in the gang (``numNodes``), either fixed or as a fill level of the cluster at the chosen pod size."""

    ONE = "1-pod"
    TWO = "2-pods"
    #: One pod per node that can hold one.
    PER_GPU_NODE = "pod-per-gpu-node"
    HALF = "half-cluster"
    FULL = "full-cluster"
    #: One pod more than the empty cluster can hold.
    OVER = "over-cluster"

    def pods(self, layout: GpuLayout, gpus_per_pod: int) -> int:
        fit = layout.pods_that_fit(gpus_per_pod)
        if self is PodCount.ONE:
            return 1
        if self is PodCount.TWO:
            return 2
        if self is PodCount.PER_GPU_NODE:
            return max(1, sum(1 for node in layout.gpu_nodes if node.gpus >= gpus_per_pod))
        if self is PodCount.HALF:
            return max(1, fit // 2)
        if self is PodCount.FULL:
            return max(1, fit)
        return fit + 1

    @property
    def fills_cluster(self) -> bool:
        return self in (PodCount.FULL, PodCount.OVER)


@dataclass(frozen=True)
class GangShape:
    """``pods`` × ``gpus``: a TrainJob of ``numNodes`` pods with ``gpus`` GPUs each."""

    pods: PodCount
    gpus: GpuSize = GpuSize.ONE

    @property
    def id(self) -> str:
        return f"{self.pods.value}-of-{self.gpus.value}"

    def size(self, layout: GpuLayout) -> tuple[int, int]:
        """(pods, GPUs per pod) on ``layout``."""
        gpus = self.gpus.gpus(layout)
        return self.pods.pods(layout, gpus), gpus

    def demand(self, layout: GpuLayout) -> int:
        pods, gpus = self.size(layout)
        return pods * gpus

    def fits(self, layout: GpuLayout) -> bool:
        """Would the gang fit on the empty cluster?"""
        pods, gpus = self.size(layout)
        return layout.total > 0 and pods <= layout.pods_that_fit(gpus)

    def describe(self, layout: GpuLayout) -> str:
        pods, gpus = self.size(layout)
        return f"{pods} pod(s) × {gpus} GPU(s) on {layout.describe()}"

    @property
    def needs_whole_nodes(self) -> bool:
        """Whole-node pods need empty nodes, which free GPUs scattered by side-by-side cases do not give."""
        return self.gpus is GpuSize.WHOLE_NODE

    @property
    def needs_whole_cluster(self) -> bool:
        return self.pods.fills_cluster or (self.pods is PodCount.PER_GPU_NODE and self.gpus is GpuSize.WHOLE_NODE)
