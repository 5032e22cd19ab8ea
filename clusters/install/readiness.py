"""Is a component ready? Its Deployments are Available and its admission webhook actually serves.

A successful dry-run proves nothing (with no webhook registered yet, the API server admits the object without
asking anyone), so each webhook is proven by a *negative* dry-run: an object the webhook must reject, with the
webhook's own message (docs/research/upstream-facts.md §B7). Only the symptoms of a webhook that is not serving
*yet* are retried until the ``webhook`` budget runs out: the object is admitted (KAI's operator registers the
queue webhook asynchronously), or the API server cannot call the webhook (Trainer right after install,
kubernetes-sigs/kueue#11985; JobSet at start-up, kubernetes-sigs/jobset#891, #430). Any other answer fails at once.
Every wait and its result is reported through :mod:`fixtures.progress`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.kube.kinds import Kind
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually

PROBE_NAME = "kai-conformance-readiness-probe"
#: Where namespaced probe objects are dry-run (every cluster has it; nothing is stored).
PROBE_NAMESPACE = "default"


def deployment_available(deployment: dict[str, Any] | None) -> tuple[bool, str]:
    """Whether a Deployment has rolled out and is Available, and if not, why (for progress lines)."""
    if deployment is None:
        return False, "not created yet"
    meta, status = deployment["metadata"], deployment.get("status", {})
    if status.get("observedGeneration", 0) < meta.get("generation", 0):
        return False, "rollout not observed yet"
    for condition in status.get("conditions", []):
        if condition.get("type") == "Available":
            if condition.get("status") == "True":
                return True, "Available"
            return False, f"not Available ({condition.get('reason', '')}: {condition.get('message', '')})"
    return False, f"{status.get('readyReplicas', 0)}/{deployment.get('spec', {}).get('replicas', 1)} ready"


def rollout_incomplete(deployment: dict[str, Any]) -> str:
    """Why a Deployment has not finished rolling out its template ("" once it has): as ``kubectl rollout status``
    judges it, every replica updated and available and no old one left."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    replicas = spec.get("replicas", 1)
    if status.get("observedGeneration", 0) < deployment["metadata"].get("generation", 0):
        return "rollout not observed yet"
    updated, total, available = (status.get(k, 0) for k in ("updatedReplicas", "replicas", "availableReplicas"))
    if updated < replicas or total > updated or available < replicas:
        return f"rolling out ({updated} of {replicas} updated, {available} available, {total - updated} old)"
    return ""


def wait_deployments(kube: KubeApi, refs: list[tuple[str, str]], timeouts: TimeoutPolicy, component: str) -> float:
    """Wait until every Deployment (namespace, name) exists and is Available; returns the seconds waited."""
    names = ", ".join(f"{ns}/{name}" for ns, name in refs)
    started = time.monotonic()

    def probe() -> Observation:
        states = {f"{ns}/{name}": deployment_available(kube.find(kinds.DEPLOYMENT, name, ns)) for ns, name in refs}
        pending = [f"{ref} {why}" for ref, (ok, why) in states.items() if not ok]
        return Observation(not pending, "; ".join(pending) or "all Available")

    progress.report(f"{component}: waiting for Deployments to be Available: {names}")
    eventually(probe, what=f"{component} Deployments to be Available", timeout=timeouts("ready"),
               failure=errors.WaitTimeout,
               fix=f"look at the pods and events of {component} (`kubectl get pods,events -n {refs[0][0]}`); "
               "image pulls on a slow network may need --timeout-scale 2")  # fmt: skip
    elapsed = time.monotonic() - started
    progress.report(f"{component}: Deployments Available after {elapsed:.1f}s")
    return elapsed


@dataclass(frozen=True)
class WebhookProbe:
    component: str
    webhook: str  # the webhook configuration that must answer
    invalid: dict[str, Any]  # an object that webhook must reject
    rejection: str  # a fragment of its rejection message (upstream source)
    hint: str  # where to look when it never serves


def webhook_answer(kube: KubeApi, probe: WebhookProbe) -> Observation:
    """One dry-run of the invalid object: rejected as upstream rejects it (ok), or admitted, or the webhook not
    serving (not ok, the summary says which); any other answer fails at once, naming the fix."""
    kind = probe.invalid["kind"]
    try:
        kube.create(probe.invalid, dry_run=True)
    except errors.KindNotServed as exc:
        raise errors.InfrastructureError(
            f"{probe.component} is not installed: the API server does not serve {kind} ({exc.message}); its "
            "CRD is missing. fix: install it (without --install never; on an existing cluster with --install always) "
            "or check the install output above"
        ) from exc
    except errors.KubeError as exc:
        if probe.rejection in exc.message:
            return Observation(True, f"rejected as expected: {exc.message}")
        if isinstance(exc, (errors.ServerError, errors.Unreachable)) or "failed calling webhook" in exc.message:
            return Observation(False, f"webhook not serving yet: {exc.message}")
        raise errors.InfrastructureError(
            f"{probe.component}: a dry-run of an invalid {kind} was answered {exc}, but the webhook "
            f"{probe.webhook} rejects it with {probe.rejection!r}. fix: {probe.hint}"
        ) from exc
    return Observation(False, f"an invalid {kind} was admitted: webhook {probe.webhook} is not registered yet")


def webhook_serves(kube: KubeApi, probe: WebhookProbe, timeouts: TimeoutPolicy) -> str:
    """Dry-run the invalid object until the webhook rejects it as upstream does; returns the rejection."""
    what = f"{probe.component} webhook {probe.webhook} to reject an invalid {probe.invalid['kind']}"
    progress.report(f"waiting for {what}")
    started = time.monotonic()
    result = eventually(lambda: webhook_answer(kube, probe), what=what, timeout=timeouts("webhook"),
                        failure=errors.WaitTimeout, fix=probe.hint)  # fmt: skip
    progress.report(f"{probe.component}: webhook {probe.webhook} serves ({time.monotonic() - started:.1f}s)")
    return result.summary


def _invalid(kind: Kind, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": PROBE_NAME, "namespace": PROBE_NAMESPACE} if kind.namespaced else {"name": PROBE_NAME}
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec}


def queue_probe() -> WebhookProbe:
    return WebhookProbe(
        component="KAI Scheduler",
        webhook="kai-queue-validation-v2",
        # No spec.resources: the CRD allows it, the queue webhook rejects it (queue_validator.go:19,39-44).
        invalid=_invalid(kinds.QUEUE, {}),
        rejection="resources must be specified",
        hint="check the queue-controller Deployment and `kubectl get validatingwebhookconfiguration "
        "kai-queue-validation-v2` in namespace kai-scheduler",
    )


def jobset_probe(image: str) -> WebhookProbe:
    job = {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": image}]}}}}
    first = {"name": "first", "replicas": 1, "dependsOn": [{"name": "first", "status": "Ready"}], "template": job}
    return WebhookProbe(
        component="JobSet",
        webhook="jobset-validating-webhook-configuration",
        # dependsOn on the first replicatedJob is schema-valid and refused by the webhook (jobset_webhook.go).
        invalid=_invalid(kinds.JOB_SET, {"replicatedJobs": [first]}),
        rejection="DependsOn can't be set for the first ReplicatedJob",
        hint="check the jobset-controller-manager Deployment and its logs (certificates are generated at start)",
    )


def trainer_probe() -> WebhookProbe:
    return WebhookProbe(
        component="Kubeflow Trainer",
        webhook="validator.trainer.kubeflow.org",
        # A runtime that does not exist: the TrainJob validator refuses it (clustertrainingruntime.go).
        invalid=_invalid(kinds.TRAIN_JOB, {"runtimeRef": {"name": f"{PROBE_NAME}-missing-runtime"}}),
        rejection="must be created before the TrainJob is created",
        hint="check the kubeflow-trainer-controller-manager Deployment and its logs in namespace kubeflow-system",
    )


def podgroup_probe() -> WebhookProbe:
    return WebhookProbe(
        component="KAI Scheduler",
        webhook="kai-podgroup-validation-v2alpha2",
        # Two SubGroups of one name: the CRD allows it (no list keys), the PodGroup webhook rejects it
        # (pkg/apis/scheduling/v2alpha2/podgroup_webhook.go validateSubGroups, the same at v0.16.8 and v0.17.0).
        invalid=_invalid(
            kinds.POD_GROUP, {"subGroups": [{"name": "twice", "minMember": 1}, {"name": "twice", "minMember": 1}]}
        ),
        rejection="duplicate subgroup name twice",
        hint="check the podgroup-controller Deployment and `kubectl get validatingwebhookconfiguration "
        "kai-podgroup-validation-v2alpha2` in namespace kai-scheduler",
    )
