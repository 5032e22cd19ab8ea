"""What every installer needs: the cluster, the tools, the timeouts, and where components come from."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kai_conformance.clusters import commands
from kai_conformance.clusters.catalog import Component
from kai_conformance.clusters.fetches import missing_chart_dependencies
from kai_conformance.fixtures import progress
from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.kube.wire import without_nulls
from kai_conformance.fixtures.waits import TimeoutPolicy

if TYPE_CHECKING:  # the run's settings (fixtures/configuration/settings.py), passed in by clusters.provision
    from kai_conformance.fixtures.configuration.settings import Settings


@dataclass(frozen=True)
class InstallContext:
    settings: Settings
    kube_factory: Callable[[], KubeApi]  # a fresh client per installer thread
    runner: commands.Runner
    fetch: Callable[[str, float], str]  # URL, timeout → text (JobSet release manifests)
    kubeconfig: str
    context: str | None

    @property
    def timeouts(self) -> TimeoutPolicy:
        return self.settings.timeouts

    def cluster_flags(self) -> list[str]:
        """``--kubeconfig``/``--kube-context`` for helm (a ``KUBECONFIG`` list goes through the environment)."""
        flags = [] if os.pathsep in self.kubeconfig else ["--kubeconfig", self.kubeconfig]
        return flags + (["--kube-context", self.context] if self.context else [])

    def env(self) -> dict[str, str] | None:
        return {"KUBECONFIG": self.kubeconfig} if os.pathsep in self.kubeconfig else None

    def helm(self, *args: str, timeout: float | None = None, hint: str = "") -> commands.Completed:
        argv = [commands.tool("helm"), *args, *self.cluster_flags()]
        try:
            return self.runner(argv, timeout=timeout or self.timeouts("api"), env=self.env())
        except commands.CommandFailed as exc:
            if hint and not exc.hint:
                raise commands.CommandFailed(exc.argv, exc.how, exc.output, hint) from None
            raise


def helm_deployments(ctx: InstallContext, release: str, namespace: str) -> list[tuple[str, str]]:
    """(namespace, name) of every Deployment a Helm release rendered (``helm get manifest``)."""
    answer = ctx.helm("get", "manifest", release, "--namespace", namespace)
    found = []
    for doc in yaml.safe_load_all(answer.stdout):
        if isinstance(doc, dict) and doc.get("kind") == "Deployment":
            found.append((doc["metadata"].get("namespace") or namespace, doc["metadata"]["name"]))
    return found


def helm_values(ctx: InstallContext, release: str, namespace: str) -> dict[str, Any]:
    """The values the release was installed with (what the suite and the operator supplied); a value given as
    ``null`` (Helm's way of removing a default) reads as absent."""
    answer = ctx.helm("get", "values", release, "--namespace", namespace, "--output", "json")
    return without_nulls(yaml.safe_load(answer.stdout) or {})


#: What Helm says when the release would take over objects another installer made (on real kind: a reused
#: cluster switched from --trainer-manifests back to --trainer-chart).
FOREIGN_OWNER = "invalid ownership metadata"
FOREIGN_OWNER_HINT = (
    "the cluster already has {label} objects that Helm release {release} did not install (e.g. an earlier run with "
    "--trainer-manifests on this reused cluster): remove them (`kubectl delete namespace {namespace}` and the "
    "component's CRDs and cluster-wide RBAC), or run on a fresh cluster"
)


@dataclass(frozen=True)
class Chart:
    """A Helm release to install: the released chart at its pinned version, or the chart a PR gave."""

    release: str
    namespace: str
    ref: str
    version: str | None  # None: the operator's chart (a directory or a reference), installed as it is

    @classmethod
    def of(cls, component: Component, override: str | None, release: str, namespace: str) -> Chart:
        if override:
            return cls(release, namespace, override, None)
        return cls(release, namespace, component.fields["chart"], str(component.fields["chart_version"]))

    def args(self, ctx: InstallContext, extra: list[str]) -> list[str]:
        """``helm`` arguments (without the cluster flags); a local chart directory whose ``charts/`` lacks some of
        its dependencies gets them fetched (``--dependency-update``), one that holds them all installs offline."""
        args = ["upgrade", "--install", self.release, self.ref, "--namespace", self.namespace, "--create-namespace"]
        if self.version is not None:
            args += ["--version", self.version]
        elif Path(self.ref).is_dir() and missing_chart_dependencies(Path(self.ref)):
            args += ["--dependency-update"]
        return [*args, *extra, "--timeout", f"{ctx.timeouts('install'):.0f}s"]


def install_chart(
    ctx: InstallContext, label: str, chart: Chart, extra: list[str], hint: str
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """Install ``chart``; returns its Deployments and what to record about it."""
    args = chart.args(ctx, extra)
    progress.report(f"{label}: {commands.display(['helm', *args])}")
    try:
        ctx.helm(*args, timeout=ctx.timeouts("install") + 60, hint=hint)
    except commands.CommandFailed as exc:
        if FOREIGN_OWNER not in exc.output:
            raise
        raise commands.CommandFailed(exc.argv, exc.how, exc.output, FOREIGN_OWNER_HINT.format(
            label=label, release=chart.release, namespace=chart.namespace)) from None  # fmt: skip
    details = {
        "chart": chart.ref,
        "chart_version": chart.version,
        "release": chart.release,
        "namespace": chart.namespace,
        "command": commands.display(["helm", *args]),
        "values": helm_values(ctx, chart.release, chart.namespace),
    }
    return helm_deployments(ctx, chart.release, chart.namespace), details
