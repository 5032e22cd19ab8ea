"""The kwok Stages the suite installs: how a pod on a fake node ends when it is deleted.

kwok's release ``stage-fast.yaml`` (kustomize/stage/fast at v0.8.0) ends a pod in two ways the suite cannot use:
``pod-complete`` turns every Running pod owned by a Job into Succeeded at once (the suite's workloads are Jobs that
must run until evicted), and ``pod-delete`` removes a pod the moment it has a deletionTimestamp, finalizers or not,
so an eviction never shows the Failed phase and exit code a kubelet reports. The suite keeps the release's node
stages and ``pod-ready`` (:data:`KEPT_RELEASE_STAGES`) and adds its own ending, modelled on kwok's "general" pod
stages (kustomize/stage/pod/general/pod-delete.yaml: delete only once ``.metadata.finalizers`` is gone):

1. :data:`TERMINATE_STAGE` — a deleted pod that is still Pending or Running gets every container terminated with
   the exit code the workload gives on SIGTERM (:data:`~clusters.suite_stack.EVICTED_EXIT_CODE`, 143 for
   ``WORKLOAD_COMMAND``), ``reason: Error``, Ready false, and phase Failed (a kubelet derives the phase from the
   exit codes of a ``restartPolicy: Never`` pod: pkg/kubelet/kubelet_pods.go ``getPhase``).
2. :data:`REMOVE_STAGE` — a deleted pod whose phase is final and that carries no finalizer is deleted (the kubelet's
   final delete with grace 0, which the API server holds back while finalizers remain).

Field names follow kwok v0.8.0 pkg/apis/v1alpha1/stage_types.go (StageSpec.resourceRef/selector/delay/next;
StageNext.statusTemplate/delete; SelectorRequirement key/operator/values with jq keys).
"""

from __future__ import annotations

from typing import Any

from kai_conformance.clusters.suite_stack import EVICTED_EXIT_CODE
from kai_conformance.fixtures import kinds

#: Stages of the release's stage-fast.yaml the suite applies as they are (kwok v0.8.0 kustomize/stage/fast).
KEPT_RELEASE_STAGES = ("node-initialize", "node-heartbeat-with-lease", "pod-ready")
TERMINATE_STAGE = "kai-conformance-pod-terminate"
REMOVE_STAGE = "kai-conformance-pod-remove"
#: What a kubelet leaves between SIGTERM and the container's exit for the suite's workload: milliseconds. A short
#: delay keeps the Terminating state observable, as on a real node.
TERMINATE_DELAY_MS = 500

_TERMINATED_STATUS = """\
{{{{ $now := Now }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  type: Ready
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  type: ContainersReady
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {exit_code}
      finishedAt: {{{{ $now | Quote }}}}
      reason: Error
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: Failed
"""


def _stage(name: str, selector: list[dict[str, Any]], next_: dict[str, Any], delay_ms: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": selector},
        "next": next_,
    }
    if delay_ms is not None:
        spec["delay"] = {"durationMilliseconds": delay_ms}
    return {
        "apiVersion": kinds.KWOK_STAGE.api_version,
        "kind": kinds.KWOK_STAGE.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def suite_stages(exit_code: int = EVICTED_EXIT_CODE) -> list[dict[str, Any]]:
    """The suite's pod-ending stages (unlabelled: the caller stamps them as its own)."""
    deleted = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
    terminate = _stage(
        TERMINATE_STAGE,
        [deleted, {"key": ".status.phase", "operator": "In", "values": ["Pending", "Running"]}],
        {"statusTemplate": _TERMINATED_STATUS.format(exit_code=int(exit_code))},
        TERMINATE_DELAY_MS,
    )
    remove = _stage(
        REMOVE_STAGE,
        [
            deleted,
            {"key": ".status.phase", "operator": "In", "values": ["Failed", "Succeeded"]},
            {"key": ".metadata.finalizers", "operator": "DoesNotExist"},
        ],
        {"delete": True},
        None,
    )
    return [terminate, remove]


def release_stages_kept(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The release stages the suite keeps; every other object of stage-fast.yaml is left out."""
    return [o for o in objs if o.get("kind") == "Stage" and o["metadata"]["name"] in KEPT_RELEASE_STAGES]
