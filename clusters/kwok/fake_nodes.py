"""Fake GPU nodes managed by kwok (``--fake-nodes N``, topologies scale-100 / scale-500).

A fake node is a Node object the suite creates and kwok plays the kubelet of: kwok manages nodes annotated
``kwok.x-k8s.io/node=fake`` (its in-cluster default, kwok v0.8.0 kustomize/kwok/kwok.yaml
``manageNodesWithAnnotationSelector``), and the nodes carry kwok's taint ``kwok.x-k8s.io/node=fake:NoSchedule``
(site/content/en/docs/user/kwok-manage-nodes-and-pods.md) so nothing but pods that tolerate it lands there. The
suite's workload pods tolerate it (clusters/suite_stack.py ``pod_spec``).

The nodes are the suite's own objects (ownership labels with the run id, :data:`FAKE_NODE_LABEL`), created by
server-side apply through :class:`~fixtures.kube.KubeApi` (which refuses to touch a node that is not the suite's),
and removed at the end of the run, and after a failed provisioning, by :func:`remove_fake_nodes`.

kwok itself: on kind the suite installs the pinned release (clusters/versions.yaml ``kwok``) by server-side apply,
like JobSet, plus its own pod-ending stages (clusters/kwok/stages.py). On an existing cluster it uses the kwok that
runs there (its Stage CRD is served and a kwok-controller Deployment exists, or ``--kwok-managed``) and changes
none of its stages; without one it refuses.

On kind the fake nodes get no InternalIP (:func:`without_node_ip`). kwok's release gives every node it manages the
address of kwok's own pod (``--node-ip=$(POD_IP)``); kind's CNI, kindnetd, routes each other node's pod CIDR through
that node's InternalIP (kind images/kindnetd/cmd/kindnetd/main.go ``reconcileNode``, routes.go ``syncRoute``), a pod
IP is not on the nodes' link, the kernel answers "network is unreachable", and after five tries kindnetd panics
("Maximum retries reconciling node routes") on every real node, again every restart, for as long as a fake node
exists (seen at 300 fake nodes on kind, 2026-11-27, docs/clusters.md; aojea/kindnet#46 is the same panic). A node without an
InternalIP is one kindnetd leaves alone, and nothing the suite or KAI does reads a fake node's address.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from kai_conformance.clusters.fetches import KWOK_ASSETS
from kai_conformance.clusters.gpus import gpu_count
from kai_conformance.clusters.install import manifests
from kai_conformance.clusters.install.context import InstallContext
from kai_conformance.clusters.install.readiness import wait_deployments
from kai_conformance.clusters.kwok import sizing as kwok_sizing
from kai_conformance.clusters.kwok import stages as kwok_stages
from kai_conformance.clusters.layout import GPU_RESOURCE
from kai_conformance.clusters.suite_stack import closed_to_workloads
from kai_conformance.clusters.topology import FakeNodes, Topology, fake_node_name
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.ownership import owned_selector, stamp
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually, eventually_while_shrinking

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_TAINT = {"key": KWOK_ANNOTATION, "value": "fake", "effect": "NoSchedule"}
#: Marks the suite's fake nodes, so removal never lists a real node.
FAKE_NODE_LABEL = "kai-conformance/fake-node"
#: kwok's controller as its release manifests label it (kustomize/kwok/kustomization.yaml ``app: kwok-controller``).
CONTROLLER_LABEL = "app=kwok-controller"
CONTROLLER = ("kube-system", "kwok-controller")
#: kwok's image, whatever the registry mirror in front of it (hack/manifests.sh sets ``<prefix>/kwok:<version>``).
KWOK_IMAGE = re.compile(r"/kwok/kwok(?::|@|$)")
#: What a fake node offers besides GPUs: enough that GPUs, not CPU or memory, bound what fits.
NODE_RESOURCES = {"cpu": "128", "memory": "1Ti", "pods": "110"}


def fake_node(name: str, index: int, fake: FakeNodes, run_id: str) -> dict[str, Any]:
    """One fake node, stamped as the suite's own for ``run_id``."""
    resources = {**NODE_RESOURCES, GPU_RESOURCE: str(fake.gpus)}
    labels = {
        **fake.node_labels(index),
        FAKE_NODE_LABEL: "true",
        "type": "kwok",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/role": "agent",
    }
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {"taints": [dict(KWOK_TAINT)]},
        # Sent as a status patch after the apply (server-side apply leaves an existing node's status alone); kwok's
        # node-initialize stage keeps what it finds in capacity/allocatable (kustomize/stage/node/fast).
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }
    return stamp(node, run_id)


def fake_nodes(topology: Topology, cluster_name: str, run_id: str) -> list[dict[str, Any]]:
    fake = topology.fake_nodes
    return [fake_node(fake_node_name(cluster_name, i), i, fake, run_id) for i in range(fake.count)]


def fake_node_selector(run_id: str | None = None) -> str:
    return f"{owned_selector(run_id)},{FAKE_NODE_LABEL}=true"


def _closed(node: dict[str, Any], gpus: int) -> str | None:
    """Why a fake node cannot take workloads yet, or ``None``: kwok has not reported it Ready with its GPUs, or the
    node lifecycle controller has not lifted its ``not-ready`` taint (:func:`~clusters.suite_stack.closed_to_workloads`:
    at 1,000 fake nodes on kind a burst a minute after all were Ready found 312 closed)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return "not Ready"
    if gpu_count(node) != gpus:
        return f"{gpu_count(node)} of {gpus} GPUs"
    return closed_to_workloads(node)


def create_fake_nodes(
    kube: KubeApi, topology: Topology, cluster_name: str, run_id: str, timeouts: TimeoutPolicy
) -> dict[str, int]:
    """Apply the topology's fake nodes and wait until each has been Ready and open to workloads (:func:`_closed`),
    in rounds while more open; returns node → GPUs."""
    nodes = fake_nodes(topology, cluster_name, run_id)
    progress.report(f"fake nodes: creating {len(nodes)} kwok nodes × {topology.fake_nodes.gpus} GPUs")
    for node in nodes:
        body = {k: v for k, v in node.items() if k != "status"}
        try:
            kube.apply(body)
            kube.patch(kinds.NODE, node["metadata"]["name"], {"status": node["status"]}, subresource="status")
        except errors.ForeignObject as exc:
            raise errors.UsageError(
                f"node {node['metadata']['name']} already exists and is not the suite's; the suite never changes a "
                "real node. fix: pass another --cluster-name (fake nodes are named <cluster-name>-kwok-NNNN)"
            ) from exc
    names = [n["metadata"]["name"] for n in nodes]
    opened: set[str] = set()  # seen open at least once: kwok renews a thousand leases late, some are always closing

    def probe() -> Observation:
        listed = kube.list(kinds.NODE, labels=fake_node_selector(run_id))
        why = {n["metadata"]["name"]: _closed(n, topology.fake_nodes.gpus) for n in listed}
        opened.update(name for name, closed in why.items() if closed is None)
        pending = [f"{name} ({why.get(name) or 'not listed'})" for name in names if name not in opened]
        said = f"{len(names) - len(pending)}/{len(names)} Ready and open to workloads"
        return Observation(not pending, said + (f"; e.g. {', '.join(pending[:3])} not yet" if pending else ""))

    eventually_while_shrinking(
        probe,
        lambda: len(names) - len(opened),
        what="kwok to report the fake nodes Ready, and them open to workloads",
        timeout=timeouts("ready"),
        failure=errors.WaitTimeout,
        fix="check kwok's controller (`kubectl -n kube-system logs deploy/kwok-controller`), that it manages nodes "
        f"annotated {KWOK_ANNOTATION}=fake, and the nodes' taints (`kubectl describe node <name>`)",
    )
    return {name: topology.fake_nodes.gpus for name in names}


def remove_fake_nodes(kube: KubeApi, run_id: str, timeouts: TimeoutPolicy) -> list[str]:
    """Delete every fake node this run created and wait until they are gone; returns the names removed."""
    selector = fake_node_selector(run_id)
    names = [n["metadata"]["name"] for n in kube.list(kinds.NODE, labels=selector)]
    for name in names:
        kube.delete(kinds.NODE, name)

    def gone() -> Observation:
        left = [n["metadata"]["name"] for n in kube.list(kinds.NODE, labels=selector)]
        return Observation(not left, f"still present: {', '.join(left[:5])}" if left else "gone")

    if names:
        eventually(gone, what="removal of the fake nodes", timeout=timeouts("cleanup"), failure=errors.WaitTimeout)
        progress.report(f"fake nodes: removed {len(names)}")
        _wait_for_their_pods(kube, set(names), timeouts)
    return names


#: Seconds between two lists of the cluster's bound pods while the pod GC works: thousands of pods, listed whole.
POD_GC_POLL = 2.0


def _wait_for_their_pods(kube: KubeApi, nodes: set[str], timeouts: TimeoutPolicy) -> None:
    """Until no pod is bound to a removed fake node. kube-controller-manager's pod GC removes a pod whose node is gone
    (after a 40 s quarantine); on kind every fake node got one pod of each of kindnet's and kube-proxy's DaemonSets,
    which tolerate every taint (2,000 at 1,000 nodes, gone in about 3 min on 2 cores, 2026-11-27). Not the suite's
    objects, so it removes none of them; it waits, so a run leaves nothing of its nodes behind and the next run's
    nodes of the same names start empty. As long as their number keeps falling (:func:`eventually_while_shrinking`)."""

    def left() -> list[str]:
        pods = kube.list(kinds.POD, fields="spec.nodeName!=")
        return [f"{p['metadata'].get('namespace')}/{p['metadata']['name']}" for p in pods
                if (p.get("spec") or {}).get("nodeName") in nodes]  # fmt: skip

    def probe() -> Observation:
        pods = left()
        return Observation(not pods, f"{len(pods)} pod(s) still on removed fake nodes, e.g. {', '.join(pods[:3])}"
                           if pods else "none left")  # fmt: skip

    if probe().ok:
        return
    progress.report("fake nodes: waiting for the pod GC to remove the pods left on them (the DaemonSets')")
    eventually_while_shrinking(probe, lambda: len(left()), what="the pods on the removed fake nodes to be gone",
                               timeout=timeouts("cleanup"), interval=POD_GC_POLL, failure=errors.WaitTimeout)  # fmt: skip


# ------------------------------------------------------------------------------------------------------ kwok
#: kwok's flag for the address it gives the nodes it manages (pkg/kwok/cmd/root.go); without it, none.
NODE_IP_FLAG = "--node-ip"


def without_node_ip(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kwok's manifests with ``--node-ip`` taken from its controller's args (both ``--node-ip=X`` and ``--node-ip X``),
    so kwok's node stages write no InternalIP (kustomize/stage/node/fast ``{{ with NodeIP }}``): see the module's
    docstring for kindnetd."""
    changed = []
    for obj in objects:
        containers = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")
        if obj.get("kind") != "Deployment" or not containers:
            changed.append(obj)
            continue
        copied = copy.deepcopy(obj)
        for container in copied["spec"]["template"]["spec"]["containers"]:
            if KWOK_IMAGE.search(container.get("image") or "") and container.get("args"):
                container["args"] = _drop_flag(container["args"], NODE_IP_FLAG)
        changed.append(copied)
    return changed


def _drop_flag(args: list[str], flag: str) -> list[str]:
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg == flag:
            skip_value = True
        elif not arg.startswith(f"{flag}="):
            kept.append(arg)
    return kept


Release = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # kwok.yaml's objects, stage-fast.yaml's


def load_kwok(ctx: InstallContext) -> Release:
    """The pinned release's manifests, read before anything is installed: a run that cannot get them stops first."""
    pin = ctx.settings.catalog.kwok
    local = ctx.settings.kwok_manifests
    controller_source = str(Path(local) / KWOK_ASSETS[0]) if local else pin["controller"]
    stages_source = str(Path(local) / KWOK_ASSETS[1]) if local else pin["stages"]
    try:
        controller, _ = manifests.load(controller_source, ctx.runner, ctx.fetch, ctx.timeouts("install"))
        release_stages, _ = manifests.load(stages_source, ctx.runner, ctx.fetch, ctx.timeouts("install"))
    except errors.InfrastructureError as exc:
        raise errors.InfrastructureError(
            f"--fake-nodes needs kwok {pin['version']}, and its release manifests cannot be read: "
            f"{str(exc).splitlines()[0]}. fix: let this machine reach github.com (the URLs are pinned in "
            "clusters/versions.yaml `kwok:`), or pass --kwok-manifests=DIR with the release's kwok.yaml and "
            "stage-fast.yaml downloaded elsewhere, or run on a cluster where kwok already runs (--cluster existing, "
            "with --kwok-managed if the suite cannot find it), or drop --fake-nodes"
        ) from exc
    return controller, release_stages


def install_kwok(ctx: InstallContext, kube: KubeApi, run_id: str, release: Release | None = None) -> dict[str, Any]:
    """On kind: the pinned kwok release, the release stages the suite keeps, and the suite's own stages."""
    pin = ctx.settings.catalog.kwok
    controller, release_stages = release or load_kwok(ctx)
    origin = ctx.settings.kwok_manifests or pin["controller"]
    progress.report(f"kwok {pin['version']}: installing from {origin}")
    objects, lease_workers = kwok_sizing.sized(without_node_ip(controller), ctx.settings.topology.fake_nodes.count)
    applied = manifests.apply_all(kube, objects, ctx.timeouts, "kwok")
    applied += manifests.apply_all(kube, kwok_stages.release_stages_kept(release_stages), ctx.timeouts, "kwok stages")
    for stage in kwok_stages.suite_stages():
        kube.apply(stamp(stage, run_id))
        applied.append(f"Stage {stage['metadata']['name']}")
    deployments = manifests.deployments_of(controller) or [CONTROLLER]
    wait_deployments(kube, deployments, ctx.timeouts, "kwok")
    record: dict[str, Any] = {"version": pin["version"], "origin": origin, "objects": len(applied)}
    if lease_workers is not None:
        kwok_sizing.wait_rolled_out(kube, deployments, lease_workers, ctx.timeouts)
        record["node_lease_parallelism"] = lease_workers
    stages = [*kwok_stages.KEPT_RELEASE_STAGES, *(s["metadata"]["name"] for s in kwok_stages.suite_stages())]
    return {**record, "stages": stages}


def _controllers(kube: KubeApi) -> list[dict[str, Any]]:
    """kwok's controller Deployments: by the release's label, else by kwok's image (an install of one's own)."""
    labelled = kube.list(kinds.DEPLOYMENT, labels=CONTROLLER_LABEL)
    if labelled:
        return labelled
    return [d for d in kube.list(kinds.DEPLOYMENT) if any(
        KWOK_IMAGE.search(c.get("image", ""))
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []))]  # fmt: skip


def find_kwok(kube: KubeApi) -> tuple[dict[str, Any] | None, str]:
    """On an existing cluster: (what found kwok, "") or (None, what is missing)."""
    try:
        kube.discover(kinds.KWOK_STAGE)
    except errors.KindNotServed:
        return None, "no kwok Stage CRD (stages.kwok.x-k8s.io)"
    controllers = _controllers(kube)
    if not controllers:
        return None, f"no Deployment labelled {CONTROLLER_LABEL} or running kwok's image"
    meta = controllers[0]["metadata"]
    return {"origin": f"found: Deployment {meta.get('namespace')}/{meta['name']}", "stage_crd": True}, ""


#: What lets --fake-nodes run on an existing cluster without kwok (the suite installs kwok only on kind).
MISSING_KWOK_FIX = (
    "install kwok (`kubectl apply -f https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok.yaml` "
    f"and stage-fast.yaml), or pass --kwok-managed if a kwok manages nodes annotated {KWOK_ANNOTATION}=fake, or "
    "drop --fake-nodes"
)


def missing_kwok(missing: str) -> str:
    return (
        f"--fake-nodes needs kwok on the existing cluster, and it has {missing}; the suite installs kwok only on kind"
    )


def detect_kwok(kube: KubeApi, declared: bool) -> dict[str, Any]:
    """On an existing cluster: the kwok that runs there, or one clear refusal (preflight refuses first:
    :func:`kwok_prerequisite`; this stays for a kwok removed in between)."""
    if declared:
        try:
            kube.discover(kinds.KWOK_STAGE)
            crd = True
        except errors.KindNotServed:
            crd = False
        return {"origin": "declared by --kwok-managed", "stage_crd": crd}
    found, missing = find_kwok(kube)
    if found is None:
        raise errors.UsageError(f"{missing_kwok(missing)}. fix: {MISSING_KWOK_FIX}. No fake node was created.")
    return found


def kwok_prerequisite(kube: KubeApi) -> tuple[str, str] | None:
    """For preflight on an existing cluster with --fake-nodes (and no --kwok-managed): (problem, fix), or None."""
    try:
        found, missing = find_kwok(kube)
    except errors.KubeError as exc:
        return (
            f"--fake-nodes needs kwok on the existing cluster, and looking for it failed: {exc}",
            f"pass --kwok-managed if a kwok manages nodes annotated {KWOK_ANNOTATION}=fake, or let the suite list "
            "Deployments in all namespaces, or drop --fake-nodes",
        )
    return None if found is not None else (missing_kwok(missing), MISSING_KWOK_FIX)
