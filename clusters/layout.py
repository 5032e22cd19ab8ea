"""The GPU layout of a cluster: which node offers how many GPUs.

Suites compute their expectations from a layout (never from hard-coded numbers). It comes from the topology
file for kind clusters and render mode, and from node allocatable on existing clusters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

GPU_RESOURCE = "nvidia.com/gpu"
#: Up to this many nodes are named one by one; beyond, runs of numbered nodes with as many GPUs are summed up, so
#: a line about 500 fake nodes stays one line.
LISTED_NODES = 8
_NUMBERED = re.compile(r"^(?P<stem>.*?)(?P<number>\d+)$")


def describe_gpus(gpus: Mapping[str, int]) -> str:
    """``a=4, b=4`` for a few nodes; ``200 nodes × 8 GPUs (c-kwok-0001 … c-kwok-0200), a=4`` for many."""
    items = sorted(gpus.items())
    if len(items) <= LISTED_NODES:
        return ", ".join(f"{name}={count}" for name, count in items)
    groups: dict[tuple[str, int], list[str]] = {}
    for name, count in items:
        match = _NUMBERED.match(name)
        groups.setdefault((match.group("stem") if match else name, count), []).append(name)
    parts = []
    for (_, count), names in groups.items():
        if len(names) > 3:  # a handful stays named one by one
            parts.append(f"{len(names)} nodes × {count} GPUs ({names[0]} … {names[-1]})")
        else:
            parts += [f"{name}={count}" for name in names]
    return ", ".join(parts)


@dataclass(frozen=True)
class GpuNode:
    name: str
    gpus: int
    labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class GpuLayout:
    nodes: tuple[GpuNode, ...]

    @property
    def gpu_nodes(self) -> tuple[GpuNode, ...]:
        """Nodes with at least one GPU, most GPUs first (ties by name, so the order is stable)."""
        return tuple(sorted((n for n in self.nodes if n.gpus > 0), key=lambda n: (-n.gpus, n.name)))

    @property
    def total(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def max_per_node(self) -> int:
        return max((n.gpus for n in self.nodes), default=0)

    def by_name(self) -> dict[str, int]:
        return {n.name: n.gpus for n in self.nodes}

    def pods_that_fit(self, gpus_per_pod: int) -> int:
        """How many pods of ``gpus_per_pod`` GPUs fit on the empty cluster (per-node packing)."""
        if gpus_per_pod <= 0:
            raise ValueError("gpus_per_pod must be positive")
        return sum(n.gpus // gpus_per_pod for n in self.nodes)

    def describe(self) -> str:
        if not self.gpu_nodes:
            return "no GPU nodes"
        return describe_gpus({n.name: n.gpus for n in self.gpu_nodes}) + f" (total {self.total})"
