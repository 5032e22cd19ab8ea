"""Builders for what the cases create: TrainJobs, per-case runtimes and per-case queues.

Everything is a plain dict in API form. Run-wide objects (the suite's ClusterTrainingRuntimes, the parent queue)
come from :mod:`clusters.suite_stack`; the builders here add the per-case layer on top.

Sizes: workload pods request fake GPUs (``nvidia.com/gpu``) and only the tiny CPU/memory of
:data:`~clusters.suite_stack.WORKLOAD_REQUESTS`. Trainer v2.2 *replaces* the ``node`` container's resources with
``resourcesPerNode`` while v2.3 merges them (upstream-facts §A1), so a TrainJob always passes complete resources.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kai_conformance.clusters.layout import GPU_RESOURCE
from kai_conformance.clusters.suite_stack import (
    PARENT_QUEUE,
    RUNTIME,
    WORKLOAD_REQUESTS,
    queue,
    replicated_job,
    training_runtime,
)
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.expectations import (
    MIN_MEMBER_ANNOTATION,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    expectations_for,
)

#: ``spec.runtimePatches[].manager`` must be a domain-prefixed path (upstream-facts §A5).
PATCH_MANAGER = "kai-conformance.io/suites"
TRAINER_API_GROUP = "trainer.kubeflow.org"
CLUSTER_RUNTIME_KIND = kinds.CLUSTER_TRAINING_RUNTIME.kind
NAMESPACED_RUNTIME_KIND = kinds.TRAINING_RUNTIME.kind
#: Queue quota/limit meaning "no guarantee / no limit" in KAI (KAI §2.2).
UNLIMITED = -1

Metadata = dict[str, dict[str, str]]


def gpu_resources(gpus: int) -> dict[str, dict[str, str]]:
    """Complete container resources: tiny CPU/memory plus ``gpus`` fake GPUs (extended resources: request = limit)."""
    requests = dict(WORKLOAD_REQUESTS)
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU_RESOURCE] = str(gpus)
        limits[GPU_RESOURCE] = str(gpus)
    return {"requests": requests, **({"limits": limits} if limits else {})}


def queue_name(namespace: str, role: str) -> str:
    """A cluster-unique queue name for one case: ``kcq-<hash of the namespace>-<role>`` (a valid label value)."""
    digest = hashlib.sha1(namespace.encode()).hexdigest()[:8]
    return f"kcq-{digest}-{role}"[:63].rstrip("-")


def case_queue(
    ctx: RenderContext,
    role: str,
    *,
    gpu_quota: float,
    gpu_limit: float = UNLIMITED,
    parent: str | None = PARENT_QUEUE,
) -> dict[str, Any]:
    """A queue of this case. Only GPUs are constrained: CPU and memory stay unlimited so they never decide.

    ``displayName`` is what KAI prints in its messages (``queue_info.go`` uses it when set), so it names the case.
    """
    resources = {
        "gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": 1},
        "cpu": {"quota": UNLIMITED, "limit": UNLIMITED, "overQuotaWeight": 1},
        "memory": {"quota": UNLIMITED, "limit": UNLIMITED, "overQuotaWeight": 1},
    }
    obj = queue(queue_name(ctx.namespace, role), parent=parent, resources=resources)
    obj["spec"]["displayName"] = f"{ctx.namespace}/{role}"
    return obj


def metadata(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Metadata:
    return {k: dict(v) for k, v in (("labels", labels), ("annotations", annotations)) if v}


def train_job(
    name: str,
    *,
    num_nodes: int,
    gpus: int,
    runtime: str = RUNTIME,
    runtime_kind: str = CLUSTER_RUNTIME_KIND,
    queue: str | None = None,
    priority_class: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    runtime_patches: list[dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A TrainJob of ``num_nodes`` pods with ``gpus`` GPUs each.

    ``queue`` and ``priority_class`` become the TrainJob labels KAI reads through its skip-top-owner grouper;
    Trainer itself copies no TrainJob label anywhere (trainer-jobset §3.5). ``runtimeRef.kind`` is always explicit.
    ``env`` goes to ``spec.trainer.env``, which Trainer v2.2 and v2.3 put into the ``node`` container (e.g. the
    workload's lifetime: :func:`clusters.suite_stack.lifetime_env`).
    """
    all_labels = dict(labels or {})
    if queue:
        all_labels[QUEUE_LABEL] = queue
    if priority_class:
        all_labels[PRIORITY_LABEL] = priority_class
    meta: dict[str, Any] = {"name": name, **metadata(all_labels, annotations)}
    spec: dict[str, Any] = {
        "runtimeRef": {"apiGroup": TRAINER_API_GROUP, "kind": runtime_kind, "name": runtime},
        "trainer": {"numNodes": num_nodes, "resourcesPerNode": gpu_resources(gpus)},
    }
    if env:
        spec["trainer"]["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if runtime_patches:
        spec["runtimePatches"] = runtime_patches
    return {"apiVersion": kinds.TRAIN_JOB.api_version, "kind": kinds.TRAIN_JOB.kind, "metadata": meta, "spec": spec}


def case_train_job(
    ctx: RenderContext, name: str, pods: int, gpus: int, queue_role: str, **kwargs: Any
) -> dict[str, Any]:
    """A TrainJob routed to this case's queue ``queue_role`` that forms one gang under the version's KAI."""
    gang = expectations_for(ctx.combination).kai.gang_annotations(pods)
    annotations = {**gang, **kwargs.pop("annotations", {})}
    return train_job(
        name,
        num_nodes=pods,
        gpus=gpus,
        queue=queue_name(ctx.namespace, queue_role),
        annotations=annotations or None,
        **kwargs,
    )


def runtime_patch(
    *,
    jobset: Metadata | None = None,
    job: Metadata | None = None,
    pod: Metadata | None = None,
    replicated_job_name: str = "node",
) -> dict[str, Any]:
    """One ``spec.runtimePatches`` entry: metadata for the JobSet, one replicatedJob's Jobs and its pods."""
    template: dict[str, Any] = {}
    if jobset:
        template["metadata"] = jobset
    if job or pod:
        rjob: dict[str, Any] = {"name": replicated_job_name}
        job_template: dict[str, Any] = {}
        if job:
            job_template["metadata"] = job
        if pod:
            job_template["spec"] = {"template": {"metadata": pod}}
        rjob["template"] = job_template
        template["spec"] = {"replicatedJobs": [rjob]}
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": template}}


def case_runtime(
    ctx: RenderContext,
    name: str,
    *,
    jobset: Metadata | None = None,
    job: Metadata | None = None,
    pod: Metadata | None = None,
    replicated_jobs: list[dict[str, Any]] | None = None,
    failure_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A namespaced TrainingRuntime for one case: the suite's torch runtime plus the given metadata (and JobSet
    ``failure_policy``).

    TrainJobs reference it with ``runtime_kind=NAMESPACED_RUNTIME_KIND`` (Trainer looks it up in the TrainJob's
    namespace, upstream-facts §A4).
    """
    jobs = replicated_jobs or [
        replicated_job(
            "node",
            ctx.workload_image,
            job_labels=(job or {}).get("labels"),
            job_annotations=(job or {}).get("annotations"),
            pod_labels=(pod or {}).get("labels"),
            pod_annotations=(pod or {}).get("annotations"),
        )
    ]
    return training_runtime(
        name,
        ctx.workload_image,
        namespace=ctx.namespace,
        replicated_jobs=jobs,
        jobset_labels=(jobset or {}).get("labels"),
        jobset_annotations=(jobset or {}).get("annotations"),
        failure_policy=failure_policy,
    )


def floored_replicated_job(ctx: RenderContext, name: str, pods: int, floor: int) -> dict[str, Any]:
    """A replicatedJob of the runtime's own (Trainer does not size it) of ``pods`` pods without GPUs, whose leaf
    SubGroup ``<name>-replica-0`` must have ``floor`` pods bound before any is: ``kai.scheduler/batch-min-member`` on
    its template's metadata, where the v0.16+ podgrouper reads a leaf's ``minMember`` and takes a value above
    ``parallelism`` as it is, only logging it (``jobset_grouper.go`` ``singleReplicaSubGroupMinMember``, v0.16.8 =
    v0.17.0; upstream-facts §B10). Trainer v2.3.0 passes the runtime's replicatedJob templates to the JobSet with
    their metadata [inferred: the ``trainjob-ancestor-step`` label travels the same way]."""
    return replicated_job(
        name,
        ctx.workload_image,
        ancestor=None,
        container=name,
        parallelism=pods,
        job_annotations={MIN_MEMBER_ANNOTATION: str(floor)},
    )
