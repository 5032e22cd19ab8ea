"""A simulated cluster stack on :class:`FakeKube` for the installer and provisioning self-tests.

What real controllers and webhooks would do, reduced to what the suite observes:

* ``helm upgrade --install`` (answered by the fake runner) creates the chart's Deployment (and KAI's ``kai-config``);
  KAI's operator then creates the operand Deployments and registers the queue webhook a few API calls later
  (asynchronously, as upstream does) and renders kai-config's limits into them (:mod:`tests.fakes.kai.operator`);
  Trainer's webhook fails "calling webhook" for its first calls (the known race).
* Installs create the components' CRDs (serving the versions of ``fixtures/kube/kinds.py``), and Deployments labelled
  and imaged as upstream's; applied CRDs become Established and applied Deployments become Available (a
  running pod with an imageID).
* The webhooks reject exactly what upstream rejects (the readiness probes' invalid objects).
* The workload controllers (:class:`~tests.fakes.controllers.SimulatedControllers`: Job controller, KAI's
  podgrouper, scheduler and binder, kubelet) run the behaviour probe's Job; ``faults`` breaks them.
* :meth:`SimulatedStack.run_as_processes` makes components present without any Deployment (their CRDs, their
  webhooks serving), as on a cluster whose KAI runs as plain processes.
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

from kai_conformance.clusters.install import kai, trainer
from kai_conformance.clusters.install.crds import SUITE_KINDS
from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.clusters.topology import WORKER_INDEX_LABEL
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.settings import InstallSources, Settings
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.kube.kinds import Kind
from kai_conformance.fixtures.plugin.options import CATALOG
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.suites.support.expectations.placement import DEFAULT_STRATEGY
from tests.builders import unsliced
from tests.fakes.commands import FakeRunner
from tests.fakes.controllers import Faults, SimulatedControllers
from tests.fakes.kai.operator import SimulatedOperator, kai_config
from tests.fakes.kube import Call, FakeKube
from tests.fakes.stack import default_shard

#: Every wait gives up after its first retry (one 0.25 s poll): for the tests of what never happens.
EXPIRING = TimeoutPolicy(scale=0.0005, overrides={"ready": 20.0})
JOBSET_RELEASE_URL = "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"
#: The node the simulated scheduler binds to and the components' pods run on.
SIM_NODE = "kc-test-worker"
KAI_REGISTRY = "ghcr.io/kai-scheduler/kai-scheduler"
#: Operand Deployment → image name, as KAI's operator renders them (values.yaml image names).
KAI_IMAGES = {"admission": "admission", "binder": "binder", "pod-grouper": "podgrouper",
              "podgroup-controller": "podgroupcontroller", "queue-controller": "queuecontroller",
              "kai-scheduler-default": "scheduler"}  # fmt: skip
#: Labels upstream puts on each component's Deployments (clusters/install/evidence.py).
KAI_OPERATOR_LABELS = {"app": "kai-operator"}
KAI_OPERAND_LABELS = {"app.kubernetes.io/managed-by": "kai-operator"}
JOBSET_LABELS = {"app.kubernetes.io/name": "jobset"}
TRAINER_LABELS = {"app.kubernetes.io/name": "kubeflow-trainer", "app.kubernetes.io/component": "manager"}


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
        "topology": unsliced("pr-gate"),
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


def deployment(name: str, namespace: str, image: str, labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, **({"labels": dict(labels)} if labels else {})},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "manager", "image": image}]}}},
    }


def crd(kind: Kind, versions: tuple[str, ...] | None = None) -> dict:
    """The CRD of ``kind`` serving ``versions`` (default: the suite's), not yet Established (as applied)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.resource},
        "spec": {"group": kind.group, "names": {"kind": kind.kind, "plural": kind.plural},
                 "scope": "Namespaced" if kind.namespaced else "Cluster",
                 "versions": [{"name": v, "served": True, "storage": i == 0}
                              for i, v in enumerate(versions or (kind.version,))]},
        "status": {"storedVersions": []},
    }  # fmt: skip


def jobset_manifests() -> str:
    """A reduced release manifests.yaml in upstream's order (webhooks before the Deployment)."""
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobset-system"}},
        crd(kinds.JOB_SET),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "jobset-controller-manager", "namespace": "jobset-system"}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "jobset-validating-webhook-configuration"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "jobset-webhook-service", "namespace": "jobset-system"}},
        deployment("jobset-controller-manager", "jobset-system", "registry.k8s.io/jobset/jobset:v0.12.0", JOBSET_LABELS),
    ]  # fmt: skip
    return yaml.safe_dump_all(docs)


def trainer_kustomize_output() -> str:
    """What `kubectl kustomize manifests/overlays/manager` renders: Trainer plus the bundled JobSet."""
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow-system"}},
        *(crd(kind) for kind in SUITE_KINDS["trainer"]),
        crd(kinds.JOB_SET),
        deployment(
            "jobset-controller-manager", "kubeflow-system", "registry.k8s.io/jobset/jobset:v0.12.0", JOBSET_LABELS
        ),
        deployment(
            trainer.DEPLOYMENT,
            "kubeflow-system",
            "ghcr.io/kubeflow/trainer/trainer-controller-manager:pr",
            {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager"},
        ),
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


#: What the simulated kubelets report (a kind node of Kubernetes 1.35; kind's containerd).
NODE_INFO = {"kubeletVersion": "v1.35.5", "containerRuntimeVersion": "containerd://2.1.1",
             "osImage": "Debian GNU/Linux 12 (bookworm)", "kernelVersion": "6.8.0"}  # fmt: skip
#: The image the simulated kind node containers were created from (``docker inspect``).
NODE_CONTAINER_IMAGE = "kindest/node:v1.35.5"


def worker_node(name: str, index: int | None, *, capacity: int | None = None) -> dict:
    labels = {WORKER_INDEX_LABEL: str(index)} if index is not None else {}
    node: dict = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                  "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"},
                             "conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": NODE_INFO}}  # fmt: skip
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
    faults: Faults = field(default_factory=Faults)  # of the workload controllers (behaviour probe)
    fetched: list[str] = field(default_factory=list)
    #: Components present without Deployments (plain processes): their webhooks serve regardless.
    processes: set[str] = field(default_factory=set)
    #: API calls between a CRD's first sight and its Established condition. The apiextensions controllers set it
    #: asynchronously: on real kind the first read after a create answered ``status.conditions: null``.
    crd_establish_calls: int = 2
    #: The nodes the simulated KAI places on (one by default); a slice's node carries its node-pool label.
    sim_nodes: tuple[GpuNode, ...] = (GpuNode(SIM_NODE, 4),)
    _kai_installed_at: int | None = None
    _crds_seen_at: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
        self.fake.reactors.append(self._controllers)
        self.operator = SimulatedOperator(self.fake).install()
        self.fake.admission.append(self._webhooks)
        layout = GpuLayout(self.sim_nodes)
        self.workloads = SimulatedControllers(self.fake, layout, faults=self.faults).install(publish=False)
        r = self.runner
        r.on("helm", "upgrade", "--install", kai.RELEASE, action=self._install_kai)
        r.on("helm", "upgrade", "--install", trainer.RELEASE, action=self._install_trainer)
        r.on(
            "helm",
            "get",
            "manifest",
            kai.RELEASE,
            stdout=yaml.safe_dump(
                deployment(kai.OPERATOR, kai.NAMESPACE, f"{KAI_REGISTRY}/operator:v0.17.0", KAI_OPERATOR_LABELS)
            ),
        )
        r.on(
            "helm",
            "get",
            "manifest",
            trainer.RELEASE,
            stdout=yaml.safe_dump(
                deployment(
                    trainer.DEPLOYMENT,
                    trainer.NAMESPACE,
                    "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0",
                    TRAINER_LABELS,
                )
            ),
        )
        r.on("helm", "get", "values", kai.RELEASE, action=lambda argv: json.dumps(self._values(kai.RELEASE)))
        r.on("helm", "get", "values", trainer.RELEASE, action=lambda argv: json.dumps(self._values(trainer.RELEASE)))
        r.on("kubectl", "kustomize", stdout=trainer_kustomize_output())  # fmt: skip
        r.on("docker", "inspect", "--format", "{{.Config.Image}}", stdout=NODE_CONTAINER_IMAGE + "\n")

    def add_workers(self, count: int, prefix: str = "kc-test-worker") -> list[str]:
        names = [prefix + ("" if i == 0 else str(i + 1)) for i in range(count)]
        for index, name in enumerate(names):
            self.fake.put(worker_node(name, index))
        return names

    def run_as_processes(self, *components: str) -> None:
        """Components installed without any Deployment (e.g. KAI's binaries run as processes): their CRDs exist
        and are Established, their webhooks serve."""
        for component in components:
            self._put_crds(component)
            self.processes.add(component)

    def fetch(self, url: str, timeout: float) -> str:
        self.fetched.append(url)
        return jobset_manifests()

    # ------------------------------------------------------------------------------------------ helm actions
    def _values(self, release: str) -> dict:
        installs = self.runner.commands("helm", "upgrade", "--install", release)
        return _set_values(installs[-1]) if installs else {}

    def _install_kai(self, argv: tuple[str, ...]) -> None:
        self._ensure_namespace(kai.NAMESPACE)
        self._put_crds("kai")
        placement = _set_values(argv).get("scheduler", {}).get("placementStrategy", DEFAULT_STRATEGY)
        self.fake.put(default_shard(placement))
        if self.fake.store.get(("kai.scheduler/v1", "Config", None, "kai-config")) is None:
            self.fake.put(kai_config())
        self.fake.put(deployment(kai.OPERATOR, kai.NAMESPACE, f"{KAI_REGISTRY}/operator:v0.17.0", KAI_OPERATOR_LABELS))
        self._kai_installed_at = len(self.fake.calls)

    def _install_trainer(self, argv: tuple[str, ...]) -> None:
        self._ensure_namespace(trainer.NAMESPACE)
        self._put_crds("trainer")
        self.fake.put(deployment(trainer.DEPLOYMENT, trainer.NAMESPACE,
                                 "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0", TRAINER_LABELS))  # fmt: skip

    def _put_crds(self, component: str) -> None:
        """A chart's CRDs, installed before anything else (Established after ``crd_establish_calls`` API calls)."""
        for kind in SUITE_KINDS[component]:
            if (
                self.fake.store.get(("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, kind.resource))
                is None
            ):
                self.fake.put(crd(kind))

    def _ensure_namespace(self, name: str) -> None:
        if self.fake.store.get(("v1", "Namespace", None, name)) is None:
            self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # ------------------------------------------------------------------------------------------ controllers
    def _controllers(self, fake: FakeKube, call: Call) -> None:
        if self._kai_installed_at is not None and len(fake.calls) - self._kai_installed_at >= self.operator_delay:
            for name in kai.OPERANDS:
                if fake.store.get(("apps/v1", "Deployment", kai.NAMESPACE, name)) is None:
                    image = f"{KAI_REGISTRY}/{KAI_IMAGES[name]}:v0.17.0"
                    fake.put(deployment(name, kai.NAMESPACE, image, KAI_OPERAND_LABELS))
            # KAI's operator: a scheduler Deployment per SchedulingShard, <schedulerName>-<shard> (clusters/slices.py)
            for shard in fake.objects(kinds.SCHEDULING_SHARD):
                name = f"kai-scheduler-{shard['metadata']['name']}"
                if fake.store.get(("apps/v1", "Deployment", kai.NAMESPACE, name)) is None:
                    fake.put(deployment(name, kai.NAMESPACE, f"{KAI_REGISTRY}/scheduler:v0.17.0", KAI_OPERAND_LABELS))
        for obj in list(fake.store.values()):
            status = obj.setdefault("status", {})
            if obj["kind"] == "CustomResourceDefinition" and not status.get("conditions"):
                seen = self._crds_seen_at.setdefault(obj["metadata"]["name"], len(fake.calls))
                if len(fake.calls) - seen >= self.crd_establish_calls:
                    status["conditions"] = [{"type": "Established", "status": "True"}]
            if obj["kind"] == "Deployment" and self.deployments_become_available and not status.get("conditions"):
                status["conditions"] = [{"type": "Available", "status": "True"}]
                replicas = (obj.get("spec") or {}).get("replicas", 1)
                status.update(replicas=replicas, updatedReplicas=replicas, availableReplicas=replicas)
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
            "spec": {"nodeName": SIM_NODE, "containers": [{"name": "manager", "image": image}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "manager", "image": image, "imageID": f"{image.split(':')[0]}@sha256:{'ab' * 32}"}]},
        })  # fmt: skip

    # ------------------------------------------------------------------------------------------ webhooks
    def _webhooks(self, operation: str, obj: dict, dry_run: bool) -> None:
        kind = obj["kind"]
        queue_webhook = self.queue_webhook and (self._has(kai.NAMESPACE, "queue-controller") or "kai" in self.processes)
        if kind == "Queue" and queue_webhook and not obj.get("spec", {}).get("resources"):
            self._deny("queue-validation.kai.scheduler", "resources must be specified")
        if kind == "JobSet" and (self._has("jobset-system", "jobset-controller-manager") or "jobset" in self.processes):
            first = obj["spec"]["replicatedJobs"][0]
            if first.get("dependsOn"):
                self._deny(
                    "vjobset.kb.io",
                    "spec.replicatedJobs: Invalid value: DependsOn can't be set for the first ReplicatedJob",
                )
        if kind == "TrainJob" and (self._has(trainer.NAMESPACE, trainer.DEPLOYMENT) or "trainer" in self.processes):
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
    from kai_conformance.clusters.install.context import InstallContext

    return InstallContext(settings=settings, kube_factory=lambda: stack.fake, runner=stack.runner, fetch=stack.fetch,
                          kubeconfig=kubeconfig, context=context)  # fmt: skip
