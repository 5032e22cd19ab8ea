"""A tiny kwok for FakeKube: plays the Stages it finds in the store (and those of its config), from the Stage's own
data, the way kwok v0.8.0 plays them (pkg/kwok/controllers/pod_controller.go, pkg/utils/lifecycle):

* ``selector.matchExpressions`` are jq, run by the ``jq`` package (libjq; kwok runs gojq) over the pod as the API
  server serializes it (empty fields left out), with kwok's operators (pkg/utils/expression/selector.go): the values
  an expression yields, nulls dropped, are matched as text; an expression that fails yields nothing.
* Of the stages that match, one plays; kwok picks at random, weighted by ``weight`` (lifecycle.go ``Match``). A
  random pick would make tests flaky, so two stages left to chance fail the test: the suite's stages must never
  compete.
* ``delay``: ``durationMilliseconds``, and ``durationFrom`` whose expression yields an RFC 3339 time (a delay until
  then) or a Go duration (value_duration_from.go); jitter is not modelled and fails the test. kwok keeps one delayed
  job per pod: a new version of the pod is matched again and its job replaced, a version that matches nothing keeps
  the job, a deleted pod drops it (``preprocess``, ``addStageJob``, ``watchResources``). Time is the FakeKube clock,
  and a job plays at the first API call at or after its time.
* ``next.statusTemplate`` is rendered by a Go text/template of the fake's own (tests/fakes/gotemplate.py) over the
  pod as it was matched, with kwok's ``Now`` (the FakeKube clock) and ``Quote``, and applied as kwok's strategic merge
  patch of a pod's status does (``conditions`` merged by ``type``, every other field replaced); ``next.delete``
  removes the pod.

A node annotated ``kwok.x-k8s.io/node=fake`` becomes Ready (the node-initialize stage).

A kwok node has no kubelet: once a FakeKwok plays a FakeKube, the simulated kubelet (tests/fakes/kubelet.py) leaves
the pods of kwok's nodes to it (:func:`plays_kwok_nodes`), so a kwok whose stages never start a pod is visible as such.
The API server gives every new pod phase ``Pending`` (pkg/registry/core/pod/strategy.go ``PrepareForCreate``);
FakeKube does not, so the fake kwok sees a pod without a phase as Pending.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import re
import time
from dataclasses import dataclass
from typing import Any

import yaml

from kai_conformance.fixtures.kube import kinds
from tests.fakes import gotemplate
from tests.fakes.kube import Call, FakeKube

KWOK_ANNOTATION = "kwok.x-k8s.io/node"


def plays_kwok_nodes(fake: FakeKube) -> bool:
    """Whether a FakeKwok plays the kubelet of ``fake``'s kwok nodes (the simulated kubelet then leaves them)."""
    return getattr(fake, "fake_kwok", None) is not None


def kwok_node(node: dict[str, Any] | None) -> bool:
    return node is not None and (node["metadata"].get("annotations") or {}).get(KWOK_ANNOTATION) == "fake"


def served_json(value: Any) -> Any:
    """``value`` as the API server serializes a typed object: empty fields (``omitempty``) left out."""
    if isinstance(value, dict):
        kept = {k: served_json(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [served_json(v) for v in value]
    return value


@functools.lru_cache(maxsize=256)
def _compiled(expression: str) -> Any:
    import jq  # a dev dependency (pyproject.toml): only the kwok fake needs it

    return jq.compile(expression)


_PATH = re.compile(r"(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def query(expression: str, obj: Any) -> list[Any] | None:
    """What kwok's jq Query yields for ``obj`` (nulls dropped), or None when the expression fails."""
    if _PATH.fullmatch(expression):  # a plain path, as jq reads it (null on null, an error on a scalar), minus libjq
        value = obj
        for part in expression[1:].split("."):
            if value is not None and not isinstance(value, dict):
                return None
            value = None if value is None else value.get(part)
        return [] if value is None else [value]
    try:
        return [v for v in _compiled(expression).input_value(obj).all() if v is not None]
    except ValueError:
        return None


def _as_text(value: Any) -> str | None:
    """How kwok compares a yielded value with ``values`` (selector.go ``hasValue``: strings, bools, integers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    return None


def matches(obj: dict[str, Any], expressions: list[dict[str, Any]], data: Any = None) -> bool:
    """``data``: ``served_json(obj)``, when the caller has it."""
    data = served_json(obj) if data is None else data
    for expression in expressions:
        requirement = expression.get("jq") or expression
        if expression.get("cel"):
            raise AssertionError("the fake kwok runs no CEL")
        found = query(requirement["key"], data)
        operator, values = requirement["operator"], requirement.get("values") or []
        if found is None:
            ok = operator in ("NotIn", "DoesNotExist")
        else:
            has = any(_as_text(v) in values for v in found)
            ok = {"In": has, "NotIn": not has, "Exists": bool(found), "DoesNotExist": not found}[operator]
        if not ok:
            return False
    return True


def _expression(source: dict[str, Any]) -> str:
    return (source.get("jq") or {}).get("expression") or source.get("expressionFrom") or ""


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def delay(stage: dict[str, Any], pod: dict[str, Any], now: dt.datetime) -> dt.timedelta:
    """How long kwok waits before playing ``stage`` on ``pod``, seen at ``now`` (negative: it is due)."""
    spec = stage["spec"].get("delay") or {}
    assert not ({"jitterDurationMilliseconds", "jitterDurationFrom"} & set(spec)), "the fake kwok models no jitter"
    default = dt.timedelta(milliseconds=spec.get("durationMilliseconds") or 0)
    if "durationFrom" not in spec:
        return default
    found = query(_expression(spec["durationFrom"]), served_json(pod))
    if not found or not isinstance(found[0], str) or not found[0]:
        return default
    try:
        return dt.datetime.fromisoformat(found[0].replace("Z", "+00:00")) - now
    except ValueError:
        pass
    parts = _GO_DURATION.findall(found[0])
    if not parts or "".join(a + b for a, b in parts) != found[0]:
        return default
    unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return dt.timedelta(seconds=sum(float(n) * unit[u] for n, u in parts))


def _weight(stage: dict[str, Any], pod: dict[str, Any]) -> int | None:
    spec = stage["spec"]
    if "weightFrom" in spec:
        found = query(_expression(spec["weightFrom"]), served_json(pod))
        if found and isinstance(found[0], (int, str)) and str(found[0]).isdigit():
            return int(found[0])
    return int(spec.get("weight") or 0)


def choose(stages: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, Any] | None:
    """The stage kwok plays on ``pod`` of those that match; two left to kwok's dice fail the test."""
    data = served_json(pod)
    matching = [s for s in stages if s["spec"].get("selector") is not None and matches(pod, s["spec"]["selector"].get(
        "matchExpressions") or [], data)]  # fmt: skip
    if len(matching) <= 1:
        return matching[0] if matching else None
    weighted = [s for s in matching if (_weight(s, pod) or 0) > 0]
    candidates = weighted or matching
    if len(candidates) > 1:
        names = ", ".join(s["metadata"]["name"] for s in candidates)
        raise AssertionError(f"kwok would pick at random among the stages {names} for pod {pod['metadata']['name']}")
    return candidates[0]


def merge_status(status: dict[str, Any], patch: dict[str, Any]) -> None:
    """kwok's strategic merge patch of a pod's status: conditions merged by type, every other field replaced."""
    for key, value in patch.items():
        if key == "conditions" and isinstance(value, list):
            merged = {c.get("type"): c for c in status.get("conditions") or []}
            for condition in value:
                merged[condition.get("type")] = {**merged.get(condition.get("type"), {}), **condition}
            status["conditions"] = list(merged.values())
        elif value is None:
            status.pop(key, None)
        else:
            status[key] = value


def render_status(template: str, pod: dict[str, Any], now: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    """A stage's ``statusTemplate`` rendered for ``pod`` at ``now``, as kwok renders it, read as YAML."""
    text = gotemplate.render(template, served_json(pod), {"Now": lambda: now})
    return yaml.safe_load(text) or {}


class ManualClock:
    """Cluster time that moves only when a test says (``advance``); give it to FakeKube (``clock``)."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


class ScaledClock:
    """Cluster time running ``factor`` times as fast as the wall clock: a test that shrinks every budget of the
    suite (``TimeoutPolicy(scale=s)``) gives kwok's delays the same scale with ``factor = 1 / s``, so a 500 ms stage
    is due within a 30 s budget there as it is on a real cluster. Give it to FakeKube (``clock``)."""

    def __init__(self, factor: float) -> None:
        self.factor, self.start, self.wall = factor, dt.datetime.now(dt.timezone.utc), time.monotonic()

    def __call__(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=(time.monotonic() - self.wall) * self.factor)


@dataclass
class _Job:
    """A stage kwok will play on a pod: the pod as it was matched (its version and the template's data), and when."""

    stage: dict[str, Any]
    pod: dict[str, Any]
    due: dt.datetime


class FakeKwok:
    """Install with ``FakeKwok(fake)``: after every API call it advances each managed object by one stage."""

    def __init__(self, fake: FakeKube, stages: list[dict[str, Any]] | None = None) -> None:
        """``stages``: what kwok plays besides the Stage objects in the store (a kwok configured without the Stage
        CRD plays the stages of its config file)."""
        self.fake = fake
        self.stages = list(stages or [])
        self.jobs: dict[tuple[str, str], _Job] = {}
        #: (stage, namespace, pod) of every stage played, in order.
        self.played: list[tuple[str, str, str]] = []
        fake.reactors.append(self._react)
        fake.fake_kwok = self  # type: ignore[attr-defined]

    def _react(self, fake: FakeKube, call: Call) -> None:
        for obj in list(fake.store.values()):
            if obj["kind"] == "Node" and kwok_node(obj):
                conditions = obj.setdefault("status", {}).setdefault("conditions", [])
                if not any(c.get("type") == "Ready" for c in conditions):
                    conditions.append({"type": "Ready", "status": "True"})
        stages = [*self.stages, *(o for o in fake.store.values() if o["kind"] == "Stage")]
        pod_stages = [s for s in stages if s["spec"]["resourceRef"]["kind"] == "Pod"]
        now = fake.clock()
        seen = set()
        for key, pod in list(fake.store.items()):
            if pod["kind"] != "Pod" or not self._on_fake_node(pod):
                continue
            ref = (pod["metadata"].get("namespace") or "", pod["metadata"]["name"])
            seen.add(ref)
            pod.setdefault("status", {}).setdefault("phase", "Pending")
            job = self.jobs.get(ref)
            version = pod["metadata"].get("resourceVersion")
            if job is None or job.pod["metadata"].get("resourceVersion") != version:
                stage = choose(pod_stages, pod)
                if stage is not None:
                    job = self.jobs[ref] = _Job(stage, copy.deepcopy(pod), now + delay(stage, pod, now))
                elif job is not None:
                    job.pod["metadata"]["resourceVersion"] = version  # seen; the queued job stays
            if job is None or job.due > now:
                continue
            del self.jobs[ref]
            self._play(job, key, pod)
        for ref in set(self.jobs) - seen:
            del self.jobs[ref]

    def _play(self, job: _Job, key: Any, pod: dict[str, Any]) -> None:
        self.played.append((job.stage["metadata"]["name"], key[2], key[3]))
        following = job.stage["spec"].get("next") or {}
        if following.get("statusTemplate"):
            now = self.fake.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
            merge_status(pod.setdefault("status", {}), render_status(following["statusTemplate"], job.pod, now))
            self.fake.write(pod)
        if following.get("delete"):
            self.fake._remove(kinds.POD, key[2], key[3])

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
            {"name": "kwok-controller", "image": "registry.k8s.io/kwok/kwok:v0.8.0",
             "args": ["--config=/root/.kwok/kwok.yaml", "--node-ip=$(POD_IP)"],
             "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]}}},
    }  # fmt: skip
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "kwok", "namespace": "kube-system", "labels": {"app": "kwok-controller"}},
                  "data": {"kwok.yaml": KWOK_CONFIGURATION}}  # fmt: skip
    return yaml.safe_dump_all([stage_crd, config_map, deployment])


#: kwok v0.8.0 kustomize/kwok/kwok.yaml's configuration, reduced to the options the suite reads or must keep.
KWOK_CONFIGURATION = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseParallelism: 4
  podPlayStageParallelism: 4
  manageNodesWithAnnotationSelector: 'kwok.x-k8s.io/node=fake'
  nodeLeaseDurationSeconds: 40
  enableCRDs:
  - Stage
"""


#: kwok v0.8.0 kustomize/stage/pod/fast/pod-ready.yaml's template, reduced: no init containers, readiness gates or IPs.
POD_READY_STATUS = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
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
startTime: {{ $now | Quote }}
"""


def stage(name: str, kind: str, expressions: list[dict[str, Any]], next_: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": kind}, "selector": {"matchExpressions": expressions},
                     "next": next_}}  # fmt: skip


def pod_ready_stage() -> dict[str, Any]:
    """kwok v0.8.0 kustomize/stage/pod/fast/pod-ready.yaml: its selector as it is, its template as above."""
    return stage("pod-ready", "Pod", [
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
        {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status', "operator": "NotIn", "values": ["True"]},
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
