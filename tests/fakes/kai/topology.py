"""Simulated topology-aware placement (KAI's podgrouper and ``topology`` plugin, reduced to what the suite observes).

* Podgrouper: the TrainJob's annotations, merged under the JobSet's (skip-top-owner), become the PodGroup's
  ``spec.topologyConstraint``; a replicatedJob template's become its leaf SubGroups' (SubGroup rows only)
  (suites/support/expectations/topology.py).
* Scheduler: a gang with a constraint naming a ``Topology`` is placed inside the tree built from the nodes' labels
  (a node lacking a level's label is outside it). Required at a level: the gang goes into one domain of that level,
  the fullest that holds it (KAI bin-packs domains), or nowhere, with KAI's ``topology …, requirement …
  couldn't be satisfied`` reason. Preferred: into one domain of that level when one holds it, else over the whole
  tree with the emptiest domains of that level filled first. A constraint naming a missing Topology places nothing
  (``Requested topology … does not exist``). Levels may be named by alias where the row allows it.

:class:`TopologyFaults` switches on misbehaviour for the flow self-tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.expectations.topology import CONSTRAINT_FIELDS, UNSATISFIED_MESSAGE, topology_row
from kai_conformance.suites.support.snapshot import gpus_of, labels_of
from tests.fakes.kai.scheduler import Kai
from tests.fakes.simulation import Faults, Obj


@dataclass
class TopologyFaults(Faults):
    #: The scheduler ignores topology constraints and deals the pods out over the racks one by one.
    scheduler_ignores_topology: bool = False
    #: The podgrouper writes no topologyConstraint.
    podgrouper_drops_topology: bool = False


def constraint_from(annotations: dict[str, str]) -> dict[str, str]:
    """The ``topologyConstraint`` KAI writes for these annotations, without empty fields; a SubGroup gets one only
    when the topology and a placement are named (jobset_grouper.go singleReplicaSubGroupTopology)."""
    constraint = {field: annotations[key] for key, field in CONSTRAINT_FIELDS.items() if annotations.get(key)}
    return constraint if "topology" in constraint and len(constraint) > 1 else {}


class KaiTopology(Kai):
    # ----------------------------------------------------------------------------------------------- podgrouper
    def _decorate_podgroup(self, pg: Obj, jobset: Obj, top_annotations: dict[str, str]) -> Obj:
        pg = super()._decorate_podgroup(pg, jobset, top_annotations)
        if getattr(self.faults, "podgrouper_drops_topology", False):
            return pg
        pg["spec"]["topologyConstraint"] = constraint_from(top_annotations)
        if topology_row(self.kai_version).subgroup_constraint:
            for rjob in jobset["spec"]["replicatedJobs"]:
                leaf = constraint_from((rjob["template"].get("metadata") or {}).get("annotations") or {})
                for subgroup in pg["spec"].get("subGroups") or []:
                    if leaf and subgroup.get("parent") == rjob["name"]:
                        subgroup["topologyConstraint"] = leaf
        return pg

    # ------------------------------------------------------------------------------------------------ scheduler
    def _constraint_of(self, pg: Obj, pods: list[Obj]) -> dict[str, str]:
        """The root constraint, else the leaf SubGroup constraint of the pods' SubGroup."""
        root = pg["spec"].get("topologyConstraint") or {}
        if root.get("topology"):
            return root
        names = {labels_of(p).get("kai.scheduler/subgroup-name") for p in pods}
        for subgroup in pg["spec"].get("subGroups") or []:
            if subgroup.get("name") in names and (subgroup.get("topologyConstraint") or {}).get("topology"):
                return subgroup["topologyConstraint"]
        return {}

    def _tree(self, topology: Obj) -> tuple[list[str], dict[str, str]]:
        """(level labels top first, alias → label) of a Topology."""
        levels = topology["spec"]["levels"]
        aliases = {lv["alias"]: lv["nodeLabel"] for lv in levels if lv.get("alias")}
        if not topology_row(self.kai_version).level_aliases:
            aliases = {}
        return [lv["nodeLabel"] for lv in levels], aliases

    def _domains(self, levels: list[str], level: str) -> dict[str, list[str]]:
        """Domain (label values down to ``level``) → node names, over the nodes carrying every level."""
        depth = levels.index(level) + 1
        found: dict[str, list[str]] = {}
        for node in self.layout.nodes:
            if all(node.labels.get(lv) for lv in levels):
                found.setdefault("/".join(node.labels[lv] for lv in levels[:depth]), []).append(node.name)
        return found

    def _place_group(self, pg: Obj, pods: list[Obj], free: dict[str, int], whole: bool) -> dict[str, str] | None:
        constraint = self._constraint_of(pg, pods)
        if not constraint:
            return super()._place_group(pg, pods, free, whole)
        topology = self._find(kinds.TOPOLOGY, constraint["topology"], None)
        if getattr(self.faults, "scheduler_ignores_topology", False):
            return self._deal_out(pods, free, topology)
        if topology is None:
            return None
        levels, aliases = self._tree(topology)
        required = aliases.get(constraint.get("requiredTopologyLevel", ""), constraint.get("requiredTopologyLevel"))
        preferred = aliases.get(constraint.get("preferredTopologyLevel", ""), constraint.get("preferredTopologyLevel"))
        if (required and required not in levels) or (preferred and preferred not in levels):
            return None
        level = required or preferred
        domains = self._domains(levels, level)  # type: ignore[arg-type]
        # KAI bin-packs domains: the fullest (least free) that holds the gang first.
        for _, nodes in sorted(domains.items(), key=lambda d: (sum(free[n] for n in d[1]), d[0])):
            placed = self._place(pods, {n: free[n] for n in nodes}, whole=True)
            if placed:
                return placed
        if required:
            return None
        # Preferred only: over the whole tree, the domains of the preferred level with most room first.
        order = [n for _, nodes in sorted(domains.items(), key=lambda d: (-sum(free[n] for n in d[1]), d[0]))
                 for n in nodes]  # fmt: skip
        return self._first_fit(pods, order, free)

    def _first_fit(self, pods: list[Obj], order: list[str], free: dict[str, int]) -> dict[str, str] | None:
        left, placed = dict(free), {}
        for pod in pods:
            node = next((n for n in order if left[n] >= gpus_of(pod)), None)
            if node is None:
                return None
            left[node] -= gpus_of(pod)
            placed[pod["metadata"]["name"]] = node
        return placed

    def _deal_out(self, pods: list[Obj], free: dict[str, int], topology: Obj | None) -> dict[str, str] | None:
        """The fault: pods dealt out over the lowest level's domains in turn, the constraint ignored."""
        if topology is None:
            return self._place(pods, free, whole=True)
        levels, _ = self._tree(topology)
        columns = list(self._domains(levels, levels[-1]).values())
        order = [n for row in range(max(len(c) for c in columns)) for c in columns if row < len(c) for n in [c[row]]]
        return self._first_fit(pods, order, free)

    def _unplaceable(self, pg: Obj, waiting: list[Obj]) -> tuple[str, str]:
        constraint = self._constraint_of(pg, waiting)
        if not constraint:
            return super()._unplaceable(pg, waiting)
        job = f"job <{pg['metadata']['namespace']}/{pg['metadata']['name']}>"
        if self._find(kinds.TOPOLOGY, constraint["topology"], None) is None:
            return "PodSchedulingErrors", f"Requested topology {constraint['topology']} does not exist"
        level = constraint.get("requiredTopologyLevel", "")
        unsatisfied = UNSATISFIED_MESSAGE.format(topology=constraint["topology"], level=level)
        return "PodSchedulingErrors", f"{unsatisfied} for {job}"
