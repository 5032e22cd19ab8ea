"""Simulated KAI, placement strategy: nodes are tried in the order the ``nodeplacement`` plugin scores them, chosen by
the simulated SchedulingShard (the one with an empty ``partitionLabelValue``; ``spec.placementStrategy.gpu``, absent
= binpack, :mod:`suites.support.expectations_placement`).

* binpack (pack.go): fewest free GPUs first, so a node fills before the next is used;
* spread (spread.go): the largest free fraction of the node's GPUs first, so pods go where the most is left.

Ties go by node name, as the base simulation orders nodes.
"""

from __future__ import annotations

from kai_conformance.fixtures import kinds
from kai_conformance.suites.support.expectations_placement import DEFAULT_STRATEGY, SPREAD
from tests.fakes.kai import Kai


class KaiPlacement(Kai):
    def _node_order(self, free: dict[str, int]) -> list[str]:
        capacity = self.layout.by_name()
        if self.gpu_strategy() == SPREAD:
            return sorted(free, key=lambda node: (-free[node] / (capacity.get(node) or 1), node))
        return sorted(free, key=lambda node: (free[node], node))

    def gpu_strategy(self) -> str:
        shards = [s for s in self._all(kinds.SCHEDULING_SHARD) if not s.get("spec", {}).get("partitionLabelValue")]
        chosen = (shards[0].get("spec", {}).get("placementStrategy") or {}).get("gpu") if shards else None
        return chosen or DEFAULT_STRATEGY
