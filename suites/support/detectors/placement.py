"""Placement-strategy detectors: each whole-GPU pod placed where the active strategy sends it, given the free GPUs
of every node just before it was placed (:mod:`suites.support.expectations.placement` for the rules and sources).

The cases place one small TrainJob at a time on an otherwise idle cluster (serial), so each step's free map is the
state KAI scored. Judging every step, rather than counting nodes at the end, holds on a cluster whose nodes are not
empty or not alike; on an empty cluster of alike nodes it implies the count :func:`nodes_used_as_expected` checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.placement import BINPACK, RULES, SPREAD


@dataclass(frozen=True)
class PlacementStep:
    """One pod placed: where it went, and the free GPUs (of ``capacity``) per node just before."""

    workload: str
    node: str
    gpus: int
    free_before: Mapping[str, int]
    capacity: Mapping[str, int]

    def candidates(self) -> dict[str, int]:
        """Nodes that had room for the pod, with their free GPUs."""
        return {node: free for node, free in self.free_before.items() if free >= self.gpus}

    def best(self, strategy: str) -> set[str]:
        """The nodes ``strategy`` ranks first for this pod (ties: any of them)."""
        room = self.candidates()
        if not room:
            return set()
        if strategy == BINPACK:
            fewest = min(room.values())
            return {node for node, free in room.items() if free == fewest}
        if strategy == SPREAD:
            fraction = {node: free / self.capacity[node] for node, free in room.items()}
            most = max(fraction.values())
            return {node for node, share in fraction.items() if math.isclose(share, most)}
        raise ValueError(f"unknown placement strategy {strategy!r}")

    def describe(self) -> str:
        free = ", ".join(f"{node} {self.free_before[node]}/{self.capacity[node]}" for node in sorted(self.free_before))
        return f"{self.workload} on {self.node} (free before: {free})"


def placements_follow(strategy: str, steps: Sequence[PlacementStep]) -> Verdict:
    """Every step put its pod on a node ``strategy`` ranks first."""
    detector = f"placement-{strategy}"
    if not steps:
        return Verdict(detector, False, "no placement to judge")
    wrong = [s for s in steps if s.node not in s.best(strategy)]
    used = _used(steps)
    if not wrong:
        return Verdict(detector, True, f"all {len(steps)} pods placed on {RULES[strategy]} ({used})")
    shown = "; ".join(f"{s.describe()}, {strategy} picks {' or '.join(sorted(s.best(strategy)))}" for s in wrong[:3])
    return Verdict(
        detector, False, f"{len(wrong)} of {len(steps)} pods not placed on {RULES[strategy]}: {shown} ({used})"
    )


def expected_nodes_used(strategy: str, steps: Sequence[PlacementStep]) -> int | None:
    """How many nodes ``len(steps)`` pods of one GPU take under ``strategy`` when placement started on empty, alike
    nodes: binpack ⌈pods / GPUs per node⌉, spread min(pods, nodes). None when the start was not like that."""
    if not steps or any(s.gpus != 1 for s in steps):
        return None
    first = steps[0]
    sizes = set(first.capacity.values())
    if len(sizes) != 1 or dict(first.free_before) != dict(first.capacity):
        return None
    (per_node,) = sizes
    if strategy == BINPACK:
        return math.ceil(len(steps) / per_node)
    return min(len(steps), len(first.capacity))


def nodes_used_as_expected(strategy: str, steps: Sequence[PlacementStep], expected: int) -> Verdict:
    """The pods ended on ``expected`` distinct nodes."""
    nodes = {s.node for s in steps}
    text = f"{len(steps)} pods of 1 GPU on {len(nodes)} node(s) ({_used(steps)}); {strategy} on empty alike nodes "
    return Verdict(f"placement-nodes-{strategy}", len(nodes) == expected, text + f"takes {expected}")


def _used(steps: Sequence[PlacementStep]) -> str:
    counts: dict[str, int] = {}
    for step in steps:
        counts[step.node] = counts.get(step.node, 0) + 1
    return ", ".join(f"{node}×{n}" for node, n in sorted(counts.items()))
