"""JobSet: its release ``manifests.yaml`` (or a PR's manifests), applied by server-side apply.

Installed on its own, before Trainer, in ``jobset-system`` (the release manifests' namespace): Trainer is then
installed with its bundled JobSet switched off (docs/research/upstream-facts.md §A6, §C).
"""

from __future__ import annotations

from typing import Any

from clusters.install import manifests
from clusters.install.common import check_version, deployment_images, find_deployments, record
from clusters.install.context import InstallContext
from clusters.install.readiness import jobset_probe, wait_deployments, webhook_serves
from fixtures import progress

#: The Deployment of the manifests install, and of JobSet's own Helm chart (upstream-facts §C).
DEPLOYMENT_NAMES = ("jobset-controller-manager", "jobset-controller")


def source(ctx: InstallContext) -> str:
    return ctx.settings.sources.jobset_manifests or ctx.settings.combination.jobset.fields["manifests"]


def install(ctx: InstallContext) -> dict[str, Any]:
    where = source(ctx)
    progress.report(f"JobSet: installing from {where}")
    objs, origin = manifests.load(where, ctx.runner, ctx.fetch, ctx.timeouts("install"))
    kube = ctx.kube_factory()
    applied = manifests.apply_all(kube, objs, ctx.timeouts, "JobSet")
    refs = manifests.deployments_of(objs)
    waited = wait_deployments(kube, refs, ctx.timeouts, "JobSet") if refs else 0.0
    rejection = webhook_serves(kube, jobset_probe(ctx.settings.workload_image), ctx.timeouts)
    component = ctx.settings.combination.jobset
    from_pr = ctx.settings.sources.jobset_manifests is not None
    return record(
        version="PR manifests" if from_pr else component.version,
        expectations=component.version,
        source="pr" if from_pr else "release",
        manifests=origin,
        objects=len(applied),
        deployments=[f"{ns}/{name}" for ns, name in refs],
        ready_after_seconds=round(waited, 1),
        webhook=rejection,
    )


def verify(ctx: InstallContext) -> dict[str, Any]:
    kube = ctx.kube_factory()
    rejection = webhook_serves(kube, jobset_probe(ctx.settings.workload_image), ctx.timeouts)
    refs = find_deployments(kube, DEPLOYMENT_NAMES)
    if refs:
        wait_deployments(kube, refs, ctx.timeouts, "JobSet")
    expected = ctx.settings.combination.jobset.version
    version = check_version(
        "JobSet", "--jobset-version", expected, deployment_images(kube, refs), ctx.settings.catalog.components["jobset"]
    )
    return record(version=version, expectations=expected, source="verified",
                  deployments=[f"{ns}/{n}" for ns, n in refs], webhook=rejection)  # fmt: skip
