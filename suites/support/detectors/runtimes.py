"""Runtime detectors: the pods of named replicatedJobs bound (a shipped runtime creates some only later)."""

from __future__ import annotations

from collections.abc import Mapping

from kai_conformance.suites.support.detectors.gang import gang_fully_bound
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.snapshot import Snapshot, labels_of

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def replicated_jobs_bound(snap: Snapshot, wanted: Mapping[str, int]) -> Verdict:
    """Every replicatedJob of ``wanted`` (name → pods) has that many live pods, all bound."""
    short = []
    for name, pods in wanted.items():
        live = [p for p in snap.live_pods if labels_of(p).get(REPLICATED_JOB_LABEL) == name]
        bound = [p for p in snap.bound_pods if labels_of(p).get(REPLICATED_JOB_LABEL) == name]
        if len(bound) < pods:
            short.append(f"{name}: {len(bound)} of {pods} bound ({len(live)} exist)")
    described = ", ".join(f"{n} ({p} pods)" for n, p in wanted.items())
    if short:
        whole = gang_fully_bound(snap, sum(wanted.values())).explanation
        return Verdict("replicated-jobs-bound", False, "; ".join(short) + f"; the workload: {whole}")
    return Verdict("replicated-jobs-bound", True, f"all pods of {described} bound")
