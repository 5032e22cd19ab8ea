"""The ClusterTrainingRuntimes a Trainer release (or PR) ships, read at run time, and the suite's namespaced copy of one.

The runtimes are Trainer's own ``manifests/base/runtimes/``, read when a case of the area first asks for them from
``--trainer-runtimes=DIR|URL`` (default: the tested release's on GitHub; clusters/trainer_runtimes.py): nothing of
them is kept in this repository, and a Trainer PR gate tests the PR's own runtimes. :func:`case_copy` makes the
copy a case installs: a namespaced ``TrainingRuntime`` (Trainer resolves a TrainJob's ``runtimeRef`` of kind
``TrainingRuntime`` in the TrainJob's namespace, upstream-facts §A4), set up the way the Trainer KAI guide says
(``schedulerName: kai-scheduler`` in every pod template, trainer-jobset.md §4) and running the suite's workload
instead of the framework. Everything else (replicatedJobs and their order, initializers, launcher, ``dependsOn``,
``mlPolicy``, network, successPolicy, volumeClaimPolicies, labels) stays as shipped; :data:`CHANGES` names every
field the copy touches.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kai_conformance.clusters import trainer_runtimes
from kai_conformance.clusters.install.manifests import download
from kai_conformance.clusters.suite_stack import (
    KAI_SCHEDULER_NAME,
    KWOK_TOLERATION,
    TRAINER_ANCESTOR_LABEL,
    WORKLOAD_COMMAND,
    lifetime_env,
)
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.suites.support.expectations import ReplicatedJob

UPSTREAM = trainer_runtimes.UPSTREAM
RUNTIMES_PATH = trainer_runtimes.RUNTIMES_PATH
#: The runtimes Trainer v2.2.0 and v2.3.0 ship (their kustomization.yaml, torchtune/ included): one case each. A
#: case whose runtime the source does not ship skips; one the source ships beyond these is named by
#: :func:`uncovered`.
KNOWN = ("torch-distributed", "deepspeed-distributed", "mlx-distributed", "jax-distributed", "xgboost-distributed",
         "torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b")  # fmt: skip
#: How long a replicatedJob another one waits to ``Complete`` runs before it exits 0 (an initializer's work).
INITIALIZER_SECONDS = 5
#: What :func:`case_copy` changes, per pod template and per container; nothing else differs from the shipped object.
CHANGES = (
    "kind ClusterTrainingRuntime → TrainingRuntime in the case's namespace",
    "pod template: schedulerName kai-scheduler (the Trainer KAI guide) and the kwok toleration (fake nodes)",
    "container: image → the workload image (imagePullPolicy IfNotPresent), command → the suite's workload command, "
    "args and readinessProbe dropped (they belong to the replaced program: an MPI node's probe waits for sshd)",
    "containers of a replicatedJob another one waits to Complete: the workload ends after "
    f"{INITIALIZER_SECONDS}s with exit 0 (KC_RUN_SECONDS), as an initializer would",
)
#: The fetch function of the URL source; the self-tests substitute a fake.
FETCH: trainer_runtimes.Fetch = download


@dataclass(frozen=True)
class ShippedRuntime:
    """One ClusterTrainingRuntime as a Trainer release (or PR) ships it."""

    origin: str  # the --trainer-runtimes source it was read from (a directory or a URL)
    source: str  # its path in kubeflow/trainer: manifests/base/runtimes/…
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def rjobs(self) -> list[dict[str, Any]]:
        return list(self.obj["spec"]["template"]["spec"]["replicatedJobs"])

    @property
    def replicated_job_names(self) -> list[str]:
        return [r["name"] for r in self.rjobs]

    @property
    def depends_on(self) -> dict[str, list[dict[str, str]]]:
        """replicatedJob → its ``dependsOn`` (only those that have one)."""
        return {r["name"]: list(r["dependsOn"]) for r in self.rjobs if r.get("dependsOn")}

    @property
    def up_front(self) -> list[str]:
        """The replicatedJobs JobSet creates at once (no ``dependsOn``)."""
        return [n for n in self.replicated_job_names if n not in self.depends_on]

    @property
    def awaited_complete(self) -> set[str]:
        """replicatedJobs another one waits for with ``status: Complete`` (initializers)."""
        return {d["name"] for deps in self.depends_on.values() for d in deps if d.get("status") == "Complete"}

    @property
    def mpi_launcher_as_node(self) -> bool:
        return bool(((self.obj["spec"].get("mlPolicy") or {}).get("mpi") or {}).get("runLauncherAsNode"))

    @property
    def num_nodes(self) -> int:
        """``trainer.numNodes`` of the case's TrainJob: 2 (a real gang), 1 for an MPI runtime that runs its launcher
        as a node (launcher 1 pod + node ``max(numNodes - 1, 1)``, mpi.go ``EnforceMLPolicy``: 2 pods either way)."""
        return 1 if self.mpi_launcher_as_node else 2

    def replicated_jobs(self, num_nodes: int | None = None) -> list[ReplicatedJob]:
        """What the PodGroup's shape depends on, in JobSet order: pods per Job as Trainer sets them (the trainer
        ancestor gets ``numNodes``, an MPI launcher-as-node runtime's launcher 1 and node ``max(numNodes - 1, 1)``,
        other replicatedJobs their own parallelism, default 1)."""
        nodes = self.num_nodes if num_nodes is None else num_nodes
        out = []
        for rjob in self.rjobs:
            ancestor = ((rjob["template"].get("metadata") or {}).get("labels") or {}).get(TRAINER_ANCESTOR_LABEL)
            if self.mpi_launcher_as_node and rjob["name"] in ("launcher", "node"):
                pods = 1 if rjob["name"] == "launcher" else max(nodes - 1, 1)
            elif ancestor == "trainer":
                pods = nodes
            else:
                pods = int(rjob["template"]["spec"].get("parallelism") or 1)
            out.append(ReplicatedJob(rjob["name"], pods, int(rjob.get("replicas") or 1)))
        return out

    def pods_of(self, names: list[str] | set[str]) -> int:
        return sum(r.pods * r.replicas for r in self.replicated_jobs() if r.name in names)


def source_of(ctx: RenderContext) -> str | None:
    """Where the case's runtimes come from: ``--trainer-runtimes``, else the tested release's on GitHub (None in
    render mode, which fetches nothing)."""
    if ctx.trainer_runtimes:
        return ctx.trainer_runtimes
    return trainer_runtimes.default_source(ctx.combination.trainer.version) if ctx.runtimes_default else None


_LOADED: dict[tuple[str, Any], tuple[ShippedRuntime, ...] | trainer_runtimes.RuntimesUnavailable] = {}


def shipped(source: str) -> list[ShippedRuntime]:
    """The runtimes at ``source``, in its kustomization's order; read once per process (a failure too: every case
    of the area then fails at once with the same :class:`~clusters.trainer_runtimes.RuntimesUnavailable`)."""
    key = (source, FETCH)
    if key not in _LOADED:
        try:
            loaded = trainer_runtimes.load(source, FETCH)
            _LOADED[key] = tuple(ShippedRuntime(source, RUNTIMES_PATH + rel, obj) for rel, obj in loaded)
        except trainer_runtimes.RuntimesUnavailable as exc:
            _LOADED[key] = exc
    found = _LOADED[key]
    if isinstance(found, trainer_runtimes.RuntimesUnavailable):
        raise found
    return list(found)


def names(source: str) -> list[str]:
    return [r.name for r in shipped(source)]


def find(source: str, name: str) -> ShippedRuntime | None:
    return next((r for r in shipped(source) if r.name == name), None)


def runtime(source: str, name: str) -> ShippedRuntime:
    found = find(source, name)
    if found is None:
        raise KeyError(f"{source} ships no runtime {name}; it ships {', '.join(names(source))}")
    return found


def uncovered(source: str) -> list[str]:
    """The runtimes ``source`` ships that have no case (:data:`KNOWN`)."""
    return [n for n in names(source) if n not in KNOWN]


def case_copy(rt: ShippedRuntime, namespace: str, image: str) -> dict[str, Any]:
    """The namespaced TrainingRuntime a case installs: the shipped object with only :data:`CHANGES` applied."""
    obj = copy.deepcopy(rt.obj)
    obj["kind"] = kinds.TRAINING_RUNTIME.kind
    obj["metadata"]["namespace"] = namespace
    ending = rt.awaited_complete
    for rjob in obj["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod["schedulerName"] = KAI_SCHEDULER_NAME
        pod["tolerations"] = [*(pod.get("tolerations") or []), dict(KWOK_TOLERATION)]
        for container in pod["containers"]:
            container.update(image=image, imagePullPolicy="IfNotPresent", command=list(WORKLOAD_COMMAND))
            container.pop("args", None)
            container.pop("readinessProbe", None)
            if rjob["name"] in ending:
                env = [{"name": k, "value": v} for k, v in lifetime_env(INITIALIZER_SECONDS).items()]
                container["env"] = [*(container.get("env") or []), *env]
    return obj
