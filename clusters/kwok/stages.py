"""The kwok Stages the suite installs: how a pod on a fake node ends, deleted or on its own.

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
3. :data:`EXIT_STAGE` — a Running pod whose workload has a lifetime ends on its own, as
   :data:`~clusters.suite_stack.WORKLOAD_SCRIPT` ends on a kubelet (:func:`~clusters.suite_stack.planned_end` is the
   same contract in Python). Its env lives in the pod spec, the only place kwok can read it: the first container
   whose ``env`` gives ``KC_RUN_SECONDS`` a non-empty ``value`` (Trainer upserts ``spec.trainer.env`` into the
   ``node`` container; the runtimes area's initializers carry it in theirs). The Job completion index comes from the
   pod's ``batch.kubernetes.io/job-completion-index`` annotation, which the Job controller always sets (the label of
   that name, which ``JOB_COMPLETION_INDEX`` is a fieldRef to from Kubernetes 1.28, holds the same; kwok resolves no
   fieldRef). The stage matches only while that pod's
   end is planned (``KC_EXIT_INDEX`` empty or equal to the index), and its delay runs to an absolute time, the
   container's ``startedAt`` (else ``status.startTime``) plus ``KC_RUN_SECONDS`` + index × ``KC_STAGGER_SECONDS``:
   kwok re-matches a pod at every update and after its own restart, and a delay counted from when it looked would
   restart each time. Every container is then terminated with ``KC_EXIT_CODE`` % 256 (reason Completed for 0,
   Error otherwise), Ready false, phase Succeeded for 0 and Failed otherwise (``getPhase`` of a ``restartPolicy:
   Never`` pod). Unlike a kubelet it ends every container of the pod at once, restarts none
   (``restartPolicy: OnFailure``/``Always`` are not followed) and sends no signal; the suite's pods have one
   container and ``restartPolicy: Never``.

Which stage plays: kwok matches every stage against a pod at each of its events and picks one of those that match
(pkg/utils/lifecycle/lifecycle.go ``Match``: at random, weighted by ``weight``). The suite's stages and the release's
``pod-ready`` never match the same pod: ``pod-ready`` wants Pending, :data:`EXIT_STAGE` a Running pod that is not
being deleted, :data:`TERMINATE_STAGE` a deleted Pending/Running one, :data:`REMOVE_STAGE` a deleted ended one. A
pending exit is replaced when the pod is deleted: kwok keeps one delayed job per pod and swaps it for the next
matching stage's (pkg/kwok/controllers/pod_controller.go ``addStageJob``), so an evicted pod still ends with 143.
A kwok that also plays the release's ``pod-complete`` would take Running Job pods from it: the fast one at random,
the general one always (its weight 1 beats these stages' 0). The suite never installs it, and an operator applying
these stages removes it (docs/clusters.md, where what was checked on kwok v0.8.0 itself is listed).

Field names follow kwok v0.8.0 pkg/apis/v1alpha1/stage_types.go (StageSpec.resourceRef/selector/delay/next;
StageNext.statusTemplate/delete; MatchExpression key/operator/values and ExpressionFrom expressionFrom, the
spellings kwok v0.6 to v0.8 all read, as the release's own stages do). Expressions are jq as gojq runs it
(pkg/utils/expression): an expression that fails or yields nothing matches no ``Exists``, and a delay expression
that yields an RFC 3339 time is a delay until then (pkg/utils/lifecycle/value_duration_from.go). Templates are Go
text/template with sprig's functions and kwok's ``Now``/``Quote`` (pkg/utils/gotpl).

``python -m kai_conformance.clusters.kwok.stages`` (in a clone also ``python scripts/kwok_stages.py``) prints the
three stages as YAML for an operator whose kwok the suite does not install.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from kai_conformance.clusters.suite_stack import (
    EVICTED_EXIT_CODE,
    EXIT_CODE_ENV,
    EXIT_INDEX_ENV,
    RUN_SECONDS_ENV,
    STAGGER_ENV,
)
from kai_conformance.fixtures.kube import kinds

#: Stages of the release's stage-fast.yaml the suite applies as they are (kwok v0.8.0 kustomize/stage/fast).
KEPT_RELEASE_STAGES = ("node-initialize", "node-heartbeat-with-lease", "pod-ready")
TERMINATE_STAGE = "kai-conformance-pod-terminate"
REMOVE_STAGE = "kai-conformance-pod-remove"
EXIT_STAGE = "kai-conformance-pod-exit"
#: Where the Job controller writes a pod's completion index, on every pod of an Indexed Job
#: (pkg/controller/job/indexed_job_utils.go ``addCompletionIndexAnnotation``).
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
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


#: jq (gojq): when the pod's workload ends on its own, as an RFC 3339 time; nothing when it runs until killed. The
#: selector and the delay share it, so the stage never plays without the time it waits for. Shell semantics of
#: WORKLOAD_SCRIPT: an empty variable counts as unset (``${KC_EXIT_INDEX:-$i}``, ``-n "${KC_RUN_SECONDS:-}"``); the
#: index is compared as text, as ``[ … = "$i" ]`` does.
PLANNED_EXIT_JQ = (
    'first(.spec.containers[] | {name, env: ((.env // []) | map({key: .name, value: (.value // "")}) | from_entries)}'
    f' | select((.env.{RUN_SECONDS_ENV} // "") != "")) as $c'
    f' | (.metadata.annotations["{COMPLETION_INDEX_ANNOTATION}"] // "0") as $i'
    f' | select(($c.env.{EXIT_INDEX_ENV} // "") | . == "" or . == $i)'
    " | (first(.status.containerStatuses[]? | select(.name == $c.name) | .state.running.startedAt | values)"
    " // .status.startTime)"
    f" | fromdateiso8601 + ($c.env.{RUN_SECONDS_ENV} | tonumber)"
    f' + ($i | tonumber) * ($c.env.{STAGGER_ENV} // "" | if . == "" then 0 else tonumber end)'
    " | todateiso8601"
)

# The exit code comes from the same container the jq above picks (the first with a non-empty KC_RUN_SECONDS); an env
# entry without ``value`` (valueFrom) counts as empty. Each container keeps the startedAt it was Running since.
_EXITED_STATUS = f"""\
{{{{ $now := Now }}}}
{{{{ $code := 0 }}}}
{{{{ $found := false }}}}
{{{{ range .spec.containers }}}}
{{{{ $env := dict }}}}
{{{{ range .env }}}}{{{{ $_ := set $env .name (.value | default "") }}}}{{{{ end }}}}
{{{{ if and (not $found) (get $env "{RUN_SECONDS_ENV}") }}}}
{{{{ $found = true }}}}
{{{{ $code = mod (atoi (get $env "{EXIT_CODE_ENV}")) 256 }}}}
{{{{ end }}}}
{{{{ end }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  type: Ready
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  type: ContainersReady
containerStatuses:
{{{{ range .spec.containers }}}}
{{{{ $name := .name }}}}
{{{{ $started := $now }}}}
{{{{ range $.status.containerStatuses }}}}{{{{ if and (eq .name $name) .state.running }}}}{{{{ $started = .state.running.startedAt }}}}{{{{ end }}}}{{{{ end }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{{{ $code }}}}
      finishedAt: {{{{ $now | Quote }}}}
      reason: {{{{ if eq $code 0 }}}}Completed{{{{ else }}}}Error{{{{ end }}}}
      startedAt: {{{{ $started | Quote }}}}
{{{{ end }}}}
phase: {{{{ if eq $code 0 }}}}Succeeded{{{{ else }}}}Failed{{{{ end }}}}
"""


def exit_stage() -> dict[str, Any]:
    """:data:`EXIT_STAGE` (module docstring, 3)."""
    stage = _stage(
        EXIT_STAGE,
        [
            {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {"key": PLANNED_EXIT_JQ, "operator": "Exists"},
        ],
        {"statusTemplate": _EXITED_STATUS},
        None,
    )
    stage["spec"]["delay"] = {"durationFrom": {"expressionFrom": PLANNED_EXIT_JQ}}
    return stage


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
    return [terminate, remove, exit_stage()]


def release_stages_kept(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The release stages the suite keeps; every other object of stage-fast.yaml is left out."""
    return [o for o in objs if o.get("kind") == "Stage" and o["metadata"]["name"] in KEPT_RELEASE_STAGES]


def main(argv: list[str] | None = None) -> int:
    """Print the suite's stages as YAML, for ``kubectl apply -f -`` or a kwok ``--config`` file (docs/clusters.md)."""
    import argparse

    parser = argparse.ArgumentParser(
        description="Print the kwok Stages the suite installs on kind (how a pod on a fake node ends: deleted, or "
        "on its own when its workload has a lifetime), for a kwok the suite does not install. Apply them with "
        "`kubectl apply -f -`, or append them to kwok's --config file; remove the release's pod-complete and "
        "pod-delete stages, which would race them."
    )
    parser.parse_args(argv)
    sys.stdout.write(yaml.dump_all(suite_stages(), Dumper=_BlockDumper, sort_keys=False, width=1 << 16))
    return 0


class _BlockDumper(yaml.SafeDumper):
    """Templates as ``|`` blocks, so the printed stages read like kwok's own."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_BlockDumper.add_representer(str, _text)


if __name__ == "__main__":
    sys.exit(main())
