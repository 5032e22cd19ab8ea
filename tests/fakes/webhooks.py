"""The admission webhooks and the operators' footprint (CRDs, Deployments, pods) on a flow's simulated cluster, for
the AI conformance cases: Trainer's TrainJob validator and KAI's Queue and PodGroup validators refuse what upstream
refuses (the messages of clusters/install/readiness.py's probes), unless ``admit_everything`` (a broken webhook)."""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.install.crds import SUITE_KINDS
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from tests.builders import deployment
from tests.fakes.installation import crd
from tests.fakes.kube import FakeKube

TRAINER_IMAGE = "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0"


@dataclass
class Webhooks:
    fake: FakeKube
    admit_everything: bool = False

    def install(self) -> Webhooks:
        """Put the webhooks, the CRDs, Trainer's Deployment and a Running pod per Deployment; ``remove`` takes the
        pods away again (a flow ends with no pod left)."""
        self.fake.admission.append(self.admit)
        if self.fake.store.get(("v1", "Namespace", None, "default")) is None:
            self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        for component in ("kai", "trainer"):
            for kind in SUITE_KINDS[component]:
                obj = crd(kind)
                obj["status"]["conditions"] = [{"type": "Established", "status": "True"}]
                self.fake.put(obj)
        self.fake.put(deployment("kubeflow-trainer-controller-manager", TRAINER_IMAGE, available=True,
                                 namespace="kubeflow-system"))  # fmt: skip
        for dep in self.fake.objects(kinds.DEPLOYMENT):
            self.run_pod(dep)
        return self

    def pod_key(self, dep: dict) -> tuple:
        return ("v1", "Pod", dep["metadata"]["namespace"], f"{dep['metadata']['name']}-0")

    def remove(self) -> None:
        for dep in self.fake.objects(kinds.DEPLOYMENT):
            self.fake.store.pop(self.pod_key(dep), None)
        self.fake.store.pop(("v1", "Namespace", None, "default"), None)

    def run_pod(self, dep: dict) -> None:
        meta, template = dep["metadata"], dep["spec"]["template"]
        self.fake.put({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"{meta['name']}-0", "namespace": meta["namespace"],
                                    "labels": dict(template["metadata"]["labels"])},
                       "spec": {"nodeName": "control-plane", "containers": template["spec"]["containers"]},
                       "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": True}]}})  # fmt: skip

    def admit(self, operation: str, obj: dict, dry_run: bool) -> None:
        if self.admit_everything:
            return
        kind, spec = obj["kind"], obj.get("spec") or {}
        if kind == "Queue" and not spec.get("resources"):
            self.deny("queue-validation.kai.scheduler", "resources must be specified")
        if kind == "PodGroup":
            names = [s.get("name") for s in spec.get("subGroups") or []]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                self.deny("podgroup-validation.kai.scheduler", f"duplicate subgroup name {twice[0]}")
        if kind == "TrainJob":
            ref = spec.get("runtimeRef") or {}
            runtime_kind = (
                kinds.TRAINING_RUNTIME if ref.get("kind") == "TrainingRuntime" else kinds.CLUSTER_TRAINING_RUNTIME
            )
            namespace = obj["metadata"].get("namespace") if runtime_kind.namespaced else None
            if self.fake.store.get((runtime_kind.api_version, runtime_kind.kind, namespace, ref.get("name"))) is None:
                self.deny("validator.trainjob.trainer.kubeflow.org", f'{runtime_kind.plural} "{ref.get("name")}" not '
                          "found: specified clusterTrainingRuntime must be created before the TrainJob is created")  # fmt: skip

    @staticmethod
    def deny(webhook: str, message: str) -> None:
        raise errors.Forbidden(
            "create", 403, "Forbidden", f'admission webhook "{webhook}" denied the request: {message}'
        )
