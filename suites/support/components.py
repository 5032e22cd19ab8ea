"""The components along a TrainJob's chain, and whether the one that should act next is up.

A component is recognised by what it runs, not by where an install put it: a Deployment in any namespace with a
container whose image repository ends in the component's image name (``…/kai-scheduler/binder:v0.17.0`` →
``binder``). KAI's operator names its operand images that way (``deployments/kai-scheduler/values.yaml``:
``binder.image.name: binder``, ``podgrouper.image.name: podgrouper``, ``scheduler.image.name: scheduler``) and
labels each operand Deployment ``app: <deployment name>`` (``pkg/operator/operands/common``), which differs per
shard (``kai-scheduler-default``), so the image is the stable key. A component that runs outside Deployments (a
process, a static pod) has no health here: :func:`health` says so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kai_conformance.suites.support.snapshot import Obj, name_of


@dataclass(frozen=True)
class Component:
    name: str
    #: Image repository names (last path segment, without tag or digest) its Deployment runs.
    images: tuple[str, ...]
    #: What it does along the chain (for messages: "<name> <acts>").
    acts: str
    #: The diagnostics file with its log (fixtures/diagnostics.py).
    log: str = ""


TRAINER = Component(
    "Trainer controller", ("trainer-controller-manager",), "makes a TrainJob's JobSet", "logs-trainer.txt"
)
JOBSET = Component("JobSet controller", ("jobset",), "makes a JobSet's Jobs", "logs-jobset.txt")
JOB_CONTROLLER = Component("Job controller (kube-controller-manager)", (), "makes a Job's pods")
PODGROUPER = Component("KAI podgrouper", ("podgrouper",), "groups the pods into a PodGroup", "logs-kai-podgrouper.txt")
SCHEDULER = Component(
    "KAI scheduler", ("scheduler",), "places the PodGroup (BindRequests) or says why not", "logs-kai-scheduler.txt"
)
BINDER = Component(
    "KAI binder", ("binder",), "binds the pods the scheduler placed (BindRequests)", "logs-kai-binder.txt"
)


def image_name(image: str) -> str:
    """``ghcr.io/kai-scheduler/kai-scheduler/binder:v0.17.0`` → ``binder`` (also ``…@sha256:…``, ``host:5000/x``)."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def deployments_of(component: Component, deployments: Sequence[Obj]) -> list[Obj]:
    """The Deployments (any namespace) running one of the component's images."""

    def runs(deployment: Obj) -> bool:
        pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or [])
        return any(image_name(c.get("image") or "") in component.images for c in containers)

    return [d for d in deployments if runs(d)]


@dataclass(frozen=True)
class Health:
    """What the Deployments of a component say. ``up`` is None when there is nothing to judge by."""

    component: Component
    up: bool | None
    text: str


def _deployment_state(deployment: Obj) -> tuple[bool, str]:
    meta, spec, status = deployment["metadata"], deployment.get("spec") or {}, deployment.get("status") or {}
    where = f"Deployment {meta.get('namespace')}/{name_of(deployment)}"
    wanted = spec.get("replicas", 1)
    if wanted == 0:
        return False, f"{where} is scaled to 0 replicas"
    available = next((c for c in status.get("conditions") or [] if c.get("type") == "Available"), None)
    ready = f"{status.get('availableReplicas', 0)}/{wanted} available"
    if available is not None and available.get("status") != "True":
        reason = ": ".join(x for x in (available.get("reason"), available.get("message")) if x)
        return False, f"{where} not Available ({ready}{'; ' + reason if reason else ''})"
    if available is None and status.get("availableReplicas", 0) < 1:
        return False, f"{where}: {ready}"
    return True, f"{where} Available ({ready})"


def health(component: Component, deployments: Sequence[Obj] | None) -> Health:
    """Up when one of its Deployments is Available; down when all found are not; unknown when none is found."""
    if not component.images:
        return Health(component, None, f"{component.name}: not a Deployment (health not observable here)")
    if deployments is None:
        return Health(component, None, f"{component.name}: Deployments could not be read")
    found = deployments_of(component, deployments)
    if not found:
        images = " or ".join(component.images)
        return Health(component, None, f"{component.name}: no Deployment runs an image named {images} (health unknown)")
    states = [_deployment_state(d) for d in found]
    up = any(ok for ok, _ in states)
    return Health(component, up, "; ".join(text for _, text in states))
