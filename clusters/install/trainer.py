"""Kubeflow Trainer: its Helm chart (release ``kubeflow-trainer`` in ``kubeflow-system``, bundled JobSet off), or
a PR's manifests / kustomize directory applied by server-side apply.

JobSet is installed separately, so the chart gets ``--set jobset.install=false`` ("must be set to false if
jobset controller/webhook has already been installed", values.yaml) and JobSet's objects are dropped from
Trainer manifests (the kustomize overlay bundles them, upstream-facts §A6 and trainer-jobset.md §5.2).
"""

from __future__ import annotations

from typing import Any

from clusters import commands
from clusters.install import manifests
from clusters.install.common import check_version, deployment_images, find_deployments, is_local, record
from clusters.install.context import InstallContext, helm_deployments, helm_values
from clusters.install.readiness import trainer_probe, wait_deployments, webhook_serves
from fixtures import progress

RELEASE = "kubeflow-trainer"
NAMESPACE = "kubeflow-system"
#: ``<fullname>-controller-manager``; fullname is the release name when it contains "kubeflow-trainer".
DEPLOYMENT = "kubeflow-trainer-controller-manager"
JOBSET_GROUP = "jobset.x-k8s.io"


def helm_args(ctx: InstallContext) -> list[str]:
    component = ctx.settings.combination.trainer
    sources = ctx.settings.sources
    chart = sources.trainer_chart or component.fields["chart"]
    args = ["upgrade", "--install", RELEASE, chart, "--namespace", NAMESPACE, "--create-namespace"]
    if sources.trainer_chart is None:
        args += ["--version", str(component.fields["chart_version"])]
    elif is_local(chart):
        args += ["--dependency-update"]
    args += ["--set", "jobset.install=false"]
    for setting in sources.trainer_set:
        args += ["--set", setting]
    return [*args, "--timeout", f"{ctx.timeouts('install'):.0f}s"]


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


def _install_chart(ctx: InstallContext) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    args = helm_args(ctx)
    progress.report(f"Kubeflow Trainer: {commands.display(['helm', *args])}")
    ctx.helm(
        *args,
        timeout=ctx.timeouts("install") + 60,
        hint="check the chart reference and registry access (ghcr.io); a local chart directory needs network "
        "for `--dependency-update`",
    )
    details = {
        "chart": ctx.settings.sources.trainer_chart or ctx.settings.combination.trainer.fields["chart"],
        "chart_version": None
        if ctx.settings.sources.trainer_chart
        else ctx.settings.combination.trainer.fields["chart_version"],
        "release": RELEASE,
        "command": commands.display(["helm", *args]),
        "values": helm_values(ctx, RELEASE, NAMESPACE),
    }
    return helm_deployments(ctx, RELEASE, NAMESPACE), details


def install(ctx: InstallContext) -> dict[str, Any]:
    sources = ctx.settings.sources
    if sources.trainer_manifests:
        progress.report(f"Kubeflow Trainer: installing from {sources.trainer_manifests}")
        refs, details = _install_manifests(ctx, sources.trainer_manifests)
    else:
        refs, details = _install_chart(ctx)
    kube = ctx.kube_factory()
    waited = wait_deployments(kube, refs, ctx.timeouts, "Kubeflow Trainer") if refs else 0.0
    rejection = webhook_serves(kube, trainer_probe(), ctx.timeouts)
    component = ctx.settings.combination.trainer
    from_pr = bool(sources.trainer_manifests or sources.trainer_chart)
    return record(
        version="PR build" if from_pr else component.version,
        expectations=component.version,
        source="pr" if from_pr else "release",
        namespace=NAMESPACE,
        deployments=[f"{ns}/{name}" for ns, name in refs],
        ready_after_seconds=round(waited, 1),
        webhook=rejection,
        **details,
    )


def verify(ctx: InstallContext) -> dict[str, Any]:
    kube = ctx.kube_factory()
    rejection = webhook_serves(kube, trainer_probe(), ctx.timeouts)
    refs = find_deployments(kube, (DEPLOYMENT,))
    if refs:
        wait_deployments(kube, refs, ctx.timeouts, "Kubeflow Trainer")
    expected = ctx.settings.combination.trainer.version
    version = check_version(
        "Kubeflow Trainer", "--trainer-version", expected, deployment_images(kube, refs),
        ctx.settings.catalog.components["trainer"],
    )  # fmt: skip
    return record(version=version, expectations=expected, source="verified",
                  deployments=[f"{ns}/{n}" for ns, n in refs], webhook=rejection)  # fmt: skip
