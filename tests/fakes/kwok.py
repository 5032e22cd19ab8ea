"""A tiny kwok for FakeKube: plays the Stages it finds in the store, the way kwok v0.8.0 does for the few features
the suite's stages use (pkg/apis/v1alpha1/stage_types.go): ``resourceRef.kind``, ``selector.matchExpressions``
on plain dotted keys with Exists / DoesNotExist / In / NotIn, ``next.statusTemplate`` (merged into status) and
``next.delete``. A node annotated ``kwok.x-k8s.io/node=fake`` becomes Ready (the node-initialize stage).

The status template is rendered by substituting the Go-template actions the suite's template uses; an action it
does not know fails the test, so a template change cannot pass unnoticed.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from kai_conformance.fixtures import kinds
from tests.fakes.kube import Call, FakeKube

NOW = "2026-01-01T00:00:00Z"


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

    def __init__(self, fake: FakeKube) -> None:
        self.fake = fake
        fake.reactors.append(self._react)

    def _react(self, fake: FakeKube, call: Call) -> None:
        for obj in list(fake.store.values()):
            if obj["kind"] == "Node" and (obj["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake":
                conditions = obj.setdefault("status", {}).setdefault("conditions", [])
                if not any(c.get("type") == "Ready" for c in conditions):
                    conditions.append({"type": "Ready", "status": "True"})
        stages = [o for o in fake.store.values() if o["kind"] == "Stage"]
        for key, pod in list(fake.store.items()):
            if pod["kind"] != "Pod" or not self._on_fake_node(pod):
                continue
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
        node = self.fake.store.get(("v1", "Node", None, pod.get("spec", {}).get("nodeName")))
        return node is not None and (node["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"


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


def stage_fast_manifests() -> str:
    """stage-fast.yaml's five stage names (kwok v0.8.0 kustomize/stage/fast), bodies reduced to a pod selector."""
    names = ("node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete")
    return yaml.safe_dump_all([
        {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
         "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Node" if name.startswith("node") else "Pod"},
                  "selector": {"matchExpressions": [{"key": ".metadata.never", "operator": "Exists"}]}, "next": {}}}
        for name in names
    ])  # fmt: skip
