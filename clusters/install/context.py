"""What every installer needs: the cluster, the tools, the timeouts, and where components come from."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from clusters import commands
from fixtures.kube import KubeApi
from fixtures.waits import TimeoutPolicy

if TYPE_CHECKING:  # the plugin layer's settings, passed in by clusters.provision
    from fixtures.options import Settings


@dataclass(frozen=True)
class InstallContext:
    settings: Settings
    kube_factory: Callable[[], KubeApi]  # a fresh client per installer thread
    runner: commands.Runner
    fetch: Callable[[str, float], str]  # URL, timeout → text (JobSet release manifests)
    kubeconfig: str
    context: str | None
    run_id: str

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
    """The values the release was installed with (what the suite and the operator supplied)."""
    answer = ctx.helm("get", "values", release, "--namespace", namespace, "--output", "json")
    return yaml.safe_load(answer.stdout) or {}
