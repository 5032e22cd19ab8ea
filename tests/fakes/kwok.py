"""A tiny kwok for FakeKube: plays the Stages it finds in the store, the way kwok v0.8.0 does for the few features
the suite's stages use (pkg/apis/v1alpha1/stage_types.go): ``resourceRef.kind``, ``selector.matchExpressions``
on plain dotted keys with Exists / DoesNotExist / In / NotIn, ``next.statusTemplate`` (merged into status) and
``next.delete``. A node annotated ``kwok.x-k8s.io/node=fake`` becomes Ready (the node-initialize stage).

The status template is rendered by substituting the Go-template actions the suite's template uses; an action it
does not know fails the test, so a template change cannot pass unnoticed.

A kwok node has no kubelet: once a FakeKwok plays a FakeKube, the simulated kubelet (tests/fakes/kubelet.py) leaves
the pods of kwok's nodes to it (:func:`plays_kwok_nodes`), so a kwok whose stages never start a pod is visible as such.
The API server gives every new pod phase ``Pending`` (pkg/registry/core/pod/strategy.go ``PrepareForCreate``);
FakeKube does not, so the fake kwok sees a pod without a phase as Pending.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from kai_conformance.fixtures import kinds
from tests.fakes.kube import Call, FakeKube

NOW = "2026-01-01T00:00:00Z"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"


def plays_kwok_nodes(fake: FakeKube) -> bool:
    """Whether a FakeKwok plays the kubelet of ``fake``'s kwok nodes (the simulated kubelet then leaves them)."""
    return getattr(fake, "fake_kwok", None) is not None


def kwok_node(node: dict[str, Any] | None) -> bool:
    return node is not None and (node["metadata"].get("annotations") or {}).get(KWOK_ANNOTATION) == "fake"


def lookup(obj: dict[str, Any], key: str) -> Any:
    value: Any = obj
    for part in key.strip(".").split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def matches(obj: dict[str, Any], expressions: list[dict[str, Any]]) -> bool:
    for expression in expressions:
        value, operator = lookup(obj, expression["key"]), expression["operator"]
        present = value not in (None, [], "")
        ok = {
            "Exists": present,
            "DoesNotExist": not present,
            "In": value in expression.get("values", []),
            "NotIn": value not in expression.get("values", []),
        }[operator]
        if not ok:
            return False
    return True


def render_status(template: str, pod: dict[str, Any]) -> dict[str, Any]:
    """The suite's status template for ``pod``: ``range .spec.containers`` expanded, ``$now`` substituted."""
    template = template.replace("{{ $now := Now }}", "")
    loop = re.search(r"\{\{ range \.spec\.containers \}\}\n(.*?)\{\{ end \}\}\n", template, re.S)
    if loop:
        body = "".join(
            loop.group(1)
            .replace("{{ .image | Quote }}", f'"{c["image"]}"')
            .replace("{{ .name | Quote }}", f'"{c["name"]}"')
            for c in pod["spec"]["containers"]
        )
        template = template[: loop.start()] + body + template[loop.end() :]
    template = template.replace("{{ $now | Quote }}", f'"{NOW}"')
    leftover = re.findall(r"\{\{.*?\}\}", template)
    assert not leftover, f"template actions the fake kwok does not know: {leftover}"
    return yaml.safe_load(template)


class FakeKwok:
    """Install with ``FakeKwok(fake)``: after every API call it advances each managed object by one stage."""

    def __init__(self, fake: FakeKube, stages: list[dict[str, Any]] | None = None) -> None:
        """``stages``: what kwok plays besides the Stage objects in the store (a kwok configured without the Stage
        CRD plays the stages of its config file)."""
        self.fake = fake
        self.stages = list(stages or [])
        fake.reactors.append(self._react)
        fake.fake_kwok = self  # type: ignore[attr-defined]

    def _react(self, fake: FakeKube, call: Call) -> None:
        for obj in list(fake.store.values()):
            if obj["kind"] == "Node" and kwok_node(obj):
                conditions = obj.setdefault("status", {}).setdefault("conditions", [])
                if not any(c.get("type") == "Ready" for c in conditions):
                    conditions.append({"type": "Ready", "status": "True"})
        stages = [*self.stages, *(o for o in fake.store.values() if o["kind"] == "Stage")]
        for key, pod in list(fake.store.items()):
            if pod["kind"] != "Pod" or not self._on_fake_node(pod):
                continue
            pod.setdefault("status", {}).setdefault("phase", "Pending")
            for stage in stages:
                spec = stage["spec"]
                if spec["resourceRef"]["kind"] != "Pod" or not matches(pod, spec["selector"]["matchExpressions"]):
                    continue
                if spec["next"].get("statusTemplate"):
                    pod.setdefault("status", {}).update(render_status(spec["next"]["statusTemplate"], pod))
                if spec["next"].get("delete"):
                    fake._remove(kinds.POD, key[2], key[3])
                break

    def _on_fake_node(self, pod: dict[str, Any]) -> bool:
        return kwok_node(self.fake.store.get(("v1", "Node", None, pod.get("spec", {}).get("nodeName"))))


def kwok_release_manifests() -> str:
    """A reduced kwok.yaml of the release: the Stage CRD and the controller Deployment in kube-system."""
    stage_crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": kinds.KWOK_STAGE.resource},
        "spec": {"group": "kwok.x-k8s.io", "names": {"kind": "Stage", "plural": "stages"}, "scope": "Cluster",
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True}]},
    }  # fmt: skip
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "kwok-controller", "namespace": "kube-system", "labels": {"app": "kwok-controller"}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "kwok-controller", "image": "registry.k8s.io/kwok/kwok:v0.8.0"}]}}},
    }  # fmt: skip
    return yaml.safe_dump_all([stage_crd, deployment])


#: kwok v0.8.0 kustomize/stage/pod/fast/pod-ready.yaml, reduced to what the fake renders: its selector without the
#: jq expression on the Ready condition, its template without init containers, readiness gates and IPs.
POD_READY_STATUS = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Running
"""


def stage(name: str, kind: str, expressions: list[dict[str, Any]], next_: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": kind}, "selector": {"matchExpressions": expressions},
                     "next": next_}}  # fmt: skip


def pod_ready_stage() -> dict[str, Any]:
    return stage("pod-ready", "Pod", [
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
    ], {"statusTemplate": POD_READY_STATUS})  # fmt: skip


def pod_delete_stage() -> dict[str, Any]:
    """kwok v0.8.0 kustomize/stage/pod/fast/pod-delete.yaml as it is: a deleted pod goes at once."""
    return stage("pod-delete", "Pod", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}], {"delete": True})


def stage_fast_manifests(*, pod_ready: bool = True) -> str:
    """stage-fast.yaml's five stages (kwok v0.8.0 kustomize/stage/fast): ``pod-ready`` as :func:`pod_ready_stage`
    (``pod_ready=False``: a release whose pod-ready never matches, i.e. a kwok that never starts a pod), the others
    reduced to a selector that never matches (the fake plays node readiness itself)."""
    never = [{"key": ".metadata.never", "operator": "Exists"}]
    stages = [stage(name, "Node", never, {}) for name in ("node-initialize", "node-heartbeat-with-lease")]
    stages.append(pod_ready_stage() if pod_ready else stage("pod-ready", "Pod", never, {}))
    stages += [stage(name, "Pod", never, {}) for name in ("pod-complete", "pod-delete")]
    return yaml.safe_dump_all(stages)
