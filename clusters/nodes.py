"""The kind nodes a run asks for, and what the nodes of a cluster actually run.

The node image is the per-minor pin of ``clusters/versions.yaml`` unless ``--node-image`` names another (a
registry mirror, an image already in an air-gapped engine, a Kubernetes build of one's own); a reused cluster
runs whatever image it was created with. So the report names what the nodes run, read from the cluster (each
Node's ``status.nodeInfo``, and on kind the image of each node container from ``docker inspect``), and the pin
only as a pin.

cgroup v1: from Kubernetes 1.35 the kubelet refuses to start on a cgroup v1 host (``failCgroupV1`` defaults to
true, KEP-5573, kubernetes/kubernetes#134298) while kind only warns, so the nodes never become Ready. Preflight
reads the engine's cgroup version and refuses such a run before creating anything, unless ``--kubelet-cgroup-v1``
opts in: then every node's KubeletConfiguration gets ``failCgroupV1: false`` (a kind ``kubeadmConfigPatches``
entry, which kind applies to every node) and the report says so.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from kai_conformance.clusters import commands
from kai_conformance.clusters.assumptions import kubernetes_key
from kai_conformance.clusters.kwok.fake_nodes import KWOK_ANNOTATION
from kai_conformance.fixtures.kube import KubeApi, kinds

#: The first minor whose kubelet refuses cgroup v1 unless told otherwise.
FAIL_CGROUP_V1_FROM = (1, 35)
#: Every node's kubelet may run on cgroup v1 (kind ``kubeadmConfigPatches``; KubeletConfiguration v1beta1).
CGROUP_V1_KUBELET_PATCH = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nfailCgroupV1: false\n"
CGROUP_V1_OVERRIDE = {"failCgroupV1": False}

_TAG_VERSION = re.compile(r":v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][\w.-]*)?$")


def minor_of_image(image: str) -> str | None:
    """``kindest/node:v1.34.12@sha256:…`` → ``1.34``; ``None`` when the tag names no version."""
    match = _TAG_VERSION.search(image.split("@", 1)[0])
    return f"{match.group(1)}.{match.group(2)}" if match else None


def kubelet_refuses_cgroup_v1(minor: str) -> bool:
    return kubernetes_key(minor) >= FAIL_CGROUP_V1_FROM


def container_images(runner: commands.Runner, names: Iterable[str], timeout: float) -> dict[str, str]:
    """node container name → the image it was created from (``docker inspect``); nodes not found are left out."""
    found = {}
    for name in names:
        answer = runner(
            [commands.tool("docker"), "inspect", "--format", "{{.Config.Image}}", name], timeout=timeout, check=False
        )
        if answer.returncode == 0 and answer.stdout.strip():
            found[name] = answer.stdout.strip()
    return found


def _distinct(values: Iterable[str]) -> str:
    counts = Counter(v for v in values if v)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{value} ({count} nodes)" for value, count in sorted(counts.items()))


def nodes_running(kube: KubeApi, images: dict[str, str] | None = None) -> dict[str, Any]:
    """What the cluster's real nodes run (kwok's fake nodes left out): kubelet, container runtime, OS and, where
    known, the node image; each value is one version, or each version with its count when nodes differ."""
    nodes = [n for n in kube.list(kinds.NODE)
             if n.get("metadata", {}).get("annotations", {}).get(KWOK_ANNOTATION) != "fake"]  # fmt: skip
    info = [n.get("status", {}).get("nodeInfo", {}) for n in nodes]
    running: dict[str, Any] = {
        "count": len(nodes),
        "kubelet": _distinct(i.get("kubeletVersion", "") for i in info),
        "container_runtime": _distinct(i.get("containerRuntimeVersion", "") for i in info),
        "os": _distinct(i.get("osImage", "") for i in info),
        "kernel": _distinct(i.get("kernelVersion", "") for i in info),
    }
    if images:
        running["image"] = _distinct(images.get(n["metadata"]["name"], "") for n in nodes)
    return {key: value for key, value in running.items() if value not in ("", None)}
