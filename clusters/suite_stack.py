"""Run-wide objects the suite adds to every cluster: its training runtimes and its parent queue.

The runtimes are modelled on Trainer's ``torch-distributed`` (one ``node`` replicatedJob labelled as the
trainer ancestor step, a container named ``node``), with ``schedulerName: kai-scheduler`` in the pod template
(the way KAI's podgrouper picks pods up, since Trainer has no KAI plugin) and a tiny workload that stays Running
until it is evicted, and then ends ``Failed``, or, when a TrainJob's environment says so, ends on its own after a
stated time with a stated exit code (:data:`WORKLOAD_COMMAND`). A twin runtime without
``schedulerName`` lets control cases run the same workload under the default scheduler.

Tests create their own leaf queues under :data:`PARENT_QUEUE`, so their quotas never touch the cluster's.
"""

from __future__ import annotations

from typing import Any

from kai_conformance.clusters.topology import NODE_POOL_LABEL
from kai_conformance.fixtures.kube import kinds

KAI_SCHEDULER_NAME = "kai-scheduler"
RUNTIME = "kai-conformance-torch"
DEFAULT_SCHEDULER_RUNTIME = "kai-conformance-torch-default-scheduler"
PARENT_QUEUE = "kai-conformance"
TRAINER_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
#: Requests of every workload container besides GPUs: tiny, so a small kind cluster holds every case.
WORKLOAD_REQUESTS = {"cpu": "10m", "memory": "16Mi"}
#: Jobs of the suite's runtimes tolerate this many pod failures per index. KAI evicts a preempted or reclaimed pod by
#: deleting it, which the Job controller counts as a failure: past a limit the Job (and so the JobSet and TrainJob)
#: would fail instead of the victim returning to pending (kai-scheduler.md §6 "How victims are evicted"). A limit
#: *per index* (Indexed Jobs with restartPolicy Never, GA in Kubernetes 1.33) also keeps the re-creation delay per
#: index (10 s after a first eviction) instead of the Job-wide exponential delay, which a whole evicted gang would
#: push to its 6-minute cap.
WORKLOAD_BACKOFF_LIMIT_PER_INDEX = 1000

#: Exit code of the workload container when it is evicted: it traps SIGTERM and exits 128 + 15.
EVICTED_EXIT_CODE = 143
#: What every workload container runs (the image needs a POSIX ``sh`` and ``sleep``; see --workload-image).
#:
#: Why not ``pause`` with its own entrypoint: KAI evicts by deleting the pod, the kubelet sends SIGTERM, and pause
#: exits 0 on SIGTERM (build/pause/linux/pause.c ``sigdown``). With every container exited 0 the kubelet reports
#: the deleted pod ``Succeeded`` (pkg/kubelet/kubelet_pods.go ``getPhase``: a terminal pod whose containers all
#: succeeded), the Job controller counts its index as completed (pkg/controller/job/job_controller.go
#: ``trackJobStatusAndRemoveFinalizers``) and never recreates it: the victim would not return to pending.
#:
#: This command stays Running and exits non-zero at once on SIGTERM. The trap is needed because a container's
#: PID 1 gets no default signal action (pid_namespaces(7)): without a handler, SIGTERM is ignored and the runtime
#: SIGKILLs the container after the grace period (exit 137, also ``Failed``, but 2 s later). ``sleep 1 & wait``
#: rather than a foreground ``sleep``: POSIX sh runs a trap only after a foreground command ends, while ``wait`` is
#: interrupted by a trapped signal at once (POSIX XCU 2.11 "Signals and Error Handling").
#:
#: How long it runs and how it ends come from the container's environment, so that one image and one runtime serve
#: workloads that end (the lifecycle area) and workloads that never do (every other area; the default):
#:
#: * :data:`RUN_SECONDS_ENV` unset: runs until it is killed, as above.
#: * set: sleeps that many seconds, plus :data:`STAGGER_ENV` × its Job completion index (the Job controller puts the
#:   index into ``JOB_COMPLETION_INDEX`` of every container of an Indexed Job), then exits :data:`EXIT_CODE_ENV`
#:   (default 0; 0–255). With :data:`EXIT_INDEX_ENV` only the pod of that completion index ends; the others run on.
#:
#: SIGTERM still ends it at once, whatever it was doing: the one long ``sleep`` runs in the background and ``wait``
#: returns on the trapped signal. :func:`planned_end` states the same contract in Python (the simulated kubelet of
#: the self-tests follows it; tests/detectors/test_lifecycle.py runs this very command under ``sh``).
WORKLOAD_SCRIPT = (
    f"trap 'exit {EVICTED_EXIT_CODE}' TERM; "
    "i=${JOB_COMPLETION_INDEX:-0}; "
    'if [ -n "${KC_RUN_SECONDS:-}" ] && [ "${KC_EXIT_INDEX:-$i}" = "$i" ]; then '
    "sleep $((KC_RUN_SECONDS + i * ${KC_STAGGER_SECONDS:-0})) & wait $!; "
    'exit "${KC_EXIT_CODE:-0}"; '
    "fi; "
    "while true; do sleep 1 & wait $!; done"
)
WORKLOAD_COMMAND = ["sh", "-c", WORKLOAD_SCRIPT]
#: The environment variables the workload reads (set by a TrainJob's ``spec.trainer.env``, which Trainer v2.2 and
#: v2.3 upsert into the ``node`` container of the trainer replicatedJob: pkg/runtime/framework/plugins/jobset/
#: builder.go ``Trainer``, l. 160 at v2.2.0, l. 148 at v2.3.0; the torch plugin likewise, torch.go l. 120 / 141).
RUN_SECONDS_ENV = "KC_RUN_SECONDS"
EXIT_CODE_ENV = "KC_EXIT_CODE"
EXIT_INDEX_ENV = "KC_EXIT_INDEX"
STAGGER_ENV = "KC_STAGGER_SECONDS"
#: What the Job controller sets in every container of an Indexed Job (pkg/controller/job/indexed_job_utils.go
#: ``addCompletionIndexEnvVariable``: a fieldRef to the pod's completion-index label or annotation).
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
#: Seconds between SIGTERM and SIGKILL asked of the kubelet. 0 and 1 end the same way: the kubelet never gives a
#: container less than 2 s (pkg/kubelet/kuberuntime/kuberuntime_manager.go ``minimumGracePeriodInSeconds = 2``,
#: applied in kuberuntime_container.go ``killContainer``), and the workload exits within milliseconds of SIGTERM.
#: 0 also lets the API server drop a deleted pod that has no node or no finalizer at once
#: (pkg/registry/core/pod/strategy.go ``CheckGracefulDelete``), which keeps cleanup fast.
WORKLOAD_GRACE_SECONDS = 0


def planned_end(env: dict[str, str], index: int) -> tuple[float, int] | None:
    """When and how :data:`WORKLOAD_COMMAND` ends on its own: (seconds after it started, exit code), or None when it
    runs until it is killed. ``env`` is the container's environment, ``index`` its Job completion index. An empty
    variable counts as unset, as ``${VAR:-default}`` in the script does."""
    run = env.get(RUN_SECONDS_ENV)
    if not run or (env.get(EXIT_INDEX_ENV) or str(index)) != str(index):
        return None
    return float(int(run) + index * int(env.get(STAGGER_ENV) or 0)), int(env.get(EXIT_CODE_ENV) or 0) % 256


def lifetime_env(
    run_seconds: int, *, exit_code: int = 0, exit_index: int | None = None, stagger_seconds: int = 0
) -> dict[str, str]:
    """The environment that makes the workload end after ``run_seconds`` with ``exit_code`` (see
    :data:`WORKLOAD_COMMAND`): every pod, or only the pod of completion index ``exit_index``, pod ``i`` ``i`` ×
    ``stagger_seconds`` later than pod 0."""
    env = {RUN_SECONDS_ENV: str(run_seconds), EXIT_CODE_ENV: str(exit_code)}
    if exit_index is not None:
        env[EXIT_INDEX_ENV] = str(exit_index)
    if stagger_seconds:
        env[STAGGER_ENV] = str(stagger_seconds)
    return env


def unlimited_resources() -> dict[str, Any]:
    """Queue resources with no guarantee and no limit (KAI: quota -1 = unlimited, limit -1 = no limit)."""
    return {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "gpu", "memory")}


def queue(name: str, *, parent: str | None = None, resources: dict[str, Any] | None = None, **spec: Any) -> dict:
    body: dict[str, Any] = {"resources": resources or unlimited_resources(), **spec}
    if parent:
        body["parentQueue"] = parent
    return {
        "apiVersion": kinds.QUEUE.api_version,
        "kind": kinds.QUEUE.kind,
        "metadata": {"name": name},
        "spec": body,
    }


#: kwok's taint on fake nodes (clusters/kwok/fake_nodes.py): tolerated by every workload pod, always. A toleration of a taint no
#: node carries changes nothing on real clusters, and one pod spec for every run keeps rendered manifests and reports
#: the same with and without --fake-nodes.
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}
#: kube-controller-manager evicts the pods of a node NotReady for 300 s (the tolerationSeconds the DefaultTolerationSeconds
#: admission plugin gives every pod that has no such toleration of its own). On a loaded machine kwok renews a thousand
#: fake nodes' leases late: at 1,000 fake nodes on real kind it evicted 79 workload pods, and broke gangs KAI had
#: placed whole (docs/performance.md). What a node failure does to pods is kube-controller-manager's, not what the
#: suite judges, so its workload pods stay where KAI put them. Without a tolerationSeconds they tolerate it forever.
NODE_FAILURE_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
)


def closed_to_workloads(node: dict) -> str | None:
    """Why the suite's workload pods may not be placed on ``node`` now (``not Ready``, ``cordoned``, ``taint
    node.kubernetes.io/not-ready:NoSchedule``), or ``None`` when they may. Its pods tolerate kwok's taint and, once
    running, a node's failure (:data:`NODE_FAILURE_TOLERATIONS`), but not the NoSchedule taints the node lifecycle
    controller gives a node until it has seen it Ready, or again once its lease is late. A node that reports no Ready
    condition at all is not judged by it (the simulated clusters' nodes)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Ready" and c.get("status") != "True" for c in conditions):
        return "not Ready"
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return "cordoned"
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and taint.get("key") != KWOK_TOLERATION["key"]:
            return f"taint {taint.get('key')}:{taint.get('effect')}"
    return None


def pod_spec(
    image: str,
    *,
    scheduler_name: str | None = KAI_SCHEDULER_NAME,
    container: str = "node",
    restart_policy: str | None = None,
) -> dict:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": WORKLOAD_GRACE_SECONDS,
        "tolerations": [dict(KWOK_TOLERATION), *(dict(t) for t in NODE_FAILURE_TOLERATIONS)],
        "containers": [
            {
                "name": container,
                "image": image,
                "command": list(WORKLOAD_COMMAND),
                "imagePullPolicy": "IfNotPresent",
                "resources": {"requests": dict(WORKLOAD_REQUESTS)},
            }
        ],
    }
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    else:  # kube-scheduler knows no node pools: keep its pods off the slices, which their own KAI schedulers own
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": NODE_POOL_LABEL, "operator": "DoesNotExist"}]}],
        }}}  # fmt: skip
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def replicated_job(
    name: str,
    image: str,
    *,
    scheduler_name: str | None = KAI_SCHEDULER_NAME,
    ancestor: str | None = "trainer",
    replicas: int = 1,
    job_labels: dict[str, str] | None = None,
    job_annotations: dict[str, str] | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    parallelism: int | None = None,
    depends_on: list[dict[str, str]] | None = None,
    backoff_limit_per_index: int | None = WORKLOAD_BACKOFF_LIMIT_PER_INDEX,
    container: str = "node",
    backoff_limit: int | None = None,
) -> dict:
    """One replicatedJob of a runtime. ``ancestor="trainer"`` makes Trainer size it by ``numNodes``.

    ``backoff_limit`` (with ``backoff_limit_per_index=None``): the Job-wide limit instead, e.g. 0 for a Job that fails
    at its first failed pod (the lifecycle area's restarts; the Job controller then terminates the other pods)."""
    labels = dict(job_labels or {})
    if ancestor:
        labels[TRAINER_ANCESTOR_LABEL] = ancestor
    # A per-index backoff limit requires Indexed completion (JobSet's default, made explicit) and restartPolicy Never;
    # a Job-wide one gets the same, so that a failed container fails its pod instead of restarting in place (JobSet's
    # webhook would default restartPolicy to OnFailure).
    limited = backoff_limit_per_index is not None or backoff_limit is not None
    restart_policy = "Never" if limited else None
    job_spec: dict[str, Any] = {
        "template": {
            "spec": pod_spec(image, scheduler_name=scheduler_name, container=container, restart_policy=restart_policy)
        }
    }
    if limited:
        job_spec["completionMode"] = "Indexed"
    if backoff_limit_per_index is not None:
        job_spec["backoffLimitPerIndex"] = backoff_limit_per_index
    elif backoff_limit is not None:
        job_spec["backoffLimit"] = backoff_limit
    if pod_labels or pod_annotations:
        job_spec["template"]["metadata"] = {
            k: v for k, v in (("labels", pod_labels), ("annotations", pod_annotations)) if v
        }
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
        job_spec["completions"] = parallelism
    template: dict[str, Any] = {"spec": job_spec}
    if labels or job_annotations:
        template["metadata"] = {k: v for k, v in (("labels", labels), ("annotations", job_annotations)) if v}
    rjob: dict[str, Any] = {"name": name, "replicas": replicas, "template": template}
    if depends_on:
        rjob["dependsOn"] = depends_on
    return rjob


def training_runtime(
    name: str,
    image: str,
    *,
    namespace: str | None = None,
    scheduler_name: str | None = KAI_SCHEDULER_NAME,
    replicated_jobs: list[dict] | None = None,
    jobset_labels: dict[str, str] | None = None,
    jobset_annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    failure_policy: dict[str, Any] | None = None,
) -> dict:
    """A torch runtime: cluster-scoped (``ClusterTrainingRuntime``) unless ``namespace`` is given; ``failure_policy``
    is the JobSet's ``spec.failurePolicy`` (e.g. ``{"maxRestarts": 1}``)."""
    kind = kinds.TRAINING_RUNTIME if namespace else kinds.CLUSTER_TRAINING_RUNTIME
    metadata: dict[str, Any] = {"name": name, "labels": {FRAMEWORK_LABEL: "torch", **(labels or {})}}
    if namespace:
        metadata["namespace"] = namespace
    template: dict[str, Any] = {
        "spec": {"replicatedJobs": replicated_jobs or [replicated_job("node", image, scheduler_name=scheduler_name)]}
    }
    if failure_policy:
        template["spec"]["failurePolicy"] = dict(failure_policy)
    if jobset_labels or jobset_annotations:
        template["metadata"] = {k: v for k, v in (("labels", jobset_labels), ("annotations", jobset_annotations)) if v}
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": metadata,
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": template},
    }


def stack_manifests(image: str) -> list[dict]:
    """The run-wide objects, in apply order."""
    return [
        training_runtime(RUNTIME, image),
        training_runtime(DEFAULT_SCHEDULER_RUNTIME, image, scheduler_name=None),
        queue(PARENT_QUEUE),
    ]
