"""A simulated cluster stack on :class:`FakeKube` for the installer and provisioning self-tests.

What real controllers and webhooks would do, reduced to what the suite observes:

* ``helm upgrade --install`` (answered by the fake runner) creates the chart's Deployment; KAI's operator then
  creates the operand Deployments and registers the queue webhook a few API calls later (asynchronously, as
  upstream does); Trainer's webhook fails "calling webhook" for its first calls (the known race).
* Applied CRDs become Established and applied Deployments become Available (a running pod with an imageID).
* The webhooks reject exactly what upstream rejects (the readiness probes' invalid objects).
* kubelet copies patched node capacity into allocatable on the next node read.

Every behaviour has a switch, so tests can make a component never ready, never register its webhook, etc.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clusters.catalog import WORKER_INDEX_LABEL, load_topology
from clusters.install import kai, trainer
from fixtures import errors, kinds
from fixtures.options import CATALOG, InstallSources, Settings
from fixtures.waits import TimeoutPolicy
from tests.fakes.commands import FakeRunner
from tests.fakes.kube import Call, FakeKube

#: Every wait gives up after its first retry (one 0.25 s poll): for the tests of what never happens.
EXPIRING = TimeoutPolicy(scale=0.0005, overrides={"ready": 20.0})
JOBSET_RELEASE_URL = "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"


def make_settings(tmp: Path, **overrides: Any) -> Settings:
    fields: dict[str, Any] = {
        "catalog": CATALOG,
        "combination": CATALOG.combination("kai-v0.17.0+trainer-v2.3.0"),
        "kubernetes": "1.35",
        "cluster": "kind",
        "cluster_name": "kc-test",
        "reuse_cluster": None,
        "keep_cluster": False,
        "kubeconfig": None,
        "context": None,
        "topology": load_topology("pr-gate"),
        "timeouts": TimeoutPolicy(scale=0.01),
        "report_dir": tmp,
        "render_dir": None,
        "allow_disruptive": False,
        "install": True,
        "keep_namespaces": False,
        "workload_image": "registry.k8s.io/pause:3.10",
        "sources": InstallSources(),
    }
    fields.update(overrides)
    return Settings(**fields)


def deployment(name: str, namespace: str, image: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "manager", "image": image}]}}},
    }


def crd(plural: str, group: str, kind: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": {"kind": kind, "plural": plural}, "scope": "Namespaced"},
        "status": {"storedVersions": []},
    }


def jobset_manifests() -> str:
    """A reduced release manifests.yaml in upstream's order (webhooks before the Deployment)."""
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobset-system"}},
        crd("jobsets", "jobset.x-k8s.io", "JobSet"),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "jobset-controller-manager", "namespace": "jobset-system"}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "jobset-validating-webhook-configuration"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "jobset-webhook-service", "namespace": "jobset-system"}},
        deployment("jobset-controller-manager", "jobset-system", "registry.k8s.io/jobset/jobset:v0.12.0"),
    ]  # fmt: skip
    return yaml.safe_dump_all(docs)


def trainer_kustomize_output() -> str:
    """What `kubectl kustomize manifests/overlays/manager` renders: Trainer plus the bundled JobSet."""
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow-system"}},
        crd("trainjobs", "trainer.kubeflow.org", "TrainJob"),
        crd("jobsets", "jobset.x-k8s.io", "JobSet"),
        deployment("jobset-controller-manager", "kubeflow-system", "registry.k8s.io/jobset/jobset:v0.12.0"),
        deployment(trainer.DEPLOYMENT, "kubeflow-system", "ghcr.io/kubeflow/trainer/trainer-controller-manager:pr"),
    ]
    return yaml.safe_dump_all(docs)


def _set_values(argv: tuple[str, ...]) -> dict:
    values: dict = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "--set":
            key, _, setting = value.partition("=")
            node = values
            *parents, last = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = setting
    return values


def worker_node(name: str, index: int | None, *, capacity: int | None = None) -> dict:
    labels = {WORKER_INDEX_LABEL: str(index)} if index is not None else {}
    node: dict = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                  "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"},
                             "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    if capacity is not None:
        node["status"]["capacity"]["nvidia.com/gpu"] = str(capacity)
        node["status"]["allocatable"]["nvidia.com/gpu"] = str(capacity)
    return node


@dataclass
class SimulatedStack:
    fake: FakeKube
    runner: FakeRunner = field(default_factory=FakeRunner)
    operator_delay: int = 0  # API calls between the KAI chart install and its operands/webhook
    trainer_webhook_failures: int = 0  # "failed calling webhook" answers right after the Trainer install
    kubelet_mirrors: bool = True
    deployments_become_available: bool = True
    queue_webhook: bool = True
    fetched: list[str] = field(default_factory=list)
    _kai_installed_at: int | None = None

    def __post_init__(self) -> None:
        self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
        self.fake.reactors.append(self._controllers)
        self.fake.admission.append(self._webhooks)
        r = self.runner
        r.on("helm", "upgrade", "--install", kai.RELEASE, action=self._install_kai)
        r.on("helm", "upgrade", "--install", trainer.RELEASE, action=self._install_trainer)
        r.on(
            "helm",
            "get",
            "manifest",
            kai.RELEASE,
            stdout=yaml.safe_dump(
                deployment(kai.OPERATOR, kai.NAMESPACE, "ghcr.io/kai-scheduler/kai-scheduler/operator:v0.17.0")
            ),
        )
        r.on(
            "helm",
            "get",
            "manifest",
            trainer.RELEASE,
            stdout=yaml.safe_dump(
                deployment(
                    trainer.DEPLOYMENT, trainer.NAMESPACE, "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0"
                )
            ),
        )
        r.on("helm", "get", "values", kai.RELEASE, action=lambda argv: json.dumps(self._values(kai.RELEASE)))
        r.on("helm", "get", "values", trainer.RELEASE, action=lambda argv: json.dumps(self._values(trainer.RELEASE)))
        r.on("kubectl", "kustomize", stdout=trainer_kustomize_output())  # fmt: skip

    def add_workers(self, count: int, prefix: str = "kc-test-worker") -> list[str]:
        names = [prefix + ("" if i == 0 else str(i + 1)) for i in range(count)]
        for index, name in enumerate(names):
            self.fake.put(worker_node(name, index))
        return names

    def fetch(self, url: str, timeout: float) -> str:
        self.fetched.append(url)
        return jobset_manifests()

    # ------------------------------------------------------------------------------------------ helm actions
    def _values(self, release: str) -> dict:
        installs = self.runner.commands("helm", "upgrade", "--install", release)
        return _set_values(installs[-1]) if installs else {}

    def _install_kai(self, argv: tuple[str, ...]) -> None:
        self._ensure_namespace(kai.NAMESPACE)
        self.fake.put(deployment(kai.OPERATOR, kai.NAMESPACE, "ghcr.io/kai-scheduler/kai-scheduler/operator:v0.17.0"))
        self._kai_installed_at = len(self.fake.calls)

    def _install_trainer(self, argv: tuple[str, ...]) -> None:
        self._ensure_namespace(trainer.NAMESPACE)
        self.fake.put(deployment(trainer.DEPLOYMENT, trainer.NAMESPACE,
                                 "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0"))  # fmt: skip

    def _ensure_namespace(self, name: str) -> None:
        if self.fake.store.get(("v1", "Namespace", None, name)) is None:
            self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # ------------------------------------------------------------------------------------------ controllers
    def _controllers(self, fake: FakeKube, call: Call) -> None:
        if self._kai_installed_at is not None and len(fake.calls) - self._kai_installed_at >= self.operator_delay:
            for name in kai.OPERANDS:
                if fake.store.get(("apps/v1", "Deployment", kai.NAMESPACE, name)) is None:
                    fake.put(deployment(name, kai.NAMESPACE, f"ghcr.io/kai-scheduler/kai-scheduler/{name}:v0.17.0"))
        for obj in list(fake.store.values()):
            status = obj.setdefault("status", {})
            if obj["kind"] == "CustomResourceDefinition" and not status.get("conditions"):
                status["conditions"] = [{"type": "Established", "status": "True"}]
            if obj["kind"] == "Deployment" and self.deployments_become_available and not status.get("conditions"):
                status["conditions"] = [{"type": "Available", "status": "True"}]
                self._run_pod(fake, obj)
            if obj["kind"] == "Node" and self.kubelet_mirrors and call.operation in ("get", "list"):
                gpus = status.get("capacity", {}).get("nvidia.com/gpu")
                if gpus is not None:
                    status.setdefault("allocatable", {})["nvidia.com/gpu"] = gpus

    def _run_pod(self, fake: FakeKube, dep: dict) -> None:
        meta = dep["metadata"]
        image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
        fake.put({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{meta['name']}-0", "namespace": meta["namespace"]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "manager", "image": image, "imageID": f"{image.split(':')[0]}@sha256:{'ab' * 32}"}]},
        })  # fmt: skip

    # ------------------------------------------------------------------------------------------ webhooks
    def _webhooks(self, operation: str, obj: dict, dry_run: bool) -> None:
        kind = obj["kind"]
        queue_webhook = self.queue_webhook and self._has(kai.NAMESPACE, "queue-controller")
        if kind == "Queue" and queue_webhook and not obj.get("spec", {}).get("resources"):
            self._deny("queue-validation.kai.scheduler", "resources must be specified")
        if kind == "JobSet" and self._has("jobset-system", "jobset-controller-manager"):
            first = obj["spec"]["replicatedJobs"][0]
            if first.get("dependsOn"):
                self._deny(
                    "vjobset.kb.io",
                    "spec.replicatedJobs: Invalid value: DependsOn can't be set for the first ReplicatedJob",
                )
        if kind == "TrainJob" and self._has(trainer.NAMESPACE, trainer.DEPLOYMENT):
            if self.trainer_webhook_failures > 0:
                self.trainer_webhook_failures -= 1
                raise errors.ServerError("create TrainJob", 500, "InternalError",
                                         'Internal error occurred: failed calling webhook "validator.trainjob.trainer.kubeflow.org": connection refused')  # fmt: skip
            runtime = obj["spec"]["runtimeRef"]["name"]
            if self.fake.store.get(self._key(kinds.CLUSTER_TRAINING_RUNTIME, runtime)) is None:
                self._deny("validator.trainjob.trainer.kubeflow.org", f'clustertrainingruntimes "{runtime}" not found: '
                           "specified clusterTrainingRuntime must be created before the TrainJob is created")  # fmt: skip

    def _has(self, namespace: str, name: str) -> bool:
        return self.fake.store.get(("apps/v1", "Deployment", namespace, name)) is not None

    @staticmethod
    def _key(kind: Any, name: str) -> tuple:
        return (kind.api_version, kind.kind, None, name)

    @staticmethod
    def _deny(webhook: str, message: str) -> None:
        raise errors.Forbidden(
            "create", 403, "Forbidden", f'admission webhook "{webhook}" denied the request: {message}'
        )


def install_context(settings: Settings, stack: SimulatedStack, kubeconfig: str = "/tmp/kc", context: str | None = None):
    from clusters.install.context import InstallContext

    return InstallContext(settings=settings, kube_factory=lambda: stack.fake, runner=stack.runner, fetch=stack.fetch,
                          kubeconfig=kubeconfig, context=context)  # fmt: skip
