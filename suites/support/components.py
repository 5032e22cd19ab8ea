"""The components along a TrainJob's chain, and whether the one that should act next is up.

A component is recognised by what it runs, not by where an install put it: a Deployment in any namespace with a
container whose image repository ends in the component's image name (``…/kai-scheduler/binder:v0.17.0`` →
``binder``). KAI's operator names its operand images that way (``deployments/kai-scheduler/values.yaml``:
``binder.image.name: binder``, ``podgrouper.image.name: podgrouper``, ``scheduler.image.name: scheduler``) and
labels each operand Deployment ``app: <deployment name>`` (``pkg/operator/operands/common``), which differs per
shard (``kai-scheduler-default``), so the image is the stable key. A component that runs outside Deployments (a
process, a static pod) has no health here: :func:`health` says so instead of guessing.

A Deployment that is Available again says nothing of a controller the kernel killed for memory a minute ago, and
that is how a controller too small for the cluster fails (KAI v0.17.0's binder at 1,000 fake nodes,
docs/performance.md): given the component's pods, :func:`health` names their OOM kills with the memory limit and
the fix.
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
    #: Where its memory limit is set, for the fix of an OOM kill.
    memory: str = "its Deployment's memory limit"


TRAINER = Component(
    "Trainer controller", ("trainer-controller-manager",), "makes a TrainJob's JobSet", "logs-trainer.txt"
)
JOBSET = Component("JobSet controller", ("jobset",), "makes a JobSet's Jobs", "logs-jobset.txt")
JOB_CONTROLLER = Component("Job controller (kube-controller-manager)", (), "makes a Job's pods")
NODE_LIFECYCLE = Component(
    "node lifecycle controller (kube-controller-manager)", (), "evicts the pods of a node NotReady too long"
)
#: KAI's operator renders each operand's limits from its Config (clusters/install/kai_sizing.py).
_KAI_MEMORY = "kai-config spec.{}.service.resources.limits.memory (on kind with fake nodes the suite raises it: --kai-sizing auto)"
PODGROUPER = Component("KAI podgrouper", ("podgrouper",), "groups the pods into a PodGroup", "logs-kai-podgrouper.txt",
                       _KAI_MEMORY.format("podGrouper"))  # fmt: skip
SCHEDULER = Component(
    "KAI scheduler",
    ("scheduler",),
    "places the PodGroup (BindRequests) or says why not",
    "logs-kai-scheduler.txt",
    _KAI_MEMORY.format("scheduler"),
)
BINDER = Component(
    "KAI binder",
    ("binder",),
    "binds the pods the scheduler placed (BindRequests)",
    "logs-kai-binder.txt",
    _KAI_MEMORY.format("binder"),
)
#: Every component with Deployments: whose pods a diagnosis reads.
WITH_DEPLOYMENTS = (TRAINER, JOBSET, PODGROUPER, SCHEDULER, BINDER)
OOM_KILLED = "OOMKilled"


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


def oom_kills(component: Component, pods: Sequence[Obj]) -> str:
    """``pod kai-scheduler/binder-7c9 killed for memory (OOMKilled; 4 restarts; memory limit 200Mi): raise …``,
    for each of the component's pods whose container was OOMKilled last or now; "" when none was."""
    found = []
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        limits = {c.get("name"): ((c.get("resources") or {}).get("limits") or {}).get("memory")
                  for c in spec.get("containers") or []}  # fmt: skip
        for container in status.get("containerStatuses") or []:
            if image_name(container.get("image") or "") not in component.images:
                continue
            states = (container.get("lastState") or {}, container.get("state") or {})
            if any((state.get("terminated") or {}).get("reason") == OOM_KILLED for state in states):
                limit = limits.get(container.get("name")) or "none"
                where = f"{pod['metadata'].get('namespace')}/{name_of(pod)}"
                found.append(f"pod {where} killed for memory ({OOM_KILLED}; {container.get('restartCount', 0)} "
                             f"restarts; memory limit {limit})")  # fmt: skip
    return f"{'; '.join(found)}: raise {component.memory}" if found else ""


def health(component: Component, deployments: Sequence[Obj] | None, pods: Sequence[Obj] | None = None) -> Health:
    """Up when one of its Deployments is Available; down when all found are not; unknown when none is found. With
    ``pods``, what the kernel killed of it for memory is said too (up or not)."""
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
    killed = oom_kills(component, pods or ())
    return Health(component, up, "; ".join([*(text for _, text in states), *([killed] if killed else [])]))
