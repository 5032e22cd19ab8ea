"""KAI Scheduler: the Helm chart, released (OCI) or a PR's chart directory with image registry/tag overrides.

``helm upgrade --install`` makes the install idempotent. Helm only creates the operator; the operator then
creates the operand Deployments and the webhooks asynchronously, so readiness waits for those too
(docs/research/upstream-facts.md §B6) and proves the queue webhook with a negative dry-run.
"""

from __future__ import annotations

from typing import Any

from clusters import commands
from clusters.install.common import check_version, deployment_images, find_deployments, is_local, record
from clusters.install.context import InstallContext, helm_deployments, helm_values
from clusters.install.readiness import queue_probe, wait_deployments, webhook_serves
from fixtures import progress

RELEASE = "kai-scheduler"
NAMESPACE = "kai-scheduler"
OPERATOR = "kai-operator"
#: Created by the operator (pkg/operator/operands/*/resources.go; kai-scheduler-default = <scheduler>-<shard>).
OPERANDS = ("admission", "binder", "pod-grouper", "podgroup-controller", "queue-controller", "kai-scheduler-default")


def helm_args(ctx: InstallContext) -> list[str]:
    """``helm`` arguments (without the cluster flags) that install the chart the run asks for."""
    component = ctx.settings.combination.kai
    sources = ctx.settings.sources
    chart = sources.kai_chart or component.fields["chart"]
    args = ["upgrade", "--install", RELEASE, chart, "--namespace", NAMESPACE, "--create-namespace"]
    if sources.kai_chart is None:
        args += ["--version", str(component.fields["chart_version"])]
    elif is_local(chart):
        args += ["--dependency-update"]
    for values in sources.kai_values:
        args += ["--values", values]
    if sources.kai_image_registry:
        args += ["--set", f"global.registry={sources.kai_image_registry}"]
    if sources.kai_image_tag:
        args += ["--set", f"global.tag={sources.kai_image_tag}"]
    for setting in sources.kai_set:
        args += ["--set", setting]
    return [*args, "--timeout", f"{ctx.timeouts('install'):.0f}s"]


def install(ctx: InstallContext) -> dict[str, Any]:
    args = helm_args(ctx)
    progress.report(f"KAI Scheduler: {commands.display(['helm', *args])}")
    ctx.helm(
        *args,
        timeout=ctx.timeouts("install") + 60,
        hint="check the chart reference, registry access (ghcr.io) and the images the chart names; a PR chart "
        "directory needs --kai-image-registry/--kai-image-tag and --load-image for locally built images",
    )
    kube = ctx.kube_factory()
    refs = helm_deployments(ctx, RELEASE, NAMESPACE) + [(NAMESPACE, name) for name in OPERANDS]
    refs = list(dict.fromkeys(refs))
    waited = wait_deployments(kube, refs, ctx.timeouts, "KAI Scheduler")
    rejection = webhook_serves(kube, queue_probe(), ctx.timeouts)
    sources, component = ctx.settings.sources, ctx.settings.combination.kai
    from_pr = bool(sources.kai_chart or sources.kai_image_registry or sources.kai_image_tag)
    return record(
        version=(f"PR build {sources.kai_image_tag or '(chart default tag)'}" if from_pr else component.version),
        expectations=component.version,
        source="pr" if from_pr else "release",
        chart=sources.kai_chart or component.fields["chart"],
        chart_version=None if sources.kai_chart else component.fields["chart_version"],
        namespace=NAMESPACE,
        release=RELEASE,
        command=commands.display(["helm", *args]),
        values=helm_values(ctx, RELEASE, NAMESPACE),
        deployments=[f"{ns}/{name}" for ns, name in refs],
        ready_after_seconds=round(waited, 1),
        webhook=rejection,
    )


def verify(ctx: InstallContext) -> dict[str, Any]:
    """An installed KAI: the queue webhook serves, the operand Deployments are Available, the version matches."""
    kube = ctx.kube_factory()
    rejection = webhook_serves(kube, queue_probe(), ctx.timeouts)
    found = find_deployments(kube, (OPERATOR, *OPERANDS))
    namespace = next((ns for ns, name in found if name == OPERATOR), NAMESPACE)
    refs = [(namespace, name) for name in OPERANDS]
    wait_deployments(kube, refs, ctx.timeouts, "KAI Scheduler")
    expected = ctx.settings.combination.kai.version
    version = check_version(
        "KAI Scheduler",
        "--kai-version",
        expected,
        deployment_images(kube, found),
        ctx.settings.catalog.components["kai"],
    )
    return record(version=version, expectations=expected, source="verified", namespace=namespace, deployments=[f"{ns}/{n}" for ns, n in refs],
                  webhook=rejection)  # fmt: skip
