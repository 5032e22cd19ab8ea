"""kwok sized for the fake nodes it plays, on kind, where the suite installs kwok (clusters/kwok/fake_nodes.py).

kwok renews each node's lease every ``nodeLeaseDurationSeconds`` / 4 (10 s with the release's 40: kwok v0.8.0
``pkg/kwok/controllers/controller.go``), with ``nodeLeaseParallelism`` workers (4 in the release's ``kwok.yaml``).
kube-controller-manager marks a node NotReady, and taints it, once its lease is older than its
``--node-monitor-grace-period`` (50 s). KAI places nothing on such a node, and ``fitting-gangs-bound`` cannot judge
its GPUs (suites/support/scale ``idle_gpus``).

Measured at 1,000 fake nodes on real kind (2026-12-01, 2 cores, load average 25–36 during the overload): the release's
4 workers renewed **8.9 leases/s** (1,068 "Syncing lease" lines of kwok's log in 2 minutes), about 0.45 s a renewal,
so each lease was renewed about every 112 s instead of 10 s, and up to **506 of the 1,000 nodes were NotReady at
once**. To renew every lease within its 10 s at that pace kwok needs ``nodes × 0.45 / 10`` workers, one per 22
nodes: :data:`NODES_PER_LEASE_WORKER` gives one per 20, and never fewer than the release's. A lease renewal is one
small request; more workers do not add requests, they only let the ones kwok already means to send arrive in time.

How: the ConfigMap ``kwok`` (the controller's ``kwok.yaml``) gets the raised ``nodeLeaseParallelism``, and the
controller's pod template an annotation with the value (:data:`SIZED_ANNOTATION`), so that a changed size rolls kwok
out again (it reads its configuration only at start); the install waits until the old pod is gone. kwok stays
installed after the run, as before, sized for the last run's nodes.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import yaml

from kai_conformance.clusters.install.readiness import rollout_incomplete
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually

#: The ConfigMap of kwok's configuration and its key (kwok v0.8.0 kustomize/kwok/kwok.yaml).
CONFIG_MAP, CONFIG_KEY = "kwok", "kwok.yaml"
#: Fake nodes per lease worker (module docstring: measured 0.45 s a renewal, a renewal every 10 s).
NODES_PER_LEASE_WORKER = 20
#: On kwok's pod template: the lease workers it was started with.
SIZED_ANNOTATION = "kai-conformance/kwok-node-lease-parallelism"


def lease_workers(fake_nodes: int, release: int) -> int:
    """The lease workers for ``fake_nodes``: one per :data:`NODES_PER_LEASE_WORKER`, at least the release's."""
    return max(release, math.ceil(fake_nodes / NODES_PER_LEASE_WORKER))


def sized(objects: list[dict[str, Any]], fake_nodes: int) -> tuple[list[dict[str, Any]], int | None]:
    """kwok's manifests with its lease workers sized for ``fake_nodes``, and that number (``None`` when the manifests
    hold no configuration the suite can read: they are left as they are)."""
    config_map = next((o for o in objects if o.get("kind") == "ConfigMap"
                       and (o.get("metadata") or {}).get("name") == CONFIG_MAP), None)  # fmt: skip
    text = ((config_map or {}).get("data") or {}).get(CONFIG_KEY)
    configuration = yaml.safe_load(text) if text else None
    options = configuration.get("options") if isinstance(configuration, dict) else None
    if not isinstance(options, dict):
        return objects, None
    workers = lease_workers(fake_nodes, int(options.get("nodeLeaseParallelism") or 0))
    options["nodeLeaseParallelism"] = workers
    changed = []
    for obj in objects:
        copied = copy.deepcopy(obj)
        if obj is config_map:
            copied["data"][CONFIG_KEY] = yaml.safe_dump(configuration, sort_keys=False)
        elif obj.get("kind") == "Deployment":
            template = copied.setdefault("spec", {}).setdefault("template", {}).setdefault("metadata", {})
            template.setdefault("annotations", {})[SIZED_ANNOTATION] = str(workers)
        changed.append(copied)
    return changed, workers


def wait_rolled_out(kube: KubeApi, deployments: list[tuple[str, str]], workers: int, timeouts: TimeoutPolicy) -> None:
    """Until every kwok Deployment runs with ``workers`` lease workers, rolled out, its old pod gone (two kwoks would
    both play the nodes)."""

    def probe() -> Observation:
        pending = []
        for namespace, name in deployments:
            deployment = kube.find(kinds.DEPLOYMENT, name, namespace)
            annotations = ((((deployment or {}).get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
                "annotations"
            ) or {}
            if deployment is None or annotations.get(SIZED_ANNOTATION) != str(workers):
                pending.append(f"{namespace}/{name} not yet given {workers} lease workers")
            elif why := rollout_incomplete(deployment):
                pending.append(f"{namespace}/{name} {why}")
        return Observation(not pending, "; ".join(pending) or "rolled out")

    eventually(probe, what=f"kwok to run with {workers} lease workers", timeout=timeouts("ready"),
               failure=errors.WaitTimeout,
               fix="look at kwok's controller (`kubectl -n kube-system get deploy,pods -l app=kwok-controller`)")  # fmt: skip
