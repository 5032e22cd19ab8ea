"""GPU sharing: the per-version rows and the facts that hold for every row (the style of
:mod:`suites.support.expectations`, which exposes the row as ``expect.sharing``).

Read at KAI-Scheduler ``v0.16.8`` and ``v0.17.0`` (``v0.13.0``–``v0.15.0`` for the older rows):

* **Turning it on.** Helm ``global.gpuSharing`` (default false; ``deployments/kai-scheduler/values.yaml`` v0.16.8:15,
  v0.17.0:20) becomes the operator Config's ``spec.admission.gpuSharing`` (``templates/_helpers.tpl`` v0.16.8:195,
  v0.17.0:246) and the admission's ``--gpu-sharing-enabled=true`` (``pkg/operator/operands/admission/resources.go``
  v0.16.8:377, v0.17.0:397). Without it the admission webhook *rejects* a pod asking for a fraction ("attempting to
  create a pod … with gpu sharing request, while GPU sharing is disabled", ``gpusharing/gpu_sharing.go``:43 at
  every tag), so its Job never gets the pod.
* **Asking for a fraction.** The pod annotation ``gpu-fraction`` (``pkg/common/constants/constants.go`` v0.16.8 and
  v0.17.0:56), a number in (0, 1), and no ``nvidia.com/gpu`` limit beside it (``gpu_request_validator.go``). It must
  be on the *pod*: a TrainJob gets it there through a runtime's or a runtimePatch's pod template (where pod metadata
  arrives, :data:`~suites.support.expectations.ARRIVALS`).
* **The RuntimeClass.** KAI's admission sets ``runtimeClassName`` (``admission.gpuFractionRuntimeClassName``,
  default ``nvidia`` = ``constants.DefaultRuntimeClassName``:27) on a pod that has none. From v0.16.0 only on pods
  asking for a fraction (``runtimeenforcement/runtime_enforcement.go`` ``Mutate``:31, ``RequestsGPUFraction``);
  v0.13–v0.15 on every pod asking for a GPU, whole or fraction (``Mutate`` v0.13.0:32, ``RequestsGPU``; Config field
  ``gpuPodRuntimeClassName``, still read by v0.16+ as a deprecated fallback). A pod naming a RuntimeClass that does
  not exist is refused by the API server, so a cluster without it never gets the pods.
* **What the scheduler decides.** One BindRequest per pod (named after it) with ``receivedResourceType: Fraction``,
  ``receivedGPU: {count: 1, portion: "0.50"}`` (``fmt.Sprintf("%.2f")``) and ``selectedGPUGroups: [<group>]``: pods
  sharing a device share the group (``pkg/scheduler/cache/cache.go`` ``createBindRequest`` v0.16.8:370–375,
  v0.17.0:371–376; ``pod_info.go``:63 ``ReceivedTypeFraction``). The binder labels each pod ``runai-gpu-group:
  <group>`` (``resource_reservation.go`` ``updatePodGPUGroup``:294).
* **Reservation pods.** Before binding the first pod of a group, the binder creates a pod in
  ``kai-resource-reservation`` (``constants.DefaultResourceReservationName``:23) on the chosen node that requests
  ``nvidia.com/gpu: 1`` and waits up to 40 s (``--resource-reservation-allocation-timeout``) for it to be annotated
  ``run.ai/reserve_for_gpu_index`` (``resource_reservation.go``:44): the reservation pod's own process writes the
  GPU's UUID from NVML (``pkg/resourcereservation/discovery``); with fake GPUs, the operator passes the binder
  ``--fake-gpu-nodes`` when a node is labelled ``run.ai/fake.gpu=true`` (``operands/binder/resources.go``:118–131,
  244) and the pod runs ``ubuntu`` ``sleep infinity`` instead (``resource_reservation.go`` v0.16.8:590,
  v0.17.0:603), and something else must answer: fake-gpu-operator's status-updater in KAI's e2e, the suite itself on
  kind (``clusters/gpu_sharing.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

# Facts the cluster side needs too (clusters/gpu_sharing.py provides what fake GPUs lack); the same at every row.
from kai_conformance.clusters.gpu_sharing import (  # noqa: F401 (re-exported: the facts of this table)
    DEFAULT_FRACTION_RUNTIME_CLASS,
    FAKE_GPU_NODE_LABEL,
    RESERVATION_NAMESPACE,
    RESERVED_GPU_ANNOTATION,
)
from kai_conformance.suites.support.expectations.version_rows import row_for

#: Pod annotation asking for a portion of one GPU (constants.go:56).
GPU_FRACTION_ANNOTATION = "gpu-fraction"
#: The Helm value that turns GPU sharing on, as ``--kai-set`` takes it.
GPU_SHARING_SETTING = "global.gpuSharing=true"
#: BindRequest ``spec.receivedResourceType`` of a fractional pod (pod_info.go:63).
FRACTION = "Fraction"
#: Pod label naming the shared GPU group the binder reserved (constants.go v0.16.8:74, v0.17.0:75).
GPU_GROUP_LABEL = "runai-gpu-group"


def portion_text(fraction: float) -> str:
    """How the scheduler writes a portion into ``receivedGPU.portion`` (``%.2f``)."""
    return f"{fraction:.2f}"


@dataclass(frozen=True)
class SharingRow:
    minor: str
    #: The admission sets its RuntimeClass on pods asking for whole GPUs too, not only on fractional ones.
    runtime_class_on_whole_gpu_pods: bool
    #: The Config field naming that RuntimeClass.
    runtime_class_field: str

    @property
    def name(self) -> str:
        return f"KAI {self.minor} GPU sharing"

    @property
    def runtime_class_pods(self) -> str:
        return "every GPU pod" if self.runtime_class_on_whole_gpu_pods else "fractional pods only"


SHARING_ROWS: dict[str, SharingRow] = {
    row.minor: row
    for row in (
        SharingRow("v0.13", True, "gpuPodRuntimeClassName"),
        SharingRow("v0.14", True, "gpuPodRuntimeClassName"),
        SharingRow("v0.15", True, "gpuPodRuntimeClassName"),
        SharingRow("v0.16", False, "gpuFractionRuntimeClassName"),
        SharingRow("v0.17", False, "gpuFractionRuntimeClassName"),
    )
}


def sharing_row(version: str) -> SharingRow:
    return row_for(SHARING_ROWS, "KAI GPU-sharing", version, "suites/support/expectations/sharing.py")
