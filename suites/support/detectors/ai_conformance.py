"""Detectors of the Kubernetes AI Conformance cases (suites/test_ai_conformance.py) that no other area has: an
operator's controllers run, an admission webhook refuses an invalid object, and a TrainJob is reconciled into its
chain of children. Gang placement, completion and release reuse the gang and lifecycle detectors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kai_conformance.clusters.install.readiness import WebhookProbe, deployment_available
from kai_conformance.fixtures.waits import Observation
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.snapshot import Obj, Snapshot, labels_of, name_list, name_of, owner_refs, uid_of


def _selected(deployment: Obj, pods: Iterable[Obj]) -> list[Obj]:
    """The pods of the Deployment's namespace its ``spec.selector.matchLabels`` selects."""
    match: Mapping[str, str] = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    namespace = deployment["metadata"]["namespace"]
    return [p for p in pods if p["metadata"].get("namespace") == namespace and match
            and all(labels_of(p).get(k) == v for k, v in match.items())]  # fmt: skip


def _ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(statuses) and all(s.get("ready", True) for s in statuses)


def controllers_running(label: str, deployments: list[Obj], pods: list[Obj]) -> Verdict:
    """Every Deployment of the operator ``label`` is Available and has a Running pod whose containers are ready."""
    if not deployments:
        return Verdict("controllers-running", False, f"no Deployment of {label} found")
    problems, fine = [], []
    for deployment in deployments:
        ref = f"{deployment['metadata']['namespace']}/{name_of(deployment)}"
        available, why = deployment_available(deployment)
        running = [p for p in _selected(deployment, pods) if _ready(p)]
        if not available:
            problems.append(f"Deployment {ref} {why}")
        elif not running:
            problems.append(f"Deployment {ref} Available but no pod of it Running and ready")
        else:
            fine.append(f"{ref} ({name_list(running)})")
    if problems:
        return Verdict("controllers-running", False, f"{label}: " + "; ".join(problems))
    return Verdict("controllers-running", True, f"{label}: every controller Running: " + ", ".join(fine))


def webhook_rejects(probe: WebhookProbe, answer: Observation) -> Verdict:
    """The webhook refused the invalid object with upstream's message (``answer``: one dry-run, readiness.py)."""
    kind = probe.invalid["kind"]
    if answer.ok:
        return Verdict("webhook-rejects-invalid", True, f"{probe.webhook} refused an invalid {kind}: {answer.summary}")
    return Verdict(
        "webhook-rejects-invalid",
        False,
        f"{probe.webhook} must refuse an invalid {kind} ({probe.rejection!r}), but the API server {answer.summary}",
    )


def trainjob_reconciled(snap: Snapshot, trainjob: str, pods: int) -> Verdict:
    """The TrainJob's children exist, each owned by the one before: TrainJob → JobSet → Job(s) → ``pods`` pods."""
    part = snap.of(trainjob)
    owners = {uid_of(t) for t in part.trainjobs}
    jobsets = [j for j in part.jobsets if {r.get("uid") for r in owner_refs(j)} & owners]
    jobset_uids = {uid_of(j) for j in jobsets}
    jobs = [j for j in part.jobs if {r.get("uid") for r in owner_refs(j)} & jobset_uids]
    job_uids = {uid_of(j) for j in jobs}
    owned = [p for p in part.pods if {r.get("uid") for r in owner_refs(p)} & job_uids]
    chain = (f"TrainJob {trainjob} ({len(owners)}) → JobSet ({len(jobsets)}) → Job ({len(jobs)}) → pod "
             f"({len(owned)} of {pods})")  # fmt: skip
    ok = bool(owners) and bool(jobsets) and bool(jobs) and len(owned) >= pods
    return Verdict("trainjob-reconciled", ok, ("reconciled: " if ok else "not reconciled: ") + chain)
