"""Topology detectors: whether a gang's bound pods sit in one domain of a level, whether they use as few domains
as the cluster allows, and whether KAI's podgrouper carried the workload's constraint into the PodGroup.

Domains come from :class:`~suites.support.domains.Domains` as a map node → domain (``zone-a/rack-1``); a pod bound
to a node outside that map is outside the topology (KAI leaves nodes lacking a level's label out of its tree).
"""

from __future__ import annotations

from collections.abc import Mapping

from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.snapshot import Obj, Snapshot, name_of, node_of, node_summary

OUTSIDE = "outside the topology"


def _by_domain(pods: list[Obj], node_domains: Mapping[str, str]) -> dict[str, list[Obj]]:
    grouped: dict[str, list[Obj]] = {}
    for pod in pods:
        grouped.setdefault(node_domains.get(node_of(pod) or "", OUTSIDE), []).append(pod)
    return dict(sorted(grouped.items()))


def _placement(grouped: dict[str, list[Obj]]) -> str:
    return "; ".join(f"{domain}: {node_summary(pods)}" for domain, pods in grouped.items())


def one_domain(snap: Snapshot, node_domains: Mapping[str, str], level: str) -> Verdict:
    """Every bound pod of the gang is in one domain of ``level`` (required placement; KAI docs/topology)."""
    bound = snap.bound_pods
    if not bound:
        return Verdict("one-domain", False, f"no pod of {snap.what} is bound, so none is placed in a {level}")
    grouped = _by_domain(bound, node_domains)
    if len(grouped) == 1 and OUTSIDE not in grouped:
        return Verdict("one-domain", True, f"all {len(bound)} bound pods in one {level}: {_placement(grouped)}")
    return Verdict(
        "one-domain",
        False,
        f"the {len(bound)} bound pods of {snap.what} span {len(grouped)} {level} domains: {_placement(grouped)}",
    )


def packed(snap: Snapshot, node_domains: Mapping[str, str], level: str, fewest: int) -> Verdict:
    """The bound pods use no more domains of ``level`` than the fewest that hold the gang on the empty cluster
    (preferred placement: the scheduler fills domains of the preferred level before it falls back)."""
    bound = snap.bound_pods
    if not bound:
        return Verdict("packed", False, f"no pod of {snap.what} is bound, so none is packed")
    grouped = _by_domain(bound, node_domains)
    used = len(grouped)
    text = (
        f"{len(bound)} bound pods in {used} {level} domain(s) (fewest that hold them: {fewest}): {_placement(grouped)}"
    )
    return Verdict("packed", used <= fewest and OUTSIDE not in grouped, text)


def topology_constraint(snap: Snapshot, expected: Mapping[str, str], subgroup: str | None = None) -> Verdict:
    """The PodGroup (or, with ``subgroup``, that SubGroup of it) carries ``topologyConstraint`` = ``expected``:
    the workload's annotations reached KAI's scheduler (expectations.topology: TrainJob → root, replicatedJob
    template → leaf SubGroups)."""
    pg = one_podgroup(snap, "topology-constraint")
    if isinstance(pg, Verdict):
        return pg
    spec = pg.get("spec") or {}
    where = f"PodGroup {name_of(pg)}"
    holder: Obj | None = spec
    if subgroup is not None:
        holder = next((sg for sg in spec.get("subGroups") or [] if sg.get("name") == subgroup), None)
        where += f" SubGroup {subgroup}"
        if holder is None:
            names = ", ".join(sg.get("name", "?") for sg in spec.get("subGroups") or []) or "none"
            return Verdict("topology-constraint", False, f"{where} does not exist (SubGroups: {names})")
    actual = {k: v for k, v in ((holder or {}).get("topologyConstraint") or {}).items() if v}
    wanted = {k: v for k, v in expected.items() if v}
    if actual == wanted:
        return Verdict("topology-constraint", True, f"{where} topologyConstraint = {actual}")
    return Verdict("topology-constraint", False, f"{where} topologyConstraint = {actual or '{}'}, expected {wanted}")
