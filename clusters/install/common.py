"""What the component installers share: the record of a component in ``ClusterState.stack``, what its pods run,
and the verification of a component installed by someone else."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kai_conformance.clusters.catalog import Component
from kai_conformance.clusters.install.context import InstallContext
from kai_conformance.clusters.install.crds import check_crds
from kai_conformance.clusters.install.evidence import canonical_repository, establish_version, find_deployments
from kai_conformance.clusters.install.readiness import WebhookProbe, wait_deployments, webhook_serves
from kai_conformance.fixtures.kube import KubeApi, api_views, kinds

LABELS = {"kai": "KAI Scheduler", "jobset": "JobSet", "trainer": "Kubeflow Trainer"}
#: The fix when a component's APIs are missing on the cluster.
NOT_INSTALLED_FIX = "install it (on an existing cluster: --install always), or check the install output above"


def running_images(kube: KubeApi, namespaces: Iterable[str], of: Iterable[str] | None = None) -> dict[str, str]:
    """image → imageID (the digest the node resolved) of every container running in ``namespaces``; with ``of``,
    only of those images' repositories (a component found in a shared namespace such as kube-system)."""
    repositories = None if of is None else {canonical_repository(i) for i in of}
    found: dict[str, str] = {}
    for namespace in sorted(set(namespaces)):
        for pod in kube.list(kinds.POD, namespace):
            for status in api_views.pod(pod).get("status", {}).get("containerStatuses", []) or []:
                image = status.get("image")
                if image and (repositories is None or canonical_repository(image) in repositories):
                    found[image] = status.get("imageID", "")
    return found


def record(**fields: Any) -> dict[str, Any]:
    """A component's entry in ``ClusterState.stack['components']`` (empty fields dropped)."""
    return {k: v for k, v in fields.items() if v not in (None, "", [], {}, ())}


def installed(component: Component, *, pr_build: str | None, refs: list[tuple[str, str]], waited: float,
              webhook: str, crds: str, origin: str, **details: Any) -> dict[str, Any]:  # fmt: skip
    """The record of a component this run installed from ``origin``; ``pr_build`` says what was built when it
    came from a PR."""
    if pr_build and component.expectations_version not in pr_build:  # a chart directory names no version
        pr_build += f" (expectations {component.expectations_version})"
    return record(
        version=pr_build or component.version,
        version_source="installed",
        established=f"installed by this run from {origin}",
        expectations=component.expectations_version,
        assumption=component.assumption,
        source="pr" if pr_build else "release",
        deployments=[f"{ns}/{name}" for ns, name in refs],
        ready_after_seconds=round(waited, 1),
        crds=crds,
        webhook=webhook,
        **details,
    )


def verify_component(ctx: InstallContext, component: Component, *, probe: WebhookProbe) -> dict[str, Any]:
    """A component installed by someone else: its APIs are served, its webhook rejects what upstream rejects, the
    Deployments that look like it (if any, anywhere) are Available, and its version is detected from their images
    or declared by the run. Whether it schedules is proven afterwards by behaviour (``behaviour.py``)."""
    kube = ctx.kube_factory()
    label = LABELS[component.name]
    crds = check_crds(kube, component.name, label, ctx.timeouts, NOT_INSTALLED_FIX)
    rejection = webhook_serves(kube, probe, ctx.timeouts)
    found = find_deployments(kube, component.name, label)
    if found.refs:
        wait_deployments(kube, found.refs, ctx.timeouts, label)
    version = establish_version(
        label,
        f"--{component.name}-version",
        component.version,
        ctx.settings.declared_by(component.name),
        found.images,
        ctx.settings.catalog.components[component.name],
    )
    images = running_images(kube, {ns for ns, _ in found.refs}, of=found.images) if found.refs else {}
    return record(**version, expectations=component.expectations_version, assumption=component.assumption,
                  source="verified",
                  deployments=[f"{ns}/{name}" for ns, name in found.refs], deployments_note=found.note,
                  crds=crds, webhook=rejection, images=images)  # fmt: skip
