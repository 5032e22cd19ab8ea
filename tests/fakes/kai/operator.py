"""KAI's operator as the suite sees it: ``kai-config`` rendered into its operands' container limits, rolled out.

Upstream (v0.17.0): each operand's limits are the Config's ``<section>.service.resources.limits``, a missing key taking
the section's default (``pkg/apis/kai/v1/<section>/*.go`` ``SetDefaultsWhereNeeded``), rendered into the operand's
Deployment (``pkg/operator/operands/*/resources.go``); the Deployment controller then rolls it out, old and new pods
side by side for a while. Here a change shows after ``lag_calls`` API calls, first half rolled out (one old replica
left), then whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai_conformance.fixtures.kube import kinds
from tests.fakes.kube import Call, FakeKube

NAMESPACE = "kai-scheduler"
#: The defaults KAI v0.17.0's operator gave on real kind (``kubectl get deploy -o yaml``).
DEFAULT_LIMITS = {
    "binder": {"cpu": "100m", "memory": "200Mi"},
    "podGrouper": {"cpu": "100m", "memory": "512Mi"},
    "podGroupController": {"cpu": "100m", "memory": "512Mi"},
    "scheduler": {"cpu": "700m", "memory": "512Mi"},
}
SECTION_OF = {"binder": "binder", "pod-grouper": "podGrouper", "podgroup-controller": "podGroupController"}


def kai_config() -> dict[str, Any]:
    """The Config KAI's chart applies (its kai-config-deployer hook): no limits of its own."""
    return {
        "apiVersion": "kai.scheduler/v1",
        "kind": "Config",
        "metadata": {"name": "kai-config"},
        "spec": {"namespace": NAMESPACE, "binder": {"service": {"enabled": True}}, "global": {"replicaCount": 1}},
    }


def section_of(deployment_name: str) -> str | None:
    if deployment_name.startswith("kai-scheduler-"):
        return "scheduler"
    return SECTION_OF.get(deployment_name)


@dataclass
class SimulatedOperator:
    fake: FakeKube
    lag_calls: int = 1
    #: False: the operator never renders a Config change (a stuck operator).
    renders: bool = True
    _changed_at: dict[str, int] = field(default_factory=dict)

    def install(self) -> SimulatedOperator:
        self.fake.reactors.append(self.reconcile)
        return self

    def reconcile(self, fake: FakeKube, call: Call) -> None:
        config = fake.store.get(("kai.scheduler/v1", "Config", None, "kai-config"))
        if config is None or not self.renders:
            return
        for deployment in fake.objects(kinds.DEPLOYMENT, NAMESPACE):
            section = section_of(deployment["metadata"]["name"])
            if section is not None and self._render(deployment, section, config, len(fake.calls)):
                fake.put(deployment)

    def _render(self, deployment: dict[str, Any], section: str, config: dict[str, Any], now: int) -> bool:
        """Whether the Deployment (a copy) changed."""
        name = deployment["metadata"]["name"]
        given = (((config.get("spec") or {}).get(section) or {}).get("service") or {}).get("resources") or {}
        limits = {**DEFAULT_LIMITS[section], **{k: str(v) for k, v in (given.get("limits") or {}).items()}}
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        status = deployment.setdefault("status", {})
        if (container.get("resources") or {}).get("limits") != limits:
            changed = self._changed_at.setdefault(name, now)
            if now - changed < self.lag_calls:
                return False
            del self._changed_at[name]
            container["resources"] = {"limits": limits}
            meta = deployment["metadata"]
            meta["generation"] = meta.get("generation", 1) + 1
            status.update(observedGeneration=meta["generation"], replicas=2, updatedReplicas=1, availableReplicas=1)
            return True
        if status.get("replicas", 1) > status.get("updatedReplicas", 1):  # the old pod goes
            status.update(replicas=1, updatedReplicas=1, availableReplicas=1)
            return True
        return False
