"""Slices (clusters/slices.py, fixtures/partition.py): a copy of the topology's workers in a KAI node pool of its
own, where a serial case runs beside the others. End to end through the plugin over HTTP (as
tests/clusters/test_plugin.py), then the pieces: the topology's nodes, the seat a serial case takes, the labels
its objects get, and the simulated KAI keeping each node pool to its own nodes and queues."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kai_conformance.clusters import tools
from kai_conformance.clusters.install.stack import install_stack
from kai_conformance.clusters.layout import GpuNode
from kai_conformance.clusters.slices import parent_queue_name, slice_manifests
from kai_conformance.clusters.suite_stack import PARENT_QUEUE, queue
from kai_conformance.clusters.topology import NODE_POOL_LABEL, WORKER_INDEX_LABEL, load_topology, with_slices
from kai_conformance.fixtures import errors, plugin
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.partition import into_node_pool
from kai_conformance.fixtures.plugin.scheduling import CaseGate
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.clusters.test_plugin import run_suite, state_of
from tests.fakes.apiserver import serve
from tests.fakes.bridge import route_to
from tests.fakes.commands import FakeKind, executable, tools_on_path
from tests.fakes.installation import SimulatedStack, install_context, make_settings
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")
SLICE = "kc-slice-1"

SUITE = """
import pytest
from kai_conformance.clusters.suite_stack import queue
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.partition import partition_of


@pytest.mark.serial
def test_in_a_slice(request, workspace, kube):
    partition = partition_of(request.node)
    assert partition.node_pool == "kc-slice-1"
    assert sorted(partition.layout.by_name()) == [
        "kai-conformance-worker4", "kai-conformance-worker5", "kai-conformance-worker6"]
    stored = workspace.apply(queue("kcq-leaf", parent="kai-conformance"))
    assert stored["metadata"]["labels"]["kai.scheduler/node-pool"] == "kc-slice-1"
    assert stored["spec"]["parentQueue"] == "kai-conformance-kc-slice-1"


@pytest.mark.serial
@pytest.mark.shared_workers
def test_on_the_shared_workers(request, workspace, gpu_layout):
    partition = partition_of(request.node)
    assert partition.node_pool is None and partition.layout == gpu_layout
    stored = workspace.apply(queue("kcq-shared", parent="kai-conformance"))
    assert "kai.scheduler/node-pool" not in stored["metadata"].get("labels", {})
"""


def test_a_kind_run_with_a_slice_makes_its_shard_and_runs_a_serial_case_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeKube
) -> None:
    tools_on_path(tmp_path / "bin", monkeypatch)
    monkeypatch.setattr(tools, "TOOLS_BIN", tmp_path / "no-tools")
    # The simulated KAI places on one shared worker and one slice worker (the behaviour probes need one each).
    stack = SimulatedStack(
        fake, sim_nodes=(GpuNode("kai-conformance-worker", 4), GpuNode("kai-conformance-worker4", 4))
    )
    install_stack(install_context(make_settings(tmp_path), stack))
    monkeypatch.setattr(plugin, "SUITES_DIR", tmp_path / "suites")
    monkeypatch.chdir(tmp_path)
    fake_kind = FakeKind.install(tmp_path / "bin", monkeypatch)
    executable(tmp_path / "bin", "docker", "print('27.3.1')\n")
    for name in stack.add_workers(6, prefix="kai-conformance-worker")[3:]:  # kind labels them from its config
        node = fake.get(kinds.NODE, name)
        node["metadata"]["labels"][NODE_POOL_LABEL] = SLICE
        fake.put(node)
    with serve(route_to(fake)) as server:
        fake_kind.update(server=server.url)
        code, outcomes = run_suite(tmp_path, "kind", 12, "--slices", "1", name="slices", suite=SUITE)
    assert {name: outcome for name, (outcome, _) in outcomes.reports.items()} == {
        "test_in_a_slice": "passed", "test_on_the_shared_workers": "passed",
    }, outcomes.reports  # fmt: skip
    assert code == 0
    state = state_of(tmp_path)
    assert sorted(state["gpus"]) == ["kai-conformance-worker", "kai-conformance-worker2", "kai-conformance-worker3"]
    assert sorted(state["slices"][SLICE]) == [
        "kai-conformance-worker4", "kai-conformance-worker5", "kai-conformance-worker6",
    ]  # fmt: skip
    made = state["stack"]["slices"][SLICE]
    assert (made["shard"], made["scheduler"], made["parent_queue"]) == (
        SLICE, "kai-scheduler/kai-scheduler-kc-slice-1", "kai-conformance-kc-slice-1",
    )  # fmt: skip
    shard = next(s for s in fake.objects(kinds.SCHEDULING_SHARD) if s["metadata"]["name"] == SLICE)
    default = next(s for s in fake.objects(kinds.SCHEDULING_SHARD) if s["metadata"]["name"] == "default")
    assert shard["spec"] == {**default["spec"], "partitionLabelValue": SLICE}  # the default's rules, its own nodes


# ------------------------------------------------------------------------------------------------ the pieces
def test_a_slice_copies_the_workers_into_a_node_pool_of_their_own() -> None:
    topology = with_slices(load_topology("pr-gate"), 2)
    assert len(topology.workers) == 9 and len(topology.own_workers) == 3
    shared = topology.layout("kc")
    slices = topology.slice_layouts("kc")
    assert [n.name for n in shared.nodes] == ["kc-worker", "kc-worker2", "kc-worker3"]
    assert {name: [n.name for n in layout.nodes] for name, layout in slices.items()} == {
        "kc-slice-1": ["kc-worker4", "kc-worker5", "kc-worker6"],
        "kc-slice-2": ["kc-worker7", "kc-worker8", "kc-worker9"],
    }
    for name, layout in slices.items():
        assert layout.total == shared.total  # "the whole cluster" means the same in a slice
        assert {n.labels[NODE_POOL_LABEL] for n in layout.nodes} == {name}
        racks = sorted(n.labels["kai-conformance/rack"] for n in layout.nodes)
        assert racks == sorted(n.labels["kai-conformance/rack"] for n in shared.nodes)  # same topology levels


def test_the_kind_config_labels_slice_workers_after_the_shared_ones() -> None:
    from kai_conformance.clusters.kind import kind_config

    nodes = kind_config(with_slices(load_topology("pr-gate"), 1), "img")["nodes"]
    workers = [n for n in nodes if n["role"] == "worker"]
    assert [w["labels"][WORKER_INDEX_LABEL] for w in workers] == [str(i) for i in range(6)]
    assert [w["labels"].get(NODE_POOL_LABEL) for w in workers] == [None, None, None, SLICE, SLICE, SLICE]


@pytest.mark.parametrize("count", [-1, 9, "two", True])
def test_a_slice_count_out_of_range_is_one_message(count: object) -> None:
    with pytest.raises(errors.UsageError, match="a slice count must be a whole number from 0 to 8"):
        with_slices(load_topology("pr-gate"), count)  # type: ignore[arg-type]


def test_a_slice_shard_copies_the_default_shard_and_its_parent_queue_carries_the_pool() -> None:
    default = {"metadata": {"name": "default"},
               "spec": {"partitionLabelValue": "", "placementStrategy": {"gpu": "binpack"},
                        "minRuntime": {"preemptMinRuntime": "30s"}}}  # fmt: skip
    shard, parent = slice_manifests(default, SLICE)
    assert shard["spec"] == {"partitionLabelValue": SLICE, "placementStrategy": {"gpu": "binpack"},
                             "minRuntime": {"preemptMinRuntime": "30s"}}  # fmt: skip
    assert parent["metadata"] == {"name": "kai-conformance-kc-slice-1", "labels": {NODE_POOL_LABEL: SLICE}}
    assert "parentQueue" not in parent["spec"]


def test_a_case_in_a_slice_labels_its_queues_and_workloads_and_nothing_else() -> None:
    leaf = into_node_pool(queue("kcq-a", parent=PARENT_QUEUE), SLICE)
    assert leaf["metadata"]["labels"] == {NODE_POOL_LABEL: SLICE}
    assert leaf["spec"]["parentQueue"] == parent_queue_name(SLICE)
    child = into_node_pool(queue("kcq-b", parent="kcq-a"), SLICE)  # a case's own hierarchy keeps its parent
    assert child["spec"]["parentQueue"] == "kcq-a"
    trainjob = {"apiVersion": kinds.TRAIN_JOB.api_version, "kind": "TrainJob", "metadata": {"name": "t"}}
    assert into_node_pool(trainjob, SLICE)["metadata"]["labels"] == {NODE_POOL_LABEL: SLICE}
    runtime = {"apiVersion": kinds.TRAINING_RUNTIME.api_version, "kind": "TrainingRuntime", "metadata": {"name": "r"}}
    assert into_node_pool(runtime, SLICE) == runtime
    assert into_node_pool(trainjob, None) is trainjob


def test_a_serial_case_takes_a_free_slice_before_the_shared_workers(tmp_path: Path) -> None:
    patient = TimeoutPolicy(scale=1.0)
    gate = CaseGate(tmp_path, patient, ("kc-slice-1",))
    ordinary_started = threading.Event()
    with gate.hold(exclusive=True, what="first", sliceable=True) as first:
        assert first.node_pool == "kc-slice-1"
        # the slice is taken: the next serial case takes the shared workers, alone
        with gate.hold(exclusive=True, what="second", sliceable=True) as second:
            assert second.node_pool is None
        # an ordinary case runs beside the serial case in the slice
        with gate.hold(exclusive=False, what="ordinary") as ordinary:
            ordinary_started.set()
            assert ordinary.node_pool is None and ordinary.waited == 0.0
    assert ordinary_started.is_set()


def test_a_case_that_may_not_use_a_slice_takes_the_shared_workers(tmp_path: Path) -> None:
    gate = CaseGate(tmp_path, TimeoutPolicy(scale=1.0), ("kc-slice-1",))
    with gate.hold(exclusive=True, what="default scheduler", sliceable=False) as seat:
        assert seat.node_pool is None


def test_the_simulated_kai_keeps_each_node_pool_to_its_nodes_and_queues(fake: FakeKube) -> None:
    from kai_conformance.clusters.install.behaviour import probe_objects
    from kai_conformance.clusters.layout import GpuLayout
    from tests.fakes.controllers import SimulatedControllers
    from tests.fakes.installation import worker_node

    shared, sliced = worker_node("w-shared", 0, capacity=4), worker_node("w-slice", 1, capacity=4)
    sliced["metadata"]["labels"][NODE_POOL_LABEL] = SLICE
    for node in (shared, sliced):
        fake.put(node)
    controllers = SimulatedControllers(fake, GpuLayout((GpuNode("w-shared", 4), GpuNode("w-slice", 4))))
    controllers.install()
    fake.put(queue(PARENT_QUEUE))
    fake.put(into_node_pool(queue(parent_queue_name(SLICE)), SLICE))
    for pool, suffix in ((SLICE, "a"), (None, "b")):
        for obj in probe_objects(f"ns-{suffix}", f"q-{suffix}", "img", "run", pool,
                                 parent_queue_name(SLICE) if pool else PARENT_QUEUE):  # fmt: skip
            fake.create(obj)
    nodes: dict[str, str] = {}
    for _ in range(40):  # the simulated controllers act on API calls
        nodes = {p["metadata"]["namespace"]: p["spec"].get("nodeName") for p in fake.list(kinds.POD)}
        if len(nodes) == 2 and all(nodes.values()):
            break
    assert nodes == {"ns-a": "w-slice", "ns-b": "w-shared"}


def test_the_slices_probes_run_side_by_side(fake: FakeKube, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each probe waits at a barrier for the other: run one after the other, the first would wait alone and fail."""
    from kai_conformance.clusters import slices

    fake.put({"apiVersion": kinds.SCHEDULING_SHARD.api_version, "kind": "SchedulingShard",
              "metadata": {"name": "default"}, "spec": {"partitionLabelValue": ""}})  # fmt: skip
    layouts = with_slices(load_topology("pr-gate"), 2).slice_layouts("kc")
    both_probing = threading.Barrier(len(layouts), timeout=5)

    def probe(kube: object, run_id: str, image: str, timeouts: object, *, node_pool: str, parent: str) -> dict:
        both_probing.wait()
        node = layouts[node_pool].nodes[0].name
        return {"node": node, "seconds": {"evicted": 1.0}}

    monkeypatch.setattr(slices, "prove_scheduling", probe)
    monkeypatch.setattr(slices, "wait_deployments", lambda *args: None)
    record = slices.install_slices(lambda: fake, "run", layouts, "img", TimeoutPolicy(scale=1.0))
    assert sorted(record) == ["kc-slice-1", "kc-slice-2"]
    assert record["kc-slice-2"]["nodes"] == ["kc-worker7", "kc-worker8", "kc-worker9"]


def test_the_areas_that_use_fake_nodes_never_take_a_slice() -> None:
    """A slice holds only its kind workers; the fake nodes of a scale or chaos run are the shared node pool's. A burst
    seated in a slice judged 12 GPUs instead of 2,412 on real kind (300 fake nodes): each such case is
    ``shared_workers``, so the seat it takes is the shared workers' (``sliceable`` false in fixtures/plugin/scheduling)."""
    from tests.suite_cases import suite_cases

    fake_node_cases = [c for c in suite_cases() if c.marks & {"scale", "chaos"}]
    assert {"scale", "chaos"} <= set().union(*(c.marks for c in fake_node_cases))
    sliceable = [c.test for c in fake_node_cases if "shared_workers" not in c.marks]
    assert not sliceable, f"these scale/chaos cases could be seated in a slice, away from the fake nodes: {sliceable}"
