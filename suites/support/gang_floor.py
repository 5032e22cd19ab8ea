"""The gang floor of a PodGroup: how many of a gang's pods KAI must place together before it binds any of them. When
a gang verdict fails, comparing that floor with the gang names the culprit, which is one object away from the pods.

KAI asks for a PodGroup's floor first and for the rest one pod at a time (``allocation_info.go``
``GetTasksToAllocate``, kai-scheduler.md §5), so a floor below the gang's size lets it bind part of the gang. The
floor is read from the PodGroup (:func:`podgroup_floor`):

* SubGroup rows (v0.16+): a leaf SubGroup ``<rjob>-replica-<i>`` needs its ``minMember`` pods, a parent SubGroup
  ``minSubGroup`` of its children, the PodGroup ``spec.minSubGroup`` of the parents;
* flat rows (v0.13–v0.15): ``spec.minMember``.

The podgrouper writes it from the chain (:func:`asked`; the lines at each tag are cited in expectations/elastic.py):

* v0.16, v0.17: a leaf's ``minMember`` is its replicatedJob template's ``kai.scheduler/batch-min-member``, else the
  Job's ``parallelism``; the root ``minSubGroup`` is the number of replicatedJobs (1 for ``InOrder``), capped by the
  JobSet's annotation (``computePodGroupMinSubGroup``);
* v0.14, v0.15: ``spec.minMember`` is the JobSet's ``kai.scheduler/batch-min-member`` (the TrainJob's, which
  skip-top-owner copies where the JobSet has none), else Σ replicas × min(parallelism, completions) (v0.14) or 1
  (v0.15, where the suite's gang TrainJobs carry the annotation: ``KaiRow.gang_annotations``);
* v0.13: Σ replicas × min(parallelism, completions); no annotation is read.

:func:`culprit` judges a workload whose chain reached its PodGroup: a floor below the gang (its pods, or an elastic
gang's minimum) is the podgrouper's fault when the chain asks for more than it wrote, the TrainJob's when the chain
itself asks for less; a floor that is right while part of the gang is bound is the scheduler's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kai_conformance.fixtures.kube import api_views
from kai_conformance.suites.support.components import PODGROUPER, SCHEDULER
from kai_conformance.suites.support.diagnosis.links import Finding
from kai_conformance.suites.support.expectations import (
    MIN_MEMBER_ANNOTATION,
    FlatMinMember,
    KaiRow,
    PodGroupShape,
)
from kai_conformance.suites.support.expectations.elastic import elastic_row
from kai_conformance.suites.support.snapshot import Obj, Snapshot, annotations_of, bind_finished, name_of

HEADING = "gang floor"
KEY = MIN_MEMBER_ANNOTATION


@dataclass(frozen=True)
class Floor:
    """``value`` pods KAI must place together, set by ``fields`` (``spec.minMember = 2``, one per leaf SubGroup)."""

    value: int
    fields: tuple[str, ...]

    @property
    def where(self) -> str:
        return ", ".join(self.fields)


@dataclass(frozen=True)
class Asked:
    """The floor the version's podgrouper makes of the chain: ``value``, where it reads it (``reads``) and what the
    chain carries there (``carries``)."""

    value: int
    reads: str
    carries: str


def podgroup_floor(pg: Obj) -> Floor | None:
    """The PodGroup's floor, or None when it sets none (a flat PodGroup without ``minMember``)."""
    spec = api_views.podgroup(pg).get("spec", {})
    groups = spec.get("subGroups") or []
    if groups:
        children: dict[str | None, list[Any]] = {}
        for group in groups:
            children.setdefault(group.get("parent"), []).append(group)

        def need(group: Any) -> int:
            kids = children.get(group.get("name"))
            if not kids:
                return int(group.get("minMember") or 0)
            return _smallest(sorted(need(k) for k in kids), group.get("minSubGroup"))

        leaves = [g for g in groups if not children.get(g.get("name"))]
        value = _smallest(sorted(need(g) for g in children.get(None, [])), spec.get("minSubGroup"))
        fields = [f"spec.subGroups[{g.get('name')}].minMember = {g.get('minMember', 'absent')}" for g in leaves]
        if spec.get("minSubGroup") is not None and spec["minSubGroup"] < len(children.get(None, [])):
            fields.append(f"spec.minSubGroup = {spec['minSubGroup']}")
        return Floor(value, tuple(fields))
    if spec.get("minMember") is None:
        return None
    return Floor(int(spec["minMember"]), (f"spec.minMember = {spec['minMember']}",))


def _smallest(floors: list[int], wanted: int | None) -> int:
    """What a group needs: its ``wanted`` (``minSubGroup``; all when absent) cheapest children."""
    return sum(floors if wanted is None else floors[:wanted])


def _spec_int(rjob: Obj, key: str) -> int | None:
    value = ((rjob.get("template") or {}).get("spec") or {}).get(key)
    return int(value) if value is not None else None


def _number(value: str | None) -> int | None:
    """An annotation's value as the podgrouper parses it (base-10 integer ≥ 1), or None."""
    try:
        parsed = int(value) if value is not None else None
    except ValueError:
        return None
    return parsed if parsed is not None and parsed >= 1 else None


def asked(snap: Snapshot, row: KaiRow) -> Asked | None:
    """The floor ``row``'s podgrouper makes of the workload's JobSet (and TrainJob), or None without a JobSet."""
    if not snap.jobsets:
        return None
    jobset, trainjob = snap.jobsets[0], (snap.trainjobs[0] if snap.trainjobs else {"metadata": {}})
    rjobs = (jobset.get("spec") or {}).get("replicatedJobs") or []
    own, inherited = annotations_of(jobset).get(KEY), annotations_of(trainjob).get(KEY)
    top = own if own is not None else inherited  # skip-top-owner: the JobSet's key wins (upstream-facts.md B1)
    citation = elastic_row(row.minor).citation
    if row.podgroup_shape is PodGroupShape.SUBGROUPS:
        needs, said = [], []
        for rjob in rjobs:
            parallelism = _spec_int(rjob, "parallelism") or 1
            value = annotations_of(rjob.get("template") or {}).get(KEY)
            leaf = _number(value) or parallelism
            needs.append(leaf * int(rjob.get("replicas", 1)))
            said.append(
                f"replicatedJob {rjob.get('name')}: "
                + (f"{KEY}={value}" if value else f"parallelism {parallelism}, no {KEY}")
            )
        ordered = ((jobset.get("spec") or {}).get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
        root = 1 if ordered else len(rjobs)
        cap = _number(top)
        if cap is not None:  # the JobSet's annotation only caps the root (computePodGroupMinSubGroup)
            root = min(cap, len(rjobs))
        reads = (
            f"{row.name} sets each leaf SubGroup's minMember from its replicatedJob template's annotation {KEY}, "
            f"else the Job's parallelism ({citation})"
        )
        return Asked(_smallest(sorted(needs), root), reads, "; ".join(said))
    sizes = [
        f"replicatedJob {r.get('name')}: replicas {r.get('replicas', 1)}, parallelism {_spec_int(r, 'parallelism') or 1}"
        + (f", completions {_spec_int(r, 'completions')}" if _spec_int(r, "completions") is not None else "")
        for r in rjobs
    ]
    summed = sum(
        int(r.get("replicas", 1)) * min(_spec_int(r, "parallelism") or 1, _spec_int(r, "completions") or 2**31)
        for r in rjobs
    )
    total = "Σ replicas × min(parallelism, completions) over the replicatedJobs"
    if not row.min_member_annotation:
        reads = f"{row.name} sets spec.minMember to {total} and reads no annotation ({citation})"
        return Asked(summed, reads, "; ".join(sizes))
    one = row.flat_min_member is FlatMinMember.ONE
    reads = (
        f"{row.name} sets spec.minMember from the JobSet's annotation {KEY} (the TrainJob's, which skip-top-owner "
        f"copies where the JobSet has none), else {'1' if one else total} ({citation})"
    )
    cap = _number(top)
    if cap is not None:
        return Asked(cap, reads, f"{'the JobSet' if own is not None else 'the TrainJob'} carries {KEY}={top}")
    if one:
        hint = (
            f"a gang of every pod needs it on {row.name} (the suite's gang TrainJobs carry it: KaiRow.gang_annotations)"
        )
        return Asked(1, reads, f"neither the JobSet nor the TrainJob carries {KEY}: {hint}")
    return Asked(summed, reads, f"neither the JobSet nor the TrainJob carries {KEY}; " + "; ".join(sizes))


def culprit(snap: Snapshot, size: int, row: KaiRow | None = None, minimum: int | None = None,
            bindrequests: Sequence[Obj] = ()) -> Finding | None:  # fmt: skip
    """Whose fault a partial gang is, from the workload's part of a snapshot (owners read): ``size`` pods, all placed
    together unless ``minimum`` (an elastic gang). None when the floor is right and the gang is not partial.
    ``bindrequests``: the namespace's, when the snapshot holds none (the diagnosis reads them apart)."""
    pg = snap.podgroup
    floor = podgroup_floor(pg) if pg is not None else None
    if pg is None or floor is None:
        return None
    gang = size if minimum is None else minimum
    what = f"the gang's {gang} pods" if minimum is None else f"the elastic gang's minimum of {gang} pods"
    bound, live = len(snap.bound_pods), len(snap.live_pods)
    sets = f"PodGroup {name_of(pg)} sets the gang's floor to {floor.value} ({floor.where})"
    if floor.value < gang:
        wanted = asked(snap, row) if row is not None else None
        if wanted is not None and floor.value >= wanted.value:
            return Finding(
                None,
                f"{sets}, below {what}, as the chain asks: {wanted.reads}, and {wanted.carries}",
                heading=HEADING,
            )
        placed = f"; {bound} of {live} pods are bound" if 0 < bound < live else ""
        reads = f": {wanted.reads}, and the chain asks for {wanted.value} ({wanted.carries})" if wanted else ""
        return Finding(
            PODGROUPER, f"{sets}, below {what}, so KAI may bind part of the gang{placed}{reads}", heading=HEADING
        )
    if 0 < bound < gang and not _rest_being_bound(snap, (*snap.bindrequests, *bindrequests)):
        return Finding(
            SCHEDULER,
            f"{sets}, which holds {what}, yet {bound} of {live} pods are bound: it placed part of a gang whose floor "
            "is right",
            heading=HEADING,
        )
    return None


def _rest_being_bound(snap: Snapshot, bindrequests: Sequence[Obj]) -> bool:
    """Every live pod not bound yet is named by a BindRequest the binder has not finished: the scheduler placed the
    whole gang, and the binder is what has not bound it (its link of the chain says so)."""
    pending = {(b.get("spec") or {}).get("podName") for b in bindrequests if not bind_finished(b)}
    bound = {name_of(p) for p in snap.bound_pods}
    return all(name_of(p) in pending for p in snap.live_pods if name_of(p) not in bound)
