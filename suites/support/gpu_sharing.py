"""Whether the cluster's stack runs GPU sharing, read from the cluster (never assumed), and what a sharing case
needs besides: the RuntimeClass KAI's admission puts on fractional pods, and KAI's GPU placement strategy.

Sources, first that answers (facts: suites/support/expectations/sharing.py):

* KAI's operator Config (``kai.scheduler/v1`` ``Config``, ``kai-config``): ``spec.admission.gpuSharing`` and the
  RuntimeClass field (Helm ``global.gpuSharing`` and ``admission.gpuFractionRuntimeClassName`` render there).
* Else (KAI without its operator, or the Config not readable) the admission Deployment's arguments, as the operator
  writes them: ``--gpu-sharing-enabled=true``, ``--gpu-fraction-runtime-class-name <name>``.
* The RuntimeClass named there, by name (``node.k8s.io/v1``).
* The default SchedulingShard's ``spec.placementStrategy.gpu``, as the placement suite reads it
  (:func:`~suites.support.placement_setting.active_placement`): only GPU bin-packing enables
  ``gpusharingorder``/``gpupack`` (``schedulingshard_types.go`` v0.17.0:257–260), which put two halves on one
  device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from kai_conformance.clusters.gpu_sharing import ReservationAnswers, fraction_runtime_class
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.suites.support.components import Component, deployments_of
from kai_conformance.suites.support.expectations.placement import DEFAULT_STRATEGY
from kai_conformance.suites.support.expectations.sharing import (
    DEFAULT_FRACTION_RUNTIME_CLASS,
    GPU_SHARING_SETTING,
    RESERVATION_NAMESPACE,
    RESERVED_GPU_ANNOTATION,
)
from kai_conformance.suites.support.placement_setting import ActivePlacement, active_placement
from kai_conformance.suites.support.snapshot import Obj, name_of

ADMISSION = Component("KAI admission", ("admission",), "admits pods (GPU sharing, RuntimeClass)")
BINPACK = DEFAULT_STRATEGY  # "binpack"


@dataclass(frozen=True)
class SharingSupport:
    #: GPU sharing on (True), off (False), or not readable (None).
    enabled: bool | None
    #: Where ``enabled`` was read, or why it could not be.
    evidence: str
    #: The RuntimeClass the admission sets on fractional pods ("" = none).
    runtime_class: str = DEFAULT_FRACTION_RUNTIME_CLASS
    #: Whether that RuntimeClass exists (None: not readable).
    runtime_class_exists: bool | None = True
    #: KAI's GPU placement strategy for the default shard (None: not readable) and where it was read.
    gpu_placement: str | None = BINPACK
    placement_source: str = ""

    def unavailable(self) -> str | None:
        """Why fractional pods cannot run here, naming the fix; None when they can."""
        enable = f"install KAI with --kai-set {GPU_SHARING_SETTING} (on kind, or with --install always)"
        if self.enabled is None:
            return f"cannot tell whether GPU sharing is on ({self.evidence}); {enable} and make kai-config readable"
        if not self.enabled:
            return f"GPU sharing is off on this cluster ({self.evidence}): {enable}"
        if self.runtime_class and self.runtime_class_exists is False:
            return (
                f"RuntimeClass {self.runtime_class}, which KAI's admission sets on every fractional pod, does not "
                "exist on this cluster, so the API server would refuse the pods: create it (the NVIDIA GPU Operator "
                "does; on kind with --install the suite does, with handler runc) or point "
                "admission.gpuFractionRuntimeClassName at one that exists"
            )
        return None

    def unshared_devices(self) -> str | None:
        """Why two fractional pods need not share a device here (the GPU placement strategy), or None."""
        if self.gpu_placement == BINPACK:
            return None
        found = (self.gpu_placement or "not readable") + (
            f" ({self.placement_source})" if self.placement_source else ""
        )
        return (
            f"KAI's GPU placement strategy is {found}; only binpack (KAI's default) puts "
            "fractions on a shared device first (gpusharingorder, gpupack): --kai-set scheduler.placementStrategy=binpack"
        )

    def describe(self) -> str:
        state = {True: "on", False: "off", None: "unknown"}[self.enabled]
        runtime = self.runtime_class or "none"
        return (
            f"GPU sharing {state} ({self.evidence}); fractional pods get RuntimeClass {runtime}"
            f"{'' if self.runtime_class_exists is not False else ' (missing)'}; GPU placement "
            f"{self.gpu_placement or 'unknown'}"
        )


def _flag(args: Sequence[str], name: str) -> str | None:
    """``--name=value`` or ``--name value`` in ``args``."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1] if i + 1 < len(args) else "true"
    return None


def from_admission(deployments: Iterable[Obj]) -> tuple[bool | None, str, str]:
    """(enabled, evidence, RuntimeClass) from the admission Deployment's arguments."""
    found = deployments_of(ADMISSION, list(deployments))
    if not found:
        return None, "no kai-config and no Deployment running KAI's admission image", DEFAULT_FRACTION_RUNTIME_CLASS
    deployment = found[0]
    containers = deployment["spec"]["template"]["spec"].get("containers") or []
    args = [a for c in containers for a in (c.get("args") or [])]
    enabled = _flag(args, "--gpu-sharing-enabled") in ("true", "True")
    runtime = _flag(args, "--gpu-fraction-runtime-class-name")
    if runtime is None:
        runtime = _flag(args, "--gpu-pod-runtime-class-name")
    where = f"Deployment {deployment['metadata'].get('namespace')}/{name_of(deployment)} args"
    text = f"{where}: --gpu-sharing-enabled {'=true' if enabled else 'not set'}"
    return enabled, text, DEFAULT_FRACTION_RUNTIME_CLASS if runtime is None else runtime


def sharing_support(
    configs: Sequence[Obj] | None,
    deployments: Iterable[Obj],
    runtime_classes: Iterable[str] | None,
    placement: ActivePlacement,
) -> SharingSupport:
    """What the objects say (``None`` for a list that could not be read) and the placement strategy in force."""
    if configs:
        admission = (configs[0].get("spec") or {}).get("admission") or {}
        enabled: bool | None = bool(admission.get("gpuSharing"))
        evidence = f"Config {name_of(configs[0])} spec.admission.gpuSharing = {str(enabled).lower()}"
        runtime = fraction_runtime_class(configs)
    else:
        enabled, evidence, runtime = from_admission(deployments)
    exists = None if runtime_classes is None else runtime in set(runtime_classes)
    return SharingSupport(enabled, evidence, runtime, exists, placement.gpu, placement.source)


def read_sharing_support(kube: KubeApi) -> SharingSupport:
    """:func:`sharing_support` of what this cluster lets the suite read."""

    def attempt(kind: kinds.Kind) -> list[Obj] | None:
        try:
            return kube.list(kind)
        except (errors.KindNotServed, errors.Forbidden):
            return None

    classes = attempt(kinds.RUNTIME_CLASS)
    return sharing_support(
        attempt(kinds.KAI_CONFIG),
        attempt(kinds.DEPLOYMENT) or [],
        None if classes is None else [name_of(c) for c in classes],
        active_placement(kube),
    )


def describe_reservations(pods: Sequence[Obj]) -> str:
    """The binder's reservation pods as a failure note: which GPU each was given, or that nobody answered yet."""
    if not pods:
        return f"no reservation pod in {RESERVATION_NAMESPACE} (the binder makes one per shared GPU before binding)"
    described = []
    for pod in pods:
        gpu = (pod["metadata"].get("annotations") or {}).get(RESERVED_GPU_ANNOTATION)
        phase = (pod.get("status") or {}).get("phase", "?")
        answer = f"GPU {gpu}" if gpu else f"no {RESERVED_GPU_ANNOTATION} yet"
        described.append(f"{name_of(pod)} on {pod['spec'].get('nodeName') or 'no node'} ({phase}): {answer}")
    unanswered = sum(1 for p in pods if RESERVED_GPU_ANNOTATION not in (p["metadata"].get("annotations") or {}))
    hint = (
        "; the binder waits 40 s for that answer: the reservation pod's own NVML query gives it on real GPUs, the "
        "suite on kind's fake GPUs (clusters/gpu_sharing.py), fake-gpu-operator's status-updater on its fake GPUs"
        if unanswered
        else ""
    )
    return f"reservation pods in {RESERVATION_NAMESPACE}: " + "; ".join(described) + hint


@contextlib.contextmanager
def answering_reservations(
    support: SharingSupport, provider: str, client: Callable[[], KubeApi]
) -> Iterator[ReservationAnswers | None]:
    """While the block runs, answer the binder's reservation pods for the suite's own fake GPUs (kind, sharing on),
    on a client of its own (closed at the end); elsewhere the cluster's device layer answers: yields None."""
    if support.unavailable() or provider != "kind":
        yield None
        return
    kube = client()
    try:
        with ReservationAnswers(kube) as answers:
            yield answers
    finally:
        close = getattr(kube, "close", None)
        if close:
            close()
