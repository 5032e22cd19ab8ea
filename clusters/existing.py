"""Existing clusters (``--cluster existing``): connect, discover the real GPUs, and decide on disruptive cases.

Nothing is faked and nothing is created here. Cases marked ``disruptive`` (they evict workloads and fill every
GPU) run on an existing cluster only when the operator passes ``--allow-disruptive`` or the cluster carries the
opt-in label :data:`OPT_IN_LABEL` ``=true`` on the ``kube-system`` namespace (a cluster-wide object every
cluster has, so the opt-in lives with the cluster, not with a command line)::

    kubectl label namespace kube-system kai-conformance/allow-disruptive=true
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from kai_conformance.clusters.gpus import discover_gpus
from kai_conformance.clusters.state import ClusterState
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds

OPT_IN_NAMESPACE = "kube-system"
OPT_IN_LABEL = "kai-conformance/allow-disruptive"
OPT_IN_COMMAND = f"kubectl label namespace {OPT_IN_NAMESPACE} {OPT_IN_LABEL}=true"
REFUSAL = (
    "disruptive case refused on existing cluster {name}: it evicts running workloads and fills every GPU. "
    "To allow it, pass --allow-disruptive, or opt the cluster in once: " + OPT_IN_COMMAND
)


def resolve_kubeconfig(kubeconfig: str | None) -> str:
    """The kubeconfig the kubernetes client would load: the option, else ``$KUBECONFIG``, else ``~/.kube/config``."""
    return kubeconfig or os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def cluster_name(kubeconfig: str, context: str | None) -> str:
    """The context the run uses, by name: the one given, else the kubeconfig's current context."""
    if context:
        return context
    from kubernetes import config

    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # the client reports a bad kubeconfig itself when it connects
        return "current context"
    return active.get("name") or "current context"


def disruptive_opt_in(kube: KubeApi, allow_flag: bool) -> str:
    """Why disruptive cases may run on this cluster, or ``""`` when they may not."""
    if allow_flag:
        return "--allow-disruptive"
    try:
        namespace = kube.get(kinds.NAMESPACE, OPT_IN_NAMESPACE)
    except errors.KubeError as exc:
        progress.report(f"cannot read the opt-in label on namespace {OPT_IN_NAMESPACE} ({exc}); disruptive cases off")
        return ""
    if (namespace["metadata"].get("labels") or {}).get(OPT_IN_LABEL) == "true":
        return f"label {OPT_IN_LABEL}=true on namespace {OPT_IN_NAMESPACE}"
    return ""


def connect(
    kubeconfig: str | None,
    context: str | None,
    *,
    allow_disruptive: bool,
    kube_factory: Callable[[str, str | None], KubeApi],
) -> tuple[ClusterState, KubeApi]:
    """Reach the cluster and describe it; raises a clear error when it cannot be used."""
    path = resolve_kubeconfig(kubeconfig)
    kube = kube_factory(path, context)
    try:
        version = kube.server_version()
    except errors.KubeError as exc:
        raise errors.InfrastructureError(
            f"the cluster in {path}{f' (context {context})' if context else ''} is unreachable: {exc}\n"
            "fix: check the cluster is up and the kubeconfig points at it (`kubectl cluster-info`)"
        ) from exc
    gpus = discover_gpus(kube)
    name = cluster_name(path, context)
    opt_in = disruptive_opt_in(kube, allow_disruptive)
    progress.report(
        f"existing cluster {name} (Kubernetes {version}): "
        + (", ".join(f"{n}={g}" for n, g in sorted(gpus.items())) or "no allocatable GPUs found")
        + ("; disruptive cases allowed by " + opt_in if opt_in else "; disruptive cases refused")
    )
    state = ClusterState(
        provider="existing", name=name, kubeconfig=path, context=context, gpus=gpus, disruptive_opt_in=opt_in
    )
    return state, kube
