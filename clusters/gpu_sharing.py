"""What KAI's GPU sharing needs on a cluster whose GPUs are fake, and the suite provides when they are its own.

Facts (KAI v0.16.8 and v0.17.0; cited in suites/support/expectations/sharing.py):

* KAI's admission gives every pod asking for a GPU fraction ``runtimeClassName: nvidia`` (the Config's
  ``spec.admission.gpuFractionRuntimeClassName``; v0.13–v0.15 ``gpuPodRuntimeClassName``, on every GPU pod). The
  NVIDIA GPU Operator creates that RuntimeClass; a kind cluster has none, and the API server refuses a pod naming a
  RuntimeClass that does not exist. :func:`ensure_fraction_runtime_class` creates it, with kind's own ``runc``
  handler, when the suite installs the stack on fake GPUs — labelled as the run's stack object, so a run removes it
  only if it created it (clusters/install/suite.py).
* Before binding a fractional pod the binder creates a reservation pod in ``kai-resource-reservation`` that requests
  ``nvidia.com/gpu: 1`` on the chosen node and waits up to 40 s for the annotation ``run.ai/reserve_for_gpu_index``,
  which the pod's own process writes from NVML. On nodes labelled ``run.ai/fake.gpu=true`` (the kind topologies do)
  KAI's operator starts the binder with ``--fake-gpu-nodes`` and the reservation pod only runs ``ubuntu`` ``sleep
  infinity``: the kind nodes pull ``ubuntu`` from Docker Hub, or load it with ``--load-image ubuntu:latest``. Nobody
  writes the annotation then (in KAI's e2e fake-gpu-operator's status-updater does), so on kind the suite answers
  for its fake GPUs: :func:`answer_reservations`, run by :class:`ReservationAnswers` while a sharing case runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.waits import POLL_INTERVAL

Obj = dict[str, Any]
#: RuntimeClass KAI's admission sets unless configured otherwise (``constants.DefaultRuntimeClassName``:27).
DEFAULT_FRACTION_RUNTIME_CLASS = "nvidia"
#: Node label telling KAI's operator the GPUs are fake (``operands/binder/resources.go``:124).
FAKE_GPU_NODE_LABEL = "run.ai/fake.gpu"
#: Where the binder puts its reservation pods (``constants.DefaultResourceReservationName``:23) and the annotation it
#: waits for on them (``resource_reservation.go``:44).
RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVED_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"
#: kind's containerd runtime handler (its only one): a RuntimeClass naming it runs pods as without a class.
KIND_RUNTIME_HANDLER = "runc"
#: Config fields naming the admission's RuntimeClass, the one that wins first (v0.16+ reads both).
RUNTIME_CLASS_FIELDS = ("gpuFractionRuntimeClassName", "gpuPodRuntimeClassName")


def fraction_runtime_class(configs: Iterable[Obj]) -> str:
    """The RuntimeClass KAI's admission sets on fractional pods: from the operator Config's ``spec.admission``, else
    the admission's default ``nvidia`` (an empty value turns the injection off: ``""``)."""
    for config in configs:
        admission = (config.get("spec") or {}).get("admission") or {}
        for field in RUNTIME_CLASS_FIELDS:
            if field in admission and admission[field] is not None:
                return str(admission[field])
    return DEFAULT_FRACTION_RUNTIME_CLASS


def kai_configs(kube: KubeApi) -> list[Obj]:
    """KAI's operator Config objects (none when KAI runs without its operator or the CRD is not served)."""
    try:
        return kube.list(kinds.KAI_CONFIG)
    except (errors.KindNotServed, errors.Forbidden):
        return []


def has_fake_gpu_nodes(kube: KubeApi) -> bool:
    """Nodes labelled ``run.ai/fake.gpu=true``: the label KAI's operator itself reads to know the GPUs are fake."""
    return bool(kube.list(kinds.NODE, labels=f"{FAKE_GPU_NODE_LABEL}=true"))


def runtime_class(name: str) -> Obj:
    return {
        "apiVersion": kinds.RUNTIME_CLASS.api_version,
        "kind": kinds.RUNTIME_CLASS.kind,
        "metadata": {"name": name},
        "handler": KIND_RUNTIME_HANDLER,
    }


def ensure_fraction_runtime_class(kube: KubeApi, run_id: str) -> list[str]:
    """Create the admission's RuntimeClass (handler ``runc``) unless it exists; returns what was created."""
    name = fraction_runtime_class(kai_configs(kube))
    if not name or kube.find(kinds.RUNTIME_CLASS, name) is not None:
        return []
    kube.apply(stamp(runtime_class(name), run_id))
    return [f"RuntimeClass {name} (handler {KIND_RUNTIME_HANDLER}, for KAI's fractional GPU pods on fake GPUs)"]


def fake_gpu_id(node: str, index: int) -> str:
    """What the suite tells the binder a reservation pod got: a GPU id unique per node (NVML would give a UUID)."""
    return f"GPU-kai-conformance-{node}-{index}"


#: Why a container of a reservation pod could not start: its image could not be pulled.
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull")


def unpulled_images(pods: list[Obj]) -> set[str]:
    """``ubuntu (ErrImagePull)``: the images of reservation pods whose containers wait for a pull that fails. KAI's
    binder gives its reservation pods the image ``ubuntu`` on nodes without a real GPU (v0.17.0
    ``pkg/binder/binding/resourcereservation/resource_reservation.go``, ``fakeGPuNodes``), which an offline or
    mirrored cluster cannot pull: the pods never run, and on the suite's fake GPUs nothing depends on them."""
    found = set()
    for pod in pods:
        images = {c.get("name"): c.get("image", "?") for c in pod.get("spec", {}).get("containers", [])}
        for status in pod.get("status", {}).get("containerStatuses", []):
            reason = status.get("state", {}).get("waiting", {}).get("reason", "")
            if reason in PULL_FAILURES:
                found.add(f"{images.get(status.get('name'), status.get('image', '?'))} ({reason})")
    return found


def answer_reservations(kube: KubeApi, pods: list[Obj] | None = None) -> list[str]:
    """Annotate each reservation pod placed on a node and still unanswered with a fake GPU of that node that no
    other reservation pod holds (one GPU per reservation pod, as the device plugin would give). Returns the pods
    answered. The pods are KAI's, not the suite's: the patch is the suite acting as the fake GPUs' device layer."""
    pods = kube.list(kinds.POD, RESERVATION_NAMESPACE) if pods is None else pods
    held = {(p["spec"].get("nodeName"), (p["metadata"].get("annotations") or {}).get(RESERVED_GPU_ANNOTATION))
            for p in pods}  # fmt: skip
    answered = []
    for pod in sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"])):
        meta, node = pod["metadata"], pod["spec"].get("nodeName")
        if not node or meta.get("deletionTimestamp") or (meta.get("annotations") or {}).get(RESERVED_GPU_ANNOTATION):
            continue
        index = next(i for i in range(len(pods) + 1) if (node, fake_gpu_id(node, i)) not in held)
        gpu = fake_gpu_id(node, index)
        kube.patch(kinds.POD, meta["name"], {"metadata": {"annotations": {RESERVED_GPU_ANNOTATION: gpu}}},
                   namespace=RESERVATION_NAMESPACE, allow_foreign=True)  # fmt: skip
        held.add((node, gpu))
        answered.append(f"{meta['name']} on {node}: {gpu}")
    return answered


class ReservationAnswers:
    """:func:`answer_reservations` every ``interval`` seconds on a thread of its own, while the block runs.

    It is a stand-in for a controller (the device layer of the suite's fake GPUs), not a wait: it reacts to what the
    binder creates, within the binder's 40 s allocation timeout. Give it a client of its own (a thread must not
    share the case's). A failing API call is remembered and retried on the next round.
    """

    def __init__(self, kube: KubeApi, interval: float = POLL_INTERVAL) -> None:
        self.kube, self.interval = kube, interval
        self.answered: list[str] = []
        self.unpulled: set[str] = set()
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kai-conformance-reservations", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pods = self.kube.list(kinds.POD, RESERVATION_NAMESPACE)
                self.unpulled |= unpulled_images(pods)
                self.answered += answer_reservations(self.kube, pods)
            except errors.KubeError as exc:
                self.last_error = str(exc)
            self._stop.wait(self.interval)

    def __enter__(self) -> ReservationAnswers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=max(5.0, 4 * self.interval))

    def describe(self, most: int | None = None) -> str:
        """What was answered; ``most``: name at most that many (a chaos run answers one per shared GPU of every
        mix)."""
        text = f"the suite answered {len(self.answered)} reservation pod(s) for its fake GPUs"
        if self.answered:
            shown = self.answered if most is None else self.answered[:most]
            more = len(self.answered) - len(shown)
            text += ": " + "; ".join(shown) + (f"; and {more} more" if more else "")
        if self.unpulled:
            text += (
                f". The reservation pods' image could not be pulled: {', '.join(sorted(self.unpulled))}. KAI's binder "
                "gives reservation pods the image `ubuntu` on nodes without a real GPU (v0.17.0 resource_reservation.go); "
                "on an offline or mirrored cluster they never run. The suite answered their reservations itself, so the "
                "verdict does not depend on them (docs/clusters.md, 'Air-gapped')"
            )
        return text + (f" (last API error: {self.last_error})" if self.last_error else "")
