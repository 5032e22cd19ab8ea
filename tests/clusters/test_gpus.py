"""Fake GPUs: the exact status patch per worker, the wait for allocatable, re-patching after a node was
re-created, a cluster built for another topology, and discovery of real GPUs on existing clusters."""

from __future__ import annotations

import pytest

from kai_conformance.clusters import gpus
from kai_conformance.clusters.layout import describe_gpus
from kai_conformance.clusters.topology import load_topology
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.builders import unsliced
from tests.fakes.installation import EXPIRING, SimulatedStack, worker_node
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

TIMEOUTS = TimeoutPolicy(scale=0.01)


@pytest.fixture
def stack(fake: FakeKube) -> SimulatedStack:
    return SimulatedStack(fake)


def patches(fake: FakeKube) -> list[tuple]:
    return [(c.name, c.detail) for c in fake.operations("patch")]


def test_each_worker_gets_a_json_patch_of_its_status_capacity(stack: SimulatedStack, fake: FakeKube) -> None:
    names = stack.add_workers(3)
    layout = gpus.fake_gpus(fake, unsliced("pr-gate"), "kc-test", TIMEOUTS)
    assert layout == {"kc-test-worker": 4, "kc-test-worker2": 4, "kc-test-worker3": 4}
    op = [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": "4"}]
    assert patches(fake) == [(name, ("application/json-patch+json", "status", op)) for name in names]
    assert all(fake.get(kinds.NODE, n)["status"]["allocatable"]["nvidia.com/gpu"] == "4" for n in names)


def test_workers_are_matched_by_index_label_not_by_name(stack: SimulatedStack, fake: FakeKube) -> None:
    for index, name in enumerate(["zeta", "alpha", "mid", "last", "cpu"]):
        fake.put(worker_node(name, index))
    layout = gpus.fake_gpus(fake, load_topology("release"), "kc-test", TIMEOUTS)
    assert layout == {"zeta": 8, "alpha": 8, "mid": 8, "last": 8, "cpu": 0}
    assert [c.name for c in fake.operations("patch")] == ["zeta", "alpha", "mid", "last"]  # 0 GPUs: nothing to patch


def test_kubelet_never_showing_the_gpus_fails_with_what_it_saw(stack: SimulatedStack, fake: FakeKube) -> None:
    stack.kubelet_mirrors = False
    stack.add_workers(3)
    with pytest.raises(errors.WaitTimeout) as caught:
        gpus.fake_gpus(fake, unsliced("pr-gate"), "kc-test", EXPIRING)
    message = str(caught.value)
    assert message.startswith("kubelet to show the fake GPUs in node allocatable (kc-test-worker=4, ")
    assert "kc-test-worker shows 0; kc-test-worker2 shows 0; kc-test-worker3 shows 0" in message


def test_a_cluster_made_for_another_topology_is_named(stack: SimulatedStack, fake: FakeKube) -> None:
    stack.add_workers(2)
    with pytest.raises(errors.UsageError, match=r"has workers labelled kai-conformance/worker-index=\[0, 1\], but "
                       r"topology pr-gate has 3 workers"):  # fmt: skip
        gpus.fake_gpus(fake, unsliced("pr-gate"), "kc-test", TIMEOUTS)


def test_the_per_case_check_costs_one_list_and_repatches_a_recreated_node(
    stack: SimulatedStack, fake: FakeKube
) -> None:
    stack.add_workers(3)
    topology = unsliced("pr-gate")
    gpus.fake_gpus(fake, topology, "kc-test", TIMEOUTS)
    fake.calls.clear()
    assert gpus.ensure_gpus(fake, topology, "kc-test", TIMEOUTS) == []
    assert [c.operation for c in fake.calls] == ["list"]
    fake.put(worker_node("kc-test-worker2", 1))  # the node re-registered: its patched capacity is gone
    assert gpus.ensure_gpus(fake, topology, "kc-test", TIMEOUTS) == ["kc-test-worker2"]
    assert [c.name for c in fake.operations("patch")] == ["kc-test-worker2"]
    assert gpus.gpu_count(fake.get(kinds.NODE, "kc-test-worker2")) == 4


def test_existing_clusters_report_ready_schedulable_gpu_nodes(fake: FakeKube) -> None:
    fake.put(worker_node("a100-1", None, capacity=8))
    fake.put(worker_node("cpu-1", None))
    cordoned = worker_node("a100-2", None, capacity=8)
    cordoned["spec"] = {"unschedulable": True}
    fake.put(cordoned)
    not_ready = worker_node("a100-3", None, capacity=8)
    not_ready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    fake.put(not_ready)
    assert gpus.discover_gpus(fake) == {"a100-1": 8}


def test_a_few_nodes_are_named_one_by_one_and_hundreds_of_fake_nodes_in_one_phrase() -> None:
    assert describe_gpus({"w2": 4, "w1": 4}) == "w1=4, w2=4"
    many = {f"lab-kwok-{i:04d}": 8 for i in range(1, 201)} | {"w1": 4, "w2": 4, "w3": 4}
    assert describe_gpus(many) == "200 nodes × 8 GPUs (lab-kwok-0001 … lab-kwok-0200), w1=4, w2=4, w3=4"
