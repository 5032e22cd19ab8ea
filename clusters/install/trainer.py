"""Kubeflow Trainer: its Helm chart (release ``kubeflow-trainer`` in ``kubeflow-system``, bundled JobSet off), or
a PR's manifests / kustomize directory applied by server-side apply.

JobSet is installed separately, so the chart gets ``--set jobset.install=false`` ("must be set to false if
jobset controller/webhook has already been installed", values.yaml) and JobSet's objects are dropped from
Trainer manifests (the kustomize overlay bundles them, upstream-facts §A6 and trainer-jobset.md §5.2).
"""

from __future__ import annotations

from typing import Any

from kai_conformance.clusters.install import manifests
from kai_conformance.clusters.install.common import NOT_INSTALLED_FIX, installed, verify_component
from kai_conformance.clusters.install.context import Chart, InstallContext, install_chart
from kai_conformance.clusters.install.crds import check_crds
from kai_conformance.clusters.install.readiness import trainer_probe, wait_deployments, webhook_serves
from kai_conformance.fixtures import progress

RELEASE = "kubeflow-trainer"
NAMESPACE = "kubeflow-system"
#: ``<fullname>-controller-manager``; fullname is the release name when it contains "kubeflow-trainer".
DEPLOYMENT = "kubeflow-trainer-controller-manager"
JOBSET_GROUP = "jobset.x-k8s.io"


def chart(ctx: InstallContext) -> Chart:
    return Chart.of(ctx.settings.combination.trainer, ctx.settings.sources.trainer_chart, RELEASE, NAMESPACE)


def overrides(ctx: InstallContext) -> list[str]:
    """JobSet off (installed apart), then the operator's ``--set`` values."""
    return ["--set", "jobset.install=false", *(a for s in ctx.settings.sources.trainer_set for a in ("--set", s))]


def is_jobset_object(obj: dict[str, Any]) -> bool:
    if obj["kind"] == "CustomResourceDefinition":
        return obj.get("spec", {}).get("group") == JOBSET_GROUP
    return obj["metadata"].get("name", "").startswith("jobset-")


def _install_manifests(ctx: InstallContext, where: str) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    objs, origin = manifests.load(where, ctx.runner, ctx.fetch, ctx.timeouts("install"))
    own = [o for o in objs if not is_jobset_object(o)]
    dropped = len(objs) - len(own)
    if dropped:
        progress.report(f"Kubeflow Trainer: left out {dropped} JobSet objects of {origin} (JobSet is installed apart)")
    applied = manifests.apply_all(ctx.kube_factory(), own, ctx.timeouts, "Kubeflow Trainer")
    return manifests.deployments_of(own), {
        "manifests": origin,
        "objects": len(applied),
        "jobset_objects_left_out": dropped,
    }


def install(ctx: InstallContext) -> dict[str, Any]:
    sources = ctx.settings.sources
    if sources.trainer_manifests:
        progress.report(f"Kubeflow Trainer: installing from {sources.trainer_manifests}")
        refs, details = _install_manifests(ctx, sources.trainer_manifests)
        origin = f"manifests {details['manifests']}"
    else:
        origin = f"chart {chart(ctx).ref}" + (f" {chart(ctx).version}" if chart(ctx).version else "")
        refs, details = install_chart(
            ctx,
            "Kubeflow Trainer",
            chart(ctx),
            overrides(ctx),
            hint="check the chart reference and registry access (ghcr.io); a local chart directory needs network "
            "for `--dependency-update`",
        )
    kube = ctx.kube_factory()
    waited = wait_deployments(kube, refs, ctx.timeouts, "Kubeflow Trainer") if refs else 0.0
    crds = check_crds(kube, "trainer", "Kubeflow Trainer", ctx.timeouts, NOT_INSTALLED_FIX)
    rejection = webhook_serves(kube, trainer_probe(), ctx.timeouts)
    from_pr = bool(sources.trainer_manifests or sources.trainer_chart)
    details.setdefault("namespace", NAMESPACE)
    return installed(ctx.settings.combination.trainer, pr_build="PR build" if from_pr else None, refs=refs,
                     waited=waited, webhook=rejection, crds=crds, origin=origin, **details)  # fmt: skip


def verify(ctx: InstallContext) -> dict[str, Any]:
    return verify_component(ctx, ctx.settings.combination.trainer, probe=trainer_probe())
