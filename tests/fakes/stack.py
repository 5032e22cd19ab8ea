"""The simulated stack as seen from outside its controllers: the component Deployments (as KAI's operator names its
operands: ``app: <name>`` and images ``…/kai-scheduler/<image>:<tag>``) and the podgrouper's ClusterRole, answered as
SubjectAccessReviews. :attr:`Faults` that take a component down or away from its permissions show here too, so a
diagnosis can read them the way it reads a real cluster.
"""

from __future__ import annotations

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.diagnosis.provenance import PODGROUPER_NEEDS, TRAINJOBS
from kai_conformance.suites.support.expectations import PODGROUPER_USER
from kai_conformance.suites.support.expectations.placement import DEFAULT_SHARD, DEFAULT_STRATEGY
from tests.builders import deployment
from tests.fakes.kube import FakeKube
from tests.fakes.simulation import Faults

KAI_REGISTRY = "ghcr.io/kai-scheduler/kai-scheduler"
#: Deployment (app label) → image name of the KAI operands the simulation stands for.
KAI_OPERANDS = {"kai-scheduler-default": "scheduler", "binder": "binder", "pod-grouper": "podgrouper"}


def default_shard(strategy: str | None = DEFAULT_STRATEGY) -> dict:
    """The SchedulingShard KAI's chart renders (templates/default-shard.yaml): ``placementStrategy`` gpu and cpu from
    the Helm value ``scheduler.placementStrategy`` (binpack in values.yaml), omitted when the value is empty."""
    spec: dict = {"partitionLabelValue": ""}
    if strategy:
        spec["placementStrategy"] = {"gpu": strategy, "cpu": strategy}
    return {"apiVersion": kinds.SCHEDULING_SHARD.api_version, "kind": kinds.SCHEDULING_SHARD.kind,
            "metadata": {"name": DEFAULT_SHARD}, "spec": spec}  # fmt: skip


def publish(fake: FakeKube, faults: Faults, kai_version: str) -> None:
    """Put the KAI operand Deployments and the default SchedulingShard, and grant the podgrouper what KAI's chart
    grants it (KAI §4.6)."""
    fake.put(default_shard())
    for name, image in KAI_OPERANDS.items():
        down = faults.binder_down and image == "binder"
        fake.put(deployment(name, f"{KAI_REGISTRY}/{image}:{kai_version}", available=not down))
    for resource, verbs in PODGROUPER_NEEDS.items():
        if resource == TRAINJOBS and faults.podgrouper_without_trainjob_rbac:
            continue
        plural, _, group = resource.partition(".")
        for verb in verbs:
            fake.allow(PODGROUPER_USER, verb, plural, group)
