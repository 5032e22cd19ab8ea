"""Simulated KAI, how its scheduler reads a PodGroup's SubGroups (v0.16+): which gang is ready, and which pods one
scheduling attempt asks for. Facts: docs/research/upstream-facts.md §B10 ("Why the #1209 workaround cannot work" and
PR #2096), paths under pkg/scheduler/ at v0.17.0, byte-identical at v0.16.8:

* Readiness (the allocate action skips a PodGroup that is not ready): a leaf SubGroup (a PodSet) is ready with
  ``minMember`` live pods (ended pods count for nothing), a SubGroup with members (and the root) with
  ``minSubGroup`` ready members, or all of them where it states none. So under a root ``minSubGroup`` below the
  number of SubGroups a leaf below its floor does not keep the PodGroup back.
* The gang phase (a SubGroup fewer of whose members than its ``minSubGroup`` have reached their floors): tasks come
  only from its first ``minSubGroup`` members; a member at its floor gives none and a member without pods still
  takes its place. A leaf below its floor gives what its floor still needs: up to v0.17.0 the pods it has, however
  few (KAI PR #2096: "a PodSet below its admission floor currently returns every eligible task"); with the fix
  none when it has fewer.
* The elastic phase (its floor reached): the first member with a task gives it; a leaf at its floor one pod.
* Members are taken in the session's SubGroup order: by allocation ratio, equal for two SubGroups both below their
  floor, then by name; here by name always, which is the same while nothing is placed.

The scheduler (tests/fakes/kai/scheduler.py) judges every SubGroup PodGroup's readiness here. It asks for the pods this module
chooses only where a ``minSubGroup`` leaves SubGroups out (:attr:`SubGroup.leaves_some_out`), where which ones are
taken is KAI's choice; where every SubGroup is needed the choice is the whole tree's floor first, then one pod at a
time, which the area mixins' ``_to_allocate`` already give (``elastic``) and their faults change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from kai_conformance.suites.support.expectations import SUBGROUP_LABEL
from kai_conformance.suites.support.snapshot import labels_of, name_of
from tests.fakes.simulation import Obj

ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class SubGroup:
    """One SubGroup of a PodGroup (the root included): a leaf holds pods, the others hold members."""

    name: str
    #: A leaf's ``minMember``; the ``minSubGroup`` of one with members.
    floor: int
    members: tuple[SubGroup, ...] = ()
    #: A leaf's live pods, and how many of them are placed (bound, or with a BindRequest).
    alive: int = 0
    placed: int = 0
    #: A leaf's live pods not placed yet, by name.
    waiting: tuple[Obj, ...] = ()

    @property
    def leaf(self) -> bool:
        return not self.members

    @property
    def leaves_some_out(self) -> bool:
        """Does a ``minSubGroup`` here or below ask for fewer members than there are?"""
        return not self.leaf and (self.floor < len(self.members) or any(m.leaves_some_out for m in self.members))

    @property
    def ready(self) -> bool:
        if self.leaf:
            return self.alive >= self.floor
        return sum(m.ready for m in self.members) >= self.floor

    @property
    def satisfied(self) -> bool:
        if self.leaf:
            return self.placed >= self.floor
        return sum(m.satisfied for m in self.members) >= self.floor

    def tasks(self, *, enforce_floor: bool) -> list[Obj]:
        """The pods one scheduling attempt asks for, all or nothing (module docstring)."""
        if self.leaf:
            return self._leaf_tasks(enforce_floor)
        ordered = sorted(self.members, key=lambda m: m.name)
        if not self.satisfied:
            return [t for m in ordered[: self.floor] if not m.satisfied for t in m.tasks(enforce_floor=enforce_floor)]
        return next((found for m in ordered if (found := m.tasks(enforce_floor=enforce_floor))), [])

    def _leaf_tasks(self, enforce_floor: bool) -> list[Obj]:
        if self.placed >= self.floor:
            return list(self.waiting[:1])
        needed = self.floor - self.placed
        if enforce_floor and len(self.waiting) < needed:
            return []
        return list(self.waiting[:needed])


def subgroup_tree(pg: Obj, members: list[Obj], placed: Callable[[Obj], bool]) -> SubGroup | None:
    """The root of ``pg``'s SubGroups over its pods ``members`` (each in the leaf its ``kai.scheduler/subgroup-name``
    label names), or None for a flat PodGroup."""
    spec = pg.get("spec") or {}
    subgroups = spec.get("subGroups") or []
    if not subgroups:
        return None
    under: dict[str | None, list[Obj]] = defaultdict(list)
    for subgroup in subgroups:
        under[subgroup.get("parent")].append(subgroup)
    pods: dict[str, list[Obj]] = defaultdict(list)
    for pod in members:
        if (pod.get("status") or {}).get("phase") not in ENDED:
            pods[labels_of(pod).get(SUBGROUP_LABEL, "")].append(pod)

    def build(subgroup: Obj) -> SubGroup:
        below = under.get(subgroup["name"])
        if below:
            return SubGroup(subgroup["name"], subgroup.get("minSubGroup", len(below)), tuple(map(build, below)))
        mine = sorted(pods.get(subgroup["name"], []), key=name_of)
        waiting = tuple(p for p in mine if not placed(p))
        return SubGroup(
            subgroup["name"], subgroup.get("minMember", 1), (), len(mine), len(mine) - len(waiting), waiting
        )

    top = under.get(None, [])
    return SubGroup("", spec.get("minSubGroup", len(top)), tuple(map(build, top)))
