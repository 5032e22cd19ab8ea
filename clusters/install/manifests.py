"""Installing plain manifests (JobSet's release ``manifests.yaml``, a PR's kustomize directory) by server-side apply.

Sources: an http(s) URL (downloaded), a YAML file, or a kustomize directory (rendered with ``kubectl
kustomize``). Objects are applied through :class:`~fixtures.kube.KubeApi` in dependency order: namespaces and
CRDs first (then a wait until every CRD is Established), RBAC and configuration, Services, workloads, and the
admission webhook configurations last so they never point at a Service with no endpoints behind it longer than
needed.
"""

from __future__ import annotations

import copy
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kai_conformance.clusters import commands
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, api_views, describe, kinds
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually

Obj = dict[str, Any]

APPLY_ORDER = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "ClusterRole",
    "Role",
    "ClusterRoleBinding",
    "RoleBinding",
    "Service",
    "Deployment",
)
LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def download(url: str, timeout: float) -> str:
    """The text at ``url``; an infrastructure error naming the URL and the offline fix when it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        raise errors.InfrastructureError(
            f"cannot download {url}: {getattr(exc, 'reason', exc)}\n"
            "fix: check network access, or download it yourself and pass the file (e.g. --jobset-manifests=FILE)"
        ) from exc


def load(
    source: str, runner: commands.Runner, fetch: Callable[[str, float], str], timeout: float
) -> tuple[list[Obj], str]:
    """Objects from a URL, a YAML file or a kustomize directory, and a description of where they came from."""
    if source.startswith(("http://", "https://")):
        text, origin = fetch(source, timeout), source
    else:
        path = Path(source)
        if path.is_dir():
            answer = runner([commands.tool("kubectl"), "kustomize", str(path)], timeout=timeout)
            text, origin = answer.stdout, f"kubectl kustomize {path}"
        elif path.is_file():
            text, origin = path.read_text(), str(path)
        else:
            raise errors.UsageError(f"manifests {source!r} are neither a URL, a file nor a directory")
    try:
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind")]
    except yaml.YAMLError as exc:
        raise errors.UsageError(f"manifests from {origin} are not valid YAML: {exc}") from exc
    if not docs:
        raise errors.UsageError(f"manifests from {origin} contain no Kubernetes objects")
    return docs, origin


def ordered(objs: list[Obj]) -> list[Obj]:
    """A stable sort into :data:`APPLY_ORDER`; unknown kinds go after workloads, webhook configurations last."""

    def rank(obj: Obj) -> int:
        kind = obj["kind"]
        if kind in APPLY_ORDER:
            return APPLY_ORDER.index(kind)
        return len(APPLY_ORDER) + (1 + LAST.index(kind) if kind in LAST else 0)

    return sorted(objs, key=rank)


def _for_apply(obj: Obj) -> Obj:
    clean = copy.deepcopy(obj)
    clean.pop("status", None)
    (clean.get("metadata") or {}).pop("creationTimestamp", None)
    return clean


def wait_established(kube: KubeApi, names: list[str], timeouts: TimeoutPolicy, component: str) -> None:
    def probe() -> Observation:
        pending = []
        for name in names:
            crd = api_views.crd(kube.find(kinds.CRD, name) or {})
            conditions = crd.get("status", {}).get("conditions", [])
            if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                pending.append(name)
        return Observation(not pending, f"not yet Established: {', '.join(pending)}" if pending else "Established")

    eventually(probe, what=f"{component} CRDs to be Established", timeout=timeouts("api"), failure=errors.WaitTimeout)


def apply_all(kube: KubeApi, objs: list[Obj], timeouts: TimeoutPolicy, component: str) -> list[str]:
    """Server-side apply ``objs`` in order, waiting for their CRDs before anything else; returns what was applied."""
    foundation = [o for o in ordered(objs) if o["kind"] in ("Namespace", "CustomResourceDefinition")]
    rest = [o for o in ordered(objs) if o["kind"] not in ("Namespace", "CustomResourceDefinition")]
    applied = [_apply(kube, obj) for obj in foundation]
    crds = [o["metadata"]["name"] for o in foundation if o["kind"] == "CustomResourceDefinition"]
    if crds:
        wait_established(kube, crds, timeouts, component)
    applied += [_apply(kube, obj) for obj in rest]
    progress.report(f"{component}: applied {len(applied)} objects (server-side apply)")
    return applied


def _apply(kube: KubeApi, obj: Obj) -> str:
    clean = _for_apply(obj)
    if kube.kind_of(clean).namespaced:
        clean["metadata"].setdefault("namespace", "default")  # as kubectl apply does
    stored = kube.apply(clean, allow_foreign=True)
    meta = stored["metadata"]
    return describe(kube.kind_of(stored), meta["name"], meta.get("namespace"))


def deployments_of(objs: list[Obj]) -> list[tuple[str, str]]:
    return [
        (o["metadata"].get("namespace", "default"), o["metadata"]["name"]) for o in objs if o["kind"] == "Deployment"
    ]
