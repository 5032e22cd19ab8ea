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


def test_the_room_names_the_gpu_nodes_closed_to_workloads_and_why(fake: FakeKube) -> None:
    fake.put(node("open"))
    fake.put(node("new", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]))
    fake.put(node("late", ready="Unknown"))
    layout = GpuLayout((GpuNode("open", 8), GpuNode("new", 8), GpuNode("late", 8)))
    room = scale.GpuRoom.of(fake, layout)
    assert room.idle() == 8
    assert room.describe(layout) == ("8 of 24 idle; 2 GPU node(s) closed to workloads (late: not Ready, new: taint "
                                     "node.kubernetes.io/not-ready:NoSchedule)")  # fmt: skip


def test_a_burst_waits_for_its_idle_gpus_while_the_node_lifecycle_controller_opens_the_nodes(
    fake: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 1,000 fake nodes on kind the filling burst found 312 nodes closed a minute after all were Ready, and
    skipped at its first look; it now waits, within the ``ready`` budget, until the GPUs it needs are idle."""
    monkeypatch.setattr(scale, "ROOM_INTERVAL", 0.001)
    names = [f"n{i}" for i in range(4)]
    taint = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    for name in names:
        fake.put(node(name, taints=[dict(taint)]))

    def lift_one_per_list(fake: FakeKube, call) -> None:
        if call.kind == "Node" and call.operation == "list":
            closed = [n for n in fake.stored(kinds.NODE) if taint in n["spec"]["taints"]]
            if closed:
                closed[0]["spec"]["taints"].remove(taint)

    fake.reactors.append(lift_one_per_list)
    layout = GpuLayout(tuple(GpuNode(name, 8) for name in names))
    room = scale.wait_for_idle_gpus(fake, layout, 24, TimeoutPolicy(scale=1))
    assert room.idle() >= 24


def test_a_burst_whose_gpus_never_come_free_gets_the_room_as_last_seen(
    fake: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scale, "ROOM_INTERVAL", 0.001)
    fake.put(node("open"))
    fake.put({**node("cordoned"), "spec": {"unschedulable": True}})
    fake.put(builders.pod("holder", workload="other", node="open", gpus=6))
    layout = GpuLayout((GpuNode("open", 8), GpuNode("cordoned", 8)))
    room = scale.wait_for_idle_gpus(fake, layout, 4, TimeoutPolicy(scale=0.001))
    assert (room.idle(), room.closed) == (2, {"cordoned": "cordoned"})
