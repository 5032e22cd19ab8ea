"""What the component installers share: finding a component's Deployments, images and version, its record in
``ClusterState.stack``, and the verification of a component installed by someone else."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from clusters.catalog import Component
from clusters.install.context import InstallContext
from clusters.install.readiness import WebhookProbe, wait_deployments, webhook_serves
from fixtures import errors, kinds
from fixtures.kube import KubeApi


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


def installed(component: Component, *, pr_build: str | None, refs: list[tuple[str, str]], waited: float,
              webhook: str, **details: Any) -> dict[str, Any]:  # fmt: skip
    """The record of a component this run installed; ``pr_build`` says what was built when it came from a PR."""
    return record(
        version=pr_build or component.version,
        expectations=component.version,
        source="pr" if pr_build else "release",
        deployments=[f"{ns}/{name}" for ns, name in refs],
        ready_after_seconds=round(waited, 1),
        webhook=webhook,
        **details,
    )


def verify_component(
    ctx: InstallContext,
    component: Component,
    *,
    label: str,
    probe: WebhookProbe,
    deployments: tuple[str, ...],
    must_run: Callable[[list[tuple[str, str]]], list[tuple[str, str]]] = lambda found: found,
) -> dict[str, Any]:
    """An installed component: its webhook serves, its Deployments are Available, its version is the expected one.

    ``deployments`` are looked for by name anywhere in the cluster; ``must_run(found)`` says which must be
    Available (by default those found: install methods name them differently).
    """
    kube = ctx.kube_factory()
    rejection = webhook_serves(kube, probe, ctx.timeouts)
    found = find_deployments(kube, deployments)
    refs = must_run(found)
    if refs:
        wait_deployments(kube, refs, ctx.timeouts, label)
    known = ctx.settings.catalog.components[component.name]
    version = check_version(label, f"--{component.name}-version", component.version, deployment_images(kube, found),
                            known)  # fmt: skip
    return record(version=version, expectations=component.version, source="verified",
                  deployments=[f"{ns}/{name}" for ns, name in refs], webhook=rejection)  # fmt: skip
