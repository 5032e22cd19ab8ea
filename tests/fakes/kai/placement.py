"""Simulated KAI, placement strategy: nodes are tried in the order the ``nodeplacement`` plugin scores them, chosen by
the simulated SchedulingShard (the one with an empty ``partitionLabelValue``; ``spec.placementStrategy.gpu``, absent
= binpack, :mod:`suites.support.expectations.placement`).

* binpack (pack.go): fewest free GPUs first, so a node fills before the next is used;
* spread (spread.go): the largest free fraction of the node's GPUs first, so pods go where the most is left.

Ties go by node name, as the base simulation orders nodes.
"""

from __future__ import annotations

from collections.abc import Callable

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.expectations.placement import DEFAULT_STRATEGY, SPREAD
from tests.fakes.kai.scheduler import Kai


class KaiPlacement(Kai):
    def _node_order(self, free: dict[str, int]) -> list[str]:
        return sorted(free, key=self._rank(free))

    def _pick_node(self, free: dict[str, int], gpus: int) -> str | None:
        """The best-ranked node with room: the first of :meth:`_node_order` that has it, found in one pass."""
        return min((node for node, left in free.items() if left >= gpus), key=self._rank(free), default=None)

    def _rank(self, free: dict[str, int]) -> Callable[[str], tuple[float, str]]:
        if self.gpu_strategy() == SPREAD:
            capacity = self._capacity()
            return lambda node: (-free[node] / (capacity.get(node) or 1), node)
        return lambda node: (free[node], node)

    def _capacity(self) -> dict[str, int]:
        return self._derived("capacity", self.layout.by_name, ())

    def gpu_strategy(self) -> str:
        shards = [s for s in self._all(kinds.SCHEDULING_SHARD) if not s.get("spec", {}).get("partitionLabelValue")]
        chosen = (shards[0].get("spec", {}).get("placementStrategy") or {}).get("gpu") if shards else None
        return chosen or DEFAULT_STRATEGY
