"""Podgrouper detectors: the one PodGroup made for a JobSet (its owner, top-owner metadata and shape), the pods
grouped into it, the ownership chain the podgrouper walks and the access that walk needs, and garbage collection
once the owner is gone."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import yaml

from kai_conformance.fixtures import matching
from kai_conformance.fixtures.kube import AccessReview
from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.expectations import (
    JOBSET_API_VERSION,
    POD_GROUP_ANNOTATION,
    SUBGROUP_LABEL,
    TOP_OWNER_ANNOTATION,
)
from kai_conformance.suites.support.snapshot import (
    NAMED,
    Obj,
    Snapshot,
    annotations_of,
    labels_of,
    name_list,
    name_of,
    owner_refs,
    podgroup_name,
    uid_of,
)


def single_podgroup_owned_by_jobset(snap: Snapshot) -> Verdict:
    """Exactly one PodGroup, named ``pg-<jobset>-<jobset uid>``, whose only ownerReference is the JobSet."""
    if len(snap.jobsets) != 1:
        return Verdict("podgroup-owner", False, f"expected one JobSet, found {len(snap.jobsets)}")
    jobset = snap.jobsets[0]
    if len(snap.podgroups) != 1:
        names = ", ".join(name_of(g) for g in snap.podgroups) or "none"
        return Verdict("podgroup-owner", False, f"expected exactly one PodGroup, found {len(snap.podgroups)}: {names}")
    pg = snap.podgroups[0]
    problems = []
    if name_of(pg) != podgroup_name(jobset):
        problems.append(f"named {name_of(pg)}, expected {podgroup_name(jobset)}")
    refs = owner_refs(pg)
    wanted = {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "name": name_of(jobset), "uid": uid_of(jobset)}
    if len(refs) != 1 or matching.mismatches(wanted, refs[0]):
        shown = ", ".join(f"{r.get('kind')}/{r.get('name')} uid {r.get('uid')}" for r in refs) or "none"
        problems.append(f"ownerReferences [{shown}], expected exactly JobSet/{name_of(jobset)} uid {uid_of(jobset)}")
    if problems:
        return Verdict("podgroup-owner", False, f"PodGroup {name_of(pg)}: " + "; ".join(problems))
    return Verdict(
        "podgroup-owner", True, f"one PodGroup {name_of(pg)}, owned only by JobSet {name_of(jobset)} ({uid_of(jobset)})"
    )


def top_owner_is_jobset(snap: Snapshot) -> Verdict:
    """The PodGroup's ``kai.scheduler/top-owner-metadata`` (a YAML document, B2) describes the JobSet."""
    pg = one_podgroup(snap, "top-owner")
    if isinstance(pg, Verdict):
        return pg
    if len(snap.jobsets) != 1:
        return Verdict("top-owner", False, f"expected one JobSet, found {len(snap.jobsets)}")
    jobset = snap.jobsets[0]
    text = annotations_of(pg).get(TOP_OWNER_ANNOTATION)
    if text is None:
        return Verdict("top-owner", False, f"PodGroup {name_of(pg)} has no {TOP_OWNER_ANNOTATION} annotation")
    try:
        described = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return Verdict("top-owner", False, f"{TOP_OWNER_ANNOTATION} is not YAML: {exc}")
    group, version = JOBSET_API_VERSION.split("/")
    wanted = {"name": name_of(jobset), "uid": uid_of(jobset), "group": group, "version": version, "kind": "JobSet"}
    found = matching.mismatches(wanted, described if isinstance(described, dict) else {})
    if found:
        return Verdict("top-owner", False, f"{TOP_OWNER_ANNOTATION} of {name_of(pg)}: " + "; ".join(map(str, found)))
    return Verdict("top-owner", True, f"PodGroup {name_of(pg)} names JobSet {name_of(jobset)} as its top owner")


def _owned_by(obj: Obj, kind: str, owners: Iterable[Obj]) -> bool:
    uids = {uid_of(o) for o in owners}
    return any(ref.get("kind") == kind and ref.get("uid") in uids for ref in owner_refs(obj))


def ownership_chain(snap: Snapshot) -> Verdict:
    """TrainJob → JobSet → Job → Pod, each link an ownerReference carrying the owner's uid."""
    if len(snap.trainjobs) != 1 or len(snap.jobsets) != 1:
        return Verdict(
            "ownership-chain", False, f"expected one TrainJob and one JobSet, found {len(snap.trainjobs)} and "
            f"{len(snap.jobsets)}"
        )  # fmt: skip
    trainjob, jobset = snap.trainjobs[0], snap.jobsets[0]
    breaks = []
    if not _owned_by(jobset, "TrainJob", [trainjob]):
        breaks.append(f"JobSet {name_of(jobset)} is not owned by TrainJob {name_of(trainjob)} ({uid_of(trainjob)})")
    if not snap.jobs:
        breaks.append("no Job")
    breaks += [
        f"Job {name_of(j)} is not owned by the JobSet" for j in snap.jobs if not _owned_by(j, "JobSet", [jobset])
    ]
    if not snap.pods:
        breaks.append("no pod")
    breaks += [
        f"pod {name_of(p)} is not owned by a Job of the JobSet" for p in snap.pods if not _owned_by(p, "Job", snap.jobs)
    ]
    if breaks:
        return Verdict("ownership-chain", False, "; ".join(breaks[: NAMED + 2]))
    return Verdict(
        "ownership-chain",
        True,
        f"TrainJob {name_of(trainjob)} → JobSet {name_of(jobset)} → {len(snap.jobs)} Job(s) → {len(snap.pods)} pod(s), "
        "each linked by uid",
    )


def podgroup_shape(snap: Snapshot, expected_spec: dict[str, Any], row: str) -> Verdict:
    """The PodGroup's spec matches what the expectation row predicts (partial match)."""
    pg = one_podgroup(snap, "podgroup-shape")
    if isinstance(pg, Verdict):
        return pg
    found = matching.mismatches(expected_spec, pg.get("spec") or {})
    if found:
        return Verdict(
            "podgroup-shape",
            False,
            f"PodGroup {name_of(pg)} differs from {row}: " + "; ".join(str(m) for m in found[: NAMED + 2]),
        )
    return Verdict("podgroup-shape", True, f"PodGroup {name_of(pg)} has the shape {row} predicts")


def pods_annotated(snap: Snapshot) -> Verdict:
    """KAI's podgrouper has annotated every live pod with its PodGroup's name (it has grouped them)."""
    pods = snap.live_pods
    done = [p for p in pods if POD_GROUP_ANNOTATION in annotations_of(p)]
    if pods and len(done) == len(pods):
        return Verdict("pods-annotated", True, f"all {len(pods)} pods carry {POD_GROUP_ANNOTATION}")
    missing = [p for p in pods if p not in done]
    return Verdict(
        "pods-annotated",
        False,
        f"{len(done)} of {len(pods)} pods carry {POD_GROUP_ANNOTATION}"
        + (f"; not: {name_list(missing)}" if missing else ""),
    )


def pods_grouped(snap: Snapshot, subgroup_for: Callable[[Obj], str | None]) -> Verdict:
    """Every pod is annotated with its PodGroup's name and labelled with its SubGroup (``None``: no label)."""
    pg = one_podgroup(snap, "pods-grouped")
    if isinstance(pg, Verdict):
        return pg
    if not snap.pods:
        return Verdict("pods-grouped", False, "no pod to check")
    wrong = []
    for pod in snap.live_pods:
        group = annotations_of(pod).get(POD_GROUP_ANNOTATION)
        subgroup, expected = labels_of(pod).get(SUBGROUP_LABEL), subgroup_for(pod)
        if group != name_of(pg):
            wrong.append(f"{name_of(pod)}: {POD_GROUP_ANNOTATION}={group!r}, expected {name_of(pg)!r}")
        if subgroup != expected:
            wrong.append(f"{name_of(pod)}: {SUBGROUP_LABEL}={subgroup!r}, expected {expected!r}")
    if wrong:
        return Verdict("pods-grouped", False, "; ".join(wrong[: NAMED + 2]))
    return Verdict("pods-grouped", True, f"all {len(snap.live_pods)} pods point at PodGroup {name_of(pg)}")


def collected(snap: Snapshot) -> Verdict:
    """Nothing of the workload is left: no JobSet, Job, pod or PodGroup (garbage collection is done)."""
    left = [
        f"{kind} {name_of(o)}"
        for kind, objs in (
            ("JobSet", snap.jobsets),
            ("Job", snap.jobs),
            ("Pod", snap.pods),
            ("PodGroup", snap.podgroups),
        )
        for o in objs
    ]
    if left:
        return Verdict("garbage-collected", False, f"{len(left)} object(s) left: {', '.join(left[: NAMED + 2])}")
    return Verdict("garbage-collected", True, "JobSet, Jobs, pods and PodGroup are gone")


def access_granted(user: str, answers: Sequence[tuple[str, str, AccessReview]]) -> Verdict:
    """Every (verb, resource) SubjectAccessReview answered allowed for ``user``."""
    denied = [f"{verb} {resource}" + (f" ({review.reason})" if review.reason else "") for verb, resource, review in answers
              if not review.allowed]  # fmt: skip
    if not answers:
        return Verdict("rbac", False, "no access review was made")
    if denied:
        return Verdict("rbac", False, f"{user} may not: {', '.join(denied)}")
    return Verdict("rbac", True, f"{user} may " + ", ".join(f"{verb} {resource}" for verb, resource, _ in answers))


#: What the API server said to one server-side dry-run create: the object, what it asked for, and the refusal's
#: message, or None where it was accepted (nothing stored either way).
DryRunAnswer = tuple[str, str, str | None]


def _answers_text(answers: Sequence[DryRunAnswer]) -> str:
    return "; ".join(
        f"PodGroup {name} ({asked}): " + (f"refused: {refusal}" if refusal is not None else "accepted (dry-run)")
        for name, asked, refusal in answers
    )


def no_gang_podgroup_accepted(answers: Sequence[DryRunAnswer]) -> Verdict:
    """The API server accepts a PodGroup asking for no gang (``minMember: 0``, ``minSubGroup: 0``); fires on any
    refusal, quoting it: where the CRD says ``minimum: 1`` (KAI #1944) no workload can opt out of the gang."""
    refused = [a for a in answers if a[2] is not None]
    if not answers:
        return Verdict("no-gang-podgroup-accepted", False, "no PodGroup was dry-run: nothing to judge")
    why = "the API server refuses a PodGroup without a gang: " if refused else ""
    return Verdict("no-gang-podgroup-accepted", not refused, why + _answers_text(answers))


def podgroup_floor_enforced(answer: DryRunAnswer) -> Verdict:
    """The API server refuses a PodGroup below every version's floor (``minMember: -1``): it judges PodGroups by the
    CRD at all, so an accepted ``minMember: 0`` means the CRD takes it, not that nothing was checked."""
    enforced = answer[2] is not None
    why = "" if enforced else "the API server validates no PodGroup bound (the CRD has no schema?): "
    return Verdict("podgroup-floor-enforced", enforced, why + _answers_text([answer]))
