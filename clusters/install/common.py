"""Helpers shared by the component installers: finding a component's Deployments, its images, its version."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fixtures import errors, kinds
from fixtures.kube import KubeApi


def is_local(ref: str) -> bool:
    return Path(ref).exists()


def find_deployments(kube: KubeApi, names: Iterable[str]) -> list[tuple[str, str]]:
    """(namespace, name) of Deployments with one of ``names``, anywhere in the cluster (existing clusters)."""
    wanted = set(names)
    return sorted(
        (d["metadata"]["namespace"], d["metadata"]["name"])
        for d in kube.list(kinds.DEPLOYMENT)
        if d["metadata"]["name"] in wanted
    )


def deployment_images(kube: KubeApi, refs: Iterable[tuple[str, str]]) -> list[str]:
    images = []
    for namespace, name in refs:
        deployment = kube.find(kinds.DEPLOYMENT, name, namespace) or {}
        pod = deployment.get("spec", {}).get("template", {}).get("spec", {})
        images += [c["image"] for c in pod.get("containers", []) if c.get("image")]
    return images


def running_images(kube: KubeApi, namespaces: Iterable[str]) -> dict[str, str]:
    """image → imageID (the digest the node resolved) of every container running in ``namespaces``."""
    found: dict[str, str] = {}
    for namespace in sorted(set(namespaces)):
        for pod in kube.list(kinds.POD, namespace):
            for status in pod.get("status", {}).get("containerStatuses", []) or []:
                if status.get("image"):
                    found[status["image"]] = status.get("imageID", "")
    return found


def image_tag(image: str) -> str:
    """``ghcr.io/x/operator:v0.17.0@sha256:…`` → ``v0.17.0`` (``""`` without a tag)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""


def check_version(component: str, option: str, expected: str, images: list[str], known: Iterable[str]) -> str:
    """The version a running component's image tags name; a usage error when it is a known, different one."""
    tags = sorted({image_tag(i) for i in images} - {""})
    versions = [t for t in tags if t in set(known)]
    if versions and expected not in versions:
        raise errors.UsageError(
            f"the cluster runs {component} {versions[0]} but this run expects {expected}; pass "
            f"{option} {versions[0]} (or a --versions combination with it) so the expectations match"
        )
    return expected if expected in versions else (f"unverified (image tags: {', '.join(tags)})" if tags else "unknown")


def record(**fields: Any) -> dict[str, Any]:
    """A component's entry in ``ClusterState.stack['components']`` (empty fields dropped)."""
    return {k: v for k, v in fields.items() if v not in (None, "", [], {}, ())}
