"""JobSet: its release ``manifests.yaml`` (or a PR's manifests), applied by server-side apply.

Installed on its own, before Trainer, in ``jobset-system`` (the release manifests' namespace): Trainer is then
installed with its bundled JobSet switched off (docs/research/upstream-facts.md §A6, §C).
"""

from __future__ import annotations

from typing import Any

from kai_conformance.clusters.install import manifests
from kai_conformance.clusters.install.common import NOT_INSTALLED_FIX, installed, verify_component
from kai_conformance.clusters.install.context import InstallContext
from kai_conformance.clusters.install.crds import check_crds
from kai_conformance.clusters.install.readiness import jobset_probe, wait_deployments, webhook_serves
from kai_conformance.fixtures import progress


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
    crds = check_crds(kube, "jobset", "JobSet", ctx.timeouts, NOT_INSTALLED_FIX)
    rejection = webhook_serves(kube, jobset_probe(ctx.settings.workload_image), ctx.timeouts)
    from_pr = ctx.settings.sources.jobset_manifests is not None
    return installed(ctx.settings.combination.jobset, pr_build="PR manifests" if from_pr else None, refs=refs,
                     waited=waited, webhook=rejection, crds=crds, origin=f"manifests {origin}", manifests=origin,
                     objects=len(applied))  # fmt: skip


def verify(ctx: InstallContext) -> dict[str, Any]:
    return verify_component(ctx, ctx.settings.combination.jobset, probe=jobset_probe(ctx.settings.workload_image))
