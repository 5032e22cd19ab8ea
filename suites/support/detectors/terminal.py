"""Detectors of states that must stay once reached or follow the TrainJob: a failed TrainJob stays failed and makes
no JobSet again, a gang that is bound stops being reported unschedulable, a JobSet follows its TrainJob's suspend.

* ``failed-stays-failed``: once a TrainJob's JobSet failed with no restarts left, the TrainJob keeps its ``Failed``
  condition and makes no new JobSet, however the failed one goes (its ``ttlSecondsAfterFinished``, or deleted by
  hand). A new JobSet (another uid) would start its restart budget again: the workload would run for ever.
* ``unschedulable-cleared``: once every pod of a gang is bound, its PodGroup carries no ``UnschedulableOnNodePool``
  condition that is True: tools that read the condition would call a running gang unschedulable.
* ``jobset-follows-suspend``: the JobSet's ``spec.suspend`` is the TrainJob's. Trainer passes a suspend or a resume
  on by applying the JobSet again; where JobSet's webhook refuses that apply (Trainer #3008, ``spec.replicatedJobs:
  field is immutable``) the JobSet never follows and its pods keep running, or never come back.
"""

from __future__ import annotations

from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import UNSCHEDULABLE_CONDITION
from kai_conformance.suites.support.expectations.lifecycle import TRAINJOB_FAILED
from kai_conformance.suites.support.snapshot import Obj, Snapshot, name_of, uid_of


def _condition(obj: Obj, kind: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _jobset_text(jobset: Obj) -> str:
    status = jobset.get("status") or {}
    created = (jobset.get("metadata") or {}).get("creationTimestamp", "?")
    return f"uid {uid_of(jobset)}, created {created}, status.restarts {status.get('restarts', 0)}"


def failed_stays_failed(snap: Snapshot, failed_jobset_uid: str) -> Verdict:
    """The TrainJob (snapshot narrowed to it, taken with owners) is still ``Failed`` and has no JobSet but the one
    that failed (uid ``failed_jobset_uid``), which may be gone."""
    detector = "failed-stays-failed"
    trainjob = snap.trainjobs[0] if snap.trainjobs else None
    if trainjob is None:
        return Verdict(detector, False, f"no TrainJob {snap.workload} in the snapshot")
    remade = [j for j in snap.jobsets if uid_of(j) != failed_jobset_uid]
    failed = _condition(trainjob, TRAINJOB_FAILED)
    problems = []
    if remade:
        problems.append(
            f"TrainJob {name_of(trainjob)} made its JobSet again after the failed one (uid {failed_jobset_uid}) went: "
            + "; ".join(_jobset_text(j) for j in remade)
            + ": its restart budget starts anew"
        )
    if failed is None or failed.get("status") != "True":
        problems.append(
            f"TrainJob {name_of(trainjob)} lost its {TRAINJOB_FAILED} condition"
            + (f" (now {failed.get('status')}: {failed.get('reason')})" if failed else " (removed)")
        )
    if problems:
        return Verdict(detector, False, "; ".join(problems))
    left = "its failed JobSet still there" if snap.jobsets else "no JobSet"
    return Verdict(
        detector, True, f"TrainJob {name_of(trainjob)} still {TRAINJOB_FAILED} ({(failed or {}).get('reason')}), {left}"
    )


def unschedulable_cleared(snap: Snapshot, size: int) -> Verdict:
    """Every one of the gang's ``size`` pods is bound and its PodGroup has no True ``UnschedulableOnNodePool``."""
    detector = "unschedulable-cleared"
    bound = len(snap.bound_pods)
    if bound < size:
        return Verdict(detector, False, f"{snap.what}: only {bound} of {size} pods bound; the gang is not running yet")
    podgroup = snap.podgroup
    if podgroup is None:
        return Verdict(detector, False, f"expected one PodGroup for {snap.what}, found {len(snap.podgroups)}")
    stale = [
        c
        for c in (podgroup.get("status") or {}).get("schedulingConditions") or []
        if c.get("type") == UNSCHEDULABLE_CONDITION and c.get("status") == "True"
    ]
    if stale:
        said = "; ".join(
            f"{c.get('reason')}: {c.get('message', '')} (since {c.get('lastTransitionTime', '?')})" for c in stale
        )
        return Verdict(
            detector,
            False,
            f"PodGroup {name_of(podgroup)} still says {UNSCHEDULABLE_CONDITION} while all {size} pods are bound: {said}",
        )
    return Verdict(detector, True, f"PodGroup {name_of(podgroup)}: no {UNSCHEDULABLE_CONDITION}, all {size} pods bound")


def unschedulable_said(snap: Snapshot) -> Verdict:
    """The precondition of ``unschedulable-cleared``: the PodGroup carries a True ``UnschedulableOnNodePool``."""
    podgroup = snap.podgroup
    if podgroup is None:
        return Verdict(
            "unschedulable-said", False, f"expected one PodGroup for {snap.what}, found {len(snap.podgroups)}"
        )
    said = [
        c
        for c in (podgroup.get("status") or {}).get("schedulingConditions") or []
        if c.get("type") == UNSCHEDULABLE_CONDITION and c.get("status") == "True"
    ]
    if not said:
        return Verdict(
            "unschedulable-said", False, f"PodGroup {name_of(podgroup)} has no {UNSCHEDULABLE_CONDITION} yet"
        )
    return Verdict("unschedulable-said", True, f"PodGroup {name_of(podgroup)}: {said[0].get('message', '')}")


def jobset_follows_suspend(snap: Snapshot) -> Verdict:
    """The TrainJob's ``spec.suspend`` has reached its JobSet (snapshot narrowed to it, taken with owners)."""
    detector = "jobset-follows-suspend"
    trainjob = snap.trainjobs[0] if snap.trainjobs else None
    if trainjob is None or not snap.jobsets:
        return Verdict(detector, False, f"no TrainJob or no JobSet {snap.workload} in the snapshot")
    wanted = bool((trainjob.get("spec") or {}).get("suspend"))
    has = bool((snap.jobsets[0].get("spec") or {}).get("suspend"))
    if wanted != has:
        return Verdict(
            detector,
            False,
            f"TrainJob {name_of(trainjob)} has spec.suspend {str(wanted).lower()} but its JobSet still "
            f"{str(has).lower()}: Trainer did not pass the {'suspend' if wanted else 'resume'} on (a JobSet webhook "
            "refusing Trainer's apply, Trainer #3008, leaves a TrainJobResourcesCreationFailed event on the TrainJob)",
        )
    return Verdict(detector, True, f"JobSet {snap.workload} spec.suspend {str(has).lower()}, as its TrainJob's")
