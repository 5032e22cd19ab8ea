"""Topology domains of a GPU layout: which GPU nodes share a zone or a rack, and how much of a gang each holds.

KAI builds its topology tree from node labels named by a ``Topology`` object's levels, top level first; a node
belongs to the tree only if it carries the label of *every* level (``pkg/scheduler/plugins/topology/common.go``
``isNodePartOfTopology``, v0.16.8 and v0.17.0), and a domain is identified by the label values from the top level
down to its own (``lowestCommonDomainID``: ``zone-a.rack-1``), so two racks of the same name in different zones are
different domains. This module does the same arithmetic on a :class:`~clusters.layout.GpuLayout` whose nodes carry
their labels (the topology file's on kind and in render mode, the cluster's at run time through
:func:`with_node_labels`). Pure functions: no API calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from kai_conformance.clusters.layout import GpuLayout, GpuNode

#: The node labels of the suite's topology levels. Kind nodes get them from clusters/topologies/*.yaml; on an
#: existing cluster the operator labels the GPU nodes (docs/suites.md, "Topology-aware placement").
ZONE_LABEL = "kai-conformance/zone"
RACK_LABEL = "kai-conformance/rack"


class Level(Enum):
    """A topology level the cases constrain to, by the node label that defines it; listed top level first."""

    ZONE = ZONE_LABEL
    RACK = RACK_LABEL

    @property
    def label(self) -> str:
        return self.value

    @property
    def alias(self) -> str:
        """The short name a v0.17 Topology may give the level (``spec.levels[].alias``)."""
        return self.name.lower()


LEVELS = tuple(Level)


def with_node_labels(layout: GpuLayout, nodes: Iterable[Mapping]) -> GpuLayout:
    """``layout`` with each node's labels taken from the API's Node objects (``kube.list(kinds.NODE)``)."""
    labels = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in nodes}
    return GpuLayout(tuple(replace(n, labels=labels.get(n.name, n.labels)) for n in layout.nodes))


def topology_levels(layout: GpuLayout) -> tuple[Level, ...]:
    """The levels every GPU node carries, top level first: the levels a Topology of this cluster can list without
    leaving a GPU node out of KAI's tree."""
    gpu_nodes = layout.gpu_nodes
    return tuple(lv for lv in LEVELS if gpu_nodes and all(lv.label in n.labels for n in gpu_nodes))


def domain_of(node: GpuNode, level: Level, levels: tuple[Level, ...]) -> str | None:
    """``zone-a/rack-1``: the node's domain at ``level`` (its label values from the top level down), or None when
    it lacks one of those labels (KAI leaves such a node out of the topology)."""
    if level not in levels:
        return None
    path = [node.labels.get(lv.label) for lv in levels[: levels.index(level) + 1]]
    return "/".join(path) if all(path) else None  # type: ignore[arg-type]


@dataclass(frozen=True)
class Domains:
    """The GPU nodes of a layout grouped into domains at one level."""

    level: Level
    members: Mapping[str, tuple[GpuNode, ...]]

    @classmethod
    def of(cls, layout: GpuLayout, level: Level) -> Domains:
        levels = topology_levels(layout)
        grouped: dict[str, list[GpuNode]] = {}
        for node in layout.gpu_nodes:
            domain = domain_of(node, level, levels)
            if domain is not None:
                grouped.setdefault(domain, []).append(node)
        return cls(level, {d: tuple(nodes) for d, nodes in sorted(grouped.items())})

    def __len__(self) -> int:
        return len(self.members)

    @property
    def node_domains(self) -> dict[str, str]:
        """Node name → its domain: what the detectors judge bound pods by."""
        return {node.name: domain for domain, nodes in self.members.items() for node in nodes}

    def holds(self, domain: str, gpus_per_pod: int) -> int:
        """Pods of ``gpus_per_pod`` GPUs the empty domain holds (per-node packing)."""
        return sum(n.gpus // gpus_per_pod for n in self.members[domain]) if gpus_per_pod > 0 else 0

    def largest_holds(self, gpus_per_pod: int) -> int:
        return max((self.holds(d, gpus_per_pod) for d in self.members), default=0)

    def fewest_for(self, pods: int, gpus_per_pod: int) -> int | None:
        """The fewest domains that together hold ``pods`` pods on the empty cluster (None: all of them do not)."""
        used, held = 0, 0
        for capacity in sorted((self.holds(d, gpus_per_pod) for d in self.members), reverse=True):
            if held >= pods:
                break
            used, held = used + 1, held + capacity
        return used if held >= pods else None

    def describe(self, layout: GpuLayout | None = None) -> str:
        if not self.members:
            carriers = [n.name for n in (layout.gpu_nodes if layout else ()) if self.level.label in n.labels]
            if layout is None or not carriers:
                return f"no GPU node carries {self.level.label}"
            return (
                f"only {len(carriers)} of {len(layout.gpu_nodes)} GPU nodes carry {self.level.label} "
                f"({', '.join(carriers)}), and KAI leaves a node without a level's label out of the topology"
            )
        return ", ".join(f"{domain} ({', '.join(n.name for n in nodes)})" for domain, nodes in self.members.items())
