"""What a scale burst observes (suites/support/scale/__init__.py): the pods, PodGroups and BindRequests of its
namespace, each fed to the ledger; and the GPUs idle cluster-wide once it has settled."""

from __future__ import annotations

import pytest

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually
from kai_conformance.suites.support import scale
from kai_conformance.suites.support.cases.scale import BurstPlan, PlannedGang, PlannedQueue
from tests import builders
from tests.fakes.kube import FakeKube

TIMEOUTS = TimeoutPolicy(scale=0.1)
PLAN = BurstPlan((PlannedGang("g0", 2, 1, "q", "train"),), (PlannedQueue("q", quota=-1, limit=-1),), 16)


def bindrequest(pod: str, phase: str = "Pending") -> dict:
    return {
        "apiVersion": kinds.BIND_REQUEST.api_version, "kind": kinds.BIND_REQUEST.kind,
        "metadata": {"name": f"{pod}-request", "namespace": builders.NS},
        "spec": {"podName": pod, "selectedNode": "node-a"}, "status": {"phase": phase},
    }  # fmt: skip


def test_a_kai_burst_feeds_its_namespaces_bindrequests_to_the_ledger_and_a_gang_being_bound_is_not_partial(
    fake: FakeKube,
) -> None:
    with scale.Burst(fake, builders.NS, PLAN, TIMEOUTS) as burst:
        fake.put(builders.pod("g0-0", workload="g0", node="node-a"))
        fake.put(builders.pod("g0-1", workload="g0"))
        fake.put(bindrequest("g0-1"))

        def seen() -> Observation:
            with burst.lock:
                return Observation("g0-1" in burst.ledger.requested and burst.ledger.gangs["g0"].bound == 1, "")

        eventually(seen, what="the ledger to have the pods and the BindRequest", timeout=5)
        with burst.lock:
            assert burst.ledger.partial.binding == {"g0"}
            allowance = burst.ledger.partial.bind_allowance
        assert allowance == scale.bind_allowance(TIMEOUTS) == TIMEOUTS("schedule")
        assert burst.guards()["gang-never-partial"].ok


def test_a_burst_of_the_default_scheduler_watches_no_bindrequest(fake: FakeKube) -> None:
    with scale.Burst(fake, builders.NS, PLAN, TIMEOUTS, kai=False) as burst:
        burst.watchers[kinds.POD]
        with pytest.raises(KeyError):
            burst.watchers[kinds.BIND_REQUEST]


def node(name: str, *, ready: str = "True", taints: list[dict] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"taints": taints or []}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}  # fmt: skip


def test_gpus_on_nodes_no_workload_pod_may_be_placed_on_now_are_not_idle(fake: FakeKube) -> None:
    """At 1,000 fake nodes on 2 cores kwok renewed their leases late and tens went NotReady for a while: KAI may not
    fill them then, so ``fitting-gangs-bound`` must not count their GPUs as idle."""
    kwok_taint = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
    for listed in (
        node("ready"),
        node("not-ready", ready="Unknown"),
        node("unreachable", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
        node("kwok", taints=[kwok_taint]),
        {**node("cordoned"), "spec": {"unschedulable": True}},
    ):
        fake.put(listed)
    names = ("ready", "not-ready", "unreachable", "kwok", "cordoned", "not-listed")
    layout = GpuLayout(tuple(GpuNode(name, 8) for name in names))
    fake.put(builders.pod("holder", workload="other", node="kwok", gpus=3))
    assert scale.idle_gpus(fake, layout) == {"ready": 8, "kwok": 5, "not-listed": 8}
