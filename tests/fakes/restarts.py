"""The stack's components as Deployments whose pods can be deleted, as the chaos area restarts them
(suites/support/chaos/faults.py): opt in with :meth:`tests.fakes.controllers.SimulatedControllers.restartable`.

Each component runs as one Deployment (``app: <name>``, the image KAI's operator, JobSet's and Trainer's manifests
name) with one Running, Ready pod, on no simulated node and asking for no GPU. Once its pod is gone or being deleted
(the suite's ``DELETE``), the next round of the controllers finds the component down: its pod goes at once (its
container exits on SIGTERM), its Deployment is not Available (``availableReplicas: 0``), the ReplicaSet's
replacement pod is there but not Ready (``ContainerCreating``), and the component does nothing (its step of the
round is skipped: :meth:`~tests.fakes.simulation.Simulation._acts`). ``downtime`` seconds of the wall clock
(``time.monotonic``: chaos flows run the controllers in the background) after it went down, the replacement is
Running and Ready, the Deployment Available, and the component starts anew: what it kept in memory is dropped and
rebuilt from the API (each mixin's ``_forget``: the scheduler's PodGroup order, staleness timers, eviction times and
plans; every informer cache).

The ``restart_*`` :class:`~tests.fakes.simulation.Faults` act once their component has restarted in the run
(tests/fakes/restart_faults.py).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.snapshot import is_terminating, uid_of
from tests.builders import deployment
from tests.fakes.binder import Binder
from tests.fakes.kai.lifecycle import KaiLifecycle
from tests.fakes.simulation import (
    BINDER,
    JOBSET_CONTROLLER,
    PODGROUP_CONTROLLER,
    QUEUE_CONTROLLER,
    STACK_POD_LABEL,
    TRAINER_CONTROLLER,
    Obj,
)
from tests.fakes.stack import KAI_OPERANDS, KAI_REGISTRY

KAI_NAMESPACE = "kai-scheduler"
#: Deployment → image name of KAI's operands: the ones the stack publishes and KAI's two status controllers.
KAI_COMPONENTS = {**KAI_OPERANDS, "queue-controller": QUEUE_CONTROLLER, "podgroup-controller": PODGROUP_CONTROLLER}
JOBSET_DEPLOYMENT = ("jobset-controller-manager", "jobset-system", "registry.k8s.io/jobset/jobset:v0.12.0")
TRAINER_DEPLOYMENT = ("kubeflow-trainer-controller-manager", "kubeflow-system",
                      "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0")  # fmt: skip
#: Kind → (component, validating webhook, its Service) for the webhooks a restarted component serves itself, all
#: ``failurePolicy: Fail``: KAI's queue-controller serves ``queue-validation.kai.scheduler`` (the real-kind chaos run
#: of 2026-11-24 met it refusing: docs/clusters.md), Trainer's manager ``validator.trainjob.trainer.kubeflow.org``
#: (../shared/reference/trainer-jobset.md, "Webhooks"), JobSet's manager ``mjobset.kb.io`` (same, JobSet install).
WEBHOOKS = {
    "Queue": (QUEUE_CONTROLLER, "queue-validation.kai.scheduler", "queue-controller.kai-scheduler.svc"),
    "TrainJob": (TRAINER_CONTROLLER, "validator.trainjob.trainer.kubeflow.org",
                 "kubeflow-trainer-controller-manager.kubeflow-system.svc"),
    "JobSet": (JOBSET_CONTROLLER, "mjobset.kb.io", "jobset-webhook-service.jobset-system.svc"),
}  # fmt: skip
#: Seconds a deleted component stays down before its replacement is Ready, unless ``restartable`` is told otherwise.
DEFAULT_DOWNTIME = 0.05


@dataclass(frozen=True)
class StackDeployment:
    component: str  # the image name (suites/support/components.py)
    name: str
    namespace: str
    image: str


def stack_deployments(kai_version: str) -> tuple[StackDeployment, ...]:
    """Every restartable component's Deployment: KAI's five, JobSet's and Trainer's controller managers."""
    kai = [StackDeployment(image, name, KAI_NAMESPACE, f"{KAI_REGISTRY}/{image}:{kai_version}")
           for name, image in KAI_COMPONENTS.items()]  # fmt: skip
    return (*kai, StackDeployment(JOBSET_CONTROLLER, *JOBSET_DEPLOYMENT),
            StackDeployment(TRAINER_CONTROLLER, *TRAINER_DEPLOYMENT))  # fmt: skip


@dataclass
class ComponentState:
    deployment: StackDeployment
    pod: str  # the name of its current pod
    uid: str
    down_since: float | None = None  # time.monotonic() when it went down; None while it runs
    restarts: int = 0


class Restarts(Binder, KaiLifecycle):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.downtime = DEFAULT_DOWNTIME
        #: The clock downtime is measured on (a self-test may replace it).
        self.monotonic: Callable[[], float] = time.monotonic
        #: Whether a component whose downtime is over may come back: a self-test holds one down until an event of
        #: its own (say, its webhook refused a write), instead of racing the downtime against the wall clock.
        self.comes_back: Callable[[str], bool] = lambda component: True
        #: The writes a down component's webhook refused, as "<component>: <operation> <kind> <name>".
        self.refused_writes: list[str] = []
        self._components: dict[str, ComponentState] = {}

    # ------------------------------------------------------------------------------------------- public
    def restart_count(self, component: str) -> int:
        """How often ``component`` (its image name) came back after its pod was deleted."""
        state = self._components.get(component)
        return state.restarts if state is not None else 0

    def forget_restarts(self) -> None:
        """Count no restart so far: the ``restart_*`` faults act again only after the next restart (a self-test that
        wants each chaos mix judged on its own restarts, as a replay on a fresh cluster would be)."""
        for state in self._components.values():
            state.restarts = 0

    def mark_restarted(self, component: str) -> None:
        """Count one restart of ``component`` as if it had happened before now: its ``restart_*`` fault acts from the
        start, whatever the moments of the restarts to come."""
        self._components[component].restarts = max(self._components[component].restarts, 1)

    def component_up(self, component: str) -> bool:
        """Up: not down, and its pod neither gone nor being deleted. A deleted pod takes the component down at the
        DELETE itself (its container exits on SIGTERM), not at the next round of the controllers: the call after a
        restart's DELETE meets it down, whenever the background thread gets its turn."""
        state = self._components.get(component)
        if state is None:
            return True
        if state.down_since is not None:
            return False
        pod = self.fake.store.get(self.fake._key(kinds.POD, state.deployment.namespace, state.pod))
        return pod is not None and uid_of(pod) == state.uid and not is_terminating(pod)

    def remove_components(self) -> None:
        """Take the component pods away (their Deployments stay) and stop tracking them: the cluster's end."""
        with self.fake.lock:
            for state in self._components.values():
                self.fake._remove(kinds.POD, state.deployment.namespace, state.pod)
            self._components.clear()

    # ------------------------------------------------------------------------------------------- lifecycle
    def _publish_components(self, downtime: float) -> None:
        self.fake.admission.append(self._webhooks_of_components)
        with self.fake.lock:
            self.downtime = downtime
            for spec in stack_deployments(self.kai_version):
                self.fake.put(deployment(spec.name, spec.image, available=self._may_be_available(spec),
                                         namespace=spec.namespace))  # fmt: skip
                pod = self.fake.put(self._component_pod(spec, ready=True))
                self._components[spec.component] = ComponentState(spec, pod["metadata"]["name"], uid_of(pod))

    def _webhooks_of_components(self, operation: str, obj: Obj, dry_run: bool) -> None:
        """The validating webhooks a component serves itself refuse every write while it is down, as the API server
        answers when the webhook's Service has no ready endpoint (``failurePolicy: Fail``): seen on real kind for
        KAI's Queue webhook right after the queue-controller's restart."""
        served = WEBHOOKS.get(obj.get("kind", ""))
        if served is None or self.component_up(served[0]):
            return
        component, webhook, service = served
        self.refused_writes.append(f"{component}: {operation} {obj['kind']} {obj['metadata'].get('name')}")
        raise errors.ServerError(
            f"{operation} {obj['kind']} {obj['metadata'].get('name')}", 500, "InternalError",
            f'Internal error occurred: failed calling webhook "{webhook}": failed to call webhook: Post '
            f'"https://{service}:443/validate": dial tcp: connect: connection refused',
        )  # fmt: skip

    def _components_round(self) -> bool:
        """Notice the component pods that were deleted; bring back those whose downtime is over."""
        if not self._components:
            return False
        now = self.monotonic()
        changed = False
        for state in self._components.values():
            changed |= self._watch(state, now)
        return changed

    def _watch(self, state: ComponentState, now: float) -> bool:
        spec = state.deployment
        pod = self.fake.store.get(self.fake._key(kinds.POD, spec.namespace, state.pod))
        mine = pod is not None and uid_of(pod) == state.uid
        if pod is not None and mine and not is_terminating(pod):
            if state.down_since is None or now - state.down_since < self.downtime:
                return False
            if not self.comes_back(spec.component):
                return False
            return self._come_back(state)
        if mine:  # deleted but kept (a finalizer, a grace period): its container exits on SIGTERM within the round
            self.fake._remove(kinds.POD, spec.namespace, state.pod)
        if state.down_since is None:
            self._set_available(spec, False)
        state.down_since = now  # a replacement deleted before it was Ready: the downtime starts again
        replacement = self.fake.put(self._component_pod(spec, ready=False))
        state.pod, state.uid = replacement["metadata"]["name"], uid_of(replacement)
        return True

    def _come_back(self, state: ComponentState) -> bool:
        spec = state.deployment
        pod = self._find(kinds.POD, state.pod, spec.namespace)
        if pod is None:
            return False
        pod["status"] = _pod_status(spec, self._now(), ready=True)
        self.fake.write(pod)
        self._set_available(spec, True)
        state.down_since = None
        state.restarts += 1
        self._forget(spec.component)
        return True

    def _may_be_available(self, spec: StackDeployment) -> bool:
        return not (self.faults.binder_down and spec.component == BINDER)

    def _set_available(self, spec: StackDeployment, available: bool) -> None:
        stored = self._find(kinds.DEPLOYMENT, spec.name, spec.namespace)
        if stored is None:
            return
        shown = available and self._may_be_available(spec)
        stored["status"] = deployment(spec.name, spec.image, available=shown, namespace=spec.namespace)["status"]
        self.fake.write(stored)

    def _component_pod(self, spec: StackDeployment, *, ready: bool) -> Obj:
        """A pod of the Deployment's ReplicaSet: ``<deployment>-<template hash>-<5 characters>``, no owner, no node."""
        template = hashlib.sha256(spec.image.encode()).hexdigest()[:10]
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{spec.name}-{template}-{uuid.uuid4().hex[:5]}", "namespace": spec.namespace,
                         "labels": {"app": spec.name, "pod-template-hash": template, STACK_POD_LABEL: spec.component}},
            "spec": {"containers": [{"name": spec.name, "image": spec.image}]},
            "status": _pod_status(spec, self._now(), ready=ready),
        }  # fmt: skip

    # ------------------------------------------------------------------------------------------- hooks
    def _acts(self, component: str) -> bool:
        return self.component_up(component) and super()._acts(component)

    def _restarted(self, component: str) -> bool:
        return self.restart_count(component) > 0 or super()._restarted(component)


def _pod_status(spec: StackDeployment, now: str, *, ready: bool) -> Obj:
    value = "True" if ready else "False"
    conditions = [{"type": kind, "status": value, "lastTransitionTime": now} for kind in ("ContainersReady", "Ready")]
    if not ready:
        for condition in conditions:
            condition.update(reason="ContainersNotReady", message=f"containers with unready status: [{spec.name}]")
    state = {"running": {"startedAt": now}} if ready else {"waiting": {"reason": "ContainerCreating"}}
    return {
        "phase": "Running" if ready else "Pending",
        "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": now}, *conditions],
        "containerStatuses": [{"name": spec.name, "image": spec.image, "ready": ready, "started": ready,
                               "restartCount": 0, "state": state}],
        **({"startTime": now} if ready else {}),
    }  # fmt: skip
