"""KAI's controllers sized for a run that adds fake nodes, as KAI's own scale tests size them (``--kai-sizing``).

KAI's operator gives its controllers small limits (v0.17.0, ``pkg/apis/kai/v1/binder/binder.go``: the binder
100m CPU and 200Mi memory; ``pkg/apis/kai/v1/common/client_config.go``: client qps 20, burst 100;
``cmd/binder/app/options.go``: 10 concurrent reconciles). KAI
does not run its own scale tests on them: ``hack/setup-scale-test-env.sh`` (v0.17.0) first patches ``kai-config``
to the limits of :data:`SCALE_TEST_LIMITS`. The suite found why on real kind: at 1,000 fake nodes, with about 5,500
pods in the cluster, the default binder was OOMKilled again and again and binding stopped (docs/performance.md), so
the scale area judged a binder starved of memory, not KAI's scheduling.

A run that installs KAI on kind and adds fake nodes therefore fills the same limits into ``kai-config`` before it
proves KAI schedules, and waits until the operator has rolled the controllers out with them:

* only fields the Config leaves unset are filled: a value the chart or ``--kai-set`` put there is the user's;
* requests are left to KAI's defaults (KAI's script raises them too), so the controllers still fit a laptop's kind
  nodes; a limit reserves nothing;
* the paths it filled are named in :data:`FILLED_ANNOTATION` on the Config, and the run's end removes them again
  (:func:`unsize`); a later run on the same cluster does it first when a killed run left them;
* the stack record says what was filled, and the report shows it beside the versions.

``--kai-sizing operator`` keeps the sizes KAI's operator gives (e.g. to measure them at scale).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from kai_conformance.clusters.install.readiness import rollout_incomplete
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually

CONFIG_NAME = "kai-config"
NAMESPACE = "kai-scheduler"
#: Names the Config paths a run filled (JSON list of dotted paths), so that they can be removed again.
FILLED_ANNOTATION = "kai-conformance/sized-paths"
#: ``--kai-sizing`` values: ``auto`` sizes when the run installs KAI on kind and adds fake nodes.
CHOICES = ("auto", "operator")

#: Config path → value, from KAI's ``hack/setup-scale-test-env.sh`` (v0.17.0): its limits, concurrency and client
#: rates. Its ``binder.args`` (qps, burst) are ``binder.service.k8sClientConfig`` in the Config CRD (v0.16.8 to main).
#: Its queue-controller patch is left out: a 1000Mi request over a 200Mi limit, which the API server rejects.
SCALE_TEST_LIMITS: dict[str, Any] = {
    "binder.maxConcurrentReconciles": 100,
    "binder.service.k8sClientConfig.qps": 500,
    "binder.service.k8sClientConfig.burst": 2000,
    "binder.service.resources.limits.cpu": "400m",
    "binder.service.resources.limits.memory": "2500Mi",
    "podGrouper.service.resources.limits.cpu": "200m",
    "podGrouper.service.resources.limits.memory": "2000Mi",
    "podGroupController.service.resources.limits.cpu": "200m",
    "podGroupController.service.resources.limits.memory": "8000Mi",
    "scheduler.service.resources.limits.cpu": "5",
    "scheduler.service.resources.limits.memory": "7Gi",
}
#: Config section → the operand Deployments it renders (pkg/operator/operands/*/resources.go); a scheduler
#: Deployment per SchedulingShard, ``kai-scheduler-<shard>``.
DEPLOYMENTS = {"binder": ("binder",), "podGrouper": ("pod-grouper",), "podGroupController": ("podgroup-controller",)}
SCHEDULER_PREFIX = "kai-scheduler-"


def wanted(kai_sizing: str, fake_nodes: int) -> bool:
    """Whether a run that installs KAI on kind sizes it: ``--kai-sizing auto``, and it adds fake nodes."""
    return kai_sizing == "auto" and fake_nodes > 0


def size(kube: KubeApi, timeouts: TimeoutPolicy) -> dict[str, Any]:
    """Fill :data:`SCALE_TEST_LIMITS` into the Config where unset, wait for the rollout; the stack record's entry."""
    try:
        config = kube.get(kinds.KAI_CONFIG, CONFIG_NAME)
    except (errors.NotFound, errors.KindNotServed):
        progress.report(f"KAI not sized for scale: no Config {CONFIG_NAME} (KAI's operator makes it)")
        return {"sizing": f"as installed: no Config {CONFIG_NAME} to size"}
    earlier = _filled(config)  # a killed run's: this run takes them over, and removes them at its end
    spec = config.get("spec") or {}
    fill = {path: value for path, value in SCALE_TEST_LIMITS.items() if path in earlier or _at(spec, path) is None}
    kept = sorted(set(SCALE_TEST_LIMITS) - set(fill))
    if fill:
        patch = {"metadata": {"annotations": {FILLED_ANNOTATION: json.dumps(sorted(fill))}}, "spec": nested(fill)}
        kube.patch(kinds.KAI_CONFIG, CONFIG_NAME, patch, allow_foreign=True)
        progress.report(f"KAI sized as KAI's scale tests size it: {_describe(fill)} in Config {CONFIG_NAME}")
        _wait_rollout(kube, _limits_by_section(fill), timeouts)
    record = {"sizing": f"KAI's scale-test limits (--kai-sizing auto): {_describe(fill) or 'none filled'}"}
    if kept:
        record["sizing_kept"] = "already set in kai-config, left as they were: " + ", ".join(kept)
    return record


def unsize(kube: KubeApi, timeouts: TimeoutPolicy | None = None) -> list[str]:
    """Remove what a run filled (the paths its annotation names); the paths removed, none when nothing was filled.
    With ``timeouts``, wait until the controllers run without the filled limits (a run starting after a killed one
    must not see them restart in its first case)."""
    try:
        config = kube.get(kinds.KAI_CONFIG, CONFIG_NAME)
    except (errors.NotFound, errors.KindNotServed):
        return []
    filled = _filled(config)
    if not filled:
        return []
    patch = {"metadata": {"annotations": {FILLED_ANNOTATION: None}}, "spec": nested(_removal(config, filled))}
    kube.patch(kinds.KAI_CONFIG, CONFIG_NAME, patch, allow_foreign=True)
    if timeouts is not None:
        _wait_rollout(kube, _limits_by_section({path: SCALE_TEST_LIMITS[path] for path in filled}), timeouts,
                      removed=True)  # fmt: skip
    return filled


def _removal(config: dict[str, Any], paths: list[str]) -> dict[str, None]:
    """The dotted paths to null so that ``paths`` go with every parent they leave empty (a merge patch that nulls
    only the leaves leaves ``resources: {limits: {}}`` behind)."""
    left = _pruned(copy.deepcopy(config.get("spec") or {}), paths)
    removal: dict[str, None] = {}
    for path in paths:
        keys = path.split(".")
        top = next(i for i in range(1, len(keys) + 1) if _at(left, ".".join(keys[:i])) is None)
        removal[".".join(keys[:top])] = None
    return removal


def _pruned(spec: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    for path in paths:
        *parents, leaf = path.split(".")
        node = _at(spec, ".".join(parents)) if parents else spec
        if isinstance(node, dict):
            node.pop(leaf, None)

    def prune(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        kept = {k: prune(v) for k, v in node.items()}
        return {k: v for k, v in kept.items() if v != {}}

    return prune(spec)


def _filled(config: dict[str, Any]) -> list[str]:
    value = ((config.get("metadata") or {}).get("annotations") or {}).get(FILLED_ANNOTATION)
    try:
        paths = json.loads(value or "[]")
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str) and p in SCALE_TEST_LIMITS] if isinstance(paths, list) else []


def _at(spec: dict[str, Any], path: str) -> Any:
    node: Any = spec
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` → ``{"a": {"b": 1}}`` (a merge patch; None removes the field)."""
    tree: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, leaf = path.split(".")
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return tree


def _describe(fill: dict[str, Any]) -> str:
    return ", ".join(f"{path}={value}" for path, value in fill.items())


def _limits_by_section(fill: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Config section → the container limits its Deployments must show once rolled out."""
    limits: dict[str, dict[str, str]] = {}
    for path, value in fill.items():
        section, *rest = path.split(".")
        if rest[:-1] == ["service", "resources", "limits"]:
            limits.setdefault(section, {})[rest[-1]] = str(value)
    return limits


def _wait_rollout(
    kube: KubeApi, limits: dict[str, dict[str, str]], timeouts: TimeoutPolicy, *, removed: bool = False
) -> None:
    """Until every Deployment of a section in ``limits`` runs them (``removed``: runs none of them any more), rolled
    out, its old pods gone."""

    def names() -> dict[str, str]:
        """Deployment name → its Config section."""
        found = {name: section for section, names in DEPLOYMENTS.items() if section in limits for name in names}
        if "scheduler" in limits:
            for deployment in kube.list(kinds.DEPLOYMENT, NAMESPACE):
                if deployment["metadata"]["name"].startswith(SCHEDULER_PREFIX):
                    found[deployment["metadata"]["name"]] = "scheduler"
        return found

    def probe() -> Observation:
        pending = [
            f"{name} {why}"
            for name, section in names().items()
            if (why := rollout_pending(kube.find(kinds.DEPLOYMENT, name, NAMESPACE), limits[section], removed))
        ]
        return Observation(not pending, "; ".join(pending) or "rolled out")

    what = "without" if removed else "with"
    eventually(probe, what=f"KAI's operator to roll its controllers out {what} the scale-test limits",
               timeout=timeouts("ready"), failure=errors.WaitTimeout,
               fix=f"look at KAI's operator log and the Deployments (`kubectl -n {NAMESPACE} get deploy,pods`), or "
               "keep KAI as its operator sizes it with --kai-sizing operator")  # fmt: skip


def rollout_pending(deployment: dict[str, Any] | None, limits: dict[str, str], removed: bool = False) -> str:
    """Why a Deployment does not yet run ``limits`` (``removed``: still runs one of them) on every replica ("" once
    it does)."""
    if deployment is None:
        return "" if removed else "not created"
    spec = deployment.get("spec") or {}
    containers: Sequence[dict[str, Any]] = (spec.get("template") or {}).get("spec", {}).get("containers") or []
    running = {k: str(v) for k, v in ((containers[0].get("resources") or {}).get("limits") or {}).items()} if (
        containers
    ) else {}  # fmt: skip
    if removed and (same := {k: v for k, v in limits.items() if running.get(k) == v}):
        return "still given " + ", ".join(f"{k}={v}" for k, v in same.items())
    if not removed and (differ := {k: v for k, v in limits.items() if running.get(k) != v}):
        return "not yet given " + ", ".join(f"{k}={v}" for k, v in differ.items())
    return rollout_incomplete(deployment)
