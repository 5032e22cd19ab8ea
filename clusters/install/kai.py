"""KAI Scheduler: the Helm chart, released (OCI) or a PR's chart directory with image registry/tag overrides.

``helm upgrade --install`` makes the install idempotent. Helm only creates the operator; the operator then
creates the operand Deployments and the webhooks asynchronously, so readiness waits for those too
(docs/research/upstream-facts.md §B6) and proves the queue webhook with a negative dry-run.
"""

from __future__ import annotations

from typing import Any

from kai_conformance.clusters.install.common import NOT_INSTALLED_FIX, installed, verify_component
from kai_conformance.clusters.install.context import Chart, InstallContext, install_chart
from kai_conformance.clusters.install.crds import check_crds
from kai_conformance.clusters.install.readiness import queue_probe, wait_deployments, webhook_serves

RELEASE = "kai-scheduler"
NAMESPACE = "kai-scheduler"
OPERATOR = "kai-operator"
#: Created by the operator (pkg/operator/operands/*/resources.go; kai-scheduler-default = <scheduler>-<shard>).
OPERANDS = ("admission", "binder", "pod-grouper", "podgroup-controller", "queue-controller", "kai-scheduler-default")


def overrides(ctx: InstallContext) -> list[str]:
    """Values files, image registry/tag and ``--set`` values for the KAI chart."""
    sources = ctx.settings.sources
    args = [arg for values in sources.kai_values for arg in ("--values", values)]
    if sources.kai_image_registry:
        args += ["--set", f"global.registry={sources.kai_image_registry}"]
    if sources.kai_image_tag:
        args += ["--set", f"global.tag={sources.kai_image_tag}"]
    return args + [arg for setting in sources.kai_set for arg in ("--set", setting)]


def install(ctx: InstallContext) -> dict[str, Any]:
    sources, component = ctx.settings.sources, ctx.settings.combination.kai
    chart = Chart.of(component, sources.kai_chart, RELEASE, NAMESPACE)
    refs, details = install_chart(
        ctx,
        "KAI Scheduler",
        chart,
        overrides(ctx),
        hint="check the chart reference, registry access (ghcr.io) and the images the chart names; a PR chart "
        "directory needs --kai-image-registry/--kai-image-tag and --load-image for locally built images",
    )
    kube = ctx.kube_factory()
    refs = list(dict.fromkeys([*refs, *((NAMESPACE, name) for name in OPERANDS)]))
    waited = wait_deployments(kube, refs, ctx.timeouts, "KAI Scheduler")
    crds = check_crds(kube, "kai", "KAI Scheduler", ctx.timeouts, NOT_INSTALLED_FIX)
    rejection = webhook_serves(kube, queue_probe(), ctx.timeouts)
    from_pr = bool(sources.kai_chart or sources.kai_image_registry or sources.kai_image_tag)
    pr_build = f"PR build {sources.kai_image_tag or '(chart default tag)'}" if from_pr else None
    origin = f"chart {chart.ref}" + (f" {chart.version}" if chart.version else "")
    return installed(component, pr_build=pr_build, refs=refs, waited=waited, webhook=rejection, crds=crds,
                     origin=origin, **details)  # fmt: skip


def verify(ctx: InstallContext) -> dict[str, Any]:
    """KAI installed by someone else, however it runs: found Deployments are evidence, not a requirement."""
    return verify_component(ctx, ctx.settings.combination.kai, probe=queue_probe())
